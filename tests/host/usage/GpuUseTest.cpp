// The rule of which process on a GPU a record explains (host/usage/GpuUse.h), on the simulated
// host of tests/host/liveness/: every row of the rule, and the judgement of a host's units.
#include "host/usage/GpuUse.h"

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "SimulatedHost.h"
#include "host/coordination/Coordination.h"
#include "host/enumeration/UnitIndex.h"

namespace flink::gpu_use_test {
namespace {

using liveness::HostFacts;
using liveness::Owner;
using testing::SimulatedHost;
using usage::Explanation;

struct Host {
  SimulatedHost host;
  SimulatedHost::ProcessId reader = host.spawn();

  Owner ownerOf(SimulatedHost::ProcessId process) {
    return Owner::of(host.pidOf(process), *host.factsOf(process));
  }
  Explanation explain(SimulatedHost::ProcessId process, const std::vector<Owner>& owners,
                      bool mps = false) {
    const std::unique_ptr<HostFacts> facts = host.factsOf(reader);
    return usage::explain(host.pidOf(process), owners, mps, *facts);
  }
};

TEST(GpuUseTest, AnOwnerAndItsDescendantsAreExplained) {
  Host h;
  const auto owner = h.host.spawn();
  const auto child = h.host.spawn({.parent = owner});
  const auto grandchild = h.host.spawn({.parent = child});
  const auto stranger = h.host.spawn();
  const std::vector<Owner> owners{h.ownerOf(owner)};
  EXPECT_EQ(h.explain(owner, owners), Explanation::kRecordOwner);
  EXPECT_EQ(h.explain(child, owners), Explanation::kOwnerDescendant);
  EXPECT_EQ(h.explain(grandchild, owners), Explanation::kOwnerDescendant);
  EXPECT_EQ(h.explain(stranger, owners), Explanation::kUnexplained);
  EXPECT_EQ(h.explain(child, {}), Explanation::kUnexplained);
}

TEST(GpuUseTest, AGoneOwnerExplainsNothingNotEvenAReusedPid) {
  Host h;
  const auto owner = h.host.spawn();
  const Owner recorded = h.ownerOf(owner);
  h.host.exit(owner);
  h.host.advance(5 * SimulatedHost::kTickNs);
  h.host.reusePid(SimulatedHost::kHostNamespace, recorded.pid);
  const auto reuser = h.host.spawn();
  ASSERT_EQ(h.host.pidOf(reuser), recorded.pid);
  EXPECT_EQ(h.explain(reuser, {recorded}), Explanation::kUnexplained);
}

TEST(GpuUseTest, AnOwnerOfAnotherPidNamespaceExplainsNoHostPid) {
  Host h;
  const std::uint64_t container = h.host.newPidNamespace();
  const auto owner = h.host.spawn({.pidNamespace = container});
  const auto child = h.host.spawn({.parent = owner, .pidNamespace = container});
  // Its record's pid is the container's; NVML's is the host's.
  EXPECT_EQ(h.explain(child, {h.ownerOf(owner)}), Explanation::kUnexplained);
}

TEST(GpuUseTest, TheMpsServerIsExplainedOnlyOnAGpuSharedWithMps) {
  Host h;
  const auto server = h.host.spawn({.name = "nvidia-cuda-mps-server"});
  const auto other = h.host.spawn({.name = "python3"});
  EXPECT_EQ(h.explain(server, {}, true), Explanation::kMpsServer);
  EXPECT_EQ(h.explain(server, {}, false), Explanation::kUnexplained);
  EXPECT_EQ(h.explain(other, {}, true), Explanation::kUnexplained);
}

TEST(GpuUseTest, AReaderThatDoesNotSeeHostPidsCannotJudge) {
  SimulatedHost host;
  const std::uint64_t container = host.newPidNamespace();
  const auto reader = host.spawn({.pidNamespace = container});
  const auto withoutProc = host.spawn({.proc = SimulatedHost::Proc::kNone});
  const auto stranger = host.spawn();
  for (const auto who : {reader, withoutProc}) {
    const std::unique_ptr<HostFacts> facts = host.factsOf(who);
    EXPECT_FALSE(liveness::seesHostPids(facts->reader()));
    EXPECT_EQ(usage::explain(host.pidOf(stranger), {}, false, *facts), Explanation::kUnjudgeable);
  }
}

TEST(GpuUseTest, JudgeNamesBusyUnitsAndMemoryWithoutProcess) {
  Host h;
  const auto owner = h.host.spawn();
  const auto child = h.host.spawn({.parent = owner});
  const auto stranger = h.host.spawn({.name = "python3"});
  const discovery::UnitIndex index = discovery::UnitIndex::ofIdentifiers({"0", "1", "2"}, {});
  coordination::Record record;
  record.gpu = "0";
  record.owner = h.ownerOf(owner);
  const auto pid = [&](SimulatedHost::ProcessId p) { return h.host.pidOf(p); };
  const std::vector<usage::UnitUse> use{
      {"0", std::vector<usage::GpuProcess>{{pid(child), 100}}, 100},
      {"1", std::vector<usage::GpuProcess>{{pid(stranger), 8192}, {pid(child), std::nullopt}},
       8292},
      {"2", std::vector<usage::GpuProcess>{}, 4096},
  };
  const std::unique_ptr<HostFacts> facts = h.host.factsOf(h.reader);
  const usage::Judgement judgement = usage::judge(use, {record}, index, {}, *facts);
  EXPECT_TRUE(judgement.unjudged.empty());
  EXPECT_EQ(judgement.busyUnits(), std::vector<std::string>{"1"});
  const usage::UnitVerdict* busy = judgement.find("1");
  ASSERT_NE(busy, nullptr);
  // The owner's child is GPU 0's owner's, not GPU 1's: both are foreign there.
  ASSERT_EQ(busy->foreign.size(), 2u);
  EXPECT_EQ(busy->foreign[0].name, "python3");
  EXPECT_EQ(usage::describeBusy(*busy), "GPU 1 is used by processes " +
                                            std::to_string(pid(stranger)) + " (8192 MiB) and " +
                                            std::to_string(pid(child)) + ", which no record names");
  const usage::UnitVerdict* memory = judgement.find("2");
  ASSERT_NE(memory, nullptr);
  EXPECT_FALSE(memory->busy());
  EXPECT_EQ(memory->memoryWithoutProcessMiB, 4096u);
  EXPECT_EQ(judgement.find("0"), nullptr);
}

TEST(GpuUseTest, ForeignModesReadAsWritten) {
  for (const auto mode :
       {usage::ForeignMode::kSkip, usage::ForeignMode::kWarn, usage::ForeignMode::kIgnore}) {
    EXPECT_EQ(usage::parseForeignMode(usage::foreignModeName(mode)), mode);
  }
  EXPECT_EQ(usage::parseForeignMode("Skip"), std::nullopt);
}

}  // namespace
}  // namespace flink::gpu_use_test
