// GPUs in use by a process no record explains (host/usage/GpuUse.h), from the outside: the
// default discovery program, `exec`, `status` and `check` on the stand-in libnvidia-ml.so.1,
// whose host lists real processes of this test (sleep children) by their pids, as NVML lists the
// host's pids.
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "CliRun.h"
#include "StandInHost.h"
#include "TestSupport.h"
#include "process/Subprocess.h"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using flink::testing::Background;
using flink::testing::CliRun;
using flink::testing::kH200Members;
using flink::testing::readFile;
using flink::testing::runCli;
using flink::testing::sleepPath;
using flink::testing::TempDir;
using flink::testing::writeScript;

using flink::testing::contains;

std::size_t occurrences(std::string_view text, std::string_view part) {
  std::size_t count = 0;
  for (std::size_t at = text.find(part); at != std::string_view::npos;
       at = text.find(part, at + 1)) {
    ++count;
  }
  return count;
}

/// A GPU's members with NVML's process list `processes` ("pid:MiB" each) and its memory in use.
std::string withProcesses(const std::vector<std::pair<pid_t, unsigned>>& processes,
                          unsigned memoryUsedMiB = 0) {
  std::string list;
  for (const auto& [pid, mib] : processes) {
    if (!list.empty()) list += ", ";
    list += R"({"pid": )" + std::to_string(pid) + R"(, "used_mib": )" + std::to_string(mib) +
            R"(, "list": "compute"})";
  }
  return std::string(kH200Members) + R"(, "processes": [)" + list + R"(], "memory_used_mib": )" +
         std::to_string(memoryUsedMiB);
}

class ForeignProcessCliTest : public ::testing::Test {
 protected:
  /// A host of two H200s, GPU i with `members[i]`.
  void host(const std::vector<std::string>& members) {
    flink::testing::writeStandInHost(dir_ / "host.json", 2, members);
  }

  std::vector<std::string> environment() const {
    return {std::string("FLINK_GPU_NVML_LIBRARY=") + FAKE_NVML_FULL,
            "FAKE_NVML_DEVICES=" + (dir_ / "host.json").string(), "PATH=/usr/bin:/bin"};
  }

  std::string coordinationFile() const { return (dir_ / "coordination").string(); }

  /// The discovery program, through `prefix` (unshare) when given.
  CliRun discover(unsigned amount, const std::vector<std::string>& extra = {},
                  const std::vector<std::string>& prefix = {}) const {
    std::vector<std::string> argv = prefix;
    argv.push_back("/usr/bin/env");
    for (const std::string& variable : environment()) argv.push_back(variable);
    argv.insert(argv.end(), {FLINK_GPU_DISCOVERY, std::to_string(amount), "--placement", "index"});
    argv.insert(argv.end(), extra.begin(), extra.end());
    return flink::testing::runProgram(argv);
  }

  CliRun coordinated(unsigned amount, const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> args{"--enable-coordination-mode", "--coordination-file",
                                  coordinationFile()};
    args.insert(args.end(), extra.begin(), extra.end());
    return discover(amount, args);
  }

  CliRun cli(std::vector<std::string> args) const {
    args.insert(args.begin() + 1, {"--coordination-file", coordinationFile()});
    return runCli(args, environment());
  }

  /// A process that no record names: a sleep of this test.
  std::unique_ptr<Background> stranger(const std::string& program = sleepPath()) {
    return std::make_unique<Background>(std::vector<std::string>{program, "60"},
                                        dir_ / ("stranger-" + std::to_string(strangers_++)));
  }

  TempDir dir_{"flink-gpu-foreign-cli-test"};
  int strangers_ = 0;
};

