// Shared set-up of the benchmark programs (driver_bench, cli_bench, discovery_bench,
// in_process_bench, status_bench): a temporary folder with executables written into it, the
// trivial discovery script driver_bench and cli_bench run, the floor they all compare against (a
// bare spawn with stdout read to EOF), a program run to its end with its peak memory (cli_bench,
// status_bench), the live process that holds a stand-in host's GPUs, and a main() that makes one
// run compare its benchmarks fairly.
//
// The script is the cheapest one the driver accepts (`#!/bin/sh` + `echo 0,1`), so that what the
// benchmarks measure is the cost of starting and finishing a process, which is what the driver
// and the CLI add overhead to, not the cost of a real nvidia-smi.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <benchmark/benchmark.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

extern char** environ;

namespace flink::bench {

/// A fresh, empty folder under $TMPDIR (or /tmp), named after `prefix`.
inline std::filesystem::path makeTempFolder(const std::string& prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/" + prefix + "-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw std::system_error(errno, std::generic_category(), "mkdtemp " + pattern);
  }
  return pattern;
}

/// Points this process, and what it starts, at the stand-in libnvidia-ml.so.1 `library`, answering
/// as the host `hostJson` describes, with no CUDA_VISIBLE_DEVICES mask.
inline void useStandInNvml(const char* library, const std::filesystem::path& hostJson) {
  if (::setenv("FLINK_GPU_NVML_LIBRARY", library, 1) != 0 ||
      ::setenv("FAKE_NVML_DEVICES", hostJson.c_str(), 1) != 0 ||
      ::unsetenv("CUDA_VISIBLE_DEVICES") != 0) {
    throw std::system_error(errno, std::generic_category(), "setenv");
  }
}

/// Writes `text` to `file` and makes it executable (0755).
inline void writeExecutable(const std::filesystem::path& file, const std::string& text) {
  {
    // Closed before the first exec: a file still open for writing cannot be run (ETXTBSY).
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) throw std::runtime_error("cannot write " + file.string());
  }
  if (::chmod(file.c_str(), 0755) != 0) {
    throw std::system_error(errno, std::generic_category(), "chmod " + file.string());
  }
}

/// A fresh temporary folder holding the discovery script; both are removed when this goes.
class TempDiscoveryScript {
 public:
  TempDiscoveryScript() : dir_(makeTempFolder("flink-gpu-bench")), script_(dir_ / "discover.sh") {
    writeExecutable(script_, "#!/bin/sh\necho 0,1\n");
  }
  ~TempDiscoveryScript() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  TempDiscoveryScript(const TempDiscoveryScript&) = delete;
  TempDiscoveryScript& operator=(const TempDiscoveryScript&) = delete;

  const std::filesystem::path& path() const noexcept { return script_; }

 private:
  std::filesystem::path dir_;
  std::filesystem::path script_;
};

/// `strings` as the char* array posix_spawn takes; valid as long as `strings` lives.
inline std::vector<char*> cArgv(const std::vector<std::string>& strings) {
  std::vector<char*> argv;
  for (const std::string& arg : strings) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  return argv;
}

/// The floor: the least a caller can do to run a program and read its stdout (posix_spawn with
/// stdout on a pipe, read to EOF, waitpid; stderr inherited). Returns the output, or an empty
/// string with `error` set.
inline std::string bareSpawnAndRead(char* const* argv, std::string& error) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    error = "pipe2 failed";
    return {};
  }
  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  // dup2 clears O_CLOEXEC on the child's copy; both original ends close at exec.
  ::posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv, environ);
  ::posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);  // only the child holds the write end now, so EOF means it is done writing
  std::string output;
  if (rc == 0) {
    std::array<char, 4096> buffer;
    for (;;) {
      const ssize_t n = ::read(fds[0], buffer.data(), buffer.size());
      if (n > 0) {
        output.append(buffer.data(), static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        break;
      }
    }
  }
  ::close(fds[0]);
  if (rc != 0) {
    error = "posix_spawn failed";
    return {};
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    error = std::string(argv[0]) + " did not exit with 0";
  }
  return output;
}

/// How a program run by spawnAndWait ended: its exit code (-1 when it did not start, or was
/// killed), and the largest resident set wait4 reported (see peak_rss_MiB in cli_bench for why
/// that is not the program's own peak).
struct ChildEnd {
  int exitCode = -1;
  long maxRssKiB = 0;
  bool ok() const noexcept { return exitCode == 0; }
};

/// Runs argv with stdin and stdout on /dev/null, and stderr too when `quiet` (else inherited, so
/// that a failure shows), and waits for it with wait4, which also gives its peak memory.
inline ChildEnd spawnAndWait(const std::vector<std::string>& argvStrings, bool quiet = false) {
  std::vector<char*> argv = cArgv(argvStrings);
  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  ::posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  if (quiet) ::posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  ::posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return {};
  int status = 0;
  rusage usage{};
  while (::wait4(pid, &status, 0, &usage) < 0) {
    if (errno != EINTR) return {};
  }
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, usage.ru_maxrss};
}

/// VmHWM of a live process, in KiB; -1 if it cannot be read.
inline long readVmHwmKiB(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  while (status >> key) {
    if (key == "VmHWM:") {
      long kib = -1;
      status >> kib;
      return kib;
    }
    status.ignore(1 << 16, '\n');
  }
  return -1;
}

