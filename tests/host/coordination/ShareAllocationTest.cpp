// GPU shares in the coordination file: the record form Flink's script reads as "taken", the rule
// that hands out one share on each of N distinct GPUs (K owners at most, pack or spread, one MPS
// pipe directory per request), and whole GPUs and shares never meeting on one GPU, in the plan
// and through the locked file with leases.
#include "host/coordination/ShareAllocation.h"

#include <unistd.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "TestSupport.h"
#include "host/coordination/Coordination.h"
#include "host/coordination/Leases.h"

namespace flink::coordination::share_allocation_test {
namespace {

namespace fs = std::filesystem;
using testing::readFile;
using testing::TempDir;

constexpr const char* kUuid0 = "GPU-5c3e0000-1111-4222-8333-444400000000";

std::vector<std::string> gpuRange(int count) {
  std::vector<std::string> gpus;
  for (int i = 0; i < count; ++i) gpus.push_back(std::to_string(i));
  return gpus;
}

bool livePids(const Owner& owner, const std::vector<pid_t>& live) {
  return std::find(live.begin(), live.end(), owner.pid) != live.end();
}

/// A request for `amount` shares by owner `pid`, of GPUs 0..count-1, each declared with K
/// `replicas[i]` (0: not declared), time-sliced.
ShareRequest sharesOf(int count, std::vector<unsigned> replicas, std::size_t amount, pid_t pid) {
  ShareRequest request;
  request.gpus = gpuRange(count);
  for (std::size_t i = 0; i < replicas.size(); ++i) {
    if (replicas[i] > 0) request.shareable.push_back({std::to_string(i), replicas[i], ""});
  }
  request.amount = amount;
  request.owner = Owner{pid, 1};
  return request;
}

std::vector<std::string> gpusOf(const ShareAllocation& allocation) {
  std::vector<std::string> gpus;
  for (const GrantedShare& share : allocation.granted) gpus.push_back(share.gpu);
  return gpus;
}

// --- the record ---------------------------------------------------------------------------------

TEST(ShareRecordTest, AShareIsARecordWithOneMoreFieldAndOneSpaceOnly) {
  Record record{"0", Owner{41532, 8812345, 4026531836}, kUuid0};
  record.share = ShareSlot{1, 4};
  const std::string line = formatRecords({record});
  EXPECT_EQ(line,
            std::string("0 41532\t8812345\tuuid=") + kUuid0 + "\tshare=1/4\tpidns=4026531836\n");
  EXPECT_EQ(std::count(line.begin(), line.end(), ' '), 1);
  const ParsedRecords parsed = parseRecords(line);
  ASSERT_EQ(parsed.records.size(), 1u);
  EXPECT_EQ(parsed.records[0], record);
}

TEST(ShareRecordTest, AShareFieldThatDoesNotParseHoldsTheGpuWhole) {
  // An index not below its count, no count, a count of 0, not numbers: kept as an unknown
  // field, so the record holds GPU 0 whole, as every older release reads it.
  for (const char* bad : {"share=4/4", "share=1", "share=0/0", "share=a/b", "share=-1/4"}) {
    const ParsedRecords parsed = parseRecords(std::string("0 10\t5\t") + bad + "\n");
    ASSERT_EQ(parsed.records.size(), 1u) << bad;
    EXPECT_FALSE(parsed.records[0].share) << bad;
    EXPECT_EQ(parsed.records[0].extra, std::vector<std::string>{bad});
    ShareRequest request = sharesOf(1, {4}, 1, 20);
    const ShareAllocation a = planShareAllocation(parsed, request,
                                                  [](const Owner& o) {
                                                    return livePids(o, {10, 20});
                                                  },
                                                  {});
    EXPECT_FALSE(a.satisfied) << bad;
    ASSERT_EQ(a.unshared.size(), 1u);
    EXPECT_EQ(a.unshared[0].reason, UnsharedGpu::Reason::kHeldWhole) << bad;
  }
  EXPECT_EQ(parseShareSlot("3/48"), (ShareSlot{3, 48}));
  EXPECT_FALSE(parseShareSlot("01/4x"));
}

TEST(ShareRecordTest, ShareLeasesAreNamedAfterTheGpusLease) {
  const LeaseNames names = shareLeaseNamesOf(LeaseNames{kUuid0, {"index-0.mnt-9"}}, 3);
  EXPECT_EQ(names.primary, std::string(kUuid0) + ".share-3");
  EXPECT_EQ(names.aliases, (std::vector<std::string>{"index-0.mnt-9.share-3"}));
  const auto parts = parseShareLeaseName("index-10.share-12");
  ASSERT_TRUE(parts);
  EXPECT_EQ(parts->gpuLease, "index-10");
  EXPECT_EQ(parts->index, 12u);
  EXPECT_FALSE(parseShareLeaseName(kUuid0));
  EXPECT_FALSE(parseShareLeaseName("index-1.share-"));
  EXPECT_FALSE(parseShareLeaseName("index-1.share-01"));
}

// --- the rule -----------------------------------------------------------------------------------

TEST(SharePlanTest, KOwnersShareOneGpuAndTheNextIsRefused) {
  std::string file;
  const auto live = [](const Owner& o) { return livePids(o, {100, 101, 102, 103}); };
  for (pid_t owner = 100; owner < 103; ++owner) {
    const ShareAllocation a =
        planShareAllocation(parseRecords(file), sharesOf(1, {3}, 1, owner), live, {});
    ASSERT_TRUE(a.satisfied) << owner;
    EXPECT_EQ(a.granted, (std::vector<GrantedShare>{{"0", {unsigned(owner - 100), 3}}}));
    file = formatRecords(a.records);
  }
  EXPECT_EQ(file, "0 100\t1\tshare=0/3\n0 101\t1\tshare=1/3\n0 102\t1\tshare=2/3\n");
  const ShareAllocation fourth =
      planShareAllocation(parseRecords(file), sharesOf(1, {3}, 1, 103), live, {});
  EXPECT_FALSE(fourth.satisfied);
  EXPECT_EQ(fourth.freeGpus, 0u);
  ASSERT_EQ(fourth.unshared.size(), 1u);
  EXPECT_EQ(fourth.unshared[0].reason, UnsharedGpu::Reason::kNoFreeShare);
  EXPECT_EQ(fourth.unshared[0].liveShares, 3u);
  EXPECT_EQ(fourth.records, parseRecords(file).records) << "nothing recorded";
}

TEST(SharePlanTest, AGpuTheCallerFindsUnusableGivesNoShareAndIsAskedOnceWithTheRecords) {
  // GPU 0 has a live share; the caller finds it unusable (a process no record explains uses it):
  // GPU 1 gives the share, although pack ranks GPU 0 first.
  const ParsedRecords current = parseRecords("0 100\t1\tshare=0/2\n");
  const auto live = [](const Owner& o) { return livePids(o, {100, 101}); };
  ShareRequest request = sharesOf(2, {2, 2}, 1, 101);
  int asked = 0;
  request.unusable = [&](const std::vector<Record>& records) {
    ++asked;
    EXPECT_EQ(records, current.records);
    return std::vector<std::string>{"0"};
  };
  const ShareAllocation one = planShareAllocation(current, request, live, {});
  EXPECT_EQ(asked, 1);
  ASSERT_TRUE(one.satisfied);
  EXPECT_EQ(gpusOf(one), std::vector<std::string>{"1"});
  // Two asked: short, GPU 0 named unusable with its live share counted.
  request.amount = 2;
  const ShareAllocation two = planShareAllocation(current, request, live, {});
  EXPECT_FALSE(two.satisfied);
  EXPECT_EQ(two.freeGpus, 1u);
  ASSERT_EQ(two.unshared.size(), 2u);
  EXPECT_EQ(two.unshared[0].gpu, "0");
  EXPECT_EQ(two.unshared[0].reason, UnsharedGpu::Reason::kUnusable);
  EXPECT_EQ(two.unshared[0].liveShares, 1u);
  EXPECT_EQ(two.unshared[0].replicas, 2u);
  EXPECT_EQ(two.unshared[1].reason, UnsharedGpu::Reason::kFreeButShort);
  // The requester's own GPU says so first, whatever else uses it.
  ShareRequest own = sharesOf(1, {2}, 1, 100);
  own.unusable = [](const std::vector<Record>&) { return std::vector<std::string>{"0"}; };
  const ShareAllocation held = planShareAllocation(current, own, live, {});
  ASSERT_EQ(held.unshared.size(), 1u);
  EXPECT_EQ(held.unshared[0].reason, UnsharedGpu::Reason::kHeldByOwner);
}

TEST(SharePlanTest, TheLowestFreeIndexGoesAndADeadOwnersShareIsTakenBack) {
  // Shares 0 and 2 live, share 1's owner gone: the new share is 1, its old record taken back.
  const ParsedRecords current =
      parseRecords("0 100\t1\tshare=0/4\n0 101\t1\tshare=1/4\n0 102\t1\tshare=2/4\n");
  const ShareAllocation a = planShareAllocation(current, sharesOf(1, {4}, 1, 200),
                                                [](const Owner& o) {
                                                  return livePids(o, {100, 102, 200});
                                                },
                                                {});
  ASSERT_TRUE(a.satisfied);
  EXPECT_EQ(a.granted, (std::vector<GrantedShare>{{"0", {1, 4}}}));
  EXPECT_EQ(a.reclaimed.size(), 1u);
  EXPECT_EQ(a.reclaimed[0].owner.pid, 101);
  EXPECT_EQ(formatRecords(a.records),
            "0 100\t1\tshare=0/4\n0 102\t1\tshare=2/4\n0 200\t1\tshare=1/4\n");
}

TEST(SharePlanTest, LiveSharesCountAgainstANewKEvenWhenGrantedUnderAnOlderOne) {
  // Granted under K=4, then the operator declared K=2: three live shares leave none free; with
  // one of them gone, still none (two live, K=2); with two gone, the lowest free index, 0.
  const ParsedRecords current =
      parseRecords("0 100\t1\tshare=0/4\n0 101\t1\tshare=2/4\n0 102\t1\tshare=3/4\n");
  const auto with = [&](std::vector<pid_t> live) {
    live.push_back(200);
    return planShareAllocation(current, sharesOf(1, {2}, 1, 200),
                               [live](const Owner& o) { return livePids(o, live); }, {});
  };
  EXPECT_FALSE(with({100, 101, 102}).satisfied);
  EXPECT_FALSE(with({101, 102}).satisfied);
  const ShareAllocation a = with({102});
  ASSERT_TRUE(a.satisfied);
  EXPECT_EQ(a.granted, (std::vector<GrantedShare>{{"0", {0, 2}}}));
}

TEST(SharePlanTest, TwoRunningOwnersClaimingOneIndexAreTwoShares) {
  // A hand edit gave two running owners share 1 of a GPU of K=2: both GPU's shares are live.
  const auto live = [](const Owner& o) { return o.pid >= 100; };
  const ParsedRecords claimed = parseRecords("0 100\t1\tshare=1/2\n0 101\t1\tshare=1/2\n");
  const ShareAllocation none = planShareAllocation(claimed, sharesOf(1, {2}, 1, 300), live, {});
  EXPECT_FALSE(none.satisfied);
  ASSERT_EQ(none.unshared.size(), 1u);
  EXPECT_EQ(none.unshared[0].liveShares, 2u);
  // One owner's line written twice is one share: share 0 is free.
  const ParsedRecords twice = parseRecords("0 100\t1\tshare=1/2\n0 100\t1\tshare=1/2\n");
  EXPECT_EQ(planShareAllocation(twice, sharesOf(1, {2}, 1, 300), live, {}).granted,
            (std::vector<GrantedShare>{{"0", {0, 2}}}));
}

TEST(SharePlanTest, PackFillsSharedGpusFirstAndSpreadTakesFreshOnesFirst) {
  // GPUs 0-3 declared in 4; GPU 2 has two live shares, GPU 1 one.
  const ParsedRecords current =
      parseRecords("2 100\t1\tshare=0/4\n2 101\t1\tshare=1/4\n1 102\t1\tshare=0/4\n");
  const auto live = [](const Owner& o) { return o.pid >= 100; };
  ShareRequest request = sharesOf(4, {4, 4, 4, 4}, 1, 300);
  EXPECT_EQ(gpusOf(planShareAllocation(current, request, live, {})), std::vector<std::string>{"2"});
  request.amount = 2;
  EXPECT_EQ(gpusOf(planShareAllocation(current, request, live, {})),
            (std::vector<std::string>{"1", "2"}));
  request.amount = 3;
  EXPECT_EQ(gpusOf(planShareAllocation(current, request, live, {})),
            (std::vector<std::string>{"0", "1", "2"}));

  request.placement = SharePlacement::kSpread;
  request.amount = 1;
  EXPECT_EQ(gpusOf(planShareAllocation(current, request, live, {})), std::vector<std::string>{"0"});
  request.amount = 3;
  EXPECT_EQ(gpusOf(planShareAllocation(current, request, live, {})),
            (std::vector<std::string>{"0", "1", "3"}))
      << "the fresh ones, then the least shared (GPU 1, one share) before GPU 2 (two)";
}

TEST(SharePlanTest, ThePlacementRulePicksAmongFreshGpusOnly) {
  const ParsedRecords current = parseRecords("1 100\t1\tshare=0/4\n");
  ShareRequest request = sharesOf(4, {4, 4, 4, 4}, 2, 300);
  std::vector<std::pair<std::vector<std::string>, std::size_t>> asked;
  request.choose = [&](const std::vector<std::string>& fresh, std::size_t amount) {
    asked.emplace_back(fresh, amount);
    return std::vector<std::string>{fresh.back()};
  };
  const ShareAllocation a =
      planShareAllocation(current, request, [](const Owner& o) { return o.pid >= 100; }, {});
  EXPECT_EQ(gpusOf(a), (std::vector<std::string>{"1", "3"}));
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0].first, (std::vector<std::string>{"0", "2", "3"}));
  EXPECT_EQ(asked[0].second, 1u);
  // A wrong answer (a GPU that is not fresh) means the first fresh ones.
  request.choose = [](const std::vector<std::string>&, std::size_t) {
    return std::vector<std::string>{"1"};
  };
  EXPECT_EQ(gpusOf(planShareAllocation(current, request, [](const Owner&) { return true; }, {})),
            (std::vector<std::string>{"0", "1"}));
}

