// One GPU a discovery found: its index, as the discovery script printed it.
//
// Mirrors org.apache.flink.externalresource.gpu.GPUInfo. Instances are made only by GPUDriver.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flink/externalresource/ExternalResourceInfo.h"

namespace flink::externalresource::gpu {

class GPUInfo final : public ExternalResourceInfo {
 public:
  /// The property that always holds the device identifier.
  static constexpr std::string_view PROPERTY_KEY_INDEX = "index";

  /// "index" → the identifier (a decimal index such as "0", or a "GPU-…"/"MIG-…" UUID);
  /// any other key → std::nullopt.
  std::optional<std::string> getProperty(std::string_view key) const override;

  /// {"index"}.
  std::vector<std::string> getKeys() const override;

  /// "GPU Device(<index>)".
  std::string toString() const override;

  /// The device identifier (the "index" property).
  const std::string& index() const noexcept { return index_; }

  /// Equal when the indices are equal, as Flink's GPUInfo.equals.
  friend bool operator==(const GPUInfo& a, const GPUInfo& b) noexcept {
    return a.index_ == b.index_;
  }

 private:
  friend class GPUDriver;
  explicit GPUInfo(std::string index) : index_(std::move(index)) {}

  std::string index_;
};

}  // namespace flink::externalresource::gpu

/// Hash by index, consistent with operator==.
template <>
struct std::hash<flink::externalresource::gpu::GPUInfo> {
  std::size_t operator()(const flink::externalresource::gpu::GPUInfo& info) const noexcept {
    return std::hash<std::string>{}(info.index());
  }
};
