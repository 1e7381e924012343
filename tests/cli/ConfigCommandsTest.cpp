// flink-gpu discover --config and flink-gpu config: the TaskManager's start-up path from a Flink
// configuration folder, run as an operator runs it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "CliRun.h"
#include "TestSupport.h"

namespace {

namespace fs = std::filesystem;
using flink::testing::CliRun;
using flink::testing::firstLine;
using flink::testing::hasLineStartingWith;
using flink::testing::kCli;
using flink::testing::linesOf;
using flink::testing::runCli;
using flink::testing::TempDir;
using flink::testing::writeScript;
using ::testing::HasSubstr;
using ::testing::Not;

using flink::testing::kGpuFactory;

class ConfigCommandsTest : public ::testing::Test {
 protected:
  ConfigCommandsTest() { fs::create_directories(confDir()); }

  fs::path confDir() const { return dir_ / "conf"; }
  std::string conf() const { return confDir().string(); }

  /// A discovery script that records that it ran, prints `line` and exits with `exitCode`.
  std::string script(const std::string& name, const std::string& line, int exitCode = 0) {
    return writeScript(dir_ / name, "#!/bin/sh\ntouch '" + (dir_ / (name + ".ran")).string() +
                                        "'\necho '" + line + "'\nexit " + std::to_string(exitCode) +
                                        "\n")
        .string();
  }
  bool ran(const std::string& name) const { return fs::exists(dir_ / (name + ".ran")); }

  void writeConfig(const std::string& file, const std::string& text) {
    writeScript(confDir() / file, text, fs::perms::owner_read | fs::perms::owner_write);
  }

  /// config.yaml with one GPU resource `name` whose script prints `line`.
  std::string gpuResource(const std::string& name, int amount, const std::string& scriptPath) {
    return "  " + name + ":\n    amount: " + std::to_string(amount) +
           "\n    driver-factory:\n      class: " + kGpuFactory +
           "\n    param:\n      discovery-script:\n        path: " + scriptPath + "\n";
  }

  TempDir dir_{"flink-gpu-config"};
};

TEST_F(ConfigCommandsTest, DiscoversEveryResourceOfANestedConfigYaml) {
  writeConfig("config.yaml", "external-resources: [gpu, inference]\nexternal-resource:\n" +
                                 gpuResource("gpu", 2, script("a.sh", "0,1")) +
                                 gpuResource("inference", 1, script("b.sh", "3")));
  const CliRun run = runCli({"discover", "--config", conf(), "--format", "json"});
  ASSERT_EQ(run.exitCode, 0) << run;
  const auto json = nlohmann::ordered_json::parse(run.out);
  EXPECT_EQ(json.dump(), R"({"format":1,"resources":{"gpu":[{"index":"0"},{"index":"1"}],)"
                         R"("inference":[{"index":"3"}]}})");
}

TEST_F(ConfigCommandsTest, ReadsALegacyFlinkConfWithCommentsAndASemicolonList) {
  writeConfig("flink-conf.yaml",
              "# TaskManager GPUs\n"
              "external-resources: gpu;fpga   # two of them\n"
              "external-resource.gpu.amount: 1\n"
              "external-resource.gpu.driver-factory.class: " +
                  std::string(kGpuFactory) +
                  "\n"
                  "external-resource.gpu.param.discovery-script.path: " +
                  script("gpu.sh", "2") +
                  "\n"
                  "external-resource.fpga.amount: 1\n"
                  "taskmanager.numberOfTaskSlots: 4\n");
  const CliRun run = runCli({"discover", "--config", conf()});
  ASSERT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, "gpu: GPU Device(2)\n");
  // fpga has no driver: a warning, not an error (Kubernetes/YARN may still be asked for it).
  EXPECT_THAT(run.err, HasSubstr("'external-resource.fpga.driver-factory.class' is not set"));
}

TEST_F(ConfigCommandsTest, DynamicPropertiesOverrideTheFile) {
  writeConfig("config.yaml", "external-resources: gpu\nexternal-resource:\n" +
                                 gpuResource("gpu", 1, script("a.sh", "0")));
  const std::string other = script("b.sh", "5,6");
  const CliRun run = runCli({"discover", "--config", conf(), "-D",
                             "external-resource.gpu.param.discovery-script.path=" + other,
                             "-Dexternal-resource.gpu.amount=2"});
  ASSERT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, "gpu: GPU Device(5)\ngpu: GPU Device(6)\n");
  EXPECT_FALSE(ran("a.sh"));
}

