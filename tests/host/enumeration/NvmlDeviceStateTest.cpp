// The device-state binding (host/nvml/NvmlDeviceState.h) against the stand-in libnvidia-ml.so.1
// variants (tests/fixtures/nvml/): the process lists and their fall-backs, memory with and without
// the reserved part, NVIDIA's recovery action, the NVLink fabric registration, the compute mode.
#include "host/nvml/NvmlDeviceState.h"

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "TestSupport.h"
#include "host/nvml/Nvml.h"

#ifndef FAKE_NVML_FULL
#error "FAKE_NVML_FULL (the path of the stand-in libnvidia-ml.so.1) must be set by the build"
#endif

namespace flink::nvml {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::Optional;
using testing::ScopedEnvironment;
using testing::TempDir;

constexpr std::uint64_t kMiB = 1024ULL * 1024ULL;

class NvmlDeviceStateTest : public ::testing::Test {
 protected:
  void SetUp() override { library_.set(FAKE_NVML_FULL); }

  /// A host whose GPU 0 is an H200 with `members` added; GPU 1 a plain one.
  void host(const std::string& members, const std::string& root = "") {
    const fs::path file = dir_ / ("host" + std::to_string(++hosts_) + ".json");
    testing::writeScript(file,
                         R"({)" + root + R"("devices": [{"uuid": "GPU-0", "name": "NVIDIA H200",
                             "memory_total_mib": 143771, "mig_enabled": false)" +
                             members + R"(}, {"uuid": "GPU-1", "memory_total_mib": 143771}]})",
                         fs::perms::owner_read | fs::perms::owner_write);
    devices_.set(file.string());
  }

  TempDir dir_{"nvml-state-test"};
  ScopedEnvironment library_{kLibraryEnvironmentVariable};
  ScopedEnvironment devices_{"FAKE_NVML_DEVICES"};
  int hosts_ = 0;
};

TEST_F(NvmlDeviceStateTest, ListsTheProcessesOfEachListOnceWithTheirMemory) {
  host(R"(, "processes": [{"pid": 4242, "used_mib": 8192},
                          {"pid": 77, "list": "graphics", "used_mib": 10},
                          {"pid": 77, "used_mib": 300},
                          {"pid": 900, "list": "mps"}])");
  const NvmlSession session(NvmlLibrary::load());
  const DeviceStateApi api(session.library());
  const Result<std::vector<Process>> all = api.runningProcesses(session.deviceByIndex(0).value);
  ASSERT_TRUE(all.ok());
  EXPECT_STREQ(all.function, "nvmlDeviceGetComputeRunningProcesses_v3");
  ASSERT_EQ(all.value.size(), 3u);
  EXPECT_EQ(all.value[0].pid, 4242u);
  EXPECT_THAT(all.value[0].usedBytes, Optional(8192 * kMiB));
  EXPECT_EQ(all.value[0].lists, kComputeProcess);
  EXPECT_EQ(all.value[0].gpuInstanceId, std::nullopt);
  EXPECT_EQ(all.value[1].pid, 77u);
  EXPECT_EQ(all.value[1].lists, kComputeProcess | kGraphicsProcess);
  EXPECT_THAT(all.value[1].usedBytes, Optional(300 * kMiB)) << "the largest any list gave";
  EXPECT_EQ(all.value[2].pid, 900u);
  EXPECT_EQ(all.value[2].lists, kMpsProcess);
  EXPECT_EQ(all.value[2].usedBytes, std::nullopt) << "NVML_VALUE_NOT_AVAILABLE";

  const Result<std::vector<Process>> idle = api.runningProcesses(session.deviceByIndex(1).value);
  ASSERT_TRUE(idle.ok());
  EXPECT_TRUE(idle.value.empty());
}

TEST_F(NvmlDeviceStateTest, GrowsTheBufferForManyProcesses) {
  std::string processes;
  for (unsigned pid = 1000; pid < 1100; ++pid) {
    processes += (processes.empty() ? "" : ", ") + std::string(R"({"pid": )") +
                 std::to_string(pid) + R"(, "used_mib": 1})";
  }
  host(R"(, "processes": [)" + processes + "]");
  const NvmlSession session(NvmlLibrary::load());
  const Result<std::vector<Process>> all =
      DeviceStateApi(session.library()).runningProcesses(session.deviceByIndex(0).value);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all.value.size(), 100u);
  EXPECT_EQ(all.value.back().pid, 1099u);
}

