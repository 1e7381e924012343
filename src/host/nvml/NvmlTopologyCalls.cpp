// NVML's topology calls: the topology block of Device in Nvml.h. Kept apart from Nvml.cpp:
// every function here is optional, looked up on first use, and answers kFunctionNotFound where
// the library lacks it. What discovery makes of the answers is host/enumeration/NvmlTopology.cpp.
#include "host/nvml/Nvml.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <tuple>

#include "host/nvml/NvmlAbi.h"
#include "host/nvml/NvmlCall.h"
#include "util/DlError.h"

namespace flink::nvml {

using call::missing;
using call::toReturn;

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

/// dlsym with dlerror() cleared first; the function as `Function`, or null. A missing function's
/// error is taken, so that the thread keeps no record of it (util/DlError.h).
template <typename Function>
Function lookUp(void* handle, const char* symbol) {
  ::dlerror();
  void* address = ::dlsym(handle, symbol);
  if (address == nullptr) {
    static_cast<void>(dl::takeError());
    return nullptr;
  }
  // POSIX guarantees that a dlsym result converts to a function pointer.
  return reinterpret_cast<Function>(address);
}

// TopologyLevel and NvLinkRemote (Nvml.h) are copies of nvml.h's nvmlGpuTopologyLevel_t and
// nvmlIntNvLinkDeviceType_t (NvmlAbi.h): each value checked against the declaration, so that a
// typo in either copy fails the build.
template <typename Ours, typename Theirs>
constexpr bool same(Ours ours, Theirs theirs) {
  return static_cast<int>(ours) == static_cast<int>(theirs);
}
static_assert(same(TopologyLevel::kInternal, NVML_TOPOLOGY_INTERNAL));
static_assert(same(TopologyLevel::kSingle, NVML_TOPOLOGY_SINGLE));
static_assert(same(TopologyLevel::kMultiple, NVML_TOPOLOGY_MULTIPLE));
static_assert(same(TopologyLevel::kHostBridge, NVML_TOPOLOGY_HOSTBRIDGE));
static_assert(same(TopologyLevel::kNode, NVML_TOPOLOGY_NODE));
static_assert(same(TopologyLevel::kSystem, NVML_TOPOLOGY_SYSTEM));
static_assert(same(NvLinkRemote::kGpu, NVML_NVLINK_DEVICE_TYPE_GPU));
static_assert(same(NvLinkRemote::kIbmNpu, NVML_NVLINK_DEVICE_TYPE_IBMNPU));
static_assert(same(NvLinkRemote::kSwitch, NVML_NVLINK_DEVICE_TYPE_SWITCH));
static_assert(same(NvLinkRemote::kUnknown, NVML_NVLINK_DEVICE_TYPE_UNKNOWN));

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

}  // namespace flink::nvml
