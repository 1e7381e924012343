// A typed configuration key: its name, its default (or none) and a description.
//
// Mirrors org.apache.flink.configuration.ConfigOption. Options are immutable values, usually
// made once through ConfigOptions::key(...) and kept as constants (see GPUDriverOptions).
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace flink {

template <typename T>
class ConfigOption {
 public:
  ConfigOption(std::string key, std::optional<T> defaultValue, std::string description = {})
      : key_(std::move(key)),
        defaultValue_(std::move(defaultValue)),
        description_(std::move(description)) {}

  /// The configuration key, e.g. "discovery-script.path".
  const std::string& key() const noexcept { return key_; }

  bool hasDefaultValue() const noexcept { return defaultValue_.has_value(); }

  /// The default value, or std::nullopt for an option without one.
  const std::optional<T>& defaultValue() const noexcept { return defaultValue_; }

  const std::string& description() const noexcept { return description_; }

  /// A copy of this option with the given description (Flink's withDescription).
  ConfigOption withDescription(std::string description) const {
    return ConfigOption(key_, defaultValue_, std::move(description));
  }

 private:
  std::string key_;
  std::optional<T> defaultValue_;
  std::string description_;
};

}  // namespace flink
