// NvmlEnumerator and the NVML binding under it, against the stand-in libnvidia-ml.so.1 variants
// (tests/fixtures/nvml/FakeNvml.cpp): the build passes their paths in as FAKE_NVML_*; each test
// points $FLINK_GPU_NVML_LIBRARY at one of them and describes the host in a JSON file
// ($FAKE_NVML_DEVICES), and reads back which NVML calls were made ($FAKE_NVML_CALL_LOG). Every
// variable is put back as it was after each test.
#include "host/enumeration/NvmlEnumerator.h"

#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "TestSupport.h"
#include "host/nvml/Nvml.h"
#include "host/nvml/NvmlHealth.h"

#ifndef FAKE_NVML_FULL
#error "FAKE_NVML_FULL (the path of the stand-in libnvidia-ml.so.1) must be set by the build"
#endif

namespace flink::discovery {
namespace {

namespace fs = std::filesystem;
using nvml::Device;
using nvml::kLibraryEnvironmentVariable;
using nvml::Memory;
using nvml::NvmlError;
using nvml::NvmlLibrary;
using nvml::NvmlSession;
using nvml::PciInfo;
using nvml::Result;
using nvml::Return;
using ::testing::HasSubstr;
using testing::readLines;
using testing::ScopedEnvironment;
using ::testing::StartsWith;
using testing::TempDir;

constexpr const char* kGpu0 = "GPU-4f5a0c2e-8b1d-4c55-9e0a-6a1f3b2c7d10";
constexpr const char* kGpu1 = "GPU-9d3e7b21-0c4a-4f6e-8b52-1e7c9a4d3f22";
constexpr const char* kGpu2 = "GPU-2a3b4c5d-0c4a-4f6e-8b52-1e7c9a4d3f33";
constexpr const char* kGpu3 = "GPU-3a3b4c5d-0c4a-4f6e-8b52-1e7c9a4d3f44";
constexpr const char* kMigA = "MIG-0b6c1a2d-3e4f-5a6b-7c8d-9e0f1a2b3c4d";
constexpr const char* kMigB = "MIG-1c7d2b3e-4f5a-6b7c-8d9e-0f1a2b3c4d5e";

/// A whole H200 with every property, as JSON.
std::string h200(const std::string& uuid, const std::string& busId, unsigned minor,
                 const std::string& extra = "") {
  return R"({"uuid": ")" + uuid + R"(", "name": "NVIDIA H200", "pci_bus_id": ")" + busId +
         R"(", "memory_total_mib": 143771, "minor_number": )" + std::to_string(minor) +
         R"(, "mig_enabled": false)" + extra + "}";
}

class NvmlEnumeratorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    library_.set(FAKE_NVML_FULL);
    callLog_.set(callLogPath().string());
    devices_.unset();
  }

  fs::path callLogPath() const { return dir_ / "calls.log"; }

  /// Describes the stand-in's host: `json` goes into the file $FAKE_NVML_DEVICES names.
  void host(const std::string& json) {
    const fs::path file = dir_ / ("host" + std::to_string(++hosts_) + ".json");
    testing::writeScript(file, json, fs::perms::owner_read | fs::perms::owner_write);
    devices_.set(file.string());
  }

  /// A host of `devices` (the inside of the "devices" array).
  void hostOf(const std::string& devices) { host(R"({"devices": [)" + devices + "]}"); }

  void useLibrary(const std::string& path) const { library_.set(path); }

  static Enumeration enumerate() { return NvmlEnumerator().enumerate(); }

  /// The DiscoveryError enumerating throws.
  static DiscoveryError errorOf(NvmlEnumerator enumerator = NvmlEnumerator()) {
    try {
      enumerator.enumerate();
    } catch (const DiscoveryError& e) {
      return e;
    }
    ADD_FAILURE() << "no DiscoveryError";
    return DiscoveryError("none");
  }

  /// The stand-in's calls so far, "<function> <code>" each.
  std::vector<std::string> calls() const { return readLines(callLogPath()); }

  /// Successful inits and shutdowns in the call log.
  std::pair<int, int> sessions() const {
    int inits = 0;
    int shutdowns = 0;
    for (const std::string& call : calls()) {
      if (call == "nvmlInitWithFlags 0" || call == "nvmlInit_v2 0" || call == "nvmlInit 0") {
        ++inits;
      }
      if (call == "nvmlShutdown 0") ++shutdowns;
    }
    return {inits, shutdowns};
  }

  void expectEverySessionShutDown() const {
    const auto [inits, shutdowns] = sessions();
    EXPECT_GT(inits, 0);
    EXPECT_EQ(inits, shutdowns) << "calls:\n" << ::testing::PrintToString(calls());
  }

  TempDir dir_{"nvml-test"};
  ScopedEnvironment library_{kLibraryEnvironmentVariable};
  ScopedEnvironment devices_{"FAKE_NVML_DEVICES"};
  ScopedEnvironment callLog_{"FAKE_NVML_CALL_LOG"};
  int hosts_ = 0;
};

