// discovery_bench: what one coordinated allocation through the default discovery costs next to a
// bare run of nvidia-smi itself, on a stand-in host of 64 GPUs of which 63 are held by another
// live worker. The target: within 1.5x (Flink's bash script, measured the same way, is about 16x,
// from its grep of the coordination file once per GPU).
//
// The stand-in host, made at start-up in a temporary folder:
//   nvidia-smi        `#!/bin/sh` + one printf (a dash builtin) of the 64 indices 0..63, one per
//                     line, whatever its arguments. The benchmark puts the folder first on its own
//                     PATH, so the discovery program finds it there as it would find the real one,
//                     and points $FLINK_GPU_NVML_LIBRARY at a library that does not exist, so that
//                     on a GPU host the real NVML does not answer in its place.
//   floor-wrapper.sh  `#!/bin/sh` + `exec <spawn_floor> "$@"`: the floor's wrapper.
//   coordination      63 records `<gpu> <pid> <start time>` for GPUs 0..62, all owned by a
//                     holder process this benchmark forks (it pause()s until killed at the end),
//                     so each allocation checks a live owner and gets the one free GPU, 63.
//
//   BM_BareNvidiaSmi         the baseline: posix_spawn `nvidia-smi --query-gpu=index
//                            --format=csv,noheader`, stdout on a pipe read to EOF, waitpid.
//   BM_CoordinatedDiscovery  the same harness around `nvidia-gpu-discovery.sh 1
//                            --enable-coordination-mode --coordination-file <file>` (the wrapper
//                            execs the program, which runs nvidia-smi, locks the file,
//                            checks the holder, writes a 64th record): checked to print 63.
//                            The owner of GPU 63 is this process (the wrapper's parent); its record
//                            is released before every run, outside the timing, so that every timed
//                            run makes a real allocation and rewrites the file.
//   BM_CoordinatedProgram    the same allocation with the program run directly, without the sh
//                            wrapper: BM_CoordinatedDiscovery minus this is the wrapper's cost.
//   BM_PlainDiscovery        `nvidia-gpu-discovery.sh 1` (no coordination): prints 0. Minus the
//                            bare nvidia-smi, the cost of the wrapper and the program themselves.
//   BM_PairedDiscovery       the four above and the three floors below, one of each per
//                            iteration in rotating order, each timed; counter `ratio` is
//                            coordinated / bare (the figure to quote on a noisy machine: load
//                            that comes and goes hits all of them alike), program_ratio and
//                            plain_ratio two others over bare, and the floors over bare:
//     floor_ratio            `floor-wrapper.sh nvidia-smi …`, an `exec` of bench/spawn_floor.c
//                            (which runs nvidia-smi and passes on its output, and nothing more)
//                            from a `#!/bin/sh` file: the least a discovery that is a shell
//                            wrapper around a program that runs nvidia-smi can cost here;
//     program_floor_ratio    spawn_floor running nvidia-smi itself: the same without the
//                            wrapper, on a dynamic glibc as our programs must be;
//     static_program_floor_ratio  the same with spawn_floor built fully static.
//                            A target below a floor cannot be met here by a program so built.
//                            bare_us, coordinated_us and wrapper_floor_us: those sides' mean
//                            times.
//
// Wall-clock time is what counts (UseRealTime). bench/run-benchmarks.sh prints the ratio
// coordinated discovery / bare nvidia-smi against the 1.5x target.
#include <stdlib.h>
#include <unistd.h>

#include <benchmark/benchmark.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "BenchSupport.h"
#include "HeldGpus.h"
#include "host/coordination/Coordination.h"
#include "util/Strings.h"

#ifndef FLINK_GPU_DISCOVERY_SCRIPT
#error "FLINK_GPU_DISCOVERY_SCRIPT (the path of nvidia-gpu-discovery.sh) must be set by the build"
#endif
#ifndef FLINK_GPU_DISCOVERY_PROGRAM
#error "FLINK_GPU_DISCOVERY_PROGRAM (the path of nvidia-gpu-discovery) must be defined by the build"
#endif
#if !defined(FLINK_GPU_SPAWN_FLOOR) || !defined(FLINK_GPU_SPAWN_FLOOR_STATIC)
#error "FLINK_GPU_SPAWN_FLOOR, FLINK_GPU_SPAWN_FLOOR_STATIC (spawn_floor's builds) must be defined"
#endif