TEST_F(ConfigCommandsTest, FindsTheFolderThroughFlinkConfDirThenFlinkHome) {
  writeConfig("config.yaml", "external-resources: gpu\nexternal-resource:\n" +
                                 gpuResource("gpu", 1, script("a.sh", "4")));
  CliRun run = runCli({"discover", "--config"}, {"FLINK_CONF_DIR=" + conf()});
  ASSERT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, "gpu: GPU Device(4)\n");

  run = runCli({"discover", "--config"}, {"FLINK_CONF_DIR=", "FLINK_HOME=" + dir_.path().string()});
  ASSERT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, "gpu: GPU Device(4)\n");

  // -D alone also means "read the configuration".
  run = runCli({"discover", "-Dexternal-resource.gpu.amount=1"}, {"FLINK_CONF_DIR=" + conf()});
  ASSERT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, "gpu: GPU Device(4)\n");
}

TEST_F(ConfigCommandsTest, AFailingResourceIsReportedAndTheOthersPrinted) {
  writeConfig("config.yaml", "external-resources: [broken, gpu]\nexternal-resource:\n" +
                                 gpuResource("broken", 1, script("bad.sh", "no GPUs here", 3)) +
                                 gpuResource("gpu", 1, script("good.sh", "1")));
  const CliRun run = runCli({"discover", "--config", conf(), "--format", "json", "-q"});
  EXPECT_EQ(run.exitCode, 1) << run;
  EXPECT_EQ(run.out, "{\"format\":1,\"resources\":{\"gpu\":[{\"index\":\"1\"}]}}\n");
  ASSERT_EQ(linesOf(run.err).size(), 1u) << run;
  EXPECT_THAT(run.err, HasSubstr("discovery of the external resource 'broken' failed"));
  EXPECT_THAT(run.err, HasSubstr("exited with code 3"));
}

TEST_F(ConfigCommandsTest, BadAmountsAreConfigurationErrorsAndNothingRuns) {
  for (const std::string amount : {"0", "-1", "two", "99999999999999999999"}) {
    writeConfig("config.yaml", "external-resources: gpu\nexternal-resource.gpu.amount: " + amount +
                                   "\nexternal-resource.gpu.driver-factory.class: " + kGpuFactory +
                                   "\nexternal-resource.gpu.param.discovery-script.path: " +
                                   script("a.sh", "0") + "\n");
    const CliRun run = runCli({"discover", "--config", conf()});
    EXPECT_EQ(run.exitCode, 2) << run;
    EXPECT_THAT(firstLine(run.err),
                HasSubstr("Invalid value '" + amount +
                          "' for configuration key 'external-resource.gpu.amount'"))
        << run;
    EXPECT_TRUE(run.out.empty());
    EXPECT_FALSE(ran("a.sh")) << amount;
  }
}

/// config.yaml with four resources of which only `gpu` can be started: `fpga`'s factory is not
/// installed, `tpu`'s amount is bad, `spare`'s driver cannot be made (its script is missing).
std::string oneGoodResourceOfFour(const std::string& goodScript, const fs::path& missingScript) {
  return "external-resources: [fpga, gpu, tpu, spare]\n"
         "external-resource.fpga.amount: 1\n"
         "external-resource.fpga.driver-factory.class: com.example.FpgaDriverFactory\n"
         "external-resource.gpu.amount: 1\n"
         "external-resource.gpu.driver-factory.class: " +
         std::string(kGpuFactory) +
         "\nexternal-resource.gpu.param.discovery-script.path: " + goodScript +
         "\n"
         "external-resource.tpu.amount: none\n"
         "external-resource.tpu.driver-factory.class: " +
         kGpuFactory +
         "\n"
         "external-resource.spare.amount: 1\n"
         "external-resource.spare.driver-factory.class: " +
         kGpuFactory +
         "\nexternal-resource.spare.param.discovery-script.path: " + missingScript.string() + "\n";
}