TEST(SharePlanTest, NSharesAreOnNDistinctGpusAndTheSameOwnerNeverGetsTwoOfOneGpu) {
  const auto live = [](const Owner& o) { return o.pid >= 100; };
  // One GPU in 8: an amount of 2 is never two shares of it.
  const ShareAllocation two =
      planShareAllocation(parseRecords(""), sharesOf(2, {8, 0}, 2, 300), live, {});
  EXPECT_FALSE(two.satisfied);
  EXPECT_EQ(two.freeGpus, 1u);
  // The owner that holds a share of GPU 0 asks again: GPU 1 (though pack prefers shared GPU 0).
  const ParsedRecords mine = parseRecords("0 300\t1\tshare=0/8\n");
  const ShareAllocation again = planShareAllocation(mine, sharesOf(2, {8, 8}, 1, 300), live, {});
  EXPECT_EQ(gpusOf(again), std::vector<std::string>{"1"});
  // Only GPU 0 declared: nothing, and the reason says so.
  const ShareAllocation none = planShareAllocation(mine, sharesOf(2, {8, 0}, 1, 300), live, {});
  EXPECT_FALSE(none.satisfied);
  ASSERT_EQ(none.unshared.size(), 2u);
  EXPECT_EQ(none.unshared[0].reason, UnsharedGpu::Reason::kHeldByOwner);
  EXPECT_EQ(none.unshared[1].reason, UnsharedGpu::Reason::kNotDeclared);
  // A GPU the owner holds whole gives it no share either.
  EXPECT_EQ(gpusOf(planShareAllocation(parseRecords("0 300\t1\n"), sharesOf(2, {8, 8}, 1, 300),
                                       live, {})),
            std::vector<std::string>{"1"});
}

