// in_process_bench: one coordinated discovery by GPUDriver with the default discovery in-process,
// next to the same discovery through the script (discovery-script.in-process: false), on a
// stand-in NVML host of 64 GPUs of which 63 are held by another live worker. The target: the
// in-process one at least 20x faster; the figures are in microseconds.
//
// The stand-in host, made at start-up in a temporary folder:
//   host.json         64 GPUs with UUIDs and PCI bus ids, which the stand-in libnvidia-ml.so.1 of
//                     the tests answers from ($FLINK_GPU_NVML_LIBRARY, $FAKE_NVML_DEVICES): NVML
//                     answers both ways, so nvidia-smi never runs.
//   coordination      63 records `<gpu> <pid>\t<start time>` for GPUs 0..62, owned by a holder
//                     process this benchmark forks (it pause()s until killed at the end), so each
//                     discovery checks a live owner and gets the one free GPU, 63.
//
//   BM_InProcessDiscovery  what a worker pays: a driver made (which reads the script to know it
//                          is ours) and its retrieveResourceInfo(1) in-process (enumeration
//                          through NVML, health, placement, the locked coordination file, a
//                          lease), checked to give GPU 63. The driver is destroyed, which gives
//                          the GPU back, outside the timing.
//   BM_ScriptDiscovery     the same through the script (sh, which execs nvidia-gpu-discovery,
//                          which does the same work): its record is released outside the timing.
//   BM_PairedInProcessVsScript  one of each per iteration, in alternating order, each timed;
//                          counter `speedup` is script / in-process (the figure to quote on a
//                          noisy machine), in_process_us and script_us the means.
//
// Wall-clock time is what counts (UseRealTime). bench/run-benchmarks.sh prints the speed-up
// against the 20x target.
#include <stdlib.h>
#include <unistd.h>

#include <benchmark/benchmark.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "BenchSupport.h"
#include "HeldGpus.h"
#include "flink/externalresource/gpu/GPUDriver.h"
#include "flink/externalresource/gpu/GPUDriverFactory.h"
#include "flink/externalresource/gpu/GPUDriverOptions.h"
#include "flink/externalresource/gpu/GPUInfo.h"
#include "host/coordination/Coordination.h"

#ifndef FLINK_GPU_DISCOVERY_SCRIPT
#error "FLINK_GPU_DISCOVERY_SCRIPT (the path of nvidia-gpu-discovery.sh) must be set by the build"
#endif
#ifndef FLINK_GPU_FAKE_NVML
#error "FLINK_GPU_FAKE_NVML (the stand-in libnvidia-ml.so.1) must be set by the build"
#endif

namespace {

namespace coordination = flink::coordination;
using flink::externalresource::gpu::GPUDriver;
using flink::externalresource::gpu::GPUDriverFactory;
using flink::externalresource::gpu::GPUDriverOptions;
using flink::externalresource::gpu::GPUInfo;

constexpr int kHostGpus = 64;

/// The stand-in host (see above). Undone (holder killed and reaped, folder removed) when this
/// goes; the environment is left as it is, the process being about to exit.
class StandInHost {
 public:
  StandInHost() : dir_(flink::bench::makeTempFolder("flink-gpu-in-process-bench")) {
    try {
      coordinationFile_ = (dir_ / "coordination").string();
      std::string json = "{\"devices\": [";
      for (int i = 0; i < kHostGpus; ++i) {
        char device[160];
        std::snprintf(device, sizeof device,
                      "%s{\"uuid\": \"GPU-%08x-1111-2222-3333-444444444444\", "
                      "\"pci_bus_id\": \"00000000:%02X:00.0\"}",
                      i == 0 ? "" : ", ", static_cast<unsigned>(i), static_cast<unsigned>(i + 1));
        json += device;
      }
      {
        std::ofstream out(dir_ / "host.json", std::ios::trunc);
        out << json << "]}\n";
        if (!out.flush()) throw std::runtime_error("cannot write the stand-in host");
      }

      holder_ = std::make_unique<flink::bench::HolderProcess>();
      flink::bench::writeHeldRecords(coordinationFile_, holder_->pid(), kHostGpus - 1);
      flink::bench::useStandInNvml(FLINK_GPU_FAKE_NVML, dir_ / "host.json");
    } catch (...) {
      cleanUp();
      throw;
    }
  }
  ~StandInHost() { cleanUp(); }
  StandInHost(const StandInHost&) = delete;
  StandInHost& operator=(const StandInHost&) = delete;

