// flink-gpu's command line as a user meets it (cli/CommandLine.cpp): usage errors that name the
// nearest known command or option and point to the command's own help, the types --help gives,
// and Flink's home taken from flink-gpu's own place when FLINK_HOME is unset, as Flink's
// bin/config.sh takes it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "CliRun.h"
#include "TestSupport.h"

namespace {

namespace fs = std::filesystem;
using flink::testing::CliRun;
using flink::testing::firstLine;
using flink::testing::kCli;
using flink::testing::linesOf;
using flink::testing::runCli;
using flink::testing::runCliAt;
using flink::testing::TempDir;
using flink::testing::writeScript;
using ::testing::HasSubstr;
using ::testing::Not;

using flink::testing::kGpuFactory;

// --- usage errors ---------------------------------------------------------------------------

TEST(CommandLineCliTest, AnUnknownCommandNamesTheNearestKnownOne) {
  const CliRun run = runCli({"dicsover"});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_EQ(linesOf(run.err),
            (std::vector<std::string>{
                "flink-gpu: error: unknown command 'dicsover'; did you mean 'discover'?",
                "Run 'flink-gpu --help' for the commands."}))
      << run;
  EXPECT_EQ(run.out, "") << run;

  for (const auto& [typed, meant] : std::vector<std::pair<std::string, std::string>>{
           {"chek", "check"}, {"stauts", "status"}, {"exce", "exec"}, {"undrian", "undrain"}}) {
    const CliRun typo = runCli({typed});
    EXPECT_EQ(typo.exitCode, 2) << typo;
    EXPECT_EQ(firstLine(typo.err),
              "flink-gpu: error: unknown command '" + typed + "'; did you mean '" + meant + "'?")
        << typo;
  }
}

TEST(CommandLineCliTest, AnUnknownCommandFarFromAnyHasNoSuggestion) {
  for (const std::string word : {"bogus", "x", "topo"}) {
    const CliRun run = runCli({word, "--amount", "2"});
    EXPECT_EQ(run.exitCode, 2) << run;
    EXPECT_EQ(firstLine(run.err), "flink-gpu: error: unknown command '" + word + "'") << run;
  }
}

TEST(CommandLineCliTest, AnUnknownOptionNamesTheNearestOptionOfItsCommand) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"discover", "--amout", "2"},
                                             {"discover", "--amout=2"},
                                             {"-v", "discover", "--amout"}}) {
    const CliRun run = runCli(args);
    EXPECT_EQ(run.exitCode, 2) << run;
    EXPECT_EQ(linesOf(run.err),
              (std::vector<std::string>{
                  "flink-gpu: error: unknown option '--amout'; did you mean '--amount'?",
                  "Run 'flink-gpu discover --help' for its options."}))
        << run;
  }
  // One dash before a long name.
  CliRun run = runCli({"discover", "-amount", "2"});
  EXPECT_EQ(firstLine(run.err),
            "flink-gpu: error: unknown option '-amount'; did you mean '--amount'?")
      << run;
  // exec's own options, even where its command's required ones are missing too.
  run = runCli({"exec", "--amout", "1", "--", "true"});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_EQ(linesOf(run.err),
            (std::vector<std::string>{
                "flink-gpu: error: unknown option '--amout'; did you mean '--amount'?",
                "Run 'flink-gpu exec --help' for its options."}))
      << run;
  // The global options count too, wherever they are typed.
  run = runCli({"status", "--verbos"});
  EXPECT_EQ(firstLine(run.err),
            "flink-gpu: error: unknown option '--verbos'; did you mean '--verbose'?")
      << run;
  // Only the command's own options are suggested: status has no --amount.
  run = runCli({"status", "--amout", "2"});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_EQ(firstLine(run.err), "flink-gpu: error: unknown option '--amout'") << run;
  run = runCli({"discover", "-x"});
  EXPECT_EQ(firstLine(run.err), "flink-gpu: error: unknown option '-x'") << run;
}

