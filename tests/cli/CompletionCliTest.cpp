// `flink-gpu completion bash|zsh` from the outside: the scripts the real binary prints, run by the
// real shells. bash's is sourced in `bash -c` and its function called as bash calls it (COMP_WORDS,
// COMP_CWORD, COMP_LINE, COMP_POINT), without bash-completion; zsh's is checked with `zsh -n`
// where zsh is installed.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "CliRun.h"
#include "TestSupport.h"
#include "process/Subprocess.h"

namespace {

namespace fs = std::filesystem;
using flink::testing::CliRun;
using flink::testing::linesOf;
using flink::testing::runCli;
using flink::testing::TempDir;

/// The first of `candidates` that exists, or empty.
std::string firstExisting(const std::vector<std::string>& candidates) {
  for (const std::string& candidate : candidates) {
    std::error_code error;
    if (fs::exists(candidate, error)) return candidate;
  }
  return {};
}

class CompletionCliTest : public ::testing::Test {
 protected:
  /// The script `flink-gpu completion <shell>` prints, written to a file.
  fs::path script(const std::string& shell) {
    const CliRun run = runCli({"completion", shell});
    EXPECT_EQ(run.exitCode, 0) << run;
    EXPECT_EQ(run.err, "") << run;
    const fs::path path = dir_ / ("completion." + shell);
    std::ofstream(path) << run.out;
    return path;
  }

  /// What bash offers (COMPREPLY, one word a line, sorted) for the command line `words`, the last
  /// of them the word being completed.
  std::vector<std::string> complete(const std::vector<std::string>& words) {
    if (bashScript_.empty()) bashScript_ = script("bash");
    std::string array;
    std::string line;
    for (const std::string& word : words) {
      array += " '" + word + "'";
      line += (line.empty() ? "" : " ") + word;
    }
    const std::string program = "source '" + bashScript_.string() + "' || exit 3\n" +
                                "COMP_WORDS=(" + array + ")\n" +
                                "COMP_CWORD=" + std::to_string(words.size() - 1) + "\n" +
                                "COMP_LINE='" + line + "'\nCOMP_POINT=${#COMP_LINE}\n" +
                                "_flink_gpu || exit 4\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n";
    const flink::process::ProcessResult result =
        flink::process::run({"/bin/bash", "--norc", "--noprofile", "-c", program}, {});
    EXPECT_TRUE(result.outcome.succeeded()) << result.outcome.toString() << "\n"
                                            << result.stderrOutput.data;
    EXPECT_EQ(result.stderrOutput.data, "");
    std::vector<std::string> offered = linesOf(result.stdoutOutput.data);
    offered.erase(std::remove(offered.begin(), offered.end(), ""), offered.end());
    std::sort(offered.begin(), offered.end());
    return offered;
  }

