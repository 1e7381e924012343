// Tests of what flink-gpu shows and hands out through NVML, from the outside: the real binary and
// the default discovery beside it, run with $FLINK_GPU_NVML_LIBRARY pointing at the stand-in
// libnvidia-ml.so.1 of tests/fixtures/nvml and $FAKE_NVML_DEVICES at a JSON host of the test's
// own. A decoy nvidia-smi first on PATH would answer with GPUs 5, 6 and 7, so that an answer that
// came from nvidia-smi instead of NVML shows. Owners in coordination mode are `sleep` processes
// started and killed here.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "CliRun.h"
#include "TestSupport.h"

extern char** environ;

namespace {

/// status --format json without its size fields, which depend on the file's layout.
std::string withoutSizeFields(const std::string& json) {
  return std::regex_replace(json, std::regex(R"(,"size_bytes":\d+,"limit_bytes":\d+,"notes":\[\])"),
                            "");
}

/// status's JSON without the size fields and without `gpus` (every GPU of the host, checked on
/// its own): the records part, as it was before `gpus` came.
std::string recordsPart(const std::string& json) {
  const std::string text = withoutSizeFields(json);
  const std::size_t gpus = text.find(R"(,"gpus":)");
  return gpus == std::string::npos ? text : text.substr(0, gpus) + "}\n";
}

namespace fs = std::filesystem;
using flink::testing::CliRun;
using flink::testing::firstLine;
using flink::testing::hasLineStartingWith;
using flink::testing::readFile;
using flink::testing::readLines;
using flink::testing::runCli;
using flink::testing::table;
using flink::testing::TempDir;
using flink::testing::writeScript;

constexpr const char* kGpu0 = "GPU-4f5a0c2e-8b1d-4c55-9e0a-6a1f3b2c7d10";
constexpr const char* kGpu1 = "GPU-9d3e7b21-0c4a-4f6e-8b52-1e7c9a4d3f22";
constexpr const char* kMigA = "MIG-0b6c1a2d-3e4f-5a6b-7c8d-9e0f1a2b3c4d";
constexpr const char* kMigB = "MIG-1c7d2b3e-4f5a-6b7c-8d9e-0f1a2b3c4d5e";

using flink::testing::contains;

/// One GPU of the stand-in host, as JSON. With `mig`, its MIG mode is on, with instances kMigA
/// (GPU instance 9) and kMigB (GPU instance 10) in slots 0 and 2, slot 1 empty.
std::string gpuJson(const std::string& uuid, const std::string& busId, unsigned minor, bool mig) {
  std::string json = R"({"uuid": ")" + uuid + R"(", "name": "NVIDIA H200", "pci_bus_id": ")" +
                     busId + R"(", "memory_total_mib": 143771, "minor_number": )" +
                     std::to_string(minor);
  if (!mig) return json + R"(, "mig_enabled": false})";
  return json + R"(, "mig_enabled": true, "mig": [
    {"uuid": ")" +
         kMigA + R"(", "name": "NVIDIA H200 MIG 1g.18gb", "memory_total_mib": 16384,
     "gpu_instance_id": 9, "compute_instance_id": 0},
    null,
    {"uuid": ")" +
         kMigB + R"(", "name": "NVIDIA H200 MIG 1g.18gb", "memory_total_mib": 16384,
     "gpu_instance_id": 10, "compute_instance_id": 0}]})";
}

/// A live process to record GPUs for: `sleep 60`, killed with its group at the end.
using flink::testing::Sleeper;

class GpuPropertiesCliTest : public ::testing::Test {
 protected:
  GpuPropertiesCliTest() {
    // The decoy: what nvidia-smi would answer, were it asked (index-only lines, as stand-ins do).
    writeScript(dir_ / "bin" / "nvidia-smi", "#!/bin/sh\nprintf '5\\n6\\n7\\n'\n");
    // Two H200s; GPU 1 in MIG mode with two instances.
    host("[" + gpuJson(kGpu0, "00000000:19:00.0", 0, false) + ", " +
         gpuJson(kGpu1, "00000000:3B:00.0", 1, true) + "]");
  }