  const std::string& coordinationFile() const noexcept { return coordinationFile_; }

 private:
  void cleanUp() noexcept {
    holder_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  std::filesystem::path dir_;
  std::string coordinationFile_;
  std::unique_ptr<flink::bench::HolderProcess> holder_;
};

const StandInHost* gHost = nullptr;

std::unique_ptr<GPUDriver> makeDriver(bool inProcess) {
  flink::Configuration config;
  config.set(GPUDriverOptions::DISCOVERY_SCRIPT_PATH, std::string(FLINK_GPU_DISCOVERY_SCRIPT));
  config.set(GPUDriverOptions::DISCOVERY_SCRIPT_ARG,
             "--enable-coordination-mode --coordination-file " + gHost->coordinationFile());
  config.set(GPUDriverOptions::DISCOVERY_SCRIPT_IN_PROCESS, inProcess);
  std::unique_ptr<GPUDriver> driver = GPUDriverFactory().createGPUDriver(config);
  if (driver->runsInProcess() != inProcess) {
    throw std::runtime_error(std::string("the driver does not run ") +
                             (inProcess ? "in-process" : "the script"));
  }
  return driver;
}

/// Gives back GPU 63: removes the records owned by this process (the script's parent).
void releaseOurs() {
  const pid_t self = ::getpid();
  coordination::release(gHost->coordinationFile(), [self](const coordination::Record& record) {
    return record.owner.pid == self;
  });
}

/// One discovery, checked to give GPU 63.
void discoverChecked(GPUDriver& driver) {
  const flink::ExternalResourceInfoSet infos = driver.retrieveResourceInfo(1);
  const std::string expected = std::to_string(kHostGpus - 1);
  if (infos.size() != 1 || dynamic_cast<const GPUInfo&>(*infos[0]).index() != expected) {
    throw std::runtime_error("the discovery did not give GPU " + expected);
  }
  benchmark::DoNotOptimize(infos);
}

void BM_InProcessDiscovery(benchmark::State& state) {
  try {
    releaseOurs();  // what another benchmark's last run left (repetitions are interleaved)
    for (auto _ : state) {
      std::unique_ptr<GPUDriver> driver = makeDriver(true);
      discoverChecked(*driver);
      state.PauseTiming();
      driver.reset();  // gives GPU 63 back
      state.ResumeTiming();
    }
  } catch (const std::exception& e) {  // Google Benchmark does not catch; report, don't abort
    state.SkipWithError(e.what());
  }
}

void BM_ScriptDiscovery(benchmark::State& state) {
  try {
    for (auto _ : state) {
      state.PauseTiming();
      releaseOurs();
      state.ResumeTiming();
      discoverChecked(*makeDriver(false));
    }
    releaseOurs();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

void BM_PairedInProcessVsScript(benchmark::State& state) {
  using Clock = std::chrono::steady_clock;
  Clock::duration inProcess{};
  Clock::duration script{};
  bool inProcessFirst = true;
  try {
    for (auto _ : state) {
      for (int side = 0; side < 2; ++side) {
        releaseOurs();  // GPU 63 free again, outside either side's clock
        const bool inProcessSide = (side == 0) == inProcessFirst;
        const Clock::time_point start = Clock::now();
        std::unique_ptr<GPUDriver> driver = makeDriver(inProcessSide);
        discoverChecked(*driver);
        (inProcessSide ? inProcess : script) += Clock::now() - start;
        driver.reset();  // in-process: gives GPU 63 back, outside the clock
      }
      inProcessFirst = !inProcessFirst;
    }
    releaseOurs();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  const auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  const double iterations = static_cast<double>(state.iterations());
  state.counters["speedup"] = seconds(script) / seconds(inProcess);
  state.counters["in_process_us"] = seconds(inProcess) * 1e6 / iterations;
  state.counters["script_us"] = seconds(script) * 1e6 / iterations;
}

BENCHMARK(BM_InProcessDiscovery)->Apply(flink::bench::configureRepetitions);
BENCHMARK(BM_ScriptDiscovery)->Apply(flink::bench::configureRepetitions);
BENCHMARK(BM_PairedInProcessVsScript)->Apply(flink::bench::configureRepetitions);

}  // namespace

int main(int argc, char** argv) {
  // The driver logs every discovery at info level; that is not what is measured.
  spdlog::set_level(spdlog::level::warn);
  return flink::bench::benchMainWithHost<StandInHost>("in_process_bench", argc, argv, gHost);
}