TEST_F(ConfigCommandsTest, AResourceATaskManagerWouldSkipIsSkippedAndTheOthersDiscovered) {
  writeConfig("config.yaml", oneGoodResourceOfFour(script("gpu.sh", "5"), dir_ / "missing.sh"));
  const CliRun run = runCli({"discover", "--config", conf(), "-q"},
                            {"FLINK_PLUGINS_DIR=" + (dir_ / "no-plugins").string()});
  // As a TaskManager: the others still get their devices; the skipped ones make it exit 2.
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_EQ(run.out, "gpu: GPU Device(5)\n");
  const std::vector<std::string> lines = linesOf(run.err);
  ASSERT_EQ(lines.size(), 3u) << run;  // one error line per skipped resource
  EXPECT_THAT(lines[0], HasSubstr("the external resource 'fpga' is skipped"));
  EXPECT_THAT(lines[0], HasSubstr("'com.example.FpgaDriverFactory'"));
  EXPECT_THAT(lines[1], HasSubstr("the external resource 'tpu' is skipped"));
  EXPECT_THAT(lines[1], HasSubstr("'external-resource.tpu.amount'"));
  EXPECT_THAT(lines[2], HasSubstr("the external resource 'spare' is skipped"));
  EXPECT_THAT(lines[2], HasSubstr((dir_ / "missing.sh").string()));
}

TEST_F(ConfigCommandsTest, StrictRunsNothingWhenAnyResourceCannotBeStarted) {
  writeConfig("config.yaml", oneGoodResourceOfFour(script("gpu.sh", "5"), dir_ / "missing.sh"));
  const CliRun run = runCli({"discover", "--config", conf(), "--strict", "-q"},
                            {"FLINK_PLUGINS_DIR=" + (dir_ / "no-plugins").string()});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_TRUE(run.out.empty()) << run;
  EXPECT_FALSE(ran("gpu.sh"));
  EXPECT_THAT(run.err, HasSubstr("'external-resource.tpu.amount'"));
  EXPECT_THAT(run.err, Not(HasSubstr("is skipped")));
}

TEST_F(ConfigCommandsTest, ErrorsOfTheWholeConfigurationStillStopEverything) {
  writeConfig("config.yaml", "external-resources: gpu\nexternal-resource:\n" +
                                 gpuResource("gpu", 1, script("a.sh", "0")));
  CliRun run = runCli({"discover", "--config", conf(), "-Dexternal-resource.gpu.amount"});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_THAT(firstLine(run.err), HasSubstr("Invalid dynamic property"));
  EXPECT_FALSE(ran("a.sh"));

  writeConfig("config.yaml", "external-resources: gpu\nexternal-resource:\n" +
                                 gpuResource("gpu", 1, script("a.sh", "0")) + "  broken: [1, 2\n");
  run = runCli({"discover", "--config", conf()});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_TRUE(run.out.empty()) << run;
  EXPECT_FALSE(ran("a.sh"));
}

TEST_F(ConfigCommandsTest, DiscoverWithoutOptionsReadsTheConfigurationOfFlinkConfDirOnly) {
  writeConfig("config.yaml", "external-resources: gpu\nexternal-resource:\n" +
                                 gpuResource("gpu", 1, script("a.sh", "4")));
  CliRun run = runCli({"discover"}, {"FLINK_CONF_DIR=" + conf()});
  ASSERT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, "gpu: GPU Device(4)\n");
  // One line says which configuration was read, and how it was found.
  ASSERT_EQ(linesOf(run.err).size(), 1u) << run;
  EXPECT_THAT(run.err, HasSubstr("flink-gpu: note: "));
  EXPECT_THAT(run.err, HasSubstr((confDir() / "config.yaml").string()));
  EXPECT_THAT(run.err, HasSubstr("$FLINK_CONF_DIR"));

  // One that is merely there, in $FLINK_HOME/conf (which flink-gpu sets itself when it is
  // unset), leaves the output's form alone: the one-script discovery runs, and a note says what
  // was not used and how to use it.
  run = runCli({"discover", "--format", "json"}, {"FLINK_HOME=" + dir_.path().string()});
  EXPECT_THAT(run.out, Not(HasSubstr("\"gpu\":[{\"index\":\"4\"}]"))) << run;
  EXPECT_THAT(run.err, HasSubstr("flink-gpu: note: the Flink configuration " +
                                 (confDir() / "config.yaml").string() +
                                 " ($FLINK_HOME/conf) lists external resources and is not used: "
                                 "give --config"))
      << run;
}

