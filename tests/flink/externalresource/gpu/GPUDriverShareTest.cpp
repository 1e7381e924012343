// GPUDriver with `--enable-coordination-mode --share` in its discovery-script.args, in-process on
// the stand-in libnvidia-ml.so.1: each GPUInfo is a share of a GPU declared shared beside the
// coordination file, with share.index, share.count, share.memory and, behind MPS, mps.* after the
// GPU's other properties; whole GPUs have none of them; two workers get distinct shares of one
// GPU; a driver's shares are recorded and leased for its life and given back when it goes.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "TestSupport.h"
#include "flink/externalresource/gpu/GPUDriver.h"
#include "flink/externalresource/gpu/GPUDriverFactory.h"
#include "flink/externalresource/gpu/GPUDriverOptions.h"
#include "flink/externalresource/gpu/GPUEnvironment.h"
#include "flink/externalresource/gpu/GPUInfo.h"
#include "flink/util/Exceptions.h"
#include "host/coordination/Coordination.h"
#include "host/coordination/Leases.h"
#include "host/sharing/SharingDeclarations.h"

#ifndef DEFAULT_DISCOVERY_SCRIPT
#error "DEFAULT_DISCOVERY_SCRIPT (the built nvidia-gpu-discovery.sh) must be defined by the build"
#endif

namespace flink::externalresource::gpu {
namespace {

namespace fs = std::filesystem;
using testing::ScopedEnvironment;
using testing::TempDir;

constexpr const char* kUuid0 = "GPU-5b8a0f2c-1d3e-4f50-8a6b-7c8d9e0f1a2b";
constexpr const char* kUuid1 = "GPU-6c9b1a3d-2e4f-5061-9b7c-8d9e0f1a2b3c";
/// The stand-in's H200s: memory.total in MiB.
constexpr unsigned kMemoryMiB = 143771;

/// Two H200s of kMemoryMiB, MIG mode off.
constexpr const char* kTwoH200s = R"({"devices": [
  {"uuid": "GPU-5b8a0f2c-1d3e-4f50-8a6b-7c8d9e0f1a2b", "name": "NVIDIA H200",
   "pci_bus_id": "00000000:19:00.0", "memory_total_mib": 143771, "minor_number": 0,
   "mig_enabled": false},
  {"uuid": "GPU-6c9b1a3d-2e4f-5061-9b7c-8d9e0f1a2b3c", "name": "NVIDIA H200",
   "pci_bus_id": "00000000:3B:00.0", "memory_total_mib": 143771, "minor_number": 1,
   "mig_enabled": false}
]})";

/// Every key of a share or of MPS.
const std::vector<std::string> kShareKeys{"share.index", "share.count", "share.memory",
                                          "mps.pipe_directory", "mps.active_thread_percentage"};

const GPUInfo& gpuInfo(const std::shared_ptr<const ExternalResourceInfo>& info) {
  return dynamic_cast<const GPUInfo&>(*info);
}

/// `info`'s property `key`, or "(none)".
std::string property(const GPUInfo& info, const std::string& key) {
  return info.getProperty(key).value_or("(none)");
}

class GPUDriverShareTest : public ::testing::Test {
 protected:
  GPUDriverShareTest() {
    // Our script and program, installed as a plugin folder would hold them.
    fs::create_directories(plugin_);
    fs::copy_file(DEFAULT_DISCOVERY_SCRIPT, script_);
    fs::copy_file(fs::path(DEFAULT_DISCOVERY_SCRIPT).parent_path() / "nvidia-gpu-discovery",
                  plugin_ / "nvidia-gpu-discovery");
    std::ofstream(dir_ / "host.json") << kTwoH200s;
  }

  fs::path coordinationFile() const { return dir_ / "coordination"; }

  /// Declares GPU `gpu` (of UUID `uuid`) shared `replicas` ways, each share of kMemoryMiB /
  /// replicas, behind the MPS daemon of `mps` when given: what `flink-gpu share` writes.
  void declare(const std::string& gpu, const std::string& uuid, unsigned replicas,
               const std::optional<std::string>& mps = std::nullopt) const {
    sharing::Declaration declaration;
    declaration.gpu = gpu;
    declaration.uuid = uuid;
    declaration.replicas = replicas;
    declaration.memoryPerShareMiB = sharing::memoryPerShare(kMemoryMiB, replicas);
    declaration.mpsPipeDirectory = mps;
    declaration.since = static_cast<std::int64_t>(std::time(nullptr));
    declaration.uid = ::getuid();
    sharing::declare(coordinationFile(), declaration);
  }

