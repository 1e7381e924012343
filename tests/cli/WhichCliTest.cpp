// Tests of `flink-gpu which` (issue 31, section 1): from a process to the nearest process up its
// parent chain that holds GPUs (an exec, a discovery program's owner, a share's holder), across
// shells and a setsid, never to another worker's; and `eval "$(flink-gpu which --format env)"`
// giving a child exactly those GPUs by UUID. Run on the stand-in libnvidia-ml.so.1, so that each
// GPU has a UUID, a PCI bus id and a name.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "CliRun.h"
#include "StandInHost.h"
#include "TestSupport.h"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using flink::testing::Background;
using flink::testing::BoundSocket;
using flink::testing::CliRun;
using flink::testing::contains;
using flink::testing::kCli;
using flink::testing::readFile;
using flink::testing::runCli;
using flink::testing::sleepPath;
using flink::testing::standInUuid;
using flink::testing::TempDir;
using flink::testing::waitForLines;
using nlohmann::json;

class WhichCliTest : public ::testing::Test {
 protected:
  void SetUp() override { flink::testing::writeStandInHost(hostFile(), 2); }

  fs::path hostFile() const { return dir_ / "host.json"; }
  std::string file() const { return (dir_ / "coordination").string(); }

  std::vector<std::string> environment() const {
    return {std::string("FLINK_GPU_NVML_LIBRARY=") + FAKE_NVML_FULL,
            "FAKE_NVML_DEVICES=" + hostFile().string(), "PATH=/usr/bin:/bin",
            "FLINK_GPU_COORDINATION_FILE=" + file()};
  }

  /// `flink-gpu which <args>` as a shell word list a command run under exec can use.
  std::string whichLine(const std::string& args) const {
    return std::string("'") + kCli + "' which " + args;
  }

  /// Runs `flink-gpu <args>` to completion with the stand-in host.
  CliRun cli(const std::vector<std::string>& args) const { return runCli(args, environment()); }

  /// `/usr/bin/env <environment> <argv>`: a program started in the background with the stand-in.
  std::vector<std::string> withEnvironment(const std::vector<std::string>& argv) const {
    std::vector<std::string> args{"/usr/bin/env"};
    const std::vector<std::string> env = environment();
    args.insert(args.end(), env.begin(), env.end());
    args.insert(args.end(), argv.begin(), argv.end());
    return args;
  }

  /// The JSON `which` wrote into `name`, once it is there.
  json answer(const std::string& name, const std::string& log) const {
    const std::vector<std::string> lines = waitForLines(dir_ / name, 1, 20s);
    EXPECT_EQ(lines.size(), 1u) << readFile(dir_ / log);
    return lines.empty() ? json() : json::parse(lines.front());
  }

  /// `flink-gpu exec <options> -- /bin/sh -c <script>` in the background, its log in <name>.log.
  std::unique_ptr<Background> exec(const std::string& name, const std::vector<std::string>& options,
                                   const std::string& script) const {
    std::vector<std::string> argv{kCli, "exec"};
    argv.insert(argv.end(), options.begin(), options.end());
    argv.insert(argv.end(), {"--", "/bin/sh", "-c", script});
    return std::make_unique<Background>(withEnvironment(argv), dir_ / (name + ".log"));
  }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  /// A TaskManager in the background (a shell, its log in tm.log): the discovery program records
  /// one GPU for it (written to `granted`), then `between` runs (a shell command, if any), then a
  /// child of it writes `which --format json` to `answer`, and it sleeps.
  std::unique_ptr<Background> taskManagerAsking(const std::string& between = "") const {
    const std::string worker = "'" + std::string(FLINK_GPU_DISCOVERY) +
                               "' 1 --enable-coordination-mode --owner-pid $$ > '" +
                               path("granted") + "'" + (between.empty() ? "" : " && " + between) +
                               " && /bin/sh -c \"" + whichLine("--format json") + " > '" +
                               path("answer.tmp") + "'; mv '" + path("answer.tmp") + "' '" +
                               path("answer") + "'\"; exec " + sleepPath() + " 60";
    return std::make_unique<Background>(withEnvironment({"/bin/sh", "-c", worker}),
                                        dir_ / "tm.log");
  }

