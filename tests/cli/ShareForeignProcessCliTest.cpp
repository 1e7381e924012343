// Shares of GPUs in use by a process no record explains (host/usage/GpuUse.h), from the outside:
// the default discovery program with --share, and `exec --share`, on the stand-in
// libnvidia-ml.so.1, whose host lists real processes of this test (sleep children) by their
// pids. A share holder's processes, their descendants and the MPS server of a GPU declared shared
// with MPS are explained; anything else makes the GPU give no share under --foreign skip.
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "CliRun.h"
#include "StandInHost.h"
#include "TestSupport.h"

namespace share_foreign_process_cli_test {

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using flink::testing::Background;
using flink::testing::CliRun;
using flink::testing::firstLine;
using flink::testing::kCli;
using flink::testing::kH200Members;
using flink::testing::readFile;
using flink::testing::runCli;
using flink::testing::runCliAt;
using flink::testing::sleepPath;
using flink::testing::TempDir;
using flink::testing::waitForLines;

using flink::testing::contains;

/// A GPU's members with NVML's process list `processes` (pid, MiB).
std::string withProcesses(const std::vector<std::pair<pid_t, unsigned>>& processes) {
  std::string list;
  for (const auto& [pid, mib] : processes) {
    if (!list.empty()) list += ", ";
    list += R"({"pid": )" + std::to_string(pid) + R"(, "used_mib": )" + std::to_string(mib) +
            R"(, "list": "compute"})";
  }
  return std::string(kH200Members) + R"(, "processes": [)" + list + R"(], "memory_used_mib": 0)";
}

class ShareForeignProcessCliTest : public ::testing::Test {
 protected:
  /// A host of `members.size()` H200s, GPU i with `members[i]`.
  void host(const std::vector<std::string>& members) {
    flink::testing::writeStandInHost(hostFile(), static_cast<unsigned>(members.size()), members);
  }

  fs::path hostFile() const { return dir_ / "host.json"; }
  std::string file() const { return (dir_ / "coordination").string(); }

  std::vector<std::string> environment() const {
    return {std::string("FLINK_GPU_NVML_LIBRARY=") + FAKE_NVML_FULL,
            "FAKE_NVML_DEVICES=" + hostFile().string(), "PATH=/usr/bin:/bin"};
  }

  /// `flink-gpu <command> --coordination-file F <args...>`.
  CliRun cli(std::vector<std::string> args) const {
    args.insert(args.begin() + 1, {"--coordination-file", file()});
    return runCli(args, environment());
  }

  /// `flink-gpu share --gpu <gpu> --replicas 2 [more]`, which must succeed.
  void share(const std::string& gpu, const std::vector<std::string>& more = {}) const {
    std::vector<std::string> args{"share", "--gpu", gpu, "--replicas", "2"};
    args.insert(args.end(), more.begin(), more.end());
    const CliRun run = cli(args);
    ASSERT_EQ(run.exitCode, 0) << run;
  }

  /// nvidia-gpu-discovery 1 --enable-coordination-mode --coordination-file F --owner-pid <owner>
  /// --share <args...>, as Flink's driver runs it.
  CliRun discoverShare(pid_t owner, const std::vector<std::string>& more = {}) const {
    std::vector<std::string> args{"1",
                                  "--enable-coordination-mode",
                                  "--coordination-file",
                                  file(),
                                  "--owner-pid",
                                  std::to_string(owner),
                                  "--share"};
    args.insert(args.end(), more.begin(), more.end());
    return runCliAt(FLINK_GPU_DISCOVERY, dir_.path(), args, environment());
  }

  /// A running process: a worker that asks for shares, or, listed on a GPU, one no record names.
  std::unique_ptr<Background> sleeper(const std::string& program = sleepPath()) {
    return std::make_unique<Background>(std::vector<std::string>{program, "300"},
                                        dir_ / ("sleeper-" + std::to_string(sleepers_++)));
  }