TEST_F(NvmlDeviceStateTest, MigInstancesListTheirOwnAndTheirGpuListsAllToRootOnly) {
  const std::string mig = R"(, "mig_enabled": true, "processes": [], "mig": [
      {"uuid": "MIG-a", "gpu_instance_id": 1, "compute_instance_id": 0,
       "processes": [{"pid": 10, "used_mib": 5}]},
      {"uuid": "MIG-b", "gpu_instance_id": 2, "compute_instance_id": 0,
       "processes": [{"pid": 20, "used_mib": 6}]}])";
  host(mig, R"("privileged": true, )");
  {
    const NvmlSession session(NvmlLibrary::load());
    const DeviceStateApi api(session.library());
    const Device gpu = session.deviceByIndex(0).value;
    const Result<std::vector<Process>> instance =
        api.runningProcesses(gpu.migDeviceByIndex(1).value);
    ASSERT_TRUE(instance.ok());
    ASSERT_EQ(instance.value.size(), 1u);
    EXPECT_EQ(instance.value[0].pid, 20u);
    EXPECT_THAT(instance.value[0].gpuInstanceId, Optional(2u));
    EXPECT_THAT(instance.value[0].computeInstanceId, Optional(0u));
    const Result<std::vector<Process>> whole = api.runningProcesses(gpu);
    ASSERT_TRUE(whole.ok());
    EXPECT_THAT(whole.value, ElementsAre(Field(&Process::pid, 10u), Field(&Process::pid, 20u)));
  }
  host(mig, R"("privileged": false, )");
  const NvmlSession session(NvmlLibrary::load());
  EXPECT_EQ(DeviceStateApi(session.library()).runningProcesses(session.deviceByIndex(0).value).code,
            Return::kNoPermission);
}

TEST_F(NvmlDeviceStateTest, ALostGpuAndAFailingListSayWhy) {
  host(R"(, "lost": true)");
  {
    const NvmlSession session(NvmlLibrary::load());
    const DeviceStateApi api(session.library());
    EXPECT_EQ(api.runningProcesses(session.deviceByIndex(0).value).code, Return::kGpuIsLost);
    EXPECT_EQ(api.recoveryAction(session.deviceByIndex(0).value).code, Return::kGpuIsLost);
  }
  host(R"(, "processes": {"error": 16})");
  const NvmlSession session(NvmlLibrary::load());
  EXPECT_EQ(DeviceStateApi(session.library()).runningProcesses(session.deviceByIndex(0).value).code,
            Return::kResetRequired);
}

TEST_F(NvmlDeviceStateTest, OlderDriversAnswerThroughTheUnversionedCalls) {
  library_.set(FAKE_NVML_PLAIN);
  host(R"(, "processes": [{"pid": 4242, "used_mib": 8192}], "memory_used_mib": 100,
          "memory_reserved_mib": 500, "fabric": {"state": 3})");
  const NvmlSession session(NvmlLibrary::load());
  const DeviceStateApi api(session.library());
  const Device gpu = session.deviceByIndex(0).value;
  const Result<std::vector<Process>> all = api.runningProcesses(gpu);
  ASSERT_TRUE(all.ok());
  EXPECT_STREQ(all.function, "nvmlDeviceGetComputeRunningProcesses");
  ASSERT_EQ(all.value.size(), 1u);
  EXPECT_EQ(all.value[0].pid, 4242u);
  EXPECT_EQ(all.value[0].gpuInstanceId, std::nullopt);

  const Result<MemoryUse> memory = api.memoryUse(gpu);
  ASSERT_TRUE(memory.ok());
  EXPECT_STREQ(memory.function, "nvmlDeviceGetMemoryInfo");
  EXPECT_EQ(memory.value.usedBytes, 600 * kMiB) << "v1 counts the reserved memory as used";
  EXPECT_EQ(memory.value.reservedBytes, std::nullopt);

  const Result<FabricInfo> fabric = api.fabricInfo(gpu);
  ASSERT_TRUE(fabric.ok());
  EXPECT_STREQ(fabric.function, "nvmlDeviceGetGpuFabricInfo");
  EXPECT_EQ(fabric.value.healthMask, std::nullopt);
}

TEST_F(NvmlDeviceStateTest, MemoryV2KeepsTheReservedPartApart) {
  host(R"(, "memory_used_mib": 100, "memory_reserved_mib": 500)");
  const NvmlSession session(NvmlLibrary::load());
  const Result<MemoryUse> memory =
      DeviceStateApi(session.library()).memoryUse(session.deviceByIndex(0).value);
  ASSERT_TRUE(memory.ok());
  EXPECT_STREQ(memory.function, "nvmlDeviceGetMemoryInfo_v2");
  EXPECT_EQ(memory.value.totalBytes, 143771 * kMiB);
  EXPECT_EQ(memory.value.usedBytes, 100 * kMiB);
  EXPECT_THAT(memory.value.reservedBytes, Optional(500 * kMiB));
}