TEST(CommandLineCliTest, AUsageErrorPointsToTheHelpOfItsCommand) {
  CliRun run = runCli({"drain"});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_EQ(linesOf(run.err),
            (std::vector<std::string>{"flink-gpu: error: drain needs --gpu GPU",
                                      "Run 'flink-gpu drain --help' for its options."}))
      << run;
  run = runCli({"discover", "--format", "yaml"});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_THAT(firstLine(run.err), HasSubstr("--format")) << run;
  EXPECT_EQ(linesOf(run.err).back(), "Run 'flink-gpu discover --help' for its options.") << run;
  run = runCli({});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_EQ(linesOf(run.err).back(), "Run 'flink-gpu --help' for usage.") << run;
}

/// The commands the top-level `help` lists, under "Subcommands:".
std::vector<std::string> commandsOf(const std::string& help) {
  const std::vector<std::string> lines = linesOf(help);
  std::vector<std::string> commands;
  auto line = std::find(lines.begin(), lines.end(), "Subcommands:");
  if (line == lines.end()) return commands;
  for (++line; line != lines.end() && line->starts_with("  "); ++line) {
    const std::size_t end = line->find(' ', 2);
    commands.push_back(line->substr(2, end == std::string::npos ? end : end - 2));
  }
  return commands;
}

TEST(CommandLineCliTest, NoParserTextReachesTheUser) {
  // Each kind of error CLI11 finds, in our words: the option named as typed, then the pointer to
  // the command's help. CLI11's own ("1 required UINT missing", "yaml not in {text,json}",
  // "Could not convert", "A subcommand is required") never shows.
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      // A required option (CLI::RequiredError).
      {{"exec"}, "exec needs --amount UINT"},
      {{"share", "--replicas", "2"}, "share needs --gpu ID|all"},
      // A missing value (CLI::ArgumentMismatch), as typed.
      {{"exec", "--amount"}, "--amount needs a value (a whole number)"},
      {{"exec", "-n"}, "-n needs a value (a whole number)"},
      {{"status", "--format"}, "--format needs a value (text, json or prometheus)"},
      {{"discover", "--timeout"}, "--timeout needs a value (DURATION)"},
      {{"exec", "-n", "1", "--visible-devices"}, "--visible-devices needs a value (index or uuid)"},
      // Given twice (CLI::ArgumentMismatch).
      {{"drain", "--gpu", "0", "--gpu", "1"}, "--gpu is given 2 times; drain takes it once"},
      // Not one of the choices (CLI::ValidationError).
      {{"discover", "--format", "yaml"}, "invalid --format 'yaml': expected text or json"},
      {{"status", "--format=yaml"}, "invalid --format 'yaml': expected text, json or prometheus"},
      {{"exec", "-n", "1", "--placement=near", "--", "true"},
       "invalid --placement 'near': expected topology or index"},
      {{"config", "--config-file", "flink.yml"},
       "invalid --config-file 'flink.yml': expected config.yaml or flink-conf.yaml"},
      // Not of the option's type (CLI::ConversionError).
      {{"check", "--expect", "abc"}, "invalid --expect 'abc': expected a whole number"},
      {{"release", "--owner=abc"}, "invalid --owner 'abc': expected a process id"},
      {{"discover", "--strict=maybe"}, "invalid --strict 'maybe': --strict takes no value"},
      // Arguments no option takes (CLI::ExtrasError).
      {{"discover", "extra"}, "unexpected argument 'extra': discover takes only options"},
      {{"status", "one", "two"}, "unexpected arguments 'one', 'two': status takes only options"},
      {{"discover", "--", "x"}, "unexpected argument 'x': discover takes only options"},
      {{"status", "-q=3"}, "unexpected argument '-q=3': status takes only options"},
  };
  for (const auto& [args, said] : cases) {
    const CliRun run = runCli(args);
    EXPECT_EQ(run.exitCode, 2) << run;
    EXPECT_EQ(run.out, "") << run;
    EXPECT_EQ(linesOf(run.err), (std::vector<std::string>{"flink-gpu: error: " + said,
                                                          "Run 'flink-gpu " + args.front() +
                                                              " --help' for its options."}))
        << run;
  }
  // No command at all (CLI::RequiredError of the subcommand): the commands --help lists, and help.
  std::string commands;
  for (const std::string& command : commandsOf(runCli({"--help"}).out)) commands += command + ", ";
  const CliRun none = runCli({"-v"});
  EXPECT_EQ(none.exitCode, 2) << none;
  EXPECT_EQ(linesOf(none.err),
            (std::vector<std::string>{"flink-gpu: error: no command given; the commands are " +
                                          commands.substr(0, commands.size() - 2) + " or help",
                                      "Run 'flink-gpu --help' for usage."}))
      << none;
  EXPECT_TRUE(
      commands.starts_with("discover, status, release, exec, config, topology, drain, "
                           "undrain, check, watch, share, unshare"))
      << commands;
}

