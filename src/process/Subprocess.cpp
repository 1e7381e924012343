// POSIX implementation of process::run. See Subprocess.h for the contract.
#include "process/Subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <stdexcept>

#include "process/FileDescriptor.h"

namespace flink::process {

std::string ProcessOutcome::describeSignal(int signal) {
  const char* abbreviation = ::sigabbrev_np(signal);
  return "signal " + std::to_string(signal) +
         (abbreviation ? " (SIG" + std::string(abbreviation) + ")" : std::string());
}

std::string ProcessOutcome::toString() const {
  switch (kind_) {
    case Kind::kExited:
      return "exited with code " + std::to_string(value_);
    case Kind::kSignaled:
      return "was killed by " + describeSignal(value_);
    case Kind::kTimedOut:
      return "timed out";
  }
  return "ended in an unknown way";
}

namespace {

using Clock = std::chrono::steady_clock;

/// The programs run() is running, as kill() targets (-pgid for a group, pid for the program
/// alone), for signalAllRunning. Lock-free so that a signal handler may read it; a run that
/// finds no free slot is simply not reachable from there.
std::array<std::atomic<pid_t>, 256> gRunning{};

/// How many times signalAllRunning has been called, and its last signal: a run that becomes
/// reachable just after a call scanned gRunning sees the count move and signals itself, so that
/// a call from another thread (a worker's shutdown) cannot miss a program being spawned.
std::atomic<std::uint64_t> gSignalled{0};
std::atomic<int> gLastSignal{0};

/// Keeps a program's kill() target in gRunning from spawn until just before it is reaped (while
/// its pid can still only name it).
class RunningSlot {
 public:
  void set(pid_t target) noexcept {
    for (auto& slot : gRunning) {
      pid_t empty = 0;
      if (slot.compare_exchange_strong(empty, target)) {
        slot_ = &slot;
        return;
      }
    }
  }
  void clear() noexcept {
    if (slot_ != nullptr) slot_->store(0);
    slot_ = nullptr;
  }
  ~RunningSlot() { clear(); }

 private:
  std::atomic<pid_t>* slot_ = nullptr;
};

[[noreturn]] void throwErrno(const char* what) {
  throw std::system_error(errno, std::generic_category(), what);
}

/// posix_spawn's attribute objects, destroyed on every path.
class SpawnSettings {
 public:
  SpawnSettings() {
    if (int rc = ::posix_spawn_file_actions_init(&actions_); rc != 0) {
      throw std::system_error(rc, std::generic_category(), "posix_spawn_file_actions_init");
    }
    if (int rc = ::posix_spawnattr_init(&attributes_); rc != 0) {
      ::posix_spawn_file_actions_destroy(&actions_);
      throw std::system_error(rc, std::generic_category(), "posix_spawnattr_init");
    }
  }
  ~SpawnSettings() {
    ::posix_spawnattr_destroy(&attributes_);
    ::posix_spawn_file_actions_destroy(&actions_);
  }
  SpawnSettings(const SpawnSettings&) = delete;
  SpawnSettings& operator=(const SpawnSettings&) = delete;

  posix_spawn_file_actions_t* actions() { return &actions_; }
  posix_spawnattr_t* attributes() { return &attributes_; }

 private:
  posix_spawn_file_actions_t actions_;
  posix_spawnattr_t attributes_;
};

void check(int rc, const char* what) {
  if (rc != 0) throw std::system_error(rc, std::generic_category(), what);
}

/// What SpawnError says before its ": <strerror>" (std::system_error appends that itself).
std::string describeSpawnError(int error, const std::string& path) {
  std::string message = "cannot start " + path;
  if (error == ENOEXEC) message += " (not a binary, and no #! line naming an interpreter?)";
  struct stat info {};
  if (error == ENOENT && ::stat(path.c_str(), &info) == 0) {
    // The file is there: what is missing is the interpreter its #! line names.
    message += " (the interpreter its #! line names does not exist?)";
  }
  return message;
}

/// Starts argv (in a new process group when asked), stdin from /dev/null, stdout/stderr on the
/// given pipe ends, every other descriptor closed, default signal dispositions and an empty
/// signal mask.
pid_t spawn(const std::vector<std::string>& argv, int stdoutFd, int stderrFd,
            bool newProcessGroup) {
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);

