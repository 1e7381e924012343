// --select from the outside: `flink-gpu exec` and `flink-gpu discover` on the stand-in host
// mixed-4 (tests/fixtures/nvml/hosts/: GPUs 0 and 1 NVIDIA L4, 2 and 3 NVIDIA H100 80GB HBM3, GPU
// 3 in MIG mode with three instances), through the stand-in libnvidia-ml.so.1. A selector that
// cannot be read is a usage error (exit 2) of either command; too few that match exit 1.
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "CliRun.h"
#include "TestSupport.h"

namespace {

using flink::testing::CliRun;
using flink::testing::firstLine;
using flink::testing::kCli;
using flink::testing::runCli;
using flink::testing::TempDir;

using flink::testing::contains;

class SelectCliTest : public ::testing::Test {
 protected:
  std::vector<std::string> environment() const {
    return {std::string("FLINK_GPU_NVML_LIBRARY=") + FAKE_NVML_FULL,
            std::string("FAKE_NVML_DEVICES=") + FAKE_NVML_HOSTS + "/mixed-4.json",
            "FLINK_GPU_COORDINATION_FILE=" + file()};
  }

  std::string file() const { return (dir_ / "coordination").string(); }

  /// `flink-gpu exec <options> -- sh -c 'echo $CUDA_VISIBLE_DEVICES'`.
  CliRun exec(const std::vector<std::string>& options) const {
    std::vector<std::string> args{"exec", "--coordination-file", file()};
    args.insert(args.end(), options.begin(), options.end());
    args.insert(args.end(), {"--", "/bin/sh", "-c", "echo $CUDA_VISIBLE_DEVICES"});
    return runCli(args, environment());
  }

  TempDir dir_{"flink-gpu-select-cli-test"};
};

TEST_F(SelectCliTest, ExecAllocatesOnlyWhatMatches) {
  const CliRun l4 = exec({"-n", "2", "--select", "name~L4"});
  EXPECT_EQ(l4.exitCode, 0) << l4;
  EXPECT_EQ(l4.out, "0,1\n") << l4;
  const CliRun h100 = exec({"-n", "1", "--select", "name~H100,pci.bus_id=0000:c1:00.0"});
  EXPECT_EQ(h100.exitCode, 0) << h100;
  EXPECT_EQ(h100.out, "3\n") << h100;
  const CliRun instances = exec({"-n", "1", "--mig", "--select", "mig=yes,name~3g"});
  EXPECT_EQ(instances.exitCode, 0) << instances;
  EXPECT_EQ(instances.out, "MIG-b0000003-0000-4000-8000-000000000002\n") << instances;
}

TEST_F(SelectCliTest, ANestedExecGetsTheOuterOnesGpuOnlyWhereItMatches) {
  // exec of an H100 runs an exec that asks for an L4: one allocation per process tree, so it gets
  // none rather than a second GPU its tree's owner never asked for.
  const std::string inner =
      std::string("'") + kCli + "' exec --coordination-file '" + file() + "' -n 1 --select ";
  std::vector<std::string> args{"exec",
                                "--coordination-file",
                                file(),
                                "-n",
                                "1",
                                "--select",
                                "name~H100",
                                "--",
                                "/bin/sh",
                                "-c",
                                inner + "name~L4 -- /bin/sh -c 'echo $CUDA_VISIBLE_DEVICES'"};
  const CliRun refused = runCli(args, environment());
  EXPECT_EQ(refused.exitCode, 1) << refused;
  EXPECT_TRUE(contains(firstLine(refused.err),
                       "flink-gpu: error: this process already holds GPU(s) 2 from process "))
      << refused;
  EXPECT_TRUE(contains(firstLine(refused.err),
                       "and gets no other: one allocation per process tree; this exec cannot hand "
                       "those out (--select name~L4, a mask, or their health)"))
      << refused;
  // Asking for what it holds, it gets it.
  args.back() = inner + "name~H100 -- /bin/sh -c 'echo $CUDA_VISIBLE_DEVICES'";
  const CliRun matching = runCli(args, environment());
  EXPECT_EQ(matching.exitCode, 0) << matching;
  EXPECT_EQ(matching.out, "2\n") << matching;
}

TEST_F(SelectCliTest, ExecSaysHowManyMatchWhenTooFew) {
  const CliRun run = exec({"-n", "3", "--select", "name~L4"});
  EXPECT_EQ(run.exitCode, 1) << run;
  EXPECT_EQ(firstLine(run.err),
            "flink-gpu: error: only 2 GPUs match name~L4, 3 requested (matching: 0,1)")
      << run;
}

TEST_F(SelectCliTest, ExecDropsSpacesAroundAValue) {
  // exec passes a selector whole, so a quoted space reaches it; it is no part of the value.
  const CliRun run = exec({"-n", "2", "--select", "name~L4 , mig=no"});
  EXPECT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, "0,1\n") << run;
}