/// The help line of `option` in `help`: the line that starts with it, after the indent.
std::string helpLine(const std::string& help, const std::string& option) {
  for (const std::string& line : linesOf(help)) {
    const std::size_t start = line.find_first_not_of(' ');
    if (start != std::string::npos && line.compare(start, option.size(), option) == 0 &&
        (line.size() == start + option.size() || line[start + option.size()] == ' ')) {
      return line;
    }
  }
  return "";
}

TEST(CommandLineCliTest, HelpGivesEachOptionsType) {
  // Every option that takes a value, by command: the type --help shows for it.
  const std::vector<std::tuple<std::string, std::string, std::string>> expected{
      {"discover", "-n,--amount", "UINT=1"},
      {"discover", "--discovery-script", "PATH"},
      {"discover", "--discovery-args", "TEXT"},
      {"discover", "--timeout", "DURATION"},
      {"discover", "--format", "TEXT:{text,json}=text"},
      {"discover", "--config", "[DIR|FILE]"},
      {"discover", "--config-file", "NAME:{config.yaml,flink-conf.yaml}"},
      {"discover", "-D", "KEY=VALUE"},
      {"status", "--coordination-file", "PATH"},
      {"status", "--format", "TEXT:{text,json,prometheus}=text"},
      {"release", "--owner", "PID"},
      {"release", "--gpu", "GPU"},
      {"release", "--coordination-file", "PATH"},
      {"exec", "-n,--amount", "UINT"},
      {"exec", "--coordination-file", "PATH"},
      {"exec", "--gpus", "LIST"},
      {"exec", "--visible-devices", "TEXT:{index,uuid}=index"},
      {"exec", "--share-placement", "pack|spread"},
      {"exec", "--placement", "TEXT:{topology,index}=topology"},
      {"exec", "--health", "TEXT:{skip,warn,ignore}=skip"},
      {"exec", "command", "ARG"},
      {"config", "--config", "[DIR|FILE]"},
      {"config", "-D", "KEY=VALUE"},
      {"config", "--format", "TEXT:{text,json}=text"},
      {"topology", "--format", "TEXT:{text,json}=text"},
      {"drain", "--gpu", "GPU"},
      {"drain", "--reason", "TEXT"},
      {"undrain", "--gpu", "GPU"},
      {"check", "--expect", "UINT"},
      {"check", "--format", "TEXT:{text,json}=text"},
      {"watch", "--coordination-file", "PATH"},
      {"watch", "--ignore-xids", "LIST"},
      {"watch", "--critical-xids", "LIST"},
      {"watch", "--readmit", "TEXT:{driver,never}=driver"},
  };
  for (const auto& [command, option, type] : expected) {
    const CliRun run = runCli({command, "--help"});
    ASSERT_EQ(run.exitCode, 0) << run;
    const std::string line = helpLine(run.out, option);
    EXPECT_THAT(line, HasSubstr(option + " " + type)) << command << " " << option << run;
  }
}

// --- help ------------------------------------------------------------------------------------

