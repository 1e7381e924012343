// The grammar of device identifiers: how a GPU or MIG instance is named in a discovery answer,
// a coordination record, a health record, CUDA_VISIBLE_DEVICES and the command line.
//
// One place for it, below everything that reads identifiers (the discovery sources, the
// coordination and health files, the driver's parser of script output), so that they all agree
// on what is a GPU and when two spellings are one GPU.
//
// The forms, as CUDA_VISIBLE_DEVICES accepts them:
// - a decimal index, at most 9 digits ("0", "12"; "007" is "7");
// - a GPU UUID, `GPU-` and hex digits with dashes (nvmlDeviceGetUUID: "GPU-6a2ce2c5-…"), or a
//   prefix of one, which CUDA matches;
// - a MIG instance's UUID, `MIG-` and hex digits with dashes (R470 and later drivers), or the
//   older `MIG-GPU-<gpu uuid>/<gpu instance id>/<compute instance id>`.
#pragma once

#include <string>
#include <string_view>

namespace flink::device {

/// Whether `text` (already trimmed) is a device identifier of one of the forms above.
bool isDeviceIdentifier(std::string_view text) noexcept;

/// Whether `identifier` names a device by UUID (`GPU-…`, `MIG-…`) rather than by index. Says
/// nothing of whether the rest is well formed (see isDeviceIdentifier).
constexpr bool isUuid(std::string_view identifier) noexcept {
  return identifier.starts_with("GPU-") || identifier.starts_with("MIG-");
}

/// Whether `identifier` names a MIG instance (`MIG-…`, either form).
constexpr bool isMigUuid(std::string_view identifier) noexcept {
  return identifier.starts_with("MIG-");
}

/// The canonical form of a device identifier: a decimal index without leading zeros ("007" →
/// "7", "00" → "0"); a UUID with its hex digits in lower case, as NVML writes them. Two
/// spellings of one device must be one GPU everywhere: in a result, and in the coordination file.
std::string canonicalDeviceIdentifier(std::string_view identifier);

/// Whether `identifier` is already in its canonical form (no copy needed).
bool isCanonicalDeviceIdentifier(std::string_view identifier) noexcept;

}  // namespace flink::device