TEST(SharePlanTest, AShareNeverLandsOnAGpuHeldWholeByOursFlinksOrALease) {
  const auto live = [](const Owner& o) { return o.pid == 100 || o.pid == 300; };
  // Flink's two-field line, ours with a start time, each of a running owner: GPU 0 is whole.
  for (const std::string& line :
       {std::string("0 100\n"), std::string("0 100\t1\tuuid=") + kUuid0 + "\n",
        std::string("0 100\t1\n")}) {
    const ShareAllocation a =
        planShareAllocation(parseRecords(line), sharesOf(2, {4, 4}, 1, 300), live, {});
    EXPECT_EQ(gpusOf(a), std::vector<std::string>{"1"}) << line;
  }
  // The whole owner gone: its GPU gives shares again, and its record is taken back.
  const ShareAllocation back =
      planShareAllocation(parseRecords("0 200\n"), sharesOf(1, {4}, 1, 300), live, {});
  EXPECT_EQ(gpusOf(back), std::vector<std::string>{"0"});
  EXPECT_EQ(back.reclaimed.size(), 1u);
  // A held whole lease, no record: GPU 0 is whole.
  ShareRequest request = sharesOf(2, {4, 4}, 2, 300);
  request.uuids = {{"0", kUuid0}};
  const LeaseProbe wholeHeld = [](const std::string& name, const std::optional<LeaseFile>&) {
    return name == kUuid0 ? LeaseState::kHeld : LeaseState::kFree;
  };
  const ShareAllocation leased =
      planShareAllocation(parseRecords(""), request, live, wholeHeld, {kUuid0});
  EXPECT_FALSE(leased.satisfied);
  ASSERT_FALSE(leased.unshared.empty());
  EXPECT_EQ(leased.unshared[0].reason, UnsharedGpu::Reason::kHeldWhole);
  // A MIG instance of GPU 0 held: GPU 0 gives no share.
  request.amount = 1;
  request.uuids.clear();
  request.related = {{"0", {"MIG-1c7d2b3e-4f5a-6b7c-8d9e-0f1a2b3c4d5e"}}};
  EXPECT_EQ(gpusOf(planShareAllocation(
                parseRecords("MIG-1c7d2b3e-4f5a-6b7c-8d9e-0f1a2b3c4d5e 100\n"), request, live, {})),
            std::vector<std::string>{"1"});
}