TEST_F(NvmlDeviceStateTest, ReadsEveryRecoveryActionAndNamesItInNvidiasWords) {
  const std::vector<std::string> words = {"none",
                                          "requires a GPU reset",
                                          "requires a node reboot",
                                          "drain peer-to-peer traffic",
                                          "drain and reset",
                                          "recover the IMEX domain",
                                          "unknown recovery action 6"};
  for (unsigned action = 0; action <= 6; ++action) {
    host(R"(, "recovery_action": )" + std::to_string(action));
    const NvmlSession session(NvmlLibrary::load());
    const Result<unsigned> read =
        DeviceStateApi(session.library()).recoveryAction(session.deviceByIndex(0).value);
    ASSERT_TRUE(read.ok()) << action;
    EXPECT_EQ(read.value, action);
    EXPECT_EQ(recoveryActionText(read.value), words[action]);
  }
  const NvmlSession session(NvmlLibrary::load());
  const DeviceStateApi api(session.library());
  EXPECT_EQ(api.recoveryAction(session.deviceByIndex(1).value).code, Return::kNotSupported)
      << "a driver without the field answers so in the field's own code";
}

TEST_F(NvmlDeviceStateTest, ARecoveryActionFollowsItsTimeline) {
  host(R"(, "recovery_action": [{"after_ms": 0, "action": 1}, {"after_ms": 300, "action": 0}])");
  const NvmlSession session(NvmlLibrary::load());
  const DeviceStateApi api(session.library());
  const Device gpu = session.deviceByIndex(0).value;
  // The stand-in counts from its first init in this process, which may be an earlier test's:
  // wait until the last step is due rather than assert the first.
  for (int i = 0; i < 100 && api.recoveryAction(gpu).value != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(api.recoveryAction(gpu).value, 0u);
}

TEST_F(NvmlDeviceStateTest, ReadsTheFabricRegistrationFromEitherStructVersion) {
  const std::string fabric = R"("state": 3, "status": 0, "clique_id": 7,
      "cluster_uuid": "0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9", "health_mask": 1,
      "health_summary": 3)";
  for (const std::string version : {"v3", "v2"}) {
    host(R"(, "fabric": {)" + fabric + R"(, "struct": ")" + version + R"("})");
    const NvmlSession session(NvmlLibrary::load());
    const Result<FabricInfo> read =
        DeviceStateApi(session.library()).fabricInfo(session.deviceByIndex(0).value);
    ASSERT_TRUE(read.ok()) << version;
    EXPECT_STREQ(read.function, "nvmlDeviceGetGpuFabricInfoV");
    EXPECT_EQ(read.value.state, 3u);
    EXPECT_EQ(fabricStateText(read.value.state), "completed");
    EXPECT_EQ(read.value.status, Return::kSuccess);
    EXPECT_EQ(read.value.cliqueId, 7u);
    EXPECT_THAT(read.value.clusterUuidText(),
                Optional(std::string("0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9")));
    EXPECT_TRUE(read.value.degradedBandwidth());
    EXPECT_EQ(read.value.healthSummary,
              version == "v3" ? std::optional<unsigned>(3) : std::nullopt);
  }
  host(R"(, "fabric": {"state": 2})");
  const NvmlSession session(NvmlLibrary::load());
  const DeviceStateApi api(session.library());
  const Result<FabricInfo> registering = api.fabricInfo(session.deviceByIndex(0).value);
  ASSERT_TRUE(registering.ok());
  EXPECT_EQ(fabricStateText(registering.value.state), "in progress");
  EXPECT_EQ(registering.value.clusterUuidText(), std::nullopt);
  EXPECT_FALSE(registering.value.degradedBandwidth());
  EXPECT_EQ(api.fabricInfo(session.deviceByIndex(1).value).code, Return::kNotSupported);
}

TEST_F(NvmlDeviceStateTest, ReadsTheComputeMode) {
  host(R"(, "compute_mode": 3)");
  const NvmlSession session(NvmlLibrary::load());
  const DeviceStateApi api(session.library());
  const Result<ComputeMode> mode = api.computeMode(session.deviceByIndex(0).value);
  ASSERT_TRUE(mode.ok());
  EXPECT_EQ(mode.value, ComputeMode::kExclusiveProcess);
  EXPECT_EQ(api.computeMode(session.deviceByIndex(1).value).code, Return::kNotSupported);
}

TEST_F(NvmlDeviceStateTest, ALibraryWithoutTheCallsSaysSoWithoutCallingAnything) {
  library_.set(FAKE_NVML_REQUIRED_ONLY);
  host(R"(, "processes": [{"pid": 1}], "recovery_action": 1, "fabric": {"state": 2},
          "compute_mode": 3)");
  const NvmlSession session(NvmlLibrary::load());
  const DeviceStateApi api(session.library());
  const Device gpu = session.deviceByIndex(0).value;
  EXPECT_EQ(api.runningProcesses(gpu).code, Return::kFunctionNotFound);
  EXPECT_EQ(api.memoryUse(gpu).code, Return::kFunctionNotFound);
  EXPECT_EQ(api.recoveryAction(gpu).code, Return::kFunctionNotFound);
  EXPECT_EQ(api.fabricInfo(gpu).code, Return::kFunctionNotFound);
  EXPECT_EQ(api.computeMode(gpu).code, Return::kFunctionNotFound);
}

}  // namespace
}  // namespace flink::nvml
