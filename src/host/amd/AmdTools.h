// The AMD vendor tools' answers, for a host without the KFD topology in sysfs: `amd-smi list
// --json` and `rocm-smi --showuniqueid --showbus --json`. Pure parsers of the tools' JSON.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "host/amd/KfdTopology.h"

namespace flink::amd {

/// One GPU a tool lists.
struct ToolGpu {
  /// As the tool prints it: a partition's number is the function.
  PciAddress busId;
  /// ROCr's "GPU-<16 lowercase hex digits>", from rocm-smi's Unique ID; nullopt from amd-smi
  /// (its `uuid` is another form) and for rocm-smi's "N/A" or 0.
  std::optional<std::string> uuid;
};

/// `amd-smi list --json`: a JSON array of objects, each with "bdf" ("0000:63:00.0"). The GPUs in
/// the tool's order.
/// @throws discovery::DiscoveryError naming amd-smi and quoting `output` when it is not that.
std::vector<ToolGpu> parseAmdSmiList(std::string_view output);

/// `rocm-smi --showuniqueid --showbus --json`: an object keyed "card<N>" (in any order), each with
/// "PCI Bus" and "Unique ID" (hex with or without 0x, no leading zeros, or "N/A"); other keys
/// ("system") are ignored. The GPUs in card number order.
/// @throws discovery::DiscoveryError naming rocm-smi and quoting `output` when it is not that.
std::vector<ToolGpu> parseRocmSmiJson(std::string_view output);

/// "GPU-" and `uniqueId` as 16 lowercase hex digits: ROCr's UUID.
std::string rocrUuid(unsigned long long uniqueId);

}  // namespace flink::amd
