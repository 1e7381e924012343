// The default discovery and `flink-gpu exec`/`status` on hosts as they really are, from the
// outside: a scheduler's CUDA_VISIBLE_DEVICES, CUDA's device order, lost and denied GPUs, and an
// nvidia-smi that reports a GPU it cannot open. The real flink-gpu and nvidia-gpu-discovery run on
// the stand-in libnvidia-ml.so.1 (tests/fixtures/nvml) or, with NVML absent, a stand-in
// nvidia-smi script.
#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "CliRun.h"
#include "TestSupport.h"

namespace real_host_cli_test {

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using flink::testing::Background;
using flink::testing::CliRun;
using flink::testing::firstLine;
using flink::testing::linesOf;
using flink::testing::readLines;
using flink::testing::runCli;
using flink::testing::sleepPath;
using flink::testing::TempDir;
using flink::testing::writeScript;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kGpu0 = "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6";
constexpr const char* kGpu1 = "GPU-3a41c2d0-6e7f-4a8b-9c0d-1e2f3a4b5c6d";
constexpr const char* kGpu2 = "GPU-c05e9b1a-2d3f-4e5a-8b6c-7d8e9f0a1b2c";

std::string gpuJson(const char* uuid, const char* bus, const std::string& extra = "") {
  return std::string(R"({"uuid": ")") + uuid + R"(", "name": "NVIDIA H200", "pci_bus_id": ")" +
         bus + R"(", "memory_total_mib": 143771, "minor_number": 0, "mig_enabled": false)" + extra +
         "}";
}

class RealHostCliTest : public ::testing::Test {
 protected:
  RealHostCliTest() {
    // A decoy: an answer from nvidia-smi instead of NVML would show as GPUs 5 and 6.
    writeScript(dir_ / "bin" / "nvidia-smi", "#!/bin/sh\nprintf '5\\n6\\n'\n");
    host({gpuJson(kGpu0, "00000000:19:00.0"), gpuJson(kGpu1, "00000000:3B:00.0"),
          gpuJson(kGpu2, "00000000:5D:00.0")});
  }

  /// The stand-in NVML's host: these GPUs (JSON objects), in NVML's index order.
  void host(const std::vector<std::string>& gpus) const {
    std::string devices;
    for (const std::string& gpu : gpus) devices += (devices.empty() ? "" : ", ") + gpu;
    std::ofstream(dir_ / "host.json") << R"({"devices": [)" << devices << "]}";
  }

  /// The environment of every run, and `extra` ("NAME=value").
  std::vector<std::string> environment(const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> env{std::string("FLINK_GPU_NVML_LIBRARY=") + FAKE_NVML_FULL,
                                 "FAKE_NVML_DEVICES=" + (dir_ / "host.json").string(),
                                 "PATH=" + (dir_ / "bin").string() + ":/usr/bin:/bin"};
    env.insert(env.end(), extra.begin(), extra.end());
    return env;
  }

  std::string file() const { return (dir_ / "coordination").string(); }

  /// `flink-gpu discover -n <amount> --format json` with the default discovery and `args`.
  CliRun discover(int amount, const std::vector<std::string>& env, const std::string& args = "",
                  const std::string& format = "json") const {
    std::vector<std::string> command{"discover", "-n", std::to_string(amount), "--format", format};
    if (!args.empty()) command.insert(command.end(), {"--discovery-args", args});
    return runCli(command, environment(env));
  }

  /// The default discovery in coordination mode for `owner`, under `mask`.
  CliRun allocate(int amount, const Background& owner, const std::string& mask) const {
    return discover(amount, {"CUDA_VISIBLE_DEVICES=" + mask},
                    "--enable-coordination-mode --coordination-file " + file() + " --owner-pid " +
                        owner.pidText());
  }

  /// `flink-gpu exec <options> -- sh -c 'echo $CUDA_VISIBLE_DEVICES $CUDA_DEVICE_ORDER'`.
  CliRun exec(const std::vector<std::string>& options, const std::vector<std::string>& env) const {
    std::vector<std::string> args{"exec", "--coordination-file", file()};
    args.insert(args.end(), options.begin(), options.end());
    args.insert(args.end(),
                {"--", "/bin/sh", "-c", "echo \"$CUDA_VISIBLE_DEVICES $CUDA_DEVICE_ORDER\""});
    return runCli(args, environment(env));
  }

