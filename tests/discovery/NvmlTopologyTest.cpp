// The topology read through NVML (discovery/NvmlTopology.h), against the stand-in libnvidia-ml.so.1
// playing the hosts of tests/fixtures/nvml/hosts/ (and some of its own): NVLink counts matched
// by PCI address, NVSwitch fabrics, PCIe levels, CPU masks, NUMA nodes with and without
// nvmlDeviceGetNumaNodeId, and every way a query can fail leaving its relation unknown.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "TestSupport.h"
#include "discovery/NvmlEnumerator.h"
#include "nvml/Nvml.h"
#include "placement/Topology.h"

namespace flink::discovery {
namespace {

namespace fs = std::filesystem;
using nvml::kLibraryEnvironmentVariable;
using placement::PcieLevel;
using testing::ScopedEnvironment;

class NvmlTopologyTest : public ::testing::Test {
 protected:
  void SetUp() override { library_.set(FAKE_NVML_FULL); }

  void useHost(const std::string& name) {
    devices_.set((fs::path(FAKE_NVML_HOSTS) / (name + ".json")).string());
  }

  void useOwnHost(const std::string& json) {
    const fs::path file = dir_ / "host.json";
    std::ofstream(file, std::ios::trunc) << json;
    devices_.set(file.string());
  }

  static discovery::Enumeration read() { return NvmlEnumerator(std::nullopt, true).enumerate(); }

