// Coordination of GPUs among the workers of one host, through a locked file of records.
//
// The file is Flink's: one `<gpu> <owner pid>` line per GPU held, so Flink's own script can read
// what we write. We add the owner's start time (field 22 of /proc/<pid>/stat) as a third field,
// so that a PID reused by another process does not keep a GPU forever; two-field lines are read.
// A record whose owner is not running (gone, a zombie, or another process with the same pid) is
// taken back by the next allocation.
//
// Locking is flock(LOCK_EX) on the coordination file itself, as Flink's script does, held only
// for one read-modify-write; the kernel drops it when the holder dies, so a worker killed while
// allocating never leaves the host locked. The new contents are written in place with a single
// pwrite (padded with newlines up to the old length, then truncated), so that a writer killed at
// any point leaves either the old or the new records, never a torn line.
//
// Thread-safety: every function opens and locks the file itself; calls from several threads or
// processes serialize on the lock.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace flink::coordination {

/// Flink's default coordination file.
inline constexpr const char* kDefaultCoordinationFile = "/var/tmp/flink-gpu-coordination";

/// The coordination file cannot be used: a symlink or not a regular file at the path, a lock that
/// is not released in time, an I/O error. The message names the path and the cause.
class CoordinationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A process that holds GPUs: its pid and, when known, its start time in clock ticks since boot.
struct Owner {
  pid_t pid = 0;
  std::optional<std::uint64_t> startTime;

  /// The process `pid`, with its start time read from /proc (nullopt if it cannot be read).
  static Owner of(pid_t pid);
  friend bool operator==(const Owner&, const Owner&) = default;
};

/// Whether `owner` is running: its pid names a live process (not a zombie) whose start time, when
/// the record has one, is the recorded one.
bool isRunning(const Owner& owner);

/// One line of the coordination file.
struct Record {
  std::string gpu;  ///< The device identifier, as discovery printed it ("0", "GPU-…").
  Owner owner;
  friend bool operator==(const Record&, const Record&) = default;
};

/// A line that is not a record (no pid, not a number, too many fields...): kept out of the
/// records, reported, never fatal, and written back unchanged after the records.
struct JunkLine {
  std::size_t lineNumber;  ///< 1-based
  std::string text;
};

struct ParsedRecords {
  std::vector<Record> records;
  std::vector<JunkLine> junk;
};

/// Reads a coordination file's text. Blank lines are skipped silently.
ParsedRecords parseRecords(std::string_view text);

/// Writes records as lines `<gpu> <pid> <start time>` (two fields when the start time is unknown).
std::string formatRecords(const std::vector<Record>& records);

/// How long to wait for the lock before giving up with CoordinationError.
inline constexpr std::chrono::milliseconds kDefaultLockTimeout{5000};

/// Tells whether an owner is running; replaceable in tests.
using LivenessProbe = std::function<bool(const Owner&)>;

/// Units that share hardware, by identifier: a whole GPU's index and the `MIG-…` UUIDs of the
/// instances carved from it (see discovery::relatedUnits). A relation counts both ways when it is
/// given either way; a unit is never related to itself.
using RelatedUnits = std::unordered_map<std::string, std::vector<std::string>>;

struct AllocationRequest {
  std::vector<std::string> gpus;  ///< Every GPU of the host, in the order to hand them out.
  std::size_t amount = 0;
  Owner owner;
  /// A unit is not granted while a unit related to it is held by another running owner, nor
  /// together with a unit related to it. Units need not be in `gpus`: a record of an instance
  /// handed out with --mig blocks its GPU for a requester that hands out whole GPUs.
  RelatedUnits related = {};
  /// Optional: which of the free units to grant (the placement rule, placement/Placement.h).
  /// Called with the units that could be granted, in `gpus` order (those held, blocked or
  /// related to one already granted removed), and how many are still needed; it returns that
  /// many of them. Unset, or an answer that is not that many distinct free units that can go
  /// together (or a throw), means the first free ones in `gpus` order, as without it.
  std::function<std::vector<std::string>(const std::vector<std::string>& freeUnits,
                                         std::size_t amount)>
      choose = {};
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

struct Allocation {
  /// The GPUs now recorded for the owner, in `gpus` order; empty unless `satisfied`.
  std::vector<std::string> granted;
  bool satisfied = false;
  /// Records of owners that were no longer running, taken back.
  std::vector<Record> reclaimed;
  /// Records of running owners other than the requester (what made an allocation fall short).
  std::vector<Record> heldByOthers;
  /// The units of `gpus` blocked by those records through `related`, one entry per blocking
  /// record, in `gpus` order.
  std::vector<BlockedUnit> blocked;
  std::vector<JunkLine> junk;
  /// The records after this allocation (what the file now holds).
  std::vector<Record> records;
};

/// The allocation rule, without any I/O: drop records whose owner is not running; keep the
/// requester's own GPUs first (so asking again gives the same GPUs), then take free GPUs in
/// `gpus` order. A GPU is not free while another running owner holds it or a unit related to it
/// (`related`), nor when a unit related to it is already granted in this plan. If fewer than
/// `amount` are available nothing is granted, but dead records are still dropped. Records of GPUs
/// that are not in `gpus` are kept as they are. Linear in the number of records, GPUs and
/// relations; `isRunning` is asked once per distinct owner.
Allocation planAllocation(const ParsedRecords& current, const AllocationRequest& request,
                          const LivenessProbe& isRunning);

/// Locks the file (creating it if needed), plans, writes the result, unlocks.
/// @throws CoordinationError
Allocation allocate(const std::filesystem::path& file, const AllocationRequest& request,
                    std::chrono::milliseconds lockTimeout = kDefaultLockTimeout);

struct RecordStatus {
  Record record;
  bool running = false;
};

struct Status {
  std::vector<RecordStatus> records;
  std::vector<JunkLine> junk;
};

/// The records of the file, each with whether its owner is running. A missing file has none.
/// @throws CoordinationError
Status readStatus(const std::filesystem::path& file,
                  std::chrono::milliseconds lockTimeout = kDefaultLockTimeout);

/// Removes the records matching `predicate`; returns them. A missing file has none.
/// @throws CoordinationError
std::vector<Record> release(const std::filesystem::path& file,
                            const std::function<bool(const Record&)>& predicate,
                            std::chrono::milliseconds lockTimeout = kDefaultLockTimeout);

}  // namespace flink::coordination
