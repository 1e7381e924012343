// What the driver says a device is doing and whether it may be used now, beside the binding of
// Nvml.h: the processes running on it, its memory in use, NVIDIA's recovery action, its NVLink
// fabric registration and its compute mode. Bound with dlsym on first use (DeviceStateApi), each
// call optional: a library without one gives kFunctionNotFound, as a missing call does in Nvml.h,
// and each versioned call falls back to the older symbols the library has.
//
// Thread-safety: as Nvml.h. A DeviceStateApi is immutable once made.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "host/nvml/Nvml.h"

namespace flink::nvml {

/// Which of NVML's process lists named a process (a bit each; one process may be in several).
enum ProcessList : unsigned {
  kComputeProcess = 1u << 0,   ///< nvmlDeviceGetComputeRunningProcesses
  kGraphicsProcess = 1u << 1,  ///< nvmlDeviceGetGraphicsRunningProcesses
  kMpsProcess = 1u << 2,       ///< nvmlDeviceGetMPSComputeRunningProcesses (an MPS client)
};

/// One process NVML lists on a device.
struct Process {
  /// In the host's pid namespace (the driver's), whatever namespace the caller is in.
  unsigned pid = 0;
  /// The GPU memory it uses, in bytes; nullopt where the driver cannot tell.
  std::optional<std::uint64_t> usedBytes;
  /// ProcessList bits.
  unsigned lists = 0;
  /// The MIG instance it runs on (the _v2/_v3 calls on a MIG-mode GPU's handle); nullopt without.
  std::optional<unsigned> gpuInstanceId;
  std::optional<unsigned> computeInstanceId;
};

/// nvmlDeviceGetMemoryInfo_v2, else nvmlDeviceGetMemoryInfo.
struct MemoryUse {
  std::uint64_t totalBytes = 0;
  /// What allocations use. With the v1 call it includes what the driver reserves.
  std::uint64_t usedBytes = 0;
  /// What the driver and firmware reserve; nullopt with the v1 call, which counts it as used.
  std::optional<std::uint64_t> reservedBytes;
};

/// nvmlDeviceGpuRecoveryAction_t's values: what the driver asks before the GPU is used again.
enum class RecoveryAction : unsigned {
  kNone = 0,
  kGpuReset = 1,
  kNodeReboot = 2,
  kDrainP2p = 3,
  kDrainAndReset = 4,
  kRecoverImexDomain = 5,
};

/// NVIDIA's words for `action`: "none", "requires a GPU reset", "requires a node reboot", "drain
/// peer-to-peer traffic", "drain and reset", "recover the IMEX domain"; for a value this binding
/// does not know, "unknown recovery action N".
std::string recoveryActionText(unsigned action);

/// NVML_GPU_FABRIC_STATE_*.
enum class FabricState : unsigned char {
  kNotSupported = 0,
  kNotStarted = 1,
  kInProgress = 2,
  kCompleted = 3,
};

/// "not supported", "not started", "in progress", "completed"; else "state N".
std::string fabricStateText(unsigned state);

/// nvmlDeviceGetGpuFabricInfoV (v3, else v2), else nvmlDeviceGetGpuFabricInfo.
struct FabricInfo {
  /// The registration's state (an unknown value is kept as it is).
  unsigned state = 0;
  /// The registration's outcome; meaningful only once state is kCompleted.
  Return status = Return::kSuccess;
  unsigned cliqueId = 0;
  /// The fabric cluster's UUID, as 16 bytes ("" of all zeros means none).
  std::array<unsigned char, 16> clusterUuid{};
  /// healthMask (v2 and later); nullopt from the unversioned call.
  std::optional<unsigned> healthMask;
  /// healthSummary (v3); nullopt from older calls.
  std::optional<unsigned> healthSummary;

  /// The cluster UUID as 8-4-4-4-12 lower-case hex; nullopt when it is all zeros.
  std::optional<std::string> clusterUuidText() const;
  /// Whether the health mask says the bandwidth is degraded (NVML_GPU_FABRIC_HEALTH_MASK_
  /// DEGRADED_BW_TRUE).
  bool degradedBandwidth() const;
};

/// nvmlComputeMode_t.
enum class ComputeMode : unsigned {
  kDefault = 0,
  kExclusiveThread = 1,
  kProhibited = 2,
  kExclusiveProcess = 3,
};

/// The device-state functions of one library, looked up once.
class DeviceStateApi {
 public:
  explicit DeviceStateApi(const NvmlLibrary& library);

  /// One of NVML's lists (`list` one ProcessList bit): the _v3 call, else _v2, else the
  /// unversioned one; the buffer grown while NVML answers NVML_ERROR_INSUFFICIENT_SIZE. For a
  /// MIG instance's handle, the instance's own processes; for a MIG-mode GPU's handle, all of its
  /// instances' (privileged callers only: others get kNoPermission).
  Result<std::vector<Process>> processes(const Device& device, ProcessList list) const;
  /// The three lists as one, each process once (its `lists` telling where it was seen, its
  /// memory the largest any list gave). kSuccess when at least the compute list answered; the
  /// code of the compute list otherwise. A list the library lacks, or the device does not
  /// support, is left out.
  Result<std::vector<Process>> runningProcesses(const Device& device) const;
  /// nvmlDeviceGetMemoryInfo_v2, else nvmlDeviceGetMemoryInfo.
  Result<MemoryUse> memoryUse(const Device& device) const;
  /// NVML_FI_DEV_GET_GPU_RECOVERY_ACTION through nvmlDeviceGetFieldValues: the field's own
  /// return code when the call answered (kNotSupported from drivers that do not have the field),
  /// else the call's. The value as the driver gave it, so that an action newer than this binding
  /// is still seen (recoveryActionText names it).
  Result<unsigned> recoveryAction(const Device& device) const;
  /// nvmlDeviceGetGpuFabricInfoV with the v3 struct, then v2 where the driver answers
  /// kArgumentVersionMismatch; else the unversioned call. kNotSupported on GPUs without a fabric.
  Result<FabricInfo> fabricInfo(const Device& device) const;
  /// nvmlDeviceGetComputeMode.
  Result<ComputeMode> computeMode(const Device& device) const;

 private:
  struct ListCalls {
    void* v3 = nullptr;
    void* v2 = nullptr;
    void* v1 = nullptr;
  };
  const ListCalls& calls(ProcessList list) const;

  ListCalls compute_;
  ListCalls graphics_;
  ListCalls mps_;
  void* memoryV2_ = nullptr;
  void* memoryV1_ = nullptr;
  void* fieldValues_ = nullptr;
  void* fabricInfoV_ = nullptr;
  void* fabricInfo_ = nullptr;
  void* computeMode_ = nullptr;
};

}  // namespace flink::nvml
