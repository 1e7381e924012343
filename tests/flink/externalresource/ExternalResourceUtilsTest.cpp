// ExternalResourceUtils: reading `external-resources` and `external-resource.<name>.*`, and the
// TaskManager's start-up path from a configuration to an ExternalResourceInfoProvider.
#include "flink/externalresource/ExternalResourceUtils.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "TestSupport.h"
#include "flink/externalresource/ExternalResourceOptions.h"
#include "flink/externalresource/gpu/GPUDriverFactory.h"
#include "flink/util/Exceptions.h"

namespace flink {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::TempDir;

const std::string kGpuFactory = externalresource::gpu::GPUDriverFactory::CLASS_NAME;

std::vector<std::string> indicesOf(const ExternalResourceInfoSet& infos) {
  std::vector<std::string> indices;
  for (const auto& info : infos) indices.push_back(info->getProperty("index").value_or("?"));
  return indices;
}

class ExternalResourceUtilsTest : public ::testing::Test {
 protected:
  /// A discovery script that prints `line` and exits with `exitCode`.
  std::string script(const std::string& name, const std::string& line, int exitCode = 0) {
    return testing::writeScript(dir_ / name, "#!/bin/sh\necho '" + line + "'\nexit " +
                                                 std::to_string(exitCode) + "\n")
        .string();
  }

  TempDir dir_{"external-resources"};
  PluginManager plugins_{"/nonexistent/plugins", ExternalResourceUtils::builtInFactories()};
};

TEST_F(ExternalResourceUtilsTest, ReadsEveryKeyOfEveryResource) {
  Configuration config;
  config.setString("external-resources", "gpu;fpga");
  config.setString("external-resource.gpu.amount", "2");
  config.setString("external-resource.gpu.driver-factory.class", kGpuFactory);
  config.setString("external-resource.gpu.param.discovery-script.path", "/opt/d.sh");
  config.setString("external-resource.gpu.param.discovery-script.args",
                   "--enable-coordination-mode");
  config.setString("external-resource.gpu.kubernetes.config-key", "nvidia.com/gpu");
  config.setString("external-resource.gpu.yarn.config-key", "yarn.io/gpu");
  config.setString("external-resource.fpga.amount", "1");
  config.setString("external-resource.fpga.driver-factory.class", "com.example.Fpga");

  const ExternalResources read = ExternalResourceUtils::readExternalResources(config);
  EXPECT_TRUE(read.errors.empty());
  EXPECT_TRUE(read.warnings.empty());
  ASSERT_EQ(read.resources.size(), 2u);
  const ExternalResourceSpec& gpu = read.resources[0];
  EXPECT_EQ(gpu.name, "gpu");
  EXPECT_EQ(gpu.amount, 2);
  EXPECT_EQ(gpu.driverFactoryClass, kGpuFactory);
  EXPECT_EQ(gpu.kubernetesConfigKey, "nvidia.com/gpu");
  EXPECT_EQ(gpu.yarnConfigKey, "yarn.io/gpu");
  // The driver sees its parameters with the whole prefix removed, and nothing else.
  EXPECT_EQ(gpu.driverConfiguration.keySet(),
            (std::vector<std::string>{"discovery-script.args", "discovery-script.path"}));
  EXPECT_EQ(gpu.driverConfiguration.getString("discovery-script.path"), "/opt/d.sh");
  EXPECT_EQ(read.resources[1].name, "fpga");
  EXPECT_FALSE(read.resources[1].kubernetesConfigKey);

  EXPECT_EQ(ExternalResourceUtils::getExternalResourceConfigurationKeys(
                config, ExternalResourceOptions::KUBERNETES_CONFIG_KEY_SUFFIX),
            (std::map<std::string, std::string>{{"gpu", "nvidia.com/gpu"}}));
  EXPECT_EQ(ExternalResourceUtils::getExternalResourceAmountMap(config),
            (std::map<std::string, std::int64_t>{{"fpga", 1}, {"gpu", 2}}));
}

TEST_F(ExternalResourceUtilsTest, BadAmountsAreErrorsNamingKeyAndValue) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"0", "must be positive"},
      {"-1", "must be positive"},
      {"two", "must be a positive integer"},
      {"99999999999999999999", "below 2^63"},
      {"", "must be a positive integer"},
  };
  for (const auto& [value, why] : cases) {
    Configuration config;
    config.setString("external-resources", "gpu");
    config.setString("external-resource.gpu.amount", value);
    config.setString("external-resource.gpu.driver-factory.class", kGpuFactory);
    const ExternalResources read = ExternalResourceUtils::readExternalResources(config);
    ASSERT_EQ(read.errors.size(), 1u) << value;
    EXPECT_THAT(read.errors[0],
                HasSubstr("Invalid value '" + value +
                          "' for configuration key 'external-resource.gpu.amount'"));
    EXPECT_THAT(read.errors[0], HasSubstr(why));
    ASSERT_EQ(read.resources.size(), 1u);
    EXPECT_FALSE(read.resources[0].amount);
    EXPECT_TRUE(ExternalResourceUtils::getExternalResourceAmountMap(config).empty()) << value;
  }
}