  /// The records, as `flink-gpu status --format json` shows them: (gpu, owner pid); with
  /// `heldOnly`, those that still hold their GPU.
  std::vector<std::pair<std::string, std::string>> records(bool heldOnly = false) const {
    const CliRun run =
        runCli({"status", "--coordination-file", file(), "--format", "json"}, environment());
    EXPECT_EQ(run.exitCode, 0) << run;
    std::vector<std::pair<std::string, std::string>> found;
    const nlohmann::json status = nlohmann::json::parse(run.out);
    for (const nlohmann::json& record : status.at("records")) {
      if (heldOnly && !record.at("running").get<bool>()) continue;
      found.emplace_back(record.at("gpu").get<std::string>(),
                         std::to_string(record.at("owner_pid").get<long>()));
    }
    return found;
  }

  std::unique_ptr<Background> owner() const {
    return std::make_unique<Background>(std::vector<std::string>{sleepPath(), "60"},
                                        dir_ / "owner.log");
  }

  TempDir dir_{"real-host-cli"};
  // Whatever the shell running the tests has: each test sets what it means to.
  flink::testing::ScopedEnvironment mask_{"CUDA_VISIBLE_DEVICES", std::nullopt};
  flink::testing::ScopedEnvironment order_{"CUDA_DEVICE_ORDER", std::nullopt};
};

/// The "index" and "uuid" of each GPU of a `discover --format json` answer.
std::vector<std::pair<std::string, std::string>> gpusOf(const CliRun& run) {
  std::vector<std::pair<std::string, std::string>> gpus;
  const nlohmann::json answer = nlohmann::json::parse(run.out);
  for (const nlohmann::json& gpu : answer.at("gpu")) {
    gpus.emplace_back(gpu.at("index").get<std::string>(), gpu.value("uuid", std::string()));
  }
  return gpus;
}

// --- 1. an inherited CUDA_VISIBLE_DEVICES -------------------------------------------------------

TEST_F(RealHostCliTest, TheMaskChoosesTheGpusInItsOrderAndNamesThemItsWay) {
  const CliRun run = discover(2, {"CUDA_VISIBLE_DEVICES= 2 , GPU-8932f937"});
  ASSERT_EQ(run.exitCode, 0) << run;
  // What the scheduler called them, and which physical GPU each is.
  EXPECT_THAT(gpusOf(run),
              ElementsAre(std::make_pair(std::string("2"), std::string(kGpu2)),
                          std::make_pair(std::string("GPU-8932f937"), std::string(kGpu0))));
}

TEST_F(RealHostCliTest, AMaskThatHidesEveryGpuFailsNamingTheVariable) {
  for (const char* value : {"", "NoDevFiles"}) {
    const CliRun run = discover(1, {std::string("CUDA_VISIBLE_DEVICES=") + value});
    EXPECT_EQ(run.exitCode, 1) << run;
    EXPECT_THAT(firstLine(run.err),
                HasSubstr("CUDA_VISIBLE_DEVICES=" + std::string(value) + " hides every GPU"))
        << run;
  }
}

TEST_F(RealHostCliTest, AskingForMoreThanTheMaskAllowsFailsNamingTheMask) {
  const CliRun run = discover(2, {"CUDA_VISIBLE_DEVICES=1,-1,0"});
  EXPECT_EQ(run.exitCode, 1) << run;
  EXPECT_THAT(firstLine(run.err),
              HasSubstr("only 1 GPU(s) allowed by CUDA_VISIBLE_DEVICES=1,-1,0, 2 requested"))
      << run;
  // CUDA stops at -1; the user is told so.
  EXPECT_THAT(run.err, HasSubstr("'-1' names no device")) << run;
}