TEST_F(ForeignProcessCliTest, CoordinationModeSkipsABusyGpuAndCountsItInAShortfall) {
  const auto job = stranger();
  host({withProcesses({{job->pid(), 8192}})});
  const CliRun one = coordinated(1);
  EXPECT_EQ(one.exitCode, 0) << one;
  EXPECT_EQ(one.out, "1\n") << one;
  EXPECT_TRUE(contains(one.err, "note: GPU 0 is used by process " + job->pidText() +
                                    " (8192 MiB), which no record names; not handed out"))
      << one;

  const CliRun two = coordinated(1);
  EXPECT_EQ(two.exitCode, 1) << two;
  EXPECT_EQ(flink::testing::firstLine(two.err),
            "not enough free GPUs: 1 requested, 0 free, 1 held, 1 busy: GPU 0 is used by process " +
                job->pidText() + " (8192 MiB), which no record names")
      << two;
}

TEST_F(ForeignProcessCliTest, AProcessOnAMigInstanceMakesItsGpuBusyForAWorkerThatIsNotRoot) {
  // NVML lists a MIG-mode GPU's processes (its instances') to root only; each instance lists its
  // own to anyone. A worker that is not root must still see GPU 0 as busy.
  const auto job = stranger();
  std::ofstream(dir_ / "host.json")
      << R"({"privileged": false, "devices": [{"uuid": ")" << flink::testing::standInUuid(0)
      << R"(", "name": "NVIDIA H200", "pci_bus_id": "00000000:19:00.0",
             "memory_total_mib": 143771, "mig_enabled": true, "mig": [
             {"uuid": "MIG-10000000-0000-4000-8000-0000000000a0", "name": "NVIDIA H200 MIG 3g.71gb",
              "memory_total_mib": 71000, "gpu_instance_id": 1, "compute_instance_id": 0,
              "processes": [{"pid": )"
      << job->pid() << R"(, "used_mib": 500}]}]},
             {"uuid": ")"
      << flink::testing::standInUuid(1) << R"(", "name": "NVIDIA H200",
              "pci_bus_id": "00000000:3B:00.0", "memory_total_mib": 143771,
              "mig_enabled": false}]})";
  const CliRun two = coordinated(2);
  EXPECT_EQ(two.exitCode, 1) << two;
  EXPECT_EQ(flink::testing::firstLine(two.err),
            "not enough free GPUs: 2 requested, 1 free, 0 held, 1 busy: GPU 0 is used by process " +
                job->pidText() + " (500 MiB), which no record names")
      << two;
  const CliRun metrics = cli({"status", "--format", "prometheus"});
  EXPECT_TRUE(contains(metrics.out, "flink_gpu_foreign_processes{gpu=\"0\",uuid=\"" +
                                        flink::testing::standInUuid(0) + "\"} 1\n"))
      << metrics.out;
}

TEST_F(ForeignProcessCliTest, AGpuWhoseProcessesNvmlDoesNotTellIsNeitherBusyNorKnownFree) {
  host({std::string(kH200Members) + R"(, "processes": {"error": 999})", ""});
  const CliRun one = coordinated(1);
  EXPECT_EQ(one.exitCode, 0) << one;
  EXPECT_EQ(one.out, "0\n") << one;
  const CliRun metrics = cli({"status", "--format", "prometheus"});
  EXPECT_TRUE(contains(metrics.out, "flink_gpu_foreign_processes{gpu=\"0\",uuid=\"" +
                                        flink::testing::standInUuid(0) + "\"} NaN\n"))
      << metrics.out;
  EXPECT_TRUE(contains(metrics.out, "flink_gpu_foreign_processes{gpu=\"1\",uuid=\"" +
                                        flink::testing::standInUuid(1) + "\"} 0\n"))
      << metrics.out;
  const auto report = nlohmann::json::parse(cli({"status", "--format", "json"}).out);
  EXPECT_TRUE(report.at("gpus")[0].at("foreign_processes").is_null()) << report.at("gpus")[0];
  EXPECT_TRUE(report.at("gpus")[1].at("foreign_processes").is_array()) << report.at("gpus")[1];
}

