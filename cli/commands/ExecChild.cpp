// Starting `flink-gpu exec`'s command as its child, and waiting for it. See ExecChild.h.
#include "commands/ExecChild.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
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

/// The forwarded signals and SIGCHLD: what the waiting thread keeps blocked and takes with
/// sigwaitinfo, so that none is lost between two looks at the child and none runs a handler.
sigset_t waitedSignals() {
  sigset_t signals;
  ::sigemptyset(&signals);
  for (const int signal : kForwardedSignals) ::sigaddset(&signals, signal);
  ::sigaddset(&signals, SIGCHLD);
  return signals;
}

/// In the child, between fork and execvp: only async-signal-safe calls. Never returns: the
/// command runs, or its errno goes down `errorPipe` (close-on-exec, so that the parent reads end of
/// file once the exec succeeded) and the child exits 127.
[[noreturn]] void becomeCommand(char* const* argv, pid_t parent, const sigset_t& originalMask,
                                const struct sigaction& originalChild, int errorPipe) {
  // The handlers flink-gpu installed go back to the default. execvp would do that itself; it is
  // done first so that a signal that comes before execvp cannot run flink-gpu's handler here. What
  // is ignored stays ignored (nohup's SIGHUP), as across any exec.
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
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent) ::raise(SIGKILL);
  ::sigprocmask(SIG_SETMASK, &originalMask, nullptr);
  // Not on POSIX's async-signal-safe list, but glibc's execvp allocates nothing (and exec has no
  // other thread to hold a lock at the fork).
  ::execvp(argv[0], argv);
  const int error = errno;
  while (::write(errorPipe, &error, sizeof error) < 0 && errno == EINTR) {
  }
  ::_exit(127);
}

/// waitpid for `pid`, retried on EINTR; `options` as waitpid's. Returns what waitpid returns.
pid_t waitFor(pid_t pid, int& status, int options) {
  pid_t result = 0;
  while ((result = ::waitpid(pid, &status, options)) < 0 && errno == EINTR) {
  }
  return result;
}

/// Whether another process sent `info`'s signal (kill, sigqueue, tgkill), rather than the kernel
/// to the whole process group (the terminal's SIGINT, SIGQUIT and SIGHUP, si_code SI_KERNEL),
/// which reached the command too. One from the command itself is not sent back to it. A sender of
/// an ancestor pid namespace, which this one cannot see, has si_pid 0.
bool sentByAnotherProcess(const siginfo_t& info, pid_t command) {
  const bool user = info.si_code == SI_USER || info.si_code == SI_QUEUE || info.si_code == SI_TKILL;
  return user && info.si_pid != command;
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

  // Every signal is blocked across the fork, so that none runs flink-gpu's handler in the child
  // before it has its own dispositions; the child puts back the mask flink-gpu was started with.
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

  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    becomeCommand(argv.data(), parent, originalMask, originalChild, errorPipe.writeEnd.get());
  }
  const int forkError = errno;
  // From here on this thread takes the waited signals through sigwaitinfo, and only those.
  sigset_t waiting = originalMask;
  const sigset_t waited = waitedSignals();
  for (int signal = 1; signal < NSIG; ++signal) {
    if (::sigismember(&waited, signal) == 1) ::sigaddset(&waiting, signal);
  }
  ::pthread_sigmask(SIG_SETMASK, &waiting, nullptr);
  const auto notStarted = [&](int error) {
    ::sigaction(SIGCHLD, &originalChild, nullptr);
    ::pthread_sigmask(SIG_SETMASK, &originalMask, nullptr);
    return StartedCommand{-1, error};
  };
  if (pid < 0) return notStarted(forkError);

  // The child's end closes here, so that end of file means the exec succeeded.
  errorPipe.writeEnd.reset();
  int error = 0;
  ssize_t got = 0;
  while ((got = ::read(errorPipe.readEnd.get(), &error, sizeof error)) < 0 && errno == EINTR) {
  }
  if (got != static_cast<ssize_t>(sizeof error)) return StartedCommand{pid, 0};
  int status = 0;
  waitFor(pid, status, 0);  // it exits at once: _exit(127)
  return notStarted(error);
}

int waitForCommand(pid_t pid) {
  const sigset_t waited = waitedSignals();
  for (;;) {
    // Looked at before every wait: SIGCHLDs that come together are one, and the child may have
    // ended before the first. It stays blocked meanwhile, so one that comes after the look waits
    // for sigwaitinfo.
    int status = 0;
    const pid_t ended = waitFor(pid, status, WNOHANG);
    if (ended < 0) throw std::system_error(errno, std::generic_category(), "waitpid");
    if (ended == pid) {
      if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
      return WEXITSTATUS(status);
    }
    siginfo_t info{};
    const int signal = ::sigwaitinfo(&waited, &info);
    // EINTR: a stop (Ctrl-Z) and `fg`, or a signal not waited for; SIGCHLD: look again.
    if (signal < 0 || signal == SIGCHLD) continue;
    if (sentByAnotherProcess(info, pid)) ::kill(pid, signal);
  }
}

}  // namespace flink::cli
