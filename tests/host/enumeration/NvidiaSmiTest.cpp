// NvidiaSmiEnumerator and the rules behind it, with stand-in nvidia-smi scripts: the answers real
// drivers give (a version mismatch, no devices, a corrupted infoROM), finding nvidia-smi, and the
// time-out. The enumerator takes where to look as options, so no test touches the real PATH or a
// real nvidia-smi of the host.
#include "host/enumeration/NvidiaSmi.h"

#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <gtest/gtest.h>

#include "TestSupport.h"

namespace flink::discovery {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using process::ProcessOutcome;
using testing::readFile;
using testing::readLines;
using testing::TempDir;
using testing::writeScript;

/// Whole GPUs and MIG instances, as drivers print their UUIDs.
constexpr const char* kUuid0 = "GPU-5b8a0f2c-1d3e-4f50-8a6b-7c8d9e0f1a2b";
constexpr const char* kUuid1 = "GPU-6c9b1a3d-2e4f-5061-9b7c-8d9e0f1a2b3c";
constexpr const char* kMig0 = "MIG-a1b2c3d4-e5f6-5a7b-8c9d-0e1f2a3b4c5d";
constexpr const char* kMig1 = "MIG-b2c3d4e5-f6a7-5b8c-9d0e-1f2a3b4c5d6e";
constexpr const char* kMig2 = "MIG-c3d4e5f6-a7b8-5c9d-0e1f-2a3b4c5d6e7f";

class NvidiaSmiTest : public ::testing::Test {
 protected:
  /// A folder holding a stand-in nvidia-smi that records its arguments, prints `text` (printf
  /// %b escapes) and exits with `exitCode`, after `body`.
  fs::path standIn(const std::string& text, int exitCode, const std::string& body = "") {
    const fs::path folder = dir_ / ("smi" + std::to_string(++count_));
    writeScript(folder / "nvidia-smi",
                "#!/bin/sh\n"
                "printf '%s\\n' \"$*\" > '" +
                    (folder / "args.txt").string() +
                    "'\n"
                    "printf '" +
                    text + "'\n" + body + "\nexit " + std::to_string(exitCode) + "\n");
    return folder;
  }

  /// Enumerates with only `folder` to look in.
  Enumeration enumerateIn(const fs::path& folder, std::chrono::milliseconds timeout = 8s) {
    NvidiaSmiOptions options;
    options.searchPath = folder.string();
    options.folders = {};
    options.timeout = timeout;
    return NvidiaSmiEnumerator(options).enumerate();
  }

  /// The DiscoveryError that enumerating in `folder` throws.
  DiscoveryError errorIn(const fs::path& folder, std::chrono::milliseconds timeout = 8s) {
    try {
      enumerateIn(folder, timeout);
    } catch (const DiscoveryError& e) {
      return e;
    }
    ADD_FAILURE() << "no DiscoveryError";
    return DiscoveryError("none");
  }

  static bool contains(const std::vector<std::string>& lines, const std::string& line) {
    return std::find(lines.begin(), lines.end(), line) != lines.end();
  }

