// Tests of the flink-gpu program from the outside: each test runs the real binary (built beside
// this test, path in FLINK_GPU_CLI) on discovery scripts written on the fly, and checks what a
// user or a calling script would see: stdout, stderr and the exit code of cli/ExitCode.h
// (0 success, 1 discovery failed, 2 usage or configuration error).
#include <gtest/gtest.h>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <ostream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "CliRun.h"
#include "TestSupport.h"
#include "process/Subprocess.h"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using flink::testing::CliRun;
using flink::testing::firstLine;
using flink::testing::hasLineStartingWith;
using flink::testing::kCli;
using flink::testing::linesOf;
using flink::testing::readLines;
using flink::testing::runCli;
using flink::testing::TempDir;
using flink::testing::writeScript;

class FlinkGpuCliTest : public ::testing::Test {
 protected:
  /// Writes an executable `#!/bin/sh` script with `body` into the test's folder.
  std::string script(const std::string& name, const std::string& body) {
    return writeScript(dir_ / name, "#!/bin/sh\n" + body).string();
  }

  /// A script that prints `0,1`, as a host with two GPUs would.
  std::string twoGpus() { return script("two-gpus.sh", "echo 0,1\n"); }

  /// A script that writes each argument it gets on a line of `argsFile()`, then prints `0`.
  std::string recordingScript() {
    return script("recording.sh", "for arg in \"$@\"; do printf '%s\\n' \"$arg\"; done > '" +
                                      argsFile().string() + "'\necho 0\n");
  }
  fs::path argsFile() const { return dir_ / "args.txt"; }

  /// A folder holding a stand-in nvidia-smi that prints `output`.
  fs::path fakeNvidiaSmiDir(const std::string& output) {
    const fs::path bin = dir_ / "fake-bin";
    fs::create_directories(bin);
    writeScript(bin / "nvidia-smi", "#!/bin/sh\nprintf '" + output + "'\n");
    return bin;
  }

  TempDir dir_{"flink-gpu-cli-test"};
};

TEST_F(FlinkGpuCliTest, PrintsOneLinePerGpu) {
  const CliRun run = runCli({"discover", "--discovery-script", twoGpus(), "--amount", "2"});
  EXPECT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, "GPU Device(0)\nGPU Device(1)\n") << run;
  EXPECT_EQ(run.err, "") << run;
}

TEST_F(FlinkGpuCliTest, PrintsJsonOnRequest) {
  const CliRun run =
      runCli({"discover", "--discovery-script", twoGpus(), "--amount", "2", "--format", "json"});
  ASSERT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, "{\"format\":1,\"gpu\":[{\"index\":\"0\"},{\"index\":\"1\"}]}\n") << run;
  const auto parsed = nlohmann::json::parse(run.out);
  ASSERT_EQ(parsed.at("gpu").size(), 2u);
  EXPECT_EQ(parsed["gpu"][1]["index"], "1");
}

TEST_F(FlinkGpuCliTest, RejectsAnUnknownFormat) {
  const CliRun run = runCli({"discover", "--discovery-script", twoGpus(), "--format", "yaml"});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_EQ(run.out, "") << run;
}

TEST_F(FlinkGpuCliTest, FailingScriptExitsOneWithItsMessage) {
  const std::string failing =
      script("failing.sh", "echo 'cannot reach the GPU daemon' >&2\nexit 1\n");
  const CliRun run = runCli({"discover", "--discovery-script", failing, "--amount", "2"});
  EXPECT_EQ(run.exitCode, 1) << run;
  EXPECT_EQ(run.out, "") << run;
  const std::string first = firstLine(run.err);
  EXPECT_TRUE(first.starts_with("flink-gpu: error: discovery failed:")) << run;
  EXPECT_NE(first.find("cannot reach the GPU daemon"), std::string::npos) << run;
}