  /// Describes the stand-in's host: `devices` is its "devices" array; `extra` more top-level
  /// members (e.g. `"init_error": 18, `).
  void host(const std::string& devices, const std::string& extra = "") {
    std::ofstream(dir_ / "host.json", std::ios::trunc)
        << "{" << extra << R"("devices": )" << devices << "}";
  }

  /// The environment of a run on the stand-in host: its NVML, and the decoy first on PATH.
  std::vector<std::string> environment() const {
    return {std::string("FLINK_GPU_NVML_LIBRARY=") + FAKE_NVML_FULL,
            "FAKE_NVML_DEVICES=" + (dir_ / "host.json").string(),
            "PATH=" + (dir_ / "bin").string() + ":/usr/bin:/bin"};
  }

  CliRun run(const std::vector<std::string>& args) const { return runCli(args, environment()); }

  std::string coordinationFile() const { return (dir_ / "coordination").string(); }

  /// The coordination file's records, "<gpu> <pid>" each (the start time left out).
  std::vector<std::string> records() const {
    std::vector<std::string> result;
    for (const std::string& line : readLines(coordinationFile())) {
      std::istringstream fields(line);
      std::string gpu;
      std::string pid;
      if (fields >> gpu >> pid) result.push_back(gpu + " " + pid);
    }
    return result;
  }

  TempDir dir_{"flink-gpu-properties-cli-test"};
};

// --- discover: GPUInfo's properties ---------------------------------------------------------

TEST_F(GpuPropertiesCliTest, DiscoverShowsWhatNvmlKnowsOfEachGpu) {
  const std::string script = writeScript(dir_ / "two-gpus.sh", "#!/bin/sh\necho 0,1\n").string();
  const CliRun json =
      run({"discover", "-n", "2", "--discovery-script", script, "--format", "json"});
  ASSERT_EQ(json.exitCode, 0) << json;
  EXPECT_EQ(withoutSizeFields(json.out),
            std::string(R"({"format":1,"gpu":[)") + R"({"index":"0","vendor":"nvidia","uuid":")" +
                kGpu0 +
                R"(","name":"NVIDIA H200","pci.bus_id":"00000000:19:00.0",)"
                R"("memory.total":"143771","minor_number":"0"},)"
                R"({"index":"1","vendor":"nvidia","uuid":")" +
                kGpu1 +
                R"(","name":"NVIDIA H200","pci.bus_id":"00000000:3B:00.0",)"
                R"("memory.total":"143771","minor_number":"1"}]})"
                "\n")
      << json;
  EXPECT_EQ(json.err, "") << json;

  // Text stays Flink's.
  const CliRun text = run({"discover", "-n", "2", "--discovery-script", script});
  EXPECT_EQ(text.exitCode, 0) << text;
  EXPECT_EQ(text.out, "GPU Device(0)\nGPU Device(1)\n") << text;
}

// --- the default discovery through NVML --------------------------------------------------------

TEST_F(GpuPropertiesCliTest, DefaultDiscoveryListsTheGpusNvmlLists) {
  const CliRun run2 = run({"discover", "-n", "2"});
  EXPECT_EQ(run2.exitCode, 0) << run2;
  EXPECT_EQ(run2.out, "GPU Device(0)\nGPU Device(1)\n") << run2;
  EXPECT_EQ(run2.err, "") << run2;

  // Without --mig a GPU in MIG mode is a GPU like any other, and MIG instances are no units.
  const CliRun run3 = run({"discover", "-n", "3"});
  EXPECT_EQ(run3.exitCode, 1) << run3;
  EXPECT_TRUE(contains(firstLine(run3.err), "only 2 GPU(s) found, 3 requested (found: 0,1)"))
      << run3;
}

