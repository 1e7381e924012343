// The placement rule: exhaustive search over combinations where that is cheap, greedy growth with
// exchange improvement beyond. See Placement.h for the order of sets.
#include "host/placement/Placement.h"

#include <algorithm>
#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace flink::placement {

std::optional<Policy> parsePolicy(std::string_view text) {
  if (text == "topology") return Policy::kTopology;
  if (text == "index") return Policy::kIndex;
  return std::nullopt;
}

std::string_view policyName(Policy policy) {
  return policy == Policy::kTopology ? "topology" : "index";
}

namespace {

/// The order of Placement.h, rules 1 to 4 (rule 5 is left to the callers, which see the sets).
struct Key {
  long long score = 0;    // higher is better
  int numaNodes = 0;      // lower is better
  long long cut = 0;      // lower is better
  long long numaCut = 0;  // lower is better
};

/// -1 when a is better, 1 when b is, 0 when they are equal.
int compare(const Key& a, const Key& b) {
  if (a.score != b.score) return a.score > b.score ? -1 : 1;
  if (a.numaNodes != b.numaNodes) return a.numaNodes < b.numaNodes ? -1 : 1;
  if (a.cut != b.cut) return a.cut < b.cut ? -1 : 1;
  if (a.numaCut != b.numaCut) return a.numaCut < b.numaCut ? -1 : 1;
  return 0;
}

/// What every search needs about the candidates, computed once.
class Scores {
 public:
  explicit Scores(const Candidates& candidates)
      : n_(candidates.size()), scores_(candidates.scores), degree_(n_, 0), numaDegree_(n_, 0) {
    // NUMA nodes renumbered 0..m-1, so that counts are a plain array.
    std::map<int, int> nodes;
    for (int node : candidates.numa) {
      if (node >= 0) nodes.emplace(node, 0);
    }
    int next = 0;
    for (auto& [node, dense] : nodes) dense = next++;
    numa_.resize(n_, -1);
    for (std::size_t i = 0; i < n_; ++i) {
      if (candidates.numa[i] >= 0) numa_[i] = nodes[candidates.numa[i]];
    }
    nodeCount_ = next;
    for (std::size_t i = 0; i < n_; ++i) {
      for (std::size_t j = 0; j < n_; ++j) {
        if (i == j) continue;
        degree_[i] += w(i, j);
        if (sameNuma(i, j)) ++numaDegree_[i];
      }
    }
  }

  std::size_t size() const noexcept { return n_; }
  int w(std::size_t a, std::size_t b) const { return scores_[a * n_ + b]; }
  bool sameNuma(std::size_t a, std::size_t b) const {
    return numa_[a] >= 0 && numa_[a] == numa_[b];
  }
  int numa(std::size_t a) const { return numa_[a]; }
  int nodeCount() const noexcept { return nodeCount_; }
  long long degree(std::size_t a) const { return degree_[a]; }
  long long numaDegree(std::size_t a) const { return numaDegree_[a]; }

  /// The key of a set from its running sums.
  Key key(long long score, int numaNodes, long long degreeSum, long long sameInside,
          long long numaDegreeSum) const {
    return Key{score, numaNodes, degreeSum - 2 * score, numaDegreeSum - 2 * sameInside};
  }

 private:
  std::size_t n_;
  const std::vector<int>& scores_;
  std::vector<int> numa_;
  int nodeCount_ = 0;
  std::vector<long long> degree_;
  std::vector<long long> numaDegree_;
};

double combinations(std::size_t n, std::size_t k) {
  k = std::min(k, n - k);
  double count = 1;
  for (std::size_t i = 1; i <= k; ++i) count = count * static_cast<double>(n - k + i) / i;
  return count;
}

/// Every combination in lexicographic order; a later one replaces the best only when strictly
/// better, so ties go to the lowest list.
class Exhaustive {
 public:
  Exhaustive(const Scores& search, std::size_t amount)
      : s_(search), amount_(amount), counts_(static_cast<std::size_t>(search.nodeCount()), 0) {
    current_.reserve(amount);
  }

