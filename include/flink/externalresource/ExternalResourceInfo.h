// What a driver knows about one external resource (one GPU, say): named text properties.
//
// Mirrors org.apache.flink.api.common.externalresource.ExternalResourceInfo.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flink {

class ExternalResourceInfo {
 public:
  virtual ~ExternalResourceInfo() = default;

  /// The value of property `key`, or std::nullopt if this resource has no such property.
  virtual std::optional<std::string> getProperty(std::string_view key) const = 0;

  /// The names of every property this resource has.
  virtual std::vector<std::string> getKeys() const = 0;

  /// A short human-readable form, as Java's toString (e.g. "GPU Device(0)").
  virtual std::string toString() const = 0;
};

}  // namespace flink
