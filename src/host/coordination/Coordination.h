// Coordination of GPUs among the workers of one host, through a locked file of records.
//
// The file is Flink's: one line per GPU held, starting `<gpu> <owner pid>`, so that Flink's own
// script reads what we write (`grep "^<gpu> "`, `awk '{print $2}'`). What we add follows the pid
// after a tab, never a space: the owner's start time (field 22 of /proc/<pid>/stat), so that a
// PID reused by another process does not keep a GPU forever; `uuid=GPU-…`, so that workers that
// number GPUs differently (containers) still mean the same GPU; `pidns=<inode>`, the pid
// namespace in which the pid means that process; `boot=<boot id>`, the boot it was recorded in;
// `lease=<name>`, its lease (Leases.h). Flink's script deletes a record with the unanchored
// `sed -i "/<gpu> /d"`, which deletes every line that holds `<gpu> ` anywhere: with the tabs,
// our lines hold a space only where Flink's own do. Flink's two-field lines and our older
// space-separated three-field lines are read too.
//
// Liveness: whether a record still holds its GPU is the one rule of host/liveness/Liveness.h, a
// table of the facts a record and the reader's host give (boot, pid namespace, start time, pid,
// lease); judge() applies it to a record.
//
// Order of choice (Flink's): an allocation takes GPUs that no record names first, and takes back
// a gone owner's GPU only when those are not enough; a gone owner's record stays until its GPU is
// needed. A crashed owner's children may still be using its GPU, and Flink's own test
// (GPUDiscoveryScriptTest.testCoordinateIndexes) relies on the order.
//
// The file is changed through LockedFile: locked as Flink's script locks it, and written so
// that every reader sees either the old or the new records (see LockedFile.h). Records are
// never moved by a change: a record given back is blanked in place, a new one appended, so that
// a change touches few pages and Flink's script, which does not know our journal, never sees a
// torn line from one (compaction, when more than half the file is blank, is the exception; it
// writes two identical records once).
//
// Thread-safety: every function opens and locks the file itself; calls from several threads or
// processes serialize on the lock.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "host/coordination/CoordinationFile.h"
#include "host/coordination/Leases.h"
#include "host/enumeration/UnitIndex.h"
#include "host/liveness/HostFacts.h"
#include "host/liveness/Liveness.h"
#include "host/store/LockedFile.h"
#include "host/store/RecordFile.h"
#include "host/store/Siblings.h"
#include "host/store/StoreError.h"