TEST_F(NvmlEnumeratorTest, ListsWholeGpusWithEveryProperty) {
  hostOf(h200(kGpu0, "00000000:19:00.0", 0) + ", " + h200(kGpu1, "00000000:3B:00.0", 1));
  const Enumeration listed = enumerate();

  ASSERT_EQ(listed.devices.size(), 2u);
  const GpuDevice& first = listed.devices[0];
  EXPECT_EQ(first.identifier, "0");
  EXPECT_EQ(first.uuid, kGpu0);
  EXPECT_EQ(first.name, "NVIDIA H200");
  EXPECT_EQ(first.pciBusId, "00000000:19:00.0");
  EXPECT_EQ(first.memoryTotalMiB, 143771u);
  EXPECT_EQ(first.minorNumber, 0u);
  EXPECT_FALSE(first.migEnabled);
  EXPECT_FALSE(first.isMigInstance());
  const GpuDevice& second = listed.devices[1];
  EXPECT_EQ(second.identifier, "1");
  EXPECT_EQ(second.uuid, kGpu1);
  EXPECT_EQ(second.pciBusId, "00000000:3B:00.0");
  EXPECT_EQ(second.minorNumber, 1u);
  EXPECT_TRUE(linesOf(listed.notices).empty()) << ::testing::PrintToString(linesOf(listed.notices));

  // The versioned functions, one session.
  EXPECT_EQ(calls(),
            (std::vector<std::string>{"nvmlInitWithFlags 0", "nvmlDeviceGetCount_v2 0",
                                      "nvmlDeviceGetHandleByIndex_v2 0",
                                      "nvmlDeviceGetHandleByIndex_v2 0", "nvmlShutdown 0"}));
}

TEST_F(NvmlEnumeratorTest, MemoryIsReadInBytesAndRoundedDownToWholeMiB) {
  // 143771 MiB and 1 MiB less one byte.
  constexpr unsigned long long kBytes = 143771ull * 1048576 + 1048575;
  hostOf(
      h200(kGpu0, "00000000:19:00.0", 0, R"(, "memory_total_bytes": )" + std::to_string(kBytes)));
  EXPECT_EQ(enumerate().devices.at(0).memoryTotalMiB, 143771u);

  const std::shared_ptr<const NvmlLibrary> library = NvmlLibrary::load();
  const NvmlSession session(library);
  const Result<Device> gpu = session.deviceByIndex(0);
  ASSERT_TRUE(gpu.ok());
  const Result<Memory> memory = gpu.value.memoryInfo();
  ASSERT_TRUE(memory.ok());
  EXPECT_STREQ(memory.function, "nvmlDeviceGetMemoryInfo");
  EXPECT_EQ(memory.value.totalBytes, kBytes);
  EXPECT_EQ(memory.value.freeBytes + memory.value.usedBytes, memory.value.totalBytes);
}

TEST_F(NvmlEnumeratorTest, NotSupportedPropertiesAreUnknownNotMadeUp) {
  // name null, no pci_bus_id / memory / minor number / MIG mode at all: NOT_SUPPORTED each.
  hostOf(R"({"uuid": ")" + std::string(kGpu0) + R"(", "name": null})");
  const Enumeration listed = enumerate();

  ASSERT_EQ(listed.devices.size(), 1u);
  const GpuDevice& gpu = listed.devices[0];
  EXPECT_EQ(gpu.identifier, "0");
  EXPECT_EQ(gpu.uuid, kGpu0);
  EXPECT_EQ(gpu.name, std::nullopt);
  EXPECT_EQ(gpu.pciBusId, std::nullopt);
  EXPECT_EQ(gpu.memoryTotalMiB, std::nullopt);
  EXPECT_EQ(gpu.minorNumber, std::nullopt);
  EXPECT_FALSE(gpu.migEnabled);
  // "Not supported" is an answer, not a problem: nothing to warn about.
  EXPECT_TRUE(linesOf(listed.notices).empty()) << ::testing::PrintToString(linesOf(listed.notices));
}

TEST_F(NvmlEnumeratorTest, OtherPropertyErrorsAreUnknownAndReported) {
  hostOf(h200(kGpu0, "00000000:19:00.0", 0, R"(, "uuid": {"error": 10})") + ", " +
         h200(kGpu1, "00000000:3B:00.0", 1, R"(, "memory_total_mib": {"error": 14})"));
  const Enumeration listed = enumerate();

  ASSERT_EQ(listed.devices.size(), 2u);
  EXPECT_EQ(listed.devices[0].uuid, std::nullopt);
  EXPECT_EQ(listed.devices[0].name, "NVIDIA H200");  // the rest of the GPU is still read
  EXPECT_EQ(listed.devices[1].memoryTotalMiB, std::nullopt);
  EXPECT_EQ(linesOf(listed.notices),
            (std::vector<std::string>{
                "warning: NVML: GPU 0: nvmlDeviceGetUUID failed: Timeout (NVML_ERROR_TIMEOUT, 10)",
                "warning: NVML: GPU 1: nvmlDeviceGetMemoryInfo failed: Corrupted infoROM "
                "(NVML_ERROR_CORRUPTED_INFOROM, 14)"}));
  EXPECT_TRUE(listed.leftOut.empty());
}

// ---- Hosts as they really are: lost and denied GPUs, MIG without privileges, no GPU ----

