#include "flink/externalresource/gpu/GPUInfo.h"

namespace flink::externalresource::gpu {

std::optional<std::string> GPUInfo::getProperty(std::string_view key) const {
  if (key == PROPERTY_KEY_INDEX) return index_;
  return std::nullopt;
}

std::vector<std::string> GPUInfo::getKeys() const { return {std::string(PROPERTY_KEY_INDEX)}; }

std::string GPUInfo::toString() const { return "GPU Device(" + index_ + ")"; }

}  // namespace flink::externalresource::gpu