  TempDir dir_{"which"};
};

TEST_F(WhichCliTest, AGrandchildOfAnExecCommandGetsExecAndItsGpu) {
  // exec → sh → sh → flink-gpu which: two shells between the owner and the asker.
  const auto holder =
      exec("exec", {"-n", "1"},
           "/bin/sh -c \"" + whichLine("--format json") + " > '" + path("answer.tmp") + "'; mv '" +
               path("answer.tmp") + "' '" + path("answer") + "'\"; exec " + sleepPath() + " 60");
  const json got = answer("answer", "exec.log");
  EXPECT_EQ(got["format"], 1);
  EXPECT_EQ(got["owner_pid"], holder->pid()) << got;
  ASSERT_EQ(got["gpus"].size(), 1u) << got;
  const json& gpu = got["gpus"][0];
  EXPECT_EQ(gpu["gpu"], "0") << got;
  EXPECT_EQ(gpu["uuid"], standInUuid(0)) << got;
  // The stand-in host gives no PCI bus id: unknown, never made up.
  EXPECT_TRUE(gpu.contains("pci.bus_id") && gpu["pci.bus_id"].is_null()) << got;
  EXPECT_EQ(gpu["name"], "NVIDIA H200") << got;
  EXPECT_FALSE(gpu.contains("share")) << got;

  // From outside, by pid: the same owner and GPU, as text.
  const CliRun byPid = cli({"which", "--pid", holder->pidText()});
  ASSERT_EQ(byPid.exitCode, 0) << byPid;
  EXPECT_EQ(byPid.out.substr(0, byPid.out.find('\n')),
            "owner: process " + holder->pidText() + " (flink-gpu)")
      << byPid;
  EXPECT_NE(byPid.out.find("GPU 0: " + standInUuid(0) + ", "), std::string::npos) << byPid;
}

TEST_F(WhichCliTest, ASetsidDoesNotCutTheChain) {
  // A process that starts a session of its own (a daemon, a sidecar) stays its parent's child.
  const auto holder = exec("exec", {"-n", "2"},
                           "setsid /bin/sh -c \"" + whichLine("--format json") + " > '" +
                               path("answer.tmp") + "'; mv '" + path("answer.tmp") + "' '" +
                               path("answer") + "'\"; exec " + sleepPath() + " 60");
  const json got = answer("answer", "exec.log");
  EXPECT_EQ(got["owner_pid"], holder->pid()) << got;
  ASSERT_EQ(got["gpus"].size(), 2u) << got;
  EXPECT_EQ(got["gpus"][0]["gpu"], "0");
  EXPECT_EQ(got["gpus"][1]["gpu"], "1");
}

TEST_F(WhichCliTest, TheOwnerOfADiscoveryProgramsRecordsIsFoundFromItsChild) {
  // A TaskManager's way: the discovery program records the GPU for the worker (--owner-pid), and
  // a Python worker the TaskManager starts asks.
  const auto taskManager = taskManagerAsking();
  const json got = answer("answer", "tm.log");
  EXPECT_EQ(got["owner_pid"], taskManager->pid()) << got << readFile(dir_ / "tm.log");
  ASSERT_EQ(got["gpus"].size(), 1u) << got;
  EXPECT_EQ(got["gpus"][0]["gpu"], readFile(dir_ / "granted").substr(0, 1));
}