TEST(CommandLineCliTest, HelpPrintsTheHelpOfFlinkGpuOrOfACommand) {
  // As `git help`: `help` is --help, `help COMMAND` is COMMAND --help.
  const CliRun top = runCli({"--help"});
  ASSERT_EQ(top.exitCode, 0) << top;
  EXPECT_THAT(top.out, HasSubstr("Run 'flink-gpu help COMMAND' (or 'flink-gpu COMMAND --help') "
                                 "for a command's options and examples."))
      << top;
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"help"}, {"help", "help"}, {"-q", "help"}}) {
    const CliRun run = runCli(args);
    EXPECT_EQ(run.exitCode, 0) << run;
    EXPECT_EQ(run.out, top.out) << run;
    EXPECT_EQ(run.err, "") << run;
  }
  for (const std::string command : {"discover", "exec", "share"}) {
    const CliRun own = runCli({command, "--help"});
    ASSERT_EQ(own.exitCode, 0) << own;
    const CliRun run = runCli({"help", command});
    EXPECT_EQ(run.exitCode, 0) << run;
    EXPECT_EQ(run.out, own.out) << run;
    EXPECT_EQ(runCli({"-v", "help", command}).out, own.out);
  }
}

TEST(CommandLineCliTest, HelpOfAnUnknownCommandNamesTheNearest) {
  CliRun run = runCli({"help", "dicsover"});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_EQ(run.out, "") << run;
  EXPECT_EQ(linesOf(run.err),
            (std::vector<std::string>{
                "flink-gpu: error: unknown command 'dicsover'; did you mean 'discover'?",
                "Run 'flink-gpu --help' for the commands."}))
      << run;
  run = runCli({"help", "nosuch"});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_EQ(firstLine(run.err), "flink-gpu: error: unknown command 'nosuch'") << run;
  // `help` itself is a command the nearest can be.
  run = runCli({"hlep"});
  EXPECT_EQ(firstLine(run.err), "flink-gpu: error: unknown command 'hlep'; did you mean 'help'?")
      << run;
}

/// The command lines after "Examples:" at the end of `help`, each split into its words (single
/// quotes group words, as a shell reads them); empty when the help does not end with them.
std::vector<std::vector<std::string>> examplesOf(const std::string& help) {
  const std::vector<std::string> lines = linesOf(help);
  const auto start = std::find(lines.begin(), lines.end(), "Examples:");
  std::vector<std::vector<std::string>> examples;
  if (start == lines.end()) return examples;
  for (auto line = start + 1; line != lines.end(); ++line) {
    if (line->empty()) continue;
    std::vector<std::string> words;
    std::string word;
    bool quoted = false;
    bool any = false;
    for (const char c : *line) {
      if (c == '\'') {
        quoted = !quoted;
        any = true;
      } else if (c == ' ' && !quoted) {
        if (any) words.push_back(word);
        word.clear();
        any = false;
      } else {
        word += c;
        any = true;
      }
    }
    if (any) words.push_back(word);
    examples.push_back(words);
  }
  return examples;
}

TEST(CommandLineCliTest, EachCommandsHelpEndsWithExamplesThatWork) {
  TempDir dir("flink-gpu-examples");
  // What the examples name: a discovery script of the user's in the working folder, a Flink
  // configuration ($FLINK_CONF_DIR) and a coordination file of the test's own. No NVML and no
  // PATH, so that no example finds GPUs, runs a program or watches for ever.
  writeScript(dir.path() / "my-gpus.sh", "#!/bin/sh\necho 0,1\n");
  writeScript(dir.path() / "conf/config.yaml",
              std::string("external-resources: gpu\nexternal-resource.gpu.amount: 1\n"
                          "external-resource.gpu.driver-factory.class: ") +
                  kGpuFactory + "\nexternal-resource.gpu.param.discovery-script.path: " +
                  (dir.path() / "my-gpus.sh").string() + "\n",
              fs::perms::owner_read | fs::perms::owner_write);
  fs::create_directories(dir.path() / "empty-path");
  const std::vector<std::string> environment{
      "FLINK_CONF_DIR=" + (dir.path() / "conf").string(),
      "FLINK_GPU_COORDINATION_FILE=" + (dir.path() / "coordination").string(),
      "FLINK_GPU_NVML_LIBRARY=" + (dir.path() / "no-nvml/libnvidia-ml.so.1").string(),
      "PATH=" + (dir.path() / "empty-path").string()};
  // Every command --help lists, so that a new one needs its examples too.
  const std::vector<std::string> commands = commandsOf(runCli({"--help"}).out);
  EXPECT_GE(commands.size(), 12u) << "--help lists too few commands";
  for (const std::string& command : commands) {
    const CliRun help = runCli({command, "--help"});
    ASSERT_EQ(help.exitCode, 0) << help;
    const std::vector<std::vector<std::string>> examples = examplesOf(help.out);
    EXPECT_GE(examples.size(), 2u) << command << help;
    EXPECT_LE(examples.size(), 3u) << command << help;
    for (const std::vector<std::string>& example : examples) {
      ASSERT_GE(example.size(), 2u) << command << help;
      EXPECT_EQ(example[0], "flink-gpu") << command << help;
      EXPECT_EQ(example[1], command) << command << help;
      // Run as shown: whatever it finds on this host, the command line itself is right.
      const CliRun run =
          runCliAt(kCli, dir.path(), {example.begin() + 1, example.end()}, environment);
      EXPECT_NE(run.exitCode, 2) << command << run;
      EXPECT_THAT(run.err, Not(HasSubstr("--help'"))) << command << run;
    }
  }
}