  std::vector<std::size_t> run() {
    visit(0, 0, 0, 0, 0, 0);
    return best_;
  }

 private:
  void visit(std::size_t from, long long score, int nodes, long long degreeSum,
             long long sameInside, long long numaDegreeSum) {
    if (current_.size() == amount_) {
      const Key key = s_.key(score, nodes, degreeSum, sameInside, numaDegreeSum);
      if (best_.empty() || compare(key, bestKey_) < 0) {
        best_ = current_;
        bestKey_ = key;
      }
      return;
    }
    const std::size_t missing = amount_ - current_.size();
    for (std::size_t i = from; i + missing <= s_.size(); ++i) {
      long long added = 0;
      long long same = 0;
      for (std::size_t member : current_) {
        added += s_.w(member, i);
        if (s_.sameNuma(member, i)) ++same;
      }
      const int node = s_.numa(i);
      int newNodes = nodes;
      if (node >= 0 && counts_[static_cast<std::size_t>(node)]++ == 0) ++newNodes;
      current_.push_back(i);
      visit(i + 1, score + added, newNodes, degreeSum + s_.degree(i), sameInside + same,
            numaDegreeSum + s_.numaDegree(i));
      current_.pop_back();
      if (node >= 0) --counts_[static_cast<std::size_t>(node)];
    }
  }

  const Scores& s_;
  std::size_t amount_;
  std::vector<int> counts_;
  std::vector<std::size_t> current_;
  std::vector<std::size_t> best_;
  Key bestKey_;
};

/// One set under construction or improvement, with the sums its key needs and, for every GPU,
/// its ties to the set.
class WorkingSet {
 public:
  explicit WorkingSet(const Scores& search)
      : s_(search),
        in_(search.size(), false),
        conn_(search.size(), 0),
        numaConn_(search.size(), 0),
        counts_(static_cast<std::size_t>(search.nodeCount()), 0) {}

  void add(std::size_t x) {
    score_ += conn_[x];
    sameInside_ += numaConn_[x];
    degreeSum_ += s_.degree(x);
    numaDegreeSum_ += s_.numaDegree(x);
    if (s_.numa(x) >= 0 && counts_[static_cast<std::size_t>(s_.numa(x))]++ == 0) ++nodes_;
    in_[x] = true;
    for (std::size_t y = 0; y < s_.size(); ++y) {
      if (y == x) continue;
      conn_[y] += s_.w(x, y);
      if (s_.sameNuma(x, y)) ++numaConn_[y];
    }
  }

  void remove(std::size_t x) {
    in_[x] = false;
    for (std::size_t y = 0; y < s_.size(); ++y) {
      if (y == x) continue;
      conn_[y] -= s_.w(x, y);
      if (s_.sameNuma(x, y)) --numaConn_[y];
    }
    score_ -= conn_[x];
    sameInside_ -= numaConn_[x];
    degreeSum_ -= s_.degree(x);
    numaDegreeSum_ -= s_.numaDegree(x);
    if (s_.numa(x) >= 0 && --counts_[static_cast<std::size_t>(s_.numa(x))] == 0) --nodes_;
  }

  Key key() const { return s_.key(score_, nodes_, degreeSum_, sameInside_, numaDegreeSum_); }

  /// The key after exchanging member `out` for non-member `in`, without doing it.
  Key keyAfterExchange(std::size_t out, std::size_t in) const {
    const long long score = score_ - conn_[out] + conn_[in] - s_.w(out, in);
    const long long same =
        sameInside_ - numaConn_[out] + numaConn_[in] - (s_.sameNuma(out, in) ? 1 : 0);
    int nodes = nodes_;
    const int outNode = s_.numa(out);
    const int inNode = s_.numa(in);
    if (outNode != inNode) {
      if (outNode >= 0 && counts_[static_cast<std::size_t>(outNode)] == 1) --nodes;
      if (inNode >= 0 && counts_[static_cast<std::size_t>(inNode)] == 0) ++nodes;
    }
    return s_.key(score, nodes, degreeSum_ - s_.degree(out) + s_.degree(in), same,
                  numaDegreeSum_ - s_.numaDegree(out) + s_.numaDegree(in));
  }

