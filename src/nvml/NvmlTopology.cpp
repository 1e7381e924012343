// NVML's topology calls (Device's topology block in Nvml.h) and the topology read from them. See
// NvmlTopology.h. Kept apart from Nvml.cpp: every function here is optional, looked up on first
// use, and no failure here ever reaches the caller as an error.
#include "nvml/NvmlTopology.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <tuple>

#include "nvml/NvmlAbi.h"

namespace flink::nvml {

/// The topology functions the library has; null where it lacks one.
struct NvmlLibrary::TopologyApi {
  decltype(&::nvmlDeviceGetNvLinkState) nvLinkState = nullptr;
  decltype(&::nvmlDeviceGetNvLinkRemotePciInfo_v2) nvLinkRemotePciInfo = nullptr;
  decltype(&::nvmlDeviceGetNvLinkRemoteDeviceType) nvLinkRemoteDeviceType = nullptr;
  decltype(&::nvmlDeviceGetTopologyCommonAncestor) commonAncestor = nullptr;
  decltype(&::nvmlDeviceGetCpuAffinityWithinScope) cpuAffinityWithinScope = nullptr;
  decltype(&::nvmlDeviceGetCpuAffinity) cpuAffinity = nullptr;
  decltype(&::nvmlDeviceGetMemoryAffinity) memoryAffinity = nullptr;
  decltype(&::nvmlDeviceGetNumaNodeId) numaNodeId = nullptr;
};

namespace {

/// dlsym with dlerror() cleared first; the function as `Function`, or null.
template <typename Function>
Function lookUp(void* handle, const char* symbol) {
  ::dlerror();
  void* address = ::dlsym(handle, symbol);
  // POSIX guarantees that a dlsym result converts to a function pointer.
  return address != nullptr ? reinterpret_cast<Function>(address) : nullptr;
}

Return toReturn(nvmlReturn_t code) { return static_cast<Return>(static_cast<int>(code)); }

template <typename T>
Result<T> missing(const char* function) {
  return Result<T>{Return::kFunctionNotFound, T{}, function};
}

/// The set bits of a mask of `words` unsigned longs, ascending.
std::vector<unsigned> bits(const unsigned long* mask, unsigned words) {
  constexpr unsigned kBits = sizeof(unsigned long) * 8;
  std::vector<unsigned> set;
  for (unsigned word = 0; word < words; ++word) {
    for (unsigned bit = 0; bit < kBits; ++bit) {
      if (mask[word] & (1UL << bit)) set.push_back(word * kBits + bit);
    }
  }
  return set;
}

constexpr unsigned kBitsPerWord = sizeof(unsigned long) * 8;

}  // namespace

const NvmlLibrary::TopologyApi& NvmlLibrary::topologyApi() const {
  std::call_once(topologyOnce_, [this] {
    auto api = std::make_shared<TopologyApi>();
    api->nvLinkState = lookUp<decltype(api->nvLinkState)>(handle_, "nvmlDeviceGetNvLinkState");
    api->nvLinkRemotePciInfo =
        lookUp<decltype(api->nvLinkRemotePciInfo)>(handle_, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    api->nvLinkRemoteDeviceType = lookUp<decltype(api->nvLinkRemoteDeviceType)>(
        handle_, "nvmlDeviceGetNvLinkRemoteDeviceType");
    api->commonAncestor =
        lookUp<decltype(api->commonAncestor)>(handle_, "nvmlDeviceGetTopologyCommonAncestor");
    api->cpuAffinityWithinScope = lookUp<decltype(api->cpuAffinityWithinScope)>(
        handle_, "nvmlDeviceGetCpuAffinityWithinScope");
    api->cpuAffinity = lookUp<decltype(api->cpuAffinity)>(handle_, "nvmlDeviceGetCpuAffinity");
    api->memoryAffinity =
        lookUp<decltype(api->memoryAffinity)>(handle_, "nvmlDeviceGetMemoryAffinity");
    api->numaNodeId = lookUp<decltype(api->numaNodeId)>(handle_, "nvmlDeviceGetNumaNodeId");
    topologyApi_ = std::move(api);
  });
  return *topologyApi_;
}

// ---- Device: the topology calls ----

Result<bool> Device::nvLinkActive(unsigned link) const {
  constexpr const char* kFunction = "nvmlDeviceGetNvLinkState";
  const auto function = library_->topologyApi().nvLinkState;
  if (function == nullptr) return missing<bool>(kFunction);
  nvmlEnableState_t state = NVML_FEATURE_DISABLED;
  const Return code = toReturn(function(handle_, link, &state));
  return {code, code == Return::kSuccess && state == NVML_FEATURE_ENABLED, kFunction};
}

Result<PciInfo> Device::nvLinkRemotePciInfo(unsigned link) const {
  constexpr const char* kFunction = "nvmlDeviceGetNvLinkRemotePciInfo_v2";
  const auto function = library_->topologyApi().nvLinkRemotePciInfo;
  if (function == nullptr) return missing<PciInfo>(kFunction);
  nvmlPciInfo_t raw{};
  const Return code = toReturn(function(handle_, link, &raw));
  Result<PciInfo> result{code, PciInfo{}, kFunction};
  if (code == Return::kSuccess) {
    result.value.busId = std::string(raw.busId, ::strnlen(raw.busId, sizeof raw.busId));
    result.value.busIdLegacy =
        std::string(raw.busIdLegacy, ::strnlen(raw.busIdLegacy, sizeof raw.busIdLegacy));
    result.value.domain = raw.domain;
    result.value.bus = raw.bus;
    result.value.device = raw.device;
    result.value.pciDeviceId = raw.pciDeviceId;
    result.value.pciSubSystemId = raw.pciSubSystemId;
  }
  return result;
}

Result<NvLinkRemote> Device::nvLinkRemoteDeviceType(unsigned link) const {
  constexpr const char* kFunction = "nvmlDeviceGetNvLinkRemoteDeviceType";
  const auto function = library_->topologyApi().nvLinkRemoteDeviceType;
  if (function == nullptr) return missing<NvLinkRemote>(kFunction);
  nvmlIntNvLinkDeviceType_t type = NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
  const Return code = toReturn(function(handle_, link, &type));
  NvLinkRemote remote = NvLinkRemote::kUnknown;
  switch (type) {
    case NVML_NVLINK_DEVICE_TYPE_GPU:
      remote = NvLinkRemote::kGpu;
      break;
    case NVML_NVLINK_DEVICE_TYPE_IBMNPU:
      remote = NvLinkRemote::kIbmNpu;
      break;
    case NVML_NVLINK_DEVICE_TYPE_SWITCH:
      remote = NvLinkRemote::kSwitch;
      break;
    default:
      break;
  }
  return {code, remote, kFunction};
}

Result<TopologyLevel> Device::commonAncestor(const Device& other) const {
  constexpr const char* kFunction = "nvmlDeviceGetTopologyCommonAncestor";
  const auto function = library_->topologyApi().commonAncestor;
  if (function == nullptr) return missing<TopologyLevel>(kFunction);
  nvmlGpuTopologyLevel_t level = NVML_TOPOLOGY_SYSTEM;
  Return code = toReturn(function(handle_, other.handle_, &level));
  switch (level) {
    case NVML_TOPOLOGY_INTERNAL:
    case NVML_TOPOLOGY_SINGLE:
    case NVML_TOPOLOGY_MULTIPLE:
    case NVML_TOPOLOGY_HOSTBRIDGE:
    case NVML_TOPOLOGY_NODE:
    case NVML_TOPOLOGY_SYSTEM:
      break;
    default:
      // A level a newer driver added: not one this binding can place, so unknown.
      if (code == Return::kSuccess) code = Return::kUnknown;
  }
  return {code, static_cast<TopologyLevel>(static_cast<int>(level)), kFunction};
}

Result<std::vector<unsigned>> Device::cpuAffinity() const {
  const NvmlLibrary::TopologyApi& api = library_->topologyApi();
  std::vector<unsigned long> mask(kMaxCpus / kBitsPerWord, 0);
  const auto words = static_cast<unsigned>(mask.size());
  Result<std::vector<unsigned>> scoped =
      missing<std::vector<unsigned>>("nvmlDeviceGetCpuAffinityWithinScope");
  if (api.cpuAffinityWithinScope != nullptr) {
    const Return code =
        toReturn(api.cpuAffinityWithinScope(handle_, words, mask.data(), NVML_AFFINITY_SCOPE_NODE));
    scoped = {code, code == Return::kSuccess ? bits(mask.data(), words) : std::vector<unsigned>{},
              "nvmlDeviceGetCpuAffinityWithinScope"};
    // A lost GPU answers the older call no better.
    if (code == Return::kSuccess || code == Return::kGpuIsLost) return scoped;
  }
  if (api.cpuAffinity == nullptr) return scoped;
  std::fill(mask.begin(), mask.end(), 0UL);
  const Return code = toReturn(api.cpuAffinity(handle_, words, mask.data()));
  return {code, code == Return::kSuccess ? bits(mask.data(), words) : std::vector<unsigned>{},
          "nvmlDeviceGetCpuAffinity"};
}

Result<unsigned> Device::numaNodeId() const {
  constexpr const char* kFunction = "nvmlDeviceGetNumaNodeId";
  const auto function = library_->topologyApi().numaNodeId;
  if (function == nullptr) return missing<unsigned>(kFunction);
  unsigned int node = 0;
  const Return code = toReturn(function(handle_, &node));
  return {code, code == Return::kSuccess ? node : 0u, kFunction};
}

Result<std::vector<unsigned>> Device::memoryAffinity() const {
  constexpr const char* kFunction = "nvmlDeviceGetMemoryAffinity";
  const auto function = library_->topologyApi().memoryAffinity;
  if (function == nullptr) return missing<std::vector<unsigned>>(kFunction);
  std::vector<unsigned long> mask(kMaxNumaNodes / kBitsPerWord, 0);
  const auto words = static_cast<unsigned>(mask.size());
  const Return code = toReturn(function(handle_, words, mask.data(), NVML_AFFINITY_SCOPE_NODE));
  return {code, code == Return::kSuccess ? bits(mask.data(), words) : std::vector<unsigned>{},
          kFunction};
}

// ---- the topology ----

namespace {

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
  for (unsigned link = 0; link < kMaxNvLinks; ++link) {
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
                 discovery::Enumeration& enumeration, bool withTopology) {
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
  for (discovery::GpuDevice& device : enumeration.devices) {
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

}  // namespace flink::nvml
