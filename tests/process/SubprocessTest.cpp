// The process layer: outcomes, both streams drained and bounded, time-outs that end the whole
// process group, background children that cannot hold the caller, and no descriptor or process
// leaked. Every test runs twice: exit noticed through a pidfd, and through the waitid fallback.
#include "process/Subprocess.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "TestSupport.h"

namespace flink::process {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::readLines;
using testing::TempDir;
using testing::waitForLines;
using testing::waitUntilGone;
using testing::writeScript;

std::vector<pid_t> toPids(const std::vector<std::string>& lines) {
  std::vector<pid_t> pids;
  for (const auto& line : lines) pids.push_back(static_cast<pid_t>(std::stol(line)));
  return pids;
}

class SubprocessTest : public ::testing::TestWithParam<bool> {
 protected:
  RunOptions options(std::chrono::milliseconds timeout = 10s) const {
    RunOptions o;
    o.timeout = timeout;
    o.usePidfd = GetParam();
    return o;
  }
  ProcessResult runScript(const std::string& body, RunOptions o) {
    const auto script = writeScript(dir_ / "script.sh", "#!/bin/sh\n" + body);
    return run({script.string()}, o);
  }
  TempDir dir_;
};

TEST_P(SubprocessTest, CapturesBothStreamsAndTheExitCode) {
  const ProcessResult result = runScript("echo out; echo err >&2; exit 3\n", options());
  EXPECT_EQ(result.outcome, ProcessOutcome::exited(3));
  EXPECT_EQ(result.outcome.toString(), "exited with code 3");
  EXPECT_EQ(result.stdoutOutput.data, "out\n");
  EXPECT_EQ(result.stderrOutput.data, "err\n");
  EXPECT_FALSE(result.outcome.succeeded());
}

TEST_P(SubprocessTest, AnEndlessTimeOutDoesNotWrapIntoThePast) {
  // "Forever", as a user may write it: the deadline saturates instead of overflowing, which
  // would end the process at once and call it a time-out.
  for (const auto timeout : {std::chrono::milliseconds::max(), std::chrono::milliseconds(1LL << 62),
                             std::chrono::milliseconds(9'300'000'000'000LL)}) {
    RunOptions endless = options();
    endless.timeout = timeout;
    const ProcessResult result = runScript("sleep 0.05; echo done\n", endless);
    EXPECT_EQ(result.outcome, ProcessOutcome::exited(0)) << timeout.count();
    EXPECT_EQ(result.stdoutOutput.data, "done\n");
  }
}

TEST_P(SubprocessTest, PassesArgvUnchangedWithoutAShell) {
  const auto script = writeScript(dir_ / "dir with space" / "args.sh",
                                  "#!/bin/sh\nfor a in \"$@\"; do echo \"[$a]\"; done\n");
  const ProcessResult result =
      run({script.string(), "2", "two words", "$HOME", "*", ";echo hi"}, options());
  EXPECT_TRUE(result.outcome.succeeded());
  EXPECT_EQ(result.stdoutOutput.data, "[2]\n[two words]\n[$HOME]\n[*]\n[;echo hi]\n");
}

TEST_P(SubprocessTest, ReportsDeathBySignal) {
  const ProcessResult result = runScript("kill -9 $$\n", options());
  EXPECT_EQ(result.outcome, ProcessOutcome::signaled(SIGKILL));
  EXPECT_EQ(result.outcome.toString(), "was killed by signal 9 (SIGKILL)");
  // The signal's own words, for messages that say "killed by" their own way.
  EXPECT_EQ(ProcessOutcome::describeSignal(SIGKILL), "signal 9 (SIGKILL)");
}

TEST_P(SubprocessTest, DrainsMegabytesOnBothStreamsAndKeepsABoundedAmount) {
  RunOptions o = options(20s);
  o.maxCapturedBytes = 1 << 20;
  const auto start = Clock::now();
  const ProcessResult result = runScript(
      "head -c 4194304 /dev/zero | tr '\\0' e >&2\n"
      "echo 0,1\n"
      "head -c 4194304 /dev/zero | tr '\\0' o\n"
      "head -c 4194304 /dev/zero | tr '\\0' e >&2\n",
      o);
  EXPECT_LT(Clock::now() - start, 5s);
  EXPECT_TRUE(result.outcome.succeeded()) << result.outcome.toString();
  EXPECT_EQ(result.stdoutOutput.data.size(), std::size_t{1} << 20);
  EXPECT_EQ(result.stdoutOutput.discardedBytes, 4u + 4194304u - (1u << 20));
  EXPECT_EQ(result.stdoutOutput.data.substr(0, 5), "0,1\no");
  EXPECT_EQ(result.stderrOutput.data.size(), std::size_t{1} << 20);
  EXPECT_EQ(result.stderrOutput.discardedBytes, 2 * 4194304u - (1u << 20));
}

TEST_P(SubprocessTest, TimeOutKillsTheWholeGroupIncludingChildrenThatIgnoreSigterm) {
  const auto pidFile = dir_ / "pids";
  const auto start = Clock::now();
  const ProcessResult result =
      runScript("sleep 300 &\necho $! >> " + pidFile.string() + "\n" +
                    "sh -c 'trap \"\" TERM; echo $$ >> " + pidFile.string() +
                    "; while :; do sleep 1; done' &\n"
                    "echo $$ >> " +
                    pidFile.string() +
                    "\n"
                    "echo started; wait\n",
                // Time enough for the shells to have written their pids (the inner one, killed
                // before its trap and its echo, would never write it) on a slow machine.
                options(3s));
  const auto elapsed = Clock::now() - start;
  EXPECT_EQ(result.outcome, ProcessOutcome::timedOut());
  EXPECT_EQ(result.outcome.toString(), "timed out");
  EXPECT_GE(elapsed, 3s);
  // Not held up by the children (300 s, or forever for the one that ignores SIGTERM): time-out +
  // grace + a slow machine's scheduling.
  EXPECT_LT(elapsed, 3s + 5s);
  EXPECT_EQ(result.stdoutOutput.data, "started\n");
  const auto pids = toPids(readLines(pidFile));
  ASSERT_EQ(pids.size(), 3u);
  EXPECT_EQ(waitUntilGone(pids, 2s), std::vector<pid_t>{});
}

TEST_P(SubprocessTest, ABackgroundChildHoldingStdoutDoesNotHoldTheCall) {
  const auto pidFile = dir_ / "pids";
  const auto start = Clock::now();
  const ProcessResult result =
      runScript("sleep 60 &\necho $! > " + pidFile.string() + "\necho 0,1\nexit 0\n", options());
  EXPECT_LT(Clock::now() - start, 2s);
  EXPECT_TRUE(result.outcome.succeeded());
  EXPECT_EQ(result.stdoutOutput.data, "0,1\n");
  const auto pids = toPids(readLines(pidFile));
  ASSERT_EQ(pids.size(), 1u);
  EXPECT_EQ(waitUntilGone(pids, 2s), std::vector<pid_t>{});  // the rest of the group is killed
}

TEST_P(SubprocessTest, ABackgroundChildWithoutThePipesIsKilledToo) {
  const auto pidFile = dir_ / "pids";
  const ProcessResult result = runScript(
      "sleep 60 >/dev/null 2>&1 &\necho $! > " + pidFile.string() + "\necho 0\n", options());
  EXPECT_TRUE(result.outcome.succeeded());
  const auto pids = toPids(readLines(pidFile));
  ASSERT_EQ(pids.size(), 1u);
  EXPECT_EQ(waitUntilGone(pids, 2s), std::vector<pid_t>{});
}

TEST_P(SubprocessTest, StdinIsDevNullAndNoHostDescriptorReachesTheChild) {
  // A descriptor opened without O_CLOEXEC, as a careless library in the host might.
  const int leaky = ::open("/dev/null", O_RDONLY);
  ASSERT_GE(leaky, 3);
  const auto report = dir_ / "report";
  const ProcessResult result =
      runScript("readlink /proc/$$/fd/0 > " + report.string() + "\n" + "if [ -e /proc/$$/fd/" +
                    std::to_string(leaky) + " ]; then echo leaked >> " + report.string() +
                    "; fi\n" + "cat\n",  // would block forever on an inherited terminal or pipe
                options(5s));
  ::close(leaky);
  EXPECT_TRUE(result.outcome.succeeded()) << result.outcome.toString();
  EXPECT_EQ(readLines(report), std::vector<std::string>{"/dev/null"});
}

TEST_P(SubprocessTest, LeavesNoDescriptorAndNoChildBehind) {
  const std::size_t before = testing::openDescriptorCount();
  for (int i = 0; i < 20; ++i) runScript("echo 0\n", options());
  runScript("sleep 10\n", options(50ms));
  runScript("sleep 10 & echo 0\n", options());
  EXPECT_EQ(testing::openDescriptorCount(), before);
  EXPECT_FALSE(testing::hasChildren());
}

TEST_P(SubprocessTest, SignalsToTheCallingThreadDoNotBreakTheRun) {
  struct sigaction action {};
  action.sa_handler = [](int) {};
  action.sa_flags = 0;  // no SA_RESTART: poll and read see EINTR
  struct sigaction previous {};
  ASSERT_EQ(::sigaction(SIGUSR1, &action, &previous), 0);

  std::atomic<bool> done{false};
  const pthread_t target = ::pthread_self();
  std::thread interrupter([&] {
    while (!done) {
      ::pthread_kill(target, SIGUSR1);
      std::this_thread::sleep_for(1ms);
    }
  });
  const auto start = Clock::now();
  const ProcessResult result = runScript("sleep 0.3; echo 0,1\n", options());
  const auto elapsed = Clock::now() - start;
  const ProcessResult timedOut = runScript("sleep 10\n", options(300ms));
  done = true;
  interrupter.join();
  ::sigaction(SIGUSR1, &previous, nullptr);

  EXPECT_TRUE(result.outcome.succeeded());
  EXPECT_EQ(result.stdoutOutput.data, "0,1\n");
  EXPECT_LT(elapsed, 5s);  // the exit is seen between signals, not at the 10 s deadline
  EXPECT_EQ(timedOut.outcome, ProcessOutcome::timedOut());
}

TEST_P(SubprocessTest, ScriptThatClosesItsStreamsEarlyIsStillWaitedFor) {
  const ProcessResult result =
      runScript("echo 0; exec >/dev/null 2>&1; sleep 0.3; exit 4\n", options());
  EXPECT_EQ(result.outcome, ProcessOutcome::exited(4));
  EXPECT_EQ(result.stdoutOutput.data, "0\n");
}

TEST_P(SubprocessTest, RunsInItsOwnProcessGroupUnlessToldToStayInOurs) {
  const std::string body = "cut -d' ' -f5 /proc/$$/stat\n";
  RunOptions own = options();
  const ProcessResult separate = runScript(body, own);
  RunOptions shared = options();
  shared.newProcessGroup = false;
  const ProcessResult same = runScript(body, shared);
  EXPECT_NE(separate.stdoutOutput.data, std::to_string(::getpgrp()) + "\n");
  EXPECT_EQ(same.stdoutOutput.data, std::to_string(::getpgrp()) + "\n");
  // A time-out still ends the program itself.
  shared.timeout = 200ms;
  EXPECT_EQ(runScript("exec sleep 10\n", shared).outcome, ProcessOutcome::timedOut());
}

INSTANTIATE_TEST_SUITE_P(ExitWatch, SubprocessTest, ::testing::Values(true, false),
                         [](const auto& param) { return param.param ? "Pidfd" : "WaitidPolling"; });

TEST(SubprocessSpawnTest, AMissingProgramIsASpawnErrorNotAnExitCode) {
  try {
    run({"/nonexistent/discover.sh", "1"}, RunOptions{});
    FAIL();
  } catch (const SpawnError& e) {
    EXPECT_EQ(e.code(), std::errc::no_such_file_or_directory);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/discover.sh"), std::string::npos);
  }
  EXPECT_FALSE(testing::hasChildren());
}

TEST(SubprocessSpawnTest, AScriptWithoutAnInterpreterLineIsReported) {
  TempDir dir;
  const auto script = writeScript(dir / "no-shebang.sh", "echo 0\n");
  try {
    run({script.string()}, RunOptions{});
    FAIL();
  } catch (const SpawnError& e) {
    EXPECT_EQ(e.code().value(), ENOEXEC);
    EXPECT_NE(std::string(e.what()).find("#!"), std::string::npos) << e.what();
  }
}

TEST(SubprocessSpawnTest, AMissingInterpreterIsNamedAndTheErrorSaidOnce) {
  TempDir dir;
  const auto script = writeScript(dir / "bad-interpreter.sh", "#!/nonexistent/interp\necho 0\n");
  try {
    run({script.string()}, RunOptions{});
    FAIL();
  } catch (const SpawnError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what, "cannot start " + script.string() +
                        " (the interpreter its #! line names does not exist?): No such file or "
                        "directory");
  }
}

TEST(SubprocessSpawnTest, ArgvMustStartWithAnAbsolutePath) {
  EXPECT_THROW(run({}, RunOptions{}), std::invalid_argument);
  EXPECT_THROW(run({"sh", "-c", "true"}, RunOptions{}), std::invalid_argument);
}

}  // namespace
}  // namespace flink::process
