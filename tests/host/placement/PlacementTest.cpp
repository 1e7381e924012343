// Tests of the placement rule (host/placement/Placement.h) on topologies built by hand: the island,
// PCIe, NVSwitch and unknown hosts of issue 12, against go-gpuallocator's best-effort policy
// (re-stated here from its description: the best-scoring partition of the free GPUs into sets of
// the requested size, then that partition's best set), and the heuristic against the exhaustive
// search.
#include <algorithm>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "host/placement/Placement.h"
#include "host/placement/Topology.h"

namespace {

using flink::placement::Candidates;
using flink::placement::choose;
using flink::placement::GpuTopology;
using flink::placement::PairLink;
using flink::placement::PcieLevel;
using flink::placement::Search;
using flink::placement::Topology;
using Ids = std::vector<std::string>;

/// A host of `n` GPUs "0".."n-1"; `relation(i, j)` gives each pair, `numa(i)` each GPU's node.
Topology host(std::size_t n, const std::function<PairLink(std::size_t, std::size_t)>& relation,
              const std::function<std::optional<unsigned>(std::size_t)>& numa) {
  std::vector<GpuTopology> gpus(n);
  for (std::size_t i = 0; i < n; ++i) {
    gpus[i].identifier = std::to_string(i);
    gpus[i].numaNode = numa(i);
  }
  Topology topology(std::move(gpus));
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = i + 1; j < n; ++j) topology.setLink(i, j, relation(i, j));
  }
  return topology;
}

PairLink link(unsigned nvlinks, std::optional<PcieLevel> pcie) {
  return PairLink{nvlinks, true, pcie};
}

/// `islands` NVLink islands of `size` GPUs (2 links per pair), one NUMA node each; two GPUs per
/// PCIe switch, one host bridge per node.
Topology islandHost(std::size_t islands = 2, std::size_t size = 4) {
  return host(
      islands * size,
      [size](std::size_t i, std::size_t j) {
        if (i / size != j / size) return link(0, PcieLevel::kSystem);
        return link(2, i / 2 == j / 2 ? PcieLevel::kSingleSwitch : PcieLevel::kHostBridge);
      },
      [size](std::size_t i) { return static_cast<unsigned>(i / size); });
}

/// Two sockets, two switches per socket under one upstream switch, two GPUs per switch.
Topology pcieHost() {
  return host(
      8,
      [](std::size_t i, std::size_t j) {
        if (i / 4 != j / 4) return link(0, PcieLevel::kSystem);
        return link(0, i / 2 == j / 2 ? PcieLevel::kSingleSwitch : PcieLevel::kMultipleSwitches);
      },
      [](std::size_t i) { return static_cast<unsigned>(i / 4); });
}

/// Every pair NV18 through the fabric; PCIe as given (unknown by default); NUMA 0 for 0-3.
Topology nvswitchHost(std::optional<PcieLevel> sameNode = std::nullopt,
                      std::optional<PcieLevel> otherNode = std::nullopt) {
  Topology topology = host(
      8,
      [&](std::size_t i, std::size_t j) { return link(18, i / 4 == j / 4 ? sameNode : otherNode); },
      [](std::size_t i) { return static_cast<unsigned>(i / 4); });
  topology.nvswitch = true;
  return topology;
}

Ids allBut(std::size_t n, const std::vector<std::size_t>& held) {
  Ids free;
  for (std::size_t i = 0; i < n; ++i) {
    if (std::find(held.begin(), held.end(), i) == held.end()) free.push_back(std::to_string(i));
  }
  return free;
}

/// The sum of pairScore over the pairs of `set` (positions in `topology`).
long long setScore(const Topology& topology, const std::vector<std::size_t>& set) {
  long long score = 0;
  for (std::size_t a = 0; a < set.size(); ++a) {
    for (std::size_t b = a + 1; b < set.size(); ++b) {
      score += flink::placement::pairScore(topology.link(set[a], set[b]));
    }
  }
  return score;
}