TEST_F(GpuPropertiesCliTest, DefaultDiscoveryWithMigHandsOutInstancesNeverTheirGpu) {
  const CliRun text = run({"discover", "-n", "3", "--discovery-args", "--mig"});
  EXPECT_EQ(text.exitCode, 0) << text;
  EXPECT_EQ(text.out,
            std::string("GPU Device(0)\nGPU Device(") + kMigA + ")\nGPU Device(" + kMigB + ")\n")
      << text;
  EXPECT_EQ(text.err, "") << text;

  // The instances' GPUInfo carry their own properties and where they sit.
  const CliRun json = run({"discover", "-n", "2", "--discovery-args", "--mig", "--format", "json"});
  ASSERT_EQ(json.exitCode, 0) << json;
  EXPECT_EQ(withoutSizeFields(json.out),
            std::string(R"({"format":1,"gpu":[{"index":"0","vendor":"nvidia","uuid":")") + kGpu0 +
                R"(","name":"NVIDIA H200","pci.bus_id":"00000000:19:00.0",)"
                R"("memory.total":"143771","minor_number":"0"},)"
                R"({"index":")" +
                kMigA + R"(","vendor":"nvidia","uuid":")" + kMigA +
                R"(","name":"NVIDIA H200 MIG 1g.18gb","pci.bus_id":"00000000:3B:00.0",)"
                R"("memory.total":"16384","mig.parent_index":"1",)"
                R"("mig.gpu_instance_id":"9","mig.compute_instance_id":"0"}]})"
                "\n")
      << json;

  // GPU 1 is never a unit beside its instances: there are 3 units, not 4.
  const CliRun four = run({"discover", "-n", "4", "--discovery-args", "--mig"});
  EXPECT_EQ(four.exitCode, 1) << four;
  EXPECT_TRUE(contains(firstLine(four.err), std::string("only 3 GPU(s) found, 4 requested (found: "
                                                        "0,") +
                                                kMigA + "," + kMigB + ")"))
      << four;
}

TEST_F(GpuPropertiesCliTest, AGpuInMigModeWithoutInstancesIsExplained) {
  host("[" + gpuJson(kGpu0, "00000000:19:00.0", 0, false) + R"(, {"uuid": ")" + kGpu1 +
       R"(", "mig_enabled": true, "mig": []}])");
  const CliRun run2 = run({"discover", "-n", "2", "--discovery-args", "--mig"});
  EXPECT_EQ(run2.exitCode, 1) << run2;
  EXPECT_TRUE(contains(firstLine(run2.err), "only 1 GPU(s) found, 2 requested (found: 0)")) << run2;
  EXPECT_TRUE(contains(run2.err, "note: GPU 1 is in MIG mode but has no MIG instances")) << run2;

  // Asking for what there is still works, with the note.
  const CliRun run1 = run({"discover", "-n", "1", "--discovery-args", "--mig"});
  EXPECT_EQ(run1.exitCode, 0) << run1;
  EXPECT_EQ(run1.out, "GPU Device(0)\n");
}

TEST_F(GpuPropertiesCliTest, CoordinationModeRecordsMigInstancesAndGivesOwnersDistinctOnes) {
  const Sleeper first;
  const Sleeper second;
  const Sleeper third;
  const auto discover = [&](int amount, const Sleeper& owner) {
    return run({"discover", "-n", std::to_string(amount), "--discovery-args",
                "--enable-coordination-mode --coordination-file " + coordinationFile() +
                    " --mig --owner-pid " + std::to_string(owner.pid())});
  };
  const std::string firstPid = std::to_string(first.pid());
  const std::string secondPid = std::to_string(second.pid());

  const CliRun one = discover(2, first);
  EXPECT_EQ(one.exitCode, 0) << one;
  EXPECT_EQ(one.out, std::string("GPU Device(0)\nGPU Device(") + kMigA + ")\n") << one;
  const CliRun two = discover(1, second);
  EXPECT_EQ(two.exitCode, 0) << two;
  EXPECT_EQ(two.out, std::string("GPU Device(") + kMigB + ")\n") << two;
  EXPECT_EQ(records(),
            (std::vector<std::string>{"0 " + firstPid, std::string(kMigA) + " " + firstPid,
                                      std::string(kMigB) + " " + secondPid}));

  // An owner asking again asks for more units, as with Flink's script: none is left.
  const CliRun again = discover(1, first);
  EXPECT_EQ(again.exitCode, 1) << again;
  EXPECT_TRUE(contains(firstLine(again.err), "not enough free GPUs: 1 requested, 0 free")) << again;

  // Every unit is taken; GPU 1, whose instances they are, is not one more.
  const CliRun none = discover(1, third);
  EXPECT_EQ(none.exitCode, 1) << none;
  EXPECT_TRUE(contains(firstLine(none.err), "not enough free GPUs: 1 requested, 0 free")) << none;
  EXPECT_EQ(records().size(), 3u);
}