TEST_F(ExternalResourceUtilsTest, MissingAmountIsAnError) {
  Configuration config;
  config.setString("external-resources", "gpu");
  const ExternalResources read = ExternalResourceUtils::readExternalResources(config);
  ASSERT_EQ(read.errors.size(), 1u);
  EXPECT_THAT(read.errors[0], HasSubstr("'external-resource.gpu.amount'"));
  EXPECT_THAT(read.errors[0], HasSubstr("not configured"));
}

TEST_F(ExternalResourceUtilsTest, BlankAndDuplicateNamesAreWarnedAndCountedOnce) {
  Configuration config;
  config.setString("external-resources", " gpu ; ;fpga; ;gpu");  // two blanks: one warning
  for (const char* name : {"gpu", "fpga"}) {
    config.setString(std::string("external-resource.") + name + ".amount", "1");
    config.setString(std::string("external-resource.") + name + ".driver-factory.class", "x.Y");
  }
  const ExternalResources read = ExternalResourceUtils::readExternalResources(config);
  EXPECT_TRUE(read.errors.empty());
  ASSERT_EQ(read.resources.size(), 2u);
  EXPECT_EQ(read.resources[0].name, "gpu");
  EXPECT_EQ(read.resources[1].name, "fpga");
  ASSERT_EQ(read.warnings.size(), 2u);
  EXPECT_THAT(read.warnings[0], HasSubstr("blank resource name"));
  EXPECT_THAT(read.warnings[1], HasSubstr("lists the resource 'gpu' more than once"));
  EXPECT_EQ(ExternalResourceUtils::getExternalResourceSet(config),
            (std::vector<std::string>{"gpu", "fpga"}));
}

TEST_F(ExternalResourceUtilsTest, NoneAndEmptyMeanNoResources) {
  for (const char* value : {"none", "", "NONE"}) {
    Configuration config;
    config.setString("external-resources", value);
    const ExternalResources read = ExternalResourceUtils::readExternalResources(config);
    EXPECT_TRUE(read.resources.empty()) << value;
    EXPECT_TRUE(read.errors.empty()) << value;
  }
  EXPECT_TRUE(ExternalResourceUtils::readExternalResources(Configuration()).resources.empty());
}

TEST_F(ExternalResourceUtilsTest, ResourceWithoutFactoryIsAWarningAndGetsNoDriver) {
  Configuration config;
  config.setString("external-resources", "fpga");
  config.setString("external-resource.fpga.amount", "1");
  config.setString("external-resource.fpga.yarn.config-key", "yarn.io/fpga");
  const ExternalResources read = ExternalResourceUtils::readExternalResources(config);
  EXPECT_TRUE(read.errors.empty());
  ASSERT_EQ(read.warnings.size(), 1u);
  EXPECT_THAT(read.warnings[0],
              HasSubstr("'external-resource.fpga.driver-factory.class' is not set"));
  EXPECT_TRUE(ExternalResourceUtils::externalResourceDriversFromConfig(config, plugins_).empty());
  // YARN is still asked for it.
  EXPECT_EQ(ExternalResourceUtils::getExternalResourceConfigurationKeys(
                config, ExternalResourceOptions::YARN_CONFIG_KEY_SUFFIX),
            (std::map<std::string, std::string>{{"fpga", "yarn.io/fpga"}}));
}

TEST_F(ExternalResourceUtilsTest, UnknownFactoryIsAnErrorNamingItAndWhereItWasLookedFor) {
  ExternalResourceSpec resource;
  resource.name = "fpga";
  resource.amount = 1;
  resource.driverFactoryClass = "com.example.NoSuchFactory";
  try {
    ExternalResourceUtils::createExternalResourceDriver(resource, plugins_);
    FAIL() << "no exception";
  } catch (const FlinkException& e) {
    EXPECT_THAT(e.what(), HasSubstr("external resource 'fpga'"));
    EXPECT_THAT(e.what(), HasSubstr("'com.example.NoSuchFactory'"));
    EXPECT_THAT(e.what(), HasSubstr("/nonexistent/plugins does not exist"));
  }
}

TEST_F(ExternalResourceUtilsTest, TwoResourcesWithTheirOwnScripts) {
  Configuration config;
  config.setString("external-resources", "gpu;inference-gpu");
  config.setString("external-resource.gpu.amount", "2");
  config.setString("external-resource.gpu.driver-factory.class", kGpuFactory);
  config.setString("external-resource.gpu.param.discovery-script.path", script("a.sh", "0,1"));
  config.setString("external-resource.inference-gpu.amount", "1");
  config.setString("external-resource.inference-gpu.driver-factory.class", kGpuFactory);
  config.setString("external-resource.inference-gpu.param.discovery-script.path",
                   script("b.sh", "3"));

  const auto provider =
      ExternalResourceUtils::createStaticExternalResourceInfoProviderFromConfig(config, plugins_);
  EXPECT_THAT(indicesOf(provider->getExternalResourceInfos("gpu")), ElementsAre("0", "1"));
  EXPECT_THAT(indicesOf(provider->getExternalResourceInfos("inference-gpu")), ElementsAre("3"));
  EXPECT_TRUE(provider->getExternalResourceInfos("fpga").empty());
}

