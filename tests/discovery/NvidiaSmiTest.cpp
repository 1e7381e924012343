// NvidiaSmiEnumerator and the rules behind it, with stand-in nvidia-smi scripts: the answers real
// drivers give (a version mismatch, no devices, a corrupted infoROM), finding nvidia-smi, and the
// time-out. The enumerator takes where to look as options, so no test touches the real PATH or a
// real nvidia-smi of the host.
#include "discovery/NvidiaSmi.h"

#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "TestSupport.h"

namespace flink::discovery {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using process::ProcessOutcome;
using testing::readFile;
using testing::TempDir;
using testing::writeScript;

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

TEST_F(NvidiaSmiTest, AsksForIndicesOnly) {
  const fs::path folder = standIn("0\\n", 0);
  enumerateIn(folder);
  EXPECT_EQ(readFile(folder / "args.txt"), "--query-gpu=index --format=csv,noheader\n");
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
  EXPECT_TRUE(contains(error.details(), "nvidia-smi: No devices were found"));
}

TEST_F(NvidiaSmiTest, InfoRomWarningWithIndicesIsUsable) {
  const Enumeration found =
      enumerateIn(standIn("WARNING: infoROM is corrupted at gpu 0000:0B:00.0\\n0\\n1\\n", 14));
  EXPECT_EQ(identifiersOf(found.devices), (std::vector<std::string>{"0", "1"}));
  ASSERT_EQ(found.warnings.size(), 2u);
  EXPECT_EQ(found.warnings[0],
            "warning: nvidia-smi exited with code 14 but listed 2 GPU(s); using them");
  EXPECT_EQ(found.warnings[1], "nvidia-smi: WARNING: infoROM is corrupted at gpu 0000:0B:00.0");
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
  EXPECT_TRUE(found.warnings.empty());
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
  EXPECT_TRUE(found.warnings.empty());
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
  }
  try {
    interpretNvidiaSmiOutput("", ProcessOutcome::exited(9), 8s);
    FAIL();
  } catch (const DiscoveryError& e) {
    EXPECT_STREQ(e.what(), "nvidia-smi failed (exit code 9): (no output)");
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
  ASSERT_FALSE(found.warnings.empty());
  EXPECT_EQ(found.warnings[0],
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

TEST(ParseNvidiaSmiTimeout, Values) {
  EXPECT_EQ(parseNvidiaSmiTimeout(nullptr).timeout, kDefaultNvidiaSmiTimeout);
  EXPECT_FALSE(parseNvidiaSmiTimeout(nullptr).note);
  EXPECT_FALSE(parseNvidiaSmiTimeout("").note);
  EXPECT_EQ(parseNvidiaSmiTimeout("3").timeout, 3s);
  EXPECT_EQ(parseNvidiaSmiTimeout("99999").timeout, 99999s);
  for (const char* bad : {"0", "03", "-1", "1.5", "soon", "100000"}) {
    const TimeoutSetting setting = parseNvidiaSmiTimeout(bad);
    EXPECT_EQ(setting.timeout, kDefaultNvidiaSmiTimeout) << bad;
    EXPECT_EQ(setting.note, "note: ignoring NVIDIA_SMI_TIMEOUT='" + std::string(bad) +
                                "' (not a positive integer); using 8 s")
        << bad;
  }
}

}  // namespace
}  // namespace flink::discovery