TEST_F(FlinkGpuCliTest, AScriptThatExitsNonZeroIsOneLineThatLabelsWhatItPrinted) {
  // "exited with code 3: 0" read as if 0 were the cause: the code, then each stream by its name.
  const std::string zero = script("zero.sh", "echo 0\nexit 3\n");
  CliRun run = runCli({"discover", "--discovery-script", zero});
  EXPECT_EQ(run.exitCode, 1) << run;
  EXPECT_EQ(run.out, "") << run;
  EXPECT_EQ(run.err, "flink-gpu: error: discovery failed: the discovery script " + zero +
                         " exited with code 3; its stdout: '0'\n")
      << run;

  const std::string both = script("both.sh", "echo 0\necho 'no GPU daemon' >&2\nexit 3\n");
  run = runCli({"discover", "--discovery-script", both});
  EXPECT_EQ(run.err, "flink-gpu: error: discovery failed: the discovery script " + both +
                         " exited with code 3; its stdout: '0'; its stderr: 'no GPU daemon'\n")
      << run;

  const std::string silent = script("silent.sh", "exit 4\n");
  run = runCli({"discover", "--discovery-script", silent});
  EXPECT_EQ(run.err, "flink-gpu: error: discovery failed: the discovery script " + silent +
                         " exited with code 4 and printed nothing\n")
      << run;

  const std::string killed = script("killed.sh", "echo 'going' >&2\nkill -9 $$\n");
  run = runCli({"discover", "--discovery-script", killed});
  EXPECT_EQ(run.err, "flink-gpu: error: discovery failed: the discovery script " + killed +
                         " was killed by signal 9 (SIGKILL); its stderr: 'going'\n")
      << run;
}

TEST_F(FlinkGpuCliTest, AScriptThatPrintedMoreShowsItAfterTheFirstLine) {
  // The first line stands alone (-q keeps only it): each stream's first line, and how much more
  // follows; then the whole of that stream.
  const std::string more =
      script("more.sh", "echo 0\necho 'no GPU daemon' >&2\necho 'try later' >&2\nexit 3\n");
  CliRun run = runCli({"discover", "--discovery-script", more});
  EXPECT_EQ(
      linesOf(run.err),
      (std::vector<std::string>{"flink-gpu: error: discovery failed: the discovery script " + more +
                                    " exited with code 3; its stdout: '0'; its stderr: 'no "
                                    "GPU daemon' (and 1 more line below)",
                                "stderr:", "no GPU daemon", "try later"}))
      << run;
  run = runCli({"-q", "discover", "--discovery-script", more});
  EXPECT_EQ(linesOf(run.err).size(), 1u) << run;

  // A long output is cut, and says how much more there was.
  const std::string chatty =
      script("chatty.sh", "head -c 3000 /dev/zero | tr '\\0' x >&2\nexit 5\n");
  run = runCli({"discover", "--discovery-script", chatty});
  const std::vector<std::string> lines = linesOf(run.err);
  ASSERT_EQ(lines.size(), 4u) << run;
  EXPECT_EQ(lines[0], "flink-gpu: error: discovery failed: the discovery script " + chatty +
                          " exited with code 5; its stderr: '" + std::string(200, 'x') +
                          "... (2800 more bytes)' (more below)")
      << run;
  EXPECT_EQ(lines[2], std::string(2000, 'x')) << run;
  EXPECT_EQ(lines[3], "... (1000 more bytes)") << run;
}

TEST_F(FlinkGpuCliTest, ATimeoutThatIsNoDurationNamesTheOption) {
  // Not the configuration key it becomes (discovery-script.timeout), nor its "Invalid duration".
  CliRun run = runCli({"discover", "--discovery-script", twoGpus(), "--timeout", "5x"});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_EQ(run.err,
            "flink-gpu: error: invalid --timeout '5x': unknown time unit 'x' (use ms, s, min, h "
            "or d)\n")
      << run;
  run = runCli({"discover", "--discovery-script", twoGpus(), "--timeout", "0 s"});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_EQ(run.err, "flink-gpu: error: invalid --timeout '0 s': the time-out must be positive\n")
      << run;
  run = runCli({"discover", "--discovery-script", twoGpus(), "--timeout", "fast"});
  EXPECT_EQ(run.err,
            "flink-gpu: error: invalid --timeout 'fast': it does not start with a number\n")
      << run;
}

TEST_F(FlinkGpuCliTest, SlowScriptIsStoppedAtTheTimeout) {
  const std::string slow = script("slow.sh", "sleep 30\necho 0\n");
  const CliRun run = runCli({"discover", "--discovery-script", slow, "--timeout", "300ms"});
  EXPECT_EQ(run.exitCode, 1) << run;
  EXPECT_EQ(run.out, "") << run;
  EXPECT_TRUE(firstLine(run.err).starts_with("flink-gpu: error:")) << run;
  EXPECT_NE(run.err.find("did not finish within 300 ms"), std::string::npos) << run;
  EXPECT_LT(run.elapsed, 7s) << run;  // not the script's 30 s, nor the default limit of 10 s
}