TEST(CommandLineCliTest, TheFlinkHomeParagraphIsWhereFlinkHomeIsRead) {
  const std::string paragraph = "When FLINK_HOME is not set, flink-gpu sets it to the folder";
  EXPECT_THAT(runCli({"--help"}).out, HasSubstr(paragraph));
  for (const std::string command : {"discover", "config"}) {
    EXPECT_THAT(runCli({command, "--help"}).out, HasSubstr(paragraph)) << command;
  }
  for (const std::string command : {"status", "release", "exec", "topology", "drain", "undrain",
                                    "check", "watch", "share", "unshare"}) {
    EXPECT_THAT(runCli({command, "--help"}).out, Not(HasSubstr(paragraph))) << command;
  }
}

// --- Flink's home from flink-gpu's place ----------------------------------------------------

/// A Flink distribution in a temporary folder, with flink-gpu in its bin/ (a hard link to the
/// binary of this build, or a copy where a link cannot be made: /proc/self/exe then names this
/// folder, as it names the place of an installed flink-gpu), the default discovery script in
/// plugins/external-resource-gpu/ (printing 0,1) and a conf/config.yaml whose GPU resource uses
/// the default script path, relative to Flink's home. Runs are made from another folder, which
/// holds no plugins/.
class FlinkHomeCliTest : public ::testing::Test {
 protected:
  FlinkHomeCliTest() {
    place(home() / "bin");
    writeScript(home() / "plugins/external-resource-gpu/nvidia-gpu-discovery.sh",
                "#!/bin/sh\necho 0,1\n");
    writeScript(home() / "conf/config.yaml",
                std::string("external-resources: gpu\nexternal-resource.gpu.amount: 2\n"
                            "external-resource.gpu.driver-factory.class: ") +
                    kGpuFactory + "\n",
                fs::perms::owner_read | fs::perms::owner_write);
    fs::create_directories(elsewhere());
  }

  fs::path home() const { return dir_.path() / "flink"; }
  fs::path elsewhere() const { return dir_.path() / "elsewhere"; }
  std::string conf() const { return (home() / "conf").string(); }

  /// flink-gpu in `folder`, returned.
  fs::path place(const fs::path& folder) {
    fs::create_directories(folder);
    const fs::path program = folder / "flink-gpu";
    std::error_code error;
    fs::create_hard_link(kCli, program, error);
    if (error) fs::copy_file(kCli, program);
    // Every build's flink-gpu has the library's code in it, a sanitizer build's too: nothing of
    // ours comes along.
    return program;
  }

  CliRun run(const std::vector<std::string>& args, const std::vector<std::string>& environment = {},
             const fs::path& program = {}) {
    return runCliAt(program.empty() ? home() / "bin/flink-gpu" : program, elsewhere(), args,
                    environment);
  }

  TempDir dir_{"flink-gpu-home"};
};

