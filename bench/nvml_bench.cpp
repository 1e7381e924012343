// nvml_bench: the two sources of the default discovery side by side, on a stand-in host of 8
// GPUs: NvmlEnumerator (one NVML session: init, the queries per GPU, shutdown) against the
// stand-in libnvidia-ml.so.1 of the tests, and NvidiaSmiEnumerator (one nvidia-smi process)
// against a stand-in nvidia-smi, a `#!/bin/sh` printf of the 8 GPUs' query lines.
//
// On a CPU-only machine this only proves that the NVML path works and costs little of its own:
// the stand-in answers from memory, where the real library talks to the kernel driver, so the
// NVML figure here is a floor and the ratio says nothing about a real host. For real figures,
// run tools/nvml-vs-nvidia-smi on a GPU host (scripts/gpu-machine-check.sh).
//
//   BM_NvmlEnumerate        NvmlEnumerator::enumerate(), checked to list the 8 GPUs
//   BM_NvidiaSmiEnumerate   NvidiaSmiEnumerator::enumerate(), likewise
#include <stdlib.h>

#include <benchmark/benchmark.h>

#include <cerrno>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <system_error>

#include "BenchSupport.h"
#include "host/enumeration/NvidiaSmi.h"
#include "host/enumeration/NvmlEnumerator.h"

#ifndef FLINK_GPU_FAKE_NVML
#error "FLINK_GPU_FAKE_NVML (the path of the stand-in libnvidia-ml.so.1) must be set by the build"
#endif

namespace {

constexpr int kHostGpus = 8;

/// The stand-in host: the stand-in library's JSON ($FAKE_NVML_DEVICES) and the stand-in
/// nvidia-smi, in a temporary folder removed when this goes.
class StandInHost {
 public:
  StandInHost() : dir_(flink::bench::makeTempFolder("flink-gpu-nvml-bench")) {
    std::string json = R"({"devices": [)";
    std::string smi = "#!/bin/sh\nprintf '%s\\n'";
    for (int i = 0; i < kHostGpus; ++i) {
      char uuid[64];
      char busId[32];
      std::snprintf(uuid, sizeof uuid, "GPU-%08x-0000-4000-8000-%012x", i, i);
      std::snprintf(busId, sizeof busId, "00000000:%02X:00.0", 0x19 + i * 0x20);
      json += std::string(i > 0 ? ", " : "") + R"({"uuid": ")" + uuid +
              R"(", "name": "NVIDIA H200", "pci_bus_id": ")" + busId +
              R"(", "memory_total_mib": 143771, "minor_number": )" + std::to_string(i) +
              R"(, "mig_enabled": false})";
      smi += " '" + std::to_string(i) + ", " + uuid + ", NVIDIA H200, " + busId + ", 143771'";
    }
    json += "]}";
    {
      std::ofstream out(dir_ / "host.json", std::ios::binary | std::ios::trunc);
      out << json;
      if (!out.flush()) throw std::runtime_error("cannot write " + (dir_ / "host.json").string());
    }
    nvidiaSmi_ = dir_ / "nvidia-smi";
    flink::bench::writeExecutable(nvidiaSmi_, smi + '\n');
    if (::setenv("FAKE_NVML_DEVICES", (dir_ / "host.json").c_str(), 1) != 0) {
      throw std::system_error(errno, std::generic_category(), "setenv FAKE_NVML_DEVICES");
    }
  }
  ~StandInHost() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  StandInHost(const StandInHost&) = delete;
  StandInHost& operator=(const StandInHost&) = delete;

  const std::filesystem::path& nvidiaSmi() const noexcept { return nvidiaSmi_; }

 private:
  std::filesystem::path dir_;
  std::filesystem::path nvidiaSmi_;
};

const StandInHost* gHost = nullptr;

void runEnumerator(benchmark::State& state, flink::discovery::GpuEnumerator& enumerator) {
  try {
    for (auto _ : state) {
      const flink::discovery::Enumeration listed = enumerator.enumerate();
      if (listed.devices.size() != kHostGpus) {
        state.SkipWithError(("listed " + std::to_string(listed.devices.size()) + " GPUs, not " +
                             std::to_string(kHostGpus))
                                .c_str());
        break;
      }
      benchmark::DoNotOptimize(listed);
    }
  } catch (const std::exception& e) {  // Google Benchmark does not catch; report, don't abort
    state.SkipWithError(e.what());
  }
}

void BM_NvmlEnumerate(benchmark::State& state) {
  flink::discovery::NvmlEnumerator enumerator(FLINK_GPU_FAKE_NVML);
  runEnumerator(state, enumerator);
}

void BM_NvidiaSmiEnumerate(benchmark::State& state) {
  flink::discovery::NvidiaSmiOptions options;
  options.executable = gHost->nvidiaSmi();
  flink::discovery::NvidiaSmiEnumerator enumerator(options);
  runEnumerator(state, enumerator);
}

BENCHMARK(BM_NvmlEnumerate)->Apply(flink::bench::configureRepetitions);
BENCHMARK(BM_NvidiaSmiEnumerate)->Apply(flink::bench::configureRepetitions);

}  // namespace

int main(int argc, char** argv) {
  return flink::bench::benchMainWithHost<StandInHost>("nvml_bench", argc, argv, gHost);
}
