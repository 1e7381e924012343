// The AMD masks, read as the runtimes read them: ROCR_VISIBLE_DEVICES as ROCr does
// (amd_filter_device.cpp), then HIP_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES as HIP does (ROCclr's
// rocdevice.cpp), each over the list the layer below left. Pure functions over the units' UUIDs:
// no environment, no sysfs.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flink::amd {

inline constexpr const char* kRocrVisibleDevices = "ROCR_VISIBLE_DEVICES";
inline constexpr const char* kHipVisibleDevices = "HIP_VISIBLE_DEVICES";
inline constexpr const char* kCudaVisibleDevices = "CUDA_VISIBLE_DEVICES";

/// What a mask leaves of a list of units.
struct MaskReading {
  /// Positions in the list read, in the mask's order.
  std::vector<std::size_t> chosen;
  /// The entry that chose each, as spelled (trimmed for ROCr, original case kept).
  std::vector<std::string> spelled;
  /// Why the mask's list ended before its last entry ("'7' (entry 2) names no usable GPU"), or
  /// why it chose nothing; nullopt when every entry was taken.
  std::optional<std::string> stop;
};

/// ROCR_VISIBLE_DEVICES over the usable units in KFD order, given each one's "GPU-…" UUID
/// (nullopt: none). Entries are split on commas and trimmed, compared in upper case: an index
/// (strtol base 0: "1", "0x1", "010" is 8) or "GPU-…" of 5 to 20 characters, a full UUID or a
/// prefix naming exactly one unit. The list ends at the first entry naming no unit, several
/// units, or one already named. "" chooses nothing.
MaskReading readRocrVisibleDevices(std::string_view value,
                                   const std::vector<std::optional<std::string>>& uuids);

/// HIP_VISIBLE_DEVICES (or CUDA_VISIBLE_DEVICES) over what ROCr left: entries are decimal indices
/// without sign or leading zeros ("0", "12"), or a full "GPU-…" UUID (any case) naming exactly
/// one unit. The list ends at the first other entry ("NoDevFiles", "-1", "01", " 1"), an index
/// past the list, or a unit already named.
MaskReading readHipVisibleDevices(std::string_view value,
                                  const std::vector<std::optional<std::string>>& uuids);

/// The HIP layer's variable in force, as HIP picks it: HIP_VISIBLE_DEVICES when non-empty, else
/// CUDA_VISIBLE_DEVICES when non-empty (empty counts as unset); nullptr for neither.
const char* hipMaskVariable(const std::function<const char*(const char*)>& getenv);

}  // namespace flink::amd
