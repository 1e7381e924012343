// Whose GPUs a process uses: the owner of its process tree. A worker's GPUs are recorded for the
// worker (a TaskManager, `flink-gpu exec`, a C++ worker with the in-process driver), but the
// process that uses them is often its child: a sidecar, a Python worker, the command exec runs.
// Such a process owns what the nearest process of its ancestry (liveness::ancestry: itself, its
// parent, …) holds, and nothing else: a process that no owner started finds none, so it cannot
// borrow another worker's GPUs. `flink-gpu which` and a nested `exec` ask this rule; the judgement
// of the processes NVML lists on a GPU (host/usage/GpuUse.h) walks the same ancestry.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "host/coordination/Coordination.h"
#include "host/enumeration/UnitIndex.h"
#include "host/liveness/HostFacts.h"
#include "host/liveness/Liveness.h"

namespace flink::coordination {

/// A lease file that some process holds.
struct HeldLease {
  std::string name;
  /// A process of this pid namespace that has the file open now (its taker where that one still
  /// has it: liveness::openFileOfLock; this process, for a lock it holds itself); 0 where the
  /// holder is not seen.
  pid_t holder = 0;
};

/// The lease files of coordination file `file` that are held, each with a process that has it
/// open now: for a lock /proc/locks lists, that process (never a taker that is gone, whose pid
/// another process may have since: liveness::openFileOfLock), where /proc is this pid namespace's
/// own; else this process, where it holds the lock through a descriptor of its own (a container
/// a worker started, whose /proc/locks leaves the worker's locks out); else 0 (held, by a process
/// this one cannot see). Best effort: none where the folder is missing or fails the trust rules.
std::vector<HeldLease> heldLeases(const std::filesystem::path& file);

/// The owner of a process tree, as treeOwner finds it.
struct TreeOwner {
  /// The owning process, as its ancestry read it (pid and start time).
  Owner owner;
  /// How far up from the process asked about: 0 for the process itself, 1 for its parent, ….
  std::size_t depth = 0;
  /// Indices into the records given of those it owns, in the file's order.
  std::vector<std::size_t> records;
  /// The names of the lease files it holds, its records' own among them: a lease no record names
  /// (Flink's `sed` took the line with another's, an operator's `release --force`) holds its
  /// GPU all the same.
  std::vector<std::string> leases;
};

/// The nearest process of `pid`'s ancestry (itself first) that owns any of `records` or holds any
/// of `leases`. A record counts as the process's when it carries a start time and names that
/// process (liveness::sameProcess: pid, start time, pid namespace, boot), whose start time the
/// reader sees too: a record without a start time may be an earlier process's of the same pid. A
/// lease counts as the process that has it open (`holder`).
/// nullopt when no process of the ancestry owns anything.
std::optional<TreeOwner> treeOwner(const std::vector<Record>& records,
                                   const std::vector<HeldLease>& leases, pid_t pid,
                                   liveness::HostFacts& facts = liveness::HostFacts::system());

/// A unit of a host that a lease file holds.
struct LeasedUnit {
  discovery::UnitRef unit = 0;
  /// The lease's share of the unit, for a share's lease (`….share-<i>`).
  std::optional<unsigned> share;
  friend bool operator==(const LeasedUnit&, const LeasedUnit&) = default;
};

/// The units of `index` the lease files `names` hold (unitsOfLeaseName, as `reader` names them),
/// each once, in the order of `names`: what a tree's owner holds by its leases.
std::vector<LeasedUnit> unitsOfLeases(const std::vector<std::string>& names,
                                      const discovery::UnitIndex& index,
                                      const liveness::Reader& reader);

}  // namespace flink::coordination
