// Which coordination file every flink-gpu command uses (cli/commands/CoordinationFileOption.h,
// src/host/coordination/CoordinationFile.h): --coordination-file, then
// $FLINK_GPU_COORDINATION_FILE, then the one the GPU resources of a Flink configuration name
// (--config DIR|FILE, -D, $FLINK_CONF_DIR), then Flink's default; -v says which and why.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "CliRun.h"
#include "TestSupport.h"

namespace {

namespace fs = std::filesystem;
using flink::testing::CliRun;
using flink::testing::readFile;
using flink::testing::runCli;
using flink::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

using flink::testing::kGpuFactory;

class CoordinationFileChoiceTest : public ::testing::Test {
 protected:
  CoordinationFileChoiceTest() { fs::create_directories(dir_.path() / "conf"); }

  std::string path(const std::string& name) const { return (dir_.path() / name).string(); }
  std::string conf() const { return path("conf"); }

  /// A Flink configuration (config.yaml) whose GPU resources have these discovery-script.args.
  void writeConfiguration(const std::vector<std::pair<std::string, std::string>>& resources) {
    std::string names;
    std::string keys;
    for (const auto& [name, args] : resources) {
      names += (names.empty() ? "" : ";") + name;
      const std::string prefix = "external-resource." + name + ".";
      keys += prefix + "amount: 1\n" + prefix + "driver-factory.class: " + kGpuFactory + "\n" +
              prefix + "param.discovery-script.args: " + args + "\n";
    }
    std::ofstream(conf() + "/config.yaml") << "external-resources: " << names << "\n" << keys;
  }

  /// A coordination file holding one record of GPU `gpu` for this (running) test process.
  void writeRecord(const std::string& file, int gpu) {
    std::ofstream(file) << gpu << " " << ::getpid() << "\n";
  }

  /// `status -v` under `environment`: which file it read, by the GPU it shows held.
  CliRun status(std::vector<std::string> args, const std::vector<std::string>& environment = {}) {
    args.insert(args.begin(), {"-v", "status"});
    return runCli(args, environment);
  }

