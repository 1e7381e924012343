// The one liveness rule: whether a record of the coordination file (or a share's) still holds its
// GPU, decided from a few facts, each a value, by a table (kRules) that docs/coordination-file.md
// shows row for row. Every allocator, `status`, `release` and `check` ask it, through judge();
// nothing else decides whether an owner runs.
//
// The facts of one record, each read only when a row needs it:
//   - boot:      the record's boot id against this boot's (same, other, unknown: either unknown)
//   - namespace: the record's pid namespace against the reader's (same; other; unknown: the reader
//                has no /proc of its own namespace, or the writer could not tell its own)
//   - start:     whether the record carries its owner's start time
//   - pid:       whether that pid runs, with the recorded start time within a tick (sameStartTime)
//                where one is recorded; asked only of a record of the reader's own namespace
//   - lease:     the record's lease: none recorded, held, free, its file missing (or another file
//                now), or a file this user may not open
// The verdict is one of three: held by a running owner (kRunning, kLeaseHeld), gone (kGone,
// kEarlierBoot), or cannot be judged from here (kUnjudgeable, kLeaseMissing, kLeaseUnopenable),
// which holds the GPU (fail closed) until `release`, a worker that can judge it, or a reboot.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "host/liveness/HostFacts.h"

namespace flink::liveness {

/// A process that holds GPUs: its pid and, when known, its start time in clock ticks since boot,
/// the pid namespace its pid is valid in, and the boot it belongs to.
struct Owner {
  pid_t pid = 0;
  std::optional<std::uint64_t> startTime = {};
  /// The inode of the pid namespace (`/proc/self/ns/pid`) of the process that recorded the pid;
  /// kUnknownPidNamespace when that process could not tell its own.
  std::optional<std::uint64_t> pidNamespace = {};
  /// The boot the pid and start time belong to: /proc/sys/kernel/random/boot_id when recorded.
  std::optional<std::string> bootId = {};

