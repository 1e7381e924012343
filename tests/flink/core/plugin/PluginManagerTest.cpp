// PluginManager: built-in factories, the sample plugin, and plugins that must be refused or that
// fail, laid out in a temporary plugins folder as Flink lays plugins out.
#include "flink/core/plugin/PluginManager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "TestSupport.h"
#include "flink/externalresource/ExternalResourceUtils.h"
#include "flink/externalresource/gpu/GPUDriverFactory.h"
#include "flink/util/Exceptions.h"

namespace flink {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::ScopedEnvironment;
using testing::TempDir;

constexpr const char* kSampleFactory = "org.example.flink.StaticDeviceDriverFactory";

/// A plugins folder holding one built plugin library in a folder of its own.
class PluginsFolder {
 public:
  PluginsFolder(const std::string& name, const fs::path& library) {
    fs::create_directories(dir_ / name);
    fs::copy_file(library, dir_ / name / library.filename());
  }
  const fs::path& path() const { return dir_.path(); }

 private:
  TempDir dir_{"plugins"};
};

std::string messageOf(const std::function<void()>& action) {
  try {
    action();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(nothing thrown)";
}

TEST(PluginManagerTest, TheGpuFactoryIsBuiltIn) {
  PluginManager plugins("/nonexistent/plugins", ExternalResourceUtils::builtInFactories());
  auto factory = plugins.createExternalResourceDriverFactory(
      externalresource::gpu::GPUDriverFactory::CLASS_NAME);
  ASSERT_NE(factory, nullptr);
  EXPECT_NE(dynamic_cast<externalresource::gpu::GPUDriverFactory*>(factory.get()), nullptr);
  EXPECT_EQ(plugins.describeFactorySource(externalresource::gpu::GPUDriverFactory::CLASS_NAME),
            "built in");
}

// PluginManager knows no factory of its own: the built-in ones are its caller's.
TEST(PluginManagerTest, KnowsOnlyTheBuiltInFactoriesItIsGiven) {
  PluginManager bare("/nonexistent/plugins", {});
  EXPECT_TRUE(bare.builtInFactories().empty());
  EXPECT_EQ(bare.describeFactorySource(externalresource::gpu::GPUDriverFactory::CLASS_NAME),
            std::nullopt);
  EXPECT_THAT(messageOf([&] {
                bare.createExternalResourceDriverFactory(
                    externalresource::gpu::GPUDriverFactory::CLASS_NAME);
              }),
              ::testing::HasSubstr("it is not built in"));

  const auto library = ExternalResourceUtils::createPluginManager("/nonexistent/plugins");
  EXPECT_EQ(library->builtInFactories(),
            std::vector<std::string>{externalresource::gpu::GPUDriverFactory::CLASS_NAME});
  EXPECT_EQ(library->pluginsDirectory(), "/nonexistent/plugins");
}

TEST(PluginManagerTest, LoadsTheSamplePluginAndItsDriverWorks) {
  PluginsFolder folder("static-devices", STATIC_DEVICES_PLUGIN);
  PluginManager plugins(folder.path(), ExternalResourceUtils::builtInFactories());

  auto factory = plugins.createExternalResourceDriverFactory(kSampleFactory);
  Configuration config;
  config.setString("devices", "fpga0, fpga1,fpga2");
  auto driver = factory->createExternalResourceDriver(config);
  const ExternalResourceInfoSet infos = driver->retrieveResourceInfo(2);
  ASSERT_EQ(infos.size(), 2u);
  EXPECT_EQ(infos[0]->getProperty("id"), "fpga0");
  EXPECT_EQ(infos[1]->toString(), "StaticDevice(fpga1)");

  const auto described = plugins.plugins();
  ASSERT_EQ(described.size(), 1u);
  EXPECT_EQ(described[0].name, "static-devices");
  EXPECT_EQ(described[0].factories, std::vector<std::string>{kSampleFactory});
  EXPECT_FALSE(described[0].problem);
  EXPECT_EQ(
      plugins.describeFactorySource(kSampleFactory),
      (folder.path() / "static-devices" / fs::path(STATIC_DEVICES_PLUGIN).filename()).string());
}

TEST(PluginManagerTest, UnknownFactoryNamesItTheFolderAndWhatWasFound) {
  PluginsFolder folder("static-devices", STATIC_DEVICES_PLUGIN);
  PluginManager plugins(folder.path(), ExternalResourceUtils::builtInFactories());
  const std::string message =
      messageOf([&] { plugins.createExternalResourceDriverFactory("com.example.NoSuchFactory"); });
  EXPECT_THAT(message, HasSubstr("'com.example.NoSuchFactory'"));
  EXPECT_THAT(message, HasSubstr("no plugin in " + folder.path().string()));
  EXPECT_THAT(message, HasSubstr(kSampleFactory));
  EXPECT_THAT(message, HasSubstr(externalresource::gpu::GPUDriverFactory::CLASS_NAME));
  EXPECT_FALSE(plugins.describeFactorySource("com.example.NoSuchFactory"));
}

TEST(PluginManagerTest, MissingPluginsFolderIsNamedInTheError) {
  PluginManager plugins("/nonexistent/flink/plugins", ExternalResourceUtils::builtInFactories());
  EXPECT_THAT(messageOf([&] { plugins.createExternalResourceDriverFactory("x.Y"); }),
              HasSubstr("the plugins folder /nonexistent/flink/plugins does not exist"));
  EXPECT_TRUE(plugins.plugins().empty());
}

TEST(PluginManagerTest, WrongAbiVersionIsRefusedWithTheReason) {
  PluginsFolder folder("wrong-abi", WRONG_ABI_PLUGIN);
  PluginManager plugins(folder.path(), ExternalResourceUtils::builtInFactories());
  const auto described = plugins.plugins();
  ASSERT_EQ(described.size(), 1u);
  ASSERT_TRUE(described[0].problem);
  EXPECT_THAT(*described[0].problem, HasSubstr("built for plugin ABI version 999"));
  EXPECT_THAT(*described[0].problem, HasSubstr("this library has version 2"));
  EXPECT_TRUE(described[0].factories.empty());
  // Its factories are not offered, and the error says why.
  const std::string message = messageOf(
      [&] { plugins.createExternalResourceDriverFactory("test.FailingDiscoveryFactory"); });
  EXPECT_THAT(message, HasSubstr("refused " + described[0].library.string()));
  EXPECT_THAT(message, HasSubstr("ABI version 999"));
}

TEST(PluginManagerTest, FailingCreateFunctionsAreReportedNotCrashed) {
  PluginsFolder folder("throwing", THROWING_PLUGIN);
  PluginManager plugins(folder.path(), ExternalResourceUtils::builtInFactories());
  EXPECT_THAT(
      messageOf([&] { plugins.createExternalResourceDriverFactory("test.ThrowingCreateFactory"); }),
      HasSubstr("could not make the factory test.ThrowingCreateFactory: the test factory "
                "cannot be made"));
  EXPECT_THAT(
      messageOf([&] { plugins.createExternalResourceDriverFactory("test.NullCreateFactory"); }),
      HasSubstr("returned no factory for test.NullCreateFactory"));
  // A factory that loads fine can still fail to make its driver: that is the factory's own error.
  auto factory = plugins.createExternalResourceDriverFactory("test.ThrowingDriverFactory");
  EXPECT_THROW(factory->createExternalResourceDriver(Configuration()),
               IllegalConfigurationException);
}

TEST(PluginManagerTest, LibrariesWithoutEntryPointAreNotPlugins) {
  TempDir dir("plugins");
  fs::create_directories(dir / "helpers");
  // A plugin folder may hold libraries the plugin depends on, without an entry point.
  fs::copy_file(NO_ENTRY_POINT_LIBRARY,
                dir / "helpers" / fs::path(NO_ENTRY_POINT_LIBRARY).filename());
  fs::create_directories(dir / "notes");
  testing::writeScript(dir / "notes" / "README.so.txt", "not a library");
  PluginManager plugins(dir.path(), ExternalResourceUtils::builtInFactories());
  EXPECT_TRUE(plugins.plugins().empty());
}

TEST(PluginManagerTest, RefusedAndHelperLibrariesLeaveNoDlerrorOnTheThread) {
  // glibc keeps a failed dlopen's or dlsym's error per thread until dlerror() has been called
  // twice, and a detached thread that exits with it leaves it to LeakSanitizer.
  if (!testing::leavesDlErrorRecord([] {})) {
    GTEST_SKIP() << "glibc's malloc counts are not seen under a sanitizer";
  }
  TempDir dir("plugins");
  fs::create_directories(dir / "broken");
  testing::writeScript(dir / "broken" / "libbroken.so", "not a library");
  const auto refuseIt = [&] {
    PluginManager plugins(dir.path(), ExternalResourceUtils::builtInFactories());
    ASSERT_EQ(plugins.plugins().size(), 1u);
    EXPECT_THAT(plugins.plugins()[0].problem.value_or(""), HasSubstr("cannot be loaded"));
  };
  EXPECT_FALSE(testing::leavesDlErrorRecord(refuseIt).value()) << "a library that cannot be loaded";
  fs::remove_all(dir / "broken");
  fs::create_directories(dir / "helpers");
  fs::copy_file(NO_ENTRY_POINT_LIBRARY,
                dir / "helpers" / fs::path(NO_ENTRY_POINT_LIBRARY).filename());
  const auto passItOver = [&] {
    PluginManager plugins(dir.path(), ExternalResourceUtils::builtInFactories());
    EXPECT_TRUE(plugins.plugins().empty());
  };
  EXPECT_FALSE(testing::leavesDlErrorRecord(passItOver).value())
      << "a library without the entry point";
}

TEST(PluginManagerTest, DefaultFolderFollowsFlink) {
  {
    ScopedEnvironment pluginsDir("FLINK_PLUGINS_DIR", "/srv/flink/plugins");
    ScopedEnvironment home("FLINK_HOME", "/opt/flink-1.20");
    EXPECT_EQ(PluginManager::defaultPluginsDirectory(), fs::path("/srv/flink/plugins"));
  }
  {
    ScopedEnvironment pluginsDir("FLINK_PLUGINS_DIR", std::nullopt);
    ScopedEnvironment home("FLINK_HOME", "/opt/flink-1.20");
    EXPECT_EQ(PluginManager::defaultPluginsDirectory(), fs::path("/opt/flink-1.20/plugins"));
  }
  {
    ScopedEnvironment pluginsDir("FLINK_PLUGINS_DIR", "");
    ScopedEnvironment home("FLINK_HOME", std::nullopt);
    EXPECT_EQ(PluginManager::defaultPluginsDirectory(), fs::path("/opt/flink/plugins"));
  }
}

}  // namespace
}  // namespace flink
