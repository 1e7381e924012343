// GPUInfo properties: the driver fills them from NVML (here the stand-in libnvidia-ml.so.1 of
// tests/fixtures/nvml) for whatever identifiers the discovery script printed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "TestSupport.h"
#include "flink/externalresource/gpu/GPUDriverFactory.h"
#include "flink/externalresource/gpu/GPUDriverOptions.h"
#include "flink/externalresource/gpu/GPUInfo.h"

namespace flink::externalresource::gpu {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using testing::ScopedEnvironment;
using testing::TempDir;

constexpr const char* kHost = R"({"devices": [
  {"uuid": "GPU-11111111-2222-3333-4444-555555555555", "name": "NVIDIA H200",
   "pci_bus_id": "00000000:19:00.0", "memory_total_mib": 143771, "minor_number": 0},
  {"uuid": "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", "name": "NVIDIA H200",
   "pci_bus_id": "00000000:3B:00.0", "memory_total_mib": 143771, "minor_number": 1,
   "mig_enabled": true,
   "mig": [{"uuid": "MIG-01234567-89ab-cdef-0123-456789abcdef", "name": "NVIDIA H200 MIG 1g.18gb",
            "memory_total_mib": 16384, "gpu_instance_id": 9, "compute_instance_id": 0}]},
  {"uuid": "GPU-99999999-8888-7777-6666-555555555555", "name": null,
   "pci_bus_id": "00000000:5D:00.0", "memory_total_mib": null, "minor_number": 2}
]})";

class GPUInfoPropertiesTest : public ::testing::Test {
 protected:
  GPUInfoPropertiesTest() { std::ofstream(dir_ / "host.json") << kHost; }

  ExternalResourceInfoSet discover(const std::string& printed, bool nvml = true) {
    Configuration config;
    config.set(
        GPUDriverOptions::DISCOVERY_SCRIPT_PATH,
        testing::writeScript(dir_ / "gpus.sh", "#!/bin/sh\necho '" + printed + "'\n").string());
    config.set(GPUDriverOptions::NVML_ENABLED, nvml);
    return GPUDriverFactory().createGPUDriver(config)->retrieveResourceInfo(1);
  }

  static const GPUInfo& gpu(const ExternalResourceInfoSet& infos, std::size_t i) {
    return dynamic_cast<const GPUInfo&>(*infos[i]);
  }

  TempDir dir_{"gpu-properties"};
  ScopedEnvironment library_{"FLINK_GPU_NVML_LIBRARY", FAKE_NVML_FULL};
  ScopedEnvironment host_{"FAKE_NVML_DEVICES", (dir_ / "host.json").string()};
};

TEST_F(GPUInfoPropertiesTest, WholeGpusCarryEveryKnownProperty) {
  const ExternalResourceInfoSet infos = discover("1,0");
  ASSERT_EQ(infos.size(), 2u);
  const GPUInfo& first = gpu(infos, 1);
  EXPECT_THAT(first.getKeys(), ElementsAre("index", "vendor", "uuid", "name", "pci.bus_id",
                                           "memory.total", "minor_number"));
  EXPECT_EQ(first.getProperty("vendor"), "nvidia");
  EXPECT_EQ(first.getProperty("index"), "0");
  EXPECT_EQ(first.getProperty("uuid"), "GPU-11111111-2222-3333-4444-555555555555");
  EXPECT_EQ(first.getProperty("name"), "NVIDIA H200");
  EXPECT_EQ(first.getProperty("pci.bus_id"), "00000000:19:00.0");
  EXPECT_EQ(first.getProperty("memory.total"), "143771");
  EXPECT_EQ(first.getProperty("minor_number"), "0");
  EXPECT_EQ(first.toString(), "GPU Device(0)");
  // The script's order is kept; properties follow the device, not the position.
  EXPECT_EQ(gpu(infos, 0).getProperty("pci.bus_id"), "00000000:3B:00.0");
  EXPECT_FALSE(first.getProperty("mig.parent_index"));
}

