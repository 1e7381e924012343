// The facts of the host that the liveness rule reads, behind one small interface, as leveldb puts
// the operating system behind `Env`: which process a pid names and when it started, who its parent
// is and what it is called, which pid namespace and boot this process is in (and whether that is
// the host's own, whose pids NVML reports), and which flocks are held. The real
// implementation (HostFacts::system) reads /proc; the tests give the rule a simulated host
// (tests/host/liveness/), which plays every case a real one can only show by chance: a pid reused,
// a reader without /proc, a time namespace whose offset is not a whole number of clock ticks.
//
// Nothing here decides whether a record holds a GPU: that is Liveness.h's one rule.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace flink::liveness {

/// The flocks held on the host as /proc/locks lists them, read once. Only a lock found is an
/// answer: /proc/locks leaves out locks whose taker this pid namespace cannot see (outside the
/// initial one, a lock whose taker has exited, though a child holds it), and on btrfs it names a
/// subvolume's files by another device than stat does.
class FlockTable {
 public:
  /// nullopt where /proc/locks cannot be read (or is absurdly large).
  static std::optional<FlockTable> read();
  /// The table of /proc/locks' `text` (for tests and the simulated host).
  static FlockTable parse(std::string_view text);
  /// Adds a flock on (device, inode) held by `holder` (0: a holder this namespace cannot see).
  void add(std::uint64_t device, std::uint64_t inode, pid_t holder);
  /// Whether a flock on the file of this device and inode (st_dev, st_ino) is listed.
  bool held(std::uint64_t device, std::uint64_t inode) const;
  /// Its holder's pid, where this pid namespace sees it.
  std::optional<pid_t> holder(std::uint64_t device, std::uint64_t inode) const;

  struct Lock {
    std::uint64_t inode = 0;
    pid_t holder = 0;      ///< 0: a holder (or waiter) this pid namespace cannot see
    bool waiting = false;  ///< a process blocked in flock() for it, which will hold it next
  };
  /// Every flock listed on files of `device` (st_dev), held or waited for.
  std::vector<Lock> onDevice(std::uint64_t device) const;

 private:
  std::unordered_map<std::string, pid_t> holders_;      // "maj:min:inode" (hex device) → pid or 0
  std::vector<std::pair<std::string, pid_t>> waiters_;  // the same, of blocked flock() calls
};

/// What this process knows of itself, for judging the records of others.
struct Reader {
  /// This process's pid (HostFacts::system()'s is read again in the child of a fork, as are
  /// pidNamespace and ownProc).
  pid_t pid = 0;
  /// The inode of its pid namespace (/proc/self/ns/pid, which names this process's own namespace
  /// through a /proc of an ancestor namespace too); nullopt when it cannot tell (no /proc).
  std::optional<std::uint64_t> pidNamespace;
  /// Whether /proc is mounted for its own pid namespace (/proc/self is this process): only then
  /// does /proc/<pid> describe the process `pid` of this namespace. A sandbox that shares the
  /// parent's /proc (`unshare -p` without --mount-proc) or has none (bwrap) cannot judge a pid.
  bool ownProc = false;
  /// This boot's id (/proc/sys/kernel/random/boot_id, the same in every container of the host);
  /// nullopt where it cannot be read.
  std::optional<std::string> bootId;
  /// The inode of its mount namespace (/proc/self/ns/mnt), which decides what /dev holds and so
  /// how NVML numbers the GPUs; nullopt when it cannot tell.
  std::optional<std::uint64_t> mountNamespace;
};

/// What the kernel says of one pid of the reader's pid namespace.
struct ProcessLook {
  enum class State {
    kAbsent,   ///< no such process (ESRCH)
    kRunning,  ///< a live process (a leader that exited while its other threads run counts)
    kDead,     ///< a zombie, not yet reaped, without other threads
    kHidden,   ///< a process the kernel knows of but /proc hides from this user (hidepid=2)
  };
  State state = State::kAbsent;
  /// Its start time in clock ticks since boot, as every reader of the host sees it: the reader's
  /// time namespace's boot-time offset taken away (see sameStartTime). nullopt when unknown.
  std::optional<std::uint64_t> startTime;
  /// Its parent's pid, in the reader's namespace; nullopt when unknown.
  std::optional<pid_t> parent;

