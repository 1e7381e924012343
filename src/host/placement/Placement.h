// Which of the free GPUs a request gets: the best-connected set, chosen so that well-connected
// sets stay free for later requests. Pure functions of a Topology; no NVML, no I/O.
//
// The rule, a lexicographic order of candidate sets C of the requested size among the free F:
//   1. the higher sum of pairScore over the pairs of C (go-gpuallocator's scores: NVLink first,
//      then PCIe closeness);
//   2. the fewer NUMA nodes C spans (of those known);
//   3. the weaker C's ties to the rest of F (the sum of pairScore between C and F \ C): of two
//      equally good sets, take the one whose removal spoils fewer well-connected sets for later
//      requests — the reason go-gpuallocator scores a whole partition rather than one set. It is
//      what keeps a second NVLink island whole when 1 or 2 GPUs are asked for;
//   4. the fewer pairs of the same NUMA node split between C and F \ C;
//   5. the lowest sorted list of positions in the host's order.
// Since rule 1 ranks every set by go-gpuallocator's own score, the set chosen scores at least as
// high as the one its best-effort policy returns, on every host, whenever the search is
// exhaustive.
//
// Cost: exhaustive (every combination, scored incrementally) while the number of combinations
// is at most kExhaustiveLimit; beyond it a stated heuristic: from every free GPU as a seed, grow
// a set greedily twice (the GPU best tied to the set so far, then one on the seed's NUMA node,
// then either the one least or the one most tied to the others, then the lowest position),
// improve each by exchanging one member for one non-member while that improves the order above,
// and take the best result. O(n^2 k) per growth.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "host/placement/Topology.h"

namespace flink::placement {

/// How an allocator picks among the free GPUs.
enum class Policy {
  kTopology,  ///< the rule above, where the topology is known; else as kIndex
  kIndex,     ///< Flink's rule: the first free ones in the host's order
};

/// "topology" or "index"; nullopt for anything else.
std::optional<Policy> parsePolicy(std::string_view text);
std::string_view policyName(Policy policy);

/// Above this many combinations the heuristic is used instead of the exhaustive search.
inline constexpr double kExhaustiveLimit = 200000;

/// How a plan was made, for benchmarks and tests.
enum class Search { kExhaustive, kHeuristic };

/// The positions (in `scores` order) of the chosen set, ascending.
struct Plan {
  std::vector<std::size_t> chosen;
  Search search = Search::kExhaustive;
};

/// The compact form the search runs on: the free GPUs only.
struct Candidates {
  /// pairScore of each pair, n × n, row by row (the diagonal is unused).
  std::vector<int> scores;
  /// Each GPU's NUMA node, or -1 when unknown.
  std::vector<int> numa;
  std::size_t size() const noexcept { return numa.size(); }
};

/// The best set of `amount` of `candidates` by the rule above. Empty when amount is 0 or more
/// than there are candidates. `force`: use that search whatever the size (tests, benchmarks).
Plan plan(const Candidates& candidates, std::size_t amount,
          std::optional<Search> force = std::nullopt);

/// The rule applied to identifiers: `free` are the free units in the host's order, `amount` how
/// many to take. Returns the chosen identifiers in the host's order, or an empty vector — meaning
/// "no topology to go on: use the first free ones" — when a free unit is not a GPU of `topology`
/// (a MIG instance, a GPU NVML did not list), when nothing of the free GPUs' topology is known,
/// or when amount is 0 or more than `free` holds. Never throws for any topology.
/// GPUs whose fabric reports degraded bandwidth (GpuTopology::degradedBandwidth) come last: the
/// rule chooses among the others alone while they are enough, else takes them all and chooses
/// the rest among the degraded ones (the first in the host's order where nothing else is known).
std::vector<std::string> choose(const Topology& topology, const std::vector<std::string>& free,
                                std::size_t amount);

}  // namespace flink::placement