  SpawnSettings settings;
  check(::posix_spawn_file_actions_addopen(settings.actions(), STDIN_FILENO, "/dev/null", O_RDONLY,
                                           0),
        "posix_spawn_file_actions_addopen");
  check(::posix_spawn_file_actions_adddup2(settings.actions(), stdoutFd, STDOUT_FILENO),
        "posix_spawn_file_actions_adddup2");
  check(::posix_spawn_file_actions_adddup2(settings.actions(), stderrFd, STDERR_FILENO),
        "posix_spawn_file_actions_adddup2");
  // Our own descriptors are O_CLOEXEC; this also closes those a careless library opened
  // without it, so nothing of the host reaches the script.
  check(::posix_spawn_file_actions_addclosefrom_np(settings.actions(), STDERR_FILENO + 1),
        "posix_spawn_file_actions_addclosefrom_np");

  const short flags = static_cast<short>(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
                                         (newProcessGroup ? POSIX_SPAWN_SETPGROUP : 0));
  check(::posix_spawnattr_setflags(settings.attributes(), flags), "posix_spawnattr_setflags");
  check(::posix_spawnattr_setpgroup(settings.attributes(), 0), "posix_spawnattr_setpgroup");
  sigset_t signals;
  ::sigemptyset(&signals);
  check(::posix_spawnattr_setsigmask(settings.attributes(), &signals),
        "posix_spawnattr_setsigmask");
  ::sigfillset(&signals);
  ::sigdelset(&signals, SIGKILL);
  ::sigdelset(&signals, SIGSTOP);
  check(::posix_spawnattr_setsigdefault(settings.attributes(), &signals),
        "posix_spawnattr_setsigdefault");

  pid_t pid = -1;
  // glibc reports a failed exec (ENOENT, EACCES, ENOEXEC) as posix_spawn's result.
  const int rc = ::posix_spawn(&pid, argv[0].c_str(), settings.actions(), settings.attributes(),
                               args.data(), environ);
  if (rc != 0) throw SpawnError(rc, std::generic_category(), describeSpawnError(rc, argv[0]));
  return pid;
}

FileDescriptor openPidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  const long fd = ::syscall(SYS_pidfd_open, pid, 0);  // always close-on-exec
  if (fd >= 0) return FileDescriptor(static_cast<int>(fd));
#endif
  return FileDescriptor();  // Kernel too old (ENOSYS) or sandboxed: fall back to waitid.
}

void setNonBlocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) throwErrno("fcntl(O_NONBLOCK)");
}

/// now + timeout, saturating at the clock's end: a time-out of "forever" (LLONG_MAX ms) must not
/// wrap around into the past and end the process at once.
Clock::time_point deadlineAfter(std::chrono::milliseconds timeout) {
  const Clock::time_point now = Clock::now();
  const auto left = std::chrono::floor<std::chrono::milliseconds>(Clock::time_point::max() - now);
  if (timeout >= left) return Clock::time_point::max();
  return now + std::chrono::duration_cast<Clock::duration>(timeout);
}

int millisUntil(Clock::time_point until) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 1 << 30));
}

/// One stream of the child: its pipe's read end and what was captured from it.
struct Stream {
  FileDescriptor fd;
  CapturedOutput captured;
  std::size_t limit;

  bool open() const { return fd.valid(); }

  /// Reads what is available now without blocking; closes the pipe at end of file. Stops after a
  /// bounded number of reads so that a writer faster than us cannot keep us from the deadline.
  void drainAvailable() {
    std::array<char, 64 * 1024> buffer;
    for (int reads = 0; fd.valid() && reads < 64; ++reads) {
      const ssize_t n = ::read(fd.get(), buffer.data(), buffer.size());
      if (n > 0) {
        append(buffer.data(), static_cast<std::size_t>(n));
      } else if (n == 0) {
        fd.reset();
      } else if (errno == EINTR) {
        continue;
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return;
      } else {
        throwErrno("read");
      }
    }
  }