std::vector<std::size_t> positions(const Ids& ids) {
  std::vector<std::size_t> result;
  for (const std::string& id : ids) result.push_back(std::stoul(id));
  return result;
}

/// go-gpuallocator's best-effort policy: pad the free GPUs to a multiple of `size` with empty
/// places, find the partition into sets of `size` with the highest sum of set scores (the first
/// found on ties), then the highest-scoring set of that partition without empty places.
std::vector<std::size_t> goGpuAllocator(const Topology& topology, std::vector<std::size_t> free,
                                        std::size_t size) {
  const std::size_t padded = (free.size() + size - 1) / size * size;
  std::vector<long long> items(free.begin(), free.end());
  items.resize(padded, -1);
  std::vector<std::vector<long long>> current;
  std::vector<std::vector<long long>> bestPartition;
  long long bestScore = -1;
  std::vector<bool> used(padded, false);
  const auto score = [&](const std::vector<long long>& set) {
    std::vector<std::size_t> real;
    for (long long item : set) {
      if (item >= 0) real.push_back(static_cast<std::size_t>(item));
    }
    return setScore(topology, real);
  };
  std::function<void()> partitions = [&] {
    std::size_t first = 0;
    while (first < padded && used[first]) ++first;
    if (first == padded) {
      // Only partitions with a set of real GPUs can answer the request.
      if (std::none_of(current.begin(), current.end(), [](const std::vector<long long>& set) {
            return std::count(set.begin(), set.end(), -1) == 0;
          })) {
        return;
      }
      long long total = 0;
      for (const auto& set : current) total += score(set);
      if (total > bestScore) {
        bestScore = total;
        bestPartition = current;
      }
      return;
    }
    used[first] = true;
    std::vector<long long> set{items[first]};
    std::function<void(std::size_t)> pick = [&](std::size_t from) {
      if (set.size() == size) {
        current.push_back(set);
        partitions();
        current.pop_back();
        return;
      }
      for (std::size_t i = from; i < padded; ++i) {
        if (used[i]) continue;
        used[i] = true;
        set.push_back(items[i]);
        pick(i + 1);
        set.pop_back();
        used[i] = false;
      }
    };
    pick(first + 1);
    used[first] = false;
  };
  partitions();
  std::vector<std::size_t> best;
  long long bestSet = -1;
  for (const auto& set : bestPartition) {
    if (std::count(set.begin(), set.end(), -1) > 0) continue;
    if (score(set) > bestSet) {
      bestSet = score(set);
      best.assign(set.begin(), set.end());
    }
  }
  std::sort(best.begin(), best.end());
  return best;
}

// --- the island host ------------------------------------------------------------------------

TEST(PlacementTest, FourOnAnEmptyIslandHostAreOneWholeIsland) {
  EXPECT_EQ(choose(islandHost(), allBut(8, {}), 4), (Ids{"0", "1", "2", "3"}));
}

TEST(PlacementTest, WithTwoOfIslandAHeldTwoMoreAreTheRestOfA) {
  // Index order would give 2 and 3 too; so hold 2 and 3 and ask again from the other side.
  EXPECT_EQ(choose(islandHost(), allBut(8, {0, 1}), 2), (Ids{"2", "3"}));
  EXPECT_EQ(choose(islandHost(), allBut(8, {4, 5}), 2), (Ids{"6", "7"}));
  // Not a pair split across islands, even though 0 and 1 are the lowest free indices.
  EXPECT_EQ(choose(islandHost(), allBut(8, {2, 3}), 2), (Ids{"0", "1"}));
}

