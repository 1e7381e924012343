// NVML's health calls and event sets (see NvmlHealth.h): each function looked up once with
// dlsym and called through a pointer of the type nvml.h declares (NvmlHealthAbi.h).
#include "host/nvml/NvmlHealth.h"

#include "host/nvml/NvmlCall.h"
#include "host/nvml/NvmlHealthAbi.h"

namespace flink::nvml {
namespace {

using call::as;
using call::kNoInstance;
using call::missing;
using call::toReturn;

// The event bits of NvmlHealth.h are copies of nvml.h's (NvmlHealthAbi.h): a typo in either copy
// fails the build rather than registering for, or reading, another kind of event.
static_assert(kEventSingleBitEcc == static_cast<std::uint64_t>(nvmlEventTypeSingleBitEccError));
static_assert(kEventDoubleBitEcc == static_cast<std::uint64_t>(nvmlEventTypeDoubleBitEccError));
static_assert(kEventXidCritical == static_cast<std::uint64_t>(nvmlEventTypeXidCriticalError));
static_assert(kEventGpuRecoveryAction ==
              static_cast<std::uint64_t>(nvmlEventTypeGpuRecoveryAction));

}  // namespace

NvmlHealthApi::NvmlHealthApi(const NvmlLibrary& library)
    : remappedRows_(library.symbol("nvmlDeviceGetRemappedRows")),
      retiredPagesPending_(library.symbol("nvmlDeviceGetRetiredPagesPendingStatus")),
      persistenceMode_(library.symbol("nvmlDeviceGetPersistenceMode")),
      supportedEventTypes_(library.symbol("nvmlDeviceGetSupportedEventTypes")),
      setCreate_(library.symbol("nvmlEventSetCreate")),
      registerEvents_(library.symbol("nvmlDeviceRegisterEvents")),
      waitV2_(library.symbol("nvmlEventSetWait_v2")),
      wait_(library.symbol("nvmlEventSetWait")),
      setFree_(library.symbol("nvmlEventSetFree")) {}

Result<RemappedRows> NvmlHealthApi::remappedRows(const Device& device) const {
  constexpr const char* kFunction = "nvmlDeviceGetRemappedRows";
  if (remappedRows_ == nullptr) return missing<RemappedRows>(kFunction);
  unsigned int corrected = 0, uncorrected = 0, pending = 0, failure = 0;
  const Return code = toReturn(as<decltype(&::nvmlDeviceGetRemappedRows)>(remappedRows_)(
      device.rawHandle(), &corrected, &uncorrected, &pending, &failure));
  Result<RemappedRows> result{code, {}, kFunction};
  if (result.ok()) result.value = {corrected, uncorrected, pending != 0, failure != 0};
  return result;
}

Result<bool> NvmlHealthApi::retiredPagesPending(const Device& device) const {
  constexpr const char* kFunction = "nvmlDeviceGetRetiredPagesPendingStatus";
  if (retiredPagesPending_ == nullptr) return missing<bool>(kFunction);
  nvmlEnableState_t pending = NVML_FEATURE_DISABLED;
  const Return code = toReturn(as<decltype(&::nvmlDeviceGetRetiredPagesPendingStatus)>(
      retiredPagesPending_)(device.rawHandle(), &pending));
  return {code, code == Return::kSuccess && pending == NVML_FEATURE_ENABLED, kFunction};
}

Result<bool> NvmlHealthApi::persistenceMode(const Device& device) const {
  constexpr const char* kFunction = "nvmlDeviceGetPersistenceMode";
  if (persistenceMode_ == nullptr) return missing<bool>(kFunction);
  nvmlEnableState_t mode = NVML_FEATURE_DISABLED;
  const Return code = toReturn(
      as<decltype(&::nvmlDeviceGetPersistenceMode)>(persistenceMode_)(device.rawHandle(), &mode));
  return {code, code == Return::kSuccess && mode == NVML_FEATURE_ENABLED, kFunction};
}

Result<std::uint64_t> NvmlHealthApi::supportedEventTypes(const Device& device) const {
  constexpr const char* kFunction = "nvmlDeviceGetSupportedEventTypes";
  if (supportedEventTypes_ == nullptr) return missing<std::uint64_t>(kFunction);
  unsigned long long types = 0;
  const Return code = toReturn(as<decltype(&::nvmlDeviceGetSupportedEventTypes)>(
      supportedEventTypes_)(device.rawHandle(), &types));
  return {code, code == Return::kSuccess ? static_cast<std::uint64_t>(types) : 0u, kFunction};
}

Result<std::shared_ptr<EventSet>> NvmlHealthApi::createEventSet() const {
  constexpr const char* kFunction = "nvmlEventSetCreate";
  if (setCreate_ == nullptr || registerEvents_ == nullptr || setFree_ == nullptr ||
      (waitV2_ == nullptr && wait_ == nullptr)) {
    return missing<std::shared_ptr<EventSet>>(kFunction);
  }
  nvmlEventSet_t set = nullptr;
  const Return code = toReturn(as<decltype(&::nvmlEventSetCreate)>(setCreate_)(&set));
  if (code != Return::kSuccess) return {code, nullptr, kFunction};
  return {code, std::shared_ptr<EventSet>(new EventSet(*this, set)), kFunction};
}

EventSet::~EventSet() {
  // Nothing to do about a failed free: the session's shutdown releases what is left.
  static_cast<void>(as<decltype(&::nvmlEventSetFree)>(api_.setFree_)(set_));
}

Result<bool> EventSet::registerEvents(const Device& device, std::uint64_t types) {
  const Return code = toReturn(as<decltype(&::nvmlDeviceRegisterEvents)>(api_.registerEvents_)(
      device.rawHandle(), static_cast<unsigned long long>(types), set_));
  return {code, code == Return::kSuccess, "nvmlDeviceRegisterEvents"};
}

Result<Event> EventSet::wait(unsigned timeoutMs) {
  nvmlEventData_t data{};
  // What the plain nvmlEventSetWait leaves alone must read as "no instance".
  data.gpuInstanceId = kNoInstance;
  data.computeInstanceId = kNoInstance;
  const bool v2 = api_.waitV2_ != nullptr;
  const char* function = v2 ? "nvmlEventSetWait_v2" : "nvmlEventSetWait";
  const auto call = as<decltype(&::nvmlEventSetWait_v2)>(v2 ? api_.waitV2_ : api_.wait_);
  const Return code = toReturn(call(set_, &data, timeoutMs));
  Result<Event> result{code, {}, function};
  result.value.device = data.device;
  if (code != Return::kSuccess) return result;
  result.value.type = data.eventType;
  result.value.data = data.eventData;
  if (v2 && data.gpuInstanceId != kNoInstance) result.value.gpuInstanceId = data.gpuInstanceId;
  if (v2 && data.computeInstanceId != kNoInstance) {
    result.value.computeInstanceId = data.computeInstanceId;
  }
  return result;
}

}  // namespace flink::nvml