TEST(SharePlanTest, AWholeRequestNeverTakesAGpuWithALiveShare) {
  const auto live = [](const Owner& o) { return o.pid == 100 || o.pid == 300; };
  // A live share of GPU 0: a whole request of 1 gets GPU 1, of 2 nothing.
  const ParsedRecords shared = parseRecords("0 100\t1\tshare=2/4\n");
  EXPECT_EQ(planAllocation(shared, {gpuRange(2), 1, Owner{300, 1}}, live).granted,
            std::vector<std::string>{"1"});
  EXPECT_FALSE(planAllocation(shared, {gpuRange(2), 2, Owner{300, 1}}, live).satisfied);
  // Once the last share's owner is gone, GPU 0 goes whole again, the share record taken back.
  const Allocation whole =
      planAllocation(parseRecords("0 200\t1\tshare=2/4\n"), {gpuRange(2), 2, Owner{300, 1}}, live);
  EXPECT_EQ(whole.granted, (std::vector<std::string>{"0", "1"}));
  ASSERT_EQ(whole.reclaimed.size(), 1u);
  EXPECT_EQ(whole.reclaimed[0].share, (ShareSlot{2, 4}));
}

TEST(SharePlanTest, OneRequestsGpusShareOneMpsPipeDirectoryOrAreAllTimeSliced) {
  // GPUs 0 and 2 behind the MPS daemon of /run/mps-a, GPU 1 time-sliced, GPU 3 behind /run/mps-b.
  ShareRequest request;
  request.gpus = gpuRange(4);
  request.shareable = {
      {"0", 4, "/run/mps-a"}, {"1", 4, ""}, {"2", 4, "/run/mps-a"}, {"3", 4, "/run/mps-b"}};
  request.owner = Owner{300, 1};
  request.amount = 2;
  const auto live = [](const Owner& o) { return o.pid >= 100; };
  EXPECT_EQ(gpusOf(planShareAllocation(parseRecords(""), request, live, {})),
            (std::vector<std::string>{"0", "2"}));
  request.amount = 3;
  const ShareAllocation three = planShareAllocation(parseRecords(""), request, live, {});
  EXPECT_FALSE(three.satisfied);
  EXPECT_EQ(three.freeGpus, 2u);
  ASSERT_EQ(three.unshared.size(), 4u);
  EXPECT_EQ(three.unshared[1].reason, UnsharedGpu::Reason::kFreeButShort);
  // Groups go in the order of their best GPU: with pack, the group with a shared GPU first.
  request.amount = 1;
  EXPECT_EQ(gpusOf(planShareAllocation(parseRecords("3 100\t1\tshare=0/4\n"), request, live, {})),
            std::vector<std::string>{"3"});
  EXPECT_EQ(gpusOf(planShareAllocation(parseRecords(""), request, live, {})),
            std::vector<std::string>{"0"});
}