// --- discover --config: a share's properties --------------------------------------------------

TEST_F(GpuPropertiesCliTest, DiscoverConfigShowsTheShareATaskManagerGetsWithShareArgs) {
  host("[" + gpuJson(kGpu0, "00000000:19:00.0", 0, false) + ", " +
       gpuJson(kGpu1, "00000000:3B:00.0", 1, false) + "]");
  const CliRun share = run({"share", "--coordination-file", coordinationFile(), "--gpu", "0",
                            "--replicas", "2", "--mps", "/run/nvidia-mps"});
  ASSERT_EQ(share.exitCode, 0) << share;
  const fs::path conf = dir_ / "conf";
  fs::create_directories(conf);
  const std::string config =
      "external-resources: gpu\n"
      "external-resource.gpu.amount: 1\n"
      "external-resource.gpu.driver-factory.class: "
      "org.apache.flink.externalresource.gpu.GPUDriverFactory\n"
      "external-resource.gpu.param.discovery-script.path: " +
      std::string(DEFAULT_DISCOVERY_SCRIPT) +
      "\n"
      "external-resource.gpu.param.discovery-script.args: --enable-coordination-mode "
      "--coordination-file " +
      coordinationFile() + " --share\n";
  writeScript(conf / "config.yaml", config, fs::perms::owner_read | fs::perms::owner_write);

  const CliRun json = run({"discover", "--config", conf.string(), "--format", "json"});
  ASSERT_EQ(json.exitCode, 0) << json;
  // GPU 0's properties, then its share's: 143771 MiB in 2 shares, half the threads each.
  EXPECT_EQ(
      json.out,
      std::string(R"({"format":1,"resources":{"gpu":[{"index":"0","vendor":"nvidia","uuid":")") +
          kGpu0 +
          R"(","name":"NVIDIA H200","pci.bus_id":"00000000:19:00.0",)"
          R"("memory.total":"143771","minor_number":"0",)"
          R"("share.index":"0","share.count":"2","share.memory":"71885",)"
          R"("mps.pipe_directory":"/run/nvidia-mps",)"
          R"("mps.active_thread_percentage":"50"}]}})"
          "\n")
      << json;
  // The discovery's warning is flink-gpu's, at normal verbosity: no daemon runs here.
  EXPECT_EQ(json.err,
            "flink-gpu: warning: the GPU discovery script warns: no MPS control daemon runs for "
            "/run/nvidia-mps (/run/nvidia-mps/control does not exist): start it with "
            "CUDA_MPS_PIPE_DIRECTORY=/run/nvidia-mps nvidia-cuda-mps-control -d; until it runs, a "
            "CUDA process given this share runs without MPS, so without its limits\n")
      << json;
  // The driver held the share while it lived, and gave it back when flink-gpu ended.
  EXPECT_EQ(records(), std::vector<std::string>{});

  // Text stays Flink's.
  const CliRun text = run({"discover", "--config", conf.string()});
  EXPECT_EQ(text.exitCode, 0) << text;
  EXPECT_EQ(text.out, "gpu: GPU Device(0)\n") << text;
}

// --- exec ----------------------------------------------------------------------------------