namespace {

namespace coordination = flink::coordination;
using flink::bench::bareSpawnAndRead;
using flink::bench::cArgv;

constexpr int kHostGpus = 64;

/// The stand-in host: the folder with nvidia-smi and the coordination file, the holder of GPUs
/// 0..62, and this process's PATH pointing at the folder (and $FLINK_GPU_NVML_LIBRARY at no
/// library). Undone (holder killed and reaped, folder removed) when this goes; the environment is
/// left as it is, the process being about to exit.
class StandInHost {
 public:
  StandInHost() : dir_(flink::bench::makeTempFolder("flink-gpu-discovery-bench")) {
    try {
      nvidiaSmi_ = (dir_ / "nvidia-smi").string();
      coordinationFile_ = (dir_ / "coordination").string();

      std::string smi = "#!/bin/sh\nprintf '%s\\n'";
      for (int i = 0; i < kHostGpus; ++i) smi += ' ' + std::to_string(i);
      flink::bench::writeExecutable(nvidiaSmi_, smi + '\n');
      floorWrapper_ = (dir_ / "floor-wrapper.sh").string();
      flink::bench::writeExecutable(
          floorWrapper_,
          "#!/bin/sh\nexec " + flink::strings::shellWord(FLINK_GPU_SPAWN_FLOOR) + " \"$@\"\n");

      holder_ = std::make_unique<flink::bench::HolderProcess>();
      flink::bench::writeHeldRecords(coordinationFile_, holder_->pid(), kHostGpus - 1);

      const char* path = std::getenv("PATH");
      const std::string newPath =
          dir_.string() + (path != nullptr && *path != '\0' ? ":" + std::string(path) : "");
      if (::setenv("PATH", newPath.c_str(), 1) != 0) {
        throw std::system_error(errno, std::generic_category(), "setenv PATH");
      }
      const std::string noNvml = (dir_ / "no-nvml" / "libnvidia-ml.so.1").string();
      if (::setenv("FLINK_GPU_NVML_LIBRARY", noNvml.c_str(), 1) != 0) {
        throw std::system_error(errno, std::generic_category(), "setenv FLINK_GPU_NVML_LIBRARY");
      }
    } catch (...) {
      cleanUp();
      throw;
    }
  }
  ~StandInHost() { cleanUp(); }
  StandInHost(const StandInHost&) = delete;
  StandInHost& operator=(const StandInHost&) = delete;

  const std::string& nvidiaSmi() const noexcept { return nvidiaSmi_; }
  const std::string& coordinationFile() const noexcept { return coordinationFile_; }
  const std::string& floorWrapper() const noexcept { return floorWrapper_; }

