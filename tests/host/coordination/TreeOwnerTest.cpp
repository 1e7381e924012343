// The owner of a process tree (host/coordination/TreeOwner.h) and the one walk up a parent chain
// (liveness::ancestry), on the simulated host of tests/host/liveness/: a worker's descendants own
// its GPUs, through any depth and a reused pid never, and nothing leads a stranger to them.
#include "host/coordination/TreeOwner.h"

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "SimulatedHost.h"
#include "host/coordination/Coordination.h"

namespace flink {
namespace {

using coordination::HeldLease;
using coordination::Record;
using coordination::TreeOwner;
using liveness::HostFacts;
using liveness::Owner;
using testing::SimulatedHost;

struct Host {
  SimulatedHost host;
  SimulatedHost::ProcessId reader = host.spawn();

  /// A record of `gpu` for `process`, as that process writes it (with its start time).
  Record recordOf(SimulatedHost::ProcessId process, const std::string& gpu) {
    return Record{gpu, Owner::of(host.pidOf(process), *host.factsOf(process))};
  }
  std::optional<TreeOwner> ownerOf(SimulatedHost::ProcessId process,
                                   const std::vector<Record>& records,
                                   const std::vector<HeldLease>& leases = {}) {
    const std::unique_ptr<HostFacts> facts = host.factsOf(reader);
    return coordination::treeOwner(records, leases, host.pidOf(process), *facts);
  }
};

TEST(AncestryTest, IsTheProcessThenItsParentsUpToTheFirstProcess) {
  Host h;
  const auto init = h.host.spawn();  // a process whose parent the host does not model
  const auto worker = h.host.spawn({.parent = init});
  const auto child = h.host.spawn({.parent = worker});
  const std::unique_ptr<HostFacts> facts = h.host.factsOf(h.reader);
  const std::vector<Owner> chain = liveness::ancestry(h.host.pidOf(child), *facts);
  ASSERT_EQ(chain.size(), 3u);
  EXPECT_EQ(chain[0].pid, h.host.pidOf(child));
  EXPECT_EQ(chain[1].pid, h.host.pidOf(worker));
  EXPECT_EQ(chain[2].pid, h.host.pidOf(init));
  EXPECT_TRUE(chain[1].startTime.has_value());
  // A pid that names no process is the chain alone.
  EXPECT_EQ(liveness::ancestry(4000, *facts).size(), 1u);
  EXPECT_TRUE(liveness::ancestry(0, *facts).empty());
}

TEST(TreeOwnerTest, TheNearestOwnerOfTheChainOwnsItsDescendantsGpus) {
  Host h;
  const auto taskManager = h.host.spawn();
  const auto python = h.host.spawn({.parent = taskManager});
  const auto worker = h.host.spawn({.parent = python});
  const auto exec = h.host.spawn({.parent = worker});  // a nested exec with GPUs of its own
  const auto command = h.host.spawn({.parent = exec});
  const std::vector<Record> records{h.recordOf(taskManager, "0"), h.recordOf(exec, "2"),
                                    h.recordOf(taskManager, "1")};

  const std::optional<TreeOwner> ofWorker = h.ownerOf(worker, records);
  ASSERT_TRUE(ofWorker);
  EXPECT_EQ(ofWorker->owner.pid, h.host.pidOf(taskManager));
  EXPECT_EQ(ofWorker->depth, 2u);
  EXPECT_EQ(ofWorker->records, (std::vector<std::size_t>{0, 2}));

  const std::optional<TreeOwner> ofCommand = h.ownerOf(command, records);
  ASSERT_TRUE(ofCommand);
  EXPECT_EQ(ofCommand->owner.pid, h.host.pidOf(exec));
  EXPECT_EQ(ofCommand->records, (std::vector<std::size_t>{1}));

  const std::optional<TreeOwner> itself = h.ownerOf(taskManager, records);
  ASSERT_TRUE(itself);
  EXPECT_EQ(itself->depth, 0u);
}

TEST(TreeOwnerTest, AStrangerAndTheChildOfAGoneOwnerWhosePidWasReusedGetNothing) {
  Host h;
  const auto owner = h.host.spawn();
  const auto stranger = h.host.spawn();
  const Record recorded = h.recordOf(owner, "0");
  EXPECT_FALSE(h.ownerOf(stranger, {recorded}));

  // The owner ends; its pid goes to a new process, whose child asks.
  h.host.exit(owner);
  h.host.advance(5 * SimulatedHost::kTickNs);
  h.host.reusePid(SimulatedHost::kHostNamespace, recorded.owner.pid);
  const auto reuser = h.host.spawn();
  ASSERT_EQ(h.host.pidOf(reuser), recorded.owner.pid);
  const auto child = h.host.spawn({.parent = reuser});
  EXPECT_FALSE(h.ownerOf(child, {recorded}));
}

TEST(TreeOwnerTest, ARecordWithoutAStartTimeOwnsNothingSinceItsPidMayBeAnEarlierProcesss) {
  Host h;
  const auto owner = h.host.spawn();
  const auto child = h.host.spawn({.parent = owner});
  Record flinks = h.recordOf(owner, "0");
  flinks.owner.startTime.reset();  // Flink's own `<gpu> <pid>` line
  EXPECT_FALSE(h.ownerOf(child, {flinks}));
}

TEST(TreeOwnerTest, AnOwnerOfAnotherPidNamespaceIsNotTheReadersProcessOfThatPid) {
  Host h;
  const std::uint64_t container = h.host.newPidNamespace();
  const auto inside = h.host.spawn({.pidNamespace = container});
  const Record record = h.recordOf(inside, "0");
  // A host process with the number the container's process has there.
  h.host.reusePid(SimulatedHost::kHostNamespace, record.owner.pid);
  const auto same = h.host.spawn();
  ASSERT_EQ(h.host.pidOf(same), record.owner.pid);
  EXPECT_FALSE(h.ownerOf(same, {record}));
}

TEST(TreeOwnerTest, ALeaseWithoutARecordMakesItsTakerTheOwner) {
  Host h;
  const auto exec = h.host.spawn();
  const auto command = h.host.spawn({.parent = exec});
  const auto other = h.host.spawn();
  const std::vector<HeldLease> leases{{"pci-00000000-19-00.0", h.host.pidOf(exec)},
                                      {"pci-00000000-2A-00.0", h.host.pidOf(other)},
                                      {"GPU-abc", 0}};
  const std::optional<TreeOwner> found = h.ownerOf(command, {}, leases);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->owner.pid, h.host.pidOf(exec));
  EXPECT_TRUE(found->records.empty());
  EXPECT_EQ(found->leases, (std::vector<std::string>{"pci-00000000-19-00.0"}));
}

// A share's lease names its GPU through the GPU's names: `which` and `exec` find a share held by
// its lease alone.
TEST(TreeOwnerTest, TheUnitsOfLeasesAreTheirGpusWithTheirShares) {
  discovery::UnitIndex index;
  const auto gpu =
      index.add({"0", std::string("GPU-8932f937-d72c-4106-c12f-20bd9faed9f6"), "0000:3b:00.0"});
  liveness::Reader reader;
  reader.mountNamespace = 7;
  for (const char* name :
       {"pci-00000000-3B-00.0.share-2", "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6.share-2",
        "index-0.mnt-7.share-2"}) {
    EXPECT_EQ(coordination::unitsOfLeases({name}, index, reader),
              (std::vector<coordination::LeasedUnit>{{gpu, 2u}}))
        << name;
  }
  EXPECT_EQ(coordination::unitsOfLeases({"pci-00000000-3B-00.0"}, index, reader),
            (std::vector<coordination::LeasedUnit>{{gpu, std::nullopt}}));
}

}  // namespace
}  // namespace flink
