// Key/value configuration with typed access through ConfigOption.
//
// Mirrors org.apache.flink.configuration.Configuration: values are kept as text, as they come
// from configuration files and command lines, and converted when read through a typed option.
// A Configuration is a value type (copyable). Concurrent reads of one instance are safe; a write
// concurrent with any other access is not.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "flink/configuration/ConfigOption.h"
#include "flink/util/Exceptions.h"

namespace flink {

namespace detail {
/// Converts configuration text to T (defined for std::string, int32, int64, bool, double,
/// std::chrono::milliseconds and std::vector<std::string>).
///
/// A list is read as Flink reads list options (StructuredOptionsSplitter): split on ';';
/// unquoted elements are trimmed; an element in single or double quotes is taken verbatim, a
/// doubled quote inside standing for one ("'a;b';'it''s'" is {"a;b", "it's"}); an empty text is
/// the empty list; a ';' that follows another ';' (whitespace aside) adds an empty element, a
/// lone ';' at either end adds nothing ("a;;b" is {"a", "", "b"}, ";a;" is {"a"}).
/// @throws IllegalConfigurationException naming key and value (for a list: an unclosed quote, or
///         something other than ';' after a closing quote).
template <typename T>
T parseConfigValue(const std::string& key, const std::string& text);
/// Converts a value back to the text form parseConfigValue reads.
///
/// A list becomes its elements joined with ';'. An element holding ';' or a quote (' or ") is
/// put in single quotes with its single quotes doubled, as Flink writes it; so is an empty element
/// or one with whitespace at either end (Flink leaves those bare and loses them on reading), so
/// that every list reads back exactly.
template <typename T>
std::string formatConfigValue(const T& value);

// The types above, each defined in Configuration.cpp; declared here so that every use names them.
template <>
std::string parseConfigValue<std::string>(const std::string& key, const std::string& text);
template <>
std::int32_t parseConfigValue<std::int32_t>(const std::string& key, const std::string& text);
template <>
std::int64_t parseConfigValue<std::int64_t>(const std::string& key, const std::string& text);
template <>
bool parseConfigValue<bool>(const std::string& key, const std::string& text);
template <>
double parseConfigValue<double>(const std::string& key, const std::string& text);
template <>
std::chrono::milliseconds parseConfigValue<std::chrono::milliseconds>(const std::string& key,
                                                                      const std::string& text);
template <>
std::vector<std::string> parseConfigValue<std::vector<std::string>>(const std::string& key,
                                                                    const std::string& text);
template <>
std::string formatConfigValue<std::string>(const std::string& value);
template <>
std::string formatConfigValue<std::int32_t>(const std::int32_t& value);
template <>
std::string formatConfigValue<std::int64_t>(const std::int64_t& value);
template <>
std::string formatConfigValue<bool>(const bool& value);
template <>
std::string formatConfigValue<double>(const double& value);
template <>
std::string formatConfigValue<std::chrono::milliseconds>(const std::chrono::milliseconds& value);
template <>
std::string formatConfigValue<std::vector<std::string>>(const std::vector<std::string>& value);

/// Reads a list as Flink's standard-YAML mode does (ConfigurationUtils.convertToList): the text
/// as YAML when it is a YAML sequence ("[gpu, fpga]", "['a;b', 0x10]" is {"a;b", "16"}: each
/// element as Flink turns it into a string), else the ';' split of parseConfigValue.
/// @throws IllegalConfigurationException as parseConfigValue does for the ';' form.
std::vector<std::string> parseStandardYamlList(const std::string& key, const std::string& text);

/// Writes a list as Flink's standard-YAML mode does: its flow form "[a, b]", an element quoted
/// where YAML needs it ("['*', '123', 'a, b']"); parseStandardYamlList reads it back exactly.
std::string formatStandardYamlList(const std::vector<std::string>& value);
}  // namespace detail

class Configuration {
 public:
  Configuration() = default;

  /// The option's value if set, else its default.
  /// @throws IllegalConfigurationException if the value cannot be converted to T, or if the
  ///         option is not set and has no default.
  template <typename T>
  T get(const ConfigOption<T>& option) const {
    if (auto value = getOptional(option)) return std::move(*value);
    if (option.hasDefaultValue()) return *option.defaultValue();
    throw IllegalConfigurationException("Configuration key '" + option.key() +
                                        "' is not set and has no default value.");
  }

  /// The option's value if it is set (defaults are not applied), else std::nullopt.
  /// @throws IllegalConfigurationException if the value cannot be converted to T.
  template <typename T>
  std::optional<T> getOptional(const ConfigOption<T>& option) const {
    auto text = getString(option.key());
    if (!text) return std::nullopt;
    if constexpr (std::is_same_v<T, std::vector<std::string>>) {
      if (standardYaml_) return detail::parseStandardYamlList(option.key(), *text);
    }
    return detail::parseConfigValue<T>(option.key(), *text);
  }

  template <typename T>
  Configuration& set(const ConfigOption<T>& option, const T& value) {
    if constexpr (std::is_same_v<T, std::vector<std::string>>) {
      if (standardYaml_) {
        entries_[option.key()] = detail::formatStandardYamlList(value);
        return *this;
      }
    }
    entries_[option.key()] = detail::formatConfigValue<T>(value);
    return *this;
  }

  /// Whether list options follow Flink's standard-YAML rules (the default, as in Flink since
  /// 1.19: a configuration from config.yaml, or from no file) or the legacy ones (one from a
  /// flink-conf.yaml): standard YAML reads a list option's text as YAML first ("[gpu, fpga]" is
  /// two names) and writes lists as "[a, b]"; legacy only splits on ';' ("[gpu, fpga]" is one
  /// name) and writes "a;b". Flink keeps this per process (GlobalConfiguration.isStandardYaml).
  bool isStandardYaml() const noexcept { return standardYaml_; }
  Configuration& setStandardYaml(bool standardYaml) noexcept {
    standardYaml_ = standardYaml;
    return *this;
  }

  /// Overload so that string literals can be set on string options.
  Configuration& set(const ConfigOption<std::string>& option, const char* value) {
    return set(option, std::string(value));
  }

  /// Whether the option's key is set (defaults do not count).
  template <typename T>
  bool contains(const ConfigOption<T>& option) const {
    return containsKey(option.key());
  }

  bool containsKey(std::string_view key) const;
  std::optional<std::string> getString(std::string_view key) const;
  Configuration& setString(std::string key, std::string value);
  /// Removes the key; returns whether it was set.
  bool removeKey(std::string_view key);

  /// All keys, sorted.
  std::vector<std::string> keySet() const;
  const std::map<std::string, std::string, std::less<>>& toMap() const noexcept { return entries_; }

  /// The entries whose key starts with `prefix`, with the prefix removed (Flink's
  /// DelegatingConfiguration view, as used for external-resource.<name>.param.), with the same
  /// reading rules.
  Configuration withPrefixRemoved(std::string_view prefix) const;

  /// Equal when they hold the same keys with the same texts (the reading rules aside).
  friend bool operator==(const Configuration& a, const Configuration& b) {
    return a.entries_ == b.entries_;
  }

 private:
  std::map<std::string, std::string, std::less<>> entries_;
  bool standardYaml_ = true;
};

}  // namespace flink