TEST_F(ConfigCommandsTest, DiscoverWithScriptOptionsIgnoresTheHostsFlinkConfiguration) {
  writeConfig("config.yaml", "external-resources: gpu\nexternal-resource:\n" +
                                 gpuResource("gpu", 1, script("a.sh", "4")));
  CliRun run =
      runCli({"discover", "--discovery-script", script("b.sh", "7")}, {"FLINK_CONF_DIR=" + conf()});
  ASSERT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, "GPU Device(7)\n");
  EXPECT_TRUE(run.err.empty()) << run;
  EXPECT_FALSE(ran("a.sh"));

  // A configuration without external resources is not what the TaskManager gets GPUs from: the
  // one-script discovery runs (the default script; whatever this host has), with no note.
  writeConfig("config.yaml", "taskmanager.numberOfTaskSlots: 4\n");
  run = runCli({"discover", "-q"}, {"FLINK_CONF_DIR=" + conf()});
  EXPECT_THAT(run.err, Not(HasSubstr("note:"))) << run;
  EXPECT_FALSE(hasLineStartingWith(run.out, "gpu: ")) << run;
  EXPECT_THAT(run.err, Not(HasSubstr("external resource"))) << run;
  EXPECT_FALSE(ran("a.sh"));
}

TEST_F(ConfigCommandsTest, ConfigFileChoosesBetweenConfigYamlAndFlinkConfYaml) {
  // A Flink 1.19 being migrated: the old file beside the newly shipped one.
  writeConfig("config.yaml", "external-resources: gpu\nexternal-resource:\n" +
                                 gpuResource("gpu", 1, script("new.sh", "1")));
  writeConfig("flink-conf.yaml",
              "external-resources: gpu\nexternal-resource.gpu.amount: 1\n"
              "external-resource.gpu.driver-factory.class: " +
                  std::string(kGpuFactory) +
                  "\nexternal-resource.gpu.param.discovery-script.path: " + script("old.sh", "0") +
                  "\n");
  fs::create_directories(dir_ / "lib");
  writeScript(dir_ / "lib/flink-dist-1.19.1.jar", "", fs::perms::owner_read);
  CliRun run = runCli({"discover", "--config", conf()});
  ASSERT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, "gpu: GPU Device(0)\n");  // what Flink 1.19 reads
  EXPECT_THAT(run.err, HasSubstr("flink-conf.yaml read, config.yaml ignored: Flink 1.19"));

  run = runCli({"discover", "--config", conf(), "--config-file", "config.yaml"});
  ASSERT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, "gpu: GPU Device(1)\n");

  run = runCli({"config", "--config", conf()}, {"FLINK_GPU_CONF_FILE=config.yaml"});
  EXPECT_THAT(run.out, HasSubstr((confDir() / "config.yaml").string())) << run;
}

TEST_F(ConfigCommandsTest, ListValuesWrittenAsYamlStringsAreListsAsInFlink) {
  // The quoted form Flink writes itself when it regenerates config.yaml for TaskManagers.
  const std::string resources = "external-resource:\n" +
                                gpuResource("gpu", 1, script("a.sh", "0")) +
                                gpuResource("fpga", 1, script("b.sh", "7"));
  writeConfig("config.yaml", "external-resources: '[gpu, fpga]'\n" + resources);
  CliRun run = runCli({"discover", "--config", conf()});
  ASSERT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, "gpu: GPU Device(0)\nfpga: GPU Device(7)\n");

  // The common command-line form, and the legacy one.
  writeConfig("config.yaml", "external-resources: none\n" + resources);
  for (const std::string list : {"[gpu, fpga]", "gpu;fpga"}) {
    run = runCli({"discover", "--config", conf(), "-Dexternal-resources=" + list});
    ASSERT_EQ(run.exitCode, 0) << list << run;
    EXPECT_EQ(run.out, "gpu: GPU Device(0)\nfpga: GPU Device(7)\n") << list;
  }
}