TEST_F(GpuPropertiesCliTest, ExecWithMigSetsMigUuidsWithoutIndices) {
  // GPU 0 in MIG mode this time, GPU 1 not.
  host("[" + gpuJson(kGpu0, "00000000:19:00.0", 0, true) + ", " +
       gpuJson(kGpu1, "00000000:3B:00.0", 1, false) + "]");
  const std::vector<std::string> echo{"--", "/bin/sh", "-c", "echo $CUDA_VISIBLE_DEVICES"};
  const auto exec = [&](std::vector<std::string> options, const std::string& file) {
    std::vector<std::string> args{"exec", "--coordination-file", (dir_ / file).string()};
    args.insert(args.end(), options.begin(), options.end());
    args.insert(args.end(), echo.begin(), echo.end());
    return run(args);
  };

  const CliRun mig = exec({"-n", "2", "--mig"}, "mig-coordination");
  EXPECT_EQ(mig.exitCode, 0) << mig;
  EXPECT_EQ(mig.out, std::string(kMigA) + "," + kMigB + "\n") << mig;
  // Nothing about NVML or nvidia-smi: NVML answered. (A warning that CUDA uses only one MIG
  // instance per process is exec's to give.)
  EXPECT_FALSE(contains(mig.err, "NVML")) << mig;
  EXPECT_FALSE(contains(mig.err, "nvidia-smi")) << mig;

  const CliRun whole = exec({"-n", "2"}, "whole-coordination");
  EXPECT_EQ(whole.exitCode, 0) << whole;
  EXPECT_EQ(whole.out, "0,1\n") << whole;
  EXPECT_EQ(whole.err, "") << whole;

  // With --mig the units are kMigA, kMigB and GPU 1: never GPU 0 itself.
  const CliRun four = exec({"-n", "4", "--mig"}, "four-coordination");
  EXPECT_EQ(four.exitCode, 1) << four;
  // exec's words are the default discovery's (grantUnits).
  EXPECT_EQ(firstLine(four.err), std::string("flink-gpu: error: only 3 GPU(s) found, 4 "
                                             "requested (found: ") +
                                     kMigA + "," + kMigB + ",1)")
      << four;
}

// --- NVML that fails -----------------------------------------------------------------------

TEST_F(GpuPropertiesCliTest, FailingNvmlFallsBackToNvidiaSmiAndSaysWhy) {
  // A driver/library version mismatch: the library is there, nvmlInit fails.
  host("[" + gpuJson(kGpu0, "00000000:19:00.0", 0, false) + "]", R"("init_error": 18, )");

  const CliRun exec = run({"exec", "-n", "2", "--coordination-file", coordinationFile(), "--",
                           "/bin/sh", "-c", "echo $CUDA_VISIBLE_DEVICES"});
  EXPECT_EQ(exec.exitCode, 0) << exec;
  EXPECT_EQ(exec.out, "5,6\n") << exec;  // the decoy's answer
  const std::string note = firstLine(exec.err);
  EXPECT_TRUE(note.starts_with("flink-gpu: warning: NVML is not usable: ")) << exec;
  EXPECT_TRUE(contains(note, "Driver/library version mismatch")) << exec;
  EXPECT_TRUE(note.ends_with("; nvidia-smi was asked instead")) << exec;

  // The default discovery answers from nvidia-smi too; its note is in the script's stderr, which
  // flink-gpu shows with -vv.
  const CliRun discover = run({"discover", "-n", "2"});
  EXPECT_EQ(discover.exitCode, 0) << discover;
  EXPECT_EQ(discover.out, "GPU Device(5)\nGPU Device(6)\n") << discover;
  const CliRun verbose = run({"-vv", "discover", "-n", "2"});
  EXPECT_EQ(verbose.exitCode, 0) << verbose;
  EXPECT_TRUE(contains(verbose.err, "note: NVML is not usable: ")) << verbose;
  EXPECT_TRUE(contains(verbose.err, "nvidia-smi was asked instead")) << verbose;
}

// --- nvidia-smi only ------------------------------------------------------------------------

