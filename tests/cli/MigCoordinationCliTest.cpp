// A GPU and its MIG instances in the coordination file, from the outside: the real flink-gpu and
// the default discovery beside it, on the stand-in libnvidia-ml.so.1 of tests/fixtures/nvml
// ($FLINK_GPU_NVML_LIBRARY) with a host of GPU 0 (no MIG) and GPU 1 in MIG mode with two
// instances. Whether an owner asks for whole GPUs or for MIG instances, a GPU is never handed out
// while another running owner holds one of its instances, nor an instance while another holds
// its GPU whole; two instances of one GPU may go to two owners. Holders are `flink-gpu exec ...
// sleep 60` processes, and `sleep` processes named with --owner-pid, started and killed here.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "CliRun.h"
#include "TestSupport.h"

extern char** environ;

namespace mig_coordination_cli_test {

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using flink::testing::Background;
using flink::testing::CliRun;
using flink::testing::firstLine;
using flink::testing::kCli;
using flink::testing::linesOf;
using flink::testing::readLines;
using flink::testing::runCli;
using flink::testing::sleepPath;
using flink::testing::TempDir;
using flink::testing::waitForLines;
using flink::testing::writeScript;

constexpr const char* kMigA = "MIG-5e1f0a2b-3c4d-4e5f-8a6b-7c8d9e0f1a2b";
constexpr const char* kMigB = "MIG-6f2a1b3c-4d5e-4f6a-9b7c-8d9e0f1a2b3c";

using flink::testing::contains;

bool hasLine(std::string_view text, std::string_view line) {
  for (const std::string& each : linesOf(text)) {
    if (each == line) return true;
  }
  return false;
}

class MigCoordinationCliTest : public ::testing::Test {
 protected:
  MigCoordinationCliTest() {
    // A decoy: an answer from nvidia-smi instead of NVML would show as GPUs 5, 6 and 7.
    writeScript(dir_ / "bin" / "nvidia-smi", "#!/bin/sh\nprintf '5\\n6\\n7\\n'\n");
    std::ofstream(dir_ / "host.json") << R"({"devices": [
      {"uuid": "GPU-7a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", "name": "NVIDIA H200",
       "mig_enabled": false},
      {"uuid": "GPU-8b2c3d4e-5f6a-4b7c-9d8e-0f1a2b3c4d5e", "name": "NVIDIA H200",
       "mig_enabled": true, "mig": [
        {"uuid": ")" << kMigA << R"(", "name": "NVIDIA H200 MIG 3g.71gb",
         "gpu_instance_id": 1, "compute_instance_id": 0},
        {"uuid": ")" << kMigB << R"(", "name": "NVIDIA H200 MIG 3g.71gb",
         "gpu_instance_id": 2, "compute_instance_id": 0}]}]})";
  }

  std::vector<std::string> environment() const {
    return {std::string("FLINK_GPU_NVML_LIBRARY=") + FAKE_NVML_FULL,
            "FAKE_NVML_DEVICES=" + (dir_ / "host.json").string(),
            "PATH=" + (dir_ / "bin").string() + ":/usr/bin:/bin"};
  }

  std::string file() const { return (dir_ / "coordination").string(); }

  /// `flink-gpu exec <options> --coordination-file F -- <command>`, run to completion.
  CliRun exec(const std::vector<std::string>& options,
              const std::vector<std::string>& command = {"/bin/sh", "-c",
                                                         "echo $CUDA_VISIBLE_DEVICES"}) const {
    std::vector<std::string> args{"exec", "--coordination-file", file()};
    args.insert(args.end(), options.begin(), options.end());
    args.push_back("--");
    args.insert(args.end(), command.begin(), command.end());
    return runCli(args, environment());
  }

  /// `flink-gpu exec <options> -- sleep 60` in the background, once its `records` records are
  /// in the file and its command has started (so that all exec says before it, notes and
  /// warnings, is in its log: logs_.back()).
  std::unique_ptr<Background> holder(const std::vector<std::string>& options,
                                     std::size_t records) const {
    const std::string name = "holder-" + std::to_string(logs_.size() + 1);
    logs_.push_back(dir_ / (name + ".log"));
    const fs::path started = dir_ / (name + ".started");
    std::vector<std::string> args{"/usr/bin/env"};
    const std::vector<std::string> env = environment();
    args.insert(args.end(), env.begin(), env.end());
    args.insert(args.end(), {kCli, "exec", "--coordination-file", file()});
    args.insert(args.end(), options.begin(), options.end());
    args.insert(args.end(), {"--", "/bin/sh", "-c", "echo started > \"$1\"; exec \"$0\" 60",
                             sleepPath(), started.string()});
    auto running = std::make_unique<Background>(args, logs_.back());
    EXPECT_EQ(waitForLines(started, 1, 20s).size(), 1u) << flink::testing::readFile(logs_.back());
    EXPECT_EQ(readLines(file()).size(), records) << flink::testing::readFile(logs_.back());
    return running;
  }

  /// The default discovery in coordination mode for `owner`, with `extra` arguments.
  CliRun discover(int amount, pid_t owner, const std::string& extra = "") const {
    return runCli({"discover", "-n", std::to_string(amount), "--discovery-args",
                   "--enable-coordination-mode --coordination-file " + file() + " --owner-pid " +
                       std::to_string(owner) + extra},
                  environment());
  }

  /// The file's records, "<gpu> <pid>" each (the start time left out).
  std::vector<std::string> records() const {
    std::vector<std::string> result;
    for (const std::string& line : readLines(file())) {
      std::istringstream fields(line);
      std::string gpu;
      std::string pid;
      if (fields >> gpu >> pid) result.push_back(gpu + " " + pid);
    }
    return result;
  }

  TempDir dir_{"flink-gpu-mig-coordination-cli-test"};
  /// The logs of the holders started, in order.
  mutable std::vector<fs::path> logs_;
};