  bool contains(std::size_t x) const { return in_[x]; }
  long long ties(std::size_t x) const { return conn_[x]; }

  std::vector<std::size_t> members() const {
    std::vector<std::size_t> members;
    for (std::size_t i = 0; i < in_.size(); ++i) {
      if (in_[i]) members.push_back(i);
    }
    return members;
  }

 private:
  const Scores& s_;
  std::vector<bool> in_;
  std::vector<long long> conn_;      // Σ w(y, m) over members m ≠ y
  std::vector<long long> numaConn_;  // members m ≠ y on y's NUMA node
  std::vector<int> counts_;          // members per NUMA node
  long long score_ = 0;
  long long sameInside_ = 0;
  long long degreeSum_ = 0;
  long long numaDegreeSum_ = 0;
  int nodes_ = 0;
};

std::vector<std::size_t> heuristic(const Scores& s, std::size_t amount) {
  const std::size_t n = s.size();
  std::vector<std::size_t> best;
  Key bestKey;
  // Two growths per seed, differing only in what breaks a tie of ties to the set: the GPU least
  // tied to the rest (it spoils the least), or the most tied (it starts the richest cluster when
  // the set must grow into a second one). The full order decides between them.
  for (std::size_t variant = 0; variant < 2 * n; ++variant) {
    const std::size_t seed = variant / 2;
    const bool spoilLeast = variant % 2 == 0;
    WorkingSet set(s);
    set.add(seed);
    for (std::size_t added = 1; added < amount; ++added) {
      std::size_t pick = n;
      for (std::size_t x = 0; x < n; ++x) {
        if (set.contains(x)) continue;
        if (pick == n) {
          pick = x;
          continue;
        }
        // Best tied to the set, then on the seed's NUMA node, then least tied to the rest.
        const long long tx = set.ties(x);
        const long long tp = set.ties(pick);
        if (tx != tp) {
          if (tx > tp) pick = x;
          continue;
        }
        const bool xNear = s.sameNuma(x, seed);
        const bool pNear = s.sameNuma(pick, seed);
        if (xNear != pNear) {
          if (xNear) pick = x;
          continue;
        }
        const long long rx = s.degree(x) - tx;
        const long long rp = s.degree(pick) - tp;
        if (spoilLeast ? rx < rp : rx > rp) pick = x;
      }
      set.add(pick);
    }
    // Exchanges while one improves the order: a strictly better key, or the same key and a
    // lower list (exchanging `out` for a lower `in`). Each step strictly improves a total order,
    // so this ends; the bound only caps the work.
    for (std::size_t round = 0; round < 4 * n; ++round) {
      Key current = set.key();
      std::size_t bestOut = n;
      std::size_t bestIn = n;
      Key bestExchange = current;
      for (std::size_t out = 0; out < n; ++out) {
        if (!set.contains(out)) continue;
        for (std::size_t in = 0; in < n; ++in) {
          if (set.contains(in)) continue;
          const Key key = set.keyAfterExchange(out, in);
          const int order = compare(key, bestExchange);
          const bool lower = bestOut == n ? in < out : false;
          if (order < 0 || (order == 0 && bestOut == n && lower)) {
            bestExchange = key;
            bestOut = out;
            bestIn = in;
          }
        }
      }
      if (bestOut == n) break;
      set.remove(bestOut);
      set.add(bestIn);
    }
    std::vector<std::size_t> members = set.members();
    const Key key = set.key();
    const int order = best.empty() ? -1 : compare(key, bestKey);
    if (order < 0 || (order == 0 && members < best)) {
      best = std::move(members);
      bestKey = key;
    }
  }
  return best;
}

}  // namespace

