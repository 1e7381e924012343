// Topology-aware placement from the outside: the real flink-gpu, the default discovery beside it
// and exec, on the stand-in libnvidia-ml.so.1 playing the hosts of tests/fixtures/nvml/hosts/
// (two NVLink islands, a PCIe-only host, an NVSwitch host, a host whose topology queries fail).
// GPUs held by others are records of running `sleep` processes written into the coordination
// file; a decoy nvidia-smi first on PATH would answer GPUs 5, 6, 7.
#include <fcntl.h>
#include <sched.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "CliRun.h"
#include "StandInHost.h"
#include "TestSupport.h"
#include "process/FileDescriptor.h"

namespace {

namespace fs = std::filesystem;
using flink::testing::Background;
using flink::testing::CliRun;
using flink::testing::firstLine;
using flink::testing::kCli;
using flink::testing::readFile;
using namespace std::chrono_literals;
using flink::testing::allowedCpus;
using flink::testing::linesOf;
using flink::testing::runCli;
using flink::testing::TempDir;
using flink::testing::waitForLines;
using flink::testing::writeScript;

/// A live process to record GPUs for: `sleep 60`, killed with its group at the end.
using flink::testing::Sleeper;

using flink::testing::contains;

/// The whitespace-separated cells of the line of `text` that starts with `first`, below the
/// header line.
std::vector<std::string> rowOf(const std::string& text, const std::string& first) {
  std::vector<std::string> lines = linesOf(text);
  if (!lines.empty()) lines.erase(lines.begin());
  for (const std::string& line : lines) {
    std::vector<std::string> cells;
    std::string cell;
    for (char c : line + ' ') {
      if (c == ' ') {
        if (!cell.empty()) cells.push_back(cell);
        cell.clear();
      } else {
        cell += c;
      }
    }
    if (!cells.empty() && cells.front() == first) return cells;
  }
  return {};
}

class TopologyCliTest : public ::testing::Test {
 protected:
  TopologyCliTest() {
    writeScript(dir_ / "bin" / "nvidia-smi", "#!/bin/sh\nprintf '5\\n6\\n7\\n'\n");
  }

  void useHost(const std::string& name) {
    hostFile_ = (fs::path(FAKE_NVML_HOSTS) / (name + ".json")).string();
  }

  void useOwnHost(const std::string& json) {
    hostFile_ = (dir_ / "host.json").string();
    std::ofstream(hostFile_, std::ios::trunc) << json;
  }

  std::vector<std::string> environment() const {
    return {std::string("FLINK_GPU_NVML_LIBRARY=") + FAKE_NVML_FULL,
            "FAKE_NVML_DEVICES=" + hostFile_, "PATH=" + (dir_ / "bin").string() + ":/usr/bin:/bin"};
  }

  CliRun run(const std::vector<std::string>& args) const { return runCli(args, environment()); }

  std::string coordinationFile() const { return (dir_ / "coordination").string(); }

  /// Records `gpus` for `holder` in the coordination file (Flink's two-field lines).
  void hold(const std::vector<std::string>& gpus, const Sleeper& holder) const {
    std::ofstream file(coordinationFile(), std::ios::app);
    for (const std::string& gpu : gpus) file << gpu << ' ' << holder.pid() << '\n';
  }

  /// What the default discovery hands `owner` in coordination mode, through the driver.
  std::string allocate(int amount, const Sleeper& owner, const std::string& more = "") const {
    const CliRun result = run({"discover", "-n", std::to_string(amount), "--discovery-args",
                               "--enable-coordination-mode --coordination-file " +
                                   coordinationFile() + " --owner-pid " + owner.pidText() + more});
    EXPECT_EQ(result.exitCode, 0) << result;
    return result.out;
  }

