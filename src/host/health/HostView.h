// Every GPU of the host as status, check and the metrics see it: what NVML lists, what the
// coordination file records, and what the health records and NVML's health queries say.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "host/coordination/Coordination.h"
#include "host/enumeration/GpuEnumerator.h"
#include "host/enumeration/KernelGpus.h"
#include "host/enumeration/UnitIndex.h"
#include "host/health/HealthRecords.h"
#include "host/health/HostHealth.h"
#include "host/usage/GpuUse.h"
#include "util/Notice.h"

namespace flink::cli {

/// What a unit of the host is now, the first that applies in this order: unhealthy (lost
/// included), drained, held (whole), shared (live shares, none whole), busy (a unit that shares
/// its hardware is held or shared, or a process no record explains uses it), free.
enum class GpuState { kFree, kHeld, kShared, kBusy, kUnhealthy, kDrained };

/// "free", "held", "shared", "busy", "unhealthy", "drained": the word status prints (its STATE
/// column, JSON's "state").
std::string_view gpuStateWord(GpuState state);

/// One unit of the host (a whole GPU by index, a MIG instance by UUID, or a GPU known only from
/// a record).
struct GpuView {
  std::string gpu;
  std::optional<std::string> uuid;
  GpuState state = GpuState::kFree;
  /// The records that hold it, whole or a share (Record::share).
  std::vector<coordination::RecordStatus> holders;
  /// Its lease is held while no record names it (an operator's `release --force`, Flink's `sed`
  /// taking its line with another): held all the same.
  bool heldByLease = false;
  /// The indices of its share leases (`<its lease>.share-<index>`, Leases.h) held while no record
  /// names them: live shares all the same. Ascending, each once.
  std::vector<unsigned> shareLeases;
  /// The number of shares (K) the operator declared it shared into, where the caller read the
  /// sharing declarations (host/sharing, a layer above: viewHost leaves it unset) and it is
  /// declared. The metrics' flink_gpu_shares.
  std::optional<unsigned> declaredShares;
  std::vector<health::Problem> problems;
  /// nvmlDeviceGetPersistenceMode, where NVML tells (whole GPUs).
  std::optional<bool> persistenceMode;
  /// The driver's recovery action (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION), where it tells (whole
  /// GPUs): 0 none.
  std::optional<unsigned> recoveryAction;
  /// nvmlDeviceGetComputeMode, where NVML tells (whole GPUs).
  std::optional<nvml::ComputeMode> computeMode;
  /// What NVML says of it that does not keep it out (health::notesOf: a degraded NVLink fabric),
  /// one line each (a MIG instance: its GPU's).
  std::vector<health::HealthNote> notes;
  /// NVML lists it (enumerated, or counted and lost); false for a unit only records name.
  bool listedByNvml = false;
  /// The kernel's driver lists it (HostView::kernel), NVML failing with a driver/library version
  /// mismatch: what the kernel says of it (bus id, model, minor). Its index is its place in the
  /// kernel's list by bus id, NVML's default order.
  std::optional<discovery::KernelGpu> kernel;
  bool isMigInstance = false;
  /// For a MIG instance, its GPU's index.
  std::optional<std::string> parent;
  /// Free of holders, but sharing hardware with a unit that is held (a GPU's MIG instance, an
  /// instance's GPU held whole): GpuState::kBusy, and why, one line each.
  std::vector<std::string> busyBecause;
  /// The processes NVML lists on it that no record explains (host/usage/GpuUse.h; set by
  /// addUse): a free unit with one is GpuState::kBusy.
  std::vector<usage::ForeignProcess> foreignProcesses;
  /// NVML did not tell its processes (usage::Judgement::unread): foreignProcesses says nothing.
  bool processesUnread = false;
  /// Only records name it, and this host does not have it (findStale): a board replaced, a MIG
  /// layout changed. Its problems are stale state, never the host's.
  bool notOnHost = false;
  /// Memory in use while NVML lists no process on it: said, no state of its own.
  std::optional<std::uint64_t> memoryWithoutProcessMiB;

