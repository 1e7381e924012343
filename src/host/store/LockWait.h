// Waiting for a lock another process holds, made visible. A wait that lasts more than a second
// is told to the observer a program installed (flink-gpu prints one line: which lock, who holds
// it, what that process is), and so is how the wait ended. Without an observer, nothing is told.
//
// A waiter tries the lock (LOCK_NB) every kRetryInterval until its deadline: a blocking flock has
// no time-out. In storms of 4 and 16 processes taking one lock 20 times each, held 0.2 or 2 ms,
// this costs 1.00-1.12x the time of a blocking flock (lock_bench, docs/benchmarks.md). Waking a
// waiter when the locked file is closed (inotify) was tried and was slower: every close woke every
// waiter, and each wait set up its watch.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

namespace flink::store {

/// How long a waiter sleeps between two tries of a lock.
inline constexpr std::chrono::milliseconds kRetryInterval{1};

struct LockWaitEvent {
  enum class Stage {
    kWaiting,   ///< a second has passed, and the lock is still held
    kAcquired,  ///< after kWaiting: the lock was had
    kGaveUp,    ///< after kWaiting: the wait ended without it (time-out, error)
  };
  Stage stage = Stage::kWaiting;
  std::filesystem::path lock;
  /// The process that held the lock when the wait was told (/proc/locks), if known.
  std::optional<pid_t> holder;
  /// What that process is: its command line (from /proc/<pid>/cmdline, arguments joined by
  /// spaces, at most 120 bytes); empty when unknown.
  std::string holderCommand;
  std::chrono::milliseconds waited{0};
};

using LockWaitObserver = std::function<void(const LockWaitEvent&)>;

/// Installs the observer of every wait in this process (replacing any); an empty one removes it.
/// Set once at start-up: waits in flight may still tell the previous one.
void setLockWaitObserver(LockWaitObserver observer);

/// One wait for one lock. Made before the first try; stillWaiting() then pause() after each try
/// that failed; acquired() once the lock is had. Destroyed without acquired() after a told wait, it
/// tells kGaveUp.
class LockWait {
 public:
  LockWait(std::filesystem::path lock, std::function<std::optional<pid_t>()> holder);
  ~LockWait();
  LockWait(const LockWait&) = delete;
  LockWait& operator=(const LockWait&) = delete;

  void stillWaiting();
  /// Sleeps until the next try: kRetryInterval, never past `deadline`.
  void pause(std::chrono::steady_clock::time_point deadline) const;
  void acquired();

 private:
  void tell(LockWaitEvent::Stage stage);

  std::filesystem::path lock_;
  std::function<std::optional<pid_t>()> holder_;
  std::chrono::steady_clock::time_point start_;
  std::optional<pid_t> toldHolder_;
  std::string toldCommand_;
  bool told_ = false;
  bool done_ = false;
};

/// What process `pid` is, as LockWaitEvent::holderCommand says it; empty when it cannot be read.
std::string commandOf(pid_t pid);

}  // namespace flink::store