  void append(const char* data, std::size_t size) {
    const std::size_t room = limit > captured.data.size() ? limit - captured.data.size() : 0;
    const std::size_t kept = std::min(room, size);
    captured.data.append(data, kept);
    captured.discardedBytes += size - kept;
  }
};

/// Blocks the signals that end a worker (SIGINT, SIGTERM, SIGHUP, SIGQUIT) on this thread for
/// its life, then puts the thread's mask back; one that came meanwhile is delivered then.
class HeldBackSignals {
 public:
  HeldBackSignals() noexcept {
    sigset_t signals;
    ::sigemptyset(&signals);
    for (const int signal : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) ::sigaddset(&signals, signal);
    ::pthread_sigmask(SIG_BLOCK, &signals, &previous_);
  }
  ~HeldBackSignals() { ::pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }
  HeldBackSignals(const HeldBackSignals&) = delete;
  HeldBackSignals& operator=(const HeldBackSignals&) = delete;

 private:
  sigset_t previous_{};
};

/// A started child and everything needed to see it through to the end. The destructor kills and
/// reaps a child that is still there (an exception escaped the run).
class Run {
 public:
  Run(const std::vector<std::string>& argv, const RunOptions& options) : options_(options) {
    Pipe out = Pipe::create();
    Pipe err = Pipe::create();
    setNonBlocking(out.readEnd.get());
    setNonBlocking(err.readEnd.get());
    out_ = Stream{std::move(out.readEnd), {}, options.maxCapturedBytes};
    err_ = Stream{std::move(err.readEnd), {}, options.maxCapturedBytes};
    {
      // A signal whose handler ends the running programs (flink-gpu's SIGTERM, SIGINT) must find
      // this one: held back on this thread from before the spawn until it is reachable.
      const HeldBackSignals held;
      const std::uint64_t signalled = gSignalled.load();
      pid_ = spawn(argv, out.writeEnd.get(), err.writeEnd.get(), options.newProcessGroup);
      const pid_t target = options.newProcessGroup ? -pid_ : pid_;
      running_.set(target);
      // Reachable now; a signalAllRunning on another thread since the spawn may have missed it.
      // (Both sides are sequentially consistent: the caller counts before it scans, we set our
      // slot before we look at the count, so one of us sees the other.)
      if (gSignalled.load() != signalled) ::kill(target, gLastSignal.load());
    }
    // The write ends close here, when `out` and `err` go: from now on only the child holds them.
    if (options.usePidfd) pidfd_ = openPidfd(pid_);
  }

  ~Run() {
    if (pid_ > 0 && !reaped_) {
      signalGroup(SIGKILL);
      reap();
    }
  }
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  ProcessResult finish() {
    const Clock::time_point deadline = deadlineAfter(options_.timeout);
    pump(deadline);
    bool timedOut = false;
    if (!exited_) {
      timedOut = true;
      signalGroup(SIGTERM);
      pump(Clock::now() + options_.terminationGrace);
    }
    // The leader is a zombie or still running, and not yet reaped, so its pid still names the
    // process group: nothing else can have taken the number. End whatever is left of the group
    // (background children, or children that ignored SIGTERM), then reap the leader.
    signalGroup(SIGKILL);
    const int status = reap();
    drainUntil(Clock::now() + options_.drainAfterExit);

    ProcessResult result;
    if (timedOut) {
      result.outcome = ProcessOutcome::timedOut();
    } else if (WIFSIGNALED(status)) {
      result.outcome = ProcessOutcome::signaled(WTERMSIG(status));
    } else {
      result.outcome = ProcessOutcome::exited(WEXITSTATUS(status));
    }
    result.stdoutOutput = std::move(out_.captured);
    result.stderrOutput = std::move(err_.captured);
    return result;
  }

