// After a driver upgrade without a reboot: the stand-in libnvidia-ml.so.1 fails nvmlInit with
// NVML_ERROR_LIB_RM_VERSION_MISMATCH (hosts/upgraded.json), the stand-in nvidia-smi
// (tests/fixtures/gpu-check/nvidia-smi) fails as the real one does, and the kernel's list is the
// fixture tree tests/fixtures/nvidia-proc/islands-8 (GPU 00000000:3B:00.0 excluded), through
// FLINK_GPU_PROC_ROOT. The real flink-gpu and the default discovery program run against them.
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "CliRun.h"
#include "TestSupport.h"
#include "process/Subprocess.h"

namespace {

namespace fs = std::filesystem;
using flink::testing::CliRun;
using flink::testing::firstLine;
using flink::testing::linesOf;
using flink::testing::readFile;
using flink::testing::runCli;
using flink::testing::TempDir;
using flink::testing::writeScript;

const fs::path kSource = FLINK_GPU_SOURCE_DIR;
const fs::path kKernelTree = kSource / "tests/fixtures/nvidia-proc/islands-8";
constexpr const char* kRemedy =
    "reboot, or once nothing uses the GPUs reload the kernel module: rmmod nvidia_uvm nvidia_drm "
    "nvidia_modeset nvidia && modprobe nvidia";

using flink::testing::contains;

class KernelListCliTest : public ::testing::Test {
 protected:
  /// The stand-ins, playing `host` (a JSON of tests/fixtures/nvml/hosts/).
  std::vector<std::string> environment(const std::string& host = "upgraded") const {
    return {
        "FLINK_GPU_NVML_LIBRARY=" + std::string(FAKE_NVML_FULL),
        "FAKE_NVML_DEVICES=" + (kSource / "tests/fixtures/nvml/hosts" / (host + ".json")).string(),
        "FLINK_GPU_PROC_ROOT=" + kKernelTree.string(),
        "PATH=" + (kSource / "tests/fixtures/gpu-check").string() + ":/usr/bin:/bin"};
  }
  std::string file() const { return (dir_ / "coordination").string(); }

  /// The default discovery program, as Flink's script runs it.
  CliRun discover(const std::vector<std::string>& args, const std::string& host) const {
    std::vector<std::string> argv{"/usr/bin/env", "-i"};
    for (const std::string& entry : environment(host)) argv.push_back(entry);
    argv.push_back(FLINK_GPU_DISCOVERY);
    argv.insert(argv.end(), args.begin(), args.end());
    return flink::testing::runProgram(argv);
  }

