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
//
// And for the other vendors:
// - Level Zero's `<card>.<tile>` ("1.0": tile 0 of card 1), as ZE_AFFINITY_MASK takes it under
//   the COMPOSITE hierarchy;
// - an AMD or Intel unit's record name in the coordination file: the vendor and the PCI bus id in
//   NVML's form, with the tile of an Intel tile (`amd:00000000:05:00.3`,
//   `intel:00000000:5A:00.0/1`). A bus id is the same in every container, where indices are not.
#pragma once

#include <string>
#include <string_view>

namespace flink::device {

/// The prefixes of AMD's and Intel's record names.
inline constexpr std::string_view kAmdRecordPrefix = "amd:";
inline constexpr std::string_view kIntelRecordPrefix = "intel:";

/// Whether `text` (already trimmed) is a device identifier of one of the forms above.
bool isDeviceIdentifier(std::string_view text) noexcept;

/// Whether `text` is an AMD or Intel unit's record name (`amd:<bus id>`, `intel:<bus id>[/<tile>]`;
/// the bus id's domain of 8 or 4 hex digits, its function 0 to 7).
bool isVendorUnitName(std::string_view text) noexcept;

/// "amd" or "intel" for a record name of theirs, else "nvidia" (an index, a UUID): the vendor of
/// the unit a coordination record names.
constexpr std::string_view vendorOfUnit(std::string_view identifier) noexcept {
  if (identifier.starts_with(kAmdRecordPrefix)) return "amd";
  if (identifier.starts_with(kIntelRecordPrefix)) return "intel";
  return "nvidia";
}

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
/// "7", "00" → "0"), each index of `<card>.<tile>` too; a UUID with its hex digits in lower case,
/// as NVML writes them; a record name's bus id in upper case with an 8-digit domain, as NVML
/// writes bus ids (`amd:0000:e3:00.0` is `amd:00000000:E3:00.0`). Two
/// spellings of one device must be one GPU everywhere: in a result, and in the coordination file.
std::string canonicalDeviceIdentifier(std::string_view identifier);

/// Whether `identifier` is already in its canonical form (no copy needed).
bool isCanonicalDeviceIdentifier(std::string_view identifier) noexcept;

}  // namespace flink::device