namespace flink::coordination {

// The liveness rule and the owner a record names (host/liveness/), as the coordination layer's
// own names.
using liveness::cannotJudge;
using liveness::currentBootId;
using liveness::currentPidNamespace;
using liveness::holdsGpu;
using liveness::inOtherPidNamespace;
using liveness::isRunning;
using liveness::knownToRun;
using liveness::Liveness;
using liveness::ofEarlierBoot;
using liveness::Owner;
using liveness::sameProcess;

/// One share of a GPU the operator declared shared (host/sharing/SharingDeclarations.h): the
/// record's `share=<index>/<count>` field. Shares of a GPU are numbered 0 … count−1; `count` is
/// the declared number of shares (replicas) when the share was granted.
struct ShareSlot {
  unsigned index = 0;
  unsigned count = 0;
  friend bool operator==(const ShareSlot&, const ShareSlot&) = default;
};

/// The most shares a record may say its GPU has: far above any K a declaration allows
/// (host/sharing's kMaxReplicas), so that a record of a newer writer's larger K still parses.
inline constexpr unsigned kMaxShareCount = 4096;

/// The `share=` value "<index>/<count>" (both decimal, index < count, count at most
/// kMaxShareCount), or nullopt for anything else.
std::optional<ShareSlot> parseShareSlot(std::string_view text);

/// "1/4".
std::string formatShareSlot(const ShareSlot& slot);

struct Record;

/// The ids of the units of `index` that `record` names: the index's record reading
/// (UnitIndex::namedByRecord), the one rule of which GPU a record holds.
std::vector<std::string> unitsNamedBy(const Record& record, const discovery::UnitIndex& index);

/// One line of the coordination file.
struct Record {
  std::string gpu;  ///< The device identifier, as discovery printed it ("0", "GPU-…").
  Owner owner;
  /// The GPU's UUID (`GPU-…`) when `gpu` is an index: what the GPU is, whatever the numbering.
  std::optional<std::string> uuid = {};
  /// Fields of a newer writer (`key=value`), kept as they are.
  std::vector<std::string> extra = {};
  /// The lease that also holds the GPU (see Leases.h and the liveness rule above), and the file
  /// it was taken on (`leasefile=<st_dev>:<st_ino>`).
  std::optional<std::string> lease = {};
  std::optional<LeaseFile> leaseFile = {};
  /// A share of a GPU declared shared, for a share record; nullopt for a whole GPU's. A `share=`
  /// field that does not parse is kept in `extra`, and the record then holds its GPU whole (fail
  /// closed: an older or foreign writer's line never frees a GPU).
  std::optional<ShareSlot> share = {};
  friend bool operator==(const Record&, const Record&) = default;
};

/// A line that is not a record (no pid, not a number, too many fields...): kept out of the
/// records, reported, never fatal, and written back unchanged after the records
/// (host/store/RecordFile.h).
using store::JunkLine;

/// Where a line lies in the file's text: its first byte and its length without the '\n'.
struct LineSpan {
  std::size_t offset = 0;
  std::size_t length = 0;
};

struct ParsedRecords {
  std::vector<Record> records;
  std::vector<JunkLine> junk;
  /// Parallel to `records` and `junk`: where each line is.
  std::vector<LineSpan> recordSpans;
  std::vector<LineSpan> junkSpans;
};

/// The coordination file's junk for a person (store::describeJunk): "ignoring line 3 of F, which
/// is not a record: '…'", five at most, then a count that names `flink-gpu release --junk`.
std::vector<std::string> describeJunk(const std::vector<JunkLine>& junk, const std::string& file);

/// Reads a coordination file's text. Blank lines are skipped silently.
ParsedRecords parseRecords(std::string_view text);

/// Writes records as lines `<gpu> <pid>[\t<start time>][\tuuid=…][\tshare=<i>/<K>][\tpidns=…]
/// [\tboot=…][\tlease=…\tleasefile=…]`: a space only after the GPU, as in Flink's lines (see
/// above).
std::string formatRecords(const std::vector<Record>& records);

/// How long to wait for the lock before giving up (host/store/LockedFile.h).
using store::kDefaultLockTimeout;

/// Tells whether an owner is running; replaceable in tests.
using LivenessProbe = std::function<bool(const Owner&)>;

/// Tells the state of a lease (by name); replaceable in tests.
using LeaseProbe =
    std::function<LeaseState(const std::string& name, const std::optional<LeaseFile>& file)>;

/// The liveness rule (host/liveness/Liveness.h) for one record, as `reader` sees it, asking
/// `isRunning` of its owner (at most once, and only of a record of the reader's own pid namespace)
/// and `lease` of its lease where the rule needs them.
Liveness judge(const Record& record, const LivenessProbe& isRunning, const LeaseProbe& lease,
               const liveness::Reader& reader = liveness::HostFacts::system().reader());

/// Units that share hardware, by identifier: a whole GPU's index and the `MIG-…` UUIDs of the
/// instances carved from it (see discovery::relatedUnits). A relation counts both ways when it is
/// given either way; a unit is never related to itself.
using RelatedUnits = std::unordered_map<std::string, std::vector<std::string>>;

struct AllocationRequest {
  std::vector<std::string> gpus;  ///< Every GPU of the host, in the order to hand them out.
  std::size_t amount = 0;
  Owner owner;
  /// A unit is not granted while a unit related to it is held by a running owner, nor together
  /// with a unit related to it. Units need not be in `gpus`: a record of an instance handed out
  /// with --mig blocks its GPU for a requester that hands out whole GPUs.
  RelatedUnits related = {};
  /// The `GPU-…` UUID of each whole GPU of `gpus`, where known. A record that names a UUID holds
  /// the GPU of that UUID, whatever its index says (another container numbers GPUs from 0); new
  /// records carry it.
  std::unordered_map<std::string, std::string> uuids = {};
  /// The host's units and every spelling of them (host/enumeration/UnitIndex.h): how a record is
  /// read. Unset: an index of `gpus`, `uuids` and `related` alone.
  std::shared_ptr<const discovery::UnitIndex> index = {};
  /// Hold each GPU granted with a lease too (Leases.h): the in-process driver and exec do.
  bool lease = false;
  /// Who judges the records and names the leases: this process (HostFacts::system) when unset;
  /// the simulated host gives each simulated process its own.
  std::optional<liveness::Reader> reader = {};
  /// Optional: which of the free units to grant (the placement rule, host/placement/Placement.h).
  /// Called with the units that could be granted, in `gpus` order (those held, blocked or
  /// related to one already granted removed), and how many are still needed; it returns that
  /// many of them. Unset, or an answer that is not that many distinct free units that can go
  /// together (or a throw), means the first free ones in `gpus` order, as without it.
  std::function<std::vector<std::string>(const std::vector<std::string>& freeUnits,
                                         std::size_t amount)>
      choose = {};
  /// Optional: units that the records leave free but that are not to be granted (host/usage/: a
  /// GPU a process no record explains uses), decided with the records read under the file's
  /// lock. Called once per plan, under the lock: nothing slow (no NVML) belongs in it.
  std::function<std::vector<std::string>(const std::vector<Record>& records)> unusable = {};
};

/// A unit that no other running owner holds, but that cannot be granted because a unit related
/// to it is held by one.
struct BlockedUnit {
  std::string gpu;
  Record heldBy;  ///< The record of the related unit.
  friend bool operator==(const BlockedUnit&, const BlockedUnit&) = default;
};

/// One line for a person: "GPU 1 is busy: its MIG instance MIG-… is held by process 123".
std::string describe(const BlockedUnit& blocked);

/// What an allocation took back (Allocation::reclaimed, ShareAllocation::reclaimed), for a
/// person: "took back GPU 0 from process 123, which is no longer running", `shown` lines at most,
/// then one that counts the rest (a file can hold a great many gone owners' records).
std::vector<std::string> describeReclaimed(const std::vector<Record>& reclaimed,
                                           std::size_t shown = 5);

/// "GPU 1 is busy: its MIG instance MIG-… is held by a lease of another process, without a
/// record", for an entry of Allocation::blockedByLeaseOnly.
std::string describeBlockedByLease(const std::string& unit, const std::string& related);

/// Each record read is held once, in `records` or in `reclaimed` (moved there, not copied): a
/// file at its limit of short records is half a million of them, and an allocator holds about
/// what one copy of them takes. The other lists name records by their place in `records`.
struct Allocation {
  /// The GPUs newly recorded for the owner by this request, in `gpus` order; empty unless
  /// `satisfied`.
  std::vector<std::string> granted;
  bool satisfied = false;
  /// The records after this allocation (what the file now holds): those read that it keeps, in
  /// the file's order, then those of `granted`, in its order.
  std::vector<Record> records;
  /// Records of owners that are no longer running, taken back by this allocation: those of the
  /// units granted (and of units related to them), and those of an earlier boot.
  std::vector<Record> reclaimed;
  /// Indices into the records that were read of those in `reclaimed`.
  std::vector<std::size_t> reclaimedIndices;
  /// Records that hold their GPU, of owners other than the requester (what made an allocation
  /// fall short), by their index in `records`, in the file's order.
  std::vector<std::size_t> heldByOthers;
  /// Those of heldByOthers held only because their lease file is missing (Liveness::kLeaseMissing).
  std::vector<std::size_t> failClosed;
  /// The requester's own records from earlier requests, by their index in `records`: held, so
  /// not granted again.
  std::vector<std::size_t> heldByRequester;
  /// The units of `gpus` blocked by those records through `related`, one entry per blocking
  /// record, in `gpus` order.
  std::vector<BlockedUnit> blocked;
  std::vector<JunkLine> junk;
  /// What opening the file found and did (a change cut short, rolled back), one line each.
  std::vector<std::string> notes;
  /// What an operator must hear of: files beside the coordination file that failed the trust
  /// rules and were moved aside (store::admitSibling), one line each.
  std::vector<std::string> warnings;
  /// With AllocationRequest::lease, the leases of `granted` (each unit's names, LeaseNames), in
  /// its order: the GPUs stay held while these live.
  std::vector<Lease> leases;
  /// The names of those leases, as the plan took them through its LeaseSpace.
  std::vector<std::string> leasesTaken;
  /// Units of `gpus` that no record names but whose lease another process holds (a record an
  /// operator released, or that Flink's `sed` took with another GPU's line): not free.
  std::vector<std::string> heldByLeaseOnly;
  /// Units of `gpus` not granted because the lease of a unit related to them (a GPU's MIG
  /// instance, an instance's GPU) is held while no record names that unit: (unit, related unit).
  std::vector<std::pair<std::string, std::string>> blockedByLeaseOnly;
};

/// The allocation rule, its lease policy included, with every fact it reads given: the records,
/// `isRunning` (asked once per distinct owner, only of a record of the reader's pid namespace) and
/// `leases` (each lease's state asked once; leases taken through it).
///   - As in Flink's script, each request takes GPUs the owner does not hold yet: a second request
///     of one owner (two GPU resources of one TaskManager, several TaskManagers of one JVM) gets
///     other GPUs.
///   - A unit is not free while a record holds it or a unit related to it (`related`, judged by
///     the liveness rule), nor while a lease file that names it (unitsOfLeaseName: under any name,
///     record or not) or a unit related to it is held by another process, nor when a unit related
///     to it is already granted in this plan. A lease file this user may not open passes its
///     unit over, with a note.
///   - Of the free units, those that no record names (neither theirs nor a related unit's) go
///     first, chosen among by `choose`; units of gone owners only when those are not enough, and
///     then their records are taken back.
///   - With `lease`, each unit granted is leased under each of its names (LeaseNames) before the
///     file says so; a unit one of whose leases cannot be had is passed over and the plan made
///     again (at most once a unit).
///   - If fewer than `amount` are free nothing is granted and only records of an earlier boot are
///     dropped.
/// Linear in the number of records, lease files, GPUs and relations.
/// The records of `current` are moved into the result (Allocation::records and reclaimed).
Allocation planAllocation(ParsedRecords current, const AllocationRequest& request,
                          const LivenessProbe& isRunning, LeaseSpace& leases);

/// planAllocation with lease states from `lease` alone (ProbeLeaseSpace): no lease file is
/// listed, none taken. An unset `lease` probe finds every lease file missing.
Allocation planAllocation(ParsedRecords current, const AllocationRequest& request,
                          const LivenessProbe& isRunning, const LeaseProbe& lease = {});

/// Locks the file (creating it if needed), plans, writes the result, unlocks. The change is
/// whole or not at all (LockedFile).
/// @throws store::StoreError; the file is then unchanged.
Allocation allocate(const std::filesystem::path& file, const AllocationRequest& request,
                    std::chrono::milliseconds lockTimeout = kDefaultLockTimeout);

struct RecordStatus {
  Record record;
  /// Whether the record holds its GPU (holdsGpu(liveness)).
  bool running = false;
  /// The owner's pid is of another pid namespace: its pid says nothing here.
  bool otherPidNamespace = false;
  Liveness liveness = Liveness::kGone;
};

/// "running", "gone", "other pid namespace", "lease held by another process", … for a person:
/// what status shows of a record, with why it is held where the pid does not say.
std::string describeLiveness(const RecordStatus& status);

struct Status {
  std::vector<RecordStatus> records;
  std::vector<JunkLine> junk;
  /// What opening the file found (a change cut short, which the next writer rolls back).
  std::vector<std::string> notes;
  /// Files beside it that failed the trust rules and were moved aside, one line each.
  std::vector<std::string> warnings;
  /// Leases held that no record names (an operator's `release --force`, Flink's `sed` taking a
  /// line with another): their units are held all the same.
  std::vector<std::string> leasesWithoutRecord;
  /// The file's size and the most it may hold (kMaxCoordinationFileBytes), in bytes.
  std::uint64_t sizeBytes = 0;
  std::uint64_t limitBytes = 0;
};

/// The records of the file, each with whether its owner is running. A missing file has none.
/// @throws store::StoreError
Status readStatus(const std::filesystem::path& file,
                  std::chrono::milliseconds lockTimeout = kDefaultLockTimeout);

/// As readStatus, without taking the file's lock (LockedFile::Access::kSnapshot): what an
/// operator's look (`status`, `check`) reads, so that a writer holding the lock never stalls it.
/// @throws store::StoreError
Status snapshotStatus(const std::filesystem::path& file);

/// The records and junk of the file as they are, none judged, under its shared lock (a missing
/// file has none): for a reader that matches records to processes itself (treeOwner), which the
/// liveness of every owner of a full file would cost seconds.
/// @throws store::StoreError
ParsedRecords readRecords(const std::filesystem::path& file,
                          std::chrono::milliseconds lockTimeout = kDefaultLockTimeout);

/// As readRecords, without taking the file's lock (LockedFile::Access::kSnapshot).
/// @throws store::StoreError
ParsedRecords snapshotRecords(const std::filesystem::path& file);

/// Removes the records matching `predicate`, whoever holds them; returns them. A missing file
/// has none. For a worker giving back its own records.
/// @throws store::StoreError
std::vector<Record> release(const std::filesystem::path& file,
                            const std::function<bool(const Record&)>& predicate,
                            std::chrono::milliseconds lockTimeout = kDefaultLockTimeout);

struct Released {
  /// The records removed, with their liveness as judged under the lock.
  std::vector<RecordStatus> released;
  /// Matching records whose owner is known to run (knownToRun), when not forced: then nothing
  /// was removed.
  std::vector<RecordStatus> refused;
};

/// An operator's release (`flink-gpu release`): removes the records matching `predicate`, unless
/// one of them is of an owner known to run and `force` is false; then removes nothing and says
/// which. A missing file has none.
/// @throws store::StoreError
Released releaseChecked(const std::filesystem::path& file,
                        const std::function<bool(const Record&)>& predicate, bool force,
                        std::chrono::milliseconds lockTimeout = kDefaultLockTimeout);

/// `flink-gpu release --stale`: removes the records `predicate` picks (those of a GPU this host
/// does not have, by discovery::UnitIndex::presence) but those of an owner known to run
/// (knownToRun), which are kept and returned in `refused`: unlike releaseChecked, the others are
/// removed all the same. A missing file has none.
/// @throws store::StoreError
Released releaseStale(const std::filesystem::path& file,
                      const std::function<bool(const Record&)>& predicate,
                      std::chrono::milliseconds lockTimeout = kDefaultLockTimeout);

/// `flink-gpu release --gone`: removes every record whose owner is known to be gone (a verdict
/// that does not hold its GPU: kGone, kEarlierBoot), never one that cannot be judged; returns
/// them. A missing file has none.
/// @throws store::StoreError
std::vector<RecordStatus> releaseGone(const std::filesystem::path& file,
                                      std::chrono::milliseconds lockTimeout = kDefaultLockTimeout);

/// Removes the lines that are not records; returns them. Works on a file grown past
/// kMaxCoordinationFileBytes too (up to kMaxRepairableFileBytes), so that an operator can repair
/// a shared file that someone filled. A missing file has none.
/// @throws store::StoreError
std::vector<JunkLine> releaseJunk(const std::filesystem::path& file,
                                  std::chrono::milliseconds lockTimeout = kDefaultLockTimeout);

struct ReleasedJunk {
  /// The first lines removed (as many as asked for), in the file's order.
  std::vector<JunkLine> lines;
  /// How many lines were removed.
  std::size_t count = 0;
};

/// releaseJunk keeping only the first `shown` lines removed, and their count: it holds at most
/// about twice the file in memory (the text read and the text written, one bit a line besides),
/// however many lines it removes, for `flink-gpu release --junk`.
/// @throws store::StoreError
ReleasedJunk releaseJunk(const std::filesystem::path& file, std::size_t shown,
                         std::chrono::milliseconds lockTimeout = kDefaultLockTimeout);

}  // namespace flink::coordination