TEST_F(ConfigCommandsTest, YamlListsInFlinkConfYamlAreOneNameAsInFlink) {
  writeConfig("flink-conf.yaml", "external-resources: [gpu, fpga]\n");
  const CliRun run = runCli({"discover", "--config", conf(), "-q"});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_THAT(run.err, HasSubstr("the external resource '[gpu, fpga]' is skipped"));
}

TEST_F(ConfigCommandsTest, ValuesAreWhatFlinkMakesOfThem) {
  // YAML 1.1, as Flink's SnakeYAML reads it: 0x2 is 2, `on` is true.
  writeConfig("config.yaml",
              "external-resources: [gpu]\nexternal-resource:\n  gpu:\n"
              "    amount: 0x2\n    driver-factory:\n      class: " +
                  std::string(kGpuFactory) +
                  "\n    param:\n      nvml.enabled: off\n"
                  "      discovery-script:\n        path: " +
                  script("a.sh", "0,1,2") + "\n");
  CliRun run = runCli({"discover", "--config", conf()});
  ASSERT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, "gpu: GPU Device(0)\ngpu: GPU Device(1)\ngpu: GPU Device(2)\n");
  run = runCli({"config", "--config", conf()});
  EXPECT_THAT(run.out, HasSubstr("amount: 2\n")) << run;
  EXPECT_THAT(run.out, HasSubstr("param.nvml.enabled: false\n")) << run;
}

TEST_F(ConfigCommandsTest, UnknownFactoryIsAConfigurationErrorNamingIt) {
  writeConfig("config.yaml",
              "external-resources: fpga\nexternal-resource.fpga.amount: 1\n"
              "external-resource.fpga.driver-factory.class: com.example.FpgaDriverFactory\n");
  const CliRun run = runCli({"discover", "--config", conf()},
                            {"FLINK_PLUGINS_DIR=" + (dir_ / "no-plugins").string()});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_THAT(run.err, HasSubstr("'com.example.FpgaDriverFactory'"));
  EXPECT_THAT(run.err, HasSubstr((dir_ / "no-plugins").string() + " does not exist"));
}

TEST_F(ConfigCommandsTest, BrokenYamlNamesTheFileAndLine) {
  writeConfig("config.yaml", "external-resources: gpu\nexternal-resource:\n  gpu: [1, 2\n");
  const CliRun run = runCli({"discover", "--config", conf()});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_THAT(firstLine(run.err), HasSubstr((confDir() / "config.yaml").string() + ":"));
}

TEST_F(ConfigCommandsTest, MissingConfigurationIsAConfigurationError) {
  CliRun run = runCli({"discover", "--config", (dir_ / "nowhere").string()});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_THAT(run.err, HasSubstr((dir_ / "nowhere").string()));

  // Without either variable, Flink's home is the folder above flink-gpu's bin/ (the build
  // folder here), as Flink's bin/config.sh takes it; with neither and no bin/ there, the error
  // names both variables (CommandLineCliTest).
  run = runCli({"discover", "--config"}, {"FLINK_CONF_DIR=", "FLINK_HOME="});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_THAT(run.err, HasSubstr((fs::path(kCli).parent_path().parent_path() / "conf").string()))
      << run;
}

TEST_F(ConfigCommandsTest, SingleDriverOptionsDoNotMixWithAConfiguration) {
  const CliRun run =
      runCli({"discover", "--config", conf(), "--discovery-script", script("a.sh", "0")});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_THAT(firstLine(run.err), HasSubstr("--discovery-script cannot be combined with --config"));
  EXPECT_THAT(firstLine(run.err),
              HasSubstr("set external-resource.<name>.param.discovery-script.path there"));
  EXPECT_FALSE(ran("a.sh"));

  // Each names the key that says the same in a configuration.
  for (const auto& [option, key] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--amount", "2"}, "set external-resource.<name>.amount there"},
           {{"-n", "2"}, "set external-resource.<name>.amount there"},
           {{"--timeout", "1 s"}, "set external-resource.<name>.param.discovery-script.timeout"},
           {{"--mig"}, "add --mig to external-resource.<name>.param.discovery-script.args"}}) {
    std::vector<std::string> args{"discover", "--config", conf()};
    args.insert(args.end(), option.begin(), option.end());
    const CliRun mixed = runCli(args);
    EXPECT_EQ(mixed.exitCode, 2) << mixed;
    EXPECT_THAT(firstLine(mixed.err), HasSubstr("cannot be combined with --config")) << mixed;
    EXPECT_THAT(firstLine(mixed.err), HasSubstr(key)) << mixed;
  }
}