TEST_F(ForeignProcessCliTest, WarnHandsItOutAndIgnoreDoesNotLook) {
  const auto job = stranger();
  host({withProcesses({{job->pid(), 8192}})});
  const CliRun warned = coordinated(1, {"--foreign", "warn"});
  EXPECT_EQ(warned.out, "0\n") << warned;
  EXPECT_TRUE(contains(warned.err, "warning: GPU 0 is used by process " + job->pidText() +
                                       " (8192 MiB), which no record names; handed out anyway "
                                       "(--foreign warn)"))
      << warned;
  const CliRun ignored = coordinated(1, {"--foreign=ignore"});
  EXPECT_EQ(ignored.out, "1\n") << ignored;
  EXPECT_EQ(ignored.err, "") << ignored;
  const CliRun bad = coordinated(1, {"--foreign", "maybe"});
  EXPECT_EQ(bad.exitCode, 1) << bad;
  EXPECT_EQ(flink::testing::firstLine(bad.err), "--foreign needs skip, warn or ignore, not 'maybe'")
      << bad;
  const CliRun misspelt = coordinated(1, {"--foriegn", "warn"});
  EXPECT_EQ(misspelt.exitCode, 1) << misspelt;
  EXPECT_TRUE(contains(misspelt.err, "did you mean '--foreign'?")) << misspelt;
}

TEST_F(ForeignProcessCliTest, PlainModeOnlyWarns) {
  const auto job = stranger();
  host({withProcesses({{job->pid(), 8192}})});
  const CliRun run = discover(1);
  EXPECT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, "0\n") << run;
  EXPECT_TRUE(contains(run.err, "warning: GPU 0 is used by process " + job->pidText() +
                                    " (8192 MiB), which no record names; handed out anyway"))
      << run;
}

TEST_F(ForeignProcessCliTest, AnOwnersDescendantIsExplainedOnItsGpuOnly) {
  host({});
  // The owner starts a child, as a worker starts its tasks.
  const fs::path childPid = dir_ / "child.pid";
  Background owner(
      {"/bin/sh", "-c", "\"$0\" 60 & echo $! > \"$1\"; wait", sleepPath(), childPid.string()},
      dir_ / "owner.log");
  // Written, and the child has become sleep (its name, from /proc, is what status reports).
  const auto written = [&] {
    const std::string pid = readFile(childPid);  // empty while it does not exist
    return pid.ends_with('\n') &&
           readFile("/proc/" + pid.substr(0, pid.size() - 1) + "/comm") == "sleep\n";
  };
  for (int i = 0; i < 4000 && !written(); ++i) std::this_thread::sleep_for(5ms);
  ASSERT_TRUE(written());
  const pid_t child = std::stoi(readFile(childPid));
  ASSERT_EQ(coordinated(1, {"--owner-pid", owner.pidText()}).out, "0\n");

  host({withProcesses({{child, 1000}, {owner.pid(), 10}}), withProcesses({{child, 1000}})});
  const CliRun status = cli({"status", "--format", "json"});
  ASSERT_EQ(status.exitCode, 0) << status;
  const nlohmann::json report = nlohmann::json::parse(status.out);
  EXPECT_EQ(report["gpus"][0]["state"], "held") << status.out;
  EXPECT_TRUE(report["gpus"][0]["foreign_processes"].empty()) << status.out;
  // On GPU 1, which its owner does not hold, the child is no record's.
  EXPECT_EQ(report["gpus"][1]["state"], "busy") << status.out;
  ASSERT_EQ(report["gpus"][1]["foreign_processes"].size(), 1u) << status.out;
  EXPECT_EQ(report["gpus"][1]["foreign_processes"][0]["pid"], child);
  EXPECT_EQ(report["gpus"][1]["foreign_processes"][0]["name"], "sleep");
  EXPECT_EQ(report["gpus"][1]["foreign_processes"][0]["used_mib"], 1000);

  const CliRun more = coordinated(1);
  EXPECT_EQ(more.exitCode, 1) << more;
  EXPECT_TRUE(
      contains(more.err, "1 held, 1 busy: GPU 1 is used by process " + std::to_string(child)))
      << more;
}

