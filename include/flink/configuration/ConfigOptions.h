// Builder for ConfigOption values, in the shape of Flink's ConfigOptions:
//
//   const auto TIMEOUT = ConfigOptions::key("discovery-script.timeout")
//                            .durationType()
//                            .defaultValue(std::chrono::seconds(10))
//                            .withDescription("...");
//
//   const auto RESOURCES = ConfigOptions::key("external-resources")
//                              .stringType()
//                              .asList()
//                              .noDefaultValue();   // ConfigOption<std::vector<std::string>>
#pragma once

#include <chrono>
#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "flink/configuration/ConfigOption.h"

namespace flink {

class ConfigOptions {
 public:
  /// Builds an option whose value is a list of E (Flink's ListConfigOptionBuilder). As text the
  /// list is its flow form "[a, b]" in a standard-YAML configuration, its elements joined with
  /// ';' in a legacy one (see Configuration::isStandardYaml).
  template <typename E>
  class ListConfigOptionBuilder {
   public:
    explicit ListConfigOptionBuilder(std::string key) : key_(std::move(key)) {}
    ConfigOption<std::vector<E>> defaultValues(std::vector<E> values) const {
      return ConfigOption<std::vector<E>>(key_, std::move(values));
    }
    ConfigOption<std::vector<E>> defaultValues(std::initializer_list<E> values) const {
      return defaultValues(std::vector<E>(values));
    }
    ConfigOption<std::vector<E>> noDefaultValue() const {
      return ConfigOption<std::vector<E>>(key_, std::nullopt);
    }

   private:
    std::string key_;
  };

  template <typename T>
  class TypedConfigOptionBuilder {
   public:
    explicit TypedConfigOptionBuilder(std::string key) : key_(std::move(key)) {}
    ConfigOption<T> defaultValue(T value) const { return ConfigOption<T>(key_, std::move(value)); }
    ConfigOption<T> noDefaultValue() const { return ConfigOption<T>(key_, std::nullopt); }

    /// The option holds a list of T instead (Flink's asList()). Only string lists for now.
    ListConfigOptionBuilder<T> asList() const requires std::same_as<T, std::string> {
      return ListConfigOptionBuilder<T>(key_);
    }

   private:
    std::string key_;
  };

  class OptionBuilder {
   public:
    explicit OptionBuilder(std::string key) : key_(std::move(key)) {}
    TypedConfigOptionBuilder<std::string> stringType() const { return typed<std::string>(); }
    TypedConfigOptionBuilder<std::int32_t> intType() const { return typed<std::int32_t>(); }
    TypedConfigOptionBuilder<std::int64_t> longType() const { return typed<std::int64_t>(); }
    TypedConfigOptionBuilder<bool> booleanType() const { return typed<bool>(); }
    TypedConfigOptionBuilder<double> doubleType() const { return typed<double>(); }
    /// Durations are held in milliseconds; see parseDuration for the accepted text forms.
    TypedConfigOptionBuilder<std::chrono::milliseconds> durationType() const {
      return typed<std::chrono::milliseconds>();
    }

   private:
    template <typename T>
    TypedConfigOptionBuilder<T> typed() const {
      return TypedConfigOptionBuilder<T>(key_);
    }
    std::string key_;
  };

  /// Starts an option for `key`.
  static OptionBuilder key(std::string key) { return OptionBuilder(std::move(key)); }
};

}  // namespace flink