  TempDir dir_{"kernel-list-cli"};
};

TEST_F(KernelListCliTest, TheDefaultDiscoveryHandsNothingOutAndSaysWhatFixesIt) {
  const CliRun run = discover({"1", "--coordination-file", file()}, "upgraded");
  EXPECT_EQ(run.exitCode, 1) << run.err;
  EXPECT_EQ(run.out, "");
  const std::string cause = firstLine(run.err);
  EXPECT_TRUE(contains(cause,
                       "Driver/library version mismatch (NVML_ERROR_LIB_RM_VERSION_MISMATCH, "
                       "18): the driver was upgraded and its old kernel module is still "
                       "loaded; CUDA fails the same way, so no GPU is handed out: "))
      << cause;
  EXPECT_TRUE(cause.ends_with(kRemedy)) << cause;
  EXPECT_TRUE(contains(run.err,
                       "the kernel's driver knows 7 GPU(s): 0 00000000:19:00.0 "
                       "(GPU-a0000000-1111-4222-8333-444400000000, NVIDIA H200), 1 "
                       "00000000:4C:00.0"))
      << run.err;
  // The stand-in nvidia-smi failed as the real one does.
  EXPECT_TRUE(contains(run.err,
                       "nvidia-smi: Failed to initialize NVML: Driver/library version "
                       "mismatch"))
      << run.err;
  EXPECT_FALSE(fs::exists(file()) && !readFile(file()).empty()) << "nothing is recorded";
}

TEST_F(KernelListCliTest, StatusListsTheKernelsGpusByUuidAndBusId) {
  const CliRun run = runCli({"status", "--coordination-file", file()}, environment());
  EXPECT_EQ(run.exitCode, 1) << run;
  EXPECT_TRUE(
      contains(run.err, "the GPUs shown are the kernel's list (" + kKernelTree.string() +
                            "/gpus), by index in PCI bus order; to use them again: " + kRemedy))
      << run;
  EXPECT_TRUE(contains(run.err,
                       "flink-gpu: warning: GPU 00000000:3B:00.0 "
                       "(GPU-a0000001-1111-4222-8333-444400000001, NVIDIA H200) is "
                       "excluded by the kernel's driver (GPU Excluded: Yes): never "
                       "handed out"))
      << run;
  const std::vector<std::string> lines = linesOf(run.out);
  ASSERT_EQ(lines.size(), 10u) << run;  // the records' line, a blank, the header, 7 GPUs
  EXPECT_EQ(lines[2], "GPU  STATE  DETAIL");
  EXPECT_EQ(
      lines[4],
      "1    free   GPU-a0000002-1111-4222-8333-444400000002, 00000000:4C:00.0: driver/library "
      "version mismatch");
}

TEST_F(KernelListCliTest, StatusJsonAndMetricsCountTheKernelsGpus) {
  const CliRun json =
      runCli({"status", "--coordination-file", file(), "--format", "json"}, environment());
  EXPECT_EQ(json.exitCode, 1) << json;
  const nlohmann::json document = nlohmann::json::parse(json.out);
  EXPECT_EQ(document.at("nvml").at("usable"), false);
  ASSERT_EQ(document.at("kernel_gpus").size(), 8u) << json.out;
  EXPECT_EQ(document.at("kernel_gpus")[1].at("excluded"), true);
  ASSERT_EQ(document.at("gpus").size(), 7u);
  const nlohmann::json& gpu1 = document.at("gpus")[1];
  EXPECT_EQ(gpu1.at("uuid"), "GPU-a0000002-1111-4222-8333-444400000002");
  EXPECT_EQ(gpu1.at("kernel").at("pci_bus_id"), "00000000:4C:00.0");
  EXPECT_EQ(gpu1.at("kernel").at("minor"), 2);
  EXPECT_TRUE(gpu1.at("health").at("healthy").is_null());

  const CliRun metrics =
      runCli({"status", "--coordination-file", file(), "--format", "prometheus"}, environment());
  EXPECT_EQ(metrics.exitCode, 0) << metrics;
  EXPECT_TRUE(contains(metrics.out, "\nflink_gpu_nvml_up 0\n")) << metrics.out;
  EXPECT_TRUE(contains(metrics.out, "\nflink_gpu_gpus{source=\"kernel\"} 7\n")) << metrics.out;
  EXPECT_TRUE(contains(metrics.out, "\nflink_gpu_gpus{source=\"records\"} 0\n")) << metrics.out;
  EXPECT_TRUE(contains(metrics.out,
                       "\nflink_gpu_healthy{gpu=\"1\",uuid=\"GPU-a0000002-1111-4222-8333-"
                       "444400000002\"} NaN\n"))
      << metrics.out;
  // promtool (Debian's prometheus package, installed by scripts/install-deps.sh) reads stdin.
  ASSERT_TRUE(fs::exists(PROMTOOL)) << "promtool is missing: run scripts/install-deps.sh";
  std::ofstream(dir_ / "metrics.prom") << metrics.out;
  const fs::path script =
      writeScript(dir_ / "promtool.sh", "#!/bin/sh\nexec \"$1\" check metrics < \"$2\"\n");
  const flink::process::ProcessResult checked =
      flink::process::run({script.string(), PROMTOOL, (dir_ / "metrics.prom").string()}, {});
  EXPECT_EQ(checked.outcome.value(), 0)
      << checked.stdoutOutput.data << checked.stderrOutput.data << metrics.out;
}

TEST_F(KernelListCliTest, DrainAndUndrainTakeAnIndexOrAUuidOfTheKernelsList) {
  const CliRun byIndex = runCli(
      {"drain", "--gpu", "1", "--reason", "fan", "--coordination-file", file()}, environment());
  EXPECT_EQ(byIndex.exitCode, 0) << byIndex;
  EXPECT_EQ(byIndex.out,
            "drained GPU 1 (GPU-a0000002-1111-4222-8333-444400000002): new allocations skip it; "
            "owners that hold it keep it\n");
  EXPECT_TRUE(contains(byIndex.err, "the GPUs are the kernel's driver's, in PCI bus order"))
      << byIndex;

  const CliRun byUuid = runCli(
      {"drain", "--gpu", "GPU-a0000007-1111-4222-8333-444400000007", "--coordination-file", file()},
      environment());
  EXPECT_EQ(byUuid.exitCode, 0) << byUuid;
  EXPECT_TRUE(contains(byUuid.out, "drained GPU 6 (GPU-a0000007-1111-4222-8333-444400000007)"))
      << byUuid;

  // The excluded GPU is none of the host's GPUs, as for NVML.
  const CliRun excluded = runCli(
      {"drain", "--gpu", "GPU-a0000001-1111-4222-8333-444400000001", "--coordination-file", file()},
      environment());
  EXPECT_EQ(excluded.exitCode, 1) << excluded;
  EXPECT_TRUE(contains(excluded.err, "the kernel's driver lists GPU 0 ")) << excluded;

  const CliRun check = runCli({"check", "--coordination-file", file()}, environment());
  EXPECT_TRUE(contains(check.out, "GPU 1 (GPU-a0000002-1111-4222-8333-444400000002): drained"))
      << check;

  const CliRun undrain = runCli({"undrain", "--gpu", "GPU-a0000002-1111-4222-8333-444400000002",
                                 "--coordination-file", file()},
                                environment());
  EXPECT_EQ(undrain.exitCode, 0) << undrain;
  EXPECT_TRUE(
      contains(undrain.out, "GPU 1 (GPU-a0000002-1111-4222-8333-444400000002) is handed out again"))
      << undrain;
  const CliRun undrainByIndex =
      runCli({"undrain", "--gpu", "6", "--coordination-file", file()}, environment());
  EXPECT_EQ(undrainByIndex.exitCode, 0) << undrainByIndex;
  EXPECT_TRUE(contains(undrainByIndex.out,
                       "GPU 6 (GPU-a0000007-1111-4222-8333-444400000007) is handed out again"))
      << undrainByIndex;
}

TEST_F(KernelListCliTest, CheckSaysTheMismatchAndTheKernelsGpusInOneLine) {
  const CliRun run = runCli({"check", "--coordination-file", file()}, environment());
  EXPECT_EQ(run.exitCode, 1) << run;
  const std::vector<std::string> lines = linesOf(run.out);
  ASSERT_EQ(lines.size(), 1u) << run;
  EXPECT_TRUE(
      lines[0].starts_with("NVML is not usable: nvmlInitWithFlags failed: Driver/library "
                           "version mismatch (NVML_ERROR_LIB_RM_VERSION_MISMATCH, 18): the "
                           "driver was upgraded and its old kernel module is still loaded; "
                           "the kernel's driver knows 7 GPU(s): 0 00000000:19:00.0 "))
      << lines[0];
  EXPECT_TRUE(contains(lines[0], "; it excludes 00000000:3B:00.0 ")) << lines[0];
  EXPECT_TRUE(lines[0].ends_with(kRemedy)) << lines[0];

  const CliRun json =
      runCli({"check", "--coordination-file", file(), "--format", "json"}, environment());
  const nlohmann::json document = nlohmann::json::parse(json.out);
  ASSERT_EQ(document.at("problems").size(), 1u) << json.out;
  EXPECT_EQ(document.at("problems")[0].at("kind"), "nvml");
  EXPECT_EQ(document.at("problems")[0].at("cause"), "version_mismatch");
}

TEST_F(KernelListCliTest, AGpuTheKernelExcludesIsNeverHandedOutEvenWhenNvmlListsIt) {
  // islands-8's NVML lists all 8; the kernel's list excludes 00000000:3B:00.0, GPU 1.
  const CliRun run = discover({"7"}, "islands-8");
  EXPECT_EQ(run.exitCode, 0) << run.err;
  EXPECT_EQ(run.out, "0,2,3,4,5,6,7\n");
  EXPECT_TRUE(contains(run.err,
                       "note: GPU 1 is not handed out: the kernel's driver excludes it "
                       "(\"GPU Excluded: Yes\" in " +
                           kKernelTree.string() + "/gpus/0000:3b:00.0/information)"))
      << run.err;
  const CliRun all = discover({"8"}, "islands-8");
  EXPECT_EQ(all.exitCode, 1) << all.err;
}

}  // namespace