TEST_F(NvmlEnumeratorTest, AGpuWhoseNeededQueryFailsBadlyIsLeftOutAndTheOthersListed) {
  // GPU 0: lost after its handle was given (Xid 79); GPU 1: its UUID query fails with UNKNOWN;
  // GPU 2: memory denied (NO_PERMISSION) without MIG; GPU 3 is healthy.
  hostOf(h200(kGpu0, "00000000:19:00.0", 0, R"(, "lost": true)") + ", " +
         h200(kGpu1, "00000000:3B:00.0", 1, R"(, "uuid": {"error": 999})") + ", " +
         h200("GPU-2", "00000000:5D:00.0", 2, R"(, "memory_total_mib": {"error": 4})") + ", " +
         h200("GPU-3", "00000000:7F:00.0", 3));
  const Enumeration listed = enumerate();

  EXPECT_EQ(discovery::identifiersOf(listed.devices), (std::vector<std::string>{"3"}));
  ASSERT_EQ(listed.leftOut.size(), 3u);
  EXPECT_EQ(listed.leftOut[0].gpu, "GPU 0");  // lost: not even its PCI bus id is known
  EXPECT_EQ(listed.leftOut[0].error,
            "nvmlDeviceGetUUID failed: GPU is lost (NVML_ERROR_GPU_IS_LOST, 15)");
  EXPECT_EQ(listed.leftOut[1].gpu, "GPU 1 (00000000:3B:00.0)");
  EXPECT_EQ(listed.leftOut[1].error,
            "nvmlDeviceGetUUID failed: Unknown Error (NVML_ERROR_UNKNOWN, 999)");
  EXPECT_EQ(listed.leftOut[2].error,
            "nvmlDeviceGetMemoryInfo failed: Insufficient Permissions (NVML_ERROR_NO_PERMISSION, "
            "4)");
  EXPECT_EQ(linesOf(listed.notices),
            (std::vector<std::string>{
                "warning: NVML: GPU 0 left out: nvmlDeviceGetUUID failed: GPU is lost "
                "(NVML_ERROR_GPU_IS_LOST, 15)",
                "warning: NVML: GPU 1 (00000000:3B:00.0) left out: nvmlDeviceGetUUID failed: "
                "Unknown Error (NVML_ERROR_UNKNOWN, 999)",
                "warning: NVML: GPU 2 (00000000:5D:00.0) left out: nvmlDeviceGetMemoryInfo "
                "failed: Insufficient Permissions (NVML_ERROR_NO_PERMISSION, 4)"}));
  // Known as GPUs left out by their kind, not by their words.
  for (const Notice& notice : listed.notices) {
    EXPECT_EQ(notice.kind, Notice::Kind::kGpuLeftOut) << notice.line();
  }
  expectEverySessionShutDown();
}

TEST_F(NvmlEnumeratorTest, AGpuACgroupDeniesIsCountedByV2AndLeftOut) {
  // What NVML does under a cgroup that denies /dev/nvidia0: nvmlDeviceGetCount_v2 counts it,
  // its handle answers NO_PERMISSION, and the GPU the process may open keeps its index.
  hostOf(h200(kGpu0, "00000000:19:00.0", 0, R"(, "accessible": false)") + ", " +
         h200(kGpu1, "00000000:3B:00.0", 1));
  const Enumeration listed = enumerate();

  ASSERT_EQ(discovery::identifiersOf(listed.devices), (std::vector<std::string>{"1"}));
  EXPECT_EQ(listed.devices[0].uuid, kGpu1);
  ASSERT_EQ(listed.leftOut.size(), 1u);
  EXPECT_EQ(listed.leftOut[0].describe(),
            "GPU 0: nvmlDeviceGetHandleByIndex_v2 failed: Insufficient Permissions "
            "(NVML_ERROR_NO_PERMISSION, 4)");
  EXPECT_EQ(calls(),
            (std::vector<std::string>{"nvmlInitWithFlags 0", "nvmlDeviceGetCount_v2 0",
                                      "nvmlDeviceGetHandleByIndex_v2 4",
                                      "nvmlDeviceGetHandleByIndex_v2 0", "nvmlShutdown 0"}));

  // The v1 functions (the stand-in of an old driver) number only what may be opened.
  useLibrary(FAKE_NVML_PLAIN);
  const Enumeration old = enumerate();
  ASSERT_EQ(old.devices.size(), 1u);
  EXPECT_EQ(old.devices[0].identifier, "0");
  EXPECT_EQ(old.devices[0].uuid, kGpu1);
  EXPECT_TRUE(old.leftOut.empty());
}

TEST_F(NvmlEnumeratorTest, WhenEveryGpuIsLeftOutTheErrorNamesEachWithItsError) {
  hostOf(h200(kGpu0, "00000000:19:00.0", 0, R"(, "lost": true)") + ", " +
         h200(kGpu1, "00000000:3B:00.0", 1, R"(, "handle_error": 15)"));
  const DiscoveryError error = errorOf();
  EXPECT_STREQ(error.what(),
               "no usable NVIDIA GPU: NVML lists 2 GPU(s), and every one is left out: GPU 0: "
               "nvmlDeviceGetUUID failed: GPU is lost (NVML_ERROR_GPU_IS_LOST, 15); GPU 1: "
               "nvmlDeviceGetHandleByIndex_v2 failed: GPU is lost (NVML_ERROR_GPU_IS_LOST, 15)");
  // An answer, not a reason to ask nvidia-smi (built on NVML, it would say the same).
  EXPECT_THROW(attemptNvmlEnumeration(), DiscoveryError);
  expectEverySessionShutDown();
}