// --- through the file, with leases --------------------------------------------------------------

class ShareFileTest : public ::testing::Test {
 protected:
  fs::path file() const { return dir_ / "coordination"; }
  ShareRequest leased(std::size_t amount) const {
    ShareRequest request = sharesOf(2, {2, 2}, amount, ::getpid());
    request.owner = Owner::of(::getpid());
    request.uuids = {{"0", kUuid0}};
    request.lease = true;
    return request;
  }
  TempDir dir_{"flink-gpu-share-test"};
};

TEST_F(ShareFileTest, AShareIsRecordedAndLeasedAndItsLeaseEndsWithItsHolder) {
  ShareAllocation a = allocateShares(file(), leased(1));
  ASSERT_TRUE(a.satisfied);
  EXPECT_EQ(a.granted, (std::vector<GrantedShare>{{"0", {0, 2}}}));
  // Under the GPU's UUID and its index in this mount namespace's numbering, each with the share.
  ASSERT_EQ(a.leases.size(), 2u);
  EXPECT_EQ(a.leases[0].name(), std::string(kUuid0) + ".share-0");
  const std::string text = readFile(file());
  EXPECT_NE(text.find(std::string("\tuuid=") + kUuid0 + "\tshare=0/2\t"), std::string::npos)
      << text;
  EXPECT_NE(text.find(std::string("\tlease=") + kUuid0 + ".share-0\t"), std::string::npos) << text;
  EXPECT_EQ(leaseState(file(), std::string(kUuid0) + ".share-0"), LeaseState::kHeld);
  a.leases.clear();
  EXPECT_EQ(leaseState(file(), std::string(kUuid0) + ".share-0"), LeaseState::kFree);
}

