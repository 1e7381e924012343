// Reads what a discovery script printed on stdout: the protocol's only parser.
//
// The protocol (Flink's): the first line holds comma-separated GPU identifiers; parts are trimmed
// and blank parts dropped; further lines are ignored. Unlike Flink, which takes any text as an
// index, every part must be a device identifier that CUDA_VISIBLE_DEVICES accepts, so that
// "No devices were found" or a warning never turns into GPUs.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace flink::externalresource::gpu {

struct DiscoveryOutput {
  /// Unique identifiers, in the order printed. Decimal indices are in canonical form ("007" → "7").
  std::vector<std::string> identifiers;
  /// Identifiers printed more than once, once each, in order of their second appearance.
  std::vector<std::string> duplicates;
  /// Non-blank lines after the first, which the protocol ignores.
  std::size_t ignoredLines = 0;
};

/// Whether `part` (already trimmed) is a device identifier: a decimal index (at most 9 digits),
/// `GPU-<hex and dashes>`, `MIG-<hex and dashes>`, or the older `MIG-GPU-<uuid>/<gi>/<ci>`.
bool isDeviceIdentifier(std::string_view part) noexcept;

/// The canonical form of a device identifier: a decimal index without leading zeros ("007" →
/// "7", "00" → "0"); UUIDs unchanged. Two spellings of one device must be one GPU everywhere:
/// in a result, and in the coordination file.
std::string canonicalDeviceIdentifier(std::string_view identifier);

/// Parses a script's stdout. Empty or blank output gives no identifiers.
/// @throws FlinkException when a part is not a device identifier; its message quotes the first
///         line and the part, and reads on from "<script> printed ".
DiscoveryOutput parseDiscoveryOutput(std::string_view stdoutText);

}  // namespace flink::externalresource::gpu
