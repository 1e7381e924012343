// Health at a point in time: whether each GPU of the host may be handed out, from what NVML says
// now and from the host's health records (HealthRecords.h).
//
// A GPU is unhealthy when NVML says it is lost (NVML_ERROR_GPU_IS_LOST from its handle or a
// query) or that it needs a reset (NVML_ERROR_RESET_REQUIRED from its handle or a query), when
// the driver asks for a recovery action (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION other than NONE),
// when its NVLink fabric registration has not completed successfully (nvmlDeviceGetGpuFabricInfoV
// on NVSwitch hosts: CUDA would fail on it), when row remapping failed or is pending
// (nvmlDeviceGetRemappedRows: failureOccurred, isPending), when retired pages are pending
// (nvmlDeviceGetRetiredPagesPendingStatus, asked only of GPUs without row remapping: those with it
// report their pages there), when `watch` recorded it unhealthy, or when an operator drained it. A
// query the GPU does not support gives no verdict: no GPU is called unhealthy because a call is
// unsupported. A MIG instance is unhealthy when its GPU is, or when a record names the instance
// itself; a whole GPU is also taken out when a record names one of its instances (a whole-GPU owner
// would use the broken instance). A fabric that reports degraded bandwidth is a note, not a verdict
// (placement ranks the GPU after the others: host/placement/).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "host/enumeration/GpuEnumerator.h"
#include "host/enumeration/UnitIndex.h"
#include "host/health/HealthRecords.h"
#include "host/nvml/Nvml.h"
#include "host/nvml/NvmlDeviceState.h"
#include "host/nvml/NvmlHealth.h"
#include "util/Notice.h"

namespace flink::health {

/// --health: what the allocators do with an unhealthy GPU.
enum class HealthMode {
  kSkip,    ///< leave it out, with a note naming it and why (the default)
  kWarn,    ///< hand it out, with a warning
  kIgnore,  ///< do not look: neither NVML's health queries nor the records are read
};

/// "skip", "warn", "ignore"; nullopt for anything else.
std::optional<HealthMode> parseHealthMode(std::string_view text);

/// "skip", "warn", "ignore": the word parseHealthMode reads.
std::string_view healthModeName(HealthMode mode) noexcept;

/// Why a unit may not be handed out.
struct Problem {
  enum class Kind {
    kLost,
    kResetRequired,
    kRecoveryAction,
    kFabricNotReady,
    kRowRemapFailed,
    kRowRemapPending,
    kRetiredPagesPending,
    kUnhealthy,
    kDrained
  };
  Kind kind;
  /// One line for a person, without the GPU's name: "drained since 2026-12-01T09:40:00Z by uid
  /// 1000 (alice): fan noise". A record's reason is in it as strings::quoteForMessage quotes it
  /// (the record itself keeps it as it was).
  std::string text;
  /// The record behind kUnhealthy and kDrained.
  std::optional<HealthRecord> record = {};
};

/// "lost", "unhealthy" or "drained": the word for a problem of this kind in status and check.
std::string_view stateWord(Problem::Kind kind);

/// What the problem is, as a program tells problems apart (JSON's "cause"): "lost",
/// "reset_required", "recovery_action", "fabric_not_ready", "row_remap_failed",
/// "row_remap_pending", "retired_pages_pending", "watch_verdict" (an Xid or ECC event flink-gpu
/// watch recorded) or "drained".
std::string_view causeWord(Problem::Kind kind);

/// What NVML says of one whole GPU now.
struct GpuProbe {
  unsigned index = 0;
  std::optional<std::string> uuid;
  /// NVML_ERROR_GPU_IS_LOST from its handle or a query: the failure's text.
  std::optional<std::string> lost;
  /// NVML_ERROR_RESET_REQUIRED from its handle or a query: the failure's text.
  std::optional<std::string> resetRequired;
  std::optional<nvml::RemappedRows> remappedRows;
  std::optional<bool> retiredPagesPending;
  std::optional<bool> persistenceMode;
  /// NVML_FI_DEV_GET_GPU_RECOVERY_ACTION as the driver gave it (nvml::RecoveryAction's values, or
  /// one newer than this binding); nullopt where the driver has no such field or did not answer.
  std::optional<unsigned> recoveryAction;
  /// nvmlDeviceGetGpuFabricInfoV (else the unversioned call); nullopt on a GPU without a fabric
  /// (NVML_ERROR_NOT_SUPPORTED, or a library without the call).
  std::optional<nvml::FabricInfo> fabric;
  /// nvmlDeviceGetComputeMode; nullopt where the library or the GPU does not tell.
  std::optional<nvml::ComputeMode> computeMode;
};

/// One NVML session's look at every GPU.
struct NvmlProbe {
  /// NVML could be used (loaded, initialized, counted).
  bool usable = false;
  /// Why not ("NVML is not usable: …"), when !usable.
  std::string problem;
  /// The library is not installed at all (no driver on this host).
  bool libraryAbsent = false;
  /// The init failed with NVML_ERROR_LIB_RM_VERSION_MISMATCH: the driver was upgraded and its
  /// old kernel module is still loaded (the kernel's list still names the GPUs: KernelGpus.h).
  bool versionMismatch = false;
  /// nvmlDeviceGetCount.
  unsigned count = 0;
  std::vector<GpuProbe> gpus;
};

/// The health queries of one NVML session, one GPU at a time: what probeNvml asks of every GPU,
/// and what `watch` asks of a GPU before it re-admits it. Lives no longer than `session`.
class GpuProber {
 public:
  explicit GpuProber(const nvml::NvmlSession& session);
  /// GPU `index`'s handle and every health query (UUID, memory, row remapping or retired pages,
  /// persistence mode, the recovery action, the NVLink fabric, the compute mode); never throws.
  GpuProbe probe(unsigned index) const;