TEST_F(ShareFileTest, AHeldShareLeaseWithoutItsRecordKeepsItsShareAndKeepsTheGpuFromGoingWhole) {
  // What Flink's `sed "/0 /d"` leaves of GPU 10's share: its lease, no line.
  const Lease held = acquireLease(file(), std::string(kUuid0) + ".share-0");
  const ShareAllocation share = allocateShares(file(), leased(1));
  ASSERT_TRUE(share.satisfied);
  EXPECT_EQ(share.granted, (std::vector<GrantedShare>{{"0", {1, 2}}})) << "share 0 is the lease's";
  // A whole request of 2 cannot have GPU 0 (shared by the lease and by the new share), nor a
  // whole request once the new share's record is gone and only the lease holds.
  AllocationRequest whole{{"0", "1"}, 2, Owner::of(::getpid())};
  whole.uuids = {{"0", kUuid0}};
  EXPECT_FALSE(allocate(file(), whole).satisfied);
  release(file(), [](const Record&) { return true; });
  const Allocation shortOf = allocate(file(), whole);
  EXPECT_FALSE(shortOf.satisfied);
  EXPECT_EQ(shortOf.heldByLeaseOnly, std::vector<std::string>{"0"});
  whole.amount = 1;
  EXPECT_EQ(allocate(file(), whole).granted, std::vector<std::string>{"1"});
}

