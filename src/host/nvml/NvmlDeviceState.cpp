// NVML's device-state calls (see NvmlDeviceState.h): each function looked up once with dlsym and
// called through a pointer of the type nvml.h declares (NvmlDeviceStateAbi.h).
#include "host/nvml/NvmlDeviceState.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include "host/nvml/NvmlCall.h"
#include "host/nvml/NvmlDeviceStateAbi.h"

namespace flink::nvml {
namespace {

using call::as;
using call::kNoInstance;
using call::missing;
using call::toReturn;
constexpr unsigned long long kNotAvailable =
    static_cast<unsigned long long>(NVML_VALUE_NOT_AVAILABLE);

// The C++ copies of nvml.h's values (NvmlDeviceState.h), checked against the declarations.
static_assert(static_cast<unsigned>(RecoveryAction::kNone) == NVML_GPU_RECOVERY_ACTION_NONE);
static_assert(static_cast<unsigned>(RecoveryAction::kGpuReset) ==
              NVML_GPU_RECOVERY_ACTION_GPU_RESET);
static_assert(static_cast<unsigned>(RecoveryAction::kNodeReboot) ==
              NVML_GPU_RECOVERY_ACTION_NODE_REBOOT);
static_assert(static_cast<unsigned>(RecoveryAction::kDrainP2p) ==
              NVML_GPU_RECOVERY_ACTION_DRAIN_P2P);
static_assert(static_cast<unsigned>(RecoveryAction::kDrainAndReset) ==
              NVML_GPU_RECOVERY_ACTION_DRAIN_AND_RESET);
static_assert(static_cast<unsigned>(RecoveryAction::kRecoverImexDomain) ==
              NVML_GPU_RECOVERY_ACTION_RECOVER_IMEX_DOMAIN);
static_assert(static_cast<unsigned>(FabricState::kNotSupported) ==
              NVML_GPU_FABRIC_STATE_NOT_SUPPORTED);
static_assert(static_cast<unsigned>(FabricState::kNotStarted) == NVML_GPU_FABRIC_STATE_NOT_STARTED);
static_assert(static_cast<unsigned>(FabricState::kInProgress) == NVML_GPU_FABRIC_STATE_IN_PROGRESS);
static_assert(static_cast<unsigned>(FabricState::kCompleted) == NVML_GPU_FABRIC_STATE_COMPLETED);
static_assert(static_cast<unsigned>(ComputeMode::kDefault) == NVML_COMPUTEMODE_DEFAULT);
static_assert(static_cast<unsigned>(ComputeMode::kExclusiveThread) ==
              NVML_COMPUTEMODE_EXCLUSIVE_THREAD);
static_assert(static_cast<unsigned>(ComputeMode::kProhibited) == NVML_COMPUTEMODE_PROHIBITED);
static_assert(static_cast<unsigned>(ComputeMode::kExclusiveProcess) ==
              NVML_COMPUTEMODE_EXCLUSIVE_PROCESS);

/// One list, by the call `call` of type Function filling `Info`s: asked with room for a few
/// processes, then again with the count NVML says it needs (processes come and go between two
/// calls, so a few times, with room to spare).
template <typename Function, typename Info>
Result<std::vector<Process>> readList(void* call, const char* name, nvmlDevice_t device,
                                      ProcessList list) {
  std::vector<Info> infos(16);
  for (int attempt = 0; attempt < 8; ++attempt) {
    auto count = static_cast<unsigned int>(infos.size());
    const Return code = toReturn(as<Function>(call)(device, &count, infos.data()));
    if (code == Return::kInsufficientSize) {
      infos.resize(std::max<std::size_t>(count, infos.size()) * 2);
      continue;
    }
    Result<std::vector<Process>> result{code, {}, name};
    if (code != Return::kSuccess) return result;
    count = std::min<unsigned int>(count, static_cast<unsigned int>(infos.size()));
    for (unsigned int i = 0; i < count; ++i) {
      Process process;
      process.pid = infos[i].pid;
      if (infos[i].usedGpuMemory != kNotAvailable) process.usedBytes = infos[i].usedGpuMemory;
      process.lists = list;
      if constexpr (std::is_same_v<Info, nvmlProcessInfo_t>) {
        if (infos[i].gpuInstanceId != kNoInstance) process.gpuInstanceId = infos[i].gpuInstanceId;
        if (infos[i].computeInstanceId != kNoInstance) {
          process.computeInstanceId = infos[i].computeInstanceId;
        }
      }
      result.value.push_back(process);
    }
    return result;
  }
  return {Return::kInsufficientSize, {}, name};
}

}  // namespace

std::string recoveryActionText(unsigned action) {
  switch (action) {
    case NVML_GPU_RECOVERY_ACTION_NONE:
      return "none";
    case NVML_GPU_RECOVERY_ACTION_GPU_RESET:
      return "requires a GPU reset";
    case NVML_GPU_RECOVERY_ACTION_NODE_REBOOT:
      return "requires a node reboot";
    case NVML_GPU_RECOVERY_ACTION_DRAIN_P2P:
      return "drain peer-to-peer traffic";
    case NVML_GPU_RECOVERY_ACTION_DRAIN_AND_RESET:
      return "drain and reset";
    case NVML_GPU_RECOVERY_ACTION_RECOVER_IMEX_DOMAIN:
      return "recover the IMEX domain";
    default:
      return "unknown recovery action " + std::to_string(action);
  }
}

std::string fabricStateText(unsigned state) {
  switch (state) {
    case NVML_GPU_FABRIC_STATE_NOT_SUPPORTED:
      return "not supported";
    case NVML_GPU_FABRIC_STATE_NOT_STARTED:
      return "not started";
    case NVML_GPU_FABRIC_STATE_IN_PROGRESS:
      return "in progress";
    case NVML_GPU_FABRIC_STATE_COMPLETED:
      return "completed";
    default:
      return "state " + std::to_string(state);
  }
}

std::optional<std::string> FabricInfo::clusterUuidText() const {
  if (std::all_of(clusterUuid.begin(), clusterUuid.end(), [](unsigned char b) { return b == 0; })) {
    return std::nullopt;
  }
  std::string text;
  char hex[3];
  for (std::size_t i = 0; i < clusterUuid.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text += '-';
    std::snprintf(hex, sizeof hex, "%02x", clusterUuid[i]);
    text += hex;
  }
  return text;
}

bool FabricInfo::degradedBandwidth() const {
  return healthMask.has_value() && ((*healthMask >> NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_DEGRADED_BW) &
                                    NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_DEGRADED_BW) ==
                                       NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_TRUE;
}

DeviceStateApi::DeviceStateApi(const NvmlLibrary& library)
    : compute_{library.symbol("nvmlDeviceGetComputeRunningProcesses_v3"),
               library.symbol("nvmlDeviceGetComputeRunningProcesses_v2"),
               library.symbol("nvmlDeviceGetComputeRunningProcesses")},
      graphics_{library.symbol("nvmlDeviceGetGraphicsRunningProcesses_v3"),
                library.symbol("nvmlDeviceGetGraphicsRunningProcesses_v2"),
                library.symbol("nvmlDeviceGetGraphicsRunningProcesses")},
      mps_{library.symbol("nvmlDeviceGetMPSComputeRunningProcesses_v3"),
           library.symbol("nvmlDeviceGetMPSComputeRunningProcesses_v2"),
           library.symbol("nvmlDeviceGetMPSComputeRunningProcesses")},
      memoryV2_(library.symbol("nvmlDeviceGetMemoryInfo_v2")),
      memoryV1_(library.symbol("nvmlDeviceGetMemoryInfo")),
      fieldValues_(library.symbol("nvmlDeviceGetFieldValues")),
      fabricInfoV_(library.symbol("nvmlDeviceGetGpuFabricInfoV")),
      fabricInfo_(library.symbol("nvmlDeviceGetGpuFabricInfo")),
      computeMode_(library.symbol("nvmlDeviceGetComputeMode")) {}

const DeviceStateApi::ListCalls& DeviceStateApi::calls(ProcessList list) const {
  switch (list) {
    case kGraphicsProcess:
      return graphics_;
    case kMpsProcess:
      return mps_;
    default:
      return compute_;
  }
}

Result<std::vector<Process>> DeviceStateApi::processes(const Device& device,
                                                       ProcessList list) const {
  static constexpr const char* kNames[3][3] = {
      {"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2",
       "nvmlDeviceGetComputeRunningProcesses"},
      {"nvmlDeviceGetGraphicsRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses_v2",
       "nvmlDeviceGetGraphicsRunningProcesses"},
      {"nvmlDeviceGetMPSComputeRunningProcesses_v3", "nvmlDeviceGetMPSComputeRunningProcesses_v2",
       "nvmlDeviceGetMPSComputeRunningProcesses"}};
  const auto& names = kNames[list == kGraphicsProcess ? 1 : list == kMpsProcess ? 2 : 0];
  const ListCalls& found = calls(list);
  // _v2 and _v3 fill the same struct (nvml.h's nvmlProcessInfo_t is nvmlProcessInfo_v2_t).
  if (found.v3 != nullptr) {
    return readList<decltype(&::nvmlDeviceGetComputeRunningProcesses_v3), nvmlProcessInfo_t>(
        found.v3, names[0], device.rawHandle(), list);
  }
  if (found.v2 != nullptr) {
    return readList<decltype(&::nvmlDeviceGetComputeRunningProcesses_v2), nvmlProcessInfo_v2_t>(
        found.v2, names[1], device.rawHandle(), list);
  }
  if (found.v1 != nullptr) {
    return readList<decltype(&::nvmlDeviceGetComputeRunningProcesses), nvmlProcessInfo_v1_t>(
        found.v1, names[2], device.rawHandle(), list);
  }
  return missing<std::vector<Process>>(names[0]);
}

Result<std::vector<Process>> DeviceStateApi::runningProcesses(const Device& device) const {
  Result<std::vector<Process>> merged = processes(device, kComputeProcess);
  if (!merged.ok()) return merged;
  for (const ProcessList list : {kGraphicsProcess, kMpsProcess}) {
    const Result<std::vector<Process>> more = processes(device, list);
    if (!more.ok()) continue;  // not supported, not in this library: the others still count
    for (const Process& process : more.value) {
      const auto same =
          std::find_if(merged.value.begin(), merged.value.end(),
                       [&](const Process& known) { return known.pid == process.pid; });
      if (same == merged.value.end()) {
        merged.value.push_back(process);
        continue;
      }
      same->lists |= process.lists;
      if (process.usedBytes && (!same->usedBytes || *process.usedBytes > *same->usedBytes)) {
        same->usedBytes = process.usedBytes;
      }
    }
  }
  return merged;
}

Result<MemoryUse> DeviceStateApi::memoryUse(const Device& device) const {
  if (memoryV2_ != nullptr) {
    nvmlMemory_v2_t raw{};
    raw.version = nvmlMemory_v2;
    const Return code =
        toReturn(as<decltype(&::nvmlDeviceGetMemoryInfo_v2)>(memoryV2_)(device.rawHandle(), &raw));
    Result<MemoryUse> result{code, {}, "nvmlDeviceGetMemoryInfo_v2"};
    if (result.ok()) result.value = {raw.total, raw.used, raw.reserved};
    // A driver that has the symbol but not this version answers so: the v1 call then tells.
    if (code != Return::kArgumentVersionMismatch || memoryV1_ == nullptr) return result;
  }
  if (memoryV1_ == nullptr) return missing<MemoryUse>("nvmlDeviceGetMemoryInfo_v2");
  nvmlMemory_t raw{};
  const Return code =
      toReturn(as<decltype(&::nvmlDeviceGetMemoryInfo)>(memoryV1_)(device.rawHandle(), &raw));
  Result<MemoryUse> result{code, {}, "nvmlDeviceGetMemoryInfo"};
  if (result.ok()) result.value = {raw.total, raw.used, std::nullopt};
  return result;
}

Result<unsigned> DeviceStateApi::recoveryAction(const Device& device) const {
  constexpr const char* kFunction = "nvmlDeviceGetFieldValues";
  if (fieldValues_ == nullptr) return missing<unsigned>(kFunction);
  nvmlFieldValue_t value{};
  value.fieldId = NVML_FI_DEV_GET_GPU_RECOVERY_ACTION;
  const Return code = toReturn(
      as<decltype(&::nvmlDeviceGetFieldValues)>(fieldValues_)(device.rawHandle(), 1, &value));
  if (code != Return::kSuccess) return {code, 0u, kFunction};
  const Return own = toReturn(value.nvmlReturn);
  if (own != Return::kSuccess) return {own, 0u, kFunction};
  unsigned action = 0;
  switch (value.valueType) {
    case NVML_VALUE_TYPE_UNSIGNED_LONG:
      action = static_cast<unsigned>(value.value.ulVal);
      break;
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
      action = static_cast<unsigned>(value.value.ullVal);
      break;
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG:
      action = static_cast<unsigned>(value.value.sllVal);
      break;
    case NVML_VALUE_TYPE_SIGNED_INT:
      action = static_cast<unsigned>(value.value.siVal);
      break;
    case NVML_VALUE_TYPE_UNSIGNED_SHORT:
      action = value.value.usVal;
      break;
    default:  // NVML_VALUE_TYPE_UNSIGNED_INT, what drivers give for this field
      action = value.value.uiVal;
      break;
  }
  return {Return::kSuccess, action, kFunction};
}

Result<FabricInfo> DeviceStateApi::fabricInfo(const Device& device) const {
  if (fabricInfoV_ != nullptr) {
    constexpr const char* kFunction = "nvmlDeviceGetGpuFabricInfoV";
    const auto call = as<decltype(&::nvmlDeviceGetGpuFabricInfoV)>(fabricInfoV_);
    nvmlGpuFabricInfoV_t raw{};
    raw.version = nvmlGpuFabricInfo_v3;
    Return code = toReturn(call(device.rawHandle(), &raw));
    bool v3 = true;
    if (code == Return::kArgumentVersionMismatch) {
      // A driver before v3 (550): the v2 struct is v3's beginning.
      raw = nvmlGpuFabricInfoV_t{};
      raw.version = nvmlGpuFabricInfo_v2;
      code = toReturn(call(device.rawHandle(), &raw));
      v3 = false;
    }
    Result<FabricInfo> result{code, {}, kFunction};
    if (!result.ok()) return result;
    FabricInfo& info = result.value;
    info.state = raw.state;
    info.status = toReturn(raw.status);
    info.cliqueId = raw.cliqueId;
    std::memcpy(info.clusterUuid.data(), raw.clusterUuid, info.clusterUuid.size());
    info.healthMask = raw.healthMask;
    if (v3) info.healthSummary = raw.healthSummary;
    return result;
  }
  constexpr const char* kFunction = "nvmlDeviceGetGpuFabricInfo";
  if (fabricInfo_ == nullptr) return missing<FabricInfo>("nvmlDeviceGetGpuFabricInfoV");
  nvmlGpuFabricInfo_t raw{};
  const Return code =
      toReturn(as<decltype(&::nvmlDeviceGetGpuFabricInfo)>(fabricInfo_)(device.rawHandle(), &raw));
  Result<FabricInfo> result{code, {}, kFunction};
  if (!result.ok()) return result;
  result.value.state = raw.state;
  result.value.status = toReturn(raw.status);
  result.value.cliqueId = raw.cliqueId;
  std::memcpy(result.value.clusterUuid.data(), raw.clusterUuid, result.value.clusterUuid.size());
  return result;
}

Result<ComputeMode> DeviceStateApi::computeMode(const Device& device) const {
  constexpr const char* kFunction = "nvmlDeviceGetComputeMode";
  if (computeMode_ == nullptr) return missing<ComputeMode>(kFunction);
  nvmlComputeMode_t mode = NVML_COMPUTEMODE_DEFAULT;
  const Return code =
      toReturn(as<decltype(&::nvmlDeviceGetComputeMode)>(computeMode_)(device.rawHandle(), &mode));
  return {code, code == Return::kSuccess ? static_cast<ComputeMode>(mode) : ComputeMode::kDefault,
          kFunction};
}

}  // namespace flink::nvml