TEST_F(RealHostCliTest, AUuidPrefixSeveralGpusShareIsAmbiguousAndNamesThem) {
  // GPUs 0 and 1 both start with GPU-8932f; CUDA takes neither, and ignores what follows.
  const std::string twin = "GPU-8932f000-0000-4000-8000-000000000001";
  host({gpuJson(kGpu0, "00000000:19:00.0"), gpuJson(twin.c_str(), "00000000:3B:00.0"),
        gpuJson(kGpu2, "00000000:5D:00.0")});
  const std::string could =
      "is ambiguous: it could mean GPU 0 (" + std::string(kGpu0) + ") or GPU 1 (" + twin + ")";

  const CliRun first = exec({"-n", "1"}, {"CUDA_VISIBLE_DEVICES=GPU-8932f,2"});
  EXPECT_EQ(first.exitCode, 1) << first;
  EXPECT_EQ(first.out, "") << first;
  EXPECT_EQ(firstLine(first.err),
            "flink-gpu: error: CUDA_VISIBLE_DEVICES=GPU-8932f,2 names no GPU of this host that "
            "can be handed out: its entry 'GPU-8932f' " +
                could)
      << first;
  const CliRun discovered = discover(1, {"CUDA_VISIBLE_DEVICES=GPU-8932f"});
  EXPECT_EQ(discovered.exitCode, 1) << discovered;
  EXPECT_THAT(firstLine(discovered.err), HasSubstr("its entry 'GPU-8932f' " + could)) << discovered;

  // After a good entry: what is handed out is CUDA's (GPU 2 alone), the words say why.
  const CliRun later = exec({"-n", "1"}, {"CUDA_VISIBLE_DEVICES=2,GPU-8932f,0"});
  EXPECT_EQ(later.exitCode, 0) << later;
  EXPECT_EQ(later.out, "2 PCI_BUS_ID\n") << later;
  EXPECT_THAT(later.err, HasSubstr("flink-gpu: warning: CUDA_VISIBLE_DEVICES=2,GPU-8932f,0: "
                                   "entry 'GPU-8932f' " +
                                   could + ", so CUDA ignores it and every entry after it (0)"))
      << later;
}

TEST_F(RealHostCliTest, TwoMaskedWorkersNeverShareAGpuAndRecordsUseTheHostsNumbering) {
  const std::unique_ptr<Background> first = owner();
  const std::unique_ptr<Background> second = owner();
  // Worker A has the mask 1,2 (GPU 1 by UUID), worker B the mask 0,1.
  const CliRun a = allocate(1, *first, std::string(kGpu1) + ",2");
  ASSERT_EQ(a.exitCode, 0) << a;
  EXPECT_EQ(gpusOf(a).at(0).first, kGpu1);  // told by its mask's own entry
  // The record names GPU 1 as the host numbers it, whatever the mask called it.
  EXPECT_THAT(records(), ElementsAre(std::make_pair(std::string("1"), first->pidText())));

  const CliRun both = allocate(2, *second, "0,1");
  EXPECT_EQ(both.exitCode, 1) << both;
  EXPECT_THAT(firstLine(both.err), HasSubstr("not enough free GPUs")) << both;
  const CliRun b = allocate(1, *second, "1,0");
  ASSERT_EQ(b.exitCode, 0) << b;
  EXPECT_EQ(gpusOf(b).at(0).first, "0");
  EXPECT_THAT(records(), ElementsAre(std::make_pair(std::string("1"), first->pidText()),
                                     std::make_pair(std::string("0"), second->pidText())));
}

TEST_F(RealHostCliTest, ExecPassesTheMasksOwnEntriesOnAndSetsPciBusOrder) {
  const CliRun run = exec({"-n", "2"}, {"CUDA_VISIBLE_DEVICES=GPU-c05e9b1a,0,1"});
  ASSERT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, "GPU-c05e9b1a,0 PCI_BUS_ID\n");
  // A CUDA_DEVICE_ORDER already set is the user's choice.
  const CliRun fastest =
      exec({"-n", "1"}, {"CUDA_VISIBLE_DEVICES=1", "CUDA_DEVICE_ORDER=FASTEST_FIRST"});
  ASSERT_EQ(fastest.exitCode, 0) << fastest;
  EXPECT_EQ(fastest.out, "1 FASTEST_FIRST\n");
}