// --- exec ----------------------------------------------------------------------------------

TEST_F(MigCoordinationCliTest, ExecRefusesAWholeGpuWhileItsMigInstancesAreHeld) {
  // Both instances of GPU 1 are held through --mig.
  const auto held = holder({"-n", "2", "--mig"}, 2);
  const std::string pid = held->pidText();
  ASSERT_EQ(records(), (std::vector<std::string>{std::string(kMigA) + " " + pid,
                                                 std::string(kMigB) + " " + pid}));

  const CliRun whole = exec({"-n", "2"});
  EXPECT_EQ(whole.exitCode, 1) << whole;
  EXPECT_EQ(whole.out, "") << whole;  // the command never ran
  EXPECT_EQ(firstLine(whole.err),
            "flink-gpu: error: not enough free GPUs: 2 requested, 1 free, 0 held, 1 busy because a "
            "related unit is held")
      << whole;
  EXPECT_TRUE(hasLine(whole.err, std::string("GPU 1 is busy: its MIG instance ") + kMigA +
                                     " is held by process " + pid))
      << whole;
  EXPECT_TRUE(hasLine(whole.err, std::string("GPU 1 is busy: its MIG instance ") + kMigB +
                                     " is held by process " + pid))
      << whole;
  EXPECT_EQ(records().size(), 2u);

  // Once the holder has ended, its records are taken back and GPU 1 is whole again.
  held->stop();
  const CliRun after = exec({"-n", "2"});
  EXPECT_EQ(after.exitCode, 0) << after;
  EXPECT_EQ(after.out, "0,1\n") << after;
}

