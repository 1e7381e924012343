// What the placement rule knows about how a host's GPUs are connected: for each pair of whole
// GPUs their NVLinks and their PCIe relation, for each GPU its NUMA node and CPU affinity. Pure
// data, filled from NVML by host/enumeration/NvmlTopology.h and by hand in the tests; nothing here
// calls NVML.
//
// Every field may be unknown: a query that failed or is not supported leaves its relation
// unknown, never guessed, and the placement rule then scores it as no connection at all.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flink::placement {

/// How two GPUs reach each other over PCIe: nvml.h's nvmlGpuTopologyLevel_t, from the closest to
/// the farthest. The names in comments are what `nvidia-smi topo -m` prints.
enum class PcieLevel {
  kInternal,          ///< NVML_TOPOLOGY_INTERNAL: the same board (a dual-GPU card)
  kSingleSwitch,      ///< NVML_TOPOLOGY_SINGLE, PIX: at most one PCIe switch between them
  kMultipleSwitches,  ///< NVML_TOPOLOGY_MULTIPLE, PXB: several switches, no host bridge
  kHostBridge,        ///< NVML_TOPOLOGY_HOSTBRIDGE, PHB: through one PCIe host bridge
  kNode,              ///< NVML_TOPOLOGY_NODE, NODE: host bridges within one NUMA node
  kSystem,            ///< NVML_TOPOLOGY_SYSTEM, SYS: across NUMA nodes (the CPUs' interconnect)
};

/// "PIX", "PXB", "PHB", "NODE", "SYS" (kInternal: "PIX", as nvidia-smi shows a board's switch).
std::string_view shortName(PcieLevel level);
/// "internal", "single-switch", "multiple-switches", "host-bridge", "node", "system": the JSON
/// names.
std::string_view jsonName(PcieLevel level);

/// What is known of one pair of GPUs.
struct PairLink {
  /// The number of active NVLinks between them (on NVSwitch hosts: through the fabric, the
  /// smaller of the two GPUs' link counts). Meaningful only when nvlinkKnown.
  unsigned nvlinks = 0;
  /// Whether both GPUs answered the NVLink queries (a GPU without NVLink answers "not supported",
  /// which is an answer: 0 links).
  bool nvlinkKnown = false;
  /// nvmlDeviceGetTopologyCommonAncestor; nullopt when it failed or is not supported.
  std::optional<PcieLevel> pcie;

  /// Whether anything is known of this pair.
  bool known() const noexcept { return (nvlinkKnown && nvlinks > 0) || pcie.has_value(); }
};

/// What is known of one whole GPU.
struct GpuTopology {
  /// Its index as the host's allocators name it ("0").
  std::string identifier;
  /// nvmlDeviceGetNumaNodeId, else the memory affinity's lowest node.
  std::optional<unsigned> numaNode;
  /// The CPUs close to it (nvmlDeviceGetCpuAffinityWithinScope, else nvmlDeviceGetCpuAffinity),
  /// ascending; nullopt when unknown.
  std::optional<std::vector<unsigned>> cpus;
  /// The number of its active NVLinks that lead to an NVSwitch (0 on a host without one);
  /// nullopt when its NVLinks are unknown.
  std::optional<unsigned> switchLinks;
  /// Set when NVML answered NVML_ERROR_GPU_IS_LOST to one of its topology queries (the GPU fell
  /// off the bus): NVML's failure text, as the health code words it ("nvmlDeviceGetNumaNodeId
  /// failed: GPU is lost (NVML_ERROR_GPU_IS_LOST, 15)"). Nothing more is asked of such a GPU, and
  /// what it answered before is dropped: its NUMA node, CPUs, switch links and PCIe relations are
  /// unknown (an NVLink another GPU saw into it still counts, as that GPU's answer).
  std::optional<std::string> lost;
  /// Its NVLink fabric's health mask reports degraded bandwidth (nvmlDeviceGetGpuFabricInfoV, on
  /// NVSwitch hosts): the placement rule takes it only after every other free GPU.
  bool degradedBandwidth = false;
};

/// The host's GPUs and the relation of each pair.
class Topology {
 public:
  Topology() = default;
  /// `gpus` in the host's order; every pair starts unknown.
  explicit Topology(std::vector<GpuTopology> gpus);

  const std::vector<GpuTopology>& gpus() const noexcept { return gpus_; }
  std::vector<GpuTopology>& gpus() noexcept { return gpus_; }
  std::size_t size() const noexcept { return gpus_.size(); }

  /// The relation of GPUs `a` and `b` (positions in gpus(), a != b); the same both ways.
  const PairLink& link(std::size_t a, std::size_t b) const { return links_[a * gpus_.size() + b]; }
  /// Sets the relation of `a` and `b`, both ways.
  void setLink(std::size_t a, std::size_t b, const PairLink& link);

  /// The position of the GPU named `identifier`, or nullopt.
  std::optional<std::size_t> positionOf(std::string_view identifier) const;

  /// Whether any pair's relation, any GPU's NUMA node, or a degraded fabric is known: when not,
  /// the placement rule has nothing to go on and hands out GPUs by index.
  bool anythingKnown() const noexcept;

  /// Whether the GPUs' NVLinks lead to NVSwitches (every pair is then NVLink-connected).
  bool nvswitch = false;

 private:
  std::vector<GpuTopology> gpus_;
  std::vector<PairLink> links_;  // gpus_.size() squared, row by row
};

/// go-gpuallocator's score of a pair (higher is better connected): 100 per NVLink, plus for the
/// PCIe relation 60 for the same board, 50 a single switch, 40 multiple switches, 30 a host
/// bridge, 20 the same NUMA node, 10 across NUMA nodes; 0 for what is unknown.
int pairScore(const PairLink& link) noexcept;

/// The cell `nvidia-smi topo -m` shows for a pair: "NV4", else "PIX" … "SYS", else "N/A".
std::string relationName(const PairLink& link);

/// "0-31,64-95": the CPU list form of /sys/devices/system/cpu/online and cpuset(7). `cpus` must
/// be ascending.
std::string formatCpuList(const std::vector<unsigned>& cpus);

/// The CPUs of a list in that form, ascending and without duplicates; nullopt when it is not one
/// ("" is the empty list).
std::optional<std::vector<unsigned>> parseCpuList(std::string_view text);

}  // namespace flink::placement