TEST_F(ShareFileTest, FreeLeaseFilesNoRecordNamesGoAtTheNextShare) {
  // A whole GPU 1 given back by its worker (its record released, its lease let go) leaves its
  // lease files, free; so does a share given back. The next share allocation removes them, as a
  // whole one does.
  AllocationRequest whole{{"1"}, 1, Owner::of(::getpid())};
  whole.lease = true;
  {
    const Allocation gpu = allocate(file(), whole);
    ASSERT_TRUE(gpu.satisfied);
    const ShareAllocation share = allocateShares(file(), leased(1));
    ASSERT_TRUE(share.satisfied);
    release(file(), [](const Record&) { return true; });
  }
  const fs::path folder = leaseFolderOf(file());
  std::size_t before = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(folder)) ++before;
  ASSERT_GE(before, 3u) << "GPU 1's lease and the share's two";
  const ShareAllocation next = allocateShares(file(), leased(1));
  ASSERT_TRUE(next.satisfied);
  std::set<std::string> left;
  for (const auto& entry : fs::directory_iterator(folder)) {
    left.insert(entry.path().filename().string());
  }
  std::set<std::string> held;
  for (const Lease& lease : next.leases) held.insert(lease.name());
  EXPECT_EQ(left, held);
}

TEST_F(ShareFileTest, AGoneShareHoldersRecordIsTakenBackByTheNextShare) {
  {
    testing::LiveProcess first;
    ShareRequest request = leased(1);
    request.lease = false;
    request.owner = Owner::of(first.pid());
    ASSERT_TRUE(allocateShares(file(), request).satisfied);
    request.owner = Owner::of(::getpid());
    const ShareAllocation second = allocateShares(file(), request);
    EXPECT_EQ(second.granted, (std::vector<GrantedShare>{{"0", {1, 2}}}));
  }
  // The first holder is gone: a third owner gets its share 0, and its record goes.
  testing::LiveProcess third;
  ShareRequest request = leased(1);
  request.lease = false;
  request.owner = Owner::of(third.pid());
  const ShareAllocation a = allocateShares(file(), request);
  ASSERT_TRUE(a.satisfied);
  EXPECT_EQ(a.granted, (std::vector<GrantedShare>{{"0", {0, 2}}}));
  EXPECT_EQ(a.reclaimed.size(), 1u);
  const ParsedRecords after = parseRecords(readFile(file()));
  ASSERT_EQ(after.records.size(), 2u);
  EXPECT_EQ(after.records[0].owner.pid, ::getpid());
  EXPECT_EQ(after.records[1].owner.pid, third.pid());
}

}  // namespace
}  // namespace flink::coordination::share_allocation_test