TEST(PlacementTest, OneGpuAtATimeLeavesTheOtherIslandWhole) {
  const Topology topology = islandHost();
  std::vector<std::size_t> held;
  for (int round = 0; round < 4; ++round) {
    const Ids chosen = choose(topology, allBut(8, held), 1);
    ASSERT_EQ(chosen.size(), 1u);
    held.push_back(std::stoul(chosen.front()));
  }
  std::sort(held.begin(), held.end());
  EXPECT_EQ(held, (std::vector<std::size_t>{0, 1, 2, 3}));
  EXPECT_EQ(choose(topology, allBut(8, held), 4), (Ids{"4", "5", "6", "7"}));
  // With island B's GPU 4 taken, the next single GPU still comes from the broken island.
  EXPECT_EQ(choose(topology, allBut(8, {4}), 1), (Ids{"5"}));
}

// --- the PCIe host --------------------------------------------------------------------------

TEST(PlacementTest, PcieSetsShareASwitchBeforeASocket) {
  const Topology topology = pcieHost();
  EXPECT_EQ(choose(topology, allBut(8, {}), 2), (Ids{"0", "1"}));
  // 1 and 3 share a socket but not a switch; 4 and 5 share a switch.
  EXPECT_EQ(choose(topology, allBut(8, {0, 2}), 2), (Ids{"4", "5"}));
  EXPECT_EQ(choose(topology, allBut(8, {}), 4), (Ids{"0", "1", "2", "3"}));
  // Four from what is left after 0 and 4: not split across sockets when one socket still can.
  EXPECT_EQ(choose(topology, allBut(8, {0, 4, 5}), 3), (Ids{"1", "2", "3"}));
}

// --- the NVSwitch host ----------------------------------------------------------------------

TEST(PlacementTest, NvswitchHostsChooseOneNumaNodeThenIndex) {
  // With PCIe unknown every pair is equal: the NUMA node decides.
  EXPECT_EQ(choose(nvswitchHost(), allBut(8, {1, 2}), 3), (Ids{"4", "5", "6"}));
  EXPECT_EQ(choose(nvswitchHost(), allBut(8, {1, 2}), 2), (Ids{"0", "3"}));
  EXPECT_EQ(choose(nvswitchHost(), allBut(8, {}), 4), (Ids{"0", "1", "2", "3"}));
  // As on an HGX, where PCIe says NODE within a node and SYS across: the same answers.
  const Topology hgx = nvswitchHost(PcieLevel::kNode, PcieLevel::kSystem);
  EXPECT_EQ(choose(hgx, allBut(8, {1, 2}), 3), (Ids{"4", "5", "6"}));
  EXPECT_EQ(choose(hgx, allBut(8, {0}), 1), (Ids{"1"}));
}

// --- a degraded NVLink fabric ---------------------------------------------------------------

TEST(PlacementTest, AGpuWhoseFabricIsDegradedComesAfterEveryOther) {
  Topology topology = nvswitchHost();
  topology.gpus()[0].degradedBandwidth = true;
  // GPU 0 would be first (NUMA node 0, then index): 1, 2, 3 instead.
  EXPECT_EQ(choose(topology, allBut(8, {}), 3), (Ids{"1", "2", "3"}));
  EXPECT_EQ(choose(topology, allBut(8, {}), 1), (Ids{"1"}));
  // Every other free GPU first; the degraded one only for the last place.
  EXPECT_EQ(choose(topology, Ids{"0", "5", "6"}, 2), (Ids{"5", "6"}));
  EXPECT_EQ(choose(topology, Ids{"0", "5", "6"}, 3), (Ids{"0", "5", "6"}));
  // Two degraded, one needed among them: the rule chooses it (index, here).
  topology.gpus()[4].degradedBandwidth = true;
  EXPECT_EQ(choose(topology, Ids{"0", "4", "7"}, 2), (Ids{"0", "7"}));
}

TEST(PlacementTest, ADegradedFabricIsKnownWhereNothingElseIs) {
  Topology unknown = host(
      3, [](std::size_t, std::size_t) { return PairLink{}; },
      [](std::size_t) { return std::nullopt; });
  EXPECT_FALSE(unknown.anythingKnown());
  unknown.gpus()[0].degradedBandwidth = true;
  EXPECT_TRUE(unknown.anythingKnown());
  // Nothing else to go on: the first ones in the host's order, after the degraded one.
  EXPECT_EQ(choose(unknown, allBut(3, {}), 2), (Ids{"1", "2"}));
  EXPECT_EQ(choose(unknown, allBut(3, {}), 3), (Ids{"0", "1", "2"}));
}