TEST_F(NvmlEnumeratorTest, MigParentMemoryIsUnknownWithoutPrivilegesAndNoWarning) {
  const std::string migs = R"(, "mig_enabled": true, "mig": [{"uuid": ")" + std::string(kMigA) +
                           R"(", "memory_total_mib": 16384}])";
  host(R"({"privileged": false, "devices": [)" + h200(kGpu0, "00000000:19:00.0", 0, migs) + ", " +
       h200(kGpu1, "00000000:3B:00.0", 1) + "]}");
  const Enumeration listed = enumerate();

  ASSERT_EQ(discovery::identifiersOf(listed.devices), (std::vector<std::string>{"0", kMigA, "1"}));
  EXPECT_EQ(listed.devices[0].memoryTotalMiB, std::nullopt);  // the parent's: root only
  EXPECT_EQ(listed.devices[1].memoryTotalMiB, 16384u);        // the instance keeps its own
  EXPECT_EQ(listed.devices[2].memoryTotalMiB, 143771u);       // no MIG: anyone may ask
  EXPECT_TRUE(linesOf(listed.notices).empty()) << ::testing::PrintToString(linesOf(listed.notices));
  EXPECT_TRUE(listed.leftOut.empty());

  // A privileged caller gets it.
  host(R"({"privileged": true, "devices": [)" + h200(kGpu0, "00000000:19:00.0", 0, migs) + "]}");
  EXPECT_EQ(enumerate().devices[0].memoryTotalMiB, 143771u);
}

TEST_F(NvmlEnumeratorTest, MigSlotsAnsweringInvalidArgumentAreEmptySlots) {
  hostOf(h200(kGpu0, "00000000:19:00.0", 0,
              R"(, "mig_enabled": true, "mig": [{"uuid": "MIG-x", "handle_error": 2}, {"uuid": ")" +
                  std::string(kMigB) + R"("}])"));
  const Enumeration listed = enumerate();
  EXPECT_EQ(discovery::identifiersOf(listed.devices), (std::vector<std::string>{"0", kMigB}));
  EXPECT_TRUE(linesOf(listed.notices).empty()) << ::testing::PrintToString(linesOf(listed.notices));
}

TEST_F(NvmlEnumeratorTest, ALostMigInstanceIsLeftOut) {
  hostOf(h200(kGpu0, "00000000:19:00.0", 0,
              R"(, "mig_enabled": true, "mig": [{"uuid": ")" + std::string(kMigA) +
                  R"(", "memory_total_mib": {"error": 15}}, {"uuid": ")" + std::string(kMigB) +
                  R"("}])"));
  const Enumeration listed = enumerate();
  EXPECT_EQ(discovery::identifiersOf(listed.devices), (std::vector<std::string>{"0", kMigB}));
  ASSERT_EQ(listed.leftOut.size(), 1u);
  EXPECT_EQ(listed.leftOut[0].gpu, "GPU 0 MIG slot 0 (" + std::string(kMigA) + ")");
}

TEST_F(NvmlEnumeratorTest, AHostWithoutGpusFailsAPlainInitAsTheDriverDoes) {
  // Without nvmlInitWithFlags (an old driver) such a host cannot be told from a broken one.
  useLibrary(FAKE_NVML_PLAIN);
  hostOf("");
  const DiscoveryError error = errorOf();
  EXPECT_THAT(error.what(), StartsWith("NVML is not usable: nvmlInit failed: Unknown Error"));
}

TEST_F(NvmlEnumeratorTest, ALibraryThatIsThereButCannotLoadSaysSo) {
  const fs::path bogus = dir_ / "present" / "libnvidia-ml.so.1";
  fs::create_directories(bogus.parent_path());
  testing::writeScript(bogus, "not an ELF file\n");
  try {
    NvmlLibrary::load(bogus.string());
    FAIL() << "no NvmlError";
  } catch (const NvmlError& e) {
    EXPECT_EQ(e.code(), Return::kLibraryNotFound);
    EXPECT_TRUE(e.libraryPresent());
    EXPECT_THAT(e.what(), StartsWith(bogus.string() + " is there but cannot be loaded: "));
  }
  useLibrary(bogus.string());
  const NvmlAttempt attempt = attemptNvmlEnumeration();
  EXPECT_FALSE(attempt.found.has_value());
  EXPECT_FALSE(attempt.libraryAbsent);

  // No file at all: absent, the driver is simply not installed.
  const fs::path missing = dir_ / "absent" / "libnvidia-ml.so.1";
  try {
    NvmlLibrary::load(missing.string());
    FAIL() << "no NvmlError";
  } catch (const NvmlError& e) {
    EXPECT_FALSE(e.libraryPresent());
  }
  useLibrary(missing.string());
  EXPECT_TRUE(attemptNvmlEnumeration().libraryAbsent);
}

