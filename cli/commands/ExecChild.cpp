// Starting `flink-gpu exec`'s command as its child, and waiting for it. See ExecChild.h.
#include "commands/ExecChild.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <iostream>
#include <system_error>

#include "process/FileDescriptor.h"

namespace flink::cli {
namespace {

/// What a supervisor (systemd, a container runtime, a batch system, `timeout`) sends the process it
/// started, to stop it or to tell it something: passed on to the command, which is what they mean.
constexpr std::array<int, 6> kForwardedSignals = {SIGTERM, SIGINT,  SIGHUP,
                                                  SIGQUIT, SIGUSR1, SIGUSR2};

/// The command's pid while its pid can name only it: from the fork until it has ended and is about
/// to be reaped. 0 otherwise, when a forwarded signal goes nowhere.
std::atomic<pid_t> gCommand{0};
static_assert(std::atomic<pid_t>::is_always_lock_free, "read by a signal handler");

/// Whether another process sent `info`'s signal (kill, sigqueue, tgkill), rather than the kernel
/// to the whole process group (the terminal's SIGINT, SIGQUIT and SIGHUP, si_code SI_KERNEL),
/// which reached the command too. One from the command itself is not sent back to it. A sender of
/// an ancestor pid namespace, which this one cannot see, has si_pid 0.
bool sentByAnotherProcess(const siginfo_t& info, pid_t command) {
  const bool user = info.si_code == SI_USER || info.si_code == SI_QUEUE || info.si_code == SI_TKILL;
  return user && info.si_pid != command;
}

/// The handler of the forwarded signals while the command runs. A handler, not sigwaitinfo on one
/// thread: a signal sent to the process goes to any of its threads that does not block it, and a
/// library may have started one (NVML); whichever thread takes it, it is passed on.
void forwardToCommand(int signal, siginfo_t* info, void* /*context*/) {
  const int savedErrno = errno;
  const pid_t command = gCommand.load();
  if (command > 0 && sentByAnotherProcess(*info, command)) ::kill(command, signal);
  errno = savedErrno;
}

/// In the child: sends `error` to the parent down `errorPipe` and exits 127.
[[noreturn]] void failInChild(int errorPipe, int error) {
  while (::write(errorPipe, &error, sizeof error) < 0 && errno == EINTR) {
  }
  ::_exit(127);
}

/// In the child, between fork and execvp: only async-signal-safe calls. Never returns: the
/// command runs, or the errno of what failed goes down `errorPipe` (close-on-exec, so that the
/// parent reads end of file once the exec succeeded).
[[noreturn]] void becomeCommand(char* const* argv, pid_t parent, const sigset_t& originalMask,
                                const struct sigaction& originalChild, int errorPipe) {
  // Every handler goes back to the default: flink-gpu's own and forwardToCommand. execvp would do
  // that itself; it is done first so that a signal that comes before execvp runs none of them
  // here. What is ignored stays ignored (nohup's SIGHUP), as across any exec.
  for (int signal = 1; signal < NSIG; ++signal) {
    if (signal == SIGKILL || signal == SIGSTOP) continue;
    struct sigaction current {};
    if (::sigaction(signal, nullptr, &current) != 0) continue;  // EINVAL: glibc's own signals
    if (current.sa_handler == SIG_IGN || current.sa_handler == SIG_DFL) continue;
    ::signal(signal, SIG_DFL);
  }
  // flink-gpu ignores SIGPIPE to report a closed stdout itself; the command gets the default,
  // which an ignored signal would not get back from execvp. SIGCHLD as exec found it.
  ::signal(SIGPIPE, SIG_DFL);
  ::sigaction(SIGCHLD, &originalChild, nullptr);
  // Killed when exec dies, which then holds nothing for it: no command runs on GPUs that no live
  // record or lease names. exec may have died between the fork and here, before the signal was
  // asked for (the child of a dead parent has another one): then it ends now.
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) failInChild(errorPipe, errno);
  if (::getppid() != parent) ::raise(SIGKILL);
  ::sigprocmask(SIG_SETMASK, &originalMask, nullptr);
  // Not on POSIX's async-signal-safe list, but glibc's execvp allocates nothing, and glibc's fork
  // leaves its own locks usable in the child.
  ::execvp(argv[0], argv);
  failInChild(errorPipe, errno);
}

/// waitpid for `pid`, retried on EINTR. Returns what waitpid returns.
pid_t reap(pid_t pid, int& status) {
  pid_t result = 0;
  while ((result = ::waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
  }
  return result;
}

}  // namespace

StartedCommand startCommand(const std::vector<std::string>& command) {
  std::vector<char*> argv;
  argv.reserve(command.size() + 1);
  for (const std::string& arg : command) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  process::Pipe errorPipe = process::Pipe::create();

  // Nothing buffered here may be lost to the command, or printed after it.
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);