TEST_F(ConfigCommandsTest, ABadValueOfADynamicPropertyIsNamedAsSuch) {
  writeConfig("config.yaml", "external-resources: gpu\nexternal-resource:\n" +
                                 gpuResource("gpu", 1, script("a.sh", "0")));
  const std::string file = (confDir() / "config.yaml").string();
  for (const std::string strict : {"", "--strict"}) {
    std::vector<std::string> args{"discover", "--config", conf(), "-D",
                                  "external-resource.gpu.amount=x"};
    if (!strict.empty()) args.push_back(strict);
    const CliRun run = runCli(args);
    EXPECT_EQ(run.exitCode, 2) << run;
    EXPECT_THAT(firstLine(run.err),
                HasSubstr("configuration error in -D external-resource.gpu.amount=x: Invalid "
                          "value 'x' for configuration key 'external-resource.gpu.amount'"))
        << run;
    EXPECT_THAT(run.err, Not(HasSubstr(file))) << run;
    EXPECT_FALSE(ran("a.sh"));
  }
  // The file's own bad value still names the file; a -D that sets the key right wins over it.
  writeConfig("config.yaml",
              "external-resources: gpu\nexternal-resource.gpu.amount: x\n"
              "external-resource.gpu.driver-factory.class: " +
                  std::string(kGpuFactory) +
                  "\nexternal-resource.gpu.param.discovery-script.path: " + script("a.sh", "0") +
                  "\n");
  CliRun run = runCli({"discover", "--config", conf(), "--strict"});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_THAT(firstLine(run.err), HasSubstr("configuration error in " + file + ": ")) << run;
  run = runCli({"discover", "--config", conf(), "-Dexternal-resource.gpu.amount=1"});
  EXPECT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, "gpu: GPU Device(0)\n") << run;
  // An empty list from a -D is a -D's too.
  run = runCli({"discover", "--config", conf(), "-Dexternal-resources=none"});
  EXPECT_EQ(run.exitCode, 0) << run;
  EXPECT_THAT(run.err,
              HasSubstr("no external resources are configured in -D external-resources=none"))
      << run;
}

TEST_F(ConfigCommandsTest, LoadsAPluginFromThePluginsFolder) {
  const fs::path plugins = dir_ / "plugins";
  fs::create_directories(plugins / "static-devices");
  fs::copy_file(STATIC_DEVICES_PLUGIN,
                plugins / "static-devices" / fs::path(STATIC_DEVICES_PLUGIN).filename());
  writeConfig("config.yaml",
              "external-resources: [fpga]\n"
              "external-resource.fpga.amount: 2\n"
              "external-resource.fpga.driver-factory.class: "
              "org.example.flink.StaticDeviceDriverFactory\n"
              "external-resource.fpga.param.devices: fpga0,fpga1,fpga2\n");
  const CliRun run = runCli({"discover", "--config", conf(), "--format", "json"},
                            {"FLINK_PLUGINS_DIR=" + plugins.string()});
  ASSERT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out,
            "{\"format\":1,\"resources\":{\"fpga\":[{\"id\":\"fpga0\"},{\"id\":\"fpga1\"}]}}\n");
}

