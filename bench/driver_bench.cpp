// driver_bench: what GPUDriver::retrieveResourceInfo costs on top of simply running the
// discovery script, measured side by side in one run.
//
//   BM_BareSpawnAndWait      the floor: posix_spawn the script with stdout on a pipe, read the
//                            pipe to EOF, waitpid. Nothing else.
//   BM_ProcessRun            flink::process::run on the same argv (the driver's process layer:
//                            process group, two pipes, pidfd, poll loop, group kill, reap).
//   BM_RetrieveResourceInfo  the public API: a driver made once, retrieveResourceInfo(2) per
//                            iteration, checked to return 2 GPUs.
//   BM_PairedRetrieveVsBare  a cross-check of the ratio that noise hurts far less: each
//                            iteration makes one bare spawn and one retrieveResourceInfo call,
//                            back to back in alternating order, and times each; counter
//                            `ratio` is their quotient over the repetition. Load that comes and
//                            goes then hits both sides of the ratio alike, where the separate
//                            benchmarks above see it only when they happen to be running.
//
// All of them run the same argv, `<script> 2 null` (what the driver passes when no arguments
// are configured), so the only difference between them is the code around the spawn.
// Wall-clock time is what counts (UseRealTime): the parent mostly sleeps while the script runs;
// the CPU column (the parent's own CPU time) shows the driver's extra work, most of which
// overlaps the child's exec and so does not reach the wall clock.
// bench/run-benchmarks.sh prints the ratio retrieveResourceInfo / bare spawn, both ways.
#include <benchmark/benchmark.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "BenchSupport.h"
#include "flink/configuration/Configuration.h"
#include "flink/externalresource/gpu/GPUDriverFactory.h"
#include "flink/externalresource/gpu/GPUDriverOptions.h"
#include "process/Subprocess.h"

namespace {

using flink::bench::bareSpawnAndRead;
using flink::bench::cArgv;
using flink::bench::scriptPath;

/// The argv every benchmark here runs, as the driver builds it for retrieveResourceInfo(2).
std::vector<std::string> scriptArgv() { return {scriptPath(), "2", "null"}; }

/// One bare run, checked; false (with the state marked failed) if the script misbehaved.
bool bareRunChecked(benchmark::State& state, char* const* argv) {
  std::string error;
  std::string output = bareSpawnAndRead(argv, error);
  if (!error.empty() || output != "0,1\n") {
    state.SkipWithError(error.empty() ? "unexpected output from the script" : error.c_str());
    return false;
  }
  benchmark::DoNotOptimize(output);
  return true;
}

/// A GPU driver for the script, made through the public factory as Flink makes it.
std::unique_ptr<flink::ExternalResourceDriver> makeDriver() {
  using flink::externalresource::gpu::GPUDriverFactory;
  using flink::externalresource::gpu::GPUDriverOptions;
  flink::Configuration config;
  config.set(GPUDriverOptions::DISCOVERY_SCRIPT_PATH, scriptPath());
  return GPUDriverFactory().createExternalResourceDriver(config);
}

/// One retrieveResourceInfo(2), checked; false (with the state marked failed) if not 2 GPUs.
bool retrieveChecked(benchmark::State& state, flink::ExternalResourceDriver& driver) {
  flink::ExternalResourceInfoSet gpus = driver.retrieveResourceInfo(2);
  if (gpus.size() != 2) {
    state.SkipWithError("retrieveResourceInfo(2) did not return 2 GPUs");
    return false;
  }
  benchmark::DoNotOptimize(gpus);
  return true;
}

void BM_BareSpawnAndWait(benchmark::State& state) {
  const std::vector<std::string> argvStrings = scriptArgv();
  const std::vector<char*> argv = cArgv(argvStrings);
  for (auto _ : state) {
    if (!bareRunChecked(state, argv.data())) break;
  }
}

void BM_ProcessRun(benchmark::State& state) {
  const std::vector<std::string> argv = scriptArgv();
  const flink::process::RunOptions options;  // the defaults the driver uses, bar its time-out
  try {
    for (auto _ : state) {
      flink::process::ProcessResult result = flink::process::run(argv, options);
      if (!result.outcome.succeeded() || result.stdoutOutput.data != "0,1\n") {
        state.SkipWithError("process::run: the script failed or printed something unexpected");
        break;
      }
      benchmark::DoNotOptimize(result);
    }
  } catch (const std::exception& e) {  // Google Benchmark does not catch; report, don't abort
    state.SkipWithError(e.what());
  }
}

void BM_RetrieveResourceInfo(benchmark::State& state) {
  try {
    // Made once: the configuration checks (stat, access) are a one-off cost per worker, not per
    // discovery.
    const std::unique_ptr<flink::ExternalResourceDriver> driver = makeDriver();
    for (auto _ : state) {
      if (!retrieveChecked(state, *driver)) break;
    }
  } catch (const std::exception& e) {  // Google Benchmark does not catch; report, don't abort
    state.SkipWithError(e.what());
  }
}

void BM_PairedRetrieveVsBare(benchmark::State& state) {
  using Clock = std::chrono::steady_clock;
  const std::vector<std::string> argvStrings = scriptArgv();
  const std::vector<char*> argv = cArgv(argvStrings);
  Clock::duration bare{};
  Clock::duration driverTime{};
  try {
    const std::unique_ptr<flink::ExternalResourceDriver> driver = makeDriver();
    bool bareFirst = true;
    for (auto _ : state) {
      // Alternate the order: whichever runs second may find the CPU still busy with the first
      // one's child being reaped or its pipe torn down.
      for (int side = 0; side < 2; ++side) {
        const bool runBare = (side == 0) == bareFirst;
        const Clock::time_point start = Clock::now();
        if (runBare ? !bareRunChecked(state, argv.data()) : !retrieveChecked(state, *driver)) {
          return;
        }
        (runBare ? bare : driverTime) += Clock::now() - start;
      }
      bareFirst = !bareFirst;
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  const double iterations = static_cast<double>(state.iterations());
  state.counters["ratio"] = std::chrono::duration<double>(driverTime).count() /
                            std::chrono::duration<double>(bare).count();
  state.counters["bare_us"] = std::chrono::duration<double, std::micro>(bare).count() / iterations;
  state.counters["retrieve_us"] =
      std::chrono::duration<double, std::micro>(driverTime).count() / iterations;
}

BENCHMARK(BM_BareSpawnAndWait)->Apply(flink::bench::configureRepetitions);
BENCHMARK(BM_ProcessRun)->Apply(flink::bench::configureRepetitions);
BENCHMARK(BM_RetrieveResourceInfo)->Apply(flink::bench::configureRepetitions);
BENCHMARK(BM_PairedRetrieveVsBare)->Apply(flink::bench::configureRepetitions);

}  // namespace

int main(int argc, char** argv) {
  // The driver logs every discovery at INFO on stderr; a thousand lines a second would measure
  // the terminal, not the driver. Warnings (a failing script) still show.
  spdlog::set_level(spdlog::level::warn);
  return flink::bench::benchMain(argc, argv);
}