 private:
  void cleanUp() noexcept {
    holder_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  std::filesystem::path dir_;
  std::string nvidiaSmi_;
  std::string coordinationFile_;
  std::string floorWrapper_;
  std::unique_ptr<flink::bench::HolderProcess> holder_;
};

/// The host of this run; benchmarks are registered before main() has made it.
const StandInHost* gHost = nullptr;

/// What each benchmark runs, and what it must print.
struct Command {
  std::vector<std::string> argv;
  std::string expected;
  bool coordinated = false;  ///< allocates: our record is released before each run
};

std::string allIndices() {
  std::string lines;
  for (int i = 0; i < kHostGpus; ++i) lines += std::to_string(i) + '\n';
  return lines;
}

Command bareNvidiaSmi() {
  return {{gHost->nvidiaSmi(), "--query-gpu=index", "--format=csv,noheader"}, allIndices()};
}

Command coordinatedDiscovery() {
  return {{FLINK_GPU_DISCOVERY_SCRIPT, "1", "--enable-coordination-mode", "--coordination-file",
           gHost->coordinationFile()},
          std::to_string(kHostGpus - 1) + '\n',
          true};
}

Command coordinatedProgram() {
  Command command = coordinatedDiscovery();
  command.argv[0] = FLINK_GPU_DISCOVERY_PROGRAM;
  return command;
}

Command plainDiscovery() { return {{FLINK_GPU_DISCOVERY_SCRIPT, "1"}, "0\n"}; }

/// `floor` (a build of spawn_floor) running the bare nvidia-smi: what it prints is nvidia-smi's.
Command programFloor(const char* floor) {
  Command command = bareNvidiaSmi();
  command.argv.insert(command.argv.begin(), floor);
  return command;
}

/// The same from the floor's `sh` wrapper.
Command wrapperFloor() {
  Command command = bareNvidiaSmi();
  command.argv.insert(command.argv.begin(), gHost->floorWrapper());
  return command;
}

/// Gives back GPU 63: removes the records owned by this process (the discovery's parent).
void releaseOurs() {
  const pid_t self = ::getpid();
  coordination::release(gHost->coordinationFile(), [self](const coordination::Record& record) {
    return record.owner.pid == self;
  });
}

/// One run of `command`, checked; false (with the state marked failed) if it misbehaved.
bool runChecked(benchmark::State& state, const Command& command, char* const* argv) {
  std::string error;
  std::string output = bareSpawnAndRead(argv, error);
  if (error.empty() && output != command.expected) {
    error = command.argv[0] + " printed '" + output + "', not '" + command.expected + "'";
  }
  if (!error.empty()) {
    state.SkipWithError(error.c_str());
    return false;
  }
  benchmark::DoNotOptimize(output);
  return true;
}

void runBenchmark(benchmark::State& state, const Command& command) {
  const std::vector<char*> argv = cArgv(command.argv);
  try {
    for (auto _ : state) {
      if (command.coordinated) {
        state.PauseTiming();
        releaseOurs();
        state.ResumeTiming();
      }
      if (!runChecked(state, command, argv.data())) break;
    }
  } catch (const std::exception& e) {  // Google Benchmark does not catch; report, don't abort
    state.SkipWithError(e.what());
  }
}

void BM_BareNvidiaSmi(benchmark::State& state) { runBenchmark(state, bareNvidiaSmi()); }

void BM_CoordinatedDiscovery(benchmark::State& state) {
  runBenchmark(state, coordinatedDiscovery());
}

void BM_CoordinatedProgram(benchmark::State& state) { runBenchmark(state, coordinatedProgram()); }

void BM_PlainDiscovery(benchmark::State& state) { runBenchmark(state, plainDiscovery()); }

void BM_PairedDiscovery(benchmark::State& state) {
  using Clock = std::chrono::steady_clock;
  constexpr int kSides = 7;
  const Command commands[kSides] = {bareNvidiaSmi(),
                                    coordinatedDiscovery(),
                                    coordinatedProgram(),
                                    plainDiscovery(),
                                    wrapperFloor(),
                                    programFloor(FLINK_GPU_SPAWN_FLOOR),
                                    programFloor(FLINK_GPU_SPAWN_FLOOR_STATIC)};
  std::vector<std::vector<char*>> argvs;
  for (const Command& command : commands) argvs.push_back(cArgv(command.argv));
  Clock::duration spent[kSides]{};
  int first = 0;
  try {
    for (auto _ : state) {
      // Rotate the order so that none of them always follows the same one.
      for (int offset = 0; offset < kSides; ++offset) {
        const int which = (first + offset) % kSides;
        if (commands[which].coordinated) releaseOurs();  // outside this side's clock
        const Clock::time_point start = Clock::now();
        if (!runChecked(state, commands[which], argvs[which].data())) return;
        spent[which] += Clock::now() - start;
      }
      first = (first + 1) % kSides;
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  const auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  const double iterations = static_cast<double>(state.iterations());
  state.counters["ratio"] = seconds(spent[1]) / seconds(spent[0]);
  state.counters["program_ratio"] = seconds(spent[2]) / seconds(spent[0]);
  state.counters["plain_ratio"] = seconds(spent[3]) / seconds(spent[0]);
  state.counters["floor_ratio"] = seconds(spent[4]) / seconds(spent[0]);
  state.counters["program_floor_ratio"] = seconds(spent[5]) / seconds(spent[0]);
  state.counters["static_program_floor_ratio"] = seconds(spent[6]) / seconds(spent[0]);
  state.counters["bare_us"] = seconds(spent[0]) * 1e6 / iterations;
  state.counters["coordinated_us"] = seconds(spent[1]) * 1e6 / iterations;
  state.counters["wrapper_floor_us"] = seconds(spent[4]) * 1e6 / iterations;
}

BENCHMARK(BM_BareNvidiaSmi)->Apply(flink::bench::configureRepetitions);
BENCHMARK(BM_CoordinatedDiscovery)->Apply(flink::bench::configureRepetitions);
BENCHMARK(BM_CoordinatedProgram)->Apply(flink::bench::configureRepetitions);
BENCHMARK(BM_PlainDiscovery)->Apply(flink::bench::configureRepetitions);
BENCHMARK(BM_PairedDiscovery)->Apply(flink::bench::configureRepetitions);

}  // namespace

int main(int argc, char** argv) {
  return flink::bench::benchMainWithHost<StandInHost>("discovery_bench", argc, argv, gHost);
}