 private:
  /// Drains both pipes until the child exits (noticed without reaping it) or `until` passes.
  void pump(Clock::time_point until) {
    int fallbackWaitMs = 1;
    while (!exited_) {
      std::array<pollfd, 3> fds{};
      nfds_t count = 0;
      const auto add = [&](int fd) { fds[count++] = pollfd{fd, POLLIN, 0}; };
      if (out_.open()) add(out_.fd.get());
      if (err_.open()) add(err_.fd.get());
      if (pidfd_) add(pidfd_.get());

      int waitMs = millisUntil(until);
      if (!pidfd_) {
        // No pidfd: look at the child every few milliseconds, backing off to 16 ms.
        waitMs = std::min(waitMs, fallbackWaitMs);
        fallbackWaitMs = std::min(fallbackWaitMs * 2, 16);
      }
      if (::poll(fds.data(), count, waitMs) < 0) {
        if (errno != EINTR) throwErrno("poll");
        // Interrupted: nothing is known to be ready, but still look at the child below, or a
        // stream of signals would keep the waitid fallback from ever seeing it exit. The
        // deadline is recomputed on the next turn.
        for (nfds_t i = 0; i < count; ++i) fds[i].revents = 0;
      }
      drainReady(fds.data(), count);
      exited_ = hasExited();
      if (exited_) {
        // What the child wrote before it exited is in the pipes now; take it before the group is
        // killed. A descendant still holding a pipe no longer holds us.
        out_.drainAvailable();
        err_.drainAvailable();
        return;
      }
      if (Clock::now() >= until) return;
    }
  }

  /// Reads the pipes that poll reported ready (readable, closed, or in error).
  void drainReady(const pollfd* fds, nfds_t count) {
    for (nfds_t i = 0; i < count; ++i) {
      if (fds[i].revents == 0) continue;
      if (fds[i].fd == out_.fd.get()) {
        out_.drainAvailable();
      } else if (fds[i].fd == err_.fd.get()) {
        err_.drainAvailable();
      }
    }
  }

  /// Reads the pipes until both are closed or `until` passes (used after the child is reaped).
  void drainUntil(Clock::time_point until) {
    while (out_.open() || err_.open()) {
      std::array<pollfd, 2> fds{};
      nfds_t count = 0;
      if (out_.open()) fds[count++] = pollfd{out_.fd.get(), POLLIN, 0};
      if (err_.open()) fds[count++] = pollfd{err_.fd.get(), POLLIN, 0};
      const int ready = ::poll(fds.data(), count, millisUntil(until));
      if (ready < 0) {
        if (errno == EINTR) continue;
        throwErrno("poll");
      }
      if (ready == 0) return;  // a descendant outside the group keeps a pipe open: stop reading
      drainReady(fds.data(), count);
    }
  }

  /// Whether the child has exited, without reaping it (so the pid stays ours).
  bool hasExited() const {
    siginfo_t info{};
    if (pidfd_) {
      pollfd fd{pidfd_.get(), POLLIN, 0};
      return ::poll(&fd, 1, 0) > 0 && (fd.revents & POLLIN) != 0;
    }
    while (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
      if (errno != EINTR) throwErrno("waitid");
    }
    return info.si_pid == pid_;
  }

  void signalGroup(int signal) const {
    if (options_.newProcessGroup) ::kill(-pid_, signal);  // ESRCH: the group is already empty
    ::kill(pid_, signal);  // the leader too, in case it moved to another group
  }

  int reap() {
    running_.clear();
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0) {
      if (errno != EINTR) {
        status = 0;
        break;  // ECHILD: someone else reaped it; nothing more can be learned
      }
    }
    reaped_ = true;
    return status;
  }

  const RunOptions& options_;
  RunningSlot running_;
  Stream out_{};
  Stream err_{};
  pid_t pid_ = -1;
  FileDescriptor pidfd_;
  bool exited_ = false;
  bool reaped_ = false;
};

}  // namespace

void signalAllRunning(int signal) noexcept {
  gLastSignal.store(signal);
  gSignalled.fetch_add(1);
  for (const auto& slot : gRunning) {
    const pid_t target = slot.load();
    if (target != 0) ::kill(target, signal);
  }
}

ProcessResult run(const std::vector<std::string>& argv, const RunOptions& options) {
  if (argv.empty()) throw std::invalid_argument("process::run: argv is empty");
  if (argv.front().empty() || argv.front().front() != '/') {
    throw std::invalid_argument("process::run: not an absolute path: " + argv.front());
  }
  Run run(argv, options);
  return run.finish();
}

}  // namespace flink::process