 private:
  const nvml::NvmlSession& session_;
  nvml::NvmlHealthApi health_;
  nvml::DeviceStateApi state_;
};

/// Loads NVML ($FLINK_GPU_NVML_LIBRARY, else libnvidia-ml.so.1), opens a session and asks each
/// GPU's health (GpuProber); never throws.
NvmlProbe probeNvml();

/// The NVML problems of one GPU's probe (lost, reset required, the driver's recovery action, the
/// NVLink fabric not ready, row remapping, retired pages): the one rule of what NVML's answers
/// make of a GPU, for the allocators, status, check and watch alike.
std::vector<Problem> problemsOf(const GpuProbe& probe);

/// The problem a fabric's registration gives its GPU: none when it has completed successfully or
/// the GPU has no fabric (NVML_GPU_FABRIC_STATE_NOT_SUPPORTED), else kFabricNotReady.
std::optional<Problem> fabricProblem(const nvml::FabricInfo& fabric);

/// What NVML says of a GPU that does not keep it out.
struct HealthNote {
  enum class Kind {
    kFabricDegraded,  ///< its NVLink fabric's health mask reports degraded bandwidth
  };
  Kind kind;
  /// One line for a person, without the GPU's name.
  std::string text;
};

/// "fabric_degraded": the word for a note of this kind (check's and status's JSON).
std::string_view noteWord(HealthNote::Kind kind);

/// The notes of one GPU's probe (the one rule of them, as problemsOf is of problems).
std::vector<HealthNote> notesOf(const GpuProbe& probe);

/// The problems of each of `units` (in order), from `probe` (may be null: records only) and
/// `records`. `devices` indexes every device enumerated (UnitIndex::of), so that an instance
/// finds its GPU and a GPU its instances; a unit it does not know (a --gpus entry NVML does not
/// list) is judged by its records alone.
std::vector<std::vector<Problem>> assess(const std::vector<discovery::GpuDevice>& units,
                                         const discovery::UnitIndex& devices,
                                         const NvmlProbe* probe,
                                         const std::vector<HealthRecord>& records);

/// The problems of each unit of `units` (in order), from `probe` and `records`, which are read by
/// `index`'s record reading (a MIG instance has its GPU's problems, a GPU its instances' records).
std::vector<std::vector<Problem>> assess(const discovery::UnitIndex& index,
                                         const std::vector<discovery::UnitRef>& units,
                                         const NvmlProbe* probe,
                                         const std::vector<HealthRecord>& records);

struct FilteredUnits {
  std::vector<discovery::GpuDevice> units;
  /// What to say on stderr: a note per unit not handed out (a warning per unit handed out anyway,
  /// with kWarn), and what reading the health records found (a change cut short, shown rolled
  /// back).
  std::vector<Notice> notices;
};

/// The health records beside the coordination file cannot be read (permissions, a damaged or
/// untrusted file, not a regular file): an allocator then hands out nothing, since a drained or
/// unhealthy GPU must never go out because its record could not be read. what() is the cause,
/// naming the health records.
class HealthRecordsUnreadable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// What the allocators call: `units` less the unhealthy ones (kSkip), or all of them with a
/// warning each (kWarn), or all without a look (kIgnore). The health records are those beside
/// `coordinationFile`, read without waiting on their lock; NVML is asked only when `askNvml`
/// (the units came from NVML). The units are taken (moved into the result), not copied.
/// @throws HealthRecordsUnreadable (kSkip, kWarn) when the records cannot be read.
FilteredUnits filterUnhealthy(std::vector<discovery::GpuDevice> units,
                              const discovery::UnitIndex& devices, bool askNvml, HealthMode mode,
                              const std::filesystem::path& coordinationFile);

}  // namespace flink::health
