// Configuration and ConfigOption: typed get/set, defaults, errors that name the key.
#include "flink/configuration/Configuration.h"

#include <gtest/gtest.h>

#include "flink/configuration/ConfigOptions.h"
#include "flink/externalresource/gpu/GPUDriverOptions.h"

namespace flink {
namespace {

using namespace std::chrono_literals;
using externalresource::gpu::GPUDriverOptions;

TEST(ConfigurationTest, GpuDriverOptionsHaveFlinksKeysAndDefaults) {
  EXPECT_EQ(GPUDriverOptions::DISCOVERY_SCRIPT_PATH.key(), "discovery-script.path");
  // Flink's default is relative (ConfigConstants.DEFAULT_FLINK_PLUGINS_DIRS is "plugins"): the
  // script of the installation at $FLINK_HOME.
  EXPECT_EQ(GPUDriverOptions::DISCOVERY_SCRIPT_PATH.defaultValue(),
            "plugins/external-resource-gpu/nvidia-gpu-discovery.sh");
  EXPECT_STREQ(GPUDriverOptions::DOCKER_DEFAULT_DISCOVERY_SCRIPT,
               "/opt/flink/plugins/external-resource-gpu/nvidia-gpu-discovery.sh");
  EXPECT_EQ(GPUDriverOptions::DISCOVERY_SCRIPT_ARG.key(), "discovery-script.args");
  EXPECT_FALSE(GPUDriverOptions::DISCOVERY_SCRIPT_ARG.hasDefaultValue());
  EXPECT_EQ(GPUDriverOptions::DISCOVERY_SCRIPT_TIMEOUT.key(), "discovery-script.timeout");
  EXPECT_EQ(GPUDriverOptions::DISCOVERY_SCRIPT_TIMEOUT.defaultValue(), 10s);
  EXPECT_FALSE(GPUDriverOptions::DISCOVERY_SCRIPT_PATH.description().empty());
}

TEST(ConfigurationTest, GetFallsBackToTheDefaultAndSetOverridesIt) {
  Configuration config;
  EXPECT_EQ(config.get(GPUDriverOptions::DISCOVERY_SCRIPT_PATH),
            *GPUDriverOptions::DISCOVERY_SCRIPT_PATH.defaultValue());
  EXPECT_FALSE(config.contains(GPUDriverOptions::DISCOVERY_SCRIPT_PATH));

  config.set(GPUDriverOptions::DISCOVERY_SCRIPT_PATH, "/x/discover.sh");
  EXPECT_TRUE(config.contains(GPUDriverOptions::DISCOVERY_SCRIPT_PATH));
  EXPECT_TRUE(config.containsKey("discovery-script.path"));
  EXPECT_EQ(config.get(GPUDriverOptions::DISCOVERY_SCRIPT_PATH), "/x/discover.sh");
}

TEST(ConfigurationTest, OptionWithoutDefaultIsEmptyUntilSet) {
  Configuration config;
  EXPECT_EQ(config.getOptional(GPUDriverOptions::DISCOVERY_SCRIPT_ARG), std::nullopt);
  EXPECT_THROW(config.get(GPUDriverOptions::DISCOVERY_SCRIPT_ARG), IllegalConfigurationException);
  config.set(GPUDriverOptions::DISCOVERY_SCRIPT_ARG, "--device-type nvidia");
  EXPECT_EQ(config.get(GPUDriverOptions::DISCOVERY_SCRIPT_ARG), "--device-type nvidia");
}

TEST(ConfigurationTest, TypedValuesRoundTripThroughText) {
  const auto amount = ConfigOptions::key("amount").longType().defaultValue(1);
  const auto flag = ConfigOptions::key("flag").booleanType().defaultValue(false);
  const auto ratio = ConfigOptions::key("ratio").doubleType().noDefaultValue();
  const auto count = ConfigOptions::key("count").intType().noDefaultValue();
  Configuration config;
  config.set(amount, std::int64_t{99999999999}).set(flag, true).set(ratio, 0.25).set(count, -3);
  EXPECT_EQ(config.getString("amount"), "99999999999");
  EXPECT_EQ(config.get(amount), 99999999999);
  EXPECT_EQ(config.get(flag), true);
  EXPECT_EQ(config.get(ratio), 0.25);
  EXPECT_EQ(config.get(count), -3);

  config.setString("flag", " FALSE ");
  EXPECT_EQ(config.get(flag), false);
}

TEST(ConfigurationTest, DurationsAreReadAsFlinkWritesThem) {
  Configuration config;
  config.setString("discovery-script.timeout", "500 ms");
  EXPECT_EQ(config.get(GPUDriverOptions::DISCOVERY_SCRIPT_TIMEOUT), 500ms);
  config.setString("discovery-script.timeout", "1 min");
  EXPECT_EQ(config.get(GPUDriverOptions::DISCOVERY_SCRIPT_TIMEOUT), 60s);
  config.set(GPUDriverOptions::DISCOVERY_SCRIPT_TIMEOUT, std::chrono::milliseconds(2500));
  EXPECT_EQ(config.getString("discovery-script.timeout"), "2500 ms");
}

TEST(ConfigurationTest, BadValuesNameTheKeyAndTheValue) {
  const auto amount =
      ConfigOptions::key("external-resource.gpu.amount").longType().noDefaultValue();
  Configuration config;
  for (const char* bad : {"two", "", "1.5", "99999999999999999999", "3x"}) {
    config.setString(amount.key(), bad);
    try {
      config.get(amount);
      ADD_FAILURE() << "no error for '" << bad << "'";
    } catch (const IllegalConfigurationException& e) {
      EXPECT_NE(std::string(e.what()).find("'external-resource.gpu.amount'"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos)
          << e.what();
    }
  }
  config.setString("discovery-script.timeout", "soon");
  EXPECT_THROW(config.get(GPUDriverOptions::DISCOVERY_SCRIPT_TIMEOUT),
               IllegalConfigurationException);
}

TEST(ConfigurationTest, PrefixViewStripsTheResourcePrefix) {
  Configuration config;
  config.setString("external-resource.gpu.param.discovery-script.path", "/a.sh");
  config.setString("external-resource.gpu.param.discovery-script.args", "--x");
  config.setString("external-resource.gpu.amount", "2");
  config.setString("external-resource.fpga.param.discovery-script.path", "/b.sh");
  const Configuration view = config.withPrefixRemoved("external-resource.gpu.param.");
  EXPECT_EQ(view.keySet(),
            (std::vector<std::string>{"discovery-script.args", "discovery-script.path"}));
  EXPECT_EQ(view.get(GPUDriverOptions::DISCOVERY_SCRIPT_PATH), "/a.sh");
}

TEST(ConfigurationTest, RemoveKeyAndEquality) {
  Configuration a;
  Configuration b;
  a.setString("k", "v");
  EXPECT_NE(a, b);
  b.setString("k", "v");
  EXPECT_EQ(a, b);
  EXPECT_TRUE(a.removeKey("k"));
  EXPECT_FALSE(a.removeKey("k"));
  EXPECT_FALSE(a.containsKey("k"));
}

}  // namespace
}  // namespace flink
