// A host in memory: processes with pids in nested pid namespaces, start times as the kernel shows
// them to readers in time namespaces of their own, a boot id, what each process can see of /proc,
// and the flocks held and waited for as /proc/locks lists them. It gives each simulated process
// the liveness::HostFacts a real one would read, so that the liveness rule runs on cases a real
// host shows only by chance: a pid reused, a reader without /proc of its own namespace, a time
// namespace whose offset is not a whole number of ticks, a lock whose taker has exited.
//
// The flocks themselves are the file system's (tests/host/simulation/SimulatedFiles.h), which
// tells the host through setFlocks(); the host translates their takers' pids as /proc/locks does.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "host/liveness/HostFacts.h"

namespace flink::testing {

class SimulatedHost {
 public:
  /// A process, by its place in the host's table (stable for the host's life).
  using ProcessId = std::size_t;
  /// One clock tick (USER_HZ 100), in nanoseconds.
  static constexpr std::int64_t kTickNs = 10'000'000;
  /// The host's own (initial) pid namespace, by its inode, as on a real host.
  static constexpr std::uint64_t kHostNamespace = 4026531836;
  static constexpr std::uint64_t kHostMountNamespace = 4026531841;

  /// What a process sees of /proc.
  enum class Proc {
    kOwn,      ///< /proc of its own pid namespace
    kForeign,  ///< /proc of its namespace's parent (`unshare -p` without --mount-proc)
    kNone,     ///< no /proc at all (bwrap without --proc)
  };

  struct Spawn {
    /// Its parent; nullopt for a process whose parent the host does not model.
    std::optional<ProcessId> parent = {};
    /// Its pid namespace: kHostNamespace or one of newPidNamespace().
    std::uint64_t pidNamespace = kHostNamespace;
    /// Its time namespace's boot-time offset, in nanoseconds (0: the host's).
    std::int64_t boottimeOffsetNs = 0;
    Proc proc = Proc::kOwn;
    std::uint64_t mountNamespace = kHostMountNamespace;
    /// What /proc/<pid>/comm calls it (HostFacts::processName); empty: unknown.
    std::string name = {};
  };

  /// A flock of the file system: held, or waited for by a blocked flock() call. `taker` is the
  /// process that called flock(): the kernel keeps its pid with the lock, whoever holds the file
  /// description now.
  struct Flock {
    std::uint64_t device = 0;
    std::uint64_t inode = 0;
    ProcessId taker = 0;
    bool waiting = false;
  };

  explicit SimulatedHost(std::string bootId = "6f1c2d3e-4a5b-4c6d-8e7f-9a0b1c2d3e4f");

  /// A new pid namespace, a child of `parent`; its inode.
  std::uint64_t newPidNamespace(std::uint64_t parent = kHostNamespace);
  /// The parent of pid namespace `ns`; nullopt for the host's.
  std::optional<std::uint64_t> parentNamespace(std::uint64_t ns) const;

  /// Pids of `ns` are given from `first` to `last` and then from `first` again, as the kernel's
  /// counter wraps at pid_max; a pid is given again only once the process that had it started at
  /// least `reuseAfterNs` ago (the liveness rule tells two processes of one pid apart by start
  /// times more than a tick apart: docs/coordination-file.md, "Time namespaces").
  void setPidRange(std::uint64_t ns, pid_t first, pid_t last, std::int64_t reuseAfterNs);

  /// Starts a process now; it gets the next pid of its namespace and of each ancestor namespace.
  ProcessId spawn(const Spawn& spawn);
  ProcessId spawn() { return spawn(Spawn{}); }
  /// How `process` was spawned.
  const Spawn& spawnOf(ProcessId process) const { return processes_.at(process).spawn; }

  /// Time passes.
  void advance(std::int64_t nanoseconds) { now_ += nanoseconds; }
  std::int64_t now() const { return now_; }

  /// The process exits and is reaped: its pids are free for reuse.
  void exit(ProcessId process);
  /// The process exits and is not reaped yet: a zombie.
  void becomeZombie(ProcessId process);
  /// Whether it runs: neither reaped nor a zombie.
  bool alive(ProcessId process) const;
  /// Whether it still has its pids: running, or a zombie not yet reaped.
  bool exists(ProcessId process) const { return processes_.at(process).alive; }

  /// The next process spawned in `ns` gets this pid there (a pid reused, as the counter wraps).
  void reusePid(std::uint64_t ns, pid_t pid) { nextPid_[ns] = pid; }

  /// The pid of `process` in namespace `ns`; nullopt where it is not visible there, or it is
  /// reaped.
  std::optional<pid_t> pidIn(ProcessId process, std::uint64_t ns) const;
  /// The pid it had (or has) in `ns`, reaped or not; nullopt where it was never visible there.
  std::optional<pid_t> pidOnceIn(ProcessId process, std::uint64_t ns) const;
  /// Its pid in its own namespace.
  pid_t pidOf(ProcessId process) const;
  /// The process that has `pid` in `ns` now (running or a zombie).
  std::optional<ProcessId> processOf(std::uint64_t ns, pid_t pid) const;
  /// How many processes were ever spawned.
  std::size_t processCount() const { return processes_.size(); }

  /// The pid namespace whose processes `reader`'s /proc shows; nullopt without /proc.
  std::optional<std::uint64_t> procNamespaceOf(ProcessId reader) const;

  /// Where the flocks are kept: called whenever a reader reads /proc/locks.
  void setFlocks(std::function<std::vector<Flock>()> flocks) { flocks_ = std::move(flocks); }
  /// /proc/locks as `reader` reads it: each flock's taker by its pid in the namespace of the
  /// reader's /proc; a taker that namespace cannot see (one that has exited, outside the host's
  /// namespace) is left out, as the kernel leaves it out. Empty without /proc.
  std::string procLocksText(ProcessId reader) const;

  /// The host's facts as `reader` sees them (valid while the host lives).
  std::unique_ptr<liveness::HostFacts> factsOf(ProcessId reader);

  /// The host's boot id.
  const std::string& bootId() const { return bootId_; }

 private:
  struct Process {
    Spawn spawn;
    std::int64_t startNs = 0;
    bool alive = true;  // not yet reaped
    bool zombie = false;
    std::map<std::uint64_t, pid_t> pids;  // by namespace: its own and its ancestors'
  };
  struct PidRange {
    pid_t first = 1;
    pid_t last = 1;
    std::int64_t reuseAfterNs = 0;
  };
  class Facts;

  std::vector<std::uint64_t> ancestry(std::uint64_t ns) const;  // ns, its parent, …, the host's
  pid_t nextPidIn(std::uint64_t ns);
  void reap(ProcessId process);

  std::string bootId_;
  std::int64_t now_ = 1'000'000'000'000;  // 1000 s after boot
  std::vector<Process> processes_;
  std::map<std::uint64_t, std::uint64_t> parentNs_;  // each namespace's parent
  std::map<std::uint64_t, pid_t> nextPid_;
  std::map<std::uint64_t, PidRange> ranges_;
  // By namespace: each pid in use, and when the last process that had each pid started.
  std::map<std::uint64_t, std::unordered_map<pid_t, ProcessId>> inUse_;
  std::map<std::uint64_t, std::unordered_map<pid_t, std::int64_t>> lastStart_;
  std::uint64_t nextNs_ = kHostNamespace + 1000;
  std::function<std::vector<Flock>()> flocks_;
};

}  // namespace flink::testing
