#include "flink/externalresource/gpu/GPUInfo.h"

namespace flink::externalresource::gpu {

GPUInfo::GPUInfo(std::string index, Properties properties) {
  properties_.reserve(properties.size() + 1);
  properties_.emplace_back(PROPERTY_KEY_INDEX, std::move(index));
  for (auto& property : properties) properties_.push_back(std::move(property));
}

std::optional<std::string> GPUInfo::getProperty(std::string_view key) const {
  for (const auto& [name, value] : properties_) {
    if (name == key) return value;
  }
  return std::nullopt;
}

std::vector<std::string> GPUInfo::getKeys() const {
  std::vector<std::string> keys;
  keys.reserve(properties_.size());
  for (const auto& property : properties_) keys.push_back(property.first);
  return keys;
}

std::string GPUInfo::toString() const { return "GPU Device(" + index() + ")"; }

}  // namespace flink::externalresource::gpu