  /// An in-process driver with `args` after the coordination file.
  std::unique_ptr<GPUDriver> driver(const std::string& args) const {
    Configuration config;
    config.set(GPUDriverOptions::DISCOVERY_SCRIPT_PATH, script_.string());
    config.set(GPUDriverOptions::DISCOVERY_SCRIPT_ARG,
               "--enable-coordination-mode --coordination-file " + coordinationFile().string() +
                   (args.empty() ? "" : " " + args));
    std::unique_ptr<GPUDriver> made = GPUDriverFactory().createGPUDriver(config);
    EXPECT_TRUE(made->runsInProcess());
    return made;
  }

  /// The keys the whole GPU `index` has from a plain in-process discovery of both GPUs (no
  /// coordination file).
  std::vector<std::string> wholeKeysOf(const std::string& index) const {
    Configuration config;
    config.set(GPUDriverOptions::DISCOVERY_SCRIPT_PATH, script_.string());
    for (const auto& info : GPUDriverFactory().createGPUDriver(config)->retrieveResourceInfo(2)) {
      if (gpuInfo(info).index() == index) return info->getKeys();
    }
    ADD_FAILURE() << "a plain discovery of two GPUs gave no GPU " << index;
    return {};
  }

  /// "<gpu> <pid> share=<i>/<K>" (or "whole") for each record, sorted (the order of lines is
  /// not part of the format).
  std::vector<std::string> records() const {
    std::vector<std::string> lines;
    const coordination::ParsedRecords parsed =
        coordination::parseRecords(testing::readFile(coordinationFile()));
    for (const coordination::Record& record : parsed.records) {
      lines.push_back(record.gpu + " " + std::to_string(record.owner.pid) + " " +
                      (record.share ? "share=" + coordination::formatShareSlot(*record.share)
                                    : std::string("whole")));
    }
    std::sort(lines.begin(), lines.end());
    return lines;
  }

  coordination::LeaseState shareLease(const std::string& uuid, unsigned index) const {
    return coordination::leaseState(coordinationFile(),
                                    uuid + std::string(".share-") + std::to_string(index));
  }

  TempDir dir_{"gpu-driver-share"};
  fs::path plugin_ = dir_ / "plugins/external-resource-gpu";
  fs::path script_ = plugin_ / "nvidia-gpu-discovery.sh";
  ScopedEnvironment library_{"FLINK_GPU_NVML_LIBRARY", FAKE_NVML_FULL};
  ScopedEnvironment host_{"FAKE_NVML_DEVICES", (dir_ / "host.json").string()};
};

TEST_F(GPUDriverShareTest, ATimeSlicedShareCarriesItsIndexCountAndMemoryAfterTheGpusKeys) {
  std::vector<std::string> expectedKeys = wholeKeysOf("0");
  ASSERT_EQ(expectedKeys.front(), "index");
  expectedKeys.insert(expectedKeys.end(), {"share.index", "share.count", "share.memory"});
  declare("0", kUuid0, 4);

  const std::unique_ptr<GPUDriver> gpuDriver = driver("--share");
  const ExternalResourceInfoSet infos = gpuDriver->retrieveResourceInfo(1);
  ASSERT_EQ(infos.size(), 1u);
  const GPUInfo& share = gpuInfo(infos[0]);
  EXPECT_EQ(share.index(), "0");
  EXPECT_EQ(share.toString(), "GPU Device(0)");
  EXPECT_EQ(share.getKeys(), expectedKeys);
  EXPECT_EQ(property(share, "uuid"), kUuid0);
  EXPECT_EQ(property(share, "memory.total"), "143771");
  EXPECT_EQ(property(share, "share.index"), "0");
  EXPECT_EQ(property(share, "share.count"), "4");
  // memory.total / 4, rounded down to a MiB.
  EXPECT_EQ(property(share, "share.memory"), "35942");
  EXPECT_EQ(property(share, "mps.pipe_directory"), "(none)");
  EXPECT_EQ(property(share, "mps.active_thread_percentage"), "(none)");

  // Recorded in Flink's form for this process, and leased while the driver lives.
  EXPECT_EQ(records(), std::vector<std::string>{"0 " + std::to_string(::getpid()) + " share=0/4"});
  EXPECT_EQ(shareLease(kUuid0, 0), coordination::LeaseState::kHeld);
}