Plan plan(const Candidates& candidates, std::size_t amount, std::optional<Search> force) {
  Plan result;
  const std::size_t n = candidates.size();
  if (amount == 0 || amount > n) return result;
  if (amount == n) {
    for (std::size_t i = 0; i < n; ++i) result.chosen.push_back(i);
    return result;
  }
  const Scores search(candidates);
  const bool exhaustive =
      force ? *force == Search::kExhaustive : combinations(n, amount) <= kExhaustiveLimit;
  if (exhaustive) {
    result.chosen = Exhaustive(search, amount).run();
  } else {
    result.chosen = heuristic(search, amount);
    result.search = Search::kHeuristic;
  }
  return result;
}

namespace {

/// The rule among `free` alone (see choose).
std::vector<std::string> chooseAmong(const Topology& topology, const std::vector<std::string>& free,
                                     std::size_t amount) {
  if (amount == 0 || amount > free.size()) return {};
  std::vector<std::size_t> positions;
  positions.reserve(free.size());
  for (const std::string& unit : free) {
    const std::optional<std::size_t> position = topology.positionOf(unit);
    if (!position) return {};
    positions.push_back(*position);
  }
  Candidates candidates;
  const std::size_t n = free.size();
  candidates.scores.assign(n * n, 0);
  candidates.numa.assign(n, -1);
  bool known = false;
  for (std::size_t i = 0; i < n; ++i) {
    const GpuTopology& gpu = topology.gpus()[positions[i]];
    if (gpu.numaNode) {
      candidates.numa[i] = static_cast<int>(*gpu.numaNode);
      known = true;
    }
    for (std::size_t j = 0; j < n; ++j) {
      if (i == j || positions[i] == positions[j]) continue;
      const PairLink& link = topology.link(positions[i], positions[j]);
      candidates.scores[i * n + j] = pairScore(link);
      known = known || link.known();
    }
  }
  if (!known) return {};
  const Plan chosen = plan(candidates, amount);
  std::vector<std::string> result;
  result.reserve(chosen.chosen.size());
  for (std::size_t i : chosen.chosen) result.push_back(free[i]);
  return result;
}

}  // namespace

std::vector<std::string> choose(const Topology& topology, const std::vector<std::string>& free,
                                std::size_t amount) {
  if (amount == 0 || amount > free.size()) return {};
  // A GPU whose fabric reports degraded bandwidth works, but slower: taken only when the others
  // are not enough, and then as few of them as the amount needs.
  std::vector<std::string> preferred;
  std::vector<std::string> degraded;
  for (const std::string& unit : free) {
    const std::optional<std::size_t> position = topology.positionOf(unit);
    if (!position) return {};
    (topology.gpus()[*position].degradedBandwidth ? degraded : preferred).push_back(unit);
  }
  if (degraded.empty()) return chooseAmong(topology, free, amount);
  const auto firstOr = [](std::vector<std::string> chosen, const std::vector<std::string>& among,
                          std::size_t count) {
    if (chosen.empty())
      chosen.assign(among.begin(), among.begin() + static_cast<std::ptrdiff_t>(count));
    return chosen;
  };
  std::vector<std::string> chosen;
  if (preferred.size() >= amount) {
    chosen = firstOr(chooseAmong(topology, preferred, amount), preferred, amount);
  } else {
    const std::size_t rest = amount - preferred.size();
    chosen = preferred;
    for (std::string& unit : firstOr(chooseAmong(topology, degraded, rest), degraded, rest)) {
      chosen.push_back(std::move(unit));
    }
  }
  // In the host's order, as the rule answers.
  std::vector<std::string> ordered;
  ordered.reserve(chosen.size());
  for (const std::string& unit : free) {
    if (std::find(chosen.begin(), chosen.end(), unit) != chosen.end()) ordered.push_back(unit);
  }
  return ordered;
}

}  // namespace flink::placement
