// The liveness rule: one case per row of its table, the table total, the same as the table of
// docs/coordination-file.md, and the rule judged on a simulated host (pid namespaces, time
// namespaces, readers without /proc of their own).
#include "host/liveness/Liveness.h"

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "SimulatedHost.h"

namespace flink::liveness {
namespace {

using testing::SimulatedHost;

// ---- one case per row ----------------------------------------------------------------------

struct RowCase {
  std::size_t row;  // 1-based, as docs/coordination-file.md numbers them
  Facts facts;
  Liveness verdict;
};

const std::vector<RowCase>& rowCases() {
  using B = Boot;
  using N = Namespace;
  using S = Start;
  using P = Pid;
  using L = Lease;
  static const std::vector<RowCase> cases{
      {1, {B::kOther, N::kSame, S::kRecorded, P::kRuns, L::kHeld}, Liveness::kEarlierBoot},
      {2, {B::kSame, N::kSame, S::kRecorded, P::kRuns, L::kFree}, Liveness::kRunning},
      {3, {B::kSame, N::kSame, S::kNone, P::kRuns, L::kNone}, Liveness::kRunning},
      {4, {B::kUnknown, N::kSame, S::kNone, P::kRuns, L::kHeld}, Liveness::kLeaseHeld},
      {5, {B::kSame, N::kSame, S::kNone, P::kRuns, L::kFree}, Liveness::kGone},
      {6, {B::kSame, N::kSame, S::kNone, P::kRuns, L::kMissing}, Liveness::kLeaseMissing},
      {7, {B::kSame, N::kSame, S::kNone, P::kRuns, L::kUnopenable}, Liveness::kLeaseUnopenable},
      {8, {B::kSame, N::kSame, S::kRecorded, P::kGone, L::kNone}, Liveness::kGone},
      {9, {B::kSame, N::kOther, S::kRecorded, P::kGone, L::kHeld}, Liveness::kLeaseHeld},
      {10, {B::kUnknown, N::kUnknown, S::kNone, P::kGone, L::kFree}, Liveness::kGone},
      {11, {B::kSame, N::kSame, S::kRecorded, P::kGone, L::kMissing}, Liveness::kLeaseMissing},
      {12, {B::kSame, N::kOther, S::kNone, P::kRuns, L::kUnopenable}, Liveness::kLeaseUnopenable},
      {13, {B::kSame, N::kUnknown, S::kRecorded, P::kRuns, L::kNone}, Liveness::kUnjudgeable},
  };
  return cases;
}

class LivenessRowTest : public ::testing::TestWithParam<RowCase> {};

TEST_P(LivenessRowTest, TheRowDecides) {
  const RowCase& c = GetParam();
  EXPECT_EQ(ruleFor(c.facts) + 1, c.row);
  EXPECT_EQ(decide(c.facts), c.verdict);
}

INSTANTIATE_TEST_SUITE_P(EveryRow, LivenessRowTest, ::testing::ValuesIn(rowCases()),
                         [](const ::testing::TestParamInfo<RowCase>& param) {
                           return "Row" + std::to_string(param.param.row);
                         });

TEST(LivenessTableTest, EveryRowHasACaseAndEveryCombinationARow) {
  ASSERT_EQ(rowCases().size(), rules().size());
  // Every combination of facts is matched, and every row is the first match of one: the table
  // is total and has no dead row.
  std::set<std::size_t> reached;
  std::size_t combinations = 0;
  for (const Boot boot : {Boot::kSame, Boot::kOther, Boot::kUnknown}) {
    for (const Namespace ns : {Namespace::kSame, Namespace::kOther, Namespace::kUnknown}) {
      for (const Start start : {Start::kRecorded, Start::kNone}) {
        for (const Pid pid : {Pid::kRuns, Pid::kGone}) {
          for (const Lease lease :
               {Lease::kNone, Lease::kHeld, Lease::kFree, Lease::kMissing, Lease::kUnopenable}) {
            const Facts facts{boot, ns, start, pid, lease};
            const std::size_t row = ruleFor(facts);
            const Rule& rule = rules()[row];
            ASSERT_TRUE((rule.boot & static_cast<unsigned>(boot)) &&
                        (rule.ns & static_cast<unsigned>(ns)) &&
                        (rule.start & static_cast<unsigned>(start)) &&
                        (rule.pid & static_cast<unsigned>(pid)) &&
                        (rule.lease & static_cast<unsigned>(lease)))
                << "no row matches combination " << combinations;
            reached.insert(row);
            ++combinations;
          }
        }
      }
    }
  }
  EXPECT_EQ(combinations, 180u);
  EXPECT_EQ(reached.size(), rules().size());
}

TEST(LivenessTableTest, AnOwnerThatCannotBeShownGoneHoldsItsGpu) {
  for (const Rule& rule : rules()) {
    const bool gone = rule.verdict == Liveness::kGone || rule.verdict == Liveness::kEarlierBoot;
    EXPECT_EQ(holdsGpu(rule.verdict), !gone);
    EXPECT_EQ(holdsGpu(rule.verdict), knownToRun(rule.verdict) || cannotJudge(rule.verdict));
    EXPECT_FALSE(knownToRun(rule.verdict) && cannotJudge(rule.verdict));
  }
}

// ---- the table in docs/coordination-file.md ---------------------------------------------

/// The bits a cell names: "any", or values separated by ", ".
unsigned cellBits(const std::string& cell, const std::map<std::string, unsigned>& values) {
  if (cell == "any") return kAny;
  unsigned bits = 0;
  std::stringstream in(cell);
  for (std::string word; std::getline(in, word, ',');) {
    const std::size_t first = word.find_first_not_of(' ');
    word = first == std::string::npos ? "" : word.substr(first);
    const auto it = values.find(word);
    if (it == values.end()) {
      ADD_FAILURE() << "unknown value '" << word << "' in the table of the documentation";
      continue;
    }
    bits |= it->second;
  }
  return bits;
}

std::vector<std::string> cellsOf(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream in(line);
  std::string cell;
  std::getline(in, cell, '|');  // before the first bar
  while (std::getline(in, cell, '|')) {
    const std::size_t first = cell.find_first_not_of(' ');
    const std::size_t last = cell.find_last_not_of(' ');
    cells.push_back(first == std::string::npos ? "" : cell.substr(first, last - first + 1));
  }
  if (!cells.empty() && cells.back().empty()) cells.pop_back();
  return cells;
}

TEST(LivenessTableTest, TheDocumentationShowsTheTableRowForRow) {
  std::ifstream doc(std::string(FLINK_GPU_SOURCE_DIR) + "/docs/coordination-file.md");
  ASSERT_TRUE(doc) << "docs/coordination-file.md";
  std::vector<std::vector<std::string>> rows;
  bool inTable = false;
  for (std::string line; std::getline(doc, line);) {
    if (line == "<!-- liveness-table -->") inTable = true;
    if (line == "<!-- /liveness-table -->") break;
    if (inTable && line.starts_with("| ") && !line.starts_with("| row") &&
        !line.starts_with("|---")) {
      rows.push_back(cellsOf(line));
    }
  }
  ASSERT_EQ(rows.size(), rules().size()) << "rows in the documentation's table";
  const auto b = [](auto value) { return static_cast<unsigned>(value); };
  const std::map<std::string, unsigned> boots{
      {"same", b(Boot::kSame)}, {"other", b(Boot::kOther)}, {"unknown", b(Boot::kUnknown)}};
  const std::map<std::string, unsigned> namespaces{{"same", b(Namespace::kSame)},
                                                   {"other", b(Namespace::kOther)},
                                                   {"unknown", b(Namespace::kUnknown)}};
  const std::map<std::string, unsigned> starts{{"recorded", b(Start::kRecorded)},
                                               {"none", b(Start::kNone)}};
  const std::map<std::string, unsigned> pids{{"runs", b(Pid::kRuns)}, {"gone", b(Pid::kGone)}};
  const std::map<std::string, unsigned> leases{{"none", b(Lease::kNone)},
                                               {"held", b(Lease::kHeld)},
                                               {"free", b(Lease::kFree)},
                                               {"missing", b(Lease::kMissing)},
                                               {"unopenable", b(Lease::kUnopenable)}};
  // A cell that names every value of its fact is "any" in the code too.
  const auto same = [](unsigned documented, unsigned code, unsigned every) {
    return (documented & every) == (code & every);
  };
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::vector<std::string>& cells = rows[i];
    ASSERT_EQ(cells.size(), 7u) << "row " << i + 1;
    const Rule& rule = rules()[i];
    EXPECT_EQ(cells[0], std::to_string(i + 1));
    EXPECT_TRUE(same(cellBits(cells[1], boots), rule.boot, 7)) << "row " << i + 1 << ": boot";
    EXPECT_TRUE(same(cellBits(cells[2], namespaces), rule.ns, 7)) << "row " << i + 1 << ": ns";
    EXPECT_TRUE(same(cellBits(cells[3], starts), rule.start, 3)) << "row " << i + 1 << ": start";
    EXPECT_TRUE(same(cellBits(cells[4], pids), rule.pid, 3)) << "row " << i + 1 << ": pid";
    EXPECT_TRUE(same(cellBits(cells[5], leases), rule.lease, 31)) << "row " << i + 1 << ": lease";
    EXPECT_EQ(cells[6], livenessName(rule.verdict)) << "row " << i + 1 << ": verdict";
  }
}

// ---- judge() on a simulated host ----------------------------------------------------------

/// judge() for `owner` (leased or not) as `reader` of `host` sees it, its lease in `lease`.
Liveness judgeOn(SimulatedHost& host, SimulatedHost::ProcessId reader, const Owner& owner,
                 std::optional<LeaseState> lease = std::nullopt, std::size_t* row = nullptr) {
  const std::unique_ptr<HostFacts> facts = host.factsOf(reader);
  return judge(
      Holder{owner, lease.has_value()}, facts->reader(),
      [&](const Owner& o) { return ownerRuns(o, *facts); },
      [&] { return lease.value_or(LeaseState::kMissing); }, row);
}

TEST(LivenessHostTest, AnOwnerIsJudgedByItsPidAndStartTime) {
  SimulatedHost host;
  const auto reader = host.spawn();
  const auto owner = host.spawn();
  const Owner recorded = Owner::of(host.pidOf(owner), *host.factsOf(owner));
  ASSERT_TRUE(recorded.startTime);
  EXPECT_EQ(judgeOn(host, reader, recorded), Liveness::kRunning);

  // Gone, then its pid reused by a process started later: another process.
  host.exit(owner);
  EXPECT_EQ(judgeOn(host, reader, recorded), Liveness::kGone);
  host.advance(5 * SimulatedHost::kTickNs);
  host.reusePid(SimulatedHost::kHostNamespace, recorded.pid);
  const auto reuser = host.spawn();
  ASSERT_EQ(host.pidOf(reuser), recorded.pid);
  EXPECT_EQ(judgeOn(host, reader, recorded), Liveness::kGone);
  // The lease of what it started still holds it.
  EXPECT_EQ(judgeOn(host, reader, recorded, LeaseState::kHeld), Liveness::kLeaseHeld);
}

TEST(LivenessHostTest, AZombieIsGone) {
  SimulatedHost host;
  const auto reader = host.spawn();
  const auto owner = host.spawn();
  const Owner recorded = Owner::of(host.pidOf(owner), *host.factsOf(owner));
  host.becomeZombie(owner);
  EXPECT_EQ(judgeOn(host, reader, recorded), Liveness::kGone);
}

// D2: a time namespace whose boot-time offset is not a whole number of ticks shows one process's
// start a tick apart to a reader of the host and to one of the namespace, both ways.
TEST(LivenessHostTest, StartTimesReadInTimeNamespacesWithFractionalOffsetsAgree) {
  for (const std::int64_t offset : {std::int64_t{7'000'000}, std::int64_t{3'999'999'999},
                                    std::int64_t{12'345'678'901}, std::int64_t{1}}) {
    for (std::int64_t phase = 0; phase < SimulatedHost::kTickNs; phase += 1'000'000) {
      SimulatedHost host;
      host.advance(phase);
      SimulatedHost::Spawn restored;
      restored.boottimeOffsetNs = offset;  // a container CRIU restored
      const auto inNamespace = host.spawn(restored);
      const auto onHost = host.spawn();
      const auto hostReader = host.spawn();
      const auto namespaceReader = host.spawn(restored);
      const Owner fromNamespace = Owner::of(host.pidOf(inNamespace), *host.factsOf(inNamespace));
      const Owner fromHost = Owner::of(host.pidOf(onHost), *host.factsOf(onHost));
      EXPECT_EQ(judgeOn(host, hostReader, fromNamespace), Liveness::kRunning)
          << "offset " << offset << " ns, phase " << phase;
      EXPECT_EQ(judgeOn(host, namespaceReader, fromHost), Liveness::kRunning)
          << "offset " << offset << " ns, phase " << phase;
      // And the requester knows its own record, written by the other side.
      const Owner self = Owner::of(host.pidOf(onHost), *host.factsOf(namespaceReader));
      EXPECT_TRUE(sameProcess(self, fromHost));
    }
  }
}

// D3: a reader without /proc of its own pid namespace cannot tell which process a pid names: it
// judges nothing by pid, whatever the record's namespace says.
TEST(LivenessHostTest, AReaderWithoutItsOwnProcJudgesNoPid) {
  for (const SimulatedHost::Proc proc :
       {SimulatedHost::Proc::kNone, SimulatedHost::Proc::kForeign}) {
    SimulatedHost host;
    const auto hostOwner = host.spawn();
    const Owner recorded = Owner::of(host.pidOf(hostOwner), *host.factsOf(hostOwner));
    SimulatedHost::Spawn sandbox;
    sandbox.pidNamespace = host.newPidNamespace();
    sandbox.proc = proc;
    const auto reader = host.spawn(sandbox);
    const std::unique_ptr<HostFacts> facts = host.factsOf(reader);
    bool asked = false;
    const auto runs = [&](const Owner&) {
      asked = true;
      return false;  // no process of that pid in the sandbox: what kill() would say
    };
    EXPECT_EQ(judge(Holder{recorded, false}, facts->reader(), runs, {}), Liveness::kUnjudgeable);
    EXPECT_FALSE(asked);
    // A record written without any namespace (Flink's) too.
    EXPECT_EQ(judge(Holder{Owner{recorded.pid}, false}, facts->reader(), runs, {}),
              Liveness::kUnjudgeable);
    // Its lease still decides.
    EXPECT_EQ(
        judge(Holder{recorded, true}, facts->reader(), runs, [] { return LeaseState::kHeld; }),
        Liveness::kLeaseHeld);
    EXPECT_EQ(
        judge(Holder{recorded, true}, facts->reader(), runs, [] { return LeaseState::kFree; }),
        Liveness::kGone);
    EXPECT_FALSE(asked);
    // Its own records: written with pidns=0 where it cannot tell its namespace, which no reader
    // judges by pid.
    const Owner own = Owner::of(host.pidOf(reader), *facts);
    if (proc == SimulatedHost::Proc::kNone) {
      EXPECT_EQ(own.pidNamespace, kUnknownPidNamespace);
      EXPECT_FALSE(own.startTime);
      EXPECT_EQ(judgeOn(host, hostOwner, own), Liveness::kUnjudgeable);
    } else {
      EXPECT_EQ(own.pidNamespace, sandbox.pidNamespace);
      EXPECT_TRUE(own.startTime);  // /proc/self is still itself
      EXPECT_EQ(judgeOn(host, hostOwner, own), Liveness::kUnjudgeable);
    }
  }
}

TEST(LivenessHostTest, ARecordOfAnotherPidNamespaceIsJudgedByItsLeaseAlone) {
  SimulatedHost host;
  SimulatedHost::Spawn container;
  container.pidNamespace = host.newPidNamespace();
  const auto owner = host.spawn(container);
  const auto reader = host.spawn();
  const Owner recorded = Owner::of(host.pidOf(owner), *host.factsOf(owner));
  std::size_t row = 0;
  EXPECT_EQ(judgeOn(host, reader, recorded, std::nullopt, &row), Liveness::kUnjudgeable);
  EXPECT_EQ(row + 1, 13u);
  EXPECT_EQ(judgeOn(host, reader, recorded, LeaseState::kHeld, &row), Liveness::kLeaseHeld);
  EXPECT_EQ(row + 1, 9u);
  EXPECT_EQ(judgeOn(host, reader, recorded, LeaseState::kFree), Liveness::kGone);
  // Its own namespace judges it by pid.
  const auto sibling = host.spawn(container);
  EXPECT_EQ(judgeOn(host, sibling, recorded, LeaseState::kFree), Liveness::kRunning);
}

TEST(LivenessHostTest, TheFactsAreReadOnlyWhereARowNeedsThem) {
  SimulatedHost host;
  const auto reader = host.spawn();
  const auto owner = host.spawn();
  const std::unique_ptr<HostFacts> facts = host.factsOf(reader);
  const Owner recorded = Owner::of(host.pidOf(owner), *host.factsOf(owner));
  int pids = 0;
  int leases = 0;
  const auto runs = [&](const Owner& o) {
    ++pids;
    return ownerRuns(o, *facts);
  };
  const auto lease = [&] {
    ++leases;
    return LeaseState::kFree;
  };
  EXPECT_EQ(judge(Holder{recorded, true}, facts->reader(), runs, lease), Liveness::kRunning);
  EXPECT_EQ(pids, 1);
  EXPECT_EQ(leases, 0);  // the running owner decides
  Owner earlier = recorded;
  earlier.bootId = "00000000-0000-0000-0000-000000000000";
  EXPECT_EQ(judge(Holder{earlier, true}, facts->reader(), runs, lease), Liveness::kEarlierBoot);
  EXPECT_EQ(pids, 1);
  EXPECT_EQ(leases, 0);
}

}  // namespace
}  // namespace flink::liveness