  TempDir dir_{"flink-gpu-completion-cli-test"};
  fs::path bashScript_;
};

using Words = std::vector<std::string>;

TEST_F(CompletionCliTest, BashCompletesASubcommand) {
  EXPECT_EQ(complete({"flink-gpu", "sta"}), Words({"status"}));
  EXPECT_EQ(complete({"flink-gpu", "-v", "dr"}), Words({"drain"}));
  EXPECT_EQ(complete({"flink-gpu", "--v"}), Words({"--verbose", "--version"}));
}

// Every subcommand --help lists, and no other: the script is made from the parser's own set-up.
TEST_F(CompletionCliTest, BashOffersEverySubcommandTheParserHas) {
  const CliRun help = runCli({"--help"});
  ASSERT_EQ(help.exitCode, 0) << help;
  Words listed;
  bool inList = false;
  for (const std::string& line : linesOf(help.out)) {
    if (line == "Subcommands:") {
      inList = true;
    } else if (inList && line.rfind("  ", 0) == 0 && line.size() > 2 && line[2] != ' ') {
      listed.push_back(line.substr(2, line.find(' ', 2) - 2));
    } else if (inList && line.empty()) {
      break;
    }
  }
  ASSERT_GE(listed.size(), 10u) << help.out;
  EXPECT_NE(std::find(listed.begin(), listed.end(), "completion"), listed.end()) << help.out;
  std::sort(listed.begin(), listed.end());
  EXPECT_EQ(complete({"flink-gpu", ""}), listed);
}

TEST_F(CompletionCliTest, BashCompletesTheChoicesOfAnOption) {
  EXPECT_EQ(complete({"flink-gpu", "status", "--format", ""}),
            Words({"json", "prometheus", "text"}));
  // bash breaks `--format=j` at '=' (COMP_WORDBREAKS).
  EXPECT_EQ(complete({"flink-gpu", "status", "--format", "=", "j"}), Words({"json"}));
  EXPECT_EQ(complete({"flink-gpu", "check", "--format", ""}), Words({"json", "text"}));
  EXPECT_EQ(complete({"flink-gpu", "discover", "--vendor", ""}), Words({"amd", "intel", "nvidia"}));
  EXPECT_EQ(complete({"flink-gpu", "exec", "--placement", ""}), Words({"index", "topology"}));
  EXPECT_EQ(complete({"flink-gpu", "exec", "--health", ""}), Words({"ignore", "skip", "warn"}));
  EXPECT_EQ(complete({"flink-gpu", "exec", "--visible-devices", ""}), Words({"index", "uuid"}));
  EXPECT_EQ(complete({"flink-gpu", "exec", "--share-placement", ""}), Words({"pack", "spread"}));
  EXPECT_EQ(complete({"flink-gpu", "completion", ""}), Words({"bash", "zsh"}));
  EXPECT_EQ(complete({"flink-gpu", "watch", "--readmit", ""}), Words({"driver", "never"}));
  // A value no shell can guess: nothing, rather than the options.
  EXPECT_EQ(complete({"flink-gpu", "exec", "-n", ""}), Words());
}

TEST_F(CompletionCliTest, BashCompletesTheOptionsOfASubcommandAndTheGlobalOnes) {
  const Words options = complete({"flink-gpu", "watch", "-"});
  for (const char* option : {"--coordination-file", "--ignore-xids", "--critical-xids", "--help",
                             "--verbose", "--quiet"}) {
    EXPECT_NE(std::find(options.begin(), options.end(), option), options.end()) << option;
  }
  EXPECT_EQ(std::find(options.begin(), options.end(), "--amount"), options.end());
  // After an option's value, the options again.
  EXPECT_EQ(complete({"flink-gpu", "status", "--format", "json", "--coo"}),
            Words({"--coordination-file"}));
}

TEST_F(CompletionCliTest, BashCompletesPathsWhereAValueIsOne) {
  std::ofstream(dir_ / "coordination-here");
  const std::string prefix = (dir_ / "coordination-h").string();
  EXPECT_EQ(complete({"flink-gpu", "status", "--coordination-file", prefix}),
            Words({(dir_ / "coordination-here").string()}));
}

// Everything after exec's command is the command's: its options are not exec's.
TEST_F(CompletionCliTest, BashLeavesExecsCommandToItself) {
  const Words offered = complete({"flink-gpu", "exec", "-n", "1", "python3", "--pl"});
  EXPECT_EQ(std::find(offered.begin(), offered.end(), "--placement"), offered.end());
}

TEST_F(CompletionCliTest, AnUnknownShellIsAUsageError) {
  const CliRun run = runCli({"completion", "fish"});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_EQ(run.out, "") << run;
  const CliRun none = runCli({"completion"});
  EXPECT_EQ(none.exitCode, 2) << none;
}

TEST_F(CompletionCliTest, ZshScriptIsACompdefFunctionThatParses) {
  const fs::path path = script("zsh");
  const std::string text = flink::testing::readFile(path);
  EXPECT_EQ(text.rfind("#compdef flink-gpu\n", 0), 0u) << text.substr(0, 200);
  for (const char* word : {"'status:", "(text json prometheus)", "(nvidia amd intel)",
                           "(topology index)", "(skip warn ignore)", "(bash zsh)"}) {
    EXPECT_NE(text.find(word), std::string::npos) << word;
  }
  const std::string zsh = firstExisting({"/usr/bin/zsh", "/bin/zsh"});
  if (zsh.empty()) GTEST_SKIP() << "zsh is not installed: its script was not parsed";
  const flink::process::ProcessResult result = flink::process::run({zsh, "-n", path.string()}, {});
  EXPECT_TRUE(result.outcome.succeeded()) << result.outcome.toString() << "\n"
                                          << result.stderrOutput.data;
}

}  // namespace