// --- unknown topology, units that are not GPUs of the topology --------------------------------

TEST(PlacementTest, NothingKnownMeansNoChoice) {
  const Topology unknown = host(
      4, [](std::size_t, std::size_t) { return PairLink{}; },
      [](std::size_t) { return std::nullopt; });
  EXPECT_TRUE(choose(unknown, allBut(4, {}), 2).empty());
  // "Not supported" NVLink answers alone (0 links) tell nothing either.
  const Topology noLinks = host(
      4, [](std::size_t, std::size_t) { return link(0, std::nullopt); },
      [](std::size_t) { return std::nullopt; });
  EXPECT_TRUE(choose(noLinks, allBut(4, {}), 2).empty());
}

TEST(PlacementTest, AUnitOutsideTheTopologyMeansNoChoice) {
  EXPECT_TRUE(
      choose(islandHost(), Ids{"0", "1", "MIG-1c7d2b3e-4f5a-6b7c-8d9e-0f1a2b3c4d5e"}, 2).empty());
  EXPECT_TRUE(choose(islandHost(), Ids{"0", "9"}, 1).empty());
}

TEST(PlacementTest, AmountsOutOfRangeMeanNoChoice) {
  EXPECT_TRUE(choose(islandHost(), allBut(8, {}), 0).empty());
  EXPECT_TRUE(choose(islandHost(), allBut(8, {0}), 8).empty());
  EXPECT_EQ(choose(islandHost(), allBut(8, {0}), 7).size(), 7u);
}

TEST(PlacementTest, TheSameQuestionGetsTheSameAnswer) {
  const Topology topology = islandHost();
  for (std::size_t amount = 1; amount <= 8; ++amount) {
    const Ids first = choose(topology, allBut(8, {3}), amount);
    for (int again = 0; again < 3; ++again) {
      EXPECT_EQ(choose(topology, allBut(8, {3}), amount), first) << amount;
    }
  }
}

// --- against go-gpuallocator ------------------------------------------------------------------

TEST(PlacementTest, NeverScoresBelowGoGpuAllocatorsBestEffortPolicy) {
  const std::vector<Topology> hosts = {islandHost(), pcieHost(),
                                       nvswitchHost(PcieLevel::kNode, PcieLevel::kSystem)};
  for (const Topology& topology : hosts) {
    // Every set of up to three held GPUs, every amount that fits.
    for (unsigned mask = 0; mask < 256; ++mask) {
      std::vector<std::size_t> held;
      for (std::size_t i = 0; i < 8; ++i) {
        if (mask & (1u << i)) held.push_back(i);
      }
      if (held.size() > 3) continue;
      const Ids free = allBut(8, held);
      for (std::size_t amount = 2; amount <= std::min<std::size_t>(4, free.size()); ++amount) {
        const std::vector<std::size_t> ours = positions(choose(topology, free, amount));
        const std::vector<std::size_t> theirs = goGpuAllocator(topology, positions(free), amount);
        ASSERT_EQ(ours.size(), amount);
        ASSERT_EQ(theirs.size(), amount);
        EXPECT_GE(setScore(topology, ours), setScore(topology, theirs))
            << "held mask " << mask << ", amount " << amount;
      }
    }
  }
}

// --- the heuristic --------------------------------------------------------------------------

Candidates candidatesOf(const Topology& topology) {
  Candidates candidates;
  const std::size_t n = topology.size();
  candidates.scores.assign(n * n, 0);
  candidates.numa.assign(n, -1);
  for (std::size_t i = 0; i < n; ++i) {
    if (topology.gpus()[i].numaNode) candidates.numa[i] = *topology.gpus()[i].numaNode;
    for (std::size_t j = 0; j < n; ++j) {
      if (i != j) candidates.scores[i * n + j] = flink::placement::pairScore(topology.link(i, j));
    }
  }
  return candidates;
}

