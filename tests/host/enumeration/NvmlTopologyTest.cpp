// The topology read through NVML (host/enumeration/NvmlTopology.h), against the stand-in
// libnvidia-ml.so.1 playing the hosts of tests/fixtures/nvml/hosts/ (and some of its own): NVLink
// counts matched by PCI address, NVSwitch fabrics, PCIe levels, CPU masks, NUMA nodes with and
// without nvmlDeviceGetNumaNodeId, and every way a query can fail leaving its relation unknown.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "TestSupport.h"
#include "host/enumeration/NvmlEnumerator.h"
#include "host/enumeration/NvmlTopology.h"
#include "host/nvml/Nvml.h"
#include "host/placement/Topology.h"

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
  EXPECT_TRUE(linesOf(found.notices).empty());
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

/// The calls of a topology log ($FAKE_NVML_TOPOLOGY_LOG): function, GPUs, code.
struct LoggedCall {
  std::string function;
  std::vector<std::string> gpus;
  int code = 0;
};

std::vector<LoggedCall> loggedCalls(const fs::path& log) {
  std::vector<LoggedCall> calls;
  for (const std::string& line : testing::readLines(log)) {
    std::istringstream words(line);
    LoggedCall call;
    std::string gpus;
    words >> call.function >> gpus >> call.code;
    std::istringstream each(gpus);
    for (std::string gpu; std::getline(each, gpu, ',');) call.gpus.push_back(gpu);
    calls.push_back(std::move(call));
  }
  return calls;
}

bool asks(const LoggedCall& call, const std::string& gpu) {
  return std::find(call.gpus.begin(), call.gpus.end(), gpu) != call.gpus.end();
}

/// Three GPUs on NVLinks and one PCIe switch, GPU 1 with `gpu1` added to its entry.
std::string threeGpus(const std::string& gpu1) {
  return R"({"devices": [
    {"uuid": "GPU-0", "pci_bus_id": "00000000:19:00.0", "nvlinks": [{"to": 1}, {"to": 2}],
     "pcie_path": ["n0", "b0", "s0"], "numa_node": 0, "cpu_affinity": "0-3"},
    {"uuid": "GPU-1", "pci_bus_id": "00000000:3B:00.0", "nvlinks": [{"to": 0}, {"switch": true}],
     "pcie_path": ["n0", "b0", "s0"], "numa_node": 0, "cpu_affinity": "0-3",
     "numa_node_id_unsupported": true)" +
         gpu1 + R"(},
    {"uuid": "GPU-2", "pci_bus_id": "00000000:4C:00.0", "nvlinks": [{"to": 0}],
     "pcie_path": ["n0", "b0", "s0"], "numa_node": 0, "cpu_affinity": "4-7"}]})";
}

TEST_F(NvmlTopologyTest, AGpuAnsweringGpuIsLostToAnyTopologyQueryIsLost) {
  // GPU 1 falls off the bus at one of the queries (its handle, UUID and health calls still
  // answer): whichever it is, GPU 1 is lost, asked nothing more, and its relations are unknown.
  const fs::path log = dir_ / "topology.log";
  const ScopedEnvironment logged("FAKE_NVML_TOPOLOGY_LOG", log.string());
  for (const std::string function :
       {"nvmlDeviceGetNvLinkState", "nvmlDeviceGetNvLinkRemoteDeviceType",
        "nvmlDeviceGetNvLinkRemotePciInfo_v2", "nvmlDeviceGetNumaNodeId",
        "nvmlDeviceGetMemoryAffinity", "nvmlDeviceGetCpuAffinityWithinScope",
        "nvmlDeviceGetTopologyCommonAncestor"}) {
    SCOPED_TRACE(function);
    fs::remove(log);
    useOwnHost(threeGpus(R"(, "topology_lost": ")" + function + R"(")"));
    const discovery::Enumeration found = read();
    ASSERT_TRUE(found.topology);
    const placement::Topology& topology = *found.topology;
    EXPECT_EQ(topology.gpus()[1].lost,
              function + " failed: GPU is lost (NVML_ERROR_GPU_IS_LOST, 15)");
    EXPECT_FALSE(topology.gpus()[1].numaNode);
    EXPECT_FALSE(topology.gpus()[1].cpus);
    EXPECT_FALSE(topology.gpus()[1].switchLinks);
    EXPECT_FALSE(topology.nvswitch) << "GPU 1's link into a switch is dropped with it";
    EXPECT_FALSE(topology.link(0, 1).pcie);
    EXPECT_FALSE(topology.link(1, 2).pcie);
    EXPECT_FALSE(found.devices[1].numaNode);
    EXPECT_EQ(found.devices[1].uuid, "GPU-1");
    // The others are read whole.
    EXPECT_FALSE(topology.gpus()[0].lost);
    EXPECT_FALSE(topology.gpus()[2].lost);
    EXPECT_EQ(topology.link(0, 2).pcie, PcieLevel::kSingleSwitch);
    EXPECT_EQ(topology.link(0, 2).nvlinks, 1u);
    EXPECT_EQ(topology.gpus()[2].cpus, (std::vector<unsigned>{4, 5, 6, 7}));
    EXPECT_EQ(found.devices[0].numaNode, 0u);

    // Nothing is asked of GPU 1 after its first GPU_IS_LOST, but, for a pair's, the PCI info
    // that tells which of the two it is.
    const std::vector<LoggedCall> calls = loggedCalls(log);
    const auto first = std::find_if(calls.begin(), calls.end(),
                                    [](const LoggedCall& call) { return call.code == 15; });
    ASSERT_NE(first, calls.end());
    EXPECT_EQ(first->function, function);
    EXPECT_TRUE(asks(*first, "1"));
    for (auto call = first + 1; call != calls.end(); ++call) {
      if (!asks(*call, "1")) continue;
      EXPECT_TRUE(function == "nvmlDeviceGetTopologyCommonAncestor" &&
                  call->function == "nvmlDeviceGetPciInfo_v3" && call == first + 2)
          << "asked after it was lost: " << call->function;
    }
  }
}

TEST_F(NvmlTopologyTest, ALostGpuIsFoundByItsPciInfoInASessionOfItsOwn) {
  // The default discovery reads the topology in a session of its own (readNvmlTopology): a GPU
  // lost since the enumeration answers GPU_IS_LOST to its PCI info, the first query.
  const fs::path log = dir_ / "topology.log";
  const ScopedEnvironment logged("FAKE_NVML_TOPOLOGY_LOG", log.string());
  useOwnHost(threeGpus(R"(, "lost": true)"));
  const std::optional<placement::Topology> topology = readNvmlTopology({"0", "1", "2"});
  ASSERT_TRUE(topology);
  ASSERT_EQ(topology->size(), 3u);
  EXPECT_EQ(topology->gpus()[1].lost,
            "nvmlDeviceGetPciInfo_v3 failed: GPU is lost (NVML_ERROR_GPU_IS_LOST, 15)");
  EXPECT_FALSE(topology->link(0, 1).pcie);
  EXPECT_EQ(topology->link(0, 2).pcie, PcieLevel::kSingleSwitch);
  std::vector<std::string> askedOfGpu1;
  for (const LoggedCall& call : loggedCalls(log)) {
    if (asks(call, "1")) askedOfGpu1.push_back(call.function);
  }
  EXPECT_EQ(askedOfGpu1, std::vector<std::string>{"nvmlDeviceGetPciInfo_v3"});
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