TEST_F(GPUInfoPropertiesTest, UnknownPropertiesAreLeftOutNotMadeUp) {
  const ExternalResourceInfoSet thirdInfos = discover("2");
  const GPUInfo& third = gpu(thirdInfos, 0);
  EXPECT_THAT(third.getKeys(),
              ElementsAre("index", "vendor", "uuid", "pci.bus_id", "minor_number"));
  EXPECT_FALSE(third.getProperty("name"));
  EXPECT_FALSE(third.getProperty("memory.total"));
}

TEST_F(GPUInfoPropertiesTest, MigInstancesByUuidCarryTheirPlacement) {
  const ExternalResourceInfoSet migInfos = discover("MIG-01234567-89ab-cdef-0123-456789abcdef");
  const GPUInfo& mig = gpu(migInfos, 0);
  EXPECT_EQ(mig.index(), "MIG-01234567-89ab-cdef-0123-456789abcdef");
  EXPECT_EQ(mig.getProperty("name"), "NVIDIA H200 MIG 1g.18gb");
  EXPECT_EQ(mig.getProperty("memory.total"), "16384");
  EXPECT_EQ(mig.getProperty("pci.bus_id"), "00000000:3B:00.0");  // its GPU's
  EXPECT_EQ(mig.getProperty("mig.parent_index"), "1");
  EXPECT_EQ(mig.getProperty("mig.gpu_instance_id"), "9");
  EXPECT_EQ(mig.getProperty("mig.compute_instance_id"), "0");
  EXPECT_FALSE(mig.getProperty("minor_number"));
}

TEST_F(GPUInfoPropertiesTest, GpuUuidsMatchWhateverTheCaseOfTheirHexDigits) {
  const ExternalResourceInfoSet infoInfos = discover("GPU-AAAAAAAA-BBBB-CCCC-DDDD-EEEEEEEEEEEE");
  const GPUInfo& info = gpu(infoInfos, 0);
  EXPECT_EQ(info.getProperty("minor_number"), "1");
}

TEST_F(GPUInfoPropertiesTest, AnIndexNvmlDoesNotKnowHasTheIndexOnly) {
  const ExternalResourceInfoSet infoInfos = discover("7");
  const GPUInfo& info = gpu(infoInfos, 0);
  EXPECT_THAT(info.getKeys(), ElementsAre("index"));
}

TEST_F(GPUInfoPropertiesTest, DisabledOrUnusableNvmlGivesTheIndexOnly) {
  EXPECT_THAT(discover("0", /*nvml=*/false)[0]->getKeys(), ElementsAre("index"));

  std::ofstream(dir_ / "host.json") << R"({"init_error": 18, "devices": []})";
  EXPECT_THAT(discover("0")[0]->getKeys(), ElementsAre("index"));

  ScopedEnvironment missing("FLINK_GPU_NVML_LIBRARY", (dir_ / "libnvidia-ml.so.1").string());
  EXPECT_THAT(discover("0")[0]->getKeys(), ElementsAre("index"));
}

TEST_F(GPUInfoPropertiesTest, TheVendorsDiscoveryByItsScriptsOrItsProgramsNameSaysTheVendor) {
  // Without NVML nothing else is known: the vendor comes from the discovery being the vendor's
  // own, whether configured by the script's name or by the program's it execs.
  const auto keysOf = [this](const std::string& name) {
    Configuration config;
    config.set(GPUDriverOptions::DISCOVERY_SCRIPT_PATH,
               testing::writeScript(dir_ / name, "#!/bin/sh\necho 0\n").string());
    config.set(GPUDriverOptions::NVML_ENABLED, false);
    return GPUDriverFactory().createGPUDriver(config)->retrieveResourceInfo(1)[0]->getKeys();
  };
  EXPECT_THAT(keysOf("nvidia-gpu-discovery.sh"), ElementsAre("index", "vendor"));
  EXPECT_THAT(keysOf("nvidia-gpu-discovery"), ElementsAre("index", "vendor"));
  EXPECT_THAT(keysOf("my-gpus.sh"), ElementsAre("index"));
}

TEST_F(GPUInfoPropertiesTest, SparkJsonOutputWorksToo) {
  const ExternalResourceInfoSet infos = discover(R"({"name": "gpu", "addresses": ["0", "1"]})");
  ASSERT_EQ(infos.size(), 2u);
  EXPECT_EQ(gpu(infos, 1).getProperty("uuid"), "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee");
}

}  // namespace
}  // namespace flink::externalresource::gpu
