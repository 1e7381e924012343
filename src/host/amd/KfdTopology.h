// The KFD topology in sysfs (<sysfs>/class/kfd/kfd/topology/nodes/<N>/properties), read as ROCm's
// libhsakmt reads it: what each node is (a CPU, a whole GPU, a compute partition of one), where it
// sits on PCI, and what it holds. The kernel's ABI: Documentation/gpu/amdgpu (amdkfd). Only sysfs
// is read here; which node this process may open is AmdGpus.cpp's business.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flink::amd {

/// A PCI address: domain, bus, device (0–31), function (0–7).
struct PciAddress {
  std::uint32_t domain = 0;
  unsigned bus = 0;
  unsigned device = 0;
  unsigned function = 0;
  friend auto operator<=>(const PciAddress&, const PciAddress&) = default;
};

/// NVML's form, "%08X:%02X:%02X.%X": "00000000:63:00.0".
std::string nvmlBusId(const PciAddress& address);

/// How Linux names the device under /sys/bus/pci/devices: "0000:63:00.0" (lowercase, the domain
/// at least 4 digits).
std::string sysfsPciName(const PciAddress& address);

/// "0000:63:00.0", "00000000:63:00.0" (any case, domain 1 to 8 hex digits, optional): the PCI
/// address; nullopt for anything else.
std::optional<PciAddress> parsePciAddress(std::string_view text);

/// One KFD properties file: `<name> <decimal>` per line, in file order.
struct KfdProperties {
  std::vector<std::pair<std::string, std::uint64_t>> values;
  std::optional<std::uint64_t> get(std::string_view name) const;
};

/// Parses a properties file's text. Blank lines are skipped.
/// @throws discovery::DiscoveryError naming `file` and the line (its number and text) when a line
///         is not `<name> <decimal>` (the decimal fitting 64 bits).
KfdProperties parseKfdProperties(std::string_view text, const std::string& file);

/// What `location_id` says: bus = bits 8–15, device = bits 3–7, function = bits 0–2, and bits
/// 28–31, where interim kernels put a compute partition's number.
struct LocationId {
  PciAddress address;
  unsigned highPartition = 0;
};
LocationId decodeLocationId(std::uint64_t locationId, std::uint64_t domain);

/// One node of the topology.
struct KfdNode {
  /// N of nodes/N.
  unsigned id = 0;
  std::filesystem::path propertiesFile;
  /// simd_count is not 0.
  bool gpu = false;
  /// From location_id and domain (0 where older kernels write no domain). GPU nodes only.
  LocationId location;
  /// drm_render_minor: the N of renderD<N>; 0 means the node has none.
  std::uint64_t renderMinor = 0;
  /// unique_id; 0 when absent or 0.
  std::uint64_t uniqueId = 0;
  /// device_id, when written.
  std::optional<std::uint64_t> deviceId;
  /// The sum of mem_banks/*/properties size_in_bytes with heap_type 1 or 2 (frame buffer, public
  /// or private), else local_mem_size where that is not 0; nullopt when neither says.
  std::optional<std::uint64_t> memoryBytes;
};

/// The folder of the nodes: <sysfs>/class/kfd/kfd/topology/nodes.
std::filesystem::path kfdNodesFolder(const std::filesystem::path& sysfsRoot);

/// The nodes in numeric order (node 10 after node 9); folders whose names are not decimal are
/// skipped. nullopt when the nodes folder does not exist.
/// @throws discovery::DiscoveryError naming the file: a properties file that cannot be read or
///         is malformed, one without simd_count, a GPU node without location_id or
///         drm_render_minor.
std::optional<std::vector<KfdNode>> readKfdTopology(const std::filesystem::path& sysfsRoot);

/// A GPU node as a unit: a whole GPU, or one compute partition of a partitioned GPU.
struct KfdUnit {
  KfdNode node;
  /// The unit's bus id: the GPU's, with the partition number as the function for a partition
  /// (as rocm-smi and amd-smi print it; no such PCI function exists).
  PciAddress busId;
  /// The PCI function that exists: the GPU's own (function 0 for a partition); its sysfs folder
  /// holds numa_node, local_cpulist, product_name, current_compute_partition.
  PciAddress device;
  /// The partition number, for a partition.
  std::optional<unsigned> partition;
};

/// The GPU nodes of `nodes`, in their order, as units. Nodes that share domain, bus, device and
/// unique_id are the partitions of one GPU; so is a node whose location_id has bits 28–31 set.
/// A partition's number is bits 28–31 where set, else the function bits.
std::vector<KfdUnit> kfdUnitsOf(const std::vector<KfdNode>& nodes);

}  // namespace flink::amd