TEST_F(RealHostCliTest, ExecWithoutAMaskWritesIndicesOrUuids) {
  const CliRun index = exec({"-n", "2"}, {});
  ASSERT_EQ(index.exitCode, 0) << index;
  EXPECT_EQ(index.out, "0,1 PCI_BUS_ID\n");
  // The first command has ended, and exec gave its GPUs back: the same two again, by UUID.
  EXPECT_TRUE(records().empty());
  const CliRun uuid = exec({"-n", "2", "--visible-devices", "uuid"}, {});
  ASSERT_EQ(uuid.exitCode, 0) << uuid;
  EXPECT_EQ(uuid.out, std::string(kGpu0) + "," + kGpu1 + " PCI_BUS_ID\n");
  // --gpus by index: NVML tells the UUID of a GPU it lists.
  const CliRun listed = exec({"-n", "1", "--gpus", "0", "--visible-devices", "uuid"}, {});
  ASSERT_EQ(listed.exitCode, 0) << listed;
  EXPECT_EQ(listed.out, std::string(kGpu0) + " PCI_BUS_ID\n");
  // One NVML does not list has no UUID to give: a usage error, and nothing stays recorded.
  const CliRun unknown = exec({"-n", "1", "--gpus", "7", "--visible-devices", "uuid"}, {});
  EXPECT_EQ(unknown.exitCode, 2) << unknown;
  EXPECT_THAT(firstLine(unknown.err), HasSubstr("the UUID of GPU 7 is not known")) << unknown;
  EXPECT_TRUE(records(/*heldOnly=*/true).empty());
}

TEST_F(RealHostCliTest, AGpuListedByUuidIsTheGpuARecordNamesByIndex) {
  // A worker holds GPU 0, recorded by index (with its UUID).
  const std::unique_ptr<Background> holder = owner();
  const CliRun held = allocate(1, *holder, "0");
  ASSERT_EQ(held.exitCode, 0) << held;
  // --gpus by UUID, where NVML answers, is the same GPU: not handed out again.
  const CliRun run = exec({"-n", "1", "--gpus", std::string(kGpu0) + "," + kGpu1}, {});
  ASSERT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, std::string(kGpu1) + " PCI_BUS_ID\n");
  const CliRun both = exec({"-n", "2", "--gpus", std::string(kGpu0) + "," + kGpu1}, {});
  EXPECT_EQ(both.exitCode, 1) << both;
  // And the other way: a GPU held under its UUID is the index NVML gives it.
  const CliRun byIndex = exec({"-n", "1", "--gpus", "0"}, {});
  EXPECT_EQ(byIndex.exitCode, 1) << byIndex;
}

TEST_F(RealHostCliTest, ARecordByAUuidPrefixHoldsTheGpuItsPrefixNames) {
  // A worker without NVML recorded GPU 0 as the prefix it was listed by.
  const std::unique_ptr<Background> holder = owner();
  const CliRun held =
      runCli({"discover", "-n", "1", "--discovery-args",
              "--gpus GPU-8932f937 --enable-coordination-mode --coordination-file " + file() +
                  " --owner-pid " + holder->pidText()},
             environment({"FLINK_GPU_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1"}));
  ASSERT_EQ(held.exitCode, 0) << held;
  // A worker with NVML does not get GPU 0; one without, listing the whole UUID, neither.
  const CliRun run = exec({"-n", "3"}, {});
  EXPECT_EQ(run.exitCode, 1) << run;
  EXPECT_THAT(run.err, HasSubstr("GPU 0 is held by process " + holder->pidText())) << run;
  const CliRun whole =
      exec({"-n", "1", "--gpus", kGpu0}, {"FLINK_GPU_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1"});
  EXPECT_EQ(whole.exitCode, 1) << whole;
}

TEST_F(RealHostCliTest, AUnitListedByAUuidPrefixIsTheGpuARecordNamesWhole) {
  // A worker with NVML holds GPU 0, recorded by index with its whole UUID.
  const std::unique_ptr<Background> holder = owner();
  const CliRun held = allocate(1, *holder, "0");
  ASSERT_EQ(held.exitCode, 0) << held;
  // One without NVML lists it by a prefix of that UUID: not handed out again.
  const CliRun run = exec({"-n", "1", "--gpus", "GPU-8932f937"},
                          {"FLINK_GPU_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1"});
  EXPECT_EQ(run.exitCode, 1) << run;
  EXPECT_THAT(run.err, HasSubstr("GPU GPU-8932f937 is held by process " + holder->pidText()))
      << run;
}

