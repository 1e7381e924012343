// GPUDriver, point by point of its contract: construction checks, the command line it runs, the
// time-out, failures, draining, parsing, the shape of the result, and concurrency.
#include "flink/externalresource/gpu/GPUDriver.h"

#include <stdlib.h>

#include <chrono>
#include <exception>
#include <mutex>
#include <thread>
#include <unordered_set>

#include <gtest/gtest.h>

#include "LogCapture.h"
#include "TestSupport.h"
#include "flink/externalresource/gpu/GPUDriverFactory.h"
#include "flink/externalresource/gpu/GPUDriverOptions.h"
#include "flink/externalresource/gpu/GPUInfo.h"
#include "flink/externalresource/gpu/ScriptFailure.h"
#include "flink/util/Exceptions.h"

namespace flink::externalresource::gpu {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::LogCapture;
using testing::readLines;
using testing::TempDir;
using testing::writeScript;

/// Sets an environment variable for the scope of one test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::optional<std::string>& value) : name_(name) {
    if (const char* old = ::getenv(name)) previous_ = old;
    if (value)
      ::setenv(name, value->c_str(), 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (previous_)
      ::setenv(name_, previous_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> previous_;
};

std::vector<std::string> indices(const ExternalResourceInfoSet& gpus) {
  std::vector<std::string> result;
  for (const auto& gpu : gpus) result.push_back(gpu->getProperty("index").value_or("?"));
  return result;
}

class GPUDriverTest : public ::testing::Test {
 protected:
  std::unique_ptr<GPUDriver> makeDriver(const std::string& path,
                                        std::optional<std::string> args = std::nullopt,
                                        std::optional<std::string> timeout = std::nullopt) {
    Configuration config;
    config.set(GPUDriverOptions::DISCOVERY_SCRIPT_PATH, path);
    if (args) config.set(GPUDriverOptions::DISCOVERY_SCRIPT_ARG, *args);
    if (timeout) config.setString(GPUDriverOptions::DISCOVERY_SCRIPT_TIMEOUT.key(), *timeout);
    return GPUDriverFactory().createGPUDriver(config);
  }
  fs::path script(const std::string& body, const std::string& name = "discover.sh") {
    return writeScript(dir_ / name, "#!/bin/sh\n" + body);
  }
  TempDir dir_;
};

// 1. Construction validates, in order.

TEST_F(GPUDriverTest, BlankPathNamesTheFullFlinkKey) {
  for (const char* blank : {"", "   ", "\t\n"}) {
    try {
      makeDriver(blank);
      ADD_FAILURE() << "accepted '" << blank << "'";
    } catch (const IllegalConfigurationException& e) {
      EXPECT_NE(std::string(e.what()).find(
                    "external-resource.<resource_name>.param.discovery-script.path"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST_F(GPUDriverTest, RelativePathIsResolvedAgainstFlinkHome) {
  script("echo 0\n", "plugins/gpu/discover.sh");
  ScopedEnv home("FLINK_HOME", dir_.path().string());
  const auto driver = makeDriver("plugins/gpu/discover.sh");
  EXPECT_EQ(driver->discoveryScript(), dir_ / "plugins/gpu/discover.sh");
  EXPECT_EQ(indices(driver->retrieveResourceInfo(1)), std::vector<std::string>{"0"});
}

TEST_F(GPUDriverTest, RelativePathWithoutFlinkHomeIsResolvedAgainstTheWorkingDirectory) {
  script("echo 0\n", "discover.sh");
  ScopedEnv home("FLINK_HOME", std::nullopt);
  const fs::path previous = fs::current_path();
  fs::current_path(dir_.path());
  std::unique_ptr<GPUDriver> driver;
  EXPECT_NO_THROW(driver = makeDriver("./discover.sh"));
  fs::current_path(previous);
  ASSERT_TRUE(driver);
  EXPECT_EQ(driver->discoveryScript(), dir_ / "discover.sh");
}

TEST_F(GPUDriverTest, MissingFileIsFileNotFoundWithTheAbsolutePath) {
  ScopedEnv home("FLINK_HOME", dir_.path().string());
  try {
    makeDriver("missing/discover.sh");
    FAIL();
  } catch (const FileNotFoundException& e) {
    EXPECT_NE(std::string(e.what()).find((dir_ / "missing/discover.sh").string()),
              std::string::npos)
        << e.what();
  }
}

TEST_F(GPUDriverTest, DefaultScriptIsFlinksPluginsFolderUnderFlinkHome) {
  // A Flink installed anywhere: no discovery-script.path, FLINK_HOME names the installation.
  script("echo 3\n", "plugins/external-resource-gpu/nvidia-gpu-discovery.sh");
  ScopedEnv home("FLINK_HOME", dir_.path().string());
  const auto driver = GPUDriverFactory().createGPUDriver(Configuration());
  EXPECT_EQ(driver->discoveryScript(),
            dir_ / "plugins/external-resource-gpu/nvidia-gpu-discovery.sh");
  EXPECT_EQ(indices(driver->retrieveResourceInfo(1)), std::vector<std::string>{"3"});
}

TEST_F(GPUDriverTest, DefaultScriptWithoutFlinkHomeIsLookedForInTheWorkingDirectory) {
  script("echo 0\n", "plugins/external-resource-gpu/nvidia-gpu-discovery.sh");
  ScopedEnv home("FLINK_HOME", std::nullopt);
  const fs::path previous = fs::current_path();
  fs::current_path(dir_.path());
  std::unique_ptr<GPUDriver> driver;
  EXPECT_NO_THROW(driver = GPUDriverFactory().createGPUDriver(Configuration()));
  fs::current_path(previous);
  ASSERT_TRUE(driver);
  EXPECT_EQ(driver->discoveryScript(),
            dir_ / "plugins/external-resource-gpu/nvidia-gpu-discovery.sh");
}

TEST_F(GPUDriverTest, MissingDefaultScriptNamesEveryPlaceLookedAt) {
  if (fs::exists(GPUDriverOptions::DOCKER_DEFAULT_DISCOVERY_SCRIPT)) {
    GTEST_SKIP() << "this host has Flink's script at "
                 << GPUDriverOptions::DOCKER_DEFAULT_DISCOVERY_SCRIPT;
  }
  ScopedEnv home("FLINK_HOME", dir_.path().string());
  try {
    GPUDriverFactory().createGPUDriver(Configuration());
    FAIL();
  } catch (const FileNotFoundException& e) {
    const std::string message = e.what();
    EXPECT_NE(
        message.find((dir_ / "plugins/external-resource-gpu/nvidia-gpu-discovery.sh").string()),
        std::string::npos)
        << message;
    EXPECT_NE(message.find("$FLINK_HOME"), std::string::npos) << message;
    EXPECT_NE(message.find(GPUDriverOptions::DOCKER_DEFAULT_DISCOVERY_SCRIPT), std::string::npos)
        << message;
  }
}

TEST_F(GPUDriverTest, TheVendorPicksItsDefaultScriptAndIsOneOfThree) {
  ScopedEnv home("FLINK_HOME", dir_.path().string());
  for (const char* vendor : {"amd", "intel"}) {
    Configuration config;
    config.set(GPUDriverOptions::VENDOR, vendor);
    try {
      GPUDriverFactory().createGPUDriver(config);
      FAIL() << vendor;
    } catch (const FileNotFoundException& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find((dir_ / "plugins/external-resource-gpu").string() + "/" + vendor +
                             "-gpu-discovery.sh"),
                std::string::npos)
          << message;
      EXPECT_NE(message.find(std::string("/opt/flink/plugins/external-resource-gpu/") + vendor +
                             "-gpu-discovery.sh"),
                std::string::npos)
          << message;
    }
  }
  const fs::path amd = writeScript(dir_ / "plugins/external-resource-gpu/amd-gpu-discovery.sh",
                                   "#!/bin/sh\necho 0\n");
  Configuration config;
  config.set(GPUDriverOptions::VENDOR, "amd");
  const auto driver = GPUDriverFactory().createGPUDriver(config);
  EXPECT_EQ(driver->discoveryScript(), amd);
  EXPECT_EQ(driver->vendor(), "amd");
  EXPECT_FALSE(driver->runsInProcess());  // only NVIDIA's default discovery runs in-process

  for (const char* bad : {"AMD", "matrox", ""}) {
    Configuration wrong;
    wrong.set(GPUDriverOptions::VENDOR, bad);
    try {
      GPUDriverFactory().createGPUDriver(wrong);
      FAIL() << bad;
    } catch (const IllegalConfigurationException& e) {
      EXPECT_NE(std::string(e.what()).find("expected nvidia, amd or intel"), std::string::npos)
          << e.what();
    }
  }
}

TEST_F(GPUDriverTest, AConfiguredRelativePathHasNoFallback) {
  // Only Flink's default gets the /opt/flink fallback: a path the user chose is used as given.
  ScopedEnv home("FLINK_HOME", dir_.path().string());
  try {
    makeDriver("plugins/mine/nvidia-gpu-discovery.sh");
    FAIL();
  } catch (const FileNotFoundException& e) {
    EXPECT_EQ(std::string(e.what()).find("/opt/flink"), std::string::npos) << e.what();
  }
}

TEST_F(GPUDriverTest, NotExecutableOrNotAFileIsAFlinkException) {
  const auto plain = writeScript(dir_ / "plain.sh", "#!/bin/sh\necho 0\n", fs::perms::owner_read);
  try {
    makeDriver(plain.string());
    FAIL();
  } catch (const FlinkException& e) {
    EXPECT_NE(std::string(e.what()).find("not executable"), std::string::npos) << e.what();
  }
  EXPECT_THROW(makeDriver(dir_.path().string()), FlinkException);  // a directory
}

TEST_F(GPUDriverTest, TimeOutMustBeAPositiveDuration) {
  const auto path = script("echo 0\n");
  EXPECT_EQ(makeDriver(path.string())->timeout(), 10s);
  EXPECT_EQ(makeDriver(path.string(), std::nullopt, "500 ms")->timeout(), 500ms);
  EXPECT_EQ(makeDriver(path.string(), std::nullopt, "1 min")->timeout(), 60s);
  EXPECT_THROW(makeDriver(path.string(), std::nullopt, "0 s"), IllegalConfigurationException);
  EXPECT_THROW(makeDriver(path.string(), std::nullopt, "soon"), IllegalConfigurationException);
}

TEST_F(GPUDriverTest, PlacementKeyIsPassedToTheScriptOnlyWhenSet) {
  const auto path = script("echo \"$@\"\n");
  EXPECT_EQ(makeDriver(path.string())->discoveryArguments(), (std::vector<std::string>{"null"}));
  Configuration config;
  config.set(GPUDriverOptions::DISCOVERY_SCRIPT_PATH, path.string());
  config.set(GPUDriverOptions::DISCOVERY_SCRIPT_ARG, "--enable-coordination-mode");
  config.set(GPUDriverOptions::PLACEMENT, " index ");
  EXPECT_EQ(GPUDriverFactory().createGPUDriver(config)->discoveryArguments(),
            (std::vector<std::string>{"--enable-coordination-mode", "--placement", "index"}));
  config.set(GPUDriverOptions::PLACEMENT, "nearest");
  try {
    GPUDriverFactory().createGPUDriver(config);
    ADD_FAILURE() << "accepted placement 'nearest'";
  } catch (const IllegalConfigurationException& e) {
    EXPECT_NE(std::string(e.what()).find("'nearest' for configuration key 'placement'"),
              std::string::npos)
        << e.what();
  }
}

// 2. Amount <= 0 fails before anything runs.

TEST_F(GPUDriverTest, NonPositiveAmountRunsNothing) {
  const auto marker = dir_ / "ran";
  const auto driver = makeDriver(script("touch " + marker.string() + "\necho 0\n").string());
  EXPECT_THROW(driver->retrieveResourceInfo(0), std::invalid_argument);
  EXPECT_THROW(driver->retrieveResourceInfo(-1), std::invalid_argument);
  EXPECT_FALSE(fs::exists(marker));
}

// 3. The command line: <absolute path> <amount> <args...>, no shell.

TEST_F(GPUDriverTest, ArgsAreSplitOnWhitespaceAndAPathWithASpaceWorks) {
  const auto argsFile = dir_ / "args";
  const auto path = writeScript(dir_ / "my scripts" / "discover gpus.sh",
                                "#!/bin/sh\nfor a in \"$0\" \"$@\"; do echo \"$a\"; done > '" +
                                    argsFile.string() + "'\necho 0,1\n");
  const auto driver = makeDriver(path.string(), "  --device-type\tnvidia  '$HOME' ");
  EXPECT_EQ(indices(driver->retrieveResourceInfo(2)), (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(readLines(argsFile),
            (std::vector<std::string>{path.string(), "2", "--device-type", "nvidia", "'$HOME'"}));
}

TEST_F(GPUDriverTest, WithoutArgsTheScriptGetsNullAsFlinkPassesIt) {
  const auto argsFile = dir_ / "args";
  const auto driver = makeDriver(
      script("for a in \"$@\"; do echo \"$a\"; done > " + argsFile.string() + "\necho 0\n")
          .string());
  driver->retrieveResourceInfo(3);
  EXPECT_EQ(readLines(argsFile), (std::vector<std::string>{"3", "null"}));
}

// 4. Time-out: TimeoutException, and nothing of the script left running.

TEST_F(GPUDriverTest, TimeOutKillsTheScriptAndEveryProcessItStarted) {
  const auto pidFile = dir_ / "pids";
  const auto driver = makeDriver(
      script("sleep 300 & echo $! >> " + pidFile.string() + "\n" +
             "sh -c 'trap \"\" TERM; echo $$ >> " + pidFile.string() +
             "; while :; do sleep 1; done' &\n" + "echo $$ >> " + pidFile.string() + "\nwait\n")
          .string(),
      // Long enough for the script's shells to have written their pids (the inner one, killed
      // before its trap and its echo, would never write it) on a slow machine.
      std::nullopt, "3 s");
  LogCapture log;
  const auto start = Clock::now();
  try {
    driver->retrieveResourceInfo(1);
    FAIL();
  } catch (const TimeoutException& e) {
    EXPECT_NE(std::string(e.what()).find("did not finish within 3 s"), std::string::npos)
        << e.what();
  }
  // The time-out and the grace, not the children's 300 s or forever.
  EXPECT_LT(Clock::now() - start, 3s + 5s);
  const auto pids = testing::waitForLines(pidFile, 3, 1s);
  ASSERT_EQ(pids.size(), 3u);
  std::vector<pid_t> numbers;
  for (const auto& pid : pids) numbers.push_back(static_cast<pid_t>(std::stol(pid)));
  EXPECT_EQ(testing::waitUntilGone(numbers, 2s), std::vector<pid_t>{});
  EXPECT_TRUE(log.contains("warning", "did not finish within"));
}

// 5. Non-zero exit or a signal: FlinkException naming it, with both streams, logged at WARN.

TEST_F(GPUDriverTest, NonZeroExitNamesTheCodeAndShowsBothStreams) {
  const auto driver =
      makeDriver(script("echo 'Failed to initialize NVML: Driver/library version mismatch'\n"
                        "echo 'some detail' >&2\nexit 18\n")
                     .string());
  LogCapture log;
  try {
    driver->retrieveResourceInfo(1);
    FAIL();
  } catch (const FlinkException& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("exited with code 18"), std::string::npos) << message;
    EXPECT_NE(message.find("Driver/library version mismatch"), std::string::npos) << message;
    EXPECT_NE(message.find("some detail"), std::string::npos) << message;
  }
  EXPECT_TRUE(log.contains("warning", "exited with code 18"));
}

TEST_F(GPUDriverTest, AFailedScriptIsNestedAsValues) {
  // For a caller that words its own message (flink-gpu): the outcome and both streams, beside
  // the driver's message, which stays as it was.
  const fs::path path = script("echo 0\necho 'no daemon' >&2\nexit 3\n");
  const auto driver = makeDriver(path.string());
  try {
    driver->retrieveResourceInfo(1);
    FAIL();
  } catch (const FlinkException& e) {
    EXPECT_NE(std::string(e.what()).find("exited with code 3: no daemon"), std::string::npos)
        << e.what();
    try {
      std::rethrow_if_nested(e);
      ADD_FAILURE() << "nothing nested";
    } catch (const ScriptFailure& failure) {
      EXPECT_EQ(failure.outcome(), process::ProcessOutcome::exited(3));
      EXPECT_EQ(failure.stdoutOutput().data, "0\n");
      EXPECT_EQ(failure.stderrOutput().data, "no daemon\n");
      EXPECT_EQ(failure.script(), fs::absolute(path));
      EXPECT_EQ(std::string(failure.what()),
                "the discovery script " + fs::absolute(path).string() + " exited with code 3");
    }
  }
}

TEST_F(GPUDriverTest, DeathBySignalNamesTheSignal) {
  const auto driver = makeDriver(script("kill -TERM $$\n").string());
  try {
    driver->retrieveResourceInfo(1);
    FAIL();
  } catch (const FlinkException& e) {
    EXPECT_NE(std::string(e.what()).find("signal 15 (SIGTERM)"), std::string::npos) << e.what();
  }
}

TEST_F(GPUDriverTest, HugeFailureOutputIsTrimmedInTheMessage) {
  const auto driver = makeDriver(
      script("echo 'first reason' >&2\nhead -c 100000 /dev/zero | tr '\\0' x >&2\nexit 2\n")
          .string());
  try {
    driver->retrieveResourceInfo(1);
    FAIL();
  } catch (const FlinkException& e) {
    const std::string message = e.what();
    EXPECT_LT(message.size(), 6000u);
    EXPECT_NE(message.find("first reason"), std::string::npos);
    EXPECT_NE(message.find("more bytes"), std::string::npos);
  }
}

TEST_F(GPUDriverTest, ControlCharactersInTheOutputAreEscapedInTheMessage) {
  // A terminal reading the error must not be driven by the script (title, colours, cursor).
  const auto driver =
      makeDriver(script("printf 'ok\\n\\033]0;pwned\\007\\033[31mred\\n'\nexit 1\n").string());
  try {
    driver->retrieveResourceInfo(1);
    FAIL();
  } catch (const FlinkException& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\x1b'), std::string::npos) << message;
    EXPECT_EQ(message.find('\x07'), std::string::npos) << message;
    EXPECT_NE(message.find("stdout:\nok\n\\x1b]0;pwned\\x07\\x1b[31mred"), std::string::npos)
        << message;
  }
}

// 6. Both streams drained while the script runs.

TEST_F(GPUDriverTest, MegabytesOnStderrBeforeTheAnswerNeitherStallNorTimeOut) {
  const auto driver =
      makeDriver(script("head -c 4194304 /dev/zero | tr '\\0' e >&2\necho 0,1\n").string(),
                 std::nullopt, "5 s");
  const auto start = Clock::now();
  EXPECT_EQ(indices(driver->retrieveResourceInfo(2)), (std::vector<std::string>{"0", "1"}));
  EXPECT_LT(Clock::now() - start, 4s);
}

TEST_F(GPUDriverTest, MegabytesOnStdoutAfterTheAnswerAreIgnored) {
  const auto driver =
      makeDriver(script("echo 0,1\nhead -c 4194304 /dev/zero | tr '\\0' '\\n'\n").string());
  EXPECT_EQ(indices(driver->retrieveResourceInfo(2)), (std::vector<std::string>{"0", "1"}));
}

// 7. First line only; split, trim, drop blanks.

TEST_F(GPUDriverTest, OnlyTheFirstLineIsReadAndMoreLinesAreLogged) {
  const auto driver = makeDriver(script("echo ' 0 , ,1,'\necho 2,3\necho 4\n").string());
  LogCapture log;
  EXPECT_EQ(indices(driver->retrieveResourceInfo(2)), (std::vector<std::string>{"0", "1"}));
  EXPECT_TRUE(log.contains("warning", "printed 2 more line(s)"));
}

TEST_F(GPUDriverTest, StderrIsReadByTheDefaultDiscoverysLineProtocol) {
  // Another program's output, read by the protocol our discovery program writes (Notice::line):
  // a GPU left out is logged as an error, another warning as a warning, notes and other lines
  // only in the debug line of all of stderr.
  const auto driver = makeDriver(
      script("echo 'warning: NVML: GPU 1 left out: nvmlDeviceGetUUID failed: GPU is lost' >&2\n"
             "echo 'warning: nvidia-smi exited with code 14 but listed 1 GPU(s); using them' >&2\n"
             "echo 'note: ignoring unknown argument x' >&2\n"
             "echo 'nvidia-smi: WARNING: infoROM is corrupted' >&2\n"
             "echo 0\n")
          .string());
  LogCapture log;
  EXPECT_EQ(indices(driver->retrieveResourceInfo(1)), std::vector<std::string>{"0"});
  EXPECT_TRUE(log.contains(
      "error", "left a GPU out: NVML: GPU 1 left out: nvmlDeviceGetUUID failed: GPU is lost"))
      << log.text();
  EXPECT_TRUE(log.contains("warning", "warns: nvidia-smi exited with code 14")) << log.text();
  EXPECT_FALSE(log.contains("error", "exited with code 14")) << log.text();
  EXPECT_FALSE(log.contains("warning", "ignoring unknown argument")) << log.text();
  EXPECT_FALSE(log.contains("warning", "infoROM")) << log.text();
  EXPECT_TRUE(log.contains("debug", "ignoring unknown argument")) << log.text();
}

// 8. Only device identifiers are GPUs.

TEST_F(GPUDriverTest, NoDevicesWereFoundIsNotAGpu) {
  const auto driver = makeDriver(script("echo 'No devices were found'\n").string());
  try {
    driver->retrieveResourceInfo(1);
    FAIL();
  } catch (const FlinkException& e) {
    EXPECT_NE(std::string(e.what()).find("\"No devices were found\""), std::string::npos)
        << e.what();
  }
}

TEST_F(GPUDriverTest, NotApplicableAndWarningsAreNotGpus) {
  for (const char* line : {"[N/A]", "0,[N/A]", "WARNING: infoROM is corrupted"}) {
    const auto driver = makeDriver(script(std::string("echo '") + line + "'\n").string());
    EXPECT_THROW(driver->retrieveResourceInfo(1), FlinkException) << line;
  }
}

TEST_F(GPUDriverTest, UuidsAreAccepted) {
  const auto driver = makeDriver(
      script("echo GPU-8932f937-d72c-4106-c12f-20bd9faed9f6,MIG-4b9e1b0a-7f3c-5a2e-9d1c\n")
          .string());
  EXPECT_EQ(indices(driver->retrieveResourceInfo(2)),
            (std::vector<std::string>{"GPU-8932f937-d72c-4106-c12f-20bd9faed9f6",
                                      "MIG-4b9e1b0a-7f3c-5a2e-9d1c"}));
}

// 9. Result: unique by index, in printed order; duplicates and shortfalls logged; one INFO line.

TEST_F(GPUDriverTest, SixteenGpusKeepTheirIndicesAndOrder) {
  const auto driver = makeDriver(script("echo 15,10,0,1,2,3,4,5,6,7,8,9,11,12,13,14\n").string());
  const auto gpus = driver->retrieveResourceInfo(16);
  EXPECT_EQ(indices(gpus), (std::vector<std::string>{"15", "10", "0", "1", "2", "3", "4", "5", "6",
                                                     "7", "8", "9", "11", "12", "13", "14"}));
  EXPECT_EQ(gpus[1]->toString(), "GPU Device(10)");
}

TEST_F(GPUDriverTest, DuplicatesAreCountedOnceAndLogged) {
  const auto driver = makeDriver(script("echo 1,0,1\n").string());
  LogCapture log;
  EXPECT_EQ(indices(driver->retrieveResourceInfo(2)), (std::vector<std::string>{"1", "0"}));
  EXPECT_TRUE(log.contains("warning", "GPU 1 more than once"));
  EXPECT_TRUE(log.contains("info", "Discovered GPU resources: [GPU Device(1), GPU Device(0)]"));
}

TEST_F(GPUDriverTest, FewerGpusThanAskedAreReturnedWithAWarning) {
  const auto driver = makeDriver(script("echo 0\n").string());
  LogCapture log;
  EXPECT_EQ(indices(driver->retrieveResourceInfo(4)), std::vector<std::string>{"0"});
  EXPECT_TRUE(log.contains("warning", "for 4 GPU(s), it found 1"));
}

TEST_F(GPUDriverTest, EmptyOutputMeansNoGpus) {
  const auto driver = makeDriver(script("echo '  '\n").string());
  EXPECT_TRUE(driver->retrieveResourceInfo(1).empty());
}

TEST_F(GPUDriverTest, GpuInfoPropertiesEqualityAndHash) {
  const auto driver = makeDriver(script("echo 0,1\n").string());
  const auto first = driver->retrieveResourceInfo(2);
  const auto second = driver->retrieveResourceInfo(2);
  const auto& gpu0 = dynamic_cast<const GPUInfo&>(*first[0]);
  const auto& gpu0Again = dynamic_cast<const GPUInfo&>(*second[0]);
  const auto& gpu1 = dynamic_cast<const GPUInfo&>(*first[1]);
  EXPECT_EQ(gpu0.getKeys(), std::vector<std::string>{"index"});
  EXPECT_EQ(gpu0.getProperty("index"), "0");
  EXPECT_EQ(gpu0.getProperty("uuid"), std::nullopt);
  EXPECT_EQ(gpu0.toString(), "GPU Device(0)");
  EXPECT_EQ(gpu0, gpu0Again);
  EXPECT_FALSE(gpu0 == gpu1);
  EXPECT_EQ(std::hash<GPUInfo>{}(gpu0), std::hash<GPUInfo>{}(gpu0Again));
  std::unordered_set<GPUInfo> set{gpu0, gpu0Again, gpu1};
  EXPECT_EQ(set.size(), 2u);
}

// 10. A background child holding stdout does not hold the call, and is killed.

TEST_F(GPUDriverTest, BackgroundGrandchildHoldingStdoutDoesNotHoldTheCall) {
  const auto pidFile = dir_ / "pids";
  const auto driver =
      makeDriver(script("sleep 60 &\necho $! > " + pidFile.string() + "\necho 0,1\n").string());
  const auto start = Clock::now();
  EXPECT_EQ(indices(driver->retrieveResourceInfo(2)), (std::vector<std::string>{"0", "1"}));
  EXPECT_LT(Clock::now() - start, 2s);
  const auto pids = readLines(pidFile);
  ASSERT_EQ(pids.size(), 1u);
  EXPECT_EQ(testing::waitUntilGone({static_cast<pid_t>(std::stol(pids[0]))}, 2s),
            std::vector<pid_t>{});
}

// 11. Many threads on one driver; no descriptor leaked; no zombie.

TEST_F(GPUDriverTest, ThirtyTwoThreadsOnOneDriver) {
  const auto driver = makeDriver(script("sleep 0.05\necho 0,1\n").string());
  driver->retrieveResourceInfo(2);  // warm up lazily made state (the logger)
  const std::size_t descriptorsBefore = testing::openDescriptorCount();

  std::mutex mutex;
  std::vector<std::string> failures;
  std::vector<std::thread> threads;
  for (int i = 0; i < 32; ++i) {
    threads.emplace_back([&] {
      try {
        const auto got = indices(driver->retrieveResourceInfo(2));
        if (got != std::vector<std::string>{"0", "1"}) {
          std::lock_guard lock(mutex);
          failures.push_back("wrong GPUs");
        }
      } catch (const std::exception& e) {
        std::lock_guard lock(mutex);
        failures.push_back(e.what());
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures, std::vector<std::string>{});
  EXPECT_EQ(testing::openDescriptorCount(), descriptorsBefore);
  EXPECT_FALSE(testing::hasChildren());
}

TEST_F(GPUDriverTest, ARelativeFlinkHomeStillGivesAnAbsolutePath) {
  script("echo 0\n", "home/discover.sh");
  const fs::path previous = fs::current_path();
  fs::current_path(dir_.path());
  ScopedEnv home("FLINK_HOME", "home");
  std::unique_ptr<GPUDriver> driver;
  EXPECT_NO_THROW(driver = makeDriver("discover.sh"));
  fs::current_path(previous);
  ASSERT_TRUE(driver);
  EXPECT_EQ(driver->discoveryScript(), dir_ / "home/discover.sh");
  EXPECT_EQ(indices(driver->retrieveResourceInfo(1)), std::vector<std::string>{"0"});
}

TEST_F(GPUDriverTest, AScriptWithoutAnInterpreterLineRunsWithBinShAsInJava) {
  const auto argsFile = dir_ / "args";
  const auto path =
      writeScript(dir_ / "no-shebang.sh", "echo \"$@\" > " + argsFile.string() + "\necho 0,1\n");
  LogCapture log;
  EXPECT_EQ(indices(makeDriver(path.string(), "a b")->retrieveResourceInfo(2)),
            (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(readLines(argsFile), std::vector<std::string>{"2 a b"});
  EXPECT_TRUE(log.contains("warning", "has no #! line"));
}

TEST_F(GPUDriverTest, AFirstLineLongerThanWhatIsKeptIsNotCutIntoWrongGpus) {
  // "0,0,...,0,12345" with the cut falling inside 12345 would otherwise read as GPU 12.
  const auto driver = makeDriver(
      script("head -c 1048574 /dev/zero | tr '\\0' '\\n' | sed 's/^$/0/' | tr '\\n' ','\n"
             "echo 12345\n"));
  try {
    driver->retrieveResourceInfo(1);
    FAIL();
  } catch (const FlinkException& e) {
    EXPECT_NE(std::string(e.what()).find("first line longer than"), std::string::npos)
        << std::string(e.what()).substr(0, 300);
  }
}

TEST_F(GPUDriverTest, KillRunningDiscoveriesEndsScriptsAndTheirGroups) {
  const auto pidFile = dir_ / "pids";
  const auto driver = makeDriver(script("sleep 300 &\necho $! >> " + pidFile.string() +
                                        "\necho $$ >> " + pidFile.string() + "\nwait\n"),
                                 std::nullopt, "60 s");
  std::string failure;
  std::thread discovery([&] {
    try {
      driver->retrieveResourceInfo(1);
    } catch (const std::exception& e) {
      failure = e.what();
    }
  });
  // As long as a loaded machine takes to start it: the kill must find it running.
  const auto lines = testing::waitForLines(pidFile, 2, 50s);
  const auto start = Clock::now();
  GPUDriver::killRunningDiscoveries();
  discovery.join();
  EXPECT_LT(Clock::now() - start, 2s);
  EXPECT_NE(failure.find("signal 9 (SIGKILL)"), std::string::npos) << failure;
  ASSERT_EQ(lines.size(), 2u);
  std::vector<pid_t> pids;
  for (const auto& line : lines) pids.push_back(static_cast<pid_t>(std::stol(line)));
  EXPECT_EQ(testing::waitUntilGone(pids, 2s), std::vector<pid_t>{});
}

TEST_F(GPUDriverTest, AScriptRemovedAfterConstructionIsAFlinkException) {
  const auto path = script("echo 0\n");
  const auto driver = makeDriver(path.string());
  fs::remove(path);
  try {
    driver->retrieveResourceInfo(1);
    FAIL();
  } catch (const FlinkException& e) {
    EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace flink::externalresource::gpu