  testing::TempDir dir_{"nvml-topology"};
  ScopedEnvironment library_{kLibraryEnvironmentVariable};
  ScopedEnvironment devices_{"FAKE_NVML_DEVICES"};
};

TEST_F(NvmlTopologyTest, IslandsAreCountedLinkByLink) {
  useHost("islands-8");
  const discovery::Enumeration found = read();
  ASSERT_TRUE(found.topology);
  const placement::Topology& topology = *found.topology;
  ASSERT_EQ(topology.size(), 8u);
  EXPECT_FALSE(topology.nvswitch);
  EXPECT_EQ(topology.link(0, 1).nvlinks, 2u);
  EXPECT_EQ(topology.link(0, 3).nvlinks, 2u);
  EXPECT_EQ(topology.link(0, 4).nvlinks, 0u);
  EXPECT_TRUE(topology.link(0, 4).nvlinkKnown);
  EXPECT_EQ(topology.link(0, 1).pcie, PcieLevel::kSingleSwitch);
  EXPECT_EQ(topology.link(0, 2).pcie, PcieLevel::kHostBridge);
  EXPECT_EQ(topology.link(3, 4).pcie, PcieLevel::kSystem);
  EXPECT_EQ(topology.gpus()[5].numaNode, 1u);
  EXPECT_EQ(topology.gpus()[5].cpus, (std::vector<unsigned>{1}));
  // The devices carry them too, for GPUInfo and exec --bind-cpus.
  EXPECT_EQ(found.devices[2].numaNode, 0u);
  EXPECT_EQ(found.devices[6].cpus, (std::vector<unsigned>{1}));
}

TEST_F(NvmlTopologyTest, PcieLevelsFollowTheSwitchTree) {
  useHost("pcie-8");
  const placement::Topology topology = *read().topology;
  EXPECT_EQ(topology.link(0, 1).pcie, PcieLevel::kSingleSwitch);
  EXPECT_EQ(topology.link(0, 2).pcie, PcieLevel::kMultipleSwitches);
  EXPECT_EQ(topology.link(0, 4).pcie, PcieLevel::kSystem);
  EXPECT_EQ(topology.link(6, 7).nvlinks, 0u);
  EXPECT_EQ(placement::relationName(topology.link(0, 2)), "PXB");
}

TEST_F(NvmlTopologyTest, NvswitchLinksMakeEveryPairNvlinkConnected) {
  useHost("nvswitch-8");
  const placement::Topology topology = *read().topology;
  EXPECT_TRUE(topology.nvswitch);
  for (std::size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(topology.gpus()[i].switchLinks, 18u);
    for (std::size_t j = i + 1; j < 8; ++j) EXPECT_EQ(topology.link(i, j).nvlinks, 18u);
  }
  EXPECT_EQ(topology.link(0, 1).pcie, PcieLevel::kNode);
  // GPU 1 answers its NUMA node only through its memory affinity.
  EXPECT_EQ(topology.gpus()[1].numaNode, 0u);
  EXPECT_EQ(topology.gpus()[5].numaNode, 1u);
}

/// `link` (a JSON object) `times` times, comma-separated: a GPU's "nvlinks".
std::string links(const std::string& link, int times) {
  std::string list;
  for (int i = 0; i < times; ++i) list += (i == 0 ? "" : ", ") + link;
  return list;
}

TEST_F(NvmlTopologyTest, AGpuWithMoreLinksThanAnOldNvmlHeaderKnowsIsReadWhole) {
  // nvml.h 12.9 says 18 links at most, 13.3 says 36: each link is asked until the driver says
  // there is no such link. GPUs 0 and 1: 24 links to each other and 12 idle ones; GPUs 2 and 3:
  // 36 links each into an NVSwitch fabric.
  useOwnHost(R"({"devices": [
    {"uuid": "GPU-0", "pci_bus_id": "00000000:19:00.0", "nvlink_count": 36, "nvlinks": [)" +
             links(R"({"to": 1})", 24) + R"(]},
    {"uuid": "GPU-1", "pci_bus_id": "00000000:3B:00.0", "nvlinks": [)" +
             links(R"({"to": 0})", 24) + R"(]},
    {"uuid": "GPU-2", "pci_bus_id": "00000000:4C:00.0", "nvlinks": [)" +
             links(R"({"switch": true})", 36) + R"(]},
    {"uuid": "GPU-3", "pci_bus_id": "00000000:5D:00.0", "nvlinks": [)" +
             links(R"({"switch": true})", 36) + R"(]}]})");
  const placement::Topology topology = *read().topology;
  EXPECT_EQ(topology.link(0, 1).nvlinks, 24u);
  EXPECT_EQ(placement::relationName(topology.link(0, 1)), "NV24");
  EXPECT_TRUE(topology.nvswitch);
  EXPECT_EQ(topology.gpus()[2].switchLinks, 36u);
  EXPECT_EQ(topology.link(2, 3).nvlinks, 36u);
  // Links only one side has are none of the pair's.
  EXPECT_EQ(topology.link(0, 2).nvlinks, 0u);
  EXPECT_TRUE(topology.link(0, 2).nvlinkKnown);
}

TEST_F(NvmlTopologyTest, FailingQueriesLeaveEverythingUnknownWithoutAnError) {
  useHost("failing-4");
  const discovery::Enumeration found = read();
  ASSERT_EQ(found.devices.size(), 4u);
  ASSERT_TRUE(found.topology);
  EXPECT_FALSE(found.topology->anythingKnown());
  EXPECT_FALSE(found.topology->gpus()[0].cpus);
  EXPECT_FALSE(found.topology->gpus()[1].numaNode);
  EXPECT_EQ(placement::relationName(found.topology->link(0, 1)), "N/A");
  // Topology problems are no warnings about the enumeration.
  EXPECT_TRUE(found.warnings.empty());
}

TEST_F(NvmlTopologyTest, ALostGpuIsAskedNothingMoreAndTheOthersStillAnswer) {
  useOwnHost(R"({"devices": [
    {"uuid": "GPU-0", "pci_bus_id": "00000000:19:00.0", "nvlinks": [{"to": 1}, {"to": 2}],
     "pcie_path": ["n0", "b0", "s0"], "numa_node": 0, "cpu_affinity": "0-3"},
    {"uuid": "GPU-1", "pci_bus_id": "00000000:3B:00.0", "nvlink_error": 15,
     "pcie_path": ["n0", "b0", "s0"], "numa_node": 0, "cpu_affinity": "0-3"},
    {"uuid": "GPU-2", "pci_bus_id": "00000000:4C:00.0", "nvlinks": [{"to": 0}],
     "pcie_path": ["n0", "b0", "s1"], "numa_node": 0, "cpu_affinity": "4-7"}]})");
  const placement::Topology topology = *read().topology;
  // GPU 0 still sees its link to the lost GPU 1; nothing else of GPU 1 is asked.
  EXPECT_EQ(topology.link(0, 1).nvlinks, 1u);
  EXPECT_FALSE(topology.link(0, 1).pcie);
  EXPECT_FALSE(topology.gpus()[1].numaNode);
  EXPECT_EQ(topology.link(0, 2).nvlinks, 1u);
  EXPECT_EQ(topology.link(0, 2).pcie, PcieLevel::kHostBridge);
  EXPECT_EQ(topology.gpus()[2].cpus, (std::vector<unsigned>{4, 5, 6, 7}));
}

TEST_F(NvmlTopologyTest, ADriverWithoutTheTopologyCallsTellsNothing) {
  library_.set(FAKE_NVML_PLAIN);
  useHost("islands-8");
  const discovery::Enumeration found = read();
  ASSERT_TRUE(found.topology);
  EXPECT_FALSE(found.topology->anythingKnown());
  EXPECT_FALSE(found.devices[0].cpus);
}

TEST_F(NvmlTopologyTest, WithoutTopologyOnlyTheAffinityIsRead) {
  useHost("islands-8");
  const discovery::Enumeration found = NvmlEnumerator().enumerate();
  EXPECT_FALSE(found.topology);
  EXPECT_EQ(found.devices[4].numaNode, 1u);
  EXPECT_EQ(found.devices[4].cpus, (std::vector<unsigned>{1}));
}

}  // namespace
}  // namespace flink::discovery