TEST_F(RealHostCliTest, AListIsTakenAsWrittenWhereNvmlListsNoGpu) {
  host({});
  const CliRun run = exec({"-n", "1", "--gpus", "1,0"}, {});
  ASSERT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, "1 PCI_BUS_ID\n");
}

TEST_F(RealHostCliTest, AListNamingOneGpuTwiceIsRefused) {
  const CliRun run = exec({"-n", "2", "--gpus", std::string(kGpu0) + ",0"}, {});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_THAT(firstLine(run.err), HasSubstr("names GPU 0 (" + std::string(kGpu0) + ") twice, as " +
                                            kGpu0 + " and as 0"))
      << run;
  const CliRun prefix = exec({"-n", "1", "--gpus", "GPU-"}, {});
  EXPECT_NE(prefix.exitCode, 0) << prefix;
  EXPECT_TRUE(records().empty());
}

TEST_F(RealHostCliTest, AContainersRecordHoldsTheGpuItsUuidNamesNotTheHostsIndex) {
  // In a container that sees only GPU 2, as its index 0, a worker holds it.
  host({gpuJson(kGpu2, "00000000:5D:00.0")});
  const std::unique_ptr<Background> holder = owner();
  const CliRun held = allocate(1, *holder, "0");
  ASSERT_EQ(held.exitCode, 0) << held;
  // On the host, --gpus 0,2: GPU 2 is the held one, GPU 0 is free.
  host({gpuJson(kGpu0, "00000000:19:00.0"), gpuJson(kGpu1, "00000000:3B:00.0"),
        gpuJson(kGpu2, "00000000:5D:00.0")});
  const CliRun run = exec({"-n", "1", "--gpus", "2,0"}, {});
  ASSERT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, "0 PCI_BUS_ID\n");
  // Who holds what is told of the GPU the record's UUID names, by exec, the program and status.
  const CliRun both = exec({"-n", "2", "--gpus", "2,0"}, {});
  EXPECT_EQ(both.exitCode, 1) << both;
  EXPECT_THAT(both.err, HasSubstr("2 requested, 1 free, 1 held")) << both;
  EXPECT_THAT(both.err, HasSubstr("GPU 2 is held by process " + holder->pidText())) << both;
  const CliRun program =
      discover(3, {}, "--enable-coordination-mode --coordination-file " + file());
  EXPECT_EQ(program.exitCode, 1) << program;
  EXPECT_THAT(program.err, HasSubstr("3 requested, 2 free")) << program;
  EXPECT_THAT(program.err, HasSubstr("GPU 2 is held by process " + holder->pidText())) << program;
  const CliRun status =
      runCli({"status", "--coordination-file", file(), "--format", "json"}, environment());
  ASSERT_EQ(status.exitCode, 0) << status;
  const nlohmann::json record = nlohmann::json::parse(status.out).at("records").at(0);
  EXPECT_EQ(record.at("uuid"), kGpu2) << status;
  EXPECT_EQ(record.at("pci.bus_id"), "00000000:5D:00.0") << status;
}

TEST_F(RealHostCliTest, ExecUnderAMaskAllowingTooFewFailsNamingIt) {
  const CliRun run = exec({"-n", "2"}, {"CUDA_VISIBLE_DEVICES=2"});
  EXPECT_EQ(run.exitCode, 1) << run;
  EXPECT_THAT(firstLine(run.err),
              HasSubstr("only 1 GPU(s) allowed by CUDA_VISIBLE_DEVICES=2, 2 requested"))
      << run;
  const CliRun none = exec({"-n", "1"}, {"CUDA_VISIBLE_DEVICES=NoDevFiles"});
  EXPECT_EQ(none.exitCode, 1) << none;
  EXPECT_THAT(firstLine(none.err), HasSubstr("CUDA_VISIBLE_DEVICES=NoDevFiles hides every GPU"))
      << none;
}

TEST_F(RealHostCliTest, TheMaskAppliesToNvidiaSmisGpusToo) {
  // No NVML: nvidia-smi's GPUs, read against the mask the same way.
  writeScript(dir_ / "bin" / "nvidia-smi", std::string("#!/bin/sh\nprintf '0, ") + kGpu0 +
                                               ", NVIDIA H200, 00000000:19:00.0, 143771\\n1, " +
                                               kGpu1 +
                                               ", NVIDIA H200, 00000000:3B:00.0, 143771\\n'\n");
  const std::vector<std::string> env{
      "FLINK_GPU_NVML_LIBRARY=" + (dir_ / "none" / "libnvidia-ml.so.1").string(),
      "CUDA_VISIBLE_DEVICES=GPU-3a41,0"};
  const CliRun run = discover(2, env, "", "text");
  ASSERT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, "GPU Device(GPU-3a41)\nGPU Device(0)\n");
}