TEST_F(ExternalResourceUtilsTest, AFailingResourceDoesNotStopTheOthers) {
  Configuration config;
  config.setString("external-resources", "broken;gpu;missing-script;bad-amount");
  config.setString("external-resource.broken.amount", "1");
  config.setString("external-resource.broken.driver-factory.class", kGpuFactory);
  config.setString("external-resource.broken.param.discovery-script.path",
                   script("broken.sh", "nvidia-smi: command not found", 1));
  config.setString("external-resource.gpu.amount", "1");
  config.setString("external-resource.gpu.driver-factory.class", kGpuFactory);
  config.setString("external-resource.gpu.param.discovery-script.path", script("ok.sh", "2"));
  config.setString("external-resource.missing-script.amount", "1");
  config.setString("external-resource.missing-script.driver-factory.class", kGpuFactory);
  config.setString("external-resource.missing-script.param.discovery-script.path",
                   (dir_ / "absent.sh").string());
  config.setString("external-resource.bad-amount.amount", "two");
  config.setString("external-resource.bad-amount.driver-factory.class", kGpuFactory);
  config.setString("external-resource.bad-amount.param.discovery-script.path", script("c.sh", "5"));

  const auto drivers = ExternalResourceUtils::externalResourceDriversFromConfig(config, plugins_);
  EXPECT_EQ(drivers.size(), 2u);  // broken and gpu: the others cannot be made
  EXPECT_TRUE(drivers.count("broken"));
  EXPECT_TRUE(drivers.count("gpu"));

  const auto provider =
      ExternalResourceUtils::createStaticExternalResourceInfoProviderFromConfig(config, plugins_);
  EXPECT_THAT(indicesOf(provider->getExternalResourceInfos("gpu")), ElementsAre("2"));
  EXPECT_TRUE(provider->getExternalResourceInfos("broken").empty());
  EXPECT_TRUE(provider->getExternalResourceInfos("missing-script").empty());
  EXPECT_TRUE(provider->getExternalResourceInfos("bad-amount").empty());
  EXPECT_EQ(provider->getExternalResources().size(), 1u);
}

TEST_F(ExternalResourceUtilsTest, PluginFailuresCostOnlyTheirOwnResource) {
  TempDir pluginsDir("plugins");
  fs::create_directories(pluginsDir / "throwing");
  fs::copy_file(THROWING_PLUGIN, pluginsDir / "throwing" / fs::path(THROWING_PLUGIN).filename());
  fs::create_directories(pluginsDir / "static-devices");
  fs::copy_file(STATIC_DEVICES_PLUGIN,
                pluginsDir / "static-devices" / fs::path(STATIC_DEVICES_PLUGIN).filename());
  PluginManager plugins(pluginsDir.path(), ExternalResourceUtils::builtInFactories());

  Configuration config;
  config.setString("external-resources", "a;b;c;fpga");
  const std::vector<std::pair<std::string, std::string>> factories = {
      {"a", "test.ThrowingCreateFactory"},
      {"b", "test.ThrowingDriverFactory"},
      {"c", "test.FailingDiscoveryFactory"},
      {"fpga", "org.example.flink.StaticDeviceDriverFactory"}};
  for (const auto& [name, factory] : factories) {
    config.setString("external-resource." + name + ".amount", "1");
    config.setString("external-resource." + name + ".driver-factory.class", factory);
  }
  config.setString("external-resource.fpga.param.devices", "fpga7");

  const auto provider =
      ExternalResourceUtils::createStaticExternalResourceInfoProviderFromConfig(config, plugins);
  const ExternalResourceInfoSet fpga = provider->getExternalResourceInfos("fpga");
  ASSERT_EQ(fpga.size(), 1u);
  EXPECT_EQ(fpga[0]->getProperty("id"), "fpga7");
  for (const char* failing : {"a", "b", "c"}) {
    EXPECT_TRUE(provider->getExternalResourceInfos(failing).empty()) << failing;
  }
}

TEST_F(ExternalResourceUtilsTest, UnreadableListThrowsForTheStartUpPathButIsAnErrorWhenRead) {
  Configuration config;
  config.setString("external-resources", "'gpu");  // an unclosed quote
  EXPECT_THROW(ExternalResourceUtils::getExternalResourceSet(config),
               IllegalConfigurationException);
  const ExternalResources read = ExternalResourceUtils::readExternalResources(config);
  ASSERT_EQ(read.errors.size(), 1u);
  EXPECT_THAT(read.errors[0], HasSubstr("external-resources"));
}

}  // namespace
}  // namespace flink
