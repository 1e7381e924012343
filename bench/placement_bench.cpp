// placement_bench: what the placement rule costs to plan one request (placement::choose, from the
// topology to the chosen identifiers), on 16 and 64 GPUs, for every size of request that matters:
// the targets are under 10 ms for 16 GPUs and under 50 ms for 64, whatever is asked for.
//
//   BM_Choose/<gpus>/<amount>/<host>   host 0: NVLink islands of 8 GPUs, two GPUs per PCIe
//                                      switch, one NUMA node per island; host 1: PCIe only, two
//                                      sockets, switches of two; host 2: NVSwitch, two NUMA nodes
// The counter "heuristic" is 1 when the request was past the exhaustive limit.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "host/placement/Placement.h"
#include "host/placement/Topology.h"

namespace {

using flink::placement::PairLink;
using flink::placement::PcieLevel;
using flink::placement::Topology;

Topology makeHost(std::size_t n, int kind) {
  std::vector<flink::placement::GpuTopology> gpus(n);
  const std::size_t perNode = kind == 0 ? 8 : n / 2;
  for (std::size_t i = 0; i < n; ++i) {
    gpus[i].identifier = std::to_string(i);
    gpus[i].numaNode = static_cast<unsigned>(i / perNode);
  }
  Topology topology(std::move(gpus));
  topology.nvswitch = kind == 2;
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = i + 1; j < n; ++j) {
      PairLink link;
      link.nvlinkKnown = true;
      const bool sameNode = i / perNode == j / perNode;
      if (kind == 0) {
        link.nvlinks = sameNode ? 2 : 0;
        link.pcie = !sameNode        ? PcieLevel::kSystem
                    : i / 2 == j / 2 ? PcieLevel::kSingleSwitch
                                     : PcieLevel::kHostBridge;
      } else if (kind == 1) {
        link.pcie = !sameNode        ? PcieLevel::kSystem
                    : i / 2 == j / 2 ? PcieLevel::kSingleSwitch
                    : i / 4 == j / 4 ? PcieLevel::kMultipleSwitches
                                     : PcieLevel::kNode;
      } else {
        link.nvlinks = 18;
        link.pcie = sameNode ? PcieLevel::kNode : PcieLevel::kSystem;
      }
      topology.setLink(i, j, link);
    }
  }
  return topology;
}

void BM_Choose(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto amount = static_cast<std::size_t>(state.range(1));
  const Topology topology = makeHost(n, static_cast<int>(state.range(2)));
  // One GPU held, so that the request is not the trivially symmetric empty host.
  std::vector<std::string> free;
  for (std::size_t i = 1; i < n; ++i) free.push_back(std::to_string(i));
  std::size_t chosen = 0;
  for (auto _ : state) {
    const std::vector<std::string> result = flink::placement::choose(topology, free, amount);
    chosen = result.size();
    benchmark::DoNotOptimize(result.data());
  }
  if (chosen != amount) state.SkipWithError("the plan did not choose the amount asked for");
  double combinations = 1;
  for (std::size_t i = 1; i <= amount; ++i) {
    combinations = combinations * static_cast<double>(free.size() - amount + i) / i;
  }
  state.counters["heuristic"] = combinations > flink::placement::kExhaustiveLimit ? 1 : 0;
}

void arguments(benchmark::internal::Benchmark* benchmark) {
  for (int host = 0; host < 3; ++host) {
    for (int amount : {1, 2, 4, 8}) benchmark->Args({16, amount, host});
    for (int amount : {1, 2, 3, 4, 8, 16, 32, 48}) benchmark->Args({64, amount, host});
  }
}

BENCHMARK(BM_Choose)->Apply(arguments)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