TEST_F(NvmlEnumeratorTest, MigInstancesFollowTheirGpuInSlotOrder) {
  // GPU 0: MIG on, slots [A, empty, B, empty...]; GPU 1: MIG off.
  const std::string migs = R"(, "mig_enabled": true, "mig": [{"uuid": ")" + std::string(kMigA) +
                           R"(", "name": "NVIDIA H200 MIG 1g.18gb", "memory_total_mib": 16384, )"
                           R"("gpu_instance_id": 9, "compute_instance_id": 0}, null, {"uuid": ")" +
                           std::string(kMigB) +
                           R"(", "name": "NVIDIA H200 MIG 3g.71gb", "memory_total_mib": 71424, )"
                           R"("gpu_instance_id": 2, "compute_instance_id": 1}])";
  hostOf(h200(kGpu0, "00000000:19:00.0", 0, migs) + ", " + h200(kGpu1, "00000000:3B:00.0", 1));
  const Enumeration listed = enumerate();

  ASSERT_EQ(discovery::identifiersOf(listed.devices),
            (std::vector<std::string>{"0", kMigA, kMigB, "1"}));
  EXPECT_TRUE(listed.devices[0].migEnabled);
  EXPECT_FALSE(listed.devices[3].migEnabled);

  const GpuDevice& a = listed.devices[1];
  EXPECT_EQ(a.uuid, kMigA);
  EXPECT_EQ(a.name, "NVIDIA H200 MIG 1g.18gb");
  EXPECT_EQ(a.memoryTotalMiB, 16384u);
  EXPECT_EQ(a.pciBusId, "00000000:19:00.0");  // the parent's
  EXPECT_EQ(a.minorNumber, std::nullopt);
  EXPECT_FALSE(a.migEnabled);
  ASSERT_TRUE(a.mig.has_value());
  EXPECT_EQ(a.mig->parentIndex, 0u);
  EXPECT_EQ(a.mig->gpuInstanceId, 9u);
  EXPECT_EQ(a.mig->computeInstanceId, 0u);

  const GpuDevice& b = listed.devices[2];
  EXPECT_EQ(b.name, "NVIDIA H200 MIG 3g.71gb");
  ASSERT_TRUE(b.mig.has_value());
  EXPECT_EQ(b.mig->parentIndex, 0u);
  EXPECT_EQ(b.mig->gpuInstanceId, 2u);
  EXPECT_EQ(b.mig->computeInstanceId, 1u);

  // Empty slots are no news.
  EXPECT_TRUE(linesOf(listed.notices).empty()) << ::testing::PrintToString(linesOf(listed.notices));
  // What --mig hands out: the instances and the GPU without MIG, never GPU 0 itself.
  EXPECT_EQ(discovery::identifiersOf(discovery::allocatableUnits(listed.devices, true)),
            (std::vector<std::string>{kMigA, kMigB, "1"}));
  EXPECT_EQ(discovery::identifiersOf(discovery::allocatableUnits(listed.devices, false)),
            (std::vector<std::string>{"0", "1"}));
}

TEST_F(NvmlEnumeratorTest, ComputeCapabilityIsTheGpusAndItsInstancesHaveIt) {
  const std::string mig = R"(, "compute_capability": "9.0", "mig_enabled": true, "mig": [)"
                          R"({"uuid": ")" +
                          std::string(kMigA) + R"("}])";
  hostOf(h200(kGpu0, "00000000:19:00.0", 0, mig) + ", " +
         h200(kGpu1, "00000000:3B:00.0", 1, R"(, "compute_capability": "10.0")") + ", " +
         h200(kGpu2, "00000000:4C:00.0", 2, R"(, "compute_capability": {"error": 15})") + ", " +
         h200(kGpu3, "00000000:5D:00.0", 3));
  const Enumeration listed = enumerate();

  ASSERT_EQ(listed.devices.size(), 5u);
  EXPECT_EQ(listed.devices[0].computeCapability, (ComputeCapability{9, 0}));
  EXPECT_EQ(listed.devices[1].identifier, kMigA);
  EXPECT_EQ(listed.devices[1].computeCapability, (ComputeCapability{9, 0}));  // its GPU's
  EXPECT_EQ(listed.devices[2].computeCapability, (ComputeCapability{10, 0}));
  EXPECT_EQ(listed.devices[2].computeCapability->text(), "10.0");
  EXPECT_GT(*listed.devices[2].computeCapability, *listed.devices[0].computeCapability);
  // A failing query leaves it unknown and never the GPU out: discovery does not need it.
  EXPECT_EQ(listed.devices[3].identifier, "2");
  EXPECT_EQ(listed.devices[3].computeCapability, std::nullopt);
  // Not supported (the stand-in's answer where a host gives none): unknown, without a word.
  EXPECT_EQ(listed.devices[4].computeCapability, std::nullopt);
  EXPECT_EQ(linesOf(listed.notices),
            (std::vector<std::string>{
                "warning: NVML: GPU 2: nvmlDeviceGetCudaComputeCapability failed: GPU is lost "
                "(NVML_ERROR_GPU_IS_LOST, 15)"}));
}

TEST_F(NvmlEnumeratorTest, MigInstancePropertiesNotSupportedAreUnknown) {
  hostOf(h200(kGpu0, "00000000:19:00.0", 0,
              R"(, "mig_enabled": true, "mig": [{"uuid": ")" + std::string(kMigA) + R"("}])"));
  const Enumeration listed = enumerate();

  ASSERT_EQ(listed.devices.size(), 2u);
  const GpuDevice& mig = listed.devices[1];
  EXPECT_EQ(mig.identifier, kMigA);
  EXPECT_EQ(mig.name, std::nullopt);
  EXPECT_EQ(mig.memoryTotalMiB, std::nullopt);
  ASSERT_TRUE(mig.mig.has_value());
  EXPECT_EQ(mig.mig->gpuInstanceId, std::nullopt);
  EXPECT_EQ(mig.mig->computeInstanceId, std::nullopt);
}

TEST_F(NvmlEnumeratorTest, MigSlotThatFailsOrHasNoUuidIsLeftOutWithAWarning) {
  hostOf(h200(kGpu0, "00000000:19:00.0", 0,
              R"(, "mig_enabled": true, "mig": [{"uuid": "MIG-x", "handle_error": 15}, )"
              R"({"uuid": null}, {"uuid": ")" +
                  std::string(kMigB) + R"("}])"));
  const Enumeration listed = enumerate();

  EXPECT_EQ(discovery::identifiersOf(listed.devices), (std::vector<std::string>{"0", kMigB}));
  EXPECT_EQ(linesOf(listed.notices),
            (std::vector<std::string>{
                "warning: NVML: GPU 0 MIG slot 0 left out: nvmlDeviceGetMigDeviceHandleByIndex "
                "failed: GPU is lost (NVML_ERROR_GPU_IS_LOST, 15)",
                "warning: NVML: GPU 0 MIG slot 1 left out: nvmlDeviceGetUUID failed: Not "
                "Supported (NVML_ERROR_NOT_SUPPORTED, 3)"}));
}

