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
//   BM_PairedProcesses          the same three and both builds of spawn_floor around the
//                               script, one of each per iteration in rotating order, each timed;
//                               counters discover_ratio and version_ratio are their times over
//                               the script's. The steadier figure on a busy machine: load that
//                               comes and goes hits all sides alike. floor_ratio, spawn_floor's
//                               run of the script over the script, is the least a program that
//                               runs the script and passes on its output can cost here on a
//                               dynamic glibc, as our programs must be (bench/spawn_floor.c);
//                               static_floor_ratio the same fully static. A target below
//                               floor_ratio cannot be met here by a program like ours.
//                               script_us, discover_us and floor_us: those sides' mean times.
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

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "BenchSupport.h"

#ifndef FLINK_GPU_EXECUTABLE
#error "FLINK_GPU_EXECUTABLE (the path of flink-gpu) must be defined by the build"
#endif
#if !defined(FLINK_GPU_SPAWN_FLOOR) || !defined(FLINK_GPU_SPAWN_FLOOR_STATIC)
#error "FLINK_GPU_SPAWN_FLOOR, FLINK_GPU_SPAWN_FLOOR_STATIC (spawn_floor's builds) must be defined"
#endif

namespace {

using flink::bench::measurePeakRssKiB;
using flink::bench::scriptPath;
using flink::bench::spawnAndWait;

void runProcessBenchmark(benchmark::State& state, const std::vector<std::string>& argv) {
  long maxRssKiB = 0;
  for (auto _ : state) {
    const flink::bench::ChildEnd end = spawnAndWait(argv);
    if (!end.ok()) {
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

std::vector<std::string> floorCommand(const char* floor) {
  return {floor, scriptPath(), "2", "null"};
}

void BM_ScriptProcess(benchmark::State& state) { runProcessBenchmark(state, scriptCommand()); }

void BM_FlinkGpuDiscoverProcess(benchmark::State& state) {
  runProcessBenchmark(state, discoverCommand());
}

void BM_FlinkGpuVersionProcess(benchmark::State& state) {
  runProcessBenchmark(state, versionCommand());
}

void BM_PairedProcesses(benchmark::State& state) {
  using Clock = std::chrono::steady_clock;
  constexpr int kSides = 5;
  const std::vector<std::string> commands[kSides] = {
      scriptCommand(), discoverCommand(), versionCommand(), floorCommand(FLINK_GPU_SPAWN_FLOOR),
      floorCommand(FLINK_GPU_SPAWN_FLOOR_STATIC)};
  Clock::duration spent[kSides]{};
  int first = 0;
  for (auto _ : state) {
    // Rotate the order so that none of them always follows the same one.
    for (int offset = 0; offset < kSides; ++offset) {
      const int which = (first + offset) % kSides;
      const Clock::time_point start = Clock::now();
      if (!spawnAndWait(commands[which]).ok()) {
        state.SkipWithError(("did not run or did not exit with 0: " + commands[which][0]).c_str());
        return;
      }
      spent[which] += Clock::now() - start;
    }
    first = (first + 1) % kSides;
  }
  const auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  state.counters["discover_ratio"] = seconds(spent[1]) / seconds(spent[0]);
  state.counters["version_ratio"] = seconds(spent[2]) / seconds(spent[0]);
  state.counters["floor_ratio"] = seconds(spent[3]) / seconds(spent[0]);
  state.counters["static_floor_ratio"] = seconds(spent[4]) / seconds(spent[0]);
  const double iterations = static_cast<double>(state.iterations());
  state.counters["script_us"] = seconds(spent[0]) * 1e6 / iterations;
  state.counters["discover_us"] = seconds(spent[1]) * 1e6 / iterations;
  state.counters["floor_us"] = seconds(spent[3]) * 1e6 / iterations;
}

BENCHMARK(BM_ScriptProcess)->Apply(flink::bench::configureRepetitions);
BENCHMARK(BM_FlinkGpuDiscoverProcess)->Apply(flink::bench::configureRepetitions);
BENCHMARK(BM_FlinkGpuVersionProcess)->Apply(flink::bench::configureRepetitions);
BENCHMARK(BM_PairedProcesses)->Apply(flink::bench::configureRepetitions);

}  // namespace

int main(int argc, char** argv) { return flink::bench::benchMain(argc, argv); }
