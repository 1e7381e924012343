// The topology of the host's GPUs, read through NVML's topology calls (see NvmlTopology.h and
// the calls themselves in nvml/NvmlTopologyCalls.cpp). No failure here reaches the caller: an
// unanswered call leaves its relation unknown.
#include "discovery/NvmlTopology.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <tuple>

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

/// One GPU's NUMA node: nvmlDeviceGetNumaNodeId, else the lowest node of its memory affinity.
std::optional<unsigned> numaNodeOf(const Device& gpu) {
  if (const Result<unsigned> node = gpu.numaNodeId(); node.ok()) return node.value;
  if (const Result<std::vector<unsigned>> nodes = gpu.memoryAffinity();
      nodes.ok() && !nodes.value.empty()) {
    return nodes.value.front();
  }
  return std::nullopt;
}

std::optional<std::vector<unsigned>> cpusOf(const Device& gpu) {
  const Result<std::vector<unsigned>> cpus = gpu.cpuAffinity();
  // An empty mask is no answer: every GPU is close to some CPU.
  if (!cpus.ok() || cpus.value.empty()) return std::nullopt;
  return cpus.value;
}

/// What one GPU's links lead to.
struct Links {
  bool known = false;  // the queries answered (NOT_SUPPORTED included: no NVLink)
  bool lost = false;   // NVML_ERROR_GPU_IS_LOST: ask it nothing more
  std::map<std::size_t, unsigned> toGpu;  // position → links
  unsigned toSwitch = 0;
};

Links linksOf(const Device& gpu, const std::vector<std::tuple<unsigned, unsigned, unsigned>>& pci) {
  Links links;
  for (unsigned link = 0; link < kNvLinkQueryBound; ++link) {
    const Result<bool> active = gpu.nvLinkActive(link);
    if (active.code == Return::kGpuIsLost) {
      links = Links{};
      links.lost = true;
      return links;
    }
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
    if (type.ok() && type.value == NvLinkRemote::kSwitch) {
      ++links.toSwitch;
      continue;
    }
    if (type.ok() && type.value != NvLinkRemote::kGpu) continue;  // an NPU: not ours to count
    const Result<PciInfo> remote = gpu.nvLinkRemotePciInfo(link);
    if (!remote.ok()) continue;
    const auto key = std::make_tuple(remote.value.domain, remote.value.bus, remote.value.device);
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
  // PCI addresses, to match the far ends of NVLinks; (~0, ~0, ~0) where unknown.
  std::vector<std::tuple<unsigned, unsigned, unsigned>> pci(n, {~0u, ~0u, ~0u});
  std::vector<Links> links(n);
  for (std::size_t i = 0; i < n; ++i) {
    described[i].identifier = identifiers[i];
    if (const Result<PciInfo> info = gpus[i].pciInfo(); info.ok()) {
      pci[i] = std::make_tuple(info.value.domain, info.value.bus, info.value.device);
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    links[i] = linksOf(gpus[i], pci);
    if (links[i].lost) continue;
    described[i].numaNode = numaNodeOf(gpus[i]);
    described[i].cpus = cpusOf(gpus[i]);
    described[i].switchLinks = links[i].toSwitch;
  }

  placement::Topology topology(std::move(described));
  for (std::size_t i = 0; i < n; ++i) {
    if (links[i].toSwitch > 0) topology.nvswitch = true;
  }
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = i + 1; j < n; ++j) {
      placement::PairLink pair;
      if (!links[i].lost && !links[j].lost) {
        pair.pcie = toPcieLevel(gpus[i].commonAncestor(gpus[j]));
      }
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
      numa[i] = numaNodeOf(gpus[i]);
      cpus[i] = cpusOf(gpus[i]);
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