TEST_F(FlinkGpuCliTest, NoDevicesFoundIsAFailure) {
  // What nvidia-smi prints, with exit code 0, on a host whose driver sees no GPU.
  const std::string none = script("none.sh", "echo 'No devices were found'\n");
  const CliRun run = runCli({"discover", "--discovery-script", none});
  EXPECT_EQ(run.exitCode, 1) << run;
  EXPECT_EQ(run.out, "") << run;
  EXPECT_TRUE(firstLine(run.err).starts_with("flink-gpu: error: discovery failed:")) << run;
  EXPECT_NE(firstLine(run.err).find("No devices were found"), std::string::npos) << run;
}

class FlinkGpuCliAmountTest : public FlinkGpuCliTest,
                              public ::testing::WithParamInterface<const char*> {};

TEST_P(FlinkGpuCliAmountTest, AmountThatIsNotPositiveIsAUsageError) {
  const CliRun run =
      runCli({"discover", "--discovery-script", recordingScript(), "--amount", GetParam()});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_EQ(run.out, "") << run;
  EXPECT_TRUE(firstLine(run.err).starts_with("flink-gpu: error:")) << run;
  EXPECT_FALSE(fs::exists(argsFile())) << "the script ran" << run;
}

/// gtest names may hold only letters, digits and underscores.
std::string amountName(const ::testing::TestParamInfo<const char*>& info) {
  const std::string amount = info.param;
  if (amount == "0") return "zero";
  if (amount == "-1") return "minus_one";
  if (amount == "99999999999999999999") return "overflow";
  if (amount == "0x2") return "hex";
  if (amount == "1e3") return "exponent";
  return amount;
}

INSTANTIATE_TEST_SUITE_P(Amounts, FlinkGpuCliAmountTest,
                         ::testing::Values("0", "-1", "two", "99999999999999999999", "0x2", "1e3"),
                         amountName);

TEST_F(FlinkGpuCliTest, MissingScriptIsAUsageErrorNamingThePath) {
  const std::string missing = (dir_ / "does-not-exist.sh").string();
  const CliRun run = runCli({"discover", "--discovery-script", missing});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_EQ(run.out, "") << run;
  EXPECT_TRUE(firstLine(run.err).starts_with("flink-gpu: error:")) << run;
  EXPECT_NE(firstLine(run.err).find(missing), std::string::npos) << run;
}

TEST_F(FlinkGpuCliTest, BlankScriptPathIsAUsageErrorNamingTheKey) {
  const CliRun run = runCli({"discover", "--discovery-script", "  "});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_EQ(run.out, "") << run;
  EXPECT_NE(run.err.find("discovery-script.path"), std::string::npos) << run;
}

TEST_F(FlinkGpuCliTest, NonExecutableScriptIsAUsageError) {
  const std::string plain = writeScript(dir_ / "plain.sh", "#!/bin/sh\necho 0\n",
                                        fs::perms::owner_read | fs::perms::owner_write)
                                .string();
  const CliRun run = runCli({"discover", "--discovery-script", plain});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_EQ(run.out, "") << run;
  EXPECT_NE(firstLine(run.err).find(plain), std::string::npos) << run;
}

TEST_F(FlinkGpuCliTest, UnreadableTimeoutIsAUsageError) {
  const CliRun run = runCli({"discover", "--discovery-script", twoGpus(), "--timeout", "abc"});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_EQ(run.out, "") << run;
  EXPECT_NE(firstLine(run.err).find("abc"), std::string::npos) << run;
}

TEST_F(FlinkGpuCliTest, UnknownOptionIsAUsageError) {
  const CliRun run = runCli({"discover", "--discovery-script", twoGpus(), "--bogus"});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_EQ(run.out, "") << run;
  EXPECT_NE(firstLine(run.err).find("--bogus"), std::string::npos) << run;
}

TEST_F(FlinkGpuCliTest, MissingSubcommandIsAUsageError) {
  const CliRun run = runCli({});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_EQ(run.out, "") << run;
  EXPECT_TRUE(firstLine(run.err).starts_with("flink-gpu: error:")) << run;
}

TEST_F(FlinkGpuCliTest, DiscoveryArgsReachTheScriptSplitOnWhitespace) {
  const CliRun run =
      runCli({"discover", "--discovery-script", recordingScript(), "--discovery-args", "a  b"});
  ASSERT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(readLines(argsFile()), (std::vector<std::string>{"1", "a", "b"}));
}

TEST_F(FlinkGpuCliTest, WithoutDiscoveryArgsTheScriptGetsNull) {
  // As Flink does: it formats the unset option into the command line as "null".
  const CliRun run = runCli({"discover", "--discovery-script", recordingScript()});
  ASSERT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(readLines(argsFile()), (std::vector<std::string>{"1", "null"}));
}