TEST_F(FlinkHomeCliTest, ConfigFindsTheDefaultScriptUnderTheFolderAboveBin) {
  // The bug report: `<flink>/bin/flink-gpu discover --config <flink>/conf` with FLINK_HOME unset
  // looked for the script in the working folder.
  const CliRun found = run({"discover", "--config", conf()});
  ASSERT_EQ(found.exitCode, 0) << found;
  EXPECT_EQ(found.out, "gpu: GPU Device(0)\ngpu: GPU Device(1)\n") << found;
  EXPECT_EQ(found.err, "") << found;

  const CliRun emptyHome = run({"discover", "--config", conf()}, {"FLINK_HOME="});
  ASSERT_EQ(emptyHome.exitCode, 0) << emptyHome;
  EXPECT_EQ(emptyHome.out, found.out) << emptyHome;
}

TEST_F(FlinkHomeCliTest, VerboseSaysWhichHomeWasTaken) {
  CliRun verbose = run({"-v", "discover", "--config", conf()});
  ASSERT_EQ(verbose.exitCode, 0) << verbose;
  EXPECT_EQ(firstLine(verbose.err), "flink-gpu: FLINK_HOME is not set; using " + home().string() +
                                        ", the folder above flink-gpu's bin/")
      << verbose;
  verbose = run({"-v", "discover", "--config", conf()}, {"FLINK_HOME="});
  EXPECT_EQ(firstLine(verbose.err), "flink-gpu: FLINK_HOME is empty; using " + home().string() +
                                        ", the folder above flink-gpu's bin/")
      << verbose;
  // Without -v, and with a FLINK_HOME of the user's, nothing is said.
  EXPECT_EQ(run({"discover", "--config", conf()}).err, "");
  const CliRun set = run({"-v", "config", "--config", conf()}, {"FLINK_HOME=" + home().string()});
  EXPECT_THAT(set.err, Not(HasSubstr("FLINK_HOME"))) << set;
}

TEST_F(FlinkHomeCliTest, ConfigShowsThePluginsFolderUnderTheFolderAboveBin) {
  const std::string plugins = (home() / "plugins").string();
  CliRun text = run({"config", "--config", conf()});
  ASSERT_EQ(text.exitCode, 0) << text;
  EXPECT_THAT(text.out, HasSubstr("\nplugins: " + plugins + "\n")) << text;
  CliRun json = run({"config", "--config", conf(), "--format", "json"});
  ASSERT_EQ(json.exitCode, 0) << json;
  EXPECT_EQ(nlohmann::json::parse(json.out)["plugins"], plugins) << json;

  // FLINK_HOME, when set, and FLINK_PLUGINS_DIR still win.
  const fs::path other = dir_.path() / "other";
  text = run({"config", "--config", conf()}, {"FLINK_HOME=" + other.string()});
  EXPECT_THAT(text.out, HasSubstr("\nplugins: " + (other / "plugins").string() + "\n")) << text;
  text = run({"config", "--config", conf()}, {"FLINK_PLUGINS_DIR=" + other.string()});
  EXPECT_THAT(text.out, HasSubstr("\nplugins: " + other.string() + "\n")) << text;
}

TEST_F(FlinkHomeCliTest, ConfigWithoutAFolderReadsTheConfOfTheFolderAboveBin) {
  const CliRun found = run({"discover", "--config"});
  ASSERT_EQ(found.exitCode, 0) << found;
  EXPECT_EQ(found.out, "gpu: GPU Device(0)\ngpu: GPU Device(1)\n") << found;
}

TEST_F(FlinkHomeCliTest, ATypedScriptPathStaysRelativeToTheWorkingDirectory) {
  writeScript(elsewhere() / "mine.sh", "#!/bin/sh\necho 7\n");
  const CliRun mine = run({"discover", "--discovery-script", "mine.sh"});
  ASSERT_EQ(mine.exitCode, 0) << mine;
  EXPECT_EQ(mine.out, "GPU Device(7)\n") << mine;
}

TEST_F(FlinkHomeCliTest, OutsideABinFolderThereIsNoHome) {
  const fs::path program = place(dir_.path() / "tools");
  const CliRun result = run({"discover", "--config"}, {}, program);
  EXPECT_EQ(result.exitCode, 2) << result;
  EXPECT_THAT(result.err, HasSubstr("FLINK_CONF_DIR")) << result;
  EXPECT_THAT(result.err, HasSubstr("FLINK_HOME")) << result;
}

}  // namespace