TEST_F(WhichCliTest, ARecordWrittenTwiceIsOneGpu) {
  // The worker's record copied below itself (as a writer that appended it again leaves it): its
  // GPU once, in the list and in CUDA_VISIBLE_DEVICES.
  const auto taskManager = taskManagerAsking("cp '" + file() + "' '" + path("copy") + "' && cat '" +
                                             path("copy") + "' >> '" + file() + "'");
  const json got = answer("answer", "tm.log");
  EXPECT_EQ(got["owner_pid"], taskManager->pid()) << got << readFile(dir_ / "tm.log");
  ASSERT_EQ(got["gpus"].size(), 1u) << got;
  EXPECT_EQ(got["gpus"][0]["gpu"], readFile(dir_ / "granted").substr(0, 1));
  const CliRun env = cli({"which", "--pid", taskManager->pidText(), "--format", "env"});
  ASSERT_EQ(env.exitCode, 0) << env;
  EXPECT_TRUE(contains(
      env.out, "CUDA_VISIBLE_DEVICES=" + standInUuid(std::stoi(readFile(dir_ / "granted"))) + "\n"))
      << env;
}

TEST_F(WhichCliTest, AShareHolderSeesItsShareAndItsEnvironment) {
  const fs::path mps = dir_ / "mps";
  fs::create_directories(mps);
  ASSERT_EQ(cli({"share", "--gpu", "0", "--replicas", "4", "--mps", mps.string()}).exitCode, 0);
  BoundSocket daemon(mps / "control");
  const auto holder =
      exec("exec", {"--share", "-n", "1"},
           whichLine("--format json") + " > '" + path("answer.tmp") + "'; " +
               whichLine("--format env") + " > '" + path("env") + "'; mv '" + path("answer.tmp") +
               "' '" + path("answer") + "'; exec " + sleepPath() + " 60");
  const std::vector<std::string> started = waitForLines(dir_ / "answer", 1, 20s);
  ASSERT_EQ(started.size(), 1u) << readFile(dir_ / "exec.log");
  const json got = json::parse(started.front());
  ASSERT_EQ(got["gpus"].size(), 1u) << got;
  const json& share = got["gpus"][0]["share"];
  EXPECT_EQ(share["index"], 0) << got;
  EXPECT_EQ(share["count"], 4) << got;
  EXPECT_EQ(share["memory_mib"], 143771 / 4) << got;
  EXPECT_EQ(share["mps_pipe_directory"], mps.string()) << got;
  EXPECT_EQ(got["owner_pid"], holder->pid()) << got;
  const std::string env = readFile(dir_ / "env");
  EXPECT_NE(env.find("export CUDA_VISIBLE_DEVICES=" + standInUuid(0) + "\n"), std::string::npos)
      << env;
  EXPECT_NE(env.find("export FLINK_GPU_SHARE_MEMORY_MIB=35942\n"), std::string::npos) << env;
  EXPECT_NE(env.find("export CUDA_MPS_PIPE_DIRECTORY=" + mps.string() + "\n"), std::string::npos)
      << env;
  EXPECT_NE(env.find("export CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25\n"), std::string::npos) << env;
}

TEST_F(WhichCliTest, ATimeSlicedShareHolderSeesItsShare) {
  ASSERT_EQ(cli({"share", "--gpu", "1", "--replicas", "2"}).exitCode, 0);
  const auto holder =
      exec("exec", {"--share", "-n", "1"},
           whichLine("--format json") + " > '" + path("answer.tmp") + "'; mv '" +
               path("answer.tmp") + "' '" + path("answer") + "'; exec " + sleepPath() + " 60");
  const json got = answer("answer", "exec.log");
  EXPECT_EQ(got["owner_pid"], holder->pid()) << got;
  ASSERT_EQ(got["gpus"].size(), 1u) << got;
  EXPECT_EQ(got["gpus"][0]["gpu"], "1") << got;
  const json& share = got["gpus"][0]["share"];
  EXPECT_EQ(share["count"], 2) << got;
  EXPECT_EQ(share["memory_mib"], 143771 / 2) << got;
  EXPECT_TRUE(share["mps_pipe_directory"].is_null()) << got;
}