TEST_F(FlinkGpuCliTest, MigIsPassedToTheScriptAfterItsArguments) {
  CliRun run = runCli({"discover", "--discovery-script", recordingScript(), "--mig"});
  ASSERT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(readLines(argsFile()), (std::vector<std::string>{"1", "--mig"}));

  run = runCli(
      {"discover", "--discovery-script", recordingScript(), "--discovery-args", "a", "--mig"});
  ASSERT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(readLines(argsFile()), (std::vector<std::string>{"1", "a", "--mig"}));
}

TEST_F(FlinkGpuCliTest, RelativeScriptIsFoundUnderFlinkHome) {
  twoGpus();
  const CliRun run = runCli({"discover", "--discovery-script", "two-gpus.sh", "--amount", "2"},
                            {"FLINK_HOME=" + dir_.path().string()});
  EXPECT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, "GPU Device(0)\nGPU Device(1)\n") << run;
}

TEST_F(FlinkGpuCliTest, HelpMentionsDiscover) {
  const CliRun run = runCli({"--help"});
  EXPECT_EQ(run.exitCode, 0) << run;
  EXPECT_NE(run.out.find("discover"), std::string::npos) << run;
}

TEST_F(FlinkGpuCliTest, VersionIsTheProjectVersion) {
  const CliRun run = runCli({"--version"});
  EXPECT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, std::string("flink-gpu ") + FLINK_GPU_EXPECTED_VERSION + "\n") << run;
}

TEST_F(FlinkGpuCliTest, QuietFailurePrintsOneLine) {
  // The driver's message has several lines (the script's stdout and stderr); -q keeps the first.
  const std::string failing = script("failing.sh",
                                     "echo 'first problem' >&2\n"
                                     "echo 'second problem' >&2\nexit 1\n");
  const CliRun run = runCli({"-q", "discover", "--discovery-script", failing});
  EXPECT_EQ(run.exitCode, 1) << run;
  EXPECT_EQ(run.out, "") << run;
  ASSERT_EQ(linesOf(run.err).size(), 1u) << run;
  EXPECT_TRUE(run.err.starts_with("flink-gpu: error:")) << run;
}

TEST_F(FlinkGpuCliTest, QuietAndVerboseMayFollowTheSubcommand) {
  const std::string failing = script("failing.sh", "echo one >&2\necho two >&2\nexit 1\n");
  const CliRun quiet = runCli({"discover", "-q", "--discovery-script", failing});
  EXPECT_EQ(quiet.exitCode, 1) << quiet;
  EXPECT_EQ(linesOf(quiet.err).size(), 1u) << quiet;
  const CliRun verbose = runCli({"discover", "--discovery-script", twoGpus(), "-v"});
  EXPECT_EQ(verbose.exitCode, 0) << verbose;
  EXPECT_NE(verbose.err.find("Discovered GPU resources"), std::string::npos) << verbose;
}

TEST_F(FlinkGpuCliTest, BadAmountIsReportedBeforeTheScriptIsLookedAt) {
  const CliRun run = runCli({"discover", "--discovery-script", "/nonexistent.sh", "--amount", "0"});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_NE(firstLine(run.err).find("--amount '0'"), std::string::npos) << run;
}

TEST_F(FlinkGpuCliTest, FewerGpusThanAskedIsAWarning) {
  const CliRun run = runCli({"discover", "--discovery-script", twoGpus(), "--amount", "3"});
  EXPECT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, "GPU Device(0)\nGPU Device(1)\n") << run;
  EXPECT_TRUE(hasLineStartingWith(run.err, "flink-gpu: warning:")) << run;
}

/// The nvidia-gpu-discovery.sh that flink-gpu runs by default: the build tree keeps it where an
/// install does, <prefix>/plugins/external-resource-gpu/ beside <prefix>/bin/flink-gpu.
fs::path defaultScriptBesideCli() {
  return fs::path(kCli).parent_path().parent_path() /
         "plugins/external-resource-gpu/nvidia-gpu-discovery.sh";
}

TEST_F(FlinkGpuCliTest, DefaultScriptAsksNvidiaSmi) {
  ASSERT_TRUE(fs::exists(defaultScriptBesideCli())) << defaultScriptBesideCli();
  const fs::path fakeBin = fakeNvidiaSmiDir("0\\n1\\n2\\n");
  const CliRun run =
      runCli({"discover", "--amount", "1"}, {"PATH=" + fakeBin.string() + ":/usr/bin:/bin"});
  EXPECT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, "GPU Device(0)\n") << run;
}

