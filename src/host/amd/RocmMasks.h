// The AMD masks, read as the runtimes read them: ROCR_VISIBLE_DEVICES as ROCr does
// (amd_filter_device.cpp), then HIP_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES as HIP does (ROCclr's
// rocdevice.cpp, Device::init), each over the list the layer below left. Pure functions over the
// units' UUIDs: no environment, no sysfs.
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

/// What ROCr reports as the UUID of a unit without one (KFD unique_id missing or 0), and what
/// HIP therefore compares HIP-layer UUID entries with for such a unit.
inline constexpr const char* kRocrUuidOfNone = "GPU-XX";

/// What a mask leaves of a list of units.
struct MaskReading {
  /// Positions in the list read, in the mask's order.
  std::vector<std::size_t> chosen;
  /// The entry that chose each, as spelled (trimmed for ROCr, original case kept).
  std::vector<std::string> spelled;
  /// Why the mask's list ended before its last entry ("'7' (entry 2) names no usable GPU"), or
  /// why it chose nothing; nullopt when every entry was taken.
  std::optional<std::string> stop;
  /// Entries read, before any stop, in a way that may surprise, each with what the runtime did
  /// ("'0' (entry 3) names the GPU that entry 1 chose, so HIP skips it"). HIP layer only.
  std::vector<std::string> surprises;
};

/// ROCR_VISIBLE_DEVICES over the usable units in KFD order, given each one's "GPU-…" UUID
/// (nullopt: none). Entries are split on commas and trimmed, compared in upper case: an index
/// (strtol base 0: "1", "0x1", "010" is 8) or "GPU-…" of 5 to 20 characters, a full UUID or a
/// prefix naming exactly one unit. The list ends at the first entry naming no unit, several
/// units (the stop says whether they are the partitions of one GPU, which share its UUID, or
/// how many GPUs the prefix matches), or one already named. "" chooses nothing.
MaskReading readRocrVisibleDevices(std::string_view value,
                                   const std::vector<std::optional<std::string>>& uuids);

/// HIP_VISIBLE_DEVICES (or CUDA_VISIBLE_DEVICES) over what ROCr left, as HIP reads it:
/// - Entries are split on commas, untrimmed. One empty entry after a final comma is not read
///   ("0," is "0"); any other empty entry is invalid ("," and "0,,1" end there).
/// - An entry containing "GPU-" (case-sensitive) is looked for as a case-sensitive substring of
///   each unit's ROCr UUID ("GPU-" and 16 lowercase hex digits; kRocrUuidOfNone for a unit
///   without one), in the order of the list; the first unit that contains it is taken, whether
///   or not others match too (a surprise is noted then) and whether or not it was chosen
///   already. So "GPU-5127" and "GPU-" work, a partition's shared UUID always takes the first
///   partition, and "gpu-…" or upper-case hex digits match nothing.
/// - Any other entry is a decimal index without sign, spaces or leading zeros ("0", "12").
/// - The list ends at the first entry that matches no unit, is no such index ("NoDevFiles",
///   "-1", "01", " 1"), or is an index past the list.
/// - An entry naming a unit chosen already is skipped (a surprise is noted) and reading goes on.
MaskReading readHipVisibleDevices(std::string_view value,
                                  const std::vector<std::optional<std::string>>& uuids);

/// The HIP layer's variable in force, as HIP picks it: HIP_VISIBLE_DEVICES when non-empty, else
/// CUDA_VISIBLE_DEVICES when non-empty (empty counts as unset); nullptr for neither.
const char* hipMaskVariable(const std::function<const char*(const char*)>& getenv);

}  // namespace flink::amd