  bool healthy() const;
  bool drained() const;
  /// Whether it is held whole: by a running owner's record without a share, or by its lease
  /// without a record.
  bool heldWhole() const;
  /// Its live shares, the share allocator's rule (ShareAllocation.h): the indices of the share
  /// records that hold it (running holders) and of shareLeases; ascending, each once.
  std::vector<unsigned> liveShares() const;
  /// The unhealthy record with the latest time that has an Xid.
  const health::HealthRecord* lastXid() const;
};

/// State that names a GPU this host does not have (discovery::UnitIndex::presence): it blocks
/// nothing, and is listed so that it does not sit there unseen.
struct StaleEntry {
  enum class Kind { kRecord, kDrain, kUnhealthy, kSharing };
  Kind kind = Kind::kRecord;
  /// The GPU and the whole GPU's UUID as written.
  std::string gpu;
  std::optional<std::string> uuid;
  /// A record's owner, and whether it holds its GPU (coordination::RecordStatus::running).
  std::optional<pid_t> ownerPid;
  bool ownerRunning = false;
  /// The note: "sharing declaration names GPU 5 (GPU-…) which this host does not have; …".
  std::string text;
};

/// "record", "drain", "unhealthy", "sharing": check's cause and the metric's `kind` label.
std::string_view staleKindWord(StaleEntry::Kind kind);

/// The entry of `kind` for a record of `gpu` (with `uuid`), its text included.
StaleEntry staleEntry(StaleEntry::Kind kind, const std::string& gpu,
                      const std::optional<std::string>& uuid,
                      const coordination::RecordStatus* record = nullptr);

struct HostView {
  std::vector<GpuView> gpus;
  /// Every unit of the view, with every spelling of it (host/enumeration/UnitIndex.h), and each
  /// view's unit in it (parallel to `gpus`): how what else names a GPU is read.
  std::shared_ptr<const discovery::UnitIndex> index;
  std::vector<discovery::UnitRef> refs;
  /// NVML's own look (count, lost GPUs); `usable` false when it cannot be used.
  health::NvmlProbe probe;
  /// The kernel's list of GPUs (/proc/driver/nvidia/gpus), when NVML fails with a driver/library
  /// version mismatch (probe.versionMismatch) and the module's folder is there: then its GPUs
  /// are the view's devices, unless the caller gave some.
  std::optional<discovery::KernelGpus> kernel;
  /// The health file as read; nullopt with `healthError` when it cannot be.
  std::optional<health::HealthFile> health;
  std::string healthError;
  /// Set by the caller when the sharing declarations cannot be read (GpuView::declaredShares then
  /// says nothing): the metrics' flink_gpu_sharing_declarations_readable.
  std::string sharingError;
  /// The host's own units (its enumeration alone) and how much of the host they are: what
  /// presenceOf judges against. Set by findStale.
  std::shared_ptr<const discovery::UnitIndex> hostUnits;
  discovery::HostCoverage coverage;
  /// The records, drains and verdicts that name a GPU this host does not have (findStale), then
  /// the sharing declarations that do (added by the caller, a layer above, through presenceOf).
  std::vector<StaleEntry> stale;

  /// Whether a record of `gpu` (with `uuid`) names a unit of this host: UnitIndex::presence.
  discovery::Presence presenceOf(std::string_view gpu,
                                 const std::optional<std::string>& uuid) const;
  /// Whether addUse judged the processes NVML lists (NVML usable, and this process sees the
  /// host's pids): only then is flink_gpu_foreign_processes written.
  bool useJudged = false;
  /// What NVML lists on each unit, as judgeUse read it (usage::readUse); empty where it did not.
  std::vector<usage::UnitUse> use;
};

/// Builds the view from the coordination file's `status`, NVML (when `askNvml`) and the health
/// records beside `coordinationFile`. `devices`: what NVML enumerated (may be empty); when NVML
/// fails with a driver/library version mismatch and `devices` is empty, the kernel's list.
HostView viewHost(const std::string& coordinationFile, const coordination::Status& status,
                  const std::vector<discovery::GpuDevice>& devices, bool askNvml);

/// Sets host.hostUnits and host.coverage from `devices` (the host's enumeration, as viewHost got
/// it) and `coverage`, and lists in host.stale the records of `status` and the drains and verdicts
/// of host.health that name a GPU this host does not have. Nothing when coverage cannot tell.
void findStale(HostView& host, const coordination::Status& status,
               const std::vector<discovery::GpuDevice>& devices, discovery::HostCoverage coverage);
/// The processes `judgement` found on the units of `host` that no record explains, and the
/// memory in use without a process: a free unit with such a process becomes busy. `judged`:
/// whether the judgement could be made at all (HostView::useJudged).
void addUse(HostView& host, const usage::Judgement& judgement, bool judged);

/// What status and check ask: NVML's processes and memory of `devices` (none when the probe
/// found NVML unusable), judged by usage::judge with `status`'s records and the GPUs declared
/// shared with MPS (`mpsShared`, by GpuView::gpu), into `host` (addUse); keeps what it read in
/// host.use. Returns the note of the units not judged, where this process does not see the
/// host's pids.
std::optional<Notice> judgeUse(HostView& host, const coordination::Status& status,
                               const std::vector<discovery::GpuDevice>& devices,
                               const std::unordered_set<std::string>& mpsShared);

/// "Xid 79 (…) since 2026-…; held by process 12 (running)", "share 1/4 held by process 13
/// (running)": the detail column of status, without what the sharing declarations say; eight of
/// its records at most, then how many more.
std::string describeView(const GpuView& view);

/// The build the metrics come from: flink_gpu_build_info's labels.
struct BuildLabels {
  std::string version;
  std::string commit;
};

/// Prometheus' text exposition format (version 0.0.4) for node_exporter's textfile collector:
/// flink_gpu_held (whole GPUs only), _shares (GpuView::declaredShares), _shares_held (of each
/// GPU declared or with live shares), _healthy (NaN where NVML cannot tell and no record says
/// unhealthy), _drained, _last_xid, _last_xid_timestamp_seconds, flink_gpu_nvml_up,
/// flink_gpu_gpus (by source: nvml, kernel, records), flink_gpu_foreign_processes (where
/// HostView::useJudged), flink_gpu_build_info, flink_gpu_coordination_records,
/// flink_gpu_coordination_dead_owner_records, flink_gpu_stale_entries (by kind; NaN where the
/// host's coverage cannot tell). Every series of a GPU has the same labels, gpu and uuid (empty
/// when unknown); no label grows without bound (no pid).
std::string prometheusMetrics(const HostView& view, const coordination::Status& status,
                              const BuildLabels& build);

}  // namespace flink::cli