TEST_F(FlinkGpuCliTest, DefaultScriptWithoutNvidiaSmiGivesAHint) {
  ASSERT_TRUE(fs::exists(defaultScriptBesideCli())) << defaultScriptBesideCli();
  // The discovery also looks in the usual install folders, whatever PATH says.
  for (const char* folder : {"/usr/bin", "/usr/local/bin", "/usr/local/nvidia/bin",
                             "/usr/lib/wsl/lib", "/opt/nvidia/bin"}) {
    if (fs::exists(fs::path(folder) / "nvidia-smi")) GTEST_SKIP() << "this host has nvidia-smi";
  }
  // A PATH with nothing but bash (the script's `#!/usr/bin/env bash` needs it), so that no
  // nvidia-smi of the host, on a GPU machine, can be found.
  const fs::path bashOnly = dir_ / "bash-only";
  fs::create_directories(bashOnly);
  const fs::path bash = fs::exists("/bin/bash") ? "/bin/bash" : "/usr/bin/bash";
  fs::create_symlink(bash, bashOnly / "bash");

  const CliRun run = runCli({"discover", "--amount", "1"}, {"PATH=" + bashOnly.string()});
  EXPECT_EQ(run.exitCode, 1) << run;
  EXPECT_EQ(run.out, "") << run;
  const std::vector<std::string> lines = linesOf(run.err);
  ASSERT_FALSE(lines.empty()) << run;
  EXPECT_TRUE(lines.front().starts_with("flink-gpu: error:")) << run;
  EXPECT_NE(lines.front().find("nvidia-smi was not found"), std::string::npos) << run;
  EXPECT_TRUE(hasLineStartingWith(run.err, "hint:")) << run;
}

TEST_F(FlinkGpuCliTest, KillingFlinkGpuEndsTheScriptItRuns) {
  const fs::path pidFile = dir_ / "pids";
  const std::string hanging =
      script("hanging.sh", "sleep 300 &\necho $! >> '" + pidFile.string() + "'\necho $$ >> '" +
                               pidFile.string() + "'\nwait\n");
  for (int signal : {SIGTERM, SIGINT}) {
    fs::remove(pidFile);
    std::vector<std::string> args{kCli,    "discover",  "--discovery-script",
                                  hanging, "--timeout", "60 s"};
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    sigset_t defaults;
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGINT);  // a test runner may start us with SIGINT ignored
    posix_spawnattr_setsigdefault(&attributes, &defaults);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF);
    pid_t cli = 0;
    ASSERT_EQ(posix_spawn(&cli, kCli, nullptr, &attributes, argv.data(), environ), 0);
    posix_spawnattr_destroy(&attributes);

    const auto lines = flink::testing::waitForLines(pidFile, 2, 10s);
    ASSERT_EQ(lines.size(), 2u) << "the script did not start";
    ::kill(cli, signal);
    int status = 0;
    ::waitpid(cli, &status, 0);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == signal) << status;
    std::vector<pid_t> pids;
    for (const auto& line : lines) pids.push_back(static_cast<pid_t>(std::stol(line)));
    EXPECT_EQ(flink::testing::waitUntilGone(pids, 5s), std::vector<pid_t>{})
        << "the script outlived flink-gpu (signal " << signal << ")";
  }
}

TEST_F(FlinkGpuCliTest, HelpAndVersionThatCannotBeWrittenSayWhy) {
  // stdout on /dev/full: --version is written and flushed at once (std::endl), --help too.
  for (const char* args : {"--version", "--help", "status --help", "help exec"}) {
    flink::process::RunOptions options;
    options.timeout = 30s;
    const auto result = flink::process::run(
        {"/bin/sh", "-c", std::string("exec '") + kCli + "' " + args + " > /dev/full"}, options);
    EXPECT_EQ(result.outcome, flink::process::ProcessOutcome::exited(1)) << args;
    EXPECT_EQ(result.stderrOutput.data,
              "flink-gpu: error: cannot write the result to standard output: No space left on "
              "device\n")
        << args;
  }
}

TEST_F(FlinkGpuCliTest, AResultThatCannotBeWrittenIsNoSuccess) {
  // stdout on /dev/full: every write fails with ENOSPC.
  flink::process::RunOptions options;
  options.timeout = 30s;
  const auto result =
      flink::process::run({"/bin/sh", "-c",
                           std::string("exec '") + kCli + "' discover --discovery-script '" +
                               twoGpus() + "' > /dev/full"},
                          options);
  EXPECT_EQ(result.outcome, flink::process::ProcessOutcome::exited(1));
  EXPECT_NE(result.stderrOutput.data.find("cannot write the result"), std::string::npos)
      << result.stderrOutput.data;
}

}  // namespace