TEST_F(GPUDriverShareTest, AnMpsShareCarriesThePipeDirectoryAndItsThreadPercentage) {
  // Both GPUs behind one daemon, so that one request may take a share of each: 4 and 3 shares.
  declare("0", kUuid0, 4, "/some/dir");
  declare("1", kUuid1, 3, "/some/dir");

  const std::unique_ptr<GPUDriver> gpuDriver = driver("--share");
  const ExternalResourceInfoSet infos = gpuDriver->retrieveResourceInfo(2);
  ASSERT_EQ(infos.size(), 2u);
  const GPUInfo& first = gpuInfo(infos[0]);
  const GPUInfo& second = gpuInfo(infos[1]);
  EXPECT_EQ(first.index(), "0");
  EXPECT_EQ(second.index(), "1");
  const std::vector<std::string> keys = first.getKeys();
  ASSERT_GE(keys.size(), 5u);
  EXPECT_EQ(std::vector<std::string>(keys.end() - 5, keys.end()), kShareKeys);

  EXPECT_EQ(property(first, "share.index"), "0");
  EXPECT_EQ(property(first, "share.count"), "4");
  EXPECT_EQ(property(first, "share.memory"), "35942");
  EXPECT_EQ(property(first, "mps.pipe_directory"), "/some/dir");
  EXPECT_EQ(property(first, "mps.active_thread_percentage"), "25");
  // Each GPUInfo has its own GPU's share: 3 shares of 47923 MiB, 100/3 rounded down.
  EXPECT_EQ(property(second, "uuid"), kUuid1);
  EXPECT_EQ(property(second, "share.index"), "0");
  EXPECT_EQ(property(second, "share.count"), "3");
  EXPECT_EQ(property(second, "share.memory"), "47923");
  EXPECT_EQ(property(second, "mps.pipe_directory"), "/some/dir");
  EXPECT_EQ(property(second, "mps.active_thread_percentage"), "33");
}

TEST_F(GPUDriverShareTest, WholeGpusHaveNoShareKeysEvenWhereDeclaredShared) {
  declare("0", kUuid0, 4, "/some/dir");
  // A declared GPU without live shares goes whole to a whole request.
  const std::unique_ptr<GPUDriver> gpuDriver = driver("");
  const ExternalResourceInfoSet infos = gpuDriver->retrieveResourceInfo(2);
  ASSERT_EQ(infos.size(), 2u);
  for (const auto& info : infos) {
    const GPUInfo& whole = gpuInfo(info);
    EXPECT_EQ(whole.getKeys(), wholeKeysOf(whole.index())) << whole.toString();
    for (const std::string& key : kShareKeys) {
      EXPECT_EQ(whole.getProperty(key), std::nullopt) << key << " of " << whole.toString();
    }
  }
  const std::string pid = std::to_string(::getpid());
  EXPECT_EQ(records(), (std::vector<std::string>{"0 " + pid + " whole", "1 " + pid + " whole"}));
}

/// The other worker of TwoWorkers…: a process of its own, and the pipes to and from it. Its end
/// of `down` closed tells it to end; the destructor does so and reaps it.
struct OtherWorker {
  int up[2] = {-1, -1};
  int down[2] = {-1, -1};
  pid_t pid = -1;
  FILE* answers = nullptr;

  ~OtherWorker() {
    if (down[1] >= 0) ::close(down[1]);
    if (answers != nullptr) std::fclose(answers);
    if (pid > 0) ::waitpid(pid, nullptr, 0);
  }

  /// Its next line, without the '\n'.
  std::string nextAnswer() const {
    char line[4096];
    if (answers == nullptr || std::fgets(line, sizeof line, answers) == nullptr) {
      return "(no answer)";
    }
    std::string text(line);
    if (!text.empty() && text.back() == '\n') text.pop_back();
    return text;
  }
};