TEST(PlacementTest, TheHeuristicFindsWhatTheExhaustiveSearchFindsOnStructuredHosts) {
  for (const Topology& topology : {islandHost(), pcieHost(), nvswitchHost(), islandHost(4, 4)}) {
    const Candidates candidates = candidatesOf(topology);
    for (std::size_t amount = 1; amount < topology.size(); ++amount) {
      const auto exhaustive = flink::placement::plan(candidates, amount, Search::kExhaustive);
      const auto heuristic = flink::placement::plan(candidates, amount, Search::kHeuristic);
      EXPECT_EQ(heuristic.chosen, exhaustive.chosen) << topology.size() << " GPUs, " << amount;
      EXPECT_EQ(heuristic.search, Search::kHeuristic);
    }
  }
}

TEST(PlacementTest, LargeRequestsUseTheHeuristicAndStillTakeWholeIslands) {
  // 64 GPUs in 8 islands of 8: 8 of 64 is far past the exhaustive limit.
  const Topology topology = islandHost(8, 8);
  const Candidates candidates = candidatesOf(topology);
  const auto plan = flink::placement::plan(candidates, 8);
  EXPECT_EQ(plan.search, Search::kHeuristic);
  EXPECT_EQ(plan.chosen, (std::vector<std::size_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  // Islands 0 and 1 broken by one held GPU each: 16 is two whole islands, the first two whole.
  Ids free = allBut(64, {0, 9});
  const Ids sixteen = choose(topology, free, 16);
  Ids expected;
  for (int i = 16; i < 32; ++i) expected.push_back(std::to_string(i));
  EXPECT_EQ(sixteen, expected);
  // Small requests are still searched exhaustively.
  EXPECT_EQ(flink::placement::plan(candidates, 2).search, Search::kExhaustive);
}

// --- names and CPU lists --------------------------------------------------------------------

TEST(TopologyTest, RelationsAreNamedAsNvidiaSmiNamesThem) {
  using flink::placement::relationName;
  EXPECT_EQ(relationName(link(4, PcieLevel::kSystem)), "NV4");
  EXPECT_EQ(relationName(link(0, PcieLevel::kSingleSwitch)), "PIX");
  EXPECT_EQ(relationName(link(0, PcieLevel::kMultipleSwitches)), "PXB");
  EXPECT_EQ(relationName(link(0, PcieLevel::kHostBridge)), "PHB");
  EXPECT_EQ(relationName(link(0, PcieLevel::kNode)), "NODE");
  EXPECT_EQ(relationName(link(0, PcieLevel::kSystem)), "SYS");
  EXPECT_EQ(relationName(PairLink{}), "N/A");
  EXPECT_EQ(flink::placement::pairScore(link(2, PcieLevel::kSingleSwitch)), 250);
  EXPECT_EQ(flink::placement::pairScore(PairLink{}), 0);
}

TEST(TopologyTest, CpuListsRoundTrip) {
  using flink::placement::formatCpuList;
  using flink::placement::parseCpuList;
  EXPECT_EQ(formatCpuList({0, 1, 2, 3, 8, 64, 65}), "0-3,8,64-65");
  EXPECT_EQ(formatCpuList({}), "");
  EXPECT_EQ(parseCpuList("0-31,64-95")->size(), 64u);
  EXPECT_EQ(parseCpuList(" 3,1-2,2 "), (std::vector<unsigned>{1, 2, 3}));
  EXPECT_EQ(parseCpuList(""), std::vector<unsigned>{});
  EXPECT_FALSE(parseCpuList("3-1"));
  EXPECT_FALSE(parseCpuList("a"));
  EXPECT_FALSE(parseCpuList("1,,2"));
}

}  // namespace