  /// Whether the process is there: running, or hidden but alive.
  bool alive() const noexcept { return state == State::kRunning || state == State::kHidden; }
};

/// The facts the liveness rule reads. Implementations answer for one reader (a process); the
/// simulated host has one per simulated process.
class HostFacts {
 public:
  virtual ~HostFacts() = default;
  /// This reader.
  virtual const Reader& reader() = 0;
  /// The process `pid` of the reader's pid namespace. A reader without its own /proc learns only
  /// whether the pid exists (kill(pid, 0)), never a start time.
  virtual ProcessLook process(pid_t pid) = 0;
  /// The flocks held on the host; nullopt where they cannot be read.
  virtual std::optional<FlockTable> flocks() = 0;
  /// What the process `pid` of the reader's namespace is called: its command name
  /// (/proc/<pid>/comm), or where the kernel cut that to 15 characters, the file name of its
  /// argv[0] when that begins with it ("nvidia-cuda-mps-server", not "nvidia-cuda-mps"). nullopt
  /// where it cannot be read (gone, hidden, no /proc of the reader's namespace).
  virtual std::optional<std::string> processName(pid_t pid) {
    (void)pid;
    return std::nullopt;
  }
  /// The running processes of the reader's namespace whose command name (/proc/<pid>/comm) is
  /// `name` (at most 15 characters); empty where /proc of its namespace cannot be read.
  virtual std::vector<pid_t> processesNamed(std::string_view name) {
    (void)name;
    return {};
  }

  /// The real host, read through /proc (the reader's facts read once, and in a child of fork()
  /// what the fork changed). Thread-safe.
  static HostFacts& system();
  /// `given`, where a caller gave a reader (a test, the simulated host); else this process's, as
  /// the real host reads it.
  static const Reader& readerOr(const std::optional<Reader>& given);
};

/// The inode of the host's own (initial) pid namespace: the kernel's PROC_PID_INIT_INO, the same
/// on every Linux host.
inline constexpr std::uint64_t kInitialPidNamespace = 4026531836;

/// Whether `reader` sees the host's pids: it is in the initial pid namespace and has /proc of it.
/// NVML reports processes by these pids (the driver's), whatever namespace its caller is in; a
/// reader in a pid namespace of its own (a container) cannot tell which process such a pid is.
constexpr bool seesHostPids(const Reader& reader) noexcept {
  return reader.ownProc && reader.pidNamespace == kInitialPidNamespace;
}

/// Whether two start times, each read by some reader of the host, can be one process's. The
/// kernel shows a start time in the reader's time namespace, rounded down to a clock tick, and a
/// reader takes away its namespace's boot-time offset rounded down too: where the offset is not a
/// whole number of ticks (CRIU restores containers with nanosecond offsets) two readers see one
/// process's start a tick apart. So: equal within one tick. A pid reused within one tick of the
/// earlier process's start, in one boot, would need the pid counter to wrap in 10 ms.
constexpr bool sameStartTime(std::uint64_t a, std::uint64_t b) noexcept {
  return a == b || a + 1 == b || b + 1 == a;
}

/// The reader's boot-time offset in clock ticks, rounded down, from the text of
/// /proc/self/timens_offsets ("monotonic <s> <ns>\nboottime <s> <ns>\n"); 0 when it says none.
std::int64_t boottimeOffsetTicks(std::string_view timensOffsets, long ticksPerSecond) noexcept;

/// This process's boot-time offset in clock ticks (0 where the kernel has no time namespaces or
/// there is no /proc); nullopt where it cannot be told: after unshare(CLONE_NEWTIME) the file
/// tells the offsets of the namespace its children enter, not of its own.
std::optional<std::int64_t> ownBoottimeOffsetTicks();

}  // namespace flink::liveness