TEST_F(ForeignProcessCliTest, TheMpsServerOfAGpuSharedWithMpsIsExplained) {
  // A program called nvidia-cuda-mps-server (comm is cut to 15 characters: argv[0] tells it).
  const fs::path server = dir_ / "nvidia-cuda-mps-server";
  fs::copy_file(sleepPath(), server);
  const auto mps = stranger(server.string());
  host({withProcesses({{mps->pid(), 300}}), withProcesses({{mps->pid(), 300}})});
  ASSERT_EQ(cli({"share", "--gpu", "0", "--replicas", "2", "--mps", "/run/nvidia-mps"}).exitCode,
            0);
  const CliRun run = coordinated(1);
  EXPECT_EQ(run.out, "0\n") << run;
  // GPU 1 is not declared shared: there the same server is no record's.
  const CliRun second = coordinated(1);
  EXPECT_EQ(second.exitCode, 1) << second;
  EXPECT_TRUE(contains(second.err, "GPU 1 is used by process " + mps->pidText())) << second;
}

TEST_F(ForeignProcessCliTest, MemoryWithoutAProcessIsANoteOnly) {
  host({withProcesses({}, 4096)});
  const CliRun run = coordinated(1);
  EXPECT_EQ(run.out, "0\n") << run;
  EXPECT_TRUE(contains(run.err,
                       "note: GPU 0 has 4096 MiB of memory in use, but NVML lists no "
                       "process on it"))
      << run;
}

TEST_F(ForeignProcessCliTest, ExecSkipsABusyGpu) {
  const auto job = stranger();
  host({withProcesses({{job->pid(), 8192}}), withProcesses({{job->pid(), 8192}})});
  const CliRun run = cli({"exec", "-n", "1", "--", "/bin/true"});
  EXPECT_EQ(run.exitCode, 1) << run;
  EXPECT_TRUE(
      contains(run.err, "0 free, 0 held, 2 busy: GPU 0 is used by process " + job->pidText()))
      << run;
  const CliRun warned = cli({"exec", "-n", "1", "--foreign", "warn", "--", "/bin/true"});
  EXPECT_EQ(warned.exitCode, 0) << warned;
}

TEST_F(ForeignProcessCliTest, StatusAndMetricsShowABusyGpu) {
  const auto job = stranger();
  host({withProcesses({{job->pid(), 8192}})});
  const CliRun table = cli({"status"});
  EXPECT_EQ(table.exitCode, 0) << table;
  EXPECT_TRUE(contains(table.out, "busy   used by process " + job->pidText() +
                                      " (sleep, 8192 MiB), which no record names"))
      << table;
  const CliRun busyOnly = cli({"status", "--state", "busy", "--format", "json"});
  EXPECT_EQ(nlohmann::json::parse(busyOnly.out)["gpus"].size(), 1u) << busyOnly;

  const CliRun metrics = cli({"status", "--format", "prometheus"});
  EXPECT_TRUE(contains(metrics.out, "flink_gpu_foreign_processes{gpu=\"0\",uuid=\"" +
                                        flink::testing::standInUuid(0) + "\"} 1\n"))
      << metrics.out;
  EXPECT_TRUE(contains(metrics.out, "flink_gpu_foreign_processes{gpu=\"1\",uuid=\"" +
                                        flink::testing::standInUuid(1) + "\"} 0\n"))
      << metrics.out;
  ASSERT_TRUE(fs::exists(PROMTOOL)) << "promtool is missing: run scripts/install-deps.sh";
  std::ofstream(dir_ / "metrics.prom") << metrics.out;
  const fs::path script =
      writeScript(dir_ / "promtool.sh", "#!/bin/sh\nexec \"$1\" check metrics < \"$2\"\n");
  const flink::process::ProcessResult checked =
      flink::process::run({script.string(), PROMTOOL, (dir_ / "metrics.prom").string()}, {});
  EXPECT_EQ(checked.outcome.value(), 0) << checked.stdoutOutput.data << checked.stderrOutput.data;

  const CliRun check = cli({"check"});
  EXPECT_EQ(check.exitCode, 0) << check;
  EXPECT_TRUE(contains(check.out, "note: GPU 0 is used by process " + job->pidText() +
                                      " (sleep, 8192 MiB), which no record names"))
      << check;
}

