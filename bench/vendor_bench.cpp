// vendor_bench: why the AMD discovery reads sysfs and runs a vendor tool only where sysfs cannot
// answer. One findAmdUnits on the tests' stand-in 8× MI210 host (the KFD topology, PCI device
// attributes and render nodes of ROCm/k8s-device-plugin's testdata host) against the same
// discovery answered by the stand-in amd-smi (tests/fixtures/amd/amd-smi, a shell script that
// prints amd-smi's JSON) on a host without a KFD topology. Both run in one loop
// (BM_PairedSysfsVsTool), so that the ratio is measured side by side; the stand-in tool is a
// shell script, which starts faster than the real amd-smi (a Python program), so the ratio is a
// lower bound. Not run by run-benchmarks.sh; its figures are in docs/benchmarks.md.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>

#include "host/amd/AmdGpus.h"
#include "host/amd/FakeAmdHost.h"

namespace {

using flink::amd::findAmdUnits;
using flink::amd::testing::FakeAmdHost;
using Clock = std::chrono::steady_clock;

void checkEight(const flink::discovery::VendorHost& host, benchmark::State& state) {
  if (host.units.size() != 8) state.SkipWithError("the stand-in host did not give 8 GPUs");
}

void BM_AmdSysfs(benchmark::State& state) {
  FakeAmdHost host;
  host.mi210Host();
  const auto options = host.options();
  for (auto _ : state) checkEight(findAmdUnits(options), state);
}
BENCHMARK(BM_AmdSysfs)->Unit(benchmark::kMicrosecond);

void BM_AmdSmiFallback(benchmark::State& state) {
  FakeAmdHost host;  // no KFD topology: amd-smi answers
  std::filesystem::remove_all(host.sysfs() / "class/kfd");
  host.installTool("amd-smi");
  const auto options = host.options();
  for (auto _ : state) benchmark::DoNotOptimize(findAmdUnits(options));
}
BENCHMARK(BM_AmdSmiFallback)->Unit(benchmark::kMicrosecond);

/// Both in one loop; the counters are the mean of each, and how many times the tool takes.
void BM_PairedSysfsVsTool(benchmark::State& state) {
  FakeAmdHost sysfs;
  sysfs.mi210Host();
  FakeAmdHost tool;
  std::filesystem::remove_all(tool.sysfs() / "class/kfd");
  tool.installTool("amd-smi");
  const auto sysfsOptions = sysfs.options();
  const auto toolOptions = tool.options();
  double sysfsSeconds = 0;
  double toolSeconds = 0;
  for (auto _ : state) {
    const auto start = Clock::now();
    checkEight(findAmdUnits(sysfsOptions), state);
    const auto middle = Clock::now();
    benchmark::DoNotOptimize(findAmdUnits(toolOptions));
    const auto end = Clock::now();
    sysfsSeconds += std::chrono::duration<double>(middle - start).count();
    toolSeconds += std::chrono::duration<double>(end - middle).count();
  }
  const double runs = static_cast<double>(state.iterations());
  state.counters["sysfs_us"] = sysfsSeconds / runs * 1e6;
  state.counters["tool_us"] = toolSeconds / runs * 1e6;
  state.counters["tool_over_sysfs"] = toolSeconds / sysfsSeconds;
}
BENCHMARK(BM_PairedSysfsVsTool)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