TEST_F(MigCoordinationCliTest, ExecRefusesMigInstancesWhileTheirGpuIsHeldWhole) {
  const auto held = holder({"-n", "2"}, 2);
  const std::string pid = held->pidText();
  ASSERT_EQ(records(), (std::vector<std::string>{"0 " + pid, "1 " + pid}));

  const CliRun mig = exec({"-n", "1", "--mig"});
  EXPECT_EQ(mig.exitCode, 1) << mig;
  EXPECT_EQ(firstLine(mig.err),
            "flink-gpu: error: not enough free GPUs: 1 requested, 0 free, 1 held, 2 busy because "
            "a related unit is held (with --mig, whole GPUs and MIG instances are never mixed)")
      << mig;
  for (const char* instance : {kMigA, kMigB}) {
    EXPECT_TRUE(hasLine(mig.err, std::string("GPU ") + instance +
                                     " is busy: GPU 1, which it is carved from, is held by "
                                     "process " +
                                     pid))
        << mig;
  }
  EXPECT_EQ(records().size(), 2u);
}

TEST_F(MigCoordinationCliTest, ExecGivesTwoInstancesOfOneGpuToTwoOwners) {
  const auto first = holder({"-n", "1", "--mig"}, 1);
  const auto second = holder({"-n", "1", "--mig"}, 2);
  EXPECT_EQ(records(), (std::vector<std::string>{std::string(kMigA) + " " + first->pidText(),
                                                 std::string(kMigB) + " " + second->pidText()}));
  // One instance each: no warning.
  EXPECT_EQ(flink::testing::readFile(logs_.at(0)), "");
  EXPECT_EQ(flink::testing::readFile(logs_.at(1)), "");

  // status says GPU 1 is busy, not free.
  const CliRun status = runCli({"status", "--coordination-file", file()}, environment());
  EXPECT_TRUE(contains(status.out, std::string("its MIG instance ") + kMigA + " is held"))
      << status;
  bool busy = false;
  for (const std::string& line : flink::testing::linesOf(status.out)) {
    busy = busy || (line.starts_with("1 ") && contains(line, " busy "));
  }
  EXPECT_TRUE(busy) << status;

  // Their GPU is busy twice over: only GPU 0 is left whole.
  const CliRun whole = exec({"-n", "2"});
  EXPECT_EQ(whole.exitCode, 1) << whole;
  EXPECT_TRUE(hasLine(whole.err, std::string("GPU 1 is busy: its MIG instance ") + kMigA +
                                     " is held by process " + first->pidText()))
      << whole;
  EXPECT_TRUE(hasLine(whole.err, std::string("GPU 1 is busy: its MIG instance ") + kMigB +
                                     " is held by process " + second->pidText()))
      << whole;
}

TEST_F(MigCoordinationCliTest, ExecWarnsThatCudaSeesOneMigInstancePerProcess) {
  const CliRun two = exec({"-n", "2", "--mig"});
  EXPECT_EQ(two.exitCode, 0) << two;
  EXPECT_EQ(two.out, std::string(kMigA) + "," + kMigB + "\n") << two;
  EXPECT_EQ(two.err,
            "flink-gpu: warning: CUDA_VISIBLE_DEVICES holds 2 MIG instances, but CUDA enumerates "
            "only one MIG instance per process: a CUDA program will use only the first\n")
      << two;
}

TEST_F(MigCoordinationCliTest, ExecWithMigNeverMixesWholeGpusAndMigInstances) {
  // GPU 0 whole and GPU 1's two instances are three units, but never one CUDA_VISIBLE_DEVICES:
  // a CUDA process given both sees only the instance.
  const CliRun three = exec({"-n", "3", "--mig"});
  EXPECT_EQ(three.exitCode, 1) << three;
  EXPECT_EQ(three.out, "") << three;
  EXPECT_TRUE(
      contains(firstLine(three.err), "(with --mig, whole GPUs and MIG instances are never mixed)"))
      << three;
  EXPECT_TRUE(records().empty());
  // One of each kind is had whole: the instance first, then, with both instances held, GPU 0.
  const auto firstInstances = holder({"-n", "2", "--mig"}, 2);
  const CliRun one = exec({"-n", "1", "--mig"});
  EXPECT_EQ(one.exitCode, 0) << one;
  EXPECT_EQ(one.out, "0\n") << one;
}