TEST_F(NvmlEnumeratorTest, PendingMigModeIsNotEnabled) {
  // MIG switched on but not yet in force (it takes a GPU reset): a whole GPU, no instances.
  hostOf(h200(kGpu0, "00000000:19:00.0", 0, R"(, "mig_pending": true)"));
  const Enumeration listed = enumerate();
  ASSERT_EQ(listed.devices.size(), 1u);
  EXPECT_FALSE(listed.devices[0].migEnabled);
}

TEST_F(NvmlEnumeratorTest, GpuWithoutHandleIsLeftOutLikeNvidiaSmiDoes) {
  hostOf(h200(kGpu0, "00000000:19:00.0", 0) + ", " +
         h200(kGpu1, "00000000:3B:00.0", 1, R"(, "handle_error": 15)") + ", " +
         h200("GPU-2", "00000000:5D:00.0", 2));
  const Enumeration listed = enumerate();

  EXPECT_EQ(discovery::identifiersOf(listed.devices), (std::vector<std::string>{"0", "2"}));
  EXPECT_EQ(linesOf(listed.notices),
            (std::vector<std::string>{
                "warning: NVML: GPU 1 left out: nvmlDeviceGetHandleByIndex_v2 failed: GPU is "
                "lost (NVML_ERROR_GPU_IS_LOST, 15)"}));
  expectEverySessionShutDown();
}

TEST_F(NvmlEnumeratorTest, VersionMismatchAtInitIsNamed) {
  host(R"({"init_error": 18, "devices": []})");
  const DiscoveryError error = errorOf();

  EXPECT_STREQ(error.what(),
               "NVML is not usable: nvmlInitWithFlags failed: Driver/library version mismatch "
               "(NVML_ERROR_LIB_RM_VERSION_MISMATCH, 18)");
  ASSERT_FALSE(error.details().empty());
  EXPECT_EQ(error.details()[0], std::string("NVML library: ") + FAKE_NVML_FULL);
  // A failed init is not followed by a shutdown: NVML counts only the inits that succeed.
  EXPECT_EQ(calls(), (std::vector<std::string>{"nvmlInitWithFlags 18"}));
}

TEST_F(NvmlEnumeratorTest, InitErrorCarriesItsCode) {
  host(R"({"init_error": 9})");
  const std::shared_ptr<const NvmlLibrary> library = NvmlLibrary::load();
  try {
    NvmlSession session(library);
    FAIL() << "no NvmlError";
  } catch (const NvmlError& e) {
    EXPECT_EQ(e.code(), Return::kDriverNotLoaded);
    EXPECT_EQ(e.function(), "nvmlInitWithFlags");
    EXPECT_STREQ(e.what(),
                 "nvmlInitWithFlags failed: Driver Not Loaded (NVML_ERROR_DRIVER_NOT_LOADED, 9)");
  }
}

TEST_F(NvmlEnumeratorTest, MissingLibraryQuotesDlerror) {
  const std::string missing = (dir_ / "no-driver" / "libnvidia-ml.so.1").string();
  useLibrary(missing);
  const DiscoveryError error = errorOf();

  // dlerror's text names the file and the reason.
  EXPECT_EQ(std::string(error.what()),
            "NVML is not usable: dlopen(" + missing + ") failed: " + missing +
                ": cannot open shared object file: No such file or directory");
  try {
    NvmlLibrary::load(missing);
    FAIL() << "no NvmlError";
  } catch (const NvmlError& e) {
    EXPECT_EQ(e.code(), Return::kLibraryNotFound);
    EXPECT_EQ(e.function(), "dlopen");
  }
}

TEST_F(NvmlEnumeratorTest, NoFailedDlopenOrDlsymLeavesItsErrorOnTheThread) {
  // glibc keeps a failed dlopen's or dlsym's error per thread until dlerror() has been called
  // twice; the driver's in-process discovery runs on a detached thread, and one that exits as the
  // process ends leaves the record to LeakSanitizer (a leak of 24 bytes from _dlerror_run, now
  // and then). Every failure path of the binding takes its error.
  if (!testing::leavesDlErrorRecord([] {})) {
    GTEST_SKIP() << "glibc's malloc counts are not seen under a sanitizer";
  }
  const auto leaves = [](const std::function<void()>& body) {
    return testing::leavesDlErrorRecord(body).value();
  };
  const auto loadFails = [](const std::string& library) {
    return [library] { EXPECT_THROW(NvmlLibrary::load(library), NvmlError); };
  };
  const fs::path bogus = dir_ / "not-a-library" / "libnvidia-ml.so.1";
  testing::writeScript(bogus, "not an ELF file\n");
  // A path of its own for each library below, so that it is looked up afresh (each path is loaded
  // once per process, its optional functions looked up on first use).
  const auto freshPath = [&](const char* library, const std::string& name) {
    const fs::path link = dir_ / name / "libnvidia-ml.so.1";
    fs::create_directories(link.parent_path());
    fs::create_symlink(library, link);
    return link.string();
  };
  const std::string requiredOnly = freshPath(FAKE_NVML_REQUIRED_ONLY, "required-only");
  const std::string withoutUuid = freshPath(FAKE_NVML_WITHOUT_UUID, "without-uuid");
  hostOf(h200(kGpu0, "00000000:19:00.0", 0));

  EXPECT_FALSE(leaves(loadFails((dir_ / "no-driver" / "libnvidia-ml.so.1").string())))
      << "a library that is not there";
  EXPECT_FALSE(leaves(loadFails("libnvidia-ml-not-installed.so.1"))) << "a name not found";
  EXPECT_FALSE(leaves(loadFails(bogus.string()))) << "a file that is no library";
  EXPECT_FALSE(leaves(loadFails(withoutUuid))) << "a required function missing";
  EXPECT_FALSE(leaves([&] { NvmlLibrary::load(requiredOnly); })) << "optional functions missing";
  const auto askForAMissingSymbol = [&] {
    EXPECT_FALSE(NvmlLibrary::load(requiredOnly)->hasSymbol("nvmlDeviceGetNothing"));
  };
  EXPECT_FALSE(leaves(askForAMissingSymbol)) << "hasSymbol";
  const auto bindTheHealthCalls = [&] {
    nvml::NvmlHealthApi api(*NvmlLibrary::load(requiredOnly));
  };
  EXPECT_FALSE(leaves(bindTheHealthCalls)) << "the health functions missing";
  const auto askForTheTopology = [&] {
    const NvmlSession session(NvmlLibrary::load(requiredOnly));
    EXPECT_EQ(session.deviceByIndex(0).value.nvLinkActive(0).code, Return::kFunctionNotFound);
  };
  EXPECT_FALSE(leaves(askForTheTopology)) << "the topology functions missing";
}