TEST_F(GPUDriverShareTest, TwoWorkersGetDistinctSharesAndAClosedDriverGivesItsShareBack) {
  declare("0", kUuid0, 2);
  // The other worker's driver gets a share and, when told, is closed and replaced by a new one,
  // which asks again; it tells each answer on a line of its own.
  OtherWorker other;
  ASSERT_EQ(::pipe(other.up), 0);
  ASSERT_EQ(::pipe(other.down), 0);
  other.pid = ::fork();
  ASSERT_GE(other.pid, 0);
  if (other.pid == 0) {
    ::close(other.up[0]);
    ::close(other.down[1]);
    const auto tell = [&](const std::string& line) {
      const std::string text = line + "\n";
      (void)!::write(other.up[1], text.data(), text.size());
    };
    const auto ask = [&](GPUDriver& gpuDriver) {
      try {
        const ExternalResourceInfoSet infos = gpuDriver.retrieveResourceInfo(1);
        const GPUInfo& info = gpuInfo(infos[0]);
        tell(property(info, "share.index") + "/" + property(info, "share.count"));
      } catch (const std::exception& e) {
        tell(std::string("failed: ") + e.what());
      }
    };
    char byte = 0;
    try {
      std::unique_ptr<GPUDriver> first = driver("--share");
      ask(*first);
      if (::read(other.down[0], &byte, 1) != 1) ::_exit(1);
      first.reset();
      const std::unique_ptr<GPUDriver> second = driver("--share");
      ask(*second);
      (void)!::read(other.down[0], &byte, 1);  // until the test is done with it
    } catch (...) {
      tell("failed");
    }
    ::_exit(0);
  }
  ::close(other.up[1]);
  ::close(other.down[0]);
  other.answers = ::fdopen(other.up[0], "r");
  ASSERT_NE(other.answers, nullptr);
  const std::string otherPid = std::to_string(other.pid);
  const std::string ourPid = std::to_string(::getpid());
  const auto sorted = [](std::vector<std::string> lines) {
    std::sort(lines.begin(), lines.end());
    return lines;
  };

  ASSERT_EQ(other.nextAnswer(), "0/2");
  {
    const std::unique_ptr<GPUDriver> ours = driver("--share");
    const ExternalResourceInfoSet infos = ours->retrieveResourceInfo(1);
    ASSERT_EQ(infos.size(), 1u);
    EXPECT_EQ(gpuInfo(infos[0]).index(), "0");
    EXPECT_EQ(property(gpuInfo(infos[0]), "share.index"), "1");
    EXPECT_EQ(property(gpuInfo(infos[0]), "share.count"), "2");
    const std::vector<std::string> both =
        sorted({"0 " + otherPid + " share=0/2", "0 " + ourPid + " share=1/2"});
    EXPECT_EQ(records(), both);
    EXPECT_EQ(shareLease(kUuid0, 0), coordination::LeaseState::kHeld);
    EXPECT_EQ(shareLease(kUuid0, 1), coordination::LeaseState::kHeld);

    // The other worker closes its driver and lives on: its share is free at once, so its new
    // driver gets share 0 again (GPU 0 has no other share, and a worker still holding one would
    // be refused a second).
    ASSERT_EQ(::write(other.down[1], "x", 1), 1);
    EXPECT_EQ(other.nextAnswer(), "0/2");
    EXPECT_EQ(records(), both);
  }
  // Ours closed: only the other worker's share is left, and share 1's lease is not held.
  EXPECT_EQ(records(), std::vector<std::string>{"0 " + otherPid + " share=0/2"});
  EXPECT_NE(shareLease(kUuid0, 1), coordination::LeaseState::kHeld);
}

}  // namespace
}  // namespace flink::externalresource::gpu

namespace flink::externalresource::gpu {
namespace {

/// The value environmentFor sets for `name`, or "(unset)" when it is among the names to unset,
/// or "(none)".
std::string valueIn(const GPUEnvironment& environment, const std::string& name) {
  for (const auto& [key, value] : environment.set) {
    if (key == name) return value;
  }
  for (const std::string& key : environment.unset) {
    if (key == name) return "(unset)";
  }
  return "(none)";
}

TEST_F(GPUDriverShareTest, AChildOfAnMpsShareHolderGetsTheVariablesExecWouldSet) {
  fs::create_directories(dir_ / "mps");
  declare("1", kUuid1, 4, (dir_ / "mps").string());
  const std::unique_ptr<GPUDriver> gpuDriver = driver("--share");
  const GPUEnvironment environment = environmentFor(gpuDriver->retrieveResourceInfo(1));
  ASSERT_FALSE(environment.set.empty());
  EXPECT_EQ(environment.set.front(),
            (std::pair<std::string, std::string>{"CUDA_VISIBLE_DEVICES", kUuid1}));
  EXPECT_EQ(valueIn(environment, "FLINK_GPU_SHARE_MEMORY_MIB"), std::to_string(kMemoryMiB / 4));
  EXPECT_EQ(valueIn(environment, "CUDA_MPS_PIPE_DIRECTORY"), (dir_ / "mps").string());
  EXPECT_EQ(valueIn(environment, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "25");
  EXPECT_EQ(valueIn(environment, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"),
            "0=" + std::to_string(kMemoryMiB / 4) + "M");
}

TEST_F(GPUDriverShareTest, AChildOfAWholeGpuHolderGetsItsUuidsAndNoShareVariable) {
  const std::unique_ptr<GPUDriver> gpuDriver = driver("");
  const GPUEnvironment environment = environmentFor(gpuDriver->retrieveResourceInfo(2));
  EXPECT_EQ(valueIn(environment, "CUDA_VISIBLE_DEVICES"), std::string(kUuid0) + "," + kUuid1);
  for (const char* name :
       {"FLINK_GPU_SHARE_MEMORY_MIB", "CUDA_MPS_PIPE_DIRECTORY",
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"}) {
    EXPECT_EQ(valueIn(environment, name), "(unset)") << name;
  }
  // No GPU: an empty mask, so that the child uses none.
  EXPECT_EQ(valueIn(environmentFor(ExternalResourceInfoSet{}), "CUDA_VISIBLE_DEVICES"), "");
}

}  // namespace
}  // namespace flink::externalresource::gpu