  TempDir dir_{"flink-gpu-topology-cli-test"};
  std::string hostFile_;
};

std::string devices(const std::vector<int>& indices) {
  std::string text;
  for (int index : indices) text += "GPU Device(" + std::to_string(index) + ")\n";
  return text;
}

// --- the island host --------------------------------------------------------------------------

TEST_F(TopologyCliTest, FourOnAnEmptyIslandHostAreOneWholeIsland) {
  useHost("islands-8");
  const CliRun plain = run({"discover", "-n", "4"});
  ASSERT_EQ(plain.exitCode, 0) << plain;
  EXPECT_EQ(plain.out, devices({0, 1, 2, 3}));
  Sleeper owner;
  EXPECT_EQ(allocate(4, owner), devices({0, 1, 2, 3}));
}

TEST_F(TopologyCliTest, TwoMoreNextToTwoHeldOnesStayInTheIslandThatIsAlreadyBroken) {
  useHost("islands-8");
  Sleeper other;
  Sleeper owner;
  hold({"4", "5"}, other);
  // By index it would be 0 and 1, breaking the island that is still whole.
  EXPECT_EQ(allocate(2, owner), devices({6, 7}));
}

TEST_F(TopologyCliTest, OneGpuComesFromTheBrokenIslandAndLeavesTheWholeOneIntact) {
  useHost("islands-8");
  Sleeper other;
  Sleeper first;
  Sleeper second;
  hold({"4"}, other);
  EXPECT_EQ(allocate(1, first), devices({5}));
  EXPECT_EQ(allocate(1, second), devices({6}));
  Sleeper third;
  EXPECT_EQ(allocate(4, third), devices({0, 1, 2, 3}));
}

TEST_F(TopologyCliTest, IndexPlacementGivesTodaysAnswers) {
  useHost("islands-8");
  Sleeper other;
  Sleeper owner;
  hold({"4"}, other);
  EXPECT_EQ(allocate(1, owner, " --placement index"), devices({0}));
  const CliRun plain = run({"discover", "-n", "2", "--discovery-args", "--placement index"});
  EXPECT_EQ(plain.out, devices({0, 1})) << plain;
  const CliRun bad = run({"discover", "-n", "2", "--discovery-args", "--placement best"});
  EXPECT_EQ(bad.exitCode, 1) << bad;
  EXPECT_TRUE(contains(bad.err, "invalid --placement 'best': expected topology or index")) << bad;
}

TEST_F(TopologyCliTest, TheDriverPassesItsPlacementKeyToTheScript) {
  useHost("islands-8");
  Sleeper other;
  hold({"4", "5"}, other);
  const fs::path script = fs::path(kCli).parent_path().parent_path() / "plugins" /
                          "external-resource-gpu" / "nvidia-gpu-discovery.sh";
  const fs::path conf = dir_ / "conf";
  fs::create_directories(conf);
  // A TaskManager's configuration, allocating for `owner`.
  const auto configure = [&](const Sleeper& owner) {
    std::ofstream(conf / "config.yaml", std::ios::trunc)
        << "external-resources: gpu\n"
        << "external-resource.gpu.amount: 1\n"
        << "external-resource.gpu.driver-factory.class: "
           "org.apache.flink.externalresource.gpu.GPUDriverFactory\n"
        << "external-resource.gpu.param.discovery-script.path: " << script.string() << "\n"
        << "external-resource.gpu.param.discovery-script.args: --enable-coordination-mode "
           "--coordination-file "
        << coordinationFile() << " --owner-pid " << owner.pid() << "\n";
  };
  Sleeper first;
  configure(first);
  const CliRun index =
      run({"discover", "--config", conf.string(), "-Dexternal-resource.gpu.param.placement=index"});
  EXPECT_EQ(index.out, "gpu: GPU Device(0)\n") << index;
  Sleeper second;
  configure(second);
  const CliRun topology = run(
      {"discover", "--config", conf.string(), "-Dexternal-resource.gpu.param.placement=topology"});
  // 0 is held now too: 6, whose pair is whole, beside the broken 7; by index it would be 1.
  EXPECT_EQ(topology.out, "gpu: GPU Device(6)\n") << topology;
  const CliRun bad = run(
      {"discover", "--config", conf.string(), "-Dexternal-resource.gpu.param.placement=closest"});
  EXPECT_EQ(bad.exitCode, 2) << bad;
  EXPECT_TRUE(contains(bad.err, "'closest' for configuration key 'placement'")) << bad;
}

// --- the PCIe host, the NVSwitch host, the failing host ---------------------------------------

TEST_F(TopologyCliTest, PcieSetsShareASwitchBeforeASocket) {
  useHost("pcie-8");
  Sleeper other;
  Sleeper owner;
  hold({"0", "2"}, other);
  // By index 1 and 3: one socket, two switches.
  EXPECT_EQ(allocate(2, owner), devices({4, 5}));
}

TEST_F(TopologyCliTest, NvswitchHostsKeepASetOnOneNumaNode) {
  useHost("nvswitch-8");
  Sleeper other;
  Sleeper owner;
  hold({"1", "2"}, other);
  // By index 0, 3, 4: two NUMA nodes.
  EXPECT_EQ(allocate(3, owner), devices({4, 5, 6}));
}

TEST_F(TopologyCliTest, FailingTopologyQueriesMeanFirstFreeAndALostGpuIsLeftOut) {
  // GPU 1 answers NVML_ERROR_GPU_IS_LOST to its topology queries: lost, never handed out.
  useHost("failing-4");
  Sleeper other;
  Sleeper owner;
  hold({"0"}, other);
  const CliRun result = run({"discover", "-n", "2", "--discovery-args",
                             "--enable-coordination-mode --coordination-file " +
                                 coordinationFile() + " --owner-pid " + owner.pidText()});
  EXPECT_EQ(result.exitCode, 0) << result;
  EXPECT_EQ(result.out, devices({2, 3}));
  // Said as a GPU left out is: logged as an error, whatever the level of the rest.
  EXPECT_TRUE(contains(result.err, "left a GPU out: GPU 1 is left out: lost: ")) << result;
}

TEST_F(TopologyCliTest, ASlowTopologyIsReadWithoutTheCoordinationFilesLock) {
  // A GPU slow to answer its topology queries must not stall every allocator of the host.
  useHost("pcie-8");
  { const std::ofstream create(coordinationFile()); }
  const fs::path log = dir_ / "topology.log";
  Sleeper owner;
  std::vector<std::string> args{"/usr/bin/env"};
  for (const std::string& variable : environment()) args.push_back(variable);
  args.insert(args.end(),
              {"FAKE_NVML_TOPOLOGY_LOG=" + log.string(), "FAKE_NVML_TOPOLOGY_DELAY_MS=20", kCli,
               "discover", "-n", "2", "--discovery-args",
               "--enable-coordination-mode --coordination-file " + coordinationFile() +
                   " --owner-pid " + owner.pidText()});
  // The test holds the file's lock from before discover starts until discover says that it
  // waits for it: by then it has read the topology (a topology read under the lock would not have
  // started). No window of time to hit: a check of the lock while the queries run raced a slow
  // start on a loaded machine.
  const flink::process::FileDescriptor fd(::open(coordinationFile().c_str(), O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(fd.valid());
  ASSERT_EQ(::flock(fd.get(), LOCK_EX), 0);
  Background slow(args, dir_ / "slow.out", dir_ / "slow.err");
  const std::vector<std::string> waiting = waitForLines(dir_ / "slow.err", 1, 30s);
  ASSERT_EQ(waiting.size(), 1u) << readFile(dir_ / "slow.err");
  EXPECT_TRUE(waiting[0].starts_with("flink-gpu: note: waiting for the lock of ")) << waiting[0];
  // The placement's queries (the enumeration asks NUMA nodes and CPUs too, but never this).
  EXPECT_TRUE(contains(readFile(log), "nvmlDeviceGetTopologyCommonAncestor"))
      << "the topology is read under the lock";
  ::flock(fd.get(), LOCK_UN);
  ASSERT_EQ(slow.waitForExit(60s), std::optional<int>(0)) << readFile(dir_ / "slow.err");
  EXPECT_EQ(flink::testing::readLines(dir_ / "slow.out").size(), 2u);
}

TEST_F(TopologyCliTest, AContainersRecordIsOfTheGpuItsUuidNamesInStatusAndRelease) {
  // A container given only the host's GPU 2 numbers it 0, and records its UUID.
  useHost("pcie-8");
  std::ofstream(coordinationFile())
      << "0 1\t5\tpidns=1\tuuid=GPU-a0000002-1111-4222-8333-444400000002\n";
  const CliRun json =
      run({"status", "--coordination-file", coordinationFile(), "--format", "json"});
  ASSERT_EQ(json.exitCode, 0) << json;
  const auto gpus = nlohmann::json::parse(json.out).at("gpus");
  EXPECT_EQ(gpus.at(0).at("state"), "free") << json;
  EXPECT_EQ(gpus.at(2).at("state"), "held") << json;
  EXPECT_EQ(run({"release", "--gpu", "0", "--coordination-file", coordinationFile()}).out,
            "GPU 0 is not held (coordination file " + coordinationFile() + ")\n");
  const CliRun release = run({"release", "--gpu", "2", "--coordination-file", coordinationFile()});
  EXPECT_EQ(release.exitCode, 0) << release;
  // Named as recorded, with the UUID that makes it GPU 2 here.
  EXPECT_EQ(release.out,
            "released GPU 0 (GPU-a0000002-1111-4222-8333-444400000002) (owner pid 1)\n")
      << release;
}

TEST_F(TopologyCliTest, TheSameHostGetsTheSameAnswers) {
  useHost("pcie-8");
  for (int amount = 1; amount <= 5; ++amount) {
    const CliRun first = run({"discover", "-n", std::to_string(amount)});
    for (int again = 0; again < 2; ++again) {
      EXPECT_EQ(run({"discover", "-n", std::to_string(amount)}).out, first.out) << amount;
    }
  }
}

// --- flink-gpu topology -----------------------------------------------------------------------

TEST_F(TopologyCliTest, TopologyPrintsNvidiaSmisMatrix) {
  useHost("islands-8");
  const CliRun text = run({"topology"});
  ASSERT_EQ(text.exitCode, 0) << text;
  EXPECT_EQ(rowOf(text.out, "GPU0"),
            (std::vector<std::string>{"GPU0", "X", "NV2", "NV2", "NV2", "SYS", "SYS", "SYS", "SYS",
                                      "0", "0"}));
  EXPECT_EQ(rowOf(text.out, "GPU5"),
            (std::vector<std::string>{"GPU5", "SYS", "SYS", "SYS", "SYS", "NV2", "X", "NV2", "NV2",
                                      "1", "1"}));
  EXPECT_TRUE(contains(firstLine(text.out), "CPU Affinity")) << text;

  useHost("pcie-8");
  EXPECT_EQ(rowOf(run({"topology"}).out, "GPU2"),
            (std::vector<std::string>{"GPU2", "PXB", "PXB", "X", "PIX", "SYS", "SYS", "SYS", "SYS",
                                      "0", "0"}));
  useHost("nvswitch-8");
  const CliRun nvswitch = run({"topology"});
  EXPECT_EQ(rowOf(nvswitch.out, "GPU7")[1], "NV18") << nvswitch;
  EXPECT_TRUE(contains(nvswitch.out, "NVSwitch host")) << nvswitch;
}

TEST_F(TopologyCliTest, AnUnknownRelationIsShownAsUnknown) {
  useHost("failing-4");
  const CliRun text = run({"topology"});
  ASSERT_EQ(text.exitCode, 0) << text;
  EXPECT_EQ(rowOf(text.out, "GPU1"),
            (std::vector<std::string>{"GPU1", "N/A", "X", "N/A", "N/A", "N/A", "N/A"}));
}

TEST_F(TopologyCliTest, TopologyAsJson) {
  useHost("islands-8");
  const CliRun result = run({"topology", "--format", "json"});
  ASSERT_EQ(result.exitCode, 0) << result;
  const nlohmann::json json = nlohmann::json::parse(result.out);
  EXPECT_EQ(json["source"], "NVML");
  EXPECT_EQ(json["nvswitch"], false);
  ASSERT_EQ(json["gpus"].size(), 8u);
  EXPECT_EQ(json["gpus"][4]["index"], "4");
  EXPECT_EQ(json["gpus"][4]["numa_node"], 1);
  EXPECT_EQ(json["gpus"][4]["cpu_affinity"], "1");
  EXPECT_EQ(json["gpus"][0]["pci.bus_id"], "00000000:19:00.0");
  ASSERT_EQ(json["pairs"].size(), 28u);
  const nlohmann::json& first = json["pairs"][0];
  EXPECT_EQ(first["gpus"], (nlohmann::json{"0", "1"}));
  EXPECT_EQ(first["relation"], "NV2");
  EXPECT_EQ(first["nvlinks"], 2);
  EXPECT_EQ(first["pcie"], "single-switch");
  EXPECT_EQ(first["score"], 250);

  useHost("failing-4");
  const nlohmann::json failing = nlohmann::json::parse(run({"topology", "--format", "json"}).out);
  EXPECT_TRUE(failing["pairs"][0]["pcie"].is_null());
  EXPECT_TRUE(failing["gpus"][0]["cpu_affinity"].is_null());
  EXPECT_EQ(failing["pairs"][0]["relation"], "N/A");
}

TEST_F(TopologyCliTest, ACountThatIsNotKnownIsNullNotZero) {
  useHost("islands-8");
  const nlohmann::json islands = nlohmann::json::parse(run({"topology", "--format", "json"}).out);
  EXPECT_EQ(islands["gpus"][0]["nvswitch_links"], 0) << "NVLinks known, none into a switch";
  useHost("nvswitch-8");
  const nlohmann::json fabric = nlohmann::json::parse(run({"topology", "--format", "json"}).out);
  EXPECT_EQ(fabric["gpus"][0]["nvswitch_links"], 18);

  // failing-4: GPU 0's NVLink queries fail, GPU 1 is lost, GPU 2 has no NVLink (an answer: 0),
  // GPU 3's first link query fails.
  useHost("failing-4");
  const CliRun result = run({"topology", "--format", "json"});
  ASSERT_EQ(result.exitCode, 0) << result;
  const nlohmann::json failing = nlohmann::json::parse(result.out);
  ASSERT_EQ(failing["gpus"].size(), 4u);
  EXPECT_TRUE(failing["gpus"][0]["nvswitch_links"].is_null()) << failing["gpus"][0];
  EXPECT_TRUE(failing["gpus"][1]["nvswitch_links"].is_null()) << failing["gpus"][1];
  EXPECT_EQ(failing["gpus"][2]["nvswitch_links"], 0);
  EXPECT_TRUE(failing["gpus"][3]["nvswitch_links"].is_null()) << failing["gpus"][3];
  for (const nlohmann::json& pair : failing["pairs"]) {
    // Only GPU 2 told its links; a pair is known only when both did.
    EXPECT_TRUE(pair["nvlinks"].is_null()) << pair;
  }
}

TEST_F(TopologyCliTest, TopologyWithoutNvmlIsAnErrorNamingWhy) {
  hostFile_ = (dir_ / "none.json").string();
  const CliRun result =
      runCli({"topology"}, {"FLINK_GPU_NVML_LIBRARY=" + (dir_ / "no.so").string(),
                            "PATH=" + (dir_ / "bin").string() + ":/usr/bin:/bin"});
  EXPECT_EQ(result.exitCode, 1) << result;
  EXPECT_TRUE(contains(firstLine(result.err),
                       "flink-gpu: error: cannot read the GPU topology: NVML is not usable"))
      << result;
}

// --- discover's JSON: numa_node and cpu_affinity ----------------------------------------------

TEST_F(TopologyCliTest, GpuInfoCarriesNumaNodeAndCpuAffinity) {
  useHost("islands-8");
  const CliRun result = run({"discover", "-n", "1", "--format", "json"});
  ASSERT_EQ(result.exitCode, 0) << result;
  const nlohmann::json gpu = nlohmann::json::parse(result.out)["gpu"][0];
  EXPECT_EQ(gpu["numa_node"], "0");
  EXPECT_EQ(gpu["cpu_affinity"], "0");
}

// --- exec --bind-cpus -------------------------------------------------------------------------

/// The Cpus_allowed_list line of what the command printed.
std::string cpusAllowed(const CliRun& run) {
  for (const std::string& line : linesOf(run.out)) {
    if (line.starts_with("Cpus_allowed_list:")) {
      std::string value = line.substr(line.find(':') + 1);
      value.erase(0, value.find_first_not_of(" \t"));
      return value;
    }
  }
  return "";
}

TEST_F(TopologyCliTest, ExecBindCpusRunsTheCommandOnItsGpusCpus) {
  const std::vector<unsigned> cpus = allowedCpus();
  if (cpus.size() < 2) GTEST_SKIP() << "needs two CPUs to tell a binding from none";
  const std::string a = std::to_string(cpus[0]);
  const std::string b = std::to_string(cpus[1]);
  useOwnHost(R"({"devices": [
    {"uuid": "GPU-0", "pci_bus_id": "00000000:19:00.0", "cpu_affinity": ")" +
             a + R"("},
    {"uuid": "GPU-1", "pci_bus_id": "00000000:3B:00.0", "cpu_affinity": ")" +
             b + R"("},
    {"uuid": "GPU-2", "pci_bus_id": "00000000:4C:00.0", "cpu_affinity": "4000-4001"},
    {"uuid": "GPU-3", "pci_bus_id": "00000000:5D:00.0"}]})");
  const std::vector<std::string> grep = {"--", "grep", "Cpus_allowed_list", "/proc/self/status"};
  const auto exec = [&](const std::vector<std::string>& more) {
    std::vector<std::string> args{"exec", "--coordination-file", coordinationFile(), "--bind-cpus"};
    args.insert(args.end(), more.begin(), more.end());
    args.insert(args.end(), grep.begin(), grep.end());
    return run(args);
  };
  const CliRun one = exec({"-n", "1"});
  ASSERT_EQ(one.exitCode, 0) << one;
  EXPECT_EQ(cpusAllowed(one), a) << one;
  EXPECT_TRUE(one.err.empty()) << one;

  Sleeper other;
  hold({"0"}, other);
  const CliRun second = exec({"-n", "1"});
  EXPECT_EQ(cpusAllowed(second), b) << second;

  // GPU 2's CPUs are not ours to use, GPU 3's are unknown: a warning, and no binding.
  Sleeper more;
  hold({"1"}, more);
  // (Through a file of its own: its GPU would otherwise be the last one another takes.)
  const std::string all =
      cpusAllowed(run({"exec", "--coordination-file", coordinationFile() + ".unbound", "-n", "1",
                       "--", "grep", "Cpus_allowed_list", "/proc/self/status"}));
  const CliRun outside = exec({"-n", "1"});
  EXPECT_EQ(outside.exitCode, 0) << outside;
  EXPECT_EQ(cpusAllowed(outside), all) << outside;
  EXPECT_TRUE(contains(outside.err,
                       "flink-gpu: warning: --bind-cpus: none of the CPUs close to "
                       "GPU(s) 2 (4000-4001) may be used by this process"))
      << outside;
  const CliRun unknown = exec({"-n", "2"});
  EXPECT_EQ(unknown.exitCode, 0) << unknown;
  EXPECT_EQ(cpusAllowed(unknown), all) << unknown;
  EXPECT_TRUE(contains(unknown.err, "the CPU affinity of GPU 3 is unknown")) << unknown;
}

TEST_F(TopologyCliTest, ExecBindsTheUnionOfItsGpusCpus) {
  const std::vector<unsigned> cpus = allowedCpus();
  if (cpus.size() < 2) GTEST_SKIP() << "needs two CPUs to tell a binding from none";
  const std::string a = std::to_string(cpus[0]);
  const std::string b = std::to_string(cpus[1]);
  useOwnHost(R"({"devices": [
    {"uuid": "GPU-0", "pci_bus_id": "00000000:19:00.0", "cpu_affinity": ")" +
             a + R"("},
    {"uuid": "GPU-1", "pci_bus_id": "00000000:3B:00.0", "cpu_affinity": ")" +
             b + R"("}]})");
  const CliRun both = run({"exec", "--coordination-file", coordinationFile(), "--bind-cpus", "-n",
                           "2", "--", "grep", "Cpus_allowed_list", "/proc/self/status"});
  ASSERT_EQ(both.exitCode, 0) << both;
  const std::string expected = cpus[1] == cpus[0] + 1 ? a + "-" + b : a + "," + b;
  EXPECT_EQ(cpusAllowed(both), expected) << both;
}

TEST_F(TopologyCliTest, ExecPlacementChoosesByTopologyOrByIndex) {
  useHost("islands-8");
  Sleeper other;
  hold({"4"}, other);
  const std::vector<std::string> printVisible = {"--", "sh", "-c", "echo $CUDA_VISIBLE_DEVICES"};
  std::vector<std::string> topology{"exec", "--coordination-file", coordinationFile(), "-n", "2"};
  topology.insert(topology.end(), printVisible.begin(), printVisible.end());
  // 6 and 7 share a switch; 5, beside the held 4, is left with its broken pair.
  EXPECT_EQ(run(topology).out, "6,7\n");
  std::vector<std::string> index{
      "exec", "--coordination-file", coordinationFile(), "-n", "2", "--placement", "index"};
  index.insert(index.end(), printVisible.begin(), printVisible.end());
  EXPECT_EQ(run(index).out, "0,1\n");
}

}  // namespace