  TempDir dir_{"nvidia-smi-test"};
  int count_ = 0;
};

TEST_F(NvidiaSmiTest, AsksForThePropertiesAsCsvWithoutUnits) {
  const fs::path folder = standIn("0\\n", 0);
  enumerateIn(folder);
  EXPECT_EQ(readFile(folder / "args.txt"),
            "--query-gpu=index,uuid,name,pci.bus_id,memory.total "
            "--format=csv,noheader,nounits\n");
}

TEST_F(NvidiaSmiTest, ReadsThePropertiesOfEachGpu) {
  const Enumeration found = enumerateIn(
      standIn("0, GPU-5b8a0f2c-1d3e-4f50-8a6b-7c8d9e0f1a2b, NVIDIA H200, 00000000:19:00.0, "
              "143771\\n1, GPU-6c9b1a3d-2e4f-5061-9b7c-8d9e0f1a2b3c, NVIDIA H200, "
              "00000000:3B:00.0, 143771\\n",
              0));
  ASSERT_EQ(found.devices.size(), 2u);
  const GpuDevice& second = found.devices[1];
  EXPECT_EQ(second.identifier, "1");
  EXPECT_EQ(second.uuid, "GPU-6c9b1a3d-2e4f-5061-9b7c-8d9e0f1a2b3c");
  EXPECT_EQ(second.name, "NVIDIA H200");
  EXPECT_EQ(second.pciBusId, "00000000:3B:00.0");
  EXPECT_EQ(second.memoryTotalMiB, 143771u);
  EXPECT_FALSE(second.minorNumber);
  EXPECT_FALSE(second.migEnabled);
  EXPECT_FALSE(second.mig);
  EXPECT_TRUE(linesOf(found.notices).empty());
}

TEST_F(NvidiaSmiTest, VersionMismatchQuotesTheText) {
  const DiscoveryError error = errorIn(
      standIn("Failed to initialize NVML: Driver/library version mismatch\\nNVML library version: "
              "535.161\\n",
              18));
  EXPECT_STREQ(error.what(),
               "nvidia-smi failed (exit code 18): Failed to initialize NVML: Driver/library "
               "version mismatch");
  EXPECT_EQ(error.details(),
            (std::vector<std::string>{
                "nvidia-smi: Failed to initialize NVML: Driver/library version mismatch",
                "nvidia-smi: NVML library version: 535.161"}));
}

TEST_F(NvidiaSmiTest, NoDevicesFound) {
  const DiscoveryError error = errorIn(standIn("No devices were found\\n", 6));
  EXPECT_STREQ(error.what(), "no NVIDIA GPU found: nvidia-smi printed \"No devices were found\"");
  EXPECT_EQ(error.kind(), DiscoveryError::Kind::kNoGpu);
  EXPECT_TRUE(contains(error.details(), "nvidia-smi: No devices were found"));
}

TEST_F(NvidiaSmiTest, InfoRomWarningWithIndicesIsUsable) {
  const Enumeration found =
      enumerateIn(standIn("WARNING: infoROM is corrupted at gpu 0000:0B:00.0\\n0\\n1\\n", 14));
  EXPECT_EQ(identifiersOf(found.devices), (std::vector<std::string>{"0", "1"}));
  ASSERT_EQ(linesOf(found.notices).size(), 2u);
  EXPECT_EQ(linesOf(found.notices)[0],
            "warning: nvidia-smi exited with code 14 but listed 2 GPU(s); using them");
  EXPECT_EQ(linesOf(found.notices)[1],
            "nvidia-smi: WARNING: infoROM is corrupted at gpu 0000:0B:00.0");
}

TEST_F(NvidiaSmiTest, SixteenGpusInOrder) {
  std::string text;
  for (int i = 0; i < 16; ++i) text += std::to_string(i) + "\\n";
  const Enumeration found = enumerateIn(standIn(text, 0));
  const std::vector<std::string> gpus = identifiersOf(found.devices);
  ASSERT_EQ(gpus.size(), 16u);
  // What the program hands out for amount 12: the first twelve, as listed.
  const std::vector<std::string> first12(gpus.begin(), gpus.begin() + 12);
  EXPECT_EQ(first12, (std::vector<std::string>{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9",
                                               "10", "11"}));
  EXPECT_TRUE(linesOf(found.notices).empty());
}

TEST_F(NvidiaSmiTest, ErrorsOnStderrAreRead) {
  const fs::path folder = dir_ / "stderr";
  writeScript(folder / "nvidia-smi",
              "#!/bin/sh\necho 'NVIDIA-SMI has failed because it could not communicate with the "
              "NVIDIA driver.' >&2\nexit 9\n");
  const DiscoveryError error = errorIn(folder);
  EXPECT_STREQ(error.what(),
               "nvidia-smi failed (exit code 9): NVIDIA-SMI has failed because it could not "
               "communicate with the NVIDIA driver.");
}

TEST_F(NvidiaSmiTest, MissingSaysWhereItLooked) {
  const fs::path first = dir_ / "first";
  const fs::path second = dir_ / "second";
  fs::create_directories(first);
  fs::create_directories(second);
  NvidiaSmiOptions options;
  options.searchPath = first.string() + ":" + first.string() + "/";
  options.folders = {second, first};
  try {
    NvidiaSmiEnumerator(options).enumerate();
    FAIL() << "no DiscoveryError";
  } catch (const DiscoveryError& e) {
    EXPECT_STREQ(e.what(), "nvidia-smi was not found: no NVIDIA driver on this host");
    EXPECT_EQ(e.kind(), DiscoveryError::Kind::kNoDriver);
    ASSERT_FALSE(e.details().empty());
    // Each folder once, in the order looked in.
    EXPECT_TRUE(
        e.details()[0].starts_with("looked in " + first.string() + ", " + second.string() + " ("))
        << e.details()[0];
  }
}

TEST_F(NvidiaSmiTest, HangingNvidiaSmiIsStopped) {
  const auto start = std::chrono::steady_clock::now();
  const DiscoveryError error = errorIn(standIn("", 0, "sleep 30"), 300ms);
  EXPECT_STREQ(error.what(), "nvidia-smi did not answer within 300 ms and was stopped");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST_F(NvidiaSmiTest, ExplicitExecutableSkipsTheSearch) {
  const fs::path folder = standIn("3\\n", 0);
  NvidiaSmiOptions options;
  options.executable = folder / "nvidia-smi";
  options.searchPath = "";
  options.folders = {};
  EXPECT_EQ(identifiersOf(NvidiaSmiEnumerator(options).enumerate().devices),
            std::vector<std::string>{"3"});
}

/// A stand-in nvidia-smi that appends its arguments to args.txt and answers the GPU query with
/// `query` and `-L` with `listing`, exiting with `listExitCode` after `listBody`.
fs::path migStandIn(const fs::path& folder, const std::string& query, const std::string& listing,
                    int listExitCode = 0, const std::string& listBody = "") {
  writeScript(folder / "nvidia-smi",
              "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '" + (folder / "args.txt").string() +
                  "'\nif [ \"$1\" = -L ]; then\n  printf '" + listing + "'\n  " +
                  (listBody.empty() ? ":" : listBody) + "\n  exit " + std::to_string(listExitCode) +
                  "\nfi\nprintf '" + query + "'\n");
  return folder;
}

Enumeration enumerateMig(const fs::path& folder, std::chrono::milliseconds timeout = 8s) {
  NvidiaSmiOptions options;
  options.executable = folder / "nvidia-smi";
  options.mig = true;
  options.timeout = timeout;
  return NvidiaSmiEnumerator(options).enumerate();
}

const std::string kQueryH200 = std::string("0, ") + kUuid0 +
                               ", NVIDIA H200, 00000000:19:00.0, 143771\\n"
                               "1, " +
                               kUuid1 + ", NVIDIA H200, 00000000:3B:00.0, 143771\\n";
const std::string kListH200 = std::string("GPU 0: NVIDIA H200 (UUID: ") + kUuid0 +
                              ")\\n  MIG 1g.18gb     Device  0: (UUID: " + kMig0 +
                              ")\\nGPU 1: NVIDIA H200 (UUID: " + kUuid1 + ")\\n";

TEST_F(NvidiaSmiTest, MigRunsTheListingAfterTheQuery) {
  const fs::path folder = migStandIn(dir_ / "mig", kQueryH200, kListH200);
  const Enumeration found = enumerateMig(folder);
  EXPECT_EQ(readFile(folder / "args.txt"),
            "--query-gpu=index,uuid,name,pci.bus_id,memory.total --format=csv,noheader,nounits\n"
            "-L\n");
  EXPECT_EQ(identifiersOf(found.devices), (std::vector<std::string>{"0", kMig0, "1"}));
  EXPECT_TRUE(found.devices[0].migEnabled);
  EXPECT_EQ(found.devices[1].name, "NVIDIA H200 MIG 1g.18gb");
  EXPECT_TRUE(linesOf(found.notices).empty()) << linesOf(found.notices).front();
}

TEST_F(NvidiaSmiTest, WithoutMigTheListingIsNotRun) {
  const fs::path folder = migStandIn(dir_ / "no-mig", kQueryH200, kListH200);
  NvidiaSmiOptions options;
  options.executable = folder / "nvidia-smi";
  const Enumeration found = NvidiaSmiEnumerator(options).enumerate();
  EXPECT_EQ(identifiersOf(found.devices), (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(readLines(folder / "args.txt").size(), 1u);
}

TEST_F(NvidiaSmiTest, AFailingListingKeepsTheGpus) {
  const Enumeration found = enumerateMig(
      migStandIn(dir_ / "failing", kQueryH200, "Failed to initialize NVML: Unknown Error\\n", 255));
  EXPECT_EQ(identifiersOf(found.devices), (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(linesOf(found.notices),
            (std::vector<std::string>{
                "warning: nvidia-smi -L failed (exit code 255); MIG instances are not listed",
                "nvidia-smi -L: Failed to initialize NVML: Unknown Error"}));
}

TEST_F(NvidiaSmiTest, AFailingListingStillGivesWhatItPrinted) {
  const Enumeration found =
      enumerateMig(migStandIn(dir_ / "partial", kQueryH200, kListH200, 0, "kill -9 $$"));
  EXPECT_EQ(identifiersOf(found.devices), (std::vector<std::string>{"0", kMig0, "1"}));
  ASSERT_FALSE(linesOf(found.notices).empty());
  EXPECT_EQ(linesOf(found.notices)[0],
            "warning: nvidia-smi -L failed (killed by signal 9 (SIGKILL)); only the 1 MIG "
            "instance(s) it printed are listed");
}

TEST_F(NvidiaSmiTest, AHangingListingIsStoppedWithinTheOneTimeOut) {
  const auto start = std::chrono::steady_clock::now();
  const Enumeration found =
      // The query's run, which comes first and answers, must end within it on a slow machine.
      enumerateMig(migStandIn(dir_ / "hanging", kQueryH200, "", 0, "sleep 30"), 3s);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s + 5s);  // not the listing's 30 s
  EXPECT_EQ(identifiersOf(found.devices), (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(linesOf(found.notices),
            (std::vector<std::string>{"warning: nvidia-smi -L did not answer in time (3 s for "
                                      "both nvidia-smi runs) and was stopped; MIG instances are "
                                      "not listed"}));
}

/// Sets an environment variable for one scope (gtest runs the tests of this binary on one
/// thread, and process::run hands the environment to the child).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = ::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST_F(NvidiaSmiTest, SearchesThePathOfThisProcessByDefault) {
  const fs::path folder = standIn("5\\n", 0);
  const ScopedEnv path("PATH", folder.string() + ":/usr/bin:/bin");
  NvidiaSmiOptions options;
  options.folders = {};
  EXPECT_EQ(identifiersOf(NvidiaSmiEnumerator(options).enumerate().devices),
            std::vector<std::string>{"5"});
}

// --- finding it -----------------------------------------------------------------------------

TEST_F(NvidiaSmiTest, FindPrefersPathThenFolders) {
  const fs::path onPath = standIn("", 0);
  const fs::path installed = standIn("", 0);
  EXPECT_EQ(findNvidiaSmi(onPath.string(), {installed}).path, onPath / "nvidia-smi");
  EXPECT_EQ(findNvidiaSmi((dir_ / "nowhere").string(), {installed}).path, installed / "nvidia-smi");
}

TEST_F(NvidiaSmiTest, FindSkipsWhatCannotBeRun) {
  const fs::path notExecutable = dir_ / "not-executable";
  writeScript(notExecutable / "nvidia-smi", "#!/bin/sh\n",
              fs::perms::owner_read | fs::perms::owner_write);
  const fs::path aFolder = dir_ / "a-folder";
  fs::create_directories(aFolder / "nvidia-smi");
  const fs::path good = standIn("", 0);
  const NvidiaSmiLocation location =
      findNvidiaSmi(notExecutable.string() + ":" + aFolder.string(), {good});
  EXPECT_EQ(location.path, good / "nvidia-smi");
  EXPECT_EQ(location.searched, (std::vector<fs::path>{notExecutable, aFolder, good}));
}

TEST_F(NvidiaSmiTest, DefaultFoldersAreTheUsualOnes) {
  EXPECT_EQ(defaultNvidiaSmiFolders(),
            (std::vector<fs::path>{"/usr/bin", "/usr/local/bin", "/usr/local/nvidia/bin",
                                   "/usr/lib/wsl/lib", "/opt/nvidia/bin"}));
}

// --- reading its output ---------------------------------------------------------------------

TEST(InterpretNvidiaSmiOutput, WhitespaceAndCrlfAroundIndices) {
  const Enumeration found =
      interpretNvidiaSmiOutput(" 0 \r\n\n  1\r\n", ProcessOutcome::exited(0), 8s);
  EXPECT_EQ(identifiersOf(found.devices), (std::vector<std::string>{"0", "1"}));
  EXPECT_TRUE(linesOf(found.notices).empty());
}

TEST(InterpretNvidiaSmiOutput, IndicesAreCanonicalSoOneGpuIsOneRecord) {
  const Enumeration found = interpretNvidiaSmiOutput("00\n01\n10\n", ProcessOutcome::exited(0), 8s);
  EXPECT_EQ(identifiersOf(found.devices), (std::vector<std::string>{"0", "1", "10"}));
}

TEST(InterpretNvidiaSmiOutput, NothingPrinted) {
  try {
    interpretNvidiaSmiOutput("", ProcessOutcome::exited(0), 8s);
    FAIL();
  } catch (const DiscoveryError& e) {
    EXPECT_STREQ(e.what(), "no NVIDIA GPU found: nvidia-smi listed no GPU");
    EXPECT_EQ(e.kind(), DiscoveryError::Kind::kNoGpu);
  }
  try {
    interpretNvidiaSmiOutput("", ProcessOutcome::exited(9), 8s);
    FAIL();
  } catch (const DiscoveryError& e) {
    EXPECT_STREQ(e.what(), "nvidia-smi failed (exit code 9): (no output)");
    EXPECT_EQ(e.kind(), DiscoveryError::Kind::kFailed);
  }
}

TEST(InterpretNvidiaSmiOutput, TextWithoutIndexOnSuccess) {
  try {
    interpretNvidiaSmiOutput("GPU 0: something\n", ProcessOutcome::exited(0), 8s);
    FAIL();
  } catch (const DiscoveryError& e) {
    EXPECT_STREQ(e.what(),
                 "no NVIDIA GPU found: nvidia-smi printed no GPU index: GPU 0: something");
  }
}

TEST(InterpretNvidiaSmiOutput, TimedOutAfterIndices) {
  const Enumeration found = interpretNvidiaSmiOutput("0\n", ProcessOutcome::timedOut(), 8s);
  EXPECT_EQ(identifiersOf(found.devices), std::vector<std::string>{"0"});
  ASSERT_FALSE(linesOf(found.notices).empty());
  EXPECT_EQ(linesOf(found.notices)[0],
            "warning: nvidia-smi did not answer within 8 s; using the 1 GPU index(es) it printed "
            "before");
}

TEST(InterpretNvidiaSmiOutput, KilledBySignal) {
  try {
    interpretNvidiaSmiOutput("", ProcessOutcome::signaled(9), 8s);
    FAIL();
  } catch (const DiscoveryError& e) {
    EXPECT_STREQ(e.what(), "nvidia-smi failed (killed by signal 9 (SIGKILL)): (no output)");
  }
}

// --- the properties of a GPU line ------------------------------------------------------------

Enumeration interpretOk(const std::string& output) {
  return interpretNvidiaSmiOutput(output, ProcessOutcome::exited(0), 8s);
}

TEST(InterpretNvidiaSmiOutput, AllPropertiesOfAGpuLine) {
  const Enumeration found =
      interpretOk(std::string("007, ") + kUuid0 + ", NVIDIA H200, 00000000:19:00.0, 143771\n");
  ASSERT_EQ(found.devices.size(), 1u);
  const GpuDevice& gpu = found.devices[0];
  EXPECT_EQ(gpu.identifier, "7");
  EXPECT_EQ(gpu.uuid, kUuid0);
  EXPECT_EQ(gpu.name, "NVIDIA H200");
  EXPECT_EQ(gpu.pciBusId, "00000000:19:00.0");
  EXPECT_EQ(gpu.memoryTotalMiB, 143771u);
  EXPECT_TRUE(linesOf(found.notices).empty());
}

TEST(InterpretNvidiaSmiOutput, ANameWithCommasKeepsThem) {
  const Enumeration found = interpretOk(std::string("0, ") + kUuid0 +
                                        ", Tesla V100, PCIe, 32GB, 00000000:AF:00.0, 32510\r\n");
  ASSERT_EQ(found.devices.size(), 1u);
  EXPECT_EQ(found.devices[0].name, "Tesla V100, PCIe, 32GB");
  EXPECT_EQ(found.devices[0].pciBusId, "00000000:AF:00.0");
  EXPECT_EQ(found.devices[0].memoryTotalMiB, 32510u);
  EXPECT_TRUE(linesOf(found.notices).empty());
}

TEST(InterpretNvidiaSmiOutput, NoValueAnswersAreUnknownNeverValues) {
  for (const char* none : {"[N/A]", "N/A", "[Not Supported]", "[Requires Root]", ""}) {
    const std::string n(none);
    const Enumeration found = interpretOk("3, " + n + ", " + n + ", " + n + ", " + n + "\n");
    ASSERT_EQ(found.devices.size(), 1u) << n;
    const GpuDevice& gpu = found.devices[0];
    EXPECT_EQ(gpu.identifier, "3");
    EXPECT_FALSE(gpu.uuid) << n;
    EXPECT_FALSE(gpu.name) << n;
    EXPECT_FALSE(gpu.pciBusId) << n;
    EXPECT_FALSE(gpu.memoryTotalMiB) << n;
    EXPECT_TRUE(linesOf(found.notices).empty()) << n << ": " << linesOf(found.notices).front();
  }
}

TEST(InterpretNvidiaSmiOutput, SomePropertiesUnknown) {
  const Enumeration found =
      interpretOk(std::string("0, ") + kUuid0 + ", NVIDIA H200, [N/A], [Not Supported]\n");
  ASSERT_EQ(found.devices.size(), 1u);
  EXPECT_EQ(found.devices[0].uuid, kUuid0);
  EXPECT_EQ(found.devices[0].name, "NVIDIA H200");
  EXPECT_FALSE(found.devices[0].pciBusId);
  EXPECT_FALSE(found.devices[0].memoryTotalMiB);
}

TEST(InterpretNvidiaSmiOutput, AnIndexAloneIsAGpuWithoutProperties) {
  const Enumeration found =
      interpretOk(std::string("0\n1, ") + kUuid1 + ", NVIDIA H200, 00000000:3B:00.0, 143771\n");
  ASSERT_EQ(found.devices.size(), 2u);
  EXPECT_EQ(found.devices[0].identifier, "0");
  EXPECT_FALSE(found.devices[0].uuid);
  EXPECT_FALSE(found.devices[0].name);
  EXPECT_EQ(found.devices[1].uuid, kUuid1);
  EXPECT_TRUE(linesOf(found.notices).empty());
}

TEST(InterpretNvidiaSmiOutput, MalformedPropertiesAreUnknownWithAWarning) {
  const Enumeration found = interpretOk(
      "0, not-a-uuid, NVIDIA H200, 19:00, 140 GB\n"
      "1, " +
      std::string(kUuid1) +
      ", NVIDIA H200, 00000000:3B:00.0, 99999999999999999999999\n"
      "2, NVIDIA H200\n");
  ASSERT_EQ(found.devices.size(), 3u);
  EXPECT_FALSE(found.devices[0].uuid);
  EXPECT_EQ(found.devices[0].name, "NVIDIA H200");
  EXPECT_FALSE(found.devices[0].pciBusId);
  EXPECT_FALSE(found.devices[0].memoryTotalMiB);
  EXPECT_FALSE(found.devices[1].memoryTotalMiB);
  EXPECT_EQ(found.devices[1].pciBusId, "00000000:3B:00.0");
  EXPECT_EQ(identifiersOf(found.devices), (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_FALSE(found.devices[2].name);
  EXPECT_EQ(
      linesOf(found.notices),
      (std::vector<std::string>{
          "warning: nvidia-smi printed an invalid uuid for GPU 0: 'not-a-uuid'; leaving it "
          "unknown",
          "warning: nvidia-smi printed an invalid pci.bus_id for GPU 0: '19:00'; leaving it "
          "unknown",
          "warning: nvidia-smi printed an invalid memory.total for GPU 0: '140 GB'; leaving it "
          "unknown",
          "warning: nvidia-smi printed an invalid memory.total for GPU 1: "
          "'99999999999999999999999'; leaving it unknown",
          "warning: nvidia-smi printed 2 fields for GPU 2, not 5 (index, uuid, name, pci.bus_id, "
          "memory.total); its properties are unknown"}));
}

TEST(InterpretNvidiaSmiOutput, MemoryWithItsUnitIsTolerated) {
  const Enumeration found =
      interpretOk(std::string("0, ") + kUuid0 + ", NVIDIA H200, 00000000:19:00.0, 143771 MiB\n");
  EXPECT_EQ(found.devices.at(0).memoryTotalMiB, 143771u);
  EXPECT_TRUE(linesOf(found.notices).empty());
}

TEST(InterpretNvidiaSmiOutput, WarningsBetweenGpuLinesAreNeverGpus) {
  const Enumeration found = interpretNvidiaSmiOutput(
      "WARNING: infoROM is corrupted at gpu 0000:0B:00.0\n"
      "0, " +
          std::string(kUuid0) +
          ", NVIDIA H200, 00000000:0B:00.0, 143771\n"
          "Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error\n"
          "2, [N/A], NVIDIA H200, 00000000:5D:00.0, abc\n",
      ProcessOutcome::exited(14), 8s);
  EXPECT_EQ(identifiersOf(found.devices), (std::vector<std::string>{"0", "2"}));
  EXPECT_EQ(linesOf(found.notices),
            (std::vector<std::string>{
                "warning: nvidia-smi exited with code 14 but listed 2 GPU(s); using them",
                "warning: nvidia-smi: GPU 0000:3B:00.0 left out: Unable to determine the device "
                "handle for GPU0000:3B:00.0: Unknown Error",
                "warning: nvidia-smi printed an invalid memory.total for GPU 2: 'abc'; leaving "
                "it unknown",
                "nvidia-smi: WARNING: infoROM is corrupted at gpu 0000:0B:00.0"}));
}

// --- GPUs nvidia-smi cannot use ----------------------------------------------------------------

TEST(InterpretNvidiaSmiOutput, AGpuWithAnErrorLineIsLeftOutWhateverTheExitCode) {
  // One GPU fell off the bus: nvidia-smi prints the others' lines and one error line for it.
  for (int code : {0, 15, 255}) {
    const Enumeration found = interpretNvidiaSmiOutput(
        std::string("0, ") + kUuid0 +
            ", NVIDIA H200, 00000000:19:00.0, 143771\n"
            "Unable to determine the device handle for GPU 0000:0B:00.0: Unknown Error\n"
            "1, " +
            kUuid1 + ", NVIDIA H200, 00000000:3B:00.0, 143771\n",
        ProcessOutcome::exited(code), 8s);
    EXPECT_EQ(identifiersOf(found.devices), (std::vector<std::string>{"0", "1"})) << code;
    ASSERT_EQ(found.leftOut.size(), 1u) << code;
    EXPECT_EQ(found.leftOut[0].describe(),
              "GPU 0000:0B:00.0: Unable to determine the device handle for GPU 0000:0B:00.0: "
              "Unknown Error");
    // Its own line says it all: no second warning about the exit code.
    EXPECT_EQ(linesOf(found.notices),
              (std::vector<std::string>{"warning: nvidia-smi: GPU 0000:0B:00.0 left out: Unable "
                                        "to determine the device handle for GPU 0000:0B:00.0: "
                                        "Unknown Error"}))
        << code;
    EXPECT_EQ(found.notices[0].kind, Notice::Kind::kGpuLeftOut);
  }
}

TEST(InterpretNvidiaSmiOutput, AGpuWhoseFieldsSayLostOrDeniedIsLeftOut) {
  const Enumeration found =
      interpretOk(std::string("0, [GPU is lost], [GPU is lost], 00000000:19:00.0, [GPU is lost]\n"
                              "1, ") +
                  kUuid1 +
                  ", NVIDIA H200, 00000000:3B:00.0, [Insufficient Permissions]\n"
                  "2, [Unknown Error], NVIDIA H200, 00000000:5D:00.0, 143771\n"
                  "3, " +
                  kUuid0 + ", NVIDIA H200, 00000000:7F:00.0, 143771\n");
  EXPECT_EQ(identifiersOf(found.devices), (std::vector<std::string>{"3"}));
  ASSERT_EQ(found.leftOut.size(), 3u);
  EXPECT_EQ(found.leftOut[0].describe(), "GPU 0 (00000000:19:00.0): uuid is [GPU is lost]");
  EXPECT_EQ(found.leftOut[1].describe(),
            "GPU 1 (00000000:3B:00.0): memory.total is [Insufficient Permissions]");
  EXPECT_EQ(found.leftOut[2].describe(), "GPU 2 (00000000:5D:00.0): uuid is [Unknown Error]");
}

TEST(InterpretNvidiaSmiOutput, WhenEveryGpuIsLeftOutTheErrorNamesEach) {
  try {
    interpretNvidiaSmiOutput(
        "Unable to determine the device handle for GPU 0000:0B:00.0: Unknown Error\n"
        "Unable to determine the device handle for GPU0000:3B:00.0: GPU is lost\n",
        ProcessOutcome::exited(15), 8s);
    FAIL() << "no DiscoveryError";
  } catch (const DiscoveryError& e) {
    EXPECT_STREQ(e.what(),
                 "no usable NVIDIA GPU: nvidia-smi lists 2 GPU(s), and every one is left out: GPU "
                 "0000:0B:00.0: Unable to determine the device handle for GPU 0000:0B:00.0: "
                 "Unknown Error; GPU 0000:3B:00.0: Unable to determine the device handle for "
                 "GPU0000:3B:00.0: GPU is lost");
  }
}

// --- MIG instances from nvidia-smi -L ---------------------------------------------------------

/// Two H200s, as the query reports them.
Enumeration twoH200s() {
  return interpretOk(std::string("0, ") + kUuid0 + ", NVIDIA H200, 00000000:19:00.0, 143771\n1, " +
                     kUuid1 + ", NVIDIA H200, 00000000:3B:00.0, 143771\n");
}

/// nvidia-smi -L for them: GPU 0 in MIG mode with two instances, GPU 1 whole.
std::string listingOfTwoH200s() {
  return std::string("GPU 0: NVIDIA H200 (UUID: ") + kUuid0 +
         ")\n  MIG 1g.18gb     Device  0: (UUID: " + kMig0 +
         ")\n  MIG 3g.71gb     Device  1: (UUID: " + kMig1 +
         ")\nGPU 1: NVIDIA H200 (UUID: " + kUuid1 + ")\n";
}

TEST(ApplyNvidiaSmiMigListing, InstancesFollowTheirGpu) {
  Enumeration found = twoH200s();
  EXPECT_EQ(applyNvidiaSmiMigListing(found, listingOfTwoH200s()), 2u);
  EXPECT_EQ(identifiersOf(found.devices), (std::vector<std::string>{"0", kMig0, kMig1, "1"}));
  EXPECT_TRUE(linesOf(found.notices).empty()) << linesOf(found.notices).front();

  EXPECT_TRUE(found.devices[0].migEnabled);
  EXPECT_FALSE(found.devices[3].migEnabled);
  const GpuDevice& instance = found.devices[1];
  EXPECT_EQ(instance.uuid, kMig0);
  EXPECT_EQ(instance.name, "NVIDIA H200 MIG 1g.18gb");
  EXPECT_EQ(instance.pciBusId, "00000000:19:00.0");
  EXPECT_FALSE(instance.memoryTotalMiB);
  EXPECT_FALSE(instance.minorNumber);
  ASSERT_TRUE(instance.mig);
  EXPECT_EQ(instance.mig->parentIndex, 0u);
  EXPECT_FALSE(instance.mig->gpuInstanceId);
  EXPECT_FALSE(instance.mig->computeInstanceId);
  EXPECT_EQ(found.devices[2].name, "NVIDIA H200 MIG 3g.71gb");

  // The units: without --mig the whole GPUs; with it the instances and the GPU with MIG off.
  EXPECT_EQ(identifiersOf(allocatableUnits(found.devices, false)),
            (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(identifiersOf(allocatableUnits(found.devices, true)),
            (std::vector<std::string>{kMig0, kMig1, "1"}));

  // GPU 0 shares its hardware with its instances, which do not share theirs with each other.
  using Related = std::unordered_map<std::string, std::vector<std::string>>;
  EXPECT_EQ(relatedUnits(found.devices),
            (Related{{"0", {kMig0, kMig1}}, {kMig0, {"0"}}, {kMig1, {"0"}}}));
  EXPECT_EQ(relatedUnits(twoH200s().devices), Related{});
}

TEST(ApplyNvidiaSmiMigListing, ASecondGpuInMigModeAndApplyingTwice) {
  Enumeration found = twoH200s();
  const std::string listing = std::string("GPU 0: NVIDIA H200 (UUID: ") + kUuid0 +
                              ")\n  MIG 1g.18gb Device 0: (UUID: " + kMig0 +
                              ")\nGPU 1: NVIDIA H200 (UUID: " + kUuid1 +
                              ")\n  MIG 7g.141gb Device 0: (UUID: " + kMig2 + ")\n";
  EXPECT_EQ(applyNvidiaSmiMigListing(found, listing), 2u);
  EXPECT_EQ(applyNvidiaSmiMigListing(found, listing), 0u);
  EXPECT_EQ(identifiersOf(found.devices), (std::vector<std::string>{"0", kMig0, "1", kMig2}));
  EXPECT_EQ(found.devices[3].mig->parentIndex, 1u);
  EXPECT_EQ(found.devices[3].pciBusId, "00000000:3B:00.0");
}

TEST(ApplyNvidiaSmiMigListing, OldDriversMigGpuForm) {
  Enumeration found = twoH200s();
  const std::string old = std::string(kUuid0) + "/7/0";
  EXPECT_EQ(
      applyNvidiaSmiMigListing(found, std::string("GPU 0: A100-SXM4-40GB (UUID: ") + kUuid0 +
                                          ")\n  MIG 1g.5gb Device 0: (UUID: MIG-" + old + ")\n"),
      1u);
  EXPECT_EQ(found.devices[1].identifier, "MIG-" + old);
}

TEST(ApplyNvidiaSmiMigListing, GpusAreMatchedByUuidBeforeIndex) {
  Enumeration found = twoH200s();
  // The listing numbers the GPU with kUuid1 as 0: the UUID decides.
  applyNvidiaSmiMigListing(found, std::string("GPU 0: NVIDIA H200 (UUID: ") + kUuid1 +
                                      ")\n  MIG 1g.18gb Device 0: (UUID: " + kMig0 + ")\n");
  EXPECT_EQ(identifiersOf(found.devices), (std::vector<std::string>{"0", "1", kMig0}));
  EXPECT_EQ(found.devices[2].mig->parentIndex, 1u);
  EXPECT_FALSE(found.devices[0].migEnabled);
}

TEST(ApplyNvidiaSmiMigListing, NameFromTheListingWhenTheQueryHadNone) {
  Enumeration found = interpretOk("0\n1, [N/A], [N/A], [N/A], [N/A]\n");
  applyNvidiaSmiMigListing(found, std::string("GPU 0: NVIDIA H200 (UUID: ") + kUuid0 +
                                      ")\n  MIG 1g.18gb Device 0: (UUID: " + kMig0 +
                                      ")\nGPU 1: [N/A] (UUID: [N/A])\n  MIG 1g.18gb Device 0: "
                                      "(UUID: " +
                                      kMig1 + ")\n");
  ASSERT_EQ(identifiersOf(found.devices), (std::vector<std::string>{"0", kMig0, "1", kMig1}));
  EXPECT_EQ(found.devices[1].name, "NVIDIA H200 MIG 1g.18gb");
  EXPECT_FALSE(found.devices[1].pciBusId);
  EXPECT_FALSE(found.devices[3].name);  // never made up
}

TEST(ApplyNvidiaSmiMigListing, WhatCannotBePlacedIsReported) {
  Enumeration found = twoH200s();
  const std::size_t added =
      applyNvidiaSmiMigListing(found, std::string("  MIG 1g.18gb Device 0: (UUID: ") + kMig0 +
                                          ")\n"
                                          "GPU 5: NVIDIA H200 (UUID: GPU-0000aaaa)\n"
                                          "  MIG 1g.18gb Device 0: (UUID: " +
                                          kMig1 + ")\n  MIG 1g.18gb Device 1: (UUID: " + kMig2 +
                                          ")\n"
                                          "GPU 0: NVIDIA H200 (UUID: GPU-ffff0000)\n"
                                          "  MIG 1g.18gb Device 0: (UUID: MIG-0123)\n"
                                          "No MIG devices found\n"
                                          "  MIG 1g.18gb Device 0: (UUID: not-a-uuid)\n");
  EXPECT_EQ(added, 0u);
  EXPECT_EQ(identifiersOf(found.devices), (std::vector<std::string>{"0", "1"}));
  EXPECT_FALSE(found.devices[0].migEnabled);
  EXPECT_EQ(linesOf(found.notices),
            (std::vector<std::string>{
                std::string("warning: nvidia-smi -L listed MIG instance ") + kMig0 +
                    " before any GPU; ignoring it",
                "warning: nvidia-smi -L listed MIG instances of GPU 5 (GPU-0000aaaa), which the "
                "GPU query did not list; ignoring them",
                // GPU 0 of the listing is another GPU than GPU 0 of the query.
                "warning: nvidia-smi -L listed MIG instances of GPU 0 (GPU-ffff0000), which the "
                "GPU query did not list; ignoring them",
                "nvidia-smi -L: No MIG devices found",
                "nvidia-smi -L: MIG 1g.18gb Device 0: (UUID: not-a-uuid)"}));
}

TEST(ParseNvidiaSmiTimeout, Values) {
  EXPECT_EQ(parseNvidiaSmiTimeout(nullptr).timeout, kDefaultNvidiaSmiTimeout);
  EXPECT_FALSE(parseNvidiaSmiTimeout(nullptr).note);
  EXPECT_FALSE(parseNvidiaSmiTimeout("").note);
  EXPECT_EQ(parseNvidiaSmiTimeout("3").timeout, 3s);
  EXPECT_EQ(parseNvidiaSmiTimeout("99999").timeout, 99999s);
  for (const char* bad : {"0", "03", "-1", "1.5", "soon", "100000"}) {
    const TimeoutSetting setting = parseNvidiaSmiTimeout(bad);
    EXPECT_EQ(setting.timeout, kDefaultNvidiaSmiTimeout) << bad;
    EXPECT_EQ(setting.note, Notice::note("ignoring NVIDIA_SMI_TIMEOUT='" + std::string(bad) +
                                         "' (not a positive integer); using 8 s"))
        << bad;
  }
}

}  // namespace
}  // namespace flink::discovery
