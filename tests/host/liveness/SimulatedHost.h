// A host in memory: processes with pids in nested pid namespaces, start times as the kernel shows
// them to readers in time namespaces of their own, a boot id, and what each process can see of
// /proc. It gives each simulated process the liveness::HostFacts a real one would read, so that
// the liveness rule runs on cases a real host shows only by chance: a pid reused, a reader without
// /proc of its own namespace, a time namespace whose offset is not a whole number of ticks.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
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
    kForeign,  ///< /proc of an ancestor namespace (`unshare -p` without --mount-proc)
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
  };

  explicit SimulatedHost(std::string bootId = "6f1c2d3e-4a5b-4c6d-8e7f-9a0b1c2d3e4f");

  /// A new pid namespace, a child of `parent`; its inode.
  std::uint64_t newPidNamespace(std::uint64_t parent = kHostNamespace);

  /// Starts a process now; it gets the next pid of its namespace and of each ancestor namespace.
  ProcessId spawn(const Spawn& spawn);
  ProcessId spawn() { return spawn(Spawn{}); }

  /// Time passes.
  void advance(std::int64_t nanoseconds) { now_ += nanoseconds; }
  std::int64_t now() const { return now_; }

  /// The process exits and is reaped: its pids are free for reuse.
  void exit(ProcessId process);
  /// The process exits and is not reaped yet: a zombie.
  void becomeZombie(ProcessId process);
  bool alive(ProcessId process) const;

  /// The next process spawned in `ns` gets this pid there (a pid reused, as the counter wraps).
  void reusePid(std::uint64_t ns, pid_t pid) { nextPid_[ns] = pid; }

  /// The pid of `process` in namespace `ns`; nullopt where it is not visible there.
  std::optional<pid_t> pidIn(ProcessId process, std::uint64_t ns) const;
  /// Its pid in its own namespace.
  pid_t pidOf(ProcessId process) const;

  /// The host's facts as `reader` sees them (valid while the host lives).
  std::unique_ptr<liveness::HostFacts> factsOf(ProcessId reader);

  /// The host's boot id.
  const std::string& bootId() const { return bootId_; }

 private:
  struct Process {
    Spawn spawn;
    std::int64_t startNs = 0;
    bool alive = true;
    bool zombie = false;
    std::map<std::uint64_t, pid_t> pids;  // by namespace: its own and its ancestors'
  };
  class Facts;

  std::vector<std::uint64_t> ancestry(std::uint64_t ns) const;  // ns, its parent, …, the host's
  std::optional<ProcessId> processOf(std::uint64_t ns, pid_t pid) const;

  std::string bootId_;
  std::int64_t now_ = 1'000'000'000'000;  // 1000 s after boot
  std::vector<Process> processes_;
  std::map<std::uint64_t, std::uint64_t> parentNs_;  // each namespace's parent
  std::map<std::uint64_t, pid_t> nextPid_;
  std::uint64_t nextNs_ = kHostNamespace + 1000;
};

}  // namespace flink::testing
