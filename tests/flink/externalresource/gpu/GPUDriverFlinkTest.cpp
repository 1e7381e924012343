// Flink's own GPUDriverTest cases, re-expressed against the C++ driver.
#include <gtest/gtest.h>

#include "TestSupport.h"
#include "flink/externalresource/gpu/GPUDriverFactory.h"
#include "flink/externalresource/gpu/GPUDriverOptions.h"
#include "flink/util/Exceptions.h"

namespace flink::externalresource::gpu {
namespace {

using testing::TempDir;
using testing::writeScript;

class GPUDriverFlinkTest : public ::testing::Test {
 protected:
  std::unique_ptr<ExternalResourceDriver> makeDriver(const std::string& scriptPath) {
    Configuration config;
    config.set(GPUDriverOptions::DISCOVERY_SCRIPT_PATH, scriptPath);
    return GPUDriverFactory().createExternalResourceDriver(config);
  }
  TempDir dir_;
};

// Flink: testGPUDriverWithTestScript — a valid script gives the GPUs it prints.
TEST_F(GPUDriverFlinkTest, ValidScriptGivesTwoGpus) {
  const auto script =
      writeScript(dir_ / "testing-gpu-discovery.sh",
                  "#!/bin/sh\n"
                  "# Prints the first <amount> of four GPUs, as Flink's test does.\n"
                  "seq 0 3 | head -n \"$1\" | paste -sd, -\n");
  const ExternalResourceInfoSet gpus = makeDriver(script.string())->retrieveResourceInfo(2);
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[0]->getProperty("index"), "0");
  EXPECT_EQ(gpus[1]->getProperty("index"), "1");
}

// Flink: testGPUDriverWithInvalidAmount.
TEST_F(GPUDriverFlinkTest, NegativeAmountIsAnIllegalArgument) {
  const auto script = writeScript(dir_ / "gpus.sh", "#!/bin/sh\necho 0\n");
  EXPECT_THROW(makeDriver(script.string())->retrieveResourceInfo(-1), std::invalid_argument);
}

// Flink: testGPUDriverWithIllegalConfigTestScript.
TEST_F(GPUDriverFlinkTest, BlankScriptPathIsAnIllegalConfiguration) {
  EXPECT_THROW(makeDriver(" "), IllegalConfigurationException);
}

// Flink: testGPUDriverWithTestScriptDoNotExist.
TEST_F(GPUDriverFlinkTest, MissingScriptIsFileNotFound) {
  EXPECT_THROW(makeDriver((dir_ / "invalid").string()), FileNotFoundException);
}

// Flink: testGPUDriverWithInexecutableScript.
TEST_F(GPUDriverFlinkTest, NonExecutableScriptIsAFlinkException) {
  const auto script =
      writeScript(dir_ / "gpus.sh", "#!/bin/sh\necho 0\n",
                  std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  EXPECT_THROW(makeDriver(script.string()), FlinkException);
}

// Flink: testGPUDriverWithTestScriptExitWithNonZero.
TEST_F(GPUDriverFlinkTest, ScriptExitingNonZeroIsAFlinkException) {
  const auto script = writeScript(dir_ / "gpus.sh", "#!/bin/sh\necho 0,1\nexit 1\n");
  EXPECT_THROW(makeDriver(script.string())->retrieveResourceInfo(1), FlinkException);
}

}  // namespace
}  // namespace flink::externalresource::gpu