TEST_F(GpuPropertiesCliTest, WhereOnlyNvidiaSmiAnswersItsPropertiesReachTheGpuInfo) {
  // No NVML at all; nvidia-smi answers the default discovery's query as the real one does (and
  // refuses anything else), and counts its runs.
  const fs::path runs = dir_ / "nvidia-smi-runs";
  writeScript(dir_ / "bin" / "nvidia-smi",
              "#!/bin/sh\n"
              "echo run >> '" +
                  runs.string() +
                  "'\n"
                  "if [ \"$*\" != '--query-gpu=index,uuid,name,pci.bus_id,memory.total "
                  "--format=csv,noheader,nounits' ]; then\n"
                  "  echo 'Invalid combination of input arguments. Please run nvidia-smi -h for "
                  "help.'; exit 2\n"
                  "fi\n"
                  "echo '0, " +
                  std::string(kGpu0) +
                  ", NVIDIA H200, 00000000:19:00.0, 143771'\n"
                  "echo '1, " +
                  std::string(kGpu1) + ", NVIDIA H200, 00000000:3B:00.0, 143771'\n");
  const std::vector<std::string> env{
      "FLINK_GPU_NVML_LIBRARY=" + (dir_ / "no-nvml" / "libnvidia-ml.so.1").string(),
      "PATH=" + (dir_ / "bin").string() + ":/usr/bin:/bin"};

  const CliRun json = runCli({"discover", "-n", "2", "--format", "json"}, env);
  ASSERT_EQ(json.exitCode, 0) << json;
  EXPECT_EQ(
      json.out,
      std::string("{\"format\":1,\"gpu\":[{\"index\":\"0\",\"vendor\":\"nvidia\",\"uuid\":\"") +
          kGpu0 +
          "\",\"name\":\"NVIDIA H200\",\"pci.bus_id\":\"00000000:19:00.0\","
          "\"memory.total\":\"143771\"},{\"index\":\"1\",\"vendor\":\"nvidia\",\"uuid\":\"" +
          kGpu1 +
          "\",\"name\":\"NVIDIA H200\",\"pci.bus_id\":\"00000000:3B:00.0\","
          "\"memory.total\":\"143771\"}]}\n")
      << json;
  // nvidia-smi was run once, for the enumeration; nothing asked it again for the properties.
  EXPECT_EQ(readLines(runs).size(), 1u) << readFile(runs);

  // Under a scheduler's mask the entry is the mask's, and the properties say which GPU it is.
  const std::string prefix = std::string(kGpu1).substr(0, 12);
  std::vector<std::string> masked = env;
  masked.push_back("CUDA_VISIBLE_DEVICES=" + prefix);
  const CliRun under = runCli({"discover", "-n", "1", "--format", "json"}, masked);
  ASSERT_EQ(under.exitCode, 0) << under;
  const auto gpu = nlohmann::json::parse(under.out).at("gpu").at(0);
  EXPECT_EQ(gpu.at("index"), prefix) << under;
  EXPECT_EQ(gpu.at("uuid"), kGpu1) << under;
  EXPECT_EQ(gpu.at("pci.bus_id"), "00000000:3B:00.0") << under;
}

// --- status --------------------------------------------------------------------------------

TEST_F(GpuPropertiesCliTest, AGpusRowNamesEightOfItsRecordsAndCountsTheRest) {
  // Gone owners' records of GPU 0, each of its own pid: the records' table lists all ten, the
  // GPU's row eight of them.
  std::ofstream file(coordinationFile());
  for (int pid = 999999000; pid < 999999010; ++pid) file << "0 " << pid << "\n";
  file.close();
  const CliRun text = run({"status", "--coordination-file", coordinationFile()});
  EXPECT_EQ(text.exitCode, 0) << text;
  std::string row = "recorded for process 999999000 (gone)";
  for (int pid = 999999001; pid < 999999008; ++pid) {
    row += "; recorded for process " + std::to_string(pid) + " (gone)";
  }
  row += "; and 2 more records (the records' table lists every one)";
  EXPECT_TRUE(contains(text.out, row)) << text;
  EXPECT_TRUE(contains(text.out, "0    999999009  gone")) << text;
  // A record that holds it, after them: named first.
  std::ofstream(coordinationFile(), std::ios::app) << "0 " << ::getpid() << "\n";
  const CliRun held = run({"status", "--coordination-file", coordinationFile()});
  EXPECT_TRUE(contains(held.out, "held   held by process " + std::to_string(::getpid()) +
                                     " (running); recorded for process 999999000 (gone)"))
      << held;
  EXPECT_TRUE(contains(held.out, "; and 3 more records (the records' table lists every one)"))
      << held;
}