  /// The process `pid` of this reader's namespace as `facts` tell it: its start time (nullopt if
  /// it cannot be read), the reader's pid namespace (kUnknownPidNamespace when it cannot tell)
  /// and this boot's id.
  static Owner of(pid_t pid, HostFacts& facts = HostFacts::system());
  friend bool operator==(const Owner&, const Owner&) = default;
};

/// The pid namespace a record names when its writer could not tell its own (no /proc): no reader's
/// own, so every reader judges such a record by its lease, as one of another namespace. Written
/// `pidns=0`, a number every version reads (an older reader finds it another namespace's: held).
inline constexpr std::uint64_t kUnknownPidNamespace = 0;

/// What a lease file says of its lease (host/coordination/Leases.h).
enum class LeaseState {
  kHeld,        ///< some process holds it
  kFree,        ///< its file is there and nobody holds it
  kMissing,     ///< there is no lease file of that name, or another file has the name now
  kUnopenable,  ///< its file is there but this user may not open it: it cannot be shown free
};

/// Why a record holds its GPU, or does not: the verdict of the rule.
enum class Liveness {
  kRunning,          ///< its owner runs: by its pid (and start time, where recorded)
  kLeaseHeld,        ///< its lease is held, whatever its pid says
  kUnjudgeable,      ///< its pid cannot be judged from here and it has no lease: held
  kLeaseMissing,     ///< its pid cannot show it gone, and its lease file is missing: held
  kLeaseUnopenable,  ///< its pid cannot show it gone, and its lease cannot be opened: held
  kGone,             ///< its owner is gone (by pid and start time, or its lease is free)
  kEarlierBoot,      ///< recorded in an earlier boot: gone, whatever its pid
};

/// Whether a record of this verdict holds its GPU: it is not gone.
bool holdsGpu(Liveness liveness) noexcept;

/// Whether its owner is known to run (kRunning, kLeaseHeld): what `release` refuses without
/// --force.
bool knownToRun(Liveness liveness) noexcept;

/// Whether the verdict is "cannot be judged from here" (held, fail closed).
bool cannotJudge(Liveness liveness) noexcept;

/// "running", "gone", …: the verdict's name in status' JSON and the decision table.
std::string_view livenessName(Liveness liveness) noexcept;

// ---- the facts, as bits, so that a row of the table can name several values of one ----

enum class Boot : unsigned { kSame = 1, kOther = 2, kUnknown = 4 };
enum class Namespace : unsigned { kSame = 1, kOther = 2, kUnknown = 4 };
enum class Start : unsigned { kRecorded = 1, kNone = 2 };
/// kGone: no such process, a zombie, or a process with another start time (a reused pid).
enum class Pid : unsigned { kRuns = 1, kGone = 2 };
enum class Lease : unsigned { kNone = 1, kHeld = 2, kFree = 4, kMissing = 8, kUnopenable = 16 };

/// A row matches every value of a fact whose bit it has.
inline constexpr unsigned kAny = ~0u;

/// One row of the decision table: the facts it matches (bit masks) and its verdict. The first
/// row that matches a record decides.
struct Rule {
  unsigned boot;
  unsigned ns;
  unsigned start;
  unsigned pid;
  unsigned lease;
  Liveness verdict;
};

/// The decision table, in order: docs/coordination-file.md's "Liveness" table, row for row.
std::span<const Rule> rules() noexcept;

/// Every fact of one record, given: for the table's own tests and the simulated host.
struct Facts {
  Boot boot = Boot::kUnknown;
  Namespace ns = Namespace::kUnknown;
  Start start = Start::kNone;
  Pid pid = Pid::kGone;
  Lease lease = Lease::kNone;
};

/// The index of the first row of rules() that matches `facts`.
std::size_t ruleFor(const Facts& facts) noexcept;

/// rules()[ruleFor(facts)].verdict.
Liveness decide(const Facts& facts) noexcept;

/// Asks whether an owner of the reader's namespace runs: its pid is alive (hidden counts), with
/// the recorded start time within a tick where one is recorded. Replaceable in tests.
using OwnerProbe = std::function<bool(const Owner&)>;

/// Asks the state of the record's lease; called only for a record with a lease.
using LeaseStateProbe = std::function<LeaseState()>;

/// What a record says of its owner and lease, for judge().
struct Holder {
  Owner owner;
  /// Whether the record names a lease (`lease=`).
  bool leased = false;
};

/// The rule for one record, as `reader` sees it: the facts read lazily (the pid only of a record
/// of the reader's own namespace, the lease only when a row needs it), the first row of rules()
/// that matches them decides. `ruleIndex`, when given, gets that row's index.
Liveness judge(const Holder& holder, const Reader& reader, const OwnerProbe& runs,
               const LeaseStateProbe& lease, std::size_t* ruleIndex = nullptr);

/// The namespace fact of `owner` for `reader`: same, other, or unknown (the reader has no /proc of
/// its own namespace; the record names no namespace and the reader cannot judge pids; or its
/// writer could not tell its own).
Namespace namespaceOf(const Owner& owner, const Reader& reader) noexcept;

/// Whether `owner`'s process runs as `facts` tell: alive, with the recorded start time within a
/// tick where one is recorded. Does not look at the boot or the namespace.
bool ownerRuns(const Owner& owner, HostFacts& facts = HostFacts::system());

/// Whether `owner` was recorded in an earlier boot: both boot ids are known and differ.
bool ofEarlierBoot(const Owner& owner, const Reader& reader = HostFacts::system().reader());

/// Whether `owner` is of a pid namespace other than the reader's own (another container).
bool inOtherPidNamespace(const Owner& owner, const Reader& reader = HostFacts::system().reader());

/// Whether `owner` counts as running for a caller that has only the pid, as `facts`' reader sees
/// it: not of an earlier boot; one whose pid this reader cannot judge (another namespace, no /proc
/// of its own) counts as running; else ownerRuns.
bool countsAsRunning(const Owner& owner, HostFacts& facts);

/// countsAsRunning for this process (HostFacts::system()).
bool isRunning(const Owner& owner);

/// Whether `a` and `b` are one process: the same pid, and the same start time (within a tick),
/// pid namespace and boot where both say.
bool sameProcess(const Owner& a, const Owner& b);

/// How far up a parent chain anything of the project looks: far deeper than any worker's process
/// tree (a JVM, a shell, a launcher, a Python worker and its children), and a bound on a chain
/// that loops while it is read (pids reused meanwhile).
inline constexpr std::size_t kMaxAncestors = 64;

/// `pid` and its ancestors, nearest first, each as Owner::of reads it (its start time, the reader's
/// pid namespace and boot): the one walk up a process tree, by which a worker's children count as
/// the worker (`which`, a nested `exec`, the processes NVML lists on a GPU). `pid` itself is
/// always first. The chain ends after pid 1, at a process gone or whose parent cannot be read, at
/// an ancestor whose start time cannot be read (its pid could name a later process than the one a
/// record names), or after kMaxAncestors ancestors.
std::vector<Owner> ancestry(pid_t pid, HostFacts& facts = HostFacts::system());

/// This process's pid namespace, or nullopt where it cannot tell.
std::optional<std::uint64_t> currentPidNamespace();

/// This boot's id, or nullopt where it cannot be read.
std::optional<std::string> currentBootId();

}  // namespace flink::liveness
