// The topology of the host's GPUs, read through NVML's topology calls (see NvmlTopology.h and
// the calls themselves in host/nvml/NvmlTopologyCalls.cpp). No failure here reaches the caller: an
// unanswered call leaves its relation unknown.
#include "host/enumeration/NvmlTopology.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <tuple>

#include "host/nvml/NvmlDeviceState.h"

namespace flink::discovery {

using nvml::Device;
using nvml::NvLinkRemote;
using nvml::PciInfo;
using nvml::Result;
using nvml::Return;
using nvml::TopologyLevel;

// ---- the topology ----

namespace {

/// The most NVLinks asked of one GPU: a bound of ours, not nvml.h's NVML_NVLINK_MAX_LINKS. That
/// macro is the header's (18 in nvml.h 12.9, 36 in 13.3), so a build against an older header would
/// never ask a newer GPU's last links; instead each link is asked in turn until NVML answers that
/// it does not exist (NVML_ERROR_INVALID_ARGUMENT). The bound only stops a driver that never says
/// so from being asked forever, and is generous so that GPUs with more links than any so far
/// (36) are still read whole.
constexpr unsigned kNvLinkQueryBound = 64;

std::optional<placement::PcieLevel> toPcieLevel(const Result<TopologyLevel>& level) {
  if (!level.ok()) return std::nullopt;
  switch (level.value) {
    case TopologyLevel::kInternal:
      return placement::PcieLevel::kInternal;
    case TopologyLevel::kSingle:
      return placement::PcieLevel::kSingleSwitch;
    case TopologyLevel::kMultiple:
      return placement::PcieLevel::kMultipleSwitches;
    case TopologyLevel::kHostBridge:
      return placement::PcieLevel::kHostBridge;
    case TopologyLevel::kNode:
      return placement::PcieLevel::kNode;
    case TopologyLevel::kSystem:
      return placement::PcieLevel::kSystem;
  }
  return std::nullopt;
}

/// Whether `result` says that `gpu` is lost (NVML_ERROR_GPU_IS_LOST); then `lost` gets NVML's
/// failure text, worded as the health code words it, unless it has one already.
template <typename T>
bool isLost(const Device& gpu, const Result<T>& result, std::optional<std::string>& lost) {
  if (result.code != Return::kGpuIsLost) return false;
  if (!lost) lost = gpu.library()->describeFailure(result.function, result.code);
  return true;
}

/// One GPU's NUMA node: nvmlDeviceGetNumaNodeId, else the lowest node of its memory affinity.
std::optional<unsigned> numaNodeOf(const Device& gpu, std::optional<std::string>& lost) {
  const Result<unsigned> node = gpu.numaNodeId();
  if (node.ok()) return node.value;
  if (isLost(gpu, node, lost)) return std::nullopt;
  const Result<std::vector<unsigned>> nodes = gpu.memoryAffinity();
  if (nodes.ok() && !nodes.value.empty()) return nodes.value.front();
  isLost(gpu, nodes, lost);
  return std::nullopt;
}

std::optional<std::vector<unsigned>> cpusOf(const Device& gpu, std::optional<std::string>& lost) {
  const Result<std::vector<unsigned>> cpus = gpu.cpuAffinity();
  isLost(gpu, cpus, lost);
  // An empty mask is no answer: every GPU is close to some CPU.
  if (!cpus.ok() || cpus.value.empty()) return std::nullopt;
  return cpus.value;
}

/// PCI domain, bus and device, to match the far ends of NVLinks; (~0, ~0, ~0) where unknown.
using PciKey = std::tuple<unsigned, unsigned, unsigned>;
constexpr PciKey kUnknownPci{~0u, ~0u, ~0u};

/// What one GPU's links lead to.
struct Links {
  bool known = false;  // the queries answered (NOT_SUPPORTED included: no NVLink)
  std::map<std::size_t, unsigned> toGpu;  // position → links
  unsigned toSwitch = 0;
};

/// The links of `gpu`; all unknown, and `lost` set, when one of its link queries answers
/// NVML_ERROR_GPU_IS_LOST (it is asked nothing more).
Links linksOf(const Device& gpu, const std::vector<PciKey>& pci, std::optional<std::string>& lost) {
  Links links;
  for (unsigned link = 0; link < kNvLinkQueryBound; ++link) {
    const Result<bool> active = gpu.nvLinkActive(link);
    if (isLost(gpu, active, lost)) return Links{};
    if (active.code == Return::kNotSupported || active.code == Return::kInvalidArgument) {
      // No NVLink at all (link 0), or past this GPU's last link: an answer.
      if (link == 0 && active.code == Return::kNotSupported) links.known = true;
      if (active.code == Return::kInvalidArgument) links.known = true;
      break;
    }
    if (!active.ok()) return Links{};  // unknown: failed, or the function is missing
    links.known = true;
    if (!active.value) continue;
    const Result<NvLinkRemote> type = gpu.nvLinkRemoteDeviceType(link);
    if (isLost(gpu, type, lost)) return Links{};
    if (type.ok() && type.value == NvLinkRemote::kSwitch) {
      ++links.toSwitch;
      continue;
    }
    if (type.ok() && type.value != NvLinkRemote::kGpu) continue;  // an NPU: not ours to count
    const Result<PciInfo> remote = gpu.nvLinkRemotePciInfo(link);
    if (isLost(gpu, remote, lost)) return Links{};
    if (!remote.ok()) continue;
    const PciKey key{remote.value.domain, remote.value.bus, remote.value.device};
    for (std::size_t position = 0; position < pci.size(); ++position) {
      if (pci[position] == key) ++links.toGpu[position];
    }
  }
  return links;
}

}  // namespace

placement::Topology readTopology(const std::vector<Device>& gpus,
                                 const std::vector<std::string>& identifiers) {
  const std::size_t n = gpus.size();
  std::vector<placement::GpuTopology> described(n);
  // Set at a GPU's first NVML_ERROR_GPU_IS_LOST: it is asked nothing more.
  std::vector<std::optional<std::string>> lost(n);
  std::vector<PciKey> pci(n, kUnknownPci);
  for (std::size_t i = 0; i < n; ++i) {
    described[i].identifier = identifiers[i];
    const Result<PciInfo> info = gpus[i].pciInfo();
    if (isLost(gpus[i], info, lost[i])) continue;
    if (info.ok()) pci[i] = PciKey{info.value.domain, info.value.bus, info.value.device};
  }

  // Each GPU's own: its NVLinks, NUMA node, CPUs and fabric, until it is found lost.
  std::optional<nvml::DeviceStateApi> state;
  if (n > 0 && gpus.front().library() != nullptr) state.emplace(*gpus.front().library());
  std::vector<Links> links(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (lost[i]) continue;
    links[i] = linksOf(gpus[i], pci, lost[i]);
    if (lost[i]) continue;
    described[i].numaNode = numaNodeOf(gpus[i], lost[i]);
    if (lost[i]) continue;
    described[i].cpus = cpusOf(gpus[i], lost[i]);
    if (lost[i] || !state) continue;
    // Its fabric's health: a GPU whose bandwidth is degraded is placed after the others.
    const Result<nvml::FabricInfo> fabric = state->fabricInfo(gpus[i]);
    if (isLost(gpus[i], fabric, lost[i])) continue;
    described[i].degradedBandwidth = fabric.ok() && fabric.value.degradedBandwidth();
  }

  // Each pair's PCIe relation, while neither is lost. NVML does not say which of the two a pair's
  // NVML_ERROR_GPU_IS_LOST is about: each is asked its PCI info again, the first thing every GPU
  // was asked, and the one that answers so is lost, by the pair's query (its text is kept). When
  // neither does, the pair stays unknown.
  std::vector<std::optional<placement::PcieLevel>> pcie(n * n);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = i + 1; j < n && !lost[i]; ++j) {
      if (lost[j]) continue;
      const Result<TopologyLevel> level = gpus[i].commonAncestor(gpus[j]);
      if (level.code == Return::kGpuIsLost) {
        for (const std::size_t k : {i, j}) {
          std::optional<std::string> confirmed;
          if (isLost(gpus[k], gpus[k].pciInfo(), confirmed)) isLost(gpus[k], level, lost[k]);
        }
        continue;
      }
      pcie[i * n + j] = toPcieLevel(level);
    }
  }

  // A lost GPU keeps only why: what it answered before it was found lost is dropped.
  for (std::size_t i = 0; i < n; ++i) {
    if (lost[i]) {
      described[i].numaNode.reset();
      described[i].cpus.reset();
      described[i].lost = std::move(lost[i]);
      links[i] = Links{};
    } else {
      if (links[i].known) described[i].switchLinks = links[i].toSwitch;
    }
  }

  placement::Topology topology(std::move(described));
  for (std::size_t i = 0; i < n; ++i) {
    if (links[i].toSwitch > 0) topology.nvswitch = true;
  }
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = i + 1; j < n; ++j) {
      placement::PairLink pair;
      if (!topology.gpus()[i].lost && !topology.gpus()[j].lost) pair.pcie = pcie[i * n + j];
      // Either side may have seen the links (a GPU whose queries failed, the other's did not).
      const auto count = [&](std::size_t from, std::size_t to) -> unsigned {
        const auto found = links[from].toGpu.find(to);
        return found == links[from].toGpu.end() ? 0u : found->second;
      };
      const unsigned direct = std::max(count(i, j), count(j, i));
      const unsigned fabric = std::min(links[i].toSwitch, links[j].toSwitch);
      pair.nvlinks = direct + fabric;
      pair.nvlinkKnown = (links[i].known && links[j].known) || pair.nvlinks > 0;
      topology.setLink(i, j, pair);
    }
  }
  return topology;
}

