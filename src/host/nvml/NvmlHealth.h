// NVML's health calls and event sets, beside the binding of Nvml.h: what the health rules
// (src/host/health/) and `flink-gpu watch` ask. Bound with dlsym on first use, each call optional:
// a library without one gives kFunctionNotFound, as a missing property call does in Nvml.h.
//
//   NvmlHealthApi  the functions of one loaded library
//   EventSet       nvmlEventSetCreate … nvmlEventSetFree, owned (freed in the destructor)
//
// Thread-safety: as Nvml.h. An EventSet is used from one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "host/nvml/Nvml.h"

struct nvmlEventSet_st;

namespace flink::nvml {

/// nvml.h's event type bits (nvmlEventType*).
inline constexpr std::uint64_t kEventSingleBitEcc = 0x1;
inline constexpr std::uint64_t kEventDoubleBitEcc = 0x2;
inline constexpr std::uint64_t kEventXidCritical = 0x8;
/// The driver's recovery action changed (read it with DeviceStateApi::recoveryAction).
inline constexpr std::uint64_t kEventGpuRecoveryAction = 0x8000;

/// nvmlDeviceGetRemappedRows: rows remapped for correctable and uncorrectable errors, whether a
/// remapping waits for the next GPU reset, and whether one failed.
struct RemappedRows {
  unsigned corrected = 0;
  unsigned uncorrected = 0;
  bool pending = false;
  bool failureOccurred = false;
};

/// One event of nvmlEventSetWait(_v2).
struct Event {
  /// The handle the event came for (a whole GPU's: events are registered on whole GPUs).
  nvmlDevice_st* device = nullptr;
  /// One of the kEvent* bits.
  std::uint64_t type = 0;
  /// The Xid, for kEventXidCritical (999: one the driver does not know); 0 otherwise.
  std::uint64_t data = 0;
  /// The MIG instance NVML attributes an Xid to (nvmlEventSetWait_v2 only); nullopt for none.
  std::optional<unsigned> gpuInstanceId;
  std::optional<unsigned> computeInstanceId;
};

class EventSet;

/// The health and event functions of one library, looked up once.
class NvmlHealthApi {
 public:
  explicit NvmlHealthApi(const NvmlLibrary& library);

  /// nvmlDeviceGetRemappedRows; kNotSupported on GPUs without row remapping (before Ampere).
  Result<RemappedRows> remappedRows(const Device& device) const;
  /// nvmlDeviceGetRetiredPagesPendingStatus: pages retired that wait for a reset.
  Result<bool> retiredPagesPending(const Device& device) const;
  /// nvmlDeviceGetPersistenceMode: whether the driver stays loaded without clients.
  Result<bool> persistenceMode(const Device& device) const;
  /// nvmlDeviceGetSupportedEventTypes: the kEvent* bits the device can report.
  Result<std::uint64_t> supportedEventTypes(const Device& device) const;
  /// nvmlEventSetCreate. The set must not outlive the session it was made in.
  Result<std::shared_ptr<EventSet>> createEventSet() const;
  /// Whether waiting uses nvmlEventSetWait_v2 (else the plain nvmlEventSetWait, which tells no
  /// MIG instance).
  bool hasWaitV2() const noexcept { return waitV2_ != nullptr; }

 private:
  friend class EventSet;
  void* remappedRows_ = nullptr;
  void* retiredPagesPending_ = nullptr;
  void* persistenceMode_ = nullptr;
  void* supportedEventTypes_ = nullptr;
  void* setCreate_ = nullptr;
  void* registerEvents_ = nullptr;
  void* waitV2_ = nullptr;
  void* wait_ = nullptr;
  void* setFree_ = nullptr;
};

/// An NVML event set; nvmlEventSetFree in the destructor.
class EventSet {
 public:
  ~EventSet();
  EventSet(const EventSet&) = delete;
  EventSet& operator=(const EventSet&) = delete;

  /// nvmlDeviceRegisterEvents for `types` (kEvent* bits) on a whole GPU.
  Result<bool> registerEvents(const Device& device, std::uint64_t types);
  /// nvmlEventSetWait_v2 (else nvmlEventSetWait) for at most `timeoutMs`: kTimeout when none
  /// came; kGpuIsLost with `value.device` set where NVML names the lost GPU.
  Result<Event> wait(unsigned timeoutMs);

 private:
  friend class NvmlHealthApi;
  EventSet(const NvmlHealthApi& api, nvmlEventSet_st* set) : api_(api), set_(set) {}
  NvmlHealthApi api_;
  nvmlEventSet_st* set_;
};

}  // namespace flink::nvml