TEST_F(NvmlEnumeratorTest, LibraryThatIsNotOneIsNotUsable) {
  const fs::path bogus = dir_ / "libnvidia-ml.so.1";
  testing::writeScript(bogus, "not an ELF file\n");
  useLibrary(bogus.string());
  const DiscoveryError error = errorOf();
  EXPECT_THAT(error.what(),
              StartsWith("NVML is not usable: " + bogus.string() +
                         " is there but cannot be loaded: dlopen(" + bogus.string() + ")"));
  EXPECT_THAT(error.what(), HasSubstr(bogus.string() + ": "));
}

TEST_F(NvmlEnumeratorTest, OnlyUnversionedSymbolsStillWork) {
  useLibrary(FAKE_NVML_PLAIN);
  hostOf(h200(kGpu0, "00000000:B5:00.0", 0));
  const Enumeration listed = enumerate();

  ASSERT_EQ(listed.devices.size(), 1u);
  EXPECT_EQ(listed.devices[0].uuid, kGpu0);
  // NVML v1's nvmlDeviceGetPciInfo has only the 4-digit-domain bus id: the 8-digit one is made
  // from the numbers as NVML makes it.
  EXPECT_EQ(listed.devices[0].pciBusId, "00000000:B5:00.0");
  EXPECT_EQ(listed.devices[0].memoryTotalMiB, 143771u);
  EXPECT_EQ(calls(), (std::vector<std::string>{"nvmlInit 0", "nvmlDeviceGetCount 0",
                                               "nvmlDeviceGetHandleByIndex 0", "nvmlShutdown 0"}));

  const std::shared_ptr<const NvmlLibrary> library = NvmlLibrary::load();
  const NvmlSession session(library);
  const Result<PciInfo> pci = session.deviceByIndex(0).value.pciInfo();
  ASSERT_TRUE(pci.ok());
  EXPECT_STREQ(pci.function, "nvmlDeviceGetPciInfo");
  EXPECT_EQ(pci.value.busIdLegacy, "0000:B5:00.0");
  EXPECT_EQ(pci.value.bus, 0xb5u);
}

TEST_F(NvmlEnumeratorTest, MissingRequiredSymbolIsNamed) {
  useLibrary(FAKE_NVML_WITHOUT_UUID);
  hostOf(h200(kGpu0, "00000000:19:00.0", 0));
  const DiscoveryError error = errorOf();

  EXPECT_THAT(error.what(), StartsWith(std::string("NVML is not usable: ") +
                                       FAKE_NVML_WITHOUT_UUID + " has no nvmlDeviceGetUUID: "));
  EXPECT_THAT(error.what(), HasSubstr("undefined symbol: nvmlDeviceGetUUID"));
  EXPECT_TRUE(calls().empty()) << "NVML was initialized although it could not be used";
  try {
    NvmlLibrary::load(FAKE_NVML_WITHOUT_UUID);
    FAIL() << "no NvmlError";
  } catch (const NvmlError& e) {
    EXPECT_EQ(e.code(), Return::kFunctionNotFound);
    EXPECT_EQ(e.function(), "nvmlDeviceGetUUID");
  }
}

TEST_F(NvmlEnumeratorTest, OptionalFunctionsMissingLeavePropertiesUnknown) {
  useLibrary(FAKE_NVML_REQUIRED_ONLY);
  hostOf(h200(kGpu0, "00000000:19:00.0", 0,
              R"(, "mig_enabled": true, "mig": [{"uuid": ")" + std::string(kMigA) + R"("}])"));
  const Enumeration listed = enumerate();

  // Without nvmlDeviceGetMigMode the GPU cannot be known to have MIG on, so no instances.
  ASSERT_EQ(listed.devices.size(), 1u);
  const GpuDevice& gpu = listed.devices[0];
  EXPECT_EQ(gpu.uuid, kGpu0);
  EXPECT_EQ(gpu.name, std::nullopt);
  EXPECT_EQ(gpu.pciBusId, std::nullopt);
  EXPECT_EQ(gpu.memoryTotalMiB, std::nullopt);
  EXPECT_EQ(gpu.minorNumber, std::nullopt);
  EXPECT_FALSE(gpu.migEnabled);
  EXPECT_TRUE(linesOf(listed.notices).empty()) << ::testing::PrintToString(linesOf(listed.notices));

  const std::shared_ptr<const NvmlLibrary> library = NvmlLibrary::load();
  const NvmlSession session(library);
  const Result<std::string> name = session.deviceByIndex(0).value.name();
  EXPECT_EQ(name.code, Return::kFunctionNotFound);
  EXPECT_STREQ(name.function, "nvmlDeviceGetName");
  EXPECT_FALSE(library->hasSymbol("nvmlDeviceGetName"));
  EXPECT_TRUE(library->hasSymbol("nvmlDeviceGetUUID"));
}