TEST_F(GpuPropertiesCliTest, StatusShowsWhatNvmlKnowsOfEachRecord) {
  // Records of this test's pid with a start time it never had: "gone". GPU 7 is not on the host.
  const std::string pid = std::to_string(::getpid());
  std::ofstream(coordinationFile()) << "0 " << pid << " 1\n"
                                    << kMigB << ' ' << pid << " 1\n"
                                    << "7 " << pid << " 1\n";

  const CliRun text = run({"status", "--coordination-file", coordinationFile()});
  EXPECT_EQ(text.exitCode, 0) << text;
  EXPECT_EQ(text.out,
            table({{"GPU", "OWNER PID", "OWNER", "DEVICE"},
                   {"0", pid, "gone", "NVIDIA H200, 00000000:19:00.0, 143771 MiB"},
                   {kMigB, pid, "gone", "NVIDIA H200 MIG 1g.18gb, 00000000:3B:00.0, 16384 MiB"},
                   {"7", pid, "gone", ""}}) +
                "\n" +
                // Then every GPU of the host: what NVML lists, then what only a record names.
                table({{"GPU", "STATE", "DETAIL"},
                       {"0", "free", "recorded for process " + pid + " (gone)"},
                       {"1", "free", ""},
                       {kMigA, "free", ""},
                       {kMigB, "free", "recorded for process " + pid + " (gone)"},
                       {"7", "free",
                        "not on this host (state that outlived it: see --stale); recorded for "
                        "process " +
                            pid + " (gone)"}}))
      << text;
  // GPU 7 is not this host's: a note says so (docs/operating.md, state that outlived the host).
  EXPECT_EQ(text.err, "flink-gpu: note: record of process " + pid +
                          " names GPU 7 which this host does not have; `flink-gpu release "
                          "--stale` removes it\n")
      << text;

  const CliRun json =
      run({"status", "--coordination-file", coordinationFile(), "--format", "json"});
  EXPECT_EQ(json.exitCode, 0) << json;
  const std::string gone =
      R"(,"vendor":"nvidia","owner_pid":)" + pid +
      R"(,"owner_start_time":1,"running":false,"owner_state":"gone","other_pid_namespace":false,)"
      R"("share":null)";
  EXPECT_EQ(recordsPart(json.out),
            R"({"format":1,"coordination_file":")" + coordinationFile() + R"(","records":[)" +
                R"({"gpu":"0")" + gone + R"(,"uuid":")" + kGpu0 +
                R"(","name":"NVIDIA H200","pci.bus_id":"00000000:19:00.0",)"
                R"("memory.total":"143771"},)"
                R"({"gpu":")" +
                kMigB + '"' + gone + R"(,"uuid":")" + kMigB +
                R"(","name":"NVIDIA H200 MIG 1g.18gb","pci.bus_id":"00000000:3B:00.0",)"
                R"("memory.total":"16384"},)"
                R"({"gpu":"7")" +
                gone + R"(}],"junk":[]})" + "\n")
      << json;
  // Every GPU of the host, each with its state and health.
  const auto gpus = nlohmann::json::parse(json.out).at("gpus");
  ASSERT_EQ(gpus.size(), 5u) << json;
  EXPECT_EQ(gpus[0].at("gpu"), "0");
  EXPECT_EQ(gpus[0].at("uuid"), kGpu0);
  // Its record's owner is gone: it holds nothing.
  EXPECT_EQ(gpus[0].at("state"), "free");
  EXPECT_EQ(gpus[0].at("holders").at(0).at("running"), false);
  EXPECT_EQ(gpus[0].at("health").at("healthy"), true);
  EXPECT_EQ(gpus[1].at("state"), "free");
  EXPECT_EQ(gpus[3].at("gpu"), kMigB);
  EXPECT_EQ(gpus[4].at("gpu"), "7");
}