TEST_F(WhichCliTest, EvalOfTheEnvFormatGivesAChildTheSameDevicesByUuid) {
  // exec names GPU 1 by index; a child that inherits another mask (or none) gets it by UUID.
  const auto other = exec("first", {"-n", "1"}, "exec " + sleepPath() + " 60");
  ASSERT_EQ(waitForLines(file(), 1, 20s).size(), 1u) << readFile(dir_ / "first.log");
  const std::string script = "echo \"$CUDA_VISIBLE_DEVICES\" > '" + path("exec-mask") +
                             "'; CUDA_VISIBLE_DEVICES=0; eval \"$(" + whichLine("--format env") +
                             ")\" && /bin/sh -c 'echo \"$CUDA_VISIBLE_DEVICES\"' > '" +
                             path("child.tmp") + "'; mv '" + path("child.tmp") + "' '" +
                             path("child") + "'; exec " + sleepPath() + " 60";
  const auto holder = exec("second", {"-n", "1"}, script);
  const std::vector<std::string> child = waitForLines(dir_ / "child", 1, 20s);
  ASSERT_EQ(child.size(), 1u) << readFile(dir_ / "second.log");
  EXPECT_EQ(readFile(dir_ / "exec-mask"), "1\n");
  EXPECT_EQ(child.front(), standInUuid(1));
}

TEST_F(WhichCliTest, AProcessNoOwnerStartedGetsNothingAndExitsOne) {
  // Another worker holds a GPU; this process did not descend from it.
  const auto holder = exec("exec", {"-n", "1"}, "exec " + sleepPath() + " 60");
  ASSERT_EQ(waitForLines(file(), 1, 20s).size(), 1u) << readFile(dir_ / "exec.log");
  const CliRun run = cli({"which"});
  EXPECT_EQ(run.exitCode, 1) << run;
  EXPECT_EQ(run.out, "") << run;
  EXPECT_NE(run.err.find("this process holds no GPU, nor does any process it descends from"),
            std::string::npos)
      << run;
  const CliRun asJson = cli({"which", "--format", "json"});
  EXPECT_EQ(asJson.exitCode, 1) << asJson;
  EXPECT_EQ(asJson.out, "") << asJson;
}

TEST_F(WhichCliTest, APidThatIsNoProcessIsAnError) {
  for (const std::string pid : {"0", "-1", "+5", " 5", "", "0x10"}) {
    const CliRun refused = cli({"which", "--pid", pid});
    EXPECT_EQ(refused.exitCode, 2) << pid << refused;
    EXPECT_EQ(refused.err, "flink-gpu: error: invalid --pid '" + pid +
                               "': expected a process id\nRun 'flink-gpu which --help' for its "
                               "options.\n")
        << refused;
  }
  // Decimal, whatever its leading zeros: 010 is pid 10, never octal 8.
  const CliRun leadingZero = cli({"which", "--pid", "0" + std::to_string(::getpid())});
  EXPECT_EQ(leadingZero.exitCode, 1) << leadingZero;
  EXPECT_NE(leadingZero.err.find("process " + std::to_string(::getpid()) + " "), std::string::npos)
      << leadingZero;
  const CliRun word = cli({"which", "--pid", "me"});
  EXPECT_EQ(word.exitCode, 2) << word;
  const CliRun format = cli({"which", "--format", "prometheus"});
  EXPECT_EQ(format.exitCode, 2) << format;
}

}  // namespace