// --- 3. a broken GPU never takes the others down ----------------------------------------------

TEST_F(RealHostCliTest, ALostGpuIsLeftOutAndNamedAtTheDefaultVerbosity) {
  host({gpuJson(kGpu0, "00000000:19:00.0"), gpuJson(kGpu1, "00000000:3B:00.0", R"(, "lost": true)"),
        gpuJson(kGpu2, "00000000:5D:00.0", R"(, "accessible": false)")});
  const CliRun run = discover(1, {}, "", "text");
  ASSERT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, "GPU Device(0)\n");
  EXPECT_THAT(run.err, HasSubstr("GPU 1 left out: nvmlDeviceGetUUID failed: GPU is lost")) << run;
  EXPECT_THAT(run.err, HasSubstr("GPU 2 left out: nvmlDeviceGetHandleByIndex_v2 failed: "
                                 "Insufficient Permissions"))
      << run;
  // Too many asked: the GPUs left out are not counted.
  const CliRun two = discover(2, {});
  EXPECT_EQ(two.exitCode, 1) << two;
  EXPECT_THAT(firstLine(two.err), HasSubstr("only 1 GPU(s) found, 2 requested")) << two;

  const CliRun exec1 = exec({"-n", "1"}, {});
  ASSERT_EQ(exec1.exitCode, 0) << exec1;
  EXPECT_EQ(exec1.out, "0 PCI_BUS_ID\n");
  EXPECT_THAT(exec1.err, HasSubstr("flink-gpu: warning: NVML: GPU 1 left out")) << exec1;

  // status, with a record to show, names them too, and still shows the record.
  const std::unique_ptr<Background> held = owner();
  ASSERT_EQ(allocate(1, *held, "0").exitCode, 0);
  const CliRun status = runCli({"status", "--coordination-file", file()}, environment());
  ASSERT_EQ(status.exitCode, 0) << status;
  EXPECT_THAT(status.err, HasSubstr("flink-gpu: warning: NVML: GPU 1 left out")) << status;
  EXPECT_THAT(status.out, HasSubstr(held->pidText())) << status;
}

TEST_F(RealHostCliTest, WhenEveryGpuIsBrokenDiscoveryFailsNamingEach) {
  host({gpuJson(kGpu0, "00000000:19:00.0", R"(, "lost": true)"),
        gpuJson(kGpu1, "00000000:3B:00.0", R"(, "handle_error": 999)")});
  const CliRun run = discover(1, {});
  EXPECT_EQ(run.exitCode, 1) << run;
  EXPECT_THAT(firstLine(run.err), HasSubstr("no usable NVIDIA GPU: NVML lists 2 GPU(s), and every "
                                            "one is left out: GPU 0: nvmlDeviceGetUUID failed: "
                                            "GPU is lost"))
      << run;
  // The whole cause is in the script's stderr, which the error quotes after its first line.
  EXPECT_THAT(run.err, HasSubstr("; GPU 1: nvmlDeviceGetHandleByIndex_v2 failed: Unknown Error "
                                 "(NVML_ERROR_UNKNOWN, 999)"))
      << run;
}

TEST_F(RealHostCliTest, NvidiaSmisErrorLineForOneGpuLeavesOnlyThatOneOut) {
  // No NVML: nvidia-smi lists two good GPUs and one it cannot open, and exits 15.
  writeScript(dir_ / "bin" / "nvidia-smi",
              std::string("#!/bin/sh\nprintf '0, ") + kGpu0 +
                  ", NVIDIA H200, 00000000:19:00.0, 143771\\n"
                  "Unable to determine the device handle for GPU 0000:3B:00.0: Unknown Error\\n"
                  "2, " +
                  kGpu2 + ", NVIDIA H200, 00000000:5D:00.0, 143771\\n'\nexit 15\n");
  const std::vector<std::string> noNvml{"FLINK_GPU_NVML_LIBRARY=" +
                                        (dir_ / "none" / "libnvidia-ml.so.1").string()};
  const CliRun run = discover(2, noNvml, "", "text");
  ASSERT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, "GPU Device(0)\nGPU Device(2)\n");
  EXPECT_THAT(run.err, HasSubstr("GPU 0000:3B:00.0 left out: Unable to determine the device handle "
                                 "for GPU 0000:3B:00.0: Unknown Error"))
      << run;
  EXPECT_THAT(run.err, Not(HasSubstr("exited with code 15"))) << run;
}