  TempDir dir_{"flink-gpu-choice"};
};

std::string variable(const std::string& file) { return "FLINK_GPU_COORDINATION_FILE=" + file; }

TEST_F(CoordinationFileChoiceTest, TheVariableNamesTheFileOfEveryCommand) {
  const std::string file = path("from-variable");
  writeRecord(file, 3);
  const CliRun run = status({}, {variable(file)});
  ASSERT_EQ(run.exitCode, 0) << run;
  EXPECT_THAT(run.out, HasSubstr(std::to_string(::getpid()))) << run;
  EXPECT_THAT(run.err, HasSubstr("flink-gpu: the coordination file is " + file +
                                 " (from $FLINK_GPU_COORDINATION_FILE)"));

  // Each command that has a coordination file says the same at -v, before anything else it does
  // (most of them fail later here: no GPUs, no NVML).
  for (const std::vector<std::string>& command :
       std::vector<std::vector<std::string>>{{"check"},
                                             {"release", "--junk"},
                                             {"drain", "--gpu", "0"},
                                             {"undrain", "--gpu", "0"},
                                             {"share", "--gpu", "0", "--replicas", "2"},
                                             {"unshare", "--gpu", "0"},
                                             {"watch"},
                                             {"exec", "-n", "1", "--gpus", "0", "true"}}) {
    std::vector<std::string> args{"-v"};
    args.insert(args.end(), command.begin(), command.end());
    const CliRun each = runCli(args, {variable(file)});
    EXPECT_THAT(each.err, HasSubstr("the coordination file is " + file +
                                    " (from $FLINK_GPU_COORDINATION_FILE)"))
        << command.front() << ": " << each;
  }
  // exec allocates in it: GPU 3 is held there, by this test.
  const CliRun exec = runCli({"exec", "-n", "1", "--gpus", "3", "true"}, {variable(file)});
  EXPECT_EQ(exec.exitCode, 1) << exec;
  EXPECT_EQ(readFile(file), "3 " + std::to_string(::getpid()) + "\n");
}

TEST_F(CoordinationFileChoiceTest, TheOptionBeatsTheVariableWhichBeatsTheConfiguration) {
  writeRecord(path("option"), 1);
  writeRecord(path("variable"), 2);
  writeRecord(path("configured"), 3);
  writeConfiguration(
      {{"gpu", "--enable-coordination-mode --coordination-file " + path("configured")}});

  CliRun run = status({"--coordination-file", path("option"), "--config", conf()},
                      {variable(path("variable"))});
  ASSERT_EQ(run.exitCode, 0) << run;
  EXPECT_THAT(run.err, HasSubstr("the coordination file is " + path("option") +
                                 " (from --coordination-file)"));

  run = status({"--config", conf()}, {variable(path("variable"))});
  ASSERT_EQ(run.exitCode, 0) << run;
  EXPECT_THAT(run.err, HasSubstr("the coordination file is " + path("variable") +
                                 " (from $FLINK_GPU_COORDINATION_FILE)"));

  run = status({"--config", conf()});
  ASSERT_EQ(run.exitCode, 0) << run;
  EXPECT_THAT(run.err, HasSubstr("the coordination file is " + path("configured") +
                                 " (from external-resource.gpu.param.discovery-script.args in " +
                                 conf() + "/config.yaml)"));
  EXPECT_THAT(run.out, HasSubstr(std::to_string(::getpid())));
}

TEST_F(CoordinationFileChoiceTest, TheConfigurationIsFoundAsDiscoverFindsIt) {
  writeRecord(path("configured"), 3);
  writeConfiguration(
      {{"gpu", "--enable-coordination-mode --coordination-file " + path("configured")}});
  const std::string expected = "the coordination file is " + path("configured");
  // --config FILE, and $FLINK_CONF_DIR without any option.
  EXPECT_THAT(status({"--config", conf() + "/config.yaml"}).err, HasSubstr(expected));
  EXPECT_THAT(status({}, {"FLINK_CONF_DIR=" + conf()}).err, HasSubstr(expected));
  // -D over the file.
  EXPECT_THAT(status({"--config", conf(),
                      "-Dexternal-resource.gpu.param.discovery-script.args="
                      "--enable-coordination-mode --coordination-file " +
                          path("other")})
                  .err,
              HasSubstr("the coordination file is " + path("other") +
                        " (from -D external-resource.gpu.param.discovery-script.args="));
  // The one of $FLINK_HOME/conf too (the Flink flink-gpu is installed in: /opt/flink/conf of the
  // Debian package), whose TaskManagers use the file it names.
  const CliRun home = status({}, {"FLINK_HOME=" + dir_.path().string()});
  EXPECT_THAT(home.err, HasSubstr(expected +
                                  " (from external-resource.gpu.param.discovery-script"
                                  ".args in " +
                                  conf() + "/config.yaml)"));
  // The variable wins, and a warning says that the configuration names another file.
  const CliRun both =
      status({}, {"FLINK_HOME=" + dir_.path().string(), variable(path("from-variable"))});
  EXPECT_THAT(both.err, HasSubstr("the coordination file is " + path("from-variable")));
  EXPECT_THAT(
      both.err,
      HasSubstr("flink-gpu: warning: $FLINK_GPU_COORDINATION_FILE names " + path("from-variable") +
                ", but the Flink configuration's GPU resources name " + path("configured")));
}

TEST_F(CoordinationFileChoiceTest, AResourceInCoordinationModeNamingNoFileNamesTheDefault) {
  writeConfiguration({{"gpu", "--enable-coordination-mode --coordination-file " + path("a")},
                      {"gpu2", "--enable-coordination-mode"}});
  const CliRun run = runCli({"drain", "--gpu", "0", "--config", conf()});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_THAT(run.err, HasSubstr("the Flink configuration names two coordination files: " +
                                 path("a") + " (resource 'gpu') and " +
                                 "/var/tmp/flink-gpu-coordination (resource 'gpu2')"));
}

TEST_F(CoordinationFileChoiceTest, OnlyResourcesThatCoordinateAndThatATaskManagerStartsCount) {
  // Not in coordination mode: its file is used by no one. A bad amount: the TaskManager skips it.
  writeConfiguration({{"gpu", "--enable-coordination-mode --coordination-file " + path("a")},
                      {"plain", "--coordination-file " + path("b")},
                      {"broken", "--enable-coordination-mode --coordination-file " + path("c")}});
  const CliRun run = status({"--config", conf(), "-Dexternal-resource.broken.amount=0"});
  EXPECT_EQ(run.exitCode, 0) << run;
  EXPECT_THAT(run.err, HasSubstr("the coordination file is " + path("a")));
}

TEST_F(CoordinationFileChoiceTest, DiscoverConfigWarnsWhenItsResourcesCoordinateThroughTwoFiles) {
  writeConfiguration(
      {{"gpu", "--enable-coordination-mode --gpus 0,1 --coordination-file " + path("a")},
       {"gpu2", "--enable-coordination-mode --gpus 0,1"}});
  // Under unshare, the default file would be the host's: name the second one as the variable's
  // (the discovery reads it) — and the warning names the default, which its TaskManagers use.
  const CliRun run = runCli({"discover", "--config", conf()}, {variable(path("b"))});
  EXPECT_THAT(run.err, HasSubstr("flink-gpu: warning: the GPU resources 'gpu' and 'gpu2' "
                                 "coordinate through two files, " +
                                 path("a") + " and /var/tmp/flink-gpu-coordination"))
      << run;
}

TEST_F(CoordinationFileChoiceTest, RelativeFilesOfTheVariableOrConfigurationAreRefused) {
  // Each process would read them from its own working directory.
  CliRun run = runCli({"status"}, {variable("gpus")});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_THAT(run.err, HasSubstr("$FLINK_GPU_COORDINATION_FILE is 'gpus', a relative path"));
  writeConfiguration({{"gpu", "--enable-coordination-mode --coordination-file gpus"}});
  run = runCli({"status", "--config", conf()});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_THAT(run.err, HasSubstr("a relative path, which each TaskManager reads from its own"));
  // A folder is no coordination file.
  run = runCli({"drain", "--gpu", "0", "--coordination-file", dir_.path().string()});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_THAT(run.err, HasSubstr("is not a regular file"));
}

TEST_F(CoordinationFileChoiceTest, MistakesAreErrorsNotTheHostsFile) {
  // Two GPU resources with two different files: which one is meant is the operator's to say.
  writeConfiguration(
      {{"gpu", "--enable-coordination-mode --coordination-file " + path("a")},
       {"inference", "--enable-coordination-mode --coordination-file " + path("b")}});
  CliRun run = runCli({"drain", "--gpu", "0", "--config", conf()});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_THAT(run.err, HasSubstr("the Flink configuration names two coordination files: " +
                                 path("a") + " (resource 'gpu') and " + path("b") +
                                 " (resource 'inference'); give --coordination-file"));
  EXPECT_FALSE(fs::exists(path("a") + ".health"));
  EXPECT_FALSE(fs::exists(path("b") + ".health"));

  run = runCli({"status"}, {"FLINK_GPU_COORDINATION_FILE="});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_THAT(run.err, HasSubstr("$FLINK_GPU_COORDINATION_FILE is set but empty"));

  // A configuration asked for that cannot be read: exit 2, nothing done.
  run = runCli({"share", "--gpu", "0", "--replicas", "2", "--config", path("nowhere")});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_THAT(run.err, HasSubstr("configuration error"));
  // --config naming a file Flink does not read.
  std::ofstream(path("conf/other.yaml")) << "a: b\n";
  run = runCli({"status", "--config", path("conf/other.yaml")});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_THAT(run.err, HasSubstr("is a file Flink does not read"));
}

TEST_F(CoordinationFileChoiceTest, TheDiscoveryProgramTakesTheVariableToo) {
  const std::string file = path("program");
  const CliRun run = runCli(
      {"discover", "--discovery-args", "--enable-coordination-mode --gpus 0,1", "--amount", "1"},
      {variable(file)});
  ASSERT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, "GPU Device(0)\n");
  // discover's records end with it; the file it allocated in is the variable's.
  EXPECT_TRUE(fs::exists(file)) << run;
}

}  // namespace

namespace {

// check on a file no worker ever wrote, while the file the Flink configuration names is in use:
// the classic silent mistake, said.
TEST_F(CoordinationFileChoiceTest, CheckSaysWhenTheFileItReadsIsNotTheOneInUse) {
  writeRecord(path("in-use"), 0);
  writeConfiguration({{"gpu", "--enable-coordination-mode --coordination-file " + path("in-use")}});
  // The configuration merely in $FLINK_HOME/conf: not used to pick the file, but looked at.
  const CliRun run = runCli({"check", "--coordination-file", path("never-written")},
                            {"FLINK_HOME=" + dir_.path().string()});
  EXPECT_THAT(run.out, HasSubstr("note: coordination file " + path("never-written") +
                                 " has never been written by a worker, but " + path("in-use") +
                                 ", which external-resource.gpu.param.discovery-script.args in " +
                                 conf() + "/config.yaml names, has"))
      << run;
  // Reading the file in use: no such note.
  const CliRun right = runCli({"check", "--coordination-file", path("in-use")},
                              {"FLINK_HOME=" + dir_.path().string()});
  EXPECT_THAT(right.out, Not(HasSubstr("never been written"))) << right;
}

}  // namespace