namespace {

TEST_F(WhichCliTest, ALeaseIsItsHoldersNotItsGoneTakers) {
  // exec's command leaves a daemon behind that inherited exec's leases, and exec ends: the record
  // stays (its lease is held), naming exec's pid, which any later process may get. The GPU is the
  // daemon's, the process that has the lease open now, never whoever has exec's old pid.
  const fs::path daemonPid = dir_ / "daemon.pid";
  const CliRun started =
      runCli({"exec", "-n", "1", "--", "/bin/sh", "-c",
              // The daemon writes its own pid once it has left exec's process group (which the
              // test's runner kills when exec ends); the command waits for that.
              "setsid /bin/sh -c 'echo $$ > \"" + daemonPid.string() + "\"; exec " + sleepPath() +
                  " 60' </dev/null >/dev/null 2>&1 & while [ ! -s '" + daemonPid.string() +
                  "' ]; do " + sleepPath() + " 0.01; done"},
             environment());
  ASSERT_EQ(started.exitCode, 0) << started;
  const std::vector<std::string> pid = waitForLines(daemonPid, 1, 10s);
  ASSERT_EQ(pid.size(), 1u);
  const CliRun daemon = cli({"which", "--pid", pid.front(), "--format", "json"});
  ::kill(std::stoi(pid.front()), SIGKILL);
  ASSERT_EQ(daemon.exitCode, 0) << daemon;
  const json got = json::parse(daemon.out);
  EXPECT_EQ(got["owner_pid"], std::stoi(pid.front())) << got;
  ASSERT_EQ(got["gpus"].size(), 1u) << got;
  EXPECT_EQ(got["gpus"][0]["uuid"], standInUuid(0)) << got;
}

TEST_F(WhichCliTest, ANestedExecGetsItsTreesGpuEvenWhenOnlyALeaseHoldsIt) {
  // An operator's `release --force` took exec's record; its lease still holds GPU 0 for the tree.
  const std::string script = "'" + std::string(kCli) +
                             "' release --owner $PPID --force >/dev/null; '" + kCli +
                             "' exec -n 1 -- /bin/sh -c 'echo $CUDA_VISIBLE_DEVICES'";
  const CliRun run = runCli({"exec", "-n", "1", "--", "/bin/sh", "-c", script}, environment());
  EXPECT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, "0\n") << run;
}

TEST_F(WhichCliTest, ANestedExecThatCannotHandOutItsTreesGpusTakesNoOthers) {
  const std::string script =
      "'" + std::string(kCli) + "' exec -n 1 --gpus 1 -- /bin/sh -c 'echo $CUDA_VISIBLE_DEVICES'";
  const CliRun run =
      runCli({"exec", "-n", "1", "--gpus", "0", "--", "/bin/sh", "-c", script}, environment());
  EXPECT_EQ(run.exitCode, 1) << run;
  EXPECT_EQ(run.out, "") << run;
  EXPECT_NE(run.err.find("this process already holds GPU(s) 0 from process "), std::string::npos)
      << run;
  EXPECT_NE(run.err.find("one allocation per process tree; this exec cannot hand those out "
                         "(--gpus 1, a mask, or their health)"),
            std::string::npos)
      << run;
}

}  // namespace

namespace {

TEST_F(WhichCliTest, ANestedExecInAContainerGetsItsTreesGpuByTheLeasesItHoldsItself) {
  // exec's command starts a container (a pid namespace and /proc of its own): the records' pid
  // and /proc/locks' taker are of the host, invisible there, but the container holds exec's
  // leases through the descriptors it inherited.
  if (const std::optional<std::string> why = flink::testing::whyNoPidNamespace()) {
    GTEST_SKIP() << *why;
  }
  std::string container;
  for (const std::string& word : flink::testing::inPidNamespace()) container += "'" + word + "' ";
  const std::string inner = "env -u CUDA_VISIBLE_DEVICES '" + std::string(kCli) +
                            "' exec -n 1 -- /bin/sh -c 'echo $CUDA_VISIBLE_DEVICES'";
  const CliRun run =
      runCli({"exec", "-n", "1", "--", "/bin/sh", "-c", container + "/bin/sh -c \"" + inner + "\""},
             environment());
  EXPECT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, "0\n") << run;
}

}  // namespace
