#include "flink/configuration/Configuration.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <limits>
#include <stdexcept>

#include "flink/configuration/YamlValues.h"
#include "flink/util/TimeUtils.h"
#include "util/Strings.h"

namespace flink {

namespace {

[[noreturn]] void invalidValue(const std::string& key, const std::string& text,
                               std::string_view expected) {
  throw IllegalConfigurationException("Invalid value '" + strings::quoteForMessage(text) +
                                      "' for configuration key '" + key + "': expected " +
                                      std::string(expected) + ".");
}

template <typename Int>
Int parseInteger(const std::string& key, const std::string& text, std::string_view expected) {
  const std::string_view trimmed = strings::trim(text);
  std::string_view digits = trimmed;
  if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
  Int value{};
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) {
    invalidValue(key, text, expected);
  }
  return value;
}

}  // namespace

namespace detail {

template <>
std::string parseConfigValue<std::string>(const std::string&, const std::string& text) {
  return text;
}

template <>
std::int32_t parseConfigValue<std::int32_t>(const std::string& key, const std::string& text) {
  return parseInteger<std::int32_t>(key, text, "a 32-bit integer");
}

template <>
std::int64_t parseConfigValue<std::int64_t>(const std::string& key, const std::string& text) {
  return parseInteger<std::int64_t>(key, text, "a 64-bit integer");
}

template <>
bool parseConfigValue<bool>(const std::string& key, const std::string& text) {
  const std::string lower = strings::toLower(strings::trim(text));
  if (lower == "true") return true;
  if (lower == "false") return false;
  invalidValue(key, text, "true or false");
}

template <>
double parseConfigValue<double>(const std::string& key, const std::string& text) {
  const std::string trimmed(strings::trim(text));
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(trimmed.c_str(), &end);
  if (trimmed.empty() || end != trimmed.c_str() + trimmed.size() || errno == ERANGE) {
    invalidValue(key, text, "a number");
  }
  return value;
}

template <>
std::chrono::milliseconds parseConfigValue<std::chrono::milliseconds>(const std::string& key,
                                                                      const std::string& text) {
  try {
    return parseDuration(text);
  } catch (const std::invalid_argument& e) {
    throw IllegalConfigurationException("Invalid value for configuration key '" + key +
                                        "': " + e.what());
  }
}

template <>
std::vector<std::string> parseConfigValue<std::vector<std::string>>(const std::string& key,
                                                                    const std::string& text) {
  const auto malformed = [&](const std::string& why) {
    return IllegalConfigurationException("Invalid value '" + strings::quoteForMessage(text) +
                                         "' for configuration key '" + key +
                                         "': expected a list separated by ';', but " + why + ".");
  };
  std::vector<std::string> elements;
  bool afterDelimiter = false;  // the last thing seen (whitespace aside) was a ';'
  bool afterQuoted = false;     // ... was a closing quote
  std::size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == ';') {
      // Only a ';' that follows another stands for an empty element, as in Flink.
      if (afterDelimiter) elements.emplace_back();
      afterDelimiter = true;
      afterQuoted = false;
      ++i;
    } else if (strings::isSpace(c)) {
      ++i;
    } else if (afterQuoted) {
      throw malformed("position " + std::to_string(i) + " follows a closing quote");
    } else if (c == '\'' || c == '"') {
      std::string element;
      std::size_t j = i + 1;
      for (;; ++j) {
        if (j == text.size()) {
          throw malformed("the quote at position " + std::to_string(i) + " is not closed");
        }
        if (text[j] != c) {
          element += text[j];
        } else if (j + 1 < text.size() && text[j + 1] == c) {
          element += c;  // a doubled quote is one quote character
          ++j;
        } else {
          break;
        }
      }
      elements.push_back(std::move(element));
      afterDelimiter = false;
      afterQuoted = true;
      i = j + 1;
    } else {
      const std::size_t end = std::min(text.find(';', i), text.size());
      elements.emplace_back(strings::trim(std::string_view(text).substr(i, end - i)));
      afterDelimiter = false;
      i = end;
    }
  }
  return elements;
}

template <>
std::string formatConfigValue<std::string>(const std::string& value) {
  return value;
}
template <>
std::string formatConfigValue<std::int32_t>(const std::int32_t& value) {
  return std::to_string(value);
}
template <>
std::string formatConfigValue<std::int64_t>(const std::int64_t& value) {
  return std::to_string(value);
}
template <>
std::string formatConfigValue<bool>(const bool& value) {
  return value ? "true" : "false";
}
template <>
std::string formatConfigValue<double>(const double& value) {
  char buffer[64];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, ec == std::errc() ? end : buffer);
}
template <>
std::string formatConfigValue<std::chrono::milliseconds>(const std::chrono::milliseconds& value) {
  return formatDuration(value);
}
template <>
std::string formatConfigValue<std::vector<std::string>>(const std::vector<std::string>& value) {
  std::string text;
  for (std::size_t i = 0; i < value.size(); ++i) {
    const std::string& element = value[i];
    if (i > 0) text += ';';
    const bool quote = element.empty() || strings::isSpace(element.front()) ||
                       strings::isSpace(element.back()) ||
                       element.find_first_of(";'\"") != std::string::npos;
    if (!quote) {
      text += element;
      continue;
    }
    text += '\'';
    for (const char c : element) {
      if (c == '\'') text += '\'';
      text += c;
    }
    text += '\'';
  }
  return text;
}

}  // namespace detail

bool Configuration::containsKey(std::string_view key) const {
  return entries_.find(key) != entries_.end();
}

std::optional<std::string> Configuration::getString(std::string_view key) const {
  const auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

Configuration& Configuration::setString(std::string key, std::string value) {
  entries_.insert_or_assign(std::move(key), std::move(value));
  return *this;
}

bool Configuration::removeKey(std::string_view key) {
  const auto it = entries_.find(key);
  if (it == entries_.end()) return false;
  entries_.erase(it);
  return true;
}

std::vector<std::string> Configuration::keySet() const {
  std::vector<std::string> keys;
  keys.reserve(entries_.size());
  for (const auto& [key, value] : entries_) keys.push_back(key);
  return keys;
}

namespace detail {

std::vector<std::string> parseStandardYamlList(const std::string& key, const std::string& text) {
  std::optional<std::vector<std::string>> list;
  try {
    list = yamlvalues::readYamlList(text);
  } catch (const yamlvalues::IntegerTooLong& e) {
    throw IllegalConfigurationException("Invalid value for configuration key '" + key +
                                        "': an element of the list is " + e.what() + ".");
  } catch (const yamlvalues::ListTooLarge& e) {
    throw IllegalConfigurationException("Invalid value for configuration key '" + key +
                                        "': read as a YAML list, " + e.what() + ".");
  }
  if (list) return std::move(*list);
  return parseConfigValue<std::vector<std::string>>(key, text);  // Flink's fallback, too
}

std::string formatStandardYamlList(const std::vector<std::string>& value) {
  return yamlvalues::flowSequenceOfStrings(value);
}

}  // namespace detail

Configuration Configuration::withPrefixRemoved(std::string_view prefix) const {
  Configuration view;
  view.standardYaml_ = standardYaml_;
  for (auto it = entries_.lower_bound(prefix);
       it != entries_.end() && std::string_view(it->first).substr(0, prefix.size()) == prefix;
       ++it) {
    if (it->first.size() > prefix.size())
      view.entries_.emplace(it->first.substr(prefix.size()), it->second);
  }
  return view;
}

}  // namespace flink