TEST_F(ForeignProcessCliTest, CheckNamesOtherGpuAllocators) {
  host({});
  const fs::path root = dir_ / "root";
  fs::create_directories(root / "var/lib/kubelet/device-plugins");
  fs::create_directories(root / "var/lib/kubelet/plugins/gpu.nvidia.com");
  fs::create_directories(root / "etc/slurm");
  std::ofstream(root / "var/lib/kubelet/device-plugins/nvidia-gpu.sock") << "";
  std::ofstream(root / "var/lib/kubelet/device-plugins/kubelet.sock") << "";
  std::ofstream(root / "etc/slurm/gres.conf") << "# GPUs\nName=gpu File=/dev/nvidia[0-1]\n";
  const fs::path slurmd = dir_ / "slurmd";
  fs::copy_file(sleepPath(), slurmd);
  const auto daemon = stranger(slurmd.string());
  std::vector<std::string> env = environment();
  env.push_back("FLINK_GPU_HOST_ROOT=" + root.string());
  const CliRun check = runCli({"check", "--coordination-file", coordinationFile()}, env);
  EXPECT_EQ(check.exitCode, 0) << check;
  EXPECT_TRUE(contains(check.out,
                       "note: another GPU allocator runs on this host: a Kubernetes device plugin "
                       "for NVIDIA GPUs (its kubelet socket "
                       "/var/lib/kubelet/device-plugins/nvidia-gpu.sock)"))
      << check;
  EXPECT_FALSE(contains(check.out, "kubelet.sock")) << check;
  EXPECT_TRUE(contains(check.out, "NVIDIA's Kubernetes DRA driver")) << check;
  EXPECT_TRUE(contains(check.out, "Slurm's slurmd (process ")) << check;
  EXPECT_TRUE(contains(check.out, "with a gpu gres in /etc/slurm/gres.conf")) << check;

  // An empty root: nothing.
  fs::create_directories(dir_ / "empty");
  env.back() = "FLINK_GPU_HOST_ROOT=" + (dir_ / "empty").string();
  EXPECT_FALSE(contains(runCli({"check", "--coordination-file", coordinationFile()}, env).out,
                        "another GPU allocator"));
}

TEST_F(ForeignProcessCliTest, InAPidNamespaceOfItsOwnItSaysSoOnceAndRefusesNothing) {
  if (const std::optional<std::string> why = flink::testing::whyNoPidNamespace()) {
    GTEST_SKIP() << *why;
  }
  const std::vector<std::string> unshare = flink::testing::inPidNamespace();
  const auto job = stranger();
  host({withProcesses({{job->pid(), 8192}}), withProcesses({{job->pid(), 8192}})});
  // A shell (pid 1 there) runs the discovery and stays, the owner of what it records.
  std::vector<std::string> container = unshare;
  container.insert(container.end(), {"/bin/sh", "-c", "\"$@\"; exit $?", "sh"});
  const CliRun run = discover(
      2, {"--enable-coordination-mode", "--coordination-file", coordinationFile()}, container);
  EXPECT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, "0,1\n") << run;
  EXPECT_EQ(occurrences(run.err, "does not see the host's process ids"), 1u) << run;
  EXPECT_TRUE(contains(run.err,
                       "note: NVML lists processes on GPU(s) 0,1, but this process does "
                       "not see the host's process ids"))
      << run;
}

}  // namespace