// --- 4. NVML as it really answers ----------------------------------------------------------------

TEST_F(RealHostCliTest, ADriverWithoutGpusSaysSo) {
  host({});
  const CliRun run = discover(1, {});
  EXPECT_EQ(run.exitCode, 1) << run;
  EXPECT_THAT(firstLine(run.err), HasSubstr("no NVIDIA GPU on this host")) << run;
  EXPECT_THAT(run.err, Not(HasSubstr("NVML is not usable"))) << run;
}

TEST_F(RealHostCliTest, AMigGpuWithoutPrivilegesHasNoMemoryAndNoWarning) {
  std::ofstream(dir_ / "host.json") << R"({"privileged": false, "devices": [)"
                                    << gpuJson(kGpu0, "00000000:19:00.0",
                                               R"(, "mig_enabled": true, "mig": [{"uuid": )"
                                               R"("MIG-0b6c1a2d-3e4f-5a6b-7c8d-9e0f1a2b3c4d", )"
                                               R"("memory_total_mib": 16384}])")
                                    << "]}";
  const CliRun run = discover(1, {}, "--mig");
  ASSERT_EQ(run.exitCode, 0) << run;
  const nlohmann::json answer = nlohmann::json::parse(run.out);
  EXPECT_EQ(answer.at("gpu").at(0).at("memory.total"), "16384");
  EXPECT_THAT(run.err, Not(HasSubstr("warning"))) << run;
  EXPECT_THAT(run.err, Not(HasSubstr("Insufficient Permissions"))) << run;
}

// D4 of the break-it round: a lease keeps its GPU from every worker, however the worker names
// the GPU. After `release --force` removed the record of a GPU whose lease is held, a worker that
// knows the GPU only by its index (no NVML, --gpus) does not get what one with NVML leased, and
// one with NVML does not get what an index-only worker leased.
TEST_F(RealHostCliTest, AHeldLeaseKeepsItsGpuFromAWorkerThatNamesItAnotherWay) {
  const std::vector<std::string> noNvml{"FLINK_GPU_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1"};
  for (const bool holderHasNvml : {true, false}) {
    SCOPED_TRACE(holderHasNvml ? "held with NVML" : "held by index alone");
    fs::remove_all(dir_ / "coordination.leases");
    fs::remove(file());
    std::vector<std::string> command{"/usr/bin/env"};
    for (const std::string& variable :
         environment(holderHasNvml ? std::vector<std::string>{} : noNvml)) {
      command.push_back(variable);
    }
    command.insert(command.end(), {flink::testing::kCli, "exec", "--coordination-file", file(),
                                   "-n", "1", "--gpus", "0", "--", sleepPath(), "60"});
    Background holder(command, dir_ / "holder.log");
    for (int i = 0; i < 500 && records().empty(); ++i) std::this_thread::sleep_for(10ms);
    ASSERT_EQ(records().size(), 1u) << flink::testing::readFile(dir_ / "holder.log");
    const CliRun release =
        runCli({"release", "--coordination-file", file(), "--gpu", "0", "--force"},
               environment(holderHasNvml ? std::vector<std::string>{} : noNvml));
    ASSERT_EQ(release.exitCode, 0) << release;
    ASSERT_TRUE(records().empty());
    // The worker that names it the other way.
    const CliRun other =
        holderHasNvml ? exec({"-n", "1", "--gpus", "0"}, noNvml) : exec({"-n", "3"}, {});
    EXPECT_EQ(other.exitCode, 1) << other;
    EXPECT_THAT(other.err, HasSubstr("GPU 0 is held by a lease of another process")) << other;
  }
}

}  // namespace
}  // namespace real_host_cli_test
