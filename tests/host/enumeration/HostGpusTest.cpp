// enumerateHostGpus: the --gpus list, else NVML, else nvidia-smi, and which failure is named
// first when neither works.
#include "host/enumeration/HostGpus.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "TestSupport.h"

namespace flink::discovery {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using testing::ScopedEnvironment;
using testing::TempDir;

class HostGpusTest : public ::testing::Test {
 protected:
  HostGpusTest() {
    // No nvidia-smi anywhere.
    options_.nvidiaSmi.searchPath = (dir_ / "empty-bin").string();
    options_.nvidiaSmi.folders = {};
  }
  void describeHost(const std::string& json) { std::ofstream(dir_ / "host.json") << json; }

  TempDir dir_{"host-gpus"};
  HostGpuOptions options_;
  ScopedEnvironment library_{"FLINK_GPU_NVML_LIBRARY", FAKE_NVML_FULL};
  ScopedEnvironment host_{"FAKE_NVML_DEVICES", (dir_ / "host.json").string()};
};

TEST_F(HostGpusTest, AListGivenIsUsedAsItIs) {
  options_.listed = std::vector<std::string>{"3", "1"};
  const HostGpus gpus = enumerateHostGpus(options_);
  EXPECT_EQ(gpus.source, HostGpuSource::kListed);
  EXPECT_EQ(sourceName(gpus.source), "--gpus");
  EXPECT_EQ(identifiersOf(gpus.found.devices), (std::vector<std::string>{"3", "1"}));
}

TEST_F(HostGpusTest, NvmlIsAskedFirst) {
  describeHost(R"({"devices": [{"uuid": "GPU-1", "name": "NVIDIA H200"}]})");
  const HostGpus gpus = enumerateHostGpus(options_);
  EXPECT_EQ(gpus.source, HostGpuSource::kNvml);
  EXPECT_EQ(sourceName(gpus.source), "NVML");
  ASSERT_EQ(gpus.found.devices.size(), 1u);
  EXPECT_EQ(gpus.found.devices[0].name, "NVIDIA H200");
}

TEST_F(HostGpusTest, WhenNvmlFailsItsFailureIsTheCauseAndNvidiaSmiADetail) {
  describeHost(R"({"init_error": 18, "devices": []})");
  try {
    enumerateHostGpus(options_);
    FAIL() << "no exception";
  } catch (const DiscoveryError& e) {
    EXPECT_THAT(e.what(), HasSubstr("NVML is not usable"));
    EXPECT_THAT(e.what(), HasSubstr("Driver/library version mismatch"));
    EXPECT_EQ(e.kind(), DiscoveryError::Kind::kNvmlVersionMismatch);
    EXPECT_THAT(e.details(), Contains(HasSubstr("nvidia-smi, asked instead, failed too: "
                                                "nvidia-smi was not found")));
  }
}

TEST_F(HostGpusTest, WhenNvmlIsAbsentNvidiaSmisFailureIsTheCause) {
  ScopedEnvironment absent("FLINK_GPU_NVML_LIBRARY", (dir_ / "libnvidia-ml.so.1").string());
  try {
    enumerateHostGpus(options_);
    FAIL() << "no exception";
  } catch (const DiscoveryError& e) {
    EXPECT_THAT(e.what(), HasSubstr("nvidia-smi was not found"));
    EXPECT_EQ(e.kind(), DiscoveryError::Kind::kNoDriver);
    EXPECT_THAT(e.details(), Contains(HasSubstr("NVML is not usable")));
  }
}

TEST_F(HostGpusTest, ALibraryThatIsThereButCannotLoadIsTheCauseNotAnAbsentDriver) {
  // A libnvidia-ml.so.1 of the wrong architecture, or one whose dependency is missing: dlopen
  // fails, but the driver is not absent, and that must not read as "no NVIDIA driver".
  const std::filesystem::path broken = dir_ / "libnvidia-ml.so.1";
  testing::writeScript(broken,
                       "\x7f"
                       "ELF but not really\n");
  ScopedEnvironment library("FLINK_GPU_NVML_LIBRARY", broken.string());
  try {
    enumerateHostGpus(options_);
    FAIL() << "no exception";
  } catch (const DiscoveryError& e) {
    EXPECT_THAT(e.what(), HasSubstr("NVML is not usable: " + broken.string() +
                                    " is there but cannot be loaded: dlopen("));
    EXPECT_THAT(e.details(), Contains(HasSubstr("nvidia-smi, asked instead, failed too")));
  }
}

TEST_F(HostGpusTest, NvmlWithoutGpusIsTheAnswer) {
  describeHost(R"({"devices": []})");
  EXPECT_THROW(
      {
        try {
          enumerateHostGpus(options_);
        } catch (const DiscoveryError& e) {
          EXPECT_STREQ(e.what(),
                       "no NVIDIA GPU on this host: the NVIDIA driver is installed, but NVML "
                       "lists no GPU");
          EXPECT_EQ(e.kind(), DiscoveryError::Kind::kNoGpu);
          throw;
        }
      },
      DiscoveryError);
}

}  // namespace
}  // namespace flink::discovery