/// Runs argv once under ptrace, stopped at its exit (PTRACE_EVENT_EXIT comes before the kernel
/// drops its memory) to read VmHWM: the peak of the image argv[0] runs, with nothing of ours in
/// it, since exec gives the process fresh memory. fork, not posix_spawn: the child must ask to
/// be traced before exec. Its own children (flink-gpu's script) are not traced. stdin and stdout
/// are /dev/null, stderr too when `quiet`.
/// Returns -1 on failure, or when it does not exit with 0.
inline long measurePeakRssKiB(const std::vector<std::string>& argvStrings, bool quiet = false) {
  std::vector<char*> argv = cArgv(argvStrings);
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec.
    const int devNull = ::open("/dev/null", O_RDWR);
    if (devNull < 0) ::_exit(127);
    ::dup2(devNull, STDIN_FILENO);
    ::dup2(devNull, STDOUT_FILENO);
    if (quiet) ::dup2(devNull, STDERR_FILENO);
    // Untraced (ptrace forbidden here), a SIGSTOP would stop the child for good: give up.
    if (::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr) != 0) ::_exit(126);
    ::raise(SIGSTOP);  // let the parent set the options before exec
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  long peakKiB = -1;
  int status = 0;
  bool optionsSet = false;
  for (;;) {
    if (::waitpid(pid, &status, 0) < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (WIFEXITED(status)) return WEXITSTATUS(status) == 0 ? peakKiB : -1;
    if (WIFSIGNALED(status)) return -1;
    if (!WIFSTOPPED(status)) continue;
    int deliver = 0;
    const int event = status >> 16;
    if (!optionsSet) {
      // The child's own SIGSTOP. EXITKILL: should this process die, the child goes with it.
      ::ptrace(PTRACE_SETOPTIONS, pid, nullptr,
               PTRACE_O_TRACEEXIT | PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL);
      optionsSet = true;
    } else if (WSTOPSIG(status) == SIGTRAP && event == PTRACE_EVENT_EXIT) {
      peakKiB = readVmHwmKiB(pid);
    } else if (WSTOPSIG(status) == SIGTRAP && event != 0) {
      // exec or another ptrace event: nothing to deliver
    } else {
      deliver = WSTOPSIG(status);  // a real signal (SIGCHLD from the script, say): pass it on
    }
    ::ptrace(PTRACE_CONT, pid, nullptr, deliver);
  }
}

/// The script of this run. Benchmarks are registered statically, before main() has made it, so
/// they read it through this pointer at run time.
inline const TempDiscoveryScript* gScript = nullptr;

inline const std::string& scriptPath() {
  static const std::string path = gScript->path().string();
  return path;
}

/// A child process that pause()s until killed: the live owner of a stand-in host's held GPUs, so
/// that each coordinated discovery checks a running owner. Killed and reaped on destruction; it
/// also dies with this process (PR_SET_PDEATHSIG) should the benchmark die first. Make it while
/// the process is still single-threaded (it forks).
class HolderProcess {
 public:
  HolderProcess() {
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ < 0) throw std::system_error(errno, std::generic_category(), "fork");
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(0);
      for (;;) ::pause();
    }
  }
  ~HolderProcess() {
    ::kill(pid_, SIGKILL);
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  HolderProcess(const HolderProcess&) = delete;
  HolderProcess& operator=(const HolderProcess&) = delete;

  pid_t pid() const noexcept { return pid_; }

 private:
  pid_t pid_ = -1;
};

/// The settings every benchmark here runs with. One run is one to a few milliseconds, so 0.25 s
/// per repetition is some hundred iterations; twenty short repetitions rather than a few long
/// ones, interleaved with the other benchmarks' (see benchMain), so that a slow patch of the
/// machine hits all benchmarks alike. The console shows only the aggregates; the JSON file keeps
/// every repetition, for run-benchmarks.sh.
inline void configureRepetitions(benchmark::internal::Benchmark* benchmark) {
  benchmark->UseRealTime()
      ->Unit(benchmark::kMicrosecond)
      ->MinTime(0.25)
      ->Repetitions(20)
      ->DisplayAggregatesOnly(true);
}

/// Google Benchmark's main, with one default changed: repetitions of different benchmarks are
/// interleaved in random order (--benchmark_enable_random_interleaving). On a noisy 2-core
/// machine, a slow patch (another build, a cron job) then spreads over every benchmark instead
/// of landing on whichever ran at that moment, which is what makes their ratio trustworthy.
/// A flag on the command line still wins: later flags override earlier ones.
inline int benchMain(int argc, char** argv) {
  TempDiscoveryScript script;
  gScript = &script;

  std::string interleave = "--benchmark_enable_random_interleaving=true";
  std::vector<char*> args{argv[0], interleave.data()};
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  int count = static_cast<int>(args.size());
  args.push_back(nullptr);

  benchmark::Initialize(&count, args.data());
  if (benchmark::ReportUnrecognizedArguments(count, args.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  gScript = nullptr;
  return 0;
}

/// benchMain with a stand-in host made first (while this process is still single-threaded, so
/// that the host may fork) and published through `global` while the benchmarks run. A host that
/// cannot be set up is reported as "<program>: <why>", exit 1.
template <typename Host>
int benchMainWithHost(const char* program, int argc, char** argv, const Host*& global) {
  try {
    Host host;
    global = &host;
    const int rc = benchMain(argc, argv);
    global = nullptr;
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
}

}  // namespace flink::bench
