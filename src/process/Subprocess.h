// Runs a program to completion under a deadline, capturing its output, and leaves nothing behind.
//
// This is the process layer under GPUDriver (not part of the public API). It is written against
// the failure modes of Flink's Java driver: the program is started directly from an argv vector
// (never through a shell), in a process group of its own, with stdin on /dev/null and no
// descriptor of the host other than its stdout/stderr pipes; both pipes are drained together
// while it runs, keeping a bounded amount; on time-out the whole process group gets SIGTERM, then
// SIGKILL after a grace period; when the program exits, whatever is left of its process group is
// killed, so a background child holding stdout cannot hold the caller. The child is always
// reaped.
//
// Thread-safety: run() may be called from many threads at once. It reaps only the pid it
// started; a host that reaps every child (waitpid(-1) in a SIGCHLD handler) breaks that.
// Limits: a descendant that leaves the process group (setsid, setpgid) is out of reach.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <system_error>
#include <vector>

namespace flink::process {

/// How a run ended: exited with a code, killed by a signal, or stopped at the deadline.
class ProcessOutcome {
 public:
  enum class Kind { kExited, kSignaled, kTimedOut };

  static ProcessOutcome exited(int code) noexcept { return {Kind::kExited, code}; }
  static ProcessOutcome signaled(int signal) noexcept { return {Kind::kSignaled, signal}; }
  static ProcessOutcome timedOut() noexcept { return {Kind::kTimedOut, 0}; }

  Kind kind() const noexcept { return kind_; }
  /// The exit code (kExited) or signal number (kSignaled); 0 for kTimedOut.
  int value() const noexcept { return value_; }
  bool succeeded() const noexcept { return kind_ == Kind::kExited && value_ == 0; }

  /// "exited with code 1", "was killed by signal 9 (SIGKILL)", "timed out".
  std::string toString() const;

  /// "signal 9 (SIGKILL)": how toString names a signal, for messages that word the ending their
  /// own way ("nvidia-smi was killed by signal 9 (SIGKILL)").
  static std::string describeSignal(int signal);

  friend bool operator==(const ProcessOutcome&, const ProcessOutcome&) = default;

 private:
  ProcessOutcome(Kind kind, int value) noexcept : kind_(kind), value_(value) {}
  Kind kind_;
  int value_;
};

/// The bytes a stream produced, up to the capture limit; the rest is counted, not kept.
struct CapturedOutput {
  std::string data;
  std::size_t discardedBytes = 0;
};

struct ProcessResult {
  ProcessOutcome outcome = ProcessOutcome::exited(0);
  CapturedOutput stdoutOutput;
  CapturedOutput stderrOutput;
};

struct RunOptions {
  /// Wall-clock limit from the start of the program.
  std::chrono::milliseconds timeout{10'000};
  /// Time between SIGTERM and SIGKILL to the process group on time-out.
  std::chrono::milliseconds terminationGrace{200};
  /// Bytes kept per stream; more is read and discarded so the program never blocks on a pipe.
  std::size_t maxCapturedBytes = 1 << 20;
  /// After the program has been reaped, how long to keep reading pipes that a descendant outside
  /// its process group may still hold open.
  std::chrono::milliseconds drainAfterExit{100};
  /// Watch for the program's exit through a pidfd (Linux 5.3+). When false, or when the kernel
  /// has no pidfd_open, exit is noticed by polling waitid every few milliseconds instead.
  bool usePidfd = true;
  /// Start the program in a process group of its own (and end that whole group). When false it
  /// stays in the caller's group, so that whoever ends the caller's group ends it too (a
  /// discovery program's nvidia-smi, when the driver kills the discovery); then only the program
  /// itself is signalled, and what it leaves behind is not ours to kill.
  bool newProcessGroup = true;
};

/// The program could not be started (not found, not executable, bad format, out of resources).
/// code() holds the errno value.
class SpawnError : public std::system_error {
 public:
  using std::system_error::system_error;
};

/// Runs argv[0] — an absolute path — with `argv` as its arguments and the host's environment.
/// @throws SpawnError if the program cannot be started; std::system_error if a system call the
///         run depends on fails (pipe, poll).
/// @throws std::invalid_argument if argv is empty or argv[0] is not absolute.
ProcessResult run(const std::vector<std::string>& argv, const RunOptions& options);

/// Sends `signal` to every program run() is running in this process right now: to its process
/// group, or to the program alone when it shares ours. Async-signal-safe, for a host's SIGINT or
/// SIGTERM handler, so that the host's death does not leave discovery scripts running. A program
/// being spawned on another thread at the time gets the signal as soon as it is reachable.
void signalAllRunning(int signal) noexcept;

}  // namespace flink::process