void addTopology(const std::vector<std::pair<std::string, Device>>& handles,
                 Enumeration& enumeration, bool withTopology) {
  std::vector<Device> gpus;
  std::vector<std::string> identifiers;
  std::map<unsigned, std::size_t> positionByIndex;
  for (const auto& [identifier, handle] : handles) {
    try {
      positionByIndex[static_cast<unsigned>(std::stoul(identifier))] = gpus.size();
    } catch (const std::exception&) {
      continue;  // not an index: no MIG instance can name it as its parent
    }
    gpus.push_back(handle);
    identifiers.push_back(identifier);
  }

  if (withTopology) {
    enumeration.topology = readTopology(gpus, identifiers);
  }
  // NUMA node and CPUs: from the topology when it was read, else asked here (two calls a GPU).
  std::vector<std::optional<unsigned>> numa(gpus.size());
  std::vector<std::optional<std::vector<unsigned>>> cpus(gpus.size());
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    if (enumeration.topology) {
      numa[i] = enumeration.topology->gpus()[i].numaNode;
      cpus[i] = enumeration.topology->gpus()[i].cpus;
    } else {
      // Whether the GPU is lost is the enumeration's and the health code's to tell here.
      std::optional<std::string> lost;
      numa[i] = numaNodeOf(gpus[i], lost);
      if (!lost) cpus[i] = cpusOf(gpus[i], lost);
    }
  }
  for (GpuDevice& device : enumeration.devices) {
    std::optional<unsigned> index;
    if (device.mig) {
      index = device.mig->parentIndex;
    } else {
      try {
        index = static_cast<unsigned>(std::stoul(device.identifier));
      } catch (const std::exception&) {
      }
    }
    if (!index) continue;
    const auto found = positionByIndex.find(*index);
    if (found == positionByIndex.end()) continue;
    device.numaNode = numa[found->second];
    device.cpus = cpus[found->second];
  }
}

std::optional<placement::Topology> readNvmlTopology(const std::vector<std::string>& indices) {
  try {
    const nvml::NvmlSession session(nvml::NvmlLibrary::load());
    std::vector<Device> gpus;
    std::vector<std::string> identifiers;
    for (const std::string& identifier : indices) {
      unsigned index = 0;
      try {
        index = static_cast<unsigned>(std::stoul(identifier));
      } catch (const std::exception&) {
        continue;  // not an index
      }
      const Result<Device> gpu = session.deviceByIndex(index);
      if (!gpu.ok()) continue;
      gpus.push_back(gpu.value);
      identifiers.push_back(identifier);
    }
    return readTopology(gpus, identifiers);
  } catch (const nvml::NvmlError&) {
    return std::nullopt;
  }
}

}  // namespace flink::discovery