TEST_F(ConfigCommandsTest, ConfigShowsTheResolvedResources) {
  const std::string gpuScript = script("gpu.sh", "0,1");
  writeConfig("config.yaml", "external-resources: gpu\nexternal-resource:\n" +
                                 gpuResource("gpu", 2, gpuScript) +
                                 "    kubernetes.config-key: nvidia.com/gpu\n"
                                 "    yarn.config-key: yarn.io/gpu\n");
  CliRun run = runCli({"config", "--config", conf()});
  ASSERT_EQ(run.exitCode, 0) << run;
  EXPECT_THAT(run.out, HasSubstr("configuration: " + (confDir() / "config.yaml").string()));
  EXPECT_THAT(run.out, HasSubstr("\ngpu\n  amount: 2\n  driver-factory.class: " +
                                 std::string(kGpuFactory) + " (built in)\n"));
  EXPECT_THAT(run.out, HasSubstr("  kubernetes.config-key: nvidia.com/gpu\n"));
  EXPECT_THAT(run.out, HasSubstr("  yarn.config-key: yarn.io/gpu\n"));
  EXPECT_THAT(run.out, HasSubstr("  param.discovery-script.path: " + gpuScript + "\n"));

  run = runCli(
      {"config", "--config", conf(), "--format", "json", "-Dexternal-resource.gpu.amount=3"});
  ASSERT_EQ(run.exitCode, 0) << run;
  const auto json = nlohmann::json::parse(run.out);
  const auto& gpu = json.at("external-resources").at(0);
  EXPECT_EQ(gpu.at("name"), "gpu");
  EXPECT_EQ(gpu.at("amount"), 3);
  EXPECT_EQ(gpu.at("driver-factory.source"), "built in");
  EXPECT_EQ(gpu.at("kubernetes.config-key"), "nvidia.com/gpu");
  EXPECT_EQ(gpu.at("param").at("discovery-script.path"), gpuScript);
  EXPECT_FALSE(ran("gpu.sh"));  // config runs nothing
}

TEST_F(ConfigCommandsTest, ConfigReportsEveryProblemWithExitTwo) {
  writeConfig("flink-conf.yaml",
              "external-resources: gpu;fpga\n"
              "external-resource.gpu.amount: two\n"
              "external-resource.gpu.driver-factory.class: " +
                  std::string(kGpuFactory) +
                  "\n"
                  "external-resource.fpga.amount: 1\n"
                  "external-resource.fpga.driver-factory.class: com.example.Fpga\n"
                  "this line is not a pair\n");
  const CliRun run =
      runCli({"config", "--config", conf()}, {"FLINK_PLUGINS_DIR=" + (dir_ / "none").string()});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_THAT(run.out, HasSubstr("  amount: (not usable)\n"));
  EXPECT_THAT(run.out, HasSubstr("com.example.Fpga (not found)"));
  EXPECT_THAT(run.err, HasSubstr("Invalid value 'two'"));
  EXPECT_THAT(run.err, HasSubstr("'com.example.Fpga'"));
  EXPECT_THAT(run.err, HasSubstr("flink-conf.yaml:6"));
}

TEST_F(ConfigCommandsTest, ConfigRefusesWhatDiscoverWouldRefuseAndHidesSecrets) {
  writeConfig("config.yaml", "external-resources: gpu\nexternal-resource:\n" +
                                 gpuResource("gpu", 1, (dir_ / "missing.sh").string()) +
                                 "    param.discovery-script.timeout: soon\n"
                                 "    param.api-token: s3cr3t\n");
  const CliRun run = runCli({"config", "--config", conf()});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_THAT(run.err, HasSubstr("does not exist in path " + (dir_ / "missing.sh").string()));
  EXPECT_THAT(run.out, HasSubstr("  param.api-token: ******\n"));
  EXPECT_EQ(run.out.find("s3cr3t"), std::string::npos);
  EXPECT_EQ(run.err.find("s3cr3t"), std::string::npos);
}

TEST_F(ConfigCommandsTest, InvalidUtf8DoesNotBreakJsonOutput) {
  writeConfig("flink-conf.yaml",
              "external-resources: fpga\nexternal-resource.fpga.amount: 1\n"
              "external-resource.fpga.param.label: caf\xe9\n");
  const CliRun run = runCli({"config", "--config", conf(), "--format", "json"});
  EXPECT_EQ(run.exitCode, 0) << run;
  const auto json = nlohmann::json::parse(run.out);
  EXPECT_EQ(json.at("external-resources").at(0).at("param").at("label"), "caf\xef\xbf\xbd");
}

}  // namespace