TEST_F(MigCoordinationCliTest, ExecWithMigAndGpusIsAUsageError) {
  const CliRun both = exec({"-n", "1", "--mig", "--gpus", "0,1"});
  EXPECT_EQ(both.exitCode, 2) << both;
  EXPECT_EQ(both.out, "") << both;
  EXPECT_TRUE(firstLine(both.err).starts_with("flink-gpu: error: --mig cannot be used with --gpus"))
      << both;
  EXPECT_FALSE(fs::exists(file())) << "nothing was allocated";
}

// --- the default discovery, workers of both kinds ------------------------------------------

/// A `sleep 60`: an owner named with --owner-pid.
std::unique_ptr<Background> sleeper(const fs::path& log) {
  return std::make_unique<Background>(std::vector<std::string>{sleepPath(), "60"}, log);
}

TEST_F(MigCoordinationCliTest, DiscoveryRefusesAGpuWhoseInstanceAMigWorkerHolds) {
  const auto migWorker = sleeper(dir_ / "mig.log");
  const auto wholeWorker = sleeper(dir_ / "whole.log");

  const CliRun mig = discover(2, migWorker->pid(), " --mig");
  EXPECT_EQ(mig.exitCode, 0) << mig;
  EXPECT_EQ(mig.out, std::string("GPU Device(0)\nGPU Device(") + kMigA + ")\n") << mig;

  const CliRun whole = discover(1, wholeWorker->pid());
  EXPECT_EQ(whole.exitCode, 1) << whole;
  EXPECT_TRUE(contains(firstLine(whole.err), "not enough free GPUs: 1 requested, 0 free")) << whole;
  EXPECT_TRUE(hasLine(whole.err, std::string("GPU 1 is busy: its MIG instance ") + kMigA +
                                     " is held by process " + migWorker->pidText()))
      << whole;
  EXPECT_EQ(records().size(), 2u);

  // The other instance is still there for another MIG worker.
  const auto secondMigWorker = sleeper(dir_ / "mig2.log");
  const CliRun other = discover(1, secondMigWorker->pid(), " --mig");
  EXPECT_EQ(other.exitCode, 0) << other;
  EXPECT_EQ(other.out, std::string("GPU Device(") + kMigB + ")\n") << other;
}

TEST_F(MigCoordinationCliTest, DiscoveryRefusesTheInstancesOfAGpuAWholeGpuWorkerHolds) {
  const auto wholeWorker = sleeper(dir_ / "whole.log");
  const auto migWorker = sleeper(dir_ / "mig.log");

  const CliRun whole = discover(2, wholeWorker->pid());
  EXPECT_EQ(whole.exitCode, 0) << whole;
  EXPECT_EQ(whole.out, "GPU Device(0)\nGPU Device(1)\n") << whole;

  const CliRun mig = discover(1, migWorker->pid(), " --mig");
  EXPECT_EQ(mig.exitCode, 1) << mig;
  EXPECT_TRUE(contains(firstLine(mig.err), "not enough free GPUs: 1 requested, 0 free")) << mig;
  EXPECT_TRUE(hasLine(mig.err, std::string("GPU ") + kMigA +
                                   " is busy: GPU 1, which it is carved from, is held by process " +
                                   wholeWorker->pidText()))
      << mig;

  // When the whole-GPU worker is gone, its GPUs are taken back and the instances are free.
  wholeWorker->stop();
  const CliRun after = discover(3, migWorker->pid(), " --mig");
  EXPECT_EQ(after.exitCode, 0) << after;
  EXPECT_EQ(after.out,
            std::string("GPU Device(0)\nGPU Device(") + kMigA + ")\nGPU Device(" + kMigB + ")\n")
      << after;
}

}  // namespace

}  // namespace mig_coordination_cli_test
