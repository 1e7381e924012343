// cli_bench: what a whole `flink-gpu discover` process costs next to running the discovery
// script by itself, in time and in peak memory, measured side by side in one run.
//
//   BM_ScriptProcess            posix_spawn `<script> 2 null`, stdout to /dev/null, wait4.
//   BM_FlinkGpuDiscoverProcess  posix_spawn `flink-gpu discover --discovery-script <script>
//                               --amount 2`, stdout to /dev/null, wait4. This includes
//                               everything a user pays for: exec and dynamic linking of
//                               flink-gpu and its libraries, static initialisers, CLI parsing,
//                               the driver's run of the very same script, and exit.
//   BM_FlinkGpuVersionProcess   `flink-gpu --version`, same harness: flink-gpu's start-up and
//                               exit alone. discover minus this is the discovery itself, so the
//                               two say whether an excess over the 2x target is start-up
//                               (loader, libraries) or the driver.
//   BM_PairedProcesses          the same three, one of each per iteration in rotating order,
//                               each timed; counters discover_ratio and version_ratio are their
//                               times over the script's. The steadier figure on a busy machine:
//                               load that comes and goes hits all three alike.
//
// Peak memory, two counters:
//   peak_rss_MiB      the program's own peak resident set (VmHWM in /proc/<pid>/status), read
//                     at its exit through ptrace, in one extra, untimed run per repetition.
//                     This is the number to quote. Absent where ptrace is not allowed.
//   wait4_maxrss_MiB  the largest ru_maxrss wait4 reported over the timed runs. Linux counts in
//                     a child's maxrss the resident set of the memory it had before exec, and a
//                     posix_spawn (vfork) child has its parent's: every child of this ~4 MiB
//                     benchmark process reports at least ~4 MiB, whatever it really used (a
//                     bare /bin/sh script, ~1.6 MiB, shows as ~4 MiB). It is kept to show that
//                     trap; it is close to peak_rss_MiB only for a program bigger than this
//                     one. For flink-gpu it also folds in the script flink-gpu waited for.
// bench/run-benchmarks.sh prints the ratio flink-gpu process / script process.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include "BenchSupport.h"

#ifndef FLINK_GPU_EXECUTABLE
#error "FLINK_GPU_EXECUTABLE (the path of flink-gpu) must be defined by the build"
#endif

extern char** environ;

namespace {

using flink::bench::scriptPath;

struct ChildEnd {
  bool ok = false;
  long maxRssKiB = 0;
};

/// Runs argv with stdin and stdout on /dev/null (stderr inherited, so a failure shows) and
/// waits for it with wait4, which also gives its peak memory.
ChildEnd spawnAndWait(const std::vector<std::string>& argvStrings) {
  std::vector<char*> argv;
  for (const std::string& arg : argvStrings) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  ::posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  ::posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return {};
  int status = 0;
  rusage usage{};
  while (::wait4(pid, &status, 0, &usage) < 0) {
    if (errno != EINTR) return {};
  }
  return {WIFEXITED(status) && WEXITSTATUS(status) == 0, usage.ru_maxrss};
}

/// VmHWM of a live process, in KiB; -1 if it cannot be read.
long readVmHwmKiB(pid_t pid) {
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
/// be traced before exec. Its own children (flink-gpu's script) are not traced.
/// Returns -1 on failure.
long measurePeakRssKiB(const std::vector<std::string>& argvStrings) {
  std::vector<char*> argv;
  for (const std::string& arg : argvStrings) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec.
    const int devNull = ::open("/dev/null", O_RDWR);
    if (devNull < 0) ::_exit(127);
    ::dup2(devNull, STDIN_FILENO);
    ::dup2(devNull, STDOUT_FILENO);
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

void runProcessBenchmark(benchmark::State& state, const std::vector<std::string>& argv) {
  long maxRssKiB = 0;
  for (auto _ : state) {
    const ChildEnd end = spawnAndWait(argv);
    if (!end.ok) {
      state.SkipWithError(("did not run or did not exit with 0: " + argv[0]).c_str());
      return;
    }
    maxRssKiB = std::max(maxRssKiB, end.maxRssKiB);
  }
  // After the loop, so not timed. Where ptrace is not allowed (some containers) the counter is
  // left out rather than failing the timing.
  if (const long peakKiB = measurePeakRssKiB(argv); peakKiB >= 0) {
    state.counters["peak_rss_MiB"] = static_cast<double>(peakKiB) / 1024.0;
  }
  state.counters["wait4_maxrss_MiB"] = static_cast<double>(maxRssKiB) / 1024.0;
}

std::vector<std::string> scriptCommand() { return {scriptPath(), "2", "null"}; }

std::vector<std::string> discoverCommand() {
  return {FLINK_GPU_EXECUTABLE, "discover", "--discovery-script", scriptPath(), "--amount", "2"};
}

std::vector<std::string> versionCommand() { return {FLINK_GPU_EXECUTABLE, "--version"}; }

void BM_ScriptProcess(benchmark::State& state) { runProcessBenchmark(state, scriptCommand()); }

void BM_FlinkGpuDiscoverProcess(benchmark::State& state) {
  runProcessBenchmark(state, discoverCommand());
}

void BM_FlinkGpuVersionProcess(benchmark::State& state) {
  runProcessBenchmark(state, versionCommand());
}

void BM_PairedProcesses(benchmark::State& state) {
  using Clock = std::chrono::steady_clock;
  const std::vector<std::string> commands[] = {scriptCommand(), discoverCommand(),
                                               versionCommand()};
  Clock::duration spent[3]{};
  int first = 0;
  for (auto _ : state) {
    // Rotate the order so that none of the three always follows the same one.
    for (int offset = 0; offset < 3; ++offset) {
      const int which = (first + offset) % 3;
      const Clock::time_point start = Clock::now();
      if (!spawnAndWait(commands[which]).ok) {
        state.SkipWithError(("did not run or did not exit with 0: " + commands[which][0]).c_str());
        return;
      }
      spent[which] += Clock::now() - start;
    }
    first = (first + 1) % 3;
  }
  const auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  state.counters["discover_ratio"] = seconds(spent[1]) / seconds(spent[0]);
  state.counters["version_ratio"] = seconds(spent[2]) / seconds(spent[0]);
}

BENCHMARK(BM_ScriptProcess)->Apply(flink::bench::configureRepetitions);
BENCHMARK(BM_FlinkGpuDiscoverProcess)->Apply(flink::bench::configureRepetitions);
BENCHMARK(BM_FlinkGpuVersionProcess)->Apply(flink::bench::configureRepetitions);
BENCHMARK(BM_PairedProcesses)->Apply(flink::bench::configureRepetitions);

}  // namespace

int main(int argc, char** argv) { return flink::bench::benchMain(argc, argv); }