  TempDir dir_{"flink-gpu-share-foreign-cli-test"};
  int sleepers_ = 0;
};

TEST_F(ShareForeignProcessCliTest, SkipGivesNoShareOfABusyGpuAndNamesItInAShortfall) {
  const auto job = sleeper();
  host({withProcesses({{job->pid(), 8192}}), withProcesses({})});
  share("all");
  const std::string busy =
      "GPU 0 is used by process " + job->pidText() + " (8192 MiB), which no record names";

  // Pack would take GPU 0 first (the lowest index of the fresh ones): it is busy.
  const auto first = sleeper();
  const CliRun one = discoverShare(first->pid());
  EXPECT_EQ(one.exitCode, 0) << one;
  EXPECT_EQ(one.out, "1\n") << one;
  EXPECT_TRUE(contains(one.err, "note: " + busy + "; not handed out")) << one;
  const auto second = sleeper();
  EXPECT_EQ(discoverShare(second->pid()).out, "1\n");

  const auto third = sleeper();
  const std::string before = readFile(file());
  const CliRun short_ = discoverShare(third->pid());
  EXPECT_EQ(short_.exitCode, 1) << short_;
  EXPECT_EQ(firstLine(short_.err), "not enough free GPU shares: 1 requested, 0 free") << short_;
  EXPECT_TRUE(contains(short_.err, "busy: " + busy)) << short_;
  EXPECT_TRUE(contains(short_.err, "GPU 1 has no free share: 2 of 2 shares held")) << short_;
  EXPECT_EQ(readFile(file()), before) << "nothing recorded";

  // Once the job ends and NVML lists it no more, GPU 0 gives a share again.
  job->stop();
  host({withProcesses({}), withProcesses({})});
  const CliRun freed = discoverShare(third->pid());
  EXPECT_EQ(freed.out, "0\n") << freed;
  EXPECT_FALSE(contains(freed.err, "no record names")) << freed;
}

TEST_F(ShareForeignProcessCliTest, WarnHandsTheShareOutWithAWarningAndIgnoreDoesNotLook) {
  const auto job = sleeper();
  host({withProcesses({{job->pid(), 8192}})});
  share("0");
  const auto first = sleeper();
  const CliRun warned = discoverShare(first->pid(), {"--foreign", "warn"});
  EXPECT_EQ(warned.exitCode, 0) << warned;
  EXPECT_EQ(warned.out, "0\n") << warned;
  EXPECT_TRUE(contains(warned.err, "warning: GPU 0 is used by process " + job->pidText() +
                                       " (8192 MiB), which no record names; handed out anyway "
                                       "(--foreign warn)"))
      << warned;
  const auto second = sleeper();
  const CliRun ignored = discoverShare(second->pid(), {"--foreign=ignore"});
  EXPECT_EQ(ignored.exitCode, 0) << ignored;
  EXPECT_EQ(ignored.out, "0\n") << ignored;
  EXPECT_FALSE(contains(ignored.err, "no record names")) << ignored;
}

TEST_F(ShareForeignProcessCliTest, AShareHoldersCommandIsExplainedOnItsGpuOnly) {
  host({withProcesses({}), withProcesses({})});
  share("all");
  // exec --share holds a share of GPU 0; its command (a descendant of exec, the share's owner)
  // writes its pid and becomes sleep.
  const fs::path started = dir_ / "holder.started";
  std::vector<std::string> args{"/usr/bin/env"};
  const std::vector<std::string> env = environment();
  args.insert(args.end(), env.begin(), env.end());
  args.insert(args.end(),
              {kCli, "exec", "--coordination-file", file(), "--share", "-n", "1", "--", "/bin/sh",
               "-c", "echo $$ > '" + started.string() + "'; exec " + sleepPath() + " 300"});
  Background holder(args, dir_ / "holder.log");
  const std::vector<std::string> lines = waitForLines(started, 1, 20s);
  ASSERT_EQ(lines.size(), 1u) << readFile(dir_ / "holder.log");
  const pid_t command = std::stoi(lines[0]);
  host({withProcesses({{command, 4000}}), withProcesses({{command, 1000}})});

  // Pack takes GPU 0's second share, where the holder's command is explained; on GPU 1, which
  // its owner does not hold, that command is no record's.
  const auto worker = sleeper();
  const CliRun packed = discoverShare(worker->pid());
  EXPECT_EQ(packed.exitCode, 0) << packed;
  EXPECT_EQ(packed.out, "0\n") << packed;
  EXPECT_FALSE(contains(packed.err, "GPU 0 is used by")) << packed;
  EXPECT_TRUE(contains(packed.err, "note: GPU 1 is used by process " + std::to_string(command) +
                                       " (1000 MiB), which no record names; not handed out"))
      << packed;

  const auto other = sleeper();
  const CliRun refused = discoverShare(other->pid());
  EXPECT_EQ(refused.exitCode, 1) << refused;
  EXPECT_EQ(firstLine(refused.err), "not enough free GPU shares: 1 requested, 0 free") << refused;
  EXPECT_TRUE(contains(refused.err, "GPU 0 has no free share: 2 of 2 shares held")) << refused;
  EXPECT_TRUE(contains(refused.err, "busy: GPU 1 is used by process " + std::to_string(command)))
      << refused;
}

TEST_F(ShareForeignProcessCliTest, TheMpsServerOfAGpuSharedWithMpsIsExplained) {
  // A program called nvidia-cuda-mps-server (comm is cut to 15 characters: argv[0] tells it).
  const fs::path server = dir_ / "nvidia-cuda-mps-server";
  fs::copy_file(sleepPath(), server);
  const auto mps = sleeper(server.string());
  host({withProcesses({{mps->pid(), 300}}), withProcesses({{mps->pid(), 300}})});
  fs::create_directory(dir_ / "mps");
  share("0", {"--mps", (dir_ / "mps").string()});
  share("1");  // time-sliced: there the same server is no record's

  const auto first = sleeper();
  const CliRun one = discoverShare(first->pid());
  EXPECT_EQ(one.exitCode, 0) << one;
  EXPECT_EQ(one.out, "0\n") << one;
  EXPECT_FALSE(contains(one.err, "GPU 0 is used by")) << one;
  const auto second = sleeper();
  EXPECT_EQ(discoverShare(second->pid()).out, "0\n");

  const auto third = sleeper();
  const CliRun refused = discoverShare(third->pid());
  EXPECT_EQ(refused.exitCode, 1) << refused;
  EXPECT_TRUE(contains(refused.err, "busy: GPU 1 is used by process " + mps->pidText() +
                                        " (300 MiB), which no record names"))
      << refused;
}

TEST_F(ShareForeignProcessCliTest, ExecShareSkipsABusyGpuAndRunsWithWarn) {
  const auto job = sleeper();
  host({withProcesses({{job->pid(), 8192}})});
  share("0");
  const fs::path marker = dir_ / "marker";
  const CliRun refused =
      cli({"exec", "--share", "-n", "1", "--", "/usr/bin/touch", marker.string()});
  EXPECT_EQ(refused.exitCode, 1) << refused;
  EXPECT_TRUE(contains(refused.err, "not enough free GPU shares: 1 requested, 0 free")) << refused;
  EXPECT_TRUE(contains(refused.err, "busy: GPU 0 is used by process " + job->pidText() +
                                        " (8192 MiB), which no record names"))
      << refused;
  EXPECT_FALSE(fs::exists(marker));

  const CliRun warned = cli(
      {"exec", "--share", "--foreign", "warn", "-n", "1", "--", "/usr/bin/touch", marker.string()});
  EXPECT_EQ(warned.exitCode, 0) << warned;
  EXPECT_TRUE(fs::exists(marker));
  EXPECT_TRUE(contains(warned.err, "warning: GPU 0 is used by process " + job->pidText()))
      << warned;
}

}  // namespace
}  // namespace share_foreign_process_cli_test