TEST_F(SelectCliTest, ExecSaysMigInstancesNeedMig) {
  const CliRun run = exec({"-n", "1", "--select", "mig=yes"});
  EXPECT_EQ(run.exitCode, 1) << run;
  EXPECT_EQ(firstLine(run.err),
            "flink-gpu: error: no GPU matches mig=yes, 1 requested (MIG instances are units only "
            "with --mig)")
      << run;
}

TEST_F(SelectCliTest, ALongSelectorIsCutInMessages) {
  const std::string selector = "name~" + std::string(5000, 'x');
  const CliRun run = exec({"-n", "1", "--select", selector});
  EXPECT_EQ(run.exitCode, 1) << run;
  EXPECT_EQ(firstLine(run.err), "flink-gpu: error: no GPU matches name~" + std::string(195, 'x') +
                                    "... (4805 more bytes), 1 requested");
  EXPECT_LT(run.err.size(), 1000u);
}

TEST_F(SelectCliTest, ABadSelectorIsAUsageErrorOfExecAndDiscover) {
  const CliRun execRun = exec({"-n", "1", "--select", "nme~H100"});
  EXPECT_EQ(execRun.exitCode, 2) << execRun;
  EXPECT_EQ(firstLine(execRun.err),
            "flink-gpu: error: --select: unknown key 'nme' in 'nme~H100'; the keys are name, uuid, "
            "pci.bus_id, memory.total, compute_capability, vendor, numa_node, mig")
      << execRun;
  const CliRun discoverRun = runCli({"discover", "--select", "mig=maybe"}, environment());
  EXPECT_EQ(discoverRun.exitCode, 2) << discoverRun;
  EXPECT_TRUE(contains(discoverRun.err, "'maybe' in 'mig=maybe' is not yes or no")) << discoverRun;
  const CliRun spaced = runCli({"discover", "--select", "name=NVIDIA L4"}, environment());
  EXPECT_EQ(spaced.exitCode, 2) << spaced;
  EXPECT_TRUE(contains(spaced.err, "a selector holds no space")) << spaced;
  const CliRun amd = exec({"-n", "1", "--vendor", "amd", "--select", "name~MI300"});
  EXPECT_EQ(amd.exitCode, 2) << amd;
  EXPECT_TRUE(contains(amd.err, "--select is for NVIDIA GPUs; it cannot be used with --vendor amd"))
      << amd;
}

TEST_F(SelectCliTest, DiscoverPassesItToTheScript) {
  const CliRun run =
      runCli({"discover", "-n", "2", "--select", "name~L4", "--format", "json"}, environment());
  EXPECT_EQ(run.exitCode, 0) << run;
  EXPECT_TRUE(contains(run.out, R"("index":"0","vendor":"nvidia")")) << run;
  EXPECT_TRUE(contains(run.out, R"("compute_capability":"8.9")")) << run;
  const CliRun tooMany = runCli({"discover", "-n", "3", "--select", "name~H100"}, environment());
  EXPECT_EQ(tooMany.exitCode, 1) << tooMany;
  EXPECT_TRUE(contains(tooMany.err, "only 2 GPUs match name~H100, 3 requested")) << tooMany;
}

}  // namespace