  // Every signal is blocked on this thread across the fork, so that none runs a handler in the
  // child before it has its own dispositions, and none is passed on before the command's pid is
  // known; the child puts back the mask flink-gpu was started with.
  sigset_t all;
  ::sigfillset(&all);
  sigset_t originalMask;
  ::pthread_sigmask(SIG_BLOCK, &all, &originalMask);
  // An inherited SIG_IGN would have the kernel reap the child, and its status with it.
  struct sigaction defaultChild {};
  defaultChild.sa_handler = SIG_DFL;
  ::sigemptyset(&defaultChild.sa_mask);
  struct sigaction originalChild {};
  ::sigaction(SIGCHLD, &defaultChild, &originalChild);
  // The forwarded signals are passed on from here, but for those ignored when flink-gpu started,
  // which the command ignores too.
  struct sigaction forward {};
  forward.sa_sigaction = forwardToCommand;
  forward.sa_flags = SA_SIGINFO | SA_RESTART;
  ::sigfillset(&forward.sa_mask);
  std::array<struct sigaction, kForwardedSignals.size()> originalForwarded{};
  for (std::size_t i = 0; i < kForwardedSignals.size(); ++i) {
    ::sigaction(kForwardedSignals[i], nullptr, &originalForwarded[i]);
    if (originalForwarded[i].sa_handler != SIG_IGN) {
      ::sigaction(kForwardedSignals[i], &forward, nullptr);
    }
  }

  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    becomeCommand(argv.data(), parent, originalMask, originalChild, errorPipe.writeEnd.get());
  }
  int error = errno;  // fork's, when it failed
  // Only the child's end is left open now: end of file means its exec succeeded.
  errorPipe.writeEnd.reset();
  if (pid > 0) {
    gCommand.store(pid);
    int execError = 0;
    ssize_t got = 0;
    while ((got = ::read(errorPipe.readEnd.get(), &execError, sizeof execError)) < 0 &&
           errno == EINTR) {
    }
    error = got == static_cast<ssize_t>(sizeof execError) ? execError : 0;
    if (error != 0) {
      gCommand.store(0);
      int status = 0;
      reap(pid, status);  // it has exited, or is about to: _exit(127)
    }
  }
  if (error != 0) {
    // Never started: flink-gpu's dispositions and mask as they were, for the message and the exit.
    for (std::size_t i = 0; i < kForwardedSignals.size(); ++i) {
      ::sigaction(kForwardedSignals[i], &originalForwarded[i], nullptr);
    }
    ::sigaction(SIGCHLD, &originalChild, nullptr);
    ::pthread_sigmask(SIG_SETMASK, &originalMask, nullptr);
    return StartedCommand{-1, error};
  }
  // A signal that came meanwhile is passed on now, and each later one as it comes.
  ::pthread_sigmask(SIG_SETMASK, &originalMask, nullptr);
  return StartedCommand{pid, 0};
}

int waitForCommand(pid_t pid) {
  // Waited for without reaping it first, so that its pid names only it while a signal may still be
  // passed on to it; then no more are, and it is reaped.
  siginfo_t info{};
  while (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) != 0) {
    if (errno != EINTR) throw std::system_error(errno, std::generic_category(), "waitid");
  }
  gCommand.store(0);
  int status = 0;
  if (reap(pid, status) < 0) throw std::system_error(errno, std::generic_category(), "waitpid");
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

}  // namespace flink::cli