TEST_F(NvmlEnumeratorTest, NoGpuIsAnErrorOfItsOwn) {
  hostOf("");
  const DiscoveryError error = errorOf();
  EXPECT_STREQ(error.what(),
               "no NVIDIA GPU on this host: the NVIDIA driver is installed, but NVML lists no GPU");
  // nvmlInitWithFlags(NVML_INIT_FLAG_NO_GPUS) is what lets such a host answer at all.
  EXPECT_EQ(calls().front(), "nvmlInitWithFlags 0");
  expectEverySessionShutDown();
}

TEST_F(NvmlEnumeratorTest, ShutdownFollowsInitWhenTheCountFails) {
  host(R"({"count_error": 15, "devices": [)" + h200(kGpu0, "00000000:19:00.0", 0) + "]}");
  const DiscoveryError error = errorOf();

  EXPECT_STREQ(error.what(),
               "NVML is not usable: nvmlDeviceGetCount_v2 failed: GPU is lost "
               "(NVML_ERROR_GPU_IS_LOST, 15)");
  EXPECT_EQ(calls(), (std::vector<std::string>{"nvmlInitWithFlags 0", "nvmlDeviceGetCount_v2 15",
                                               "nvmlShutdown 0"}));
}

TEST_F(NvmlEnumeratorTest, ShutdownFollowsInitWhenNoGpuCanBeOpened) {
  hostOf(h200(kGpu0, "00000000:19:00.0", 0, R"(, "handle_error": 4)"));
  const DiscoveryError error = errorOf();

  EXPECT_STREQ(error.what(),
               "no usable NVIDIA GPU: NVML lists 1 GPU(s), and every one is left out: GPU 0: "
               "nvmlDeviceGetHandleByIndex_v2 failed: Insufficient Permissions "
               "(NVML_ERROR_NO_PERMISSION, 4)");
  expectEverySessionShutDown();
}

TEST_F(NvmlEnumeratorTest, EverySuccessfulInitIsShutDownOverManyRuns) {
  hostOf(h200(kGpu0, "00000000:19:00.0", 0));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(enumerate().devices.size(), 1u);
  host(R"({"count_error": 999})");
  for (int i = 0; i < 2; ++i) errorOf();
  hostOf("");
  errorOf();
  EXPECT_EQ(sessions(), std::make_pair(6, 6));
}

TEST_F(NvmlEnumeratorTest, EnumeratesFromManyThreadsAtOnce) {
  hostOf(h200(kGpu0, "00000000:19:00.0", 0) + ", " + h200(kGpu1, "00000000:3B:00.0", 1));
  constexpr int kThreads = 4;
  constexpr int kRuns = 25;
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&good] {
      for (int i = 0; i < kRuns; ++i) {
        try {
          const Enumeration listed = NvmlEnumerator().enumerate();
          if (listed.devices.size() == 2 && listed.devices[1].uuid == kGpu1) ++good;
        } catch (const std::exception&) {
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(good.load(), kThreads * kRuns);
  EXPECT_EQ(sessions(), std::make_pair(kThreads * kRuns, kThreads * kRuns));
}

TEST_F(NvmlEnumeratorTest, ExplicitLibraryWinsOverTheEnvironment) {
  useLibrary((dir_ / "missing.so").string());
  hostOf(h200(kGpu0, "00000000:19:00.0", 0));
  EXPECT_EQ(NvmlEnumerator(FAKE_NVML_FULL).enumerate().devices.size(), 1u);
}

TEST_F(NvmlEnumeratorTest, LibraryIsLoadedOncePerPath) {
  const std::shared_ptr<const NvmlLibrary> first = NvmlLibrary::load(FAKE_NVML_FULL);
  EXPECT_EQ(NvmlLibrary::load(FAKE_NVML_FULL), first);
  EXPECT_EQ(NvmlLibrary::load(), first);  // through $FLINK_GPU_NVML_LIBRARY
  EXPECT_NE(NvmlLibrary::load(FAKE_NVML_PLAIN), first);
  EXPECT_EQ(first->name(), FAKE_NVML_FULL);
  EXPECT_EQ(first->file(), FAKE_NVML_FULL);
}

TEST(NvmlReturnTest, NamesAreNvmlHsAndUnknownCodesAreNumbered) {
  EXPECT_EQ(returnName(Return::kSuccess), "NVML_SUCCESS");
  EXPECT_EQ(returnName(Return::kLibRmVersionMismatch), "NVML_ERROR_LIB_RM_VERSION_MISMATCH");
  EXPECT_EQ(returnName(Return::kNotFound), "NVML_ERROR_NOT_FOUND");
  EXPECT_EQ(returnName(Return::kUnknown), "NVML_ERROR_UNKNOWN");
  EXPECT_EQ(returnName(static_cast<Return>(42)), "nvmlReturn_t 42");
}

}  // namespace
}  // namespace flink::discovery