// NVML installed but failing (a driver/library mismatch): status shows the records, says that
// NVML cannot be used, and exits 1 as check does; no GPU is called healthy from records alone.
TEST_F(GpuPropertiesCliTest, StatusWithoutUsableNvmlShowsTheRecordsAloneAndRunsNoNvidiaSmi) {
  host("[" + gpuJson(kGpu0, "00000000:19:00.0", 0, false) + "]", R"("init_error": 18, )");
  // nvidia-smi, were it run, would leave a mark.
  const fs::path marker = dir_ / "nvidia-smi-ran";
  writeScript(dir_ / "bin" / "nvidia-smi",
              "#!/bin/sh\necho ran > '" + marker.string() + "'\nprintf '0\\n'\n");
  const std::string pid = std::to_string(::getpid());
  std::ofstream(coordinationFile()) << "0 " << pid << " 1\n";

  const CliRun text = run({"status", "--coordination-file", coordinationFile()});
  EXPECT_EQ(text.exitCode, 1) << text;
  EXPECT_EQ(text.out, table({{"GPU", "OWNER PID", "OWNER"}, {"0", pid, "gone"}})) << text;
  EXPECT_EQ(text.err,
            "flink-gpu: error: NVML is not usable: nvmlInitWithFlags failed: Driver/library "
            "version mismatch (NVML_ERROR_LIB_RM_VERSION_MISMATCH, 18); the GPUs' health is "
            "unknown, and GPUs that no record names are not shown\n")
      << text;
  EXPECT_EQ(run({"check", "--coordination-file", coordinationFile()}).exitCode, text.exitCode);

  const CliRun json =
      run({"status", "--coordination-file", coordinationFile(), "--format", "json"});
  EXPECT_EQ(json.exitCode, 1) << json;
  const nlohmann::json document = nlohmann::json::parse(json.out);
  EXPECT_EQ(document.at("nvml").at("usable"), false) << json;
  EXPECT_EQ(document.at("nvml").at("installed"), true) << json;
  EXPECT_TRUE(document.at("gpus").at(0).at("health").at("healthy").is_null()) << json;

  // The metrics still exit 0, for the textfile collector to publish that NVML is down; the GPU
  // is in them, its health unknown.
  const CliRun metrics =
      run({"status", "--coordination-file", coordinationFile(), "--format", "prometheus"});
  EXPECT_EQ(metrics.exitCode, 0) << metrics;
  EXPECT_TRUE(contains(metrics.out, "\nflink_gpu_nvml_up 0\n")) << metrics;
  EXPECT_TRUE(contains(metrics.out, "\nflink_gpu_healthy{gpu=\"0\",uuid=\"\"} NaN\n")) << metrics;
  EXPECT_TRUE(contains(metrics.out, "\nflink_gpu_gpus{source=\"records\"} 1\n")) << metrics;
  EXPECT_FALSE(contains(metrics.out, "source=\"nvml\"")) << metrics;
  EXPECT_EQ(
      recordsPart(json.out),
      R"({"format":1,"coordination_file":")" + coordinationFile() +
          R"(","records":[{"gpu":"0","vendor":"nvidia","owner_pid":)" + pid +
          R"(,"owner_start_time":1,"running":false,"owner_state":"gone","other_pid_namespace":false,)"
          R"("share":null}],"junk":[]})" +
          "\n")
      << json;
  // Without NVML the host's GPUs are those the records name.
  const auto gpus = nlohmann::json::parse(json.out).at("gpus");
  ASSERT_EQ(gpus.size(), 1u) << json;
  EXPECT_EQ(gpus[0].at("state"), "free") << json;

  // -v says why there are no properties.
  const CliRun verbose = run({"-v", "status", "--coordination-file", coordinationFile()});
  EXPECT_EQ(verbose.exitCode, 1) << verbose;
  EXPECT_TRUE(
      hasLineStartingWith(verbose.err, "flink-gpu: no GPU properties: NVML is not usable: "))
      << verbose;
  EXPECT_FALSE(fs::exists(marker)) << "status ran nvidia-smi";
}

}  // namespace
