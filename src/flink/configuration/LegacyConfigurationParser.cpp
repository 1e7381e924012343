// The legacy flink-conf.yaml reader: Flink's line-by-line "key: value" format, which looks like
// YAML but is not read as YAML (a '#' inside a value starts a comment, "key:value" is no pair).
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "flink/configuration/ConfigurationFileParsers.h"
#include "util/Strings.h"

namespace flink {
namespace {

/// Java's String.trim: drops every character up to U+0020 at either end, which is more than
/// strings::trim does (control characters too).
std::string_view javaTrim(std::string_view text) noexcept {
  const auto blank = [](char c) { return static_cast<unsigned char>(c) <= ' '; };
  while (!text.empty() && blank(text.front())) text.remove_prefix(1);
  while (!text.empty() && blank(text.back())) text.remove_suffix(1);
  return text;
}

/// Takes the next line off `text`, ending at "\n", "\r\n" or "\r" as Java's readLine does.
std::string_view nextLine(std::string_view& text) noexcept {
  const std::size_t end = text.find_first_of("\r\n");
  if (end == std::string_view::npos) {
    const std::string_view line = text;
    text = {};
    return line;
  }
  const std::string_view line = text.substr(0, end);
  const bool crlf = text[end] == '\r' && end + 1 < text.size() && text[end + 1] == '\n';
  text.remove_prefix(end + (crlf ? 2 : 1));
  return line;
}

}  // namespace

Configuration parseLegacyConfiguration(std::string_view text, const std::string& fileName,
                                       std::vector<std::string>& warnings) {
  if (text.starts_with(strings::kUtf8ByteOrderMark))
    text.remove_prefix(strings::kUtf8ByteOrderMark.size());

  Configuration configuration;
  std::map<std::string, std::size_t, std::less<>> lineOfKey;
  std::size_t lineNumber = 0;
  while (!text.empty()) {
    std::string_view line = nextLine(text);
    ++lineNumber;
    const auto skip = [&](const std::string& why) {
      warnings.push_back(fileName + ":" + std::to_string(lineNumber) + ": " + why +
                         ", line skipped");
    };

    line = javaTrim(line.substr(0, line.find('#')));
    if (line.empty()) continue;

    const std::size_t separator = line.find(": ");
    if (separator == std::string_view::npos) {
      // "key:" (after the comment is cut) is a key whose value is missing; say so.
      if (line.back() == ':' && !javaTrim(line.substr(0, line.size() - 1)).empty()) {
        skip("key '" + strings::quoteForMessage(javaTrim(line.substr(0, line.size() - 1)), 100) +
             "' has no value");
      } else {
        skip("not a key-value pair (no ': ' between a key and a value)");
      }
      continue;
    }
    const std::string_view key = javaTrim(line.substr(0, separator));
    const std::string_view value = javaTrim(line.substr(separator + 2));
    if (key.empty()) {
      skip("empty key");
      continue;
    }
    if (value.empty()) {
      skip("key '" + strings::quoteForMessage(key, 100) + "' has no value");
      continue;
    }

    if (const auto earlier = lineOfKey.find(key); earlier != lineOfKey.end()) {
      warnings.push_back(fileName + ":" + std::to_string(lineNumber) + ": key '" +
                         strings::quoteForMessage(key, 100) + "' repeats line " +
                         std::to_string(earlier->second) + "; the later value is used");
      earlier->second = lineNumber;
    } else {
      lineOfKey.emplace(std::string(key), lineNumber);
    }
    configuration.setString(std::string(key), std::string(value));
  }
  return configuration;
}

}  // namespace flink
