// GPU health from the outside: the real flink-gpu (watch, drain, undrain, check, status) and the
// default discovery beside it, on the stand-in libnvidia-ml.so.1 of tests/fixtures/nvml, whose
// host description plays events (Xids, double-bit ECC errors, wait errors) at given times after
// the watch's first wait, and the answers of row remapping, retired pages and persistence mode.
// Waits are for what a process wrote (a log line, a record), never for a fixed time.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "CliRun.h"
#include "TestSupport.h"
#include "process/FileDescriptor.h"
#include "process/Subprocess.h"
#include "util/Strings.h"

namespace health_cli_test {

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using flink::testing::Background;
using flink::testing::CliRun;
using flink::testing::firstLine;
using flink::testing::kCli;
using flink::testing::linesOf;
using flink::testing::readFile;
using flink::testing::runCli;
using flink::testing::TempDir;
using flink::testing::writeScript;

using flink::testing::contains;

/// Polls `path` until `done` says yes to what it holds, or 20 s pass (a failure then, not a
/// timing claim).
bool waitFor(const fs::path& path, const std::function<bool(const std::string&)>& done) {
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < deadline) {
    std::error_code error;
    if (fs::exists(path, error) && done(readFile(path))) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

/// Polls `path` until it holds `text`, or 20 s pass.
bool waitForText(const fs::path& path, std::string_view text) {
  return waitFor(path, [&](const std::string& held) { return contains(held, text); });
}

std::string uuidOf(unsigned index) {
  return "GPU-" + std::to_string(index) + "0000000-0000-4000-8000-00000000000" +
         std::to_string(index);
}

constexpr const char* kMigA = "MIG-aa000000-0000-4000-8000-000000000001";
constexpr const char* kMigB = "MIG-bb000000-0000-4000-8000-000000000002";

class HealthCliTest : public ::testing::Test {
 protected:
  /// A host of `count` H200s; `gpuExtra[i]` adds members to GPU i's object, `events` is the
  /// host's "events" array.
  void host(unsigned count, const std::vector<std::string>& gpuExtra = {},
            const std::string& events = "[]") {
    std::string devices;
    for (unsigned i = 0; i < count; ++i) {
      if (!devices.empty()) devices += ",\n";
      devices += R"({"uuid": ")" + uuidOf(i) + R"(", "name": "NVIDIA H200", "mig_enabled": false)";
      if (i < gpuExtra.size() && !gpuExtra[i].empty()) devices += ", " + gpuExtra[i];
      devices += "}";
    }
    std::ofstream(dir_ / "host.json", std::ios::trunc)
        << R"({"devices": [)" << devices << R"(], "events": )" << events << "}";
  }

  std::vector<std::string> environment(const char* library = FAKE_NVML_FULL) const {
    return {std::string("FLINK_GPU_NVML_LIBRARY=") + library,
            "FAKE_NVML_DEVICES=" + (dir_ / "host.json").string(), "PATH=/usr/bin:/bin"};
  }

  std::string coordinationFile() const { return (dir_ / "coordination").string(); }
  fs::path healthFile() const { return dir_ / "coordination.health"; }

  /// Grows `path` one byte past the size any file of the store may have (4 MiB).
  static void tooBig(const fs::path& path) {
    std::ofstream out(path, std::ios::trunc);
    out << std::string((4u << 20) + 1, '#');
  }
  fs::path watchLog() const { return dir_ / "watch.log"; }

  /// `flink-gpu <command> --coordination-file F <args...>`.
  CliRun cli(std::vector<std::string> args) const {
    args.insert(args.begin() + 1, {"--coordination-file", coordinationFile()});
    return runCli(args, environment());
  }

  /// `flink-gpu watch` in the background, once it has said what it watches and, its start-up's
  /// last line, which verdicts it re-admits; `extra`: more "NAME=value" of its environment.
  std::unique_ptr<Background> startWatch(const std::vector<std::string>& options = {},
                                         const char* library = FAKE_NVML_FULL,
                                         const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> args{"/usr/bin/env"};
    for (const std::string& variable : environment(library)) args.push_back(variable);
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {kCli, "watch", "--coordination-file", coordinationFile()});
    args.insert(args.end(), options.begin(), options.end());
    auto watch = std::make_unique<Background>(args, watchLog());
    // Waiting for the first line alone, a test that read the second at once found it missing
    // (under ASan+UBSan, on a loaded machine).
    EXPECT_TRUE(waitFor(watchLog(), [](const std::string& log) {
      return contains(log, "flink-gpu watch: watching") &&
             (contains(log, "flink-gpu watch: re-admits") ||
              contains(log, "flink-gpu watch: --readmit never"));
    })) << readFile(watchLog());
    return watch;
  }

  /// Waits until watch has said it re-admitted GPU `gpu`, which it says after it wrote the record
  /// (a test that waited for the record alone once read the log before the line, under
  /// ASan+UBSan in make test); then the record is there.
  bool waitForReadmission(const std::string& gpu) const {
    return waitForText(watchLog(), "re-admitted GPU " + gpu + " (readmitted, source=watch)") &&
           contains(readFile(healthFile()), "readmitted\tgpu=" + gpu + "\t");
  }

  /// The default discovery program itself, plain mode, for `amount` GPUs.
  CliRun discover(unsigned amount, const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> argv{"/usr/bin/env"};
    for (const std::string& variable : environment()) argv.push_back(variable);
    argv.insert(argv.end(), {FLINK_GPU_DISCOVERY, std::to_string(amount), "--coordination-file",
                             coordinationFile()});
    argv.insert(argv.end(), extra.begin(), extra.end());
    return flink::testing::runProgram(argv);
  }

  TempDir dir_{"flink-gpu-health-cli-test"};
};

// --- watch ------------------------------------------------------------------------------------

TEST_F(HealthCliTest, Xid79UnderWatchTakesTheGpuOutOfDiscoveryStatusAndCheck) {
  host(3, {}, R"([{"after_ms": 100, "gpu": 1, "xid": 79}])");
  ASSERT_EQ(discover(3).out, "0,1,2\n");
  auto watch = startWatch();
  ASSERT_TRUE(waitForText(healthFile(), "xid=79")) << readFile(watchLog());
  EXPECT_TRUE(contains(readFile(watchLog()), "GPU 1 is unhealthy: Xid 79")) << readFile(watchLog());
  const std::string record = readFile(healthFile());
  EXPECT_TRUE(contains(record, "unhealthy\tgpu=1\tuuid=" + uuidOf(1) + "\tsince=")) << record;
  EXPECT_TRUE(contains(record, "source=watch")) << record;
  EXPECT_TRUE(contains(record, "GPU has fallen off the bus")) << record;

  // The next discovery skips GPU 1, and says so.
  const CliRun two = discover(2);
  EXPECT_EQ(two.exitCode, 0) << two;
  EXPECT_EQ(two.out, "0,2\n") << two;
  EXPECT_TRUE(contains(two.err, "note: GPU 1 is not handed out: unhealthy since ")) << two;
  EXPECT_TRUE(contains(two.err, "Xid 79")) << two;
  const CliRun three = discover(3);
  EXPECT_EQ(three.exitCode, 1) << three;
  // In coordination mode too, and through exec.
  const CliRun coordinated =
      discover(2, {"--enable-coordination-mode", "--owner-pid", std::to_string(::getpid())});
  EXPECT_EQ(coordinated.out, "0,2\n") << coordinated;
  const CliRun exec = cli({"exec", "-n", "3", "--", "/bin/sh", "-c", "echo $CUDA_VISIBLE_DEVICES"});
  EXPECT_EQ(exec.exitCode, 1) << exec;
  // --health warn hands it out with a warning; ignore does not look.
  const CliRun warned = discover(3, {"--health", "warn"});
  EXPECT_EQ(warned.out, "0,1,2\n") << warned;
  EXPECT_TRUE(contains(warned.err, "warning: GPU 1 is unhealthy, handed out anyway")) << warned;
  const CliRun ignored = discover(3, {"--health", "ignore"});
  EXPECT_EQ(ignored.out, "0,1,2\n") << ignored;
  EXPECT_FALSE(contains(ignored.err, "GPU 1")) << ignored;

  const CliRun status = cli({"status"});
  EXPECT_EQ(status.exitCode, 0) << status;
  bool shown = false;
  for (const std::string& line : linesOf(status.out)) {
    if (line.starts_with("1  ") && contains(line, "unhealthy") && contains(line, "Xid 79")) {
      shown = true;
    }
  }
  EXPECT_TRUE(shown) << status;
  const auto json = nlohmann::json::parse(cli({"status", "--format", "json"}).out);
  EXPECT_EQ(json.at("gpus").at(1).at("state"), "unhealthy");
  EXPECT_EQ(json.at("gpus").at(1).at("health").at("last_xid"), 79);
  // The coordinated discovery above took GPUs 0 and 2 for this test's process.
  EXPECT_EQ(json.at("gpus").at(0).at("state"), "held");
  EXPECT_EQ(json.at("gpus").at(0).at("holders").at(0).at("owner_pid"), ::getpid());

  const CliRun check = cli({"check", "--expect", "3"});
  EXPECT_EQ(check.exitCode, 1) << check;
  ASSERT_FALSE(check.out.empty()) << check;
  EXPECT_TRUE(contains(linesOf(check.out).front(), "GPU 1 (" + uuidOf(1) + "): unhealthy"))
      << check;

  ::kill(watch->pid(), SIGTERM);
  EXPECT_EQ(watch->waitForExit(20s), 0) << readFile(watchLog());
}

TEST_F(HealthCliTest, AnXidThatApplicationsCauseChangesNothing) {
  host(2, {}, R"([{"after_ms": 50, "gpu": 1, "xid": 13}, {"after_ms": 60, "gpu": 1, "xid": 43}])");
  auto watch = startWatch();
  ASSERT_TRUE(waitForText(watchLog(), "Xid 43 on GPU 1 ignored")) << readFile(watchLog());
  EXPECT_TRUE(contains(readFile(watchLog()), "Xid 13 on GPU 1 ignored")) << readFile(watchLog());
  EXPECT_FALSE(fs::exists(healthFile())) << readFile(healthFile());
  EXPECT_EQ(discover(2).out, "0,1\n");
  const CliRun check = cli({"check", "--expect", "2"});
  EXPECT_EQ(check.exitCode, 0) << check;
}

TEST_F(HealthCliTest, XidListsReplaceTheDefaults) {
  // --ignore-xids 79 makes 79 harmless and 13 critical.
  host(2, {}, R"([{"after_ms": 50, "gpu": 0, "xid": 79}, {"after_ms": 60, "gpu": 1, "xid": 13}])");
  {
    auto watch = startWatch({"--ignore-xids", "79"});
    ASSERT_TRUE(waitForText(healthFile(), "xid=13")) << readFile(watchLog());
    EXPECT_FALSE(contains(readFile(healthFile()), "gpu=0")) << readFile(healthFile());
  }
  fs::remove(healthFile());
  // --critical-xids 48: only 48 counts.
  host(2, {}, R"([{"after_ms": 50, "gpu": 0, "xid": 79}, {"after_ms": 60, "gpu": 1, "xid": 48}])");
  auto watch = startWatch({"--critical-xids", "48"});
  ASSERT_TRUE(waitForText(healthFile(), "xid=48")) << readFile(watchLog());
  EXPECT_FALSE(contains(readFile(healthFile()), "gpu=0")) << readFile(healthFile());
  const CliRun bad = cli({"watch", "--critical-xids", "4x"});
  EXPECT_EQ(bad.exitCode, 2) << bad;
}

TEST_F(HealthCliTest, DoubleBitEccAndALostGpuFromTheWaitAreVerdicts) {
  host(3, {},
       R"([{"after_ms": 50, "gpu": 0, "error": 999}, {"after_ms": 60, "gpu": 2, "error": 15},
           {"after_ms": 70, "gpu": 1, "type": "double_bit_ecc"}])");
  auto watch = startWatch();
  ASSERT_TRUE(waitForText(healthFile(), "double-bit ECC")) << readFile(watchLog());
  const std::string log = readFile(watchLog());
  // An unknown error is retried, not a crash.
  EXPECT_TRUE(contains(log, "warning: nvmlEventSetWait_v2 failed: Unknown Error")) << log;
  EXPECT_TRUE(contains(log, "waiting again in")) << log;
  const std::string records = readFile(healthFile());
  EXPECT_TRUE(contains(records, "unhealthy\tgpu=2\tuuid=" + uuidOf(2))) << records;
  EXPECT_TRUE(contains(records, "GPU is lost")) << records;
  EXPECT_FALSE(contains(records, "gpu=0")) << records;
  EXPECT_EQ(discover(1).out, "0\n");
  EXPECT_EQ(discover(2).exitCode, 1);
}

TEST_F(HealthCliTest, AnXidOfAMigInstanceTakesOutThatInstanceAlone) {
  // GPU 1 in MIG mode with two instances; NVML attributes the Xid to GPU instance 2.
  std::ofstream(dir_ / "host.json", std::ios::trunc) << R"({"devices": [
      {"uuid": ")" << uuidOf(0) << R"(", "mig_enabled": false},
      {"uuid": ")" << uuidOf(1) << R"(", "mig_enabled": true, "mig": [
        {"uuid": ")" << kMigA << R"(", "gpu_instance_id": 1, "compute_instance_id": 0},
        {"uuid": ")" << kMigB << R"(", "gpu_instance_id": 2, "compute_instance_id": 0}]}],
    "events": [{"after_ms": 50, "gpu": 1, "xid": 94, "gpu_instance_id": 2,
                "compute_instance_id": 0}]})";
  auto watch = startWatch();
  ASSERT_TRUE(waitForText(healthFile(), "xid=94")) << readFile(watchLog());
  EXPECT_TRUE(contains(readFile(healthFile()), std::string("gpu=") + kMigB))
      << readFile(healthFile());
  const CliRun mig = discover(2, {"--mig"});
  EXPECT_EQ(mig.out, std::string("0,") + kMigA + "\n") << mig;
  // A whole-GPU owner would use the broken instance: GPU 1 is not handed out whole.
  EXPECT_EQ(discover(1).out, "0\n");
  EXPECT_EQ(discover(2).exitCode, 1);
}

TEST_F(HealthCliTest, ThePlainEventSetWaitIsUsedWhereV2IsMissing) {
  host(2, {}, R"([{"after_ms": 50, "gpu": 1, "xid": 79}])");
  auto watch = startWatch({}, FAKE_NVML_PLAIN);
  EXPECT_TRUE(contains(readFile(watchLog()), "through nvmlEventSetWait (no MIG attribution)"))
      << readFile(watchLog());
  ASSERT_TRUE(waitForText(healthFile(), "xid=79")) << readFile(watchLog());
}

TEST_F(HealthCliTest, ABoardWithoutEventsIsReportedOnceAndNotCalledUnhealthy) {
  host(2, {R"("events_supported": false)"}, R"([{"after_ms": 50, "gpu": 1, "xid": 79}])");
  auto watch = startWatch();
  const std::string log = readFile(watchLog());
  EXPECT_TRUE(contains(log, "note: GPU 0 is not watched (not called unhealthy)")) << log;
  EXPECT_TRUE(contains(log, "watching GPU(s) 1 of 2")) << log;
  ASSERT_TRUE(waitForText(healthFile(), "xid=79")) << readFile(watchLog());
  EXPECT_FALSE(contains(readFile(healthFile()), "gpu=0")) << readFile(healthFile());
  EXPECT_EQ(discover(1).out, "0\n");
}

// --- NVIDIA's recovery verdict under watch ---------------------------------------------------
// The stand-in's recovery-action timelines count from the watch's first nvmlInit, its events from
// its first wait: each test waits for what watch wrote, and the timelines leave seconds between
// what must be read before and after.

TEST_F(HealthCliTest, WatchReadmitsAGpuOnceTheDriverAsksNoRecoveryActionAndItAnswers) {
  // GPU 1: an Xid 79, the driver asks a reset, then none (the reset done), with an event.
  host(3,
       {R"("recovery_action": 0)",
        R"("recovery_action": [{"after_ms": 0, "action": 1}, {"after_ms": 4000, "action": 0}])"},
       R"([{"after_ms": 100, "gpu": 1, "xid": 79},
           {"after_ms": 4500, "gpu": 1, "type": "recovery_action", "action": 0}])");
  auto watch = startWatch();
  EXPECT_TRUE(contains(readFile(watchLog()), "re-admits GPU(s) 0,1 on the driver's word"))
      << readFile(watchLog());
  ASSERT_TRUE(waitForReadmission("1")) << readFile(watchLog()) << readFile(healthFile());
  const std::string log = readFile(watchLog());
  EXPECT_TRUE(contains(log, "GPU 1: the driver's recovery action: requires a GPU reset")) << log;
  EXPECT_TRUE(contains(log,
                       "re-admitted GPU 1 (readmitted, source=watch): the driver asks no "
                       "recovery action any more (it asked: requires a GPU reset) and the "
                       "GPU answers"))
      << log;
  const std::string records = readFile(healthFile());
  EXPECT_FALSE(contains(records, "unhealthy\t")) << records;
  EXPECT_TRUE(contains(records, "\trecovery_action=1\tsource=watch\t")) << records;
  // Handed out again, by every allocator. (Another process plays the timeline from its own start:
  // the host is now as the driver left it.)
  host(3, {R"("recovery_action": 0)", R"("recovery_action": 0)"});
  EXPECT_EQ(discover(3).out, "0,1,2\n");
  EXPECT_EQ(cli({"check"}).exitCode, 0) << cli({"check"});
  ::kill(watch->pid(), SIGTERM);
  EXPECT_EQ(watch->waitForExit(20s), 0) << readFile(watchLog());
}

TEST_F(HealthCliTest, AVerdictDuringWhichTheDriverAskedNothingStays) {
  host(3, {"", R"("recovery_action": 0)"}, R"([{"after_ms": 100, "gpu": 1, "xid": 79}])");
  auto watch = startWatch();
  ASSERT_TRUE(waitForText(watchLog(), "GPU 1 stays out: the driver asked no recovery action"))
      << readFile(watchLog());
  const std::string records = readFile(healthFile());
  EXPECT_TRUE(contains(records, "unhealthy\tgpu=1\t")) << records;
  EXPECT_FALSE(contains(records, "readmitted")) << records;
  EXPECT_FALSE(contains(records, "recovery_action=")) << records;
  EXPECT_EQ(discover(2).out, "0,2\n");
  ::kill(watch->pid(), SIGTERM);
  EXPECT_EQ(watch->waitForExit(20s), 0) << readFile(watchLog());
}

TEST_F(HealthCliTest, AnOperatorsDrainStaysWhenWatchReadmitsItsOwnVerdict) {
  host(
      2,
      {"", R"("recovery_action": [{"after_ms": 0, "action": 2}, {"after_ms": 3000, "action": 0}])"},
      R"([{"after_ms": 3500, "gpu": 1, "type": "recovery_action", "action": 0}])");
  ASSERT_EQ(cli({"drain", "--gpu", "1", "--reason", "fan noise"}).exitCode, 0);
  auto watch = startWatch();
  ASSERT_TRUE(waitForReadmission("1")) << readFile(watchLog()) << readFile(healthFile());
  const std::string log = readFile(watchLog());
  EXPECT_TRUE(contains(log,
                       "recorded GPU 1 unhealthy (the driver's recovery action: requires a "
                       "node reboot)"))
      << log;
  EXPECT_TRUE(contains(log, "it stays out for its other records")) << log;
  const std::string records = readFile(healthFile());
  EXPECT_TRUE(contains(records, "drained\tgpu=1\t")) << records;
  EXPECT_TRUE(contains(records, "reason=fan noise")) << records;
  EXPECT_FALSE(contains(records, "unhealthy\t")) << records;
  host(2, {"", R"("recovery_action": 0)"});
  const CliRun two = discover(2);
  EXPECT_EQ(two.exitCode, 1) << two;
  EXPECT_TRUE(contains(two.err, "GPU 1 is not handed out: drained since")) << two;
  ::kill(watch->pid(), SIGTERM);
  EXPECT_EQ(watch->waitForExit(20s), 0) << readFile(watchLog());
}

TEST_F(HealthCliTest, ReadmitNeverKeepsEveryVerdict) {
  host(
      2,
      {"", R"("recovery_action": [{"after_ms": 0, "action": 1}, {"after_ms": 2000, "action": 0}])"},
      R"([{"after_ms": 2500, "gpu": 1, "type": "recovery_action", "action": 0}])");
  auto watch = startWatch({"--readmit", "never"});
  EXPECT_TRUE(contains(readFile(watchLog()), "--readmit never: every verdict stays"))
      << readFile(watchLog());
  ASSERT_TRUE(waitForText(watchLog(),
                          "GPU 1: the driver asks no recovery action now; --readmit "
                          "never: its verdict stays until `flink-gpu undrain --gpu 1`"))
      << readFile(watchLog());
  const std::string records = readFile(healthFile());
  EXPECT_TRUE(contains(records, "unhealthy\tgpu=1\t")) << records;
  EXPECT_TRUE(contains(records, "recovery_action=1")) << records;
  EXPECT_FALSE(contains(records, "readmitted")) << records;
  EXPECT_EQ(discover(1).out, "0\n");
  EXPECT_EQ(discover(2).exitCode, 1);
  // A bad value is a usage error naming the choices.
  const CliRun bad = cli({"watch", "--readmit", "sometimes"});
  EXPECT_EQ(bad.exitCode, 2) << bad;
  ::kill(watch->pid(), SIGTERM);
  EXPECT_EQ(watch->waitForExit(20s), 0) << readFile(watchLog());
}

TEST_F(HealthCliTest, AVerdictWhereTheDriverHasNoRecoveryActionFieldStays) {
  host(2, {},
       R"([{"after_ms": 100, "gpu": 1, "xid": 79}, {"after_ms": 600, "gpu": 0, "xid": 79}])");
  auto watch = startWatch();
  EXPECT_TRUE(contains(readFile(watchLog()), "re-admits no GPU on the driver's word"))
      << readFile(watchLog());
  // The later verdict is recorded after the earlier one was: by then any re-admission was made.
  ASSERT_TRUE(waitForText(healthFile(), "unhealthy\tgpu=0\t")) << readFile(watchLog());
  const std::string records = readFile(healthFile());
  EXPECT_TRUE(contains(records, "unhealthy\tgpu=1\t")) << records;
  EXPECT_FALSE(contains(records, "readmitted")) << records;
  EXPECT_FALSE(contains(readFile(watchLog()), "recovery action")) << readFile(watchLog());
  ::kill(watch->pid(), SIGTERM);
  EXPECT_EQ(watch->waitForExit(20s), 0) << readFile(watchLog());
}

TEST_F(HealthCliTest, ASecondWatchExitsNamingTheFirst) {
  host(2);
  auto watch = startWatch();
  // The holder is the kernel's word: what the lock file holds says nothing.
  std::ofstream(coordinationFile() + ".watch") << "1\n";
  const CliRun second = cli({"watch"});
  // Only its user may open the lock: nobody else can hold it and pass for a watch.
  struct stat info {};
  ASSERT_EQ(::stat((coordinationFile() + ".watch").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0600u);
  EXPECT_EQ(second.exitCode, 1) << second;
  EXPECT_TRUE(contains(
      second.err, "another flink-gpu watch is running on this host (pid " + watch->pidText() + ")"))
      << second;
}

// A lock file planted by someone else never keeps the host from its watch: moved aside by a
// process that may (root, or the coordination file's owner in a folder that is not sticky), kept,
// said, and made anew; never written through.
TEST_F(HealthCliTest, AWatchLockPlantedBySomeoneElseIsMovedAsideNeverWrittenThrough) {
  host(2);
  const std::string lock = coordinationFile() + ".watch";
  const fs::path victim = dir_ / "victim";
  std::ofstream(victim) << "precious\n";
  fs::create_hard_link(victim, lock);
  {
    auto watch = startWatch();
    EXPECT_TRUE(contains(readFile(watchLog()),
                         "watch lock " + lock + " failed the trust rules (it has 2 hard links"))
        << readFile(watchLog());
  }
  EXPECT_EQ(readFile(victim), "precious\n");
  EXPECT_EQ(flink::testing::movedAside(lock).size(), 1u);
  if (::geteuid() != 0) GTEST_SKIP() << "the other user's lock file needs root";
  // Another user's lock file, nobody holding it, even where that user may write the coordination
  // file (it is world-writable): its owner could remove it under a watch and start another.
  std::ofstream(coordinationFile()).flush();
  fs::permissions(coordinationFile(), fs::perms(0666));
  fs::remove(lock);
  std::ofstream(lock).flush();
  ASSERT_EQ(::chown(lock.c_str(), 65534, 65534), 0);
  {
    auto watch = startWatch();
    EXPECT_TRUE(contains(readFile(watchLog()), "another user, who could remove it"))
        << readFile(watchLog());
  }
  EXPECT_EQ(flink::testing::movedAside(lock).size(), 2u);
  struct stat info {};
  ASSERT_EQ(::stat(lock.c_str(), &info), 0);
  EXPECT_EQ(info.st_uid, ::geteuid());
}

// A file that fails the trust rules (here a folder where the records belong) is moved aside by a
// process that may (root, or the coordination file's owner in a folder that is not sticky): kept
// for the operator, said in a warning, and allocation goes on. One that may not is refused, and
// hands out nothing (tests/host/coordination/promise_test.sh runs that as another user).
TEST_F(HealthCliTest, HealthRecordsThatFailTheTrustRulesAreMovedAsideAndKept) {
  host(2);
  fs::create_directory(healthFile());
  std::ofstream(healthFile() / "kept").flush();
  const CliRun run = discover(1);
  EXPECT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, "0\n") << run;
  EXPECT_TRUE(contains(run.err, "warning: health records " + healthFile().string() +
                                    " failed the trust rules (it is not a regular file"))
      << run;
  const std::vector<fs::path> aside = flink::testing::movedAside(healthFile());
  ASSERT_EQ(aside.size(), 1u) << run;
  EXPECT_TRUE(contains(run.err, "moved aside to " + aside.front().string() + ", kept")) << run;
  EXPECT_TRUE(fs::exists(aside.front() / "kept"));
  // A drain is written anew beside it.
  EXPECT_EQ(cli({"drain", "--gpu", "1"}).exitCode, 0);
  EXPECT_TRUE(fs::is_regular_file(healthFile()));
  EXPECT_EQ(discover(1).out, "0\n");
}

TEST_F(HealthCliTest, AVerdictThatCannotBeWrittenIsTriedAgainWithBackOffAndLoggedOnce) {
  host(2, {}, R"([{"after_ms": 50, "gpu": 1, "xid": 79}])");
  // The health records cannot be written: they are past the size any of the store's files may
  // have (a file that failed the trust rules would be moved aside, store/Siblings.h).
  tooBig(healthFile());
  auto watch = startWatch();
  ASSERT_TRUE(waitForText(watchLog(), "cannot record the verdict yet")) << readFile(watchLog());
  std::this_thread::sleep_for(1500ms);
  const std::string log = readFile(watchLog());
  std::size_t warnings = 0;
  for (std::size_t at = log.find("cannot record the verdict yet"); at != std::string::npos;
       at = log.find("cannot record the verdict yet", at + 1)) {
    ++warnings;
  }
  EXPECT_EQ(warnings, 1u) << log;
  fs::remove(healthFile());
  ASSERT_TRUE(waitForText(healthFile(), "xid=79")) << readFile(watchLog());
  EXPECT_TRUE(waitForText(watchLog(), "recorded 1 verdict(s) held back")) << readFile(watchLog());
}

TEST_F(HealthCliTest, AWatchStoppedWithAVerdictNotRecordedSaysSoAndFails) {
  host(2, {}, R"([{"after_ms": 50, "gpu": 1, "xid": 79}])");
  tooBig(healthFile());
  auto watch = startWatch();
  // Said at the start, before any verdict.
  EXPECT_TRUE(contains(readFile(watchLog()), "warning: the health records cannot be used now"))
      << readFile(watchLog());
  ASSERT_TRUE(waitForText(watchLog(), "cannot record the verdict yet")) << readFile(watchLog());
  ASSERT_EQ(::kill(watch->pid(), SIGTERM), 0);
  // Not a clean stop: a unit with Restart=on-failure starts it again, and the log says what to do.
  EXPECT_EQ(watch->waitForExit(20s), 1) << readFile(watchLog());
  const std::string log = readFile(watchLog());
  EXPECT_TRUE(contains(log, "error: GPU 1 was found unhealthy")) << log;
  EXPECT_TRUE(contains(log, "flink-gpu drain --gpu 1 --coordination-file '" + coordinationFile() +
                                "' --reason 'Xid 79'"))
      << log;
  EXPECT_TRUE(contains(log, "stopped with 1 verdict(s) not recorded")) << log;
}

TEST_F(HealthCliTest, SigtermAndSigintEndTheWatchWithExitZero) {
  host(2);
  for (const int signal : {SIGTERM, SIGINT}) {
    auto watch = startWatch();
    ASSERT_EQ(::kill(watch->pid(), signal), 0);
    EXPECT_EQ(watch->waitForExit(20s), 0) << readFile(watchLog());
    EXPECT_TRUE(contains(readFile(watchLog()), "flink-gpu watch: stopped")) << readFile(watchLog());
    fs::remove(watchLog());
  }
}

// --- watch as a systemd service
// -------------------------------------------------------------------

// In a file or on a terminal, each line of watch starts with the local time (ISO 8601, with the
// offset); TZ=IST-5:30 (POSIX form, no time zone database needed) is five and a half hours east.
TEST_F(HealthCliTest, WatchLinesCarryTheLocalTimeOutsideTheJournal) {
  host(2);
  auto watch = startWatch({}, FAKE_NVML_FULL, {"TZ=IST-5:30"});
  ::kill(watch->pid(), SIGTERM);
  ASSERT_EQ(watch->waitForExit(20s), 0) << readFile(watchLog());
  const std::vector<std::string> lines = linesOf(readFile(watchLog()));
  ASSERT_GE(lines.size(), 2u) << readFile(watchLog());
  const std::regex stamped(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+05:30 flink-gpu watch: .*)");
  for (const std::string& line : lines) EXPECT_TRUE(std::regex_match(line, stamped)) << line;
  EXPECT_TRUE(contains(lines.front(), " flink-gpu watch: watching GPU(s) 0,1 of 2"))
      << lines.front();
  EXPECT_TRUE(contains(lines.back(), " flink-gpu watch: stopped")) << lines.back();
}

// The journal stamps each line itself: where $JOURNAL_STREAM names the file stderr is (device and
// inode, as systemd sets it), the lines carry no time; where it names another, they do.
TEST_F(HealthCliTest, WatchLeavesTheTimeToTheJournal) {
  host(2);
  std::ofstream(watchLog()).flush();  // the file the watch's stderr will be, made now to know it
  struct stat log {};
  ASSERT_EQ(::stat(watchLog().c_str(), &log), 0);
  const std::string stream =
      "JOURNAL_STREAM=" + std::to_string(log.st_dev) + ":" + std::to_string(log.st_ino);
  {
    auto watch = startWatch({}, FAKE_NVML_FULL, {stream});
    ::kill(watch->pid(), SIGTERM);
    ASSERT_EQ(watch->waitForExit(20s), 0) << readFile(watchLog());
    for (const std::string& line : linesOf(readFile(watchLog()))) {
      EXPECT_TRUE(line.starts_with("flink-gpu watch: ")) << line;
    }
  }
  const std::string other =
      "JOURNAL_STREAM=" + std::to_string(log.st_dev) + ":" + std::to_string(log.st_ino + 1);
  auto watch = startWatch({}, FAKE_NVML_FULL, {other});
  const std::string first = linesOf(readFile(watchLog())).front();
  EXPECT_TRUE(std::regex_match(first, std::regex(R"(\d{4}-\d\d-\d\dT\S+ flink-gpu watch: .*)")))
      << first;
}

/// A datagram socket bound where a service manager's would be: a path, or an abstract name
/// ("@…"), as $NOTIFY_SOCKET gives it.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& address)
      : fd_(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) {
    sockaddr_un name{};
    name.sun_family = AF_UNIX;
    EXPECT_LT(address.size(), sizeof(name.sun_path));
    std::memcpy(name.sun_path, address.data(), std::min(address.size(), sizeof(name.sun_path) - 1));
    if (address.front() == '@') name.sun_path[0] = '\0';
    const socklen_t length = static_cast<socklen_t>(
        offsetof(sockaddr_un, sun_path) + address.size() + (address.front() == '@' ? 0 : 1));
    EXPECT_EQ(::bind(fd_.get(), reinterpret_cast<const sockaddr*>(&name), length), 0)
        << std::strerror(errno);
  }

  /// The next datagram, or "" after 20 s.
  std::string next() const {
    pollfd ready{fd_.get(), POLLIN, 0};
    if (::poll(&ready, 1, 20'000) != 1) return "";
    char buffer[4096];
    const ssize_t size = ::recv(fd_.get(), buffer, sizeof(buffer), 0);
    return size < 0 ? "" : std::string(buffer, static_cast<std::size_t>(size));
  }

 private:
  flink::process::FileDescriptor fd_;
};

// Type=notify: READY=1 once the GPUs are registered (after the line that says so), STOPPING=1 on
// a clean stop; to a path and to an abstract socket alike.
TEST_F(HealthCliTest, WatchTellsSystemdWhenItIsReadyAndWhenItStops) {
  host(2);
  const std::string abstract = "@flink-gpu-health-cli-test-" + std::to_string(::getpid());
  for (const std::string& address : {(dir_ / "notify").string(), abstract}) {
    SCOPED_TRACE(address);
    const NotifySocket manager(address);
    auto watch = startWatch({}, FAKE_NVML_FULL, {"NOTIFY_SOCKET=" + address});
    EXPECT_EQ(manager.next(), "READY=1");
    EXPECT_TRUE(contains(readFile(watchLog()), "flink-gpu watch: watching GPU(s) 0,1 of 2"));
    ::kill(watch->pid(), SIGTERM);
    EXPECT_EQ(watch->waitForExit(20s), 0) << readFile(watchLog());
    EXPECT_EQ(manager.next(), "STOPPING=1");
    EXPECT_FALSE(contains(readFile(watchLog()), "warning")) << readFile(watchLog());
  }
}

// A $NOTIFY_SOCKET nobody listens on is said once per message, and the watch goes on.
TEST_F(HealthCliTest, AWatchThatCannotNotifySaysSoAndWatches) {
  host(2, {}, R"([{"after_ms": 50, "gpu": 1, "xid": 79}])");
  auto watch = startWatch({}, FAKE_NVML_FULL, {"NOTIFY_SOCKET=" + (dir_ / "nobody").string()});
  ASSERT_TRUE(waitForText(healthFile(), "xid=79")) << readFile(watchLog());
  EXPECT_TRUE(contains(readFile(watchLog()),
                       "warning: cannot tell systemd READY=1 at "
                       "$NOTIFY_SOCKET (" +
                           (dir_ / "nobody").string() + "): "))
      << readFile(watchLog());
}

// --- drain, undrain ---------------------------------------------------------------------------

TEST_F(HealthCliTest, DrainTakesAGpuOutAndUndrainPutsItBack) {
  host(3);
  const CliRun drain = cli({"drain", "--gpu", "1", "--reason", "fan\tnoise, 50% louder"});
  EXPECT_EQ(drain.exitCode, 0) << drain;
  EXPECT_EQ(drain.out, "drained GPU 1 (" + uuidOf(1) +
                           "): new allocations skip it; owners that hold it keep it\n")
      << drain;
  const std::string record = readFile(healthFile());
  EXPECT_TRUE(contains(record, "drained\tgpu=1\tuuid=" + uuidOf(1))) << record;
  EXPECT_TRUE(contains(record, "\tuid=" + std::to_string(::getuid()))) << record;
  EXPECT_TRUE(contains(record, "reason=fan%09noise, 50%25 louder")) << record;

  EXPECT_EQ(discover(2).out, "0,2\n");
  const auto json = nlohmann::json::parse(cli({"status", "--format", "json"}).out);
  const auto& gpu = json.at("gpus").at(1);
  EXPECT_EQ(gpu.at("state"), "drained");
  EXPECT_EQ(gpu.at("health").at("drained"), true);
  EXPECT_EQ(gpu.at("health").at("healthy"), true);
  EXPECT_EQ(gpu.at("health").at("problems").at(0).at("reason"), "fan\tnoise, 50% louder");
  EXPECT_EQ(gpu.at("health").at("problems").at(0).at("uid"), ::getuid());
  const CliRun check = cli({"check"});
  EXPECT_EQ(check.exitCode, 1) << check;
  EXPECT_TRUE(contains(check.out, "GPU 1 (" + uuidOf(1) + "): drained since ")) << check;

  // By UUID, the same GPU.
  const CliRun undrain = cli({"undrain", "--gpu", uuidOf(1), "--reason", "fan replaced"});
  EXPECT_EQ(undrain.exitCode, 0) << undrain;
  EXPECT_TRUE(contains(undrain.out, "cleared drained of GPU 1")) << undrain;
  EXPECT_EQ(discover(3).out, "0,1,2\n");
  const std::string after = readFile(healthFile());
  EXPECT_FALSE(contains(after, "drained\t")) << after;
  EXPECT_TRUE(contains(after, "readmitted\tgpu=1\tuuid=" + uuidOf(1))) << after;
  EXPECT_TRUE(contains(after, "reason=fan replaced")) << after;
  EXPECT_EQ(cli({"check"}).exitCode, 0);

  // A no-op says so and writes nothing: no second `readmitted` line, the file untouched.
  const CliRun again = cli({"undrain", "--gpu", "1"});
  EXPECT_EQ(again.out,
            "GPU 1 (" + uuidOf(1) + ") was neither drained nor unhealthy: nothing to do\n")
      << again;
  EXPECT_EQ(readFile(healthFile()), after);
  const CliRun never = cli({"undrain", "--gpu", "2"});
  EXPECT_EQ(never.exitCode, 0) << never;
  EXPECT_FALSE(contains(readFile(healthFile()), "gpu=2")) << readFile(healthFile());
  EXPECT_EQ(cli({"drain", "--gpu", "one"}).exitCode, 2);
}

// The PCI bus id is one of a GPU's spellings (the host's index, as `release --gpu` takes it), in
// any case and domain form.
TEST_F(HealthCliTest, DrainAndUndrainTakeAGpuByItsPciBusId) {
  host(3, {R"("pci_bus_id": "00000000:19:00.0")", R"("pci_bus_id": "00000000:3B:00.0")"});
  const CliRun drain = cli({"drain", "--gpu", "0000:3b:00.0", "--reason", "fan"});
  EXPECT_EQ(drain.exitCode, 0) << drain;
  EXPECT_TRUE(contains(readFile(healthFile()), "drained\tgpu=1\tuuid=" + uuidOf(1)))
      << readFile(healthFile());
  EXPECT_EQ(discover(2).out, "0,2\n");
  const CliRun undrain = cli({"undrain", "--gpu", "00000000:3B:00.0"});
  EXPECT_EQ(undrain.exitCode, 0) << undrain;
  EXPECT_TRUE(contains(undrain.out, "cleared drained of GPU 1")) << undrain;
  const CliRun unknown = cli({"drain", "--gpu", "00000000:99:00.0"});
  EXPECT_EQ(unknown.exitCode, 1) << unknown;
  EXPECT_TRUE(contains(unknown.err, "00000000:99:00.0")) << unknown;
}

TEST_F(HealthCliTest, DrainOfAGpuThisHostDoesNotHaveIsAnErrorNamingIt) {
  host(3);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"7", "cannot drain GPU 7: this host has no GPU 7"},
      {"GPU-70000000-0000-4000-8000-000000000007",
       "cannot drain GPU-70000000-0000-4000-8000-000000000007: no GPU of this host has this UUID"},
      {"GPU-1000", "cannot drain GPU-1000: it is only the start of the UUID of GPU 1 (" +
                       uuidOf(1) + "): give the whole UUID or the index"},
      {kMigA,
       std::string("cannot drain ") + kMigA + ": no MIG instance of this host has this UUID"},
  };
  for (const auto& [gpu, cause] : cases) {
    const CliRun drain = cli({"drain", "--gpu", gpu, "--reason", "fan"});
    EXPECT_EQ(drain.exitCode, 1) << drain;
    EXPECT_EQ(drain.out, "") << drain;
    ASSERT_FALSE(drain.err.empty()) << drain;
    EXPECT_EQ(linesOf(drain.err).front(), "flink-gpu: error: " + cause) << drain;
  }
  // The details say what the host has.
  const CliRun past = cli({"drain", "--gpu", "7"});
  EXPECT_TRUE(contains(past.err, "NVML lists GPU 0 (" + uuidOf(0) + "), GPU 1 (" + uuidOf(1) +
                                     "), GPU 2 (" + uuidOf(2) + ")"))
      << past;
  EXPECT_FALSE(fs::exists(healthFile())) << readFile(healthFile());

  // A whole UUID is the GPU's index; case aside, as CUDA compares.
  std::string upper = uuidOf(2);
  for (char& c : upper.replace(0, 4, "")) c = static_cast<char>(std::toupper(c));
  const CliRun byUuid = cli({"drain", "--gpu", "GPU-" + upper});
  EXPECT_EQ(byUuid.exitCode, 0) << byUuid;
  EXPECT_TRUE(contains(readFile(healthFile()), "drained\tgpu=2\tuuid=" + uuidOf(2)))
      << readFile(healthFile());
}

TEST_F(HealthCliTest, DrainOfAnAmbiguousPrefixNamesTheGpusItCouldMean) {
  const std::string a = "GPU-abc00000-0000-4000-8000-000000000001";
  const std::string b = "GPU-abc00000-0000-4000-8000-000000000002";
  std::ofstream(dir_ / "host.json", std::ios::trunc)
      << R"({"devices": [{"uuid": ")" << a << R"("}, {"uuid": ")" << b << R"("}]})";
  const CliRun drain = cli({"drain", "--gpu", "GPU-abc"});
  EXPECT_EQ(drain.exitCode, 1) << drain;
  EXPECT_EQ(linesOf(drain.err).front(),
            "flink-gpu: error: cannot drain GPU-abc, which is ambiguous: it could mean GPU 0 (" +
                a + ") or GPU 1 (" + b + "): give a whole UUID or an index")
      << drain;
  EXPECT_FALSE(fs::exists(healthFile()));
}

TEST_F(HealthCliTest, DrainOfAMigInstanceNeedsOneTheHostHas) {
  std::ofstream(dir_ / "host.json", std::ios::trunc) << R"({"devices": [
      {"uuid": ")" << uuidOf(0) << R"(", "mig_enabled": true, "mig": [
        {"uuid": ")" << kMigA << R"(", "gpu_instance_id": 1, "compute_instance_id": 0}]}]})";
  const CliRun other = cli({"drain", "--gpu", kMigB});
  EXPECT_EQ(other.exitCode, 1) << other;
  EXPECT_EQ(linesOf(other.err).front(), std::string("flink-gpu: error: cannot drain ") + kMigB +
                                            ": no MIG instance of this host has this UUID")
      << other;
  EXPECT_TRUE(contains(other.err, std::string("NVML lists MIG instance ") + kMigA + " of GPU 0"))
      << other;
  const CliRun prefix = cli({"drain", "--gpu", "MIG-aa00"});
  EXPECT_EQ(prefix.exitCode, 1) << prefix;
  EXPECT_TRUE(contains(prefix.err, "it is only the start of the UUID of MIG instance")) << prefix;
  const CliRun drain = cli({"drain", "--gpu", kMigA});
  EXPECT_EQ(drain.exitCode, 0) << drain;
  EXPECT_TRUE(contains(readFile(healthFile()), std::string("drained\tgpu=") + kMigA))
      << readFile(healthFile());
}

TEST_F(HealthCliTest, DrainOfALostGpuThatNvmlStillCountsIsRecorded) {
  // NVML leaves GPU 1 out of the enumeration (its UUID query says it is lost), but counts it.
  host(3, {"", R"("lost": true)"});
  const CliRun drain = cli({"drain", "--gpu", "1", "--reason", "fell off the bus"});
  EXPECT_EQ(drain.exitCode, 0) << drain;
  EXPECT_TRUE(contains(readFile(healthFile()), "drained\tgpu=1\t")) << readFile(healthFile());
  EXPECT_EQ(cli({"drain", "--gpu", "3"}).exitCode, 1);
}

TEST_F(HealthCliTest, DrainWithoutNvmlOrNvidiaSmiFailsSayingItNeedsTheGpusButUndrainWorks) {
  // A GPU removed from the host, drained before; NVML and nvidia-smi cannot list the GPUs.
  std::ofstream(healthFile()) << "drained\tgpu=5\tsince=1000\tuid=0\treason=removed\n";
  writeScript(dir_ / "bin" / "nvidia-smi",
              "#!/bin/sh\necho 'NVIDIA-SMI has failed because it couldn'\\''t communicate with "
              "the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and "
              "running.'\nexit 9\n");
  const std::vector<std::string> env{
      "FLINK_GPU_NVML_LIBRARY=" + (dir_ / "no-nvml" / "libnvidia-ml.so.1").string(),
      "PATH=" + (dir_ / "bin").string() + ":/usr/bin:/bin"};
  const CliRun drain = runCli(
      {"drain", "--coordination-file", coordinationFile(), "--gpu", "1", "--reason", "x"}, env);
  EXPECT_EQ(drain.exitCode, 1) << drain;
  const std::string first = linesOf(drain.err).front();
  EXPECT_TRUE(
      first.starts_with("flink-gpu: error: cannot drain GPU 1: drain needs to know this "
                        "host's GPUs, so as never to record one it does not have, and "
                        "neither NVML nor nvidia-smi can list them: "))
      << drain;
  EXPECT_TRUE(contains(drain.err, "couldn't communicate with the NVIDIA driver")) << drain;
  EXPECT_FALSE(contains(readFile(healthFile()), "gpu=1")) << readFile(healthFile());

  // undrain checks nothing: the record of the GPU that is gone is cleaned up.
  const CliRun undrain =
      runCli({"undrain", "--coordination-file", coordinationFile(), "--gpu", "5"}, env);
  EXPECT_EQ(undrain.exitCode, 0) << undrain;
  EXPECT_TRUE(contains(undrain.out,
                       "cleared drained of GPU 5 (since 1970-01-01T00:16:40Z: "
                       "removed)"))
      << undrain;
  EXPECT_FALSE(contains(readFile(healthFile()), "drained\t")) << readFile(healthFile());
}

TEST_F(HealthCliTest, ASecondDrainKeepsTheFirstsTimeAndSaysWhatItWasFor) {
  host(3);
  std::ofstream(healthFile()) << "drained\tgpu=1\tuuid=" << uuidOf(1)
                              << "\tsince=1000\tuid=" << ::getuid() << "\treason=fan noise\n";
  const CliRun again = cli({"drain", "--gpu", "1", "--reason", "fan replacement"});
  EXPECT_EQ(again.exitCode, 0) << again;
  EXPECT_TRUE(again.out.starts_with("GPU 1 (" + uuidOf(1) +
                                    ") was already drained since 1970-01-01T00:16:40Z by uid " +
                                    std::to_string(::getuid())))
      << again;
  EXPECT_TRUE(again.out.ends_with(": fan noise; the reason is now fan replacement\n")) << again;
  const std::string records = readFile(healthFile());
  EXPECT_TRUE(contains(records, "drained\tgpu=1\tuuid=" + uuidOf(1) + "\tsince=1000\t")) << records;
  EXPECT_TRUE(contains(records, "reason=fan replacement")) << records;
  EXPECT_FALSE(contains(records, "reason=fan noise")) << records;
  // By UUID, the same drain; without a reason, it says so.
  const CliRun third = cli({"drain", "--gpu", uuidOf(1)});
  EXPECT_TRUE(contains(third.out, "since 1970-01-01T00:16:40Z by uid ")) << third;
  EXPECT_TRUE(third.out.ends_with(": fan replacement; now without a reason\n")) << third;
  const auto json = nlohmann::json::parse(cli({"status", "--format", "json"}).out);
  EXPECT_EQ(json.at("gpus").at(1).at("health").at("problems").size(), 1u) << json;
  EXPECT_EQ(json.at("gpus").at(1).at("health").at("problems").at(0).at("since"), 1000);
}

TEST_F(HealthCliTest, UndrainClearsAVerdictOfWatch) {
  host(2, {}, R"([{"after_ms": 50, "gpu": 1, "xid": 79}])");
  {
    auto watch = startWatch();
    ASSERT_TRUE(waitForText(healthFile(), "xid=79")) << readFile(watchLog());
  }
  EXPECT_EQ(discover(2).exitCode, 1);
  const CliRun undrain = cli({"undrain", "--gpu", "1"});
  EXPECT_TRUE(contains(undrain.out, "cleared unhealthy of GPU 1")) << undrain;
  EXPECT_TRUE(contains(undrain.out, "Xid 79")) << undrain;
  EXPECT_EQ(discover(2).out, "0,1\n");
}

TEST_F(HealthCliTest, BadHealthLinesAreReportedAndKept) {
  host(2);
  std::ofstream(healthFile()) << "this is not a record\n";
  ASSERT_EQ(cli({"drain", "--gpu", "0"}).exitCode, 0);
  const std::string text = readFile(healthFile());
  EXPECT_TRUE(contains(text, "this is not a record\n")) << text;
  EXPECT_TRUE(contains(text, "drained\tgpu=0")) << text;
  const CliRun check = cli({"check"});
  EXPECT_TRUE(contains(check.out, "is not a health record: 'this is not a record'")) << check;
  const CliRun status = cli({"status"});
  EXPECT_TRUE(contains(status.err, "which is not a health record")) << status;
}

// --- health at discovery ------------------------------------------------------------------------

TEST_F(HealthCliTest, RowRemappingAndRetiredPagesDecideWhereSupported) {
  host(5, {R"("remapped_rows": {"failure": true, "uncorrected": 3})",
           R"("remapped_rows": {"pending": true})",
           R"("remapped_rows": {"error": 3}, "retired_pages_pending": true)",
           R"("remapped_rows": {"corrected": 5}, "retired_pages_pending": {"error": 3})",
           R"("remapped_rows": {"error": 3}, "retired_pages_pending": {"error": 3})"});
  const CliRun run = discover(2);
  EXPECT_EQ(run.exitCode, 0) << run;
  // Unsupported queries (GPU 4) give no verdict.
  EXPECT_EQ(run.out, "3,4\n") << run;
  EXPECT_TRUE(contains(run.err, "note: GPU 0 is not handed out: row remapping failed")) << run;
  EXPECT_TRUE(contains(run.err, "note: GPU 1 is not handed out: row remapping pending")) << run;
  EXPECT_TRUE(contains(run.err, "note: GPU 2 is not handed out: retired pages pending")) << run;
}

TEST_F(HealthCliTest, HealthRecordsThatCannotBeReadHandOutNothing) {
  host(2);
  ASSERT_EQ(cli({"drain", "--gpu", "1"}).exitCode, 0);
  // Damaged: grown past the size any file of the store may have. A drained GPU must not go out
  // for it.
  tooBig(healthFile());
  const CliRun skip = discover(1);
  EXPECT_EQ(skip.exitCode, 1) << skip;
  EXPECT_EQ(skip.out, "") << skip;
  EXPECT_TRUE(firstLine(skip.err).starts_with("health records " + healthFile().string())) << skip;
  EXPECT_TRUE(contains(firstLine(skip.err), "no GPU is handed out while they cannot be read"))
      << skip;
  EXPECT_EQ(discover(1, {"--health", "warn"}).exitCode, 1);
  // --health ignore does not read them.
  const CliRun ignore = discover(2, {"--health", "ignore"});
  EXPECT_EQ(ignore.exitCode, 0) << ignore;
  EXPECT_EQ(ignore.out, "0,1\n") << ignore;
}

TEST_F(HealthCliTest, AVerdictLineThatDoesNotParseStillHoldsItsGpuOut) {
  host(5);
  // Hand edits: spaces for tabs, a bad Xid, a bad time; the GPUs they name stay out.
  std::ofstream(healthFile()) << "drained gpu=1 since=1796119156 reason=spaces\n"
                              << "unhealthy\tgpu=2\tsince=1796119157\txid=79x\n"
                              << "drained\tgpu=3\tsince=-1\n"
                              << "this is not a record\n";
  const CliRun run = discover(2);
  EXPECT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, "0,4\n") << run;
  EXPECT_TRUE(contains(run.err,
                       "note: GPU 1 is not handed out: drained: its line in the health "
                       "records " +
                           healthFile().string() + ", line 1 cannot be read"))
      << run;
  EXPECT_EQ(discover(3).exitCode, 1) << "a GPU of a broken verdict line went out";
  // One whose GPU cannot be read could be any: nothing goes out.
  for (const char* line :
       {"drained\tgpu=+1\n", "drained\tgpu=1x\n", "drained,gpu=1\n", "unhealthy\tuuid=1\n"}) {
    std::ofstream(healthFile(), std::ios::trunc) << line;
    const CliRun unreadable = discover(1);
    EXPECT_EQ(unreadable.exitCode, 1) << line << unreadable;
    EXPECT_EQ(unreadable.out, "") << line << unreadable;
  }
  std::ofstream(healthFile(), std::ios::trunc) << "drained gpu=1 since=1796119156 reason=spaces\n"
                                               << "unhealthy\tgpu=2\tsince=1796119157\txid=79x\n"
                                               << "drained\tgpu=3\tsince=-1\n"
                                               << "this is not a record\n";
  // One naming no GPU could be any: nothing goes out.
  std::ofstream(healthFile(), std::ios::app) << "unhealthy since=1796119157\n";
  const CliRun none = discover(1);
  EXPECT_EQ(none.exitCode, 1) << none;
  EXPECT_EQ(none.out, "") << none;
  EXPECT_TRUE(contains(firstLine(none.err), "line 5 is a verdict (unhealthy) that names no GPU"))
      << none;
}

TEST_F(HealthCliTest, AReaderHoldingTheHealthRecordsLockStallsNoAllocation) {
  host(2);
  ASSERT_EQ(cli({"drain", "--gpu", "1"}).exitCode, 0);
  // Anyone who may read the records may flock them, for ever; the records still count.
  const flink::process::FileDescriptor reader(::open(healthFile().c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(reader.valid());
  ASSERT_EQ(::flock(reader.get(), LOCK_EX), 0);
  const CliRun one = discover(1);
  EXPECT_EQ(one.exitCode, 0) << one;
  EXPECT_EQ(one.out, "0\n") << one;
  EXPECT_FALSE(contains(one.err, "health records")) << one;
  EXPECT_EQ(discover(2).exitCode, 1) << "the drained GPU went out";
}

TEST_F(HealthCliTest, ALostGpuIsNeverHandedOut) {
  host(3, {"", R"("lost": true)"});
  const CliRun run = discover(2);
  EXPECT_EQ(run.out, "0,2\n") << run;
  // The enumeration itself leaves a lost GPU out, and says so at the default verbosity.
  EXPECT_TRUE(contains(run.err, "GPU 1 left out: nvmlDeviceGetUUID failed: GPU is lost")) << run;
  const CliRun check = cli({"check", "--format", "json"});
  EXPECT_EQ(check.exitCode, 1) << check;
  const auto json = nlohmann::json::parse(check.out);
  EXPECT_EQ(json.at("ok"), false);
  EXPECT_EQ(json.at("problems").at(0).at("kind"), "lost");
  EXPECT_EQ(json.at("problems").at(0).at("gpu"), "1");
}

/// check --format json's problems: each GPU's causes, in order.
std::map<std::string, std::vector<std::string>> causesOf(const std::string& checkJson) {
  std::map<std::string, std::vector<std::string>> causes;
  const nlohmann::json document = nlohmann::json::parse(checkJson);
  for (const auto& problem : document.at("problems")) {
    if (problem.at("gpu").is_string()) {
      causes[problem.at("gpu").get<std::string>()].push_back(
          problem.at("cause").get<std::string>());
    }
  }
  return causes;
}

TEST_F(HealthCliTest, EveryRecoveryActionButNoneKeepsTheGpuOutInNvidiasWords) {
  // GPU i asks action i (0: none … 5), GPU 6 one newer than this binding.
  std::vector<std::string> extra;
  for (unsigned i = 0; i < 6; ++i) extra.push_back(R"("recovery_action": )" + std::to_string(i));
  extra.push_back(R"("recovery_action": 9)");
  host(7, extra);
  const CliRun run = discover(1);
  EXPECT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, "0\n") << run;
  const std::vector<std::pair<unsigned, std::string>> words = {
      {1, "requires a GPU reset"},       {2, "requires a node reboot"},
      {3, "drain peer-to-peer traffic"}, {4, "drain and reset"},
      {5, "recover the IMEX domain"},    {6, "unknown recovery action 9"}};
  for (const auto& [gpu, text] : words) {
    EXPECT_TRUE(contains(run.err, "note: GPU " + std::to_string(gpu) +
                                      " is not handed out: the driver's recovery action: " + text +
                                      "\n"))
        << run;
  }
  EXPECT_EQ(discover(2).exitCode, 1);
  const CliRun check = cli({"check", "--format", "json"});
  EXPECT_EQ(check.exitCode, 1) << check;
  const auto causes = causesOf(check.out);
  EXPECT_EQ(causes.count("0"), 0u) << check;
  for (unsigned gpu = 1; gpu < 7; ++gpu) {
    EXPECT_EQ(causes.at(std::to_string(gpu)), std::vector<std::string>{"recovery_action"}) << check;
  }
  const auto status = nlohmann::json::parse(cli({"status", "--format", "json"}).out);
  EXPECT_EQ(status.at("gpus").at(0).at("health").at("recovery_action"), 0);
  EXPECT_EQ(status.at("gpus").at(2).at("health").at("recovery_action"), 2);
  EXPECT_EQ(status.at("gpus").at(2).at("state"), "unhealthy");
  const std::string metrics = cli({"status", "--format", "prometheus"}).out;
  EXPECT_TRUE(
      contains(metrics, "flink_gpu_recovery_action{gpu=\"6\",uuid=\"" + uuidOf(6) + "\"} 9\n"))
      << metrics;
  EXPECT_TRUE(contains(metrics, "flink_gpu_healthy{gpu=\"1\",uuid=\"" + uuidOf(1) + "\"} 0\n"))
      << metrics;
}

TEST_F(HealthCliTest, ResetRequiredFromAnyOneQueryKeepsTheGpuOut) {
  host(4, {"", R"("remapped_rows": {"error": 16})", R"("persistence_mode": {"error": 16})",
           R"("recovery_action": {"error": 16})"});
  const CliRun run = discover(1);
  EXPECT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, "0\n") << run;
  EXPECT_TRUE(contains(run.err,
                       "note: GPU 1 is not handed out: reset required: nvmlDeviceGetRemappedRows "
                       "failed: GPU requires restart (NVML_ERROR_RESET_REQUIRED, 16)"))
      << run;
  EXPECT_TRUE(contains(run.err,
                       "note: GPU 2 is not handed out: reset required: "
                       "nvmlDeviceGetPersistenceMode failed"))
      << run;
  EXPECT_TRUE(contains(run.err,
                       "note: GPU 3 is not handed out: reset required: nvmlDeviceGetFieldValues "
                       "failed"))
      << run;
  const CliRun check = cli({"check", "--format", "json"});
  EXPECT_EQ(check.exitCode, 1) << check;
  const auto causes = causesOf(check.out);
  for (const char* gpu : {"1", "2", "3"}) {
    EXPECT_EQ(causes.at(gpu), std::vector<std::string>{"reset_required"}) << check;
  }
}

TEST_F(HealthCliTest, AGpuWhoseNvlinkFabricHasNotRegisteredIsNotHandedOut) {
  const std::string cluster = "c1a55e00-0000-4000-8000-00000000f00d";
  host(6, {R"("fabric": {"state": 1})", R"("fabric": {"state": 2})",
           R"("fabric": {"state": 3, "status": 27})",
           R"("fabric": {"state": 3, "status": 0, "clique_id": 7, "cluster_uuid": ")" + cluster +
               R"(", "struct": "v2"})",
           R"("fabric": {"state": 0})", R"("fabric": {"error": 3})"});
  const CliRun run = discover(3);
  EXPECT_EQ(run.exitCode, 0) << run;
  // A GPU without a fabric (4: not supported, 5: no such call) is unaffected.
  EXPECT_EQ(run.out, "3,4,5\n") << run;
  EXPECT_TRUE(contains(run.err,
                       "note: GPU 0 is not handed out: NVLink fabric registration in progress "
                       "(state: not started): CUDA would fail on it\n"))
      << run;
  EXPECT_TRUE(contains(run.err,
                       "note: GPU 1 is not handed out: NVLink fabric registration in progress "
                       "(state: in progress): CUDA would fail on it\n"))
      << run;
  EXPECT_TRUE(contains(run.err,
                       "note: GPU 2 is not handed out: NVLink fabric registration failed (state: "
                       "completed, status: NVML_ERROR_NOT_READY): CUDA would fail on it\n"))
      << run;
  const auto causes = causesOf(cli({"check", "--format", "json"}).out);
  for (const char* gpu : {"0", "1", "2"}) {
    EXPECT_EQ(causes.at(gpu), std::vector<std::string>{"fabric_not_ready"});
  }
  EXPECT_EQ(causes.size(), 3u);
  // Its clique and cluster, once registered, are properties.
  const CliRun json = runCli({"discover", "-n", "3", "--discovery-args",
                              "--coordination-file " + coordinationFile(), "--format", "json"},
                             environment());
  ASSERT_EQ(json.exitCode, 0) << json;
  const auto gpus = nlohmann::json::parse(json.out).at("gpu");
  ASSERT_EQ(gpus.size(), 3u) << json;
  EXPECT_EQ(gpus.at(0).at("index"), "3");
  EXPECT_EQ(gpus.at(0).at("fabric.clique_id"), "7") << json;
  EXPECT_EQ(gpus.at(0).at("fabric.cluster_uuid"), cluster) << json;
  EXPECT_FALSE(gpus.at(1).contains("fabric.clique_id")) << json;
  EXPECT_FALSE(gpus.at(2).contains("fabric.cluster_uuid")) << json;
}

TEST_F(HealthCliTest, ADegradedFabricIsANoteAndComesLastInPlacement) {
  host(3, {R"("fabric": {"state": 3, "status": 0, "health_mask": 1})"});
  const CliRun two = discover(2);
  EXPECT_EQ(two.exitCode, 0) << two;
  EXPECT_EQ(two.out, "1,2\n") << two;
  EXPECT_TRUE(contains(two.err,
                       "note: GPU 0: its NVLink fabric reports degraded bandwidth: placement "
                       "ranks it after the others"))
      << two;
  EXPECT_EQ(discover(3).out, "0,1,2\n");
  // Index placement does not read the fabric: Flink's rule, as asked.
  EXPECT_EQ(discover(2, {"--placement", "index"}).out, "0,1\n");
  const CliRun check = cli({"check", "--format", "json"});
  EXPECT_EQ(check.exitCode, 0) << check;
  const auto notes = nlohmann::json::parse(check.out).at("notes");
  ASSERT_EQ(notes.size(), 1u) << check;
  EXPECT_EQ(notes.at(0).at("cause"), "fabric_degraded");
  EXPECT_EQ(notes.at(0).at("gpu"), "0");
}

// --- check --------------------------------------------------------------------------------------

TEST_F(HealthCliTest, CheckExpectingEightOnSevenGpus) {
  host(7, {R"("persistence_mode": false)"});
  const CliRun check = cli({"check", "--expect", "8"});
  EXPECT_EQ(check.exitCode, 1) << check;
  ASSERT_FALSE(linesOf(check.out).empty()) << check;
  EXPECT_EQ(linesOf(check.out).front(), "gpu count reported lower than expected (7 < 8)") << check;
  // Persistence mode off is a note, not a problem.
  EXPECT_TRUE(contains(check.out, "note: GPU 0: persistence mode is off")) << check;
  const CliRun json = cli({"check", "--expect", "8", "--format", "json"});
  const auto parsed = nlohmann::json::parse(json.out);
  EXPECT_EQ(parsed.at("ok"), false);
  ASSERT_EQ(parsed.at("problems").size(), 1u) << json;
  EXPECT_EQ(parsed.at("problems").at(0).at("kind"), "count");
  EXPECT_TRUE(parsed.at("problems").at(0).at("gpu").is_null());
  EXPECT_EQ(parsed.at("notes").at(0).at("kind"), "persistence_mode");

  const CliRun seven = cli({"check", "--expect", "7"});
  EXPECT_EQ(seven.exitCode, 0) << seven;
}

TEST_F(HealthCliTest, CheckReportsNvmlAndTheCoordinationFile) {
  host(2);
  // Records of a dead owner are a note; a line that is not a record is a problem.
  std::ofstream(coordinationFile()) << "0 " << ::getpid() << "\t1\njunk line\n";
  const CliRun check = cli({"check"});
  EXPECT_EQ(check.exitCode, 1) << check;
  EXPECT_TRUE(contains(check.out, "line 2 of coordination file")) << check;
  EXPECT_TRUE(contains(check.out, "note: GPU 0 is recorded for process")) << check;
  fs::remove(coordinationFile());
  fs::create_symlink(dir_ / "elsewhere", coordinationFile());
  EXPECT_TRUE(contains(cli({"check"}).out, "is not a regular file (a symlink)"));
  fs::remove(coordinationFile());
  if (::geteuid() == 0) {
    // Another user's file root may write only by privilege: what every allocation refuses,
    // check reports, although root may open it.
    std::ofstream(coordinationFile()) << "";
    ASSERT_EQ(::chown(coordinationFile().c_str(), 65534, 65534), 0);
    fs::permissions(coordinationFile(), fs::perms(0644));
    const CliRun planted = cli({"check"});
    EXPECT_EQ(planted.exitCode, 1) << planted;
    EXPECT_TRUE(contains(planted.out, "refusing to use it: it is another user's")) << planted;
    EXPECT_NE(cli({"exec", "-n", "1", "--", "true"}).exitCode, 0);
    fs::remove(coordinationFile());
  }

  std::ofstream(dir_ / "host.json", std::ios::trunc) << R"({"init_error": 9, "devices": []})";
  const CliRun noNvml = cli({"check"});
  EXPECT_EQ(noNvml.exitCode, 1) << noNvml;
  EXPECT_TRUE(contains(noNvml.out, "NVML is not usable: ")) << noNvml;
  EXPECT_TRUE(contains(noNvml.out, "Driver Not Loaded")) << noNvml;
}

// --- metrics
// --------------------------------------------------------------------------------------

TEST_F(HealthCliTest, PrometheusMetricsPassPromtool) {
  host(3, {}, R"([{"after_ms": 50, "gpu": 2, "xid": 79}])");
  {
    auto watch = startWatch();
    ASSERT_TRUE(waitForText(healthFile(), "xid=79")) << readFile(watchLog());
  }
  ASSERT_EQ(cli({"drain", "--gpu", "1", "--reason", "a \"quoted\" reason"}).exitCode, 0);
  // A record of this process (held) and one of a gone owner (not counted as held).
  std::ofstream(coordinationFile())
      << "0 " << ::getpid() << "\n2 " << flink::testing::deadPid() << "\n";

  const CliRun metrics = cli({"status", "--format", "prometheus"});
  EXPECT_EQ(metrics.exitCode, 0) << metrics;
  const std::string& out = metrics.out;
  EXPECT_TRUE(contains(out, "# TYPE flink_gpu_held gauge\n")) << out;
  // One series per GPU: no owner pid, whose values grow without bound.
  EXPECT_TRUE(contains(out, "flink_gpu_held{gpu=\"0\",uuid=\"" + uuidOf(0) + "\"} 1\n")) << out;
  EXPECT_FALSE(contains(out, "owner_pid")) << out;
  EXPECT_TRUE(contains(out, "\nflink_gpu_nvml_up 1\n")) << out;
  EXPECT_TRUE(contains(out, "\nflink_gpu_gpus{source=\"nvml\"} 3\n")) << out;
  EXPECT_TRUE(contains(out, "\nflink_gpu_gpus{source=\"records\"} 0\n")) << out;
  EXPECT_TRUE(contains(out, std::string("\nflink_gpu_build_info{version=\"") +
                                FLINK_GPU_EXPECTED_VERSION + "\",commit=\""))
      << out;
  EXPECT_TRUE(contains(out, "flink_gpu_drained{gpu=\"1\",uuid=\"" + uuidOf(1) + "\"} 1\n")) << out;
  EXPECT_TRUE(contains(out, "flink_gpu_healthy{gpu=\"2\",uuid=\"" + uuidOf(2) + "\"} 0\n")) << out;
  EXPECT_TRUE(contains(out, "flink_gpu_last_xid{gpu=\"2\",uuid=\"" + uuidOf(2) + "\"} 79\n"))
      << out;
  EXPECT_TRUE(contains(out, "flink_gpu_last_xid_timestamp_seconds{gpu=\"2\"")) << out;
  // The gone owner's record holds nothing.
  EXPECT_TRUE(contains(out, "flink_gpu_held{gpu=\"2\",uuid=\"" + uuidOf(2) + "\"} 0\n")) << out;
  EXPECT_TRUE(contains(out, "flink_gpu_coordination_records 2\n")) << out;
  EXPECT_TRUE(contains(out, "flink_gpu_coordination_dead_owner_records 1\n")) << out;
  for (const char* name :
       {"flink_gpu_held", "flink_gpu_healthy", "flink_gpu_drained", "flink_gpu_last_xid",
        "flink_gpu_last_xid_timestamp_seconds", "flink_gpu_coordination_records",
        "flink_gpu_coordination_dead_owner_records", "flink_gpu_nvml_up", "flink_gpu_gpus",
        "flink_gpu_build_info"}) {
    EXPECT_TRUE(contains(out, std::string("# HELP ") + name + " ")) << name;
  }

  // promtool (Debian's prometheus package, installed by scripts/install-deps.sh) reads stdin.
  ASSERT_TRUE(fs::exists(PROMTOOL)) << "promtool is missing: run scripts/install-deps.sh";
  std::ofstream(dir_ / "metrics.prom") << out;
  const fs::path script =
      writeScript(dir_ / "promtool.sh", "#!/bin/sh\nexec \"$1\" check metrics < \"$2\"\n");
  const flink::process::ProcessResult checked =
      flink::process::run({script.string(), PROMTOOL, (dir_ / "metrics.prom").string()}, {});
  EXPECT_EQ(checked.outcome.value(), 0)
      << checked.stdoutOutput.data << checked.stderrOutput.data << out;
  EXPECT_EQ(checked.stdoutOutput.data + checked.stderrOutput.data, "") << out;
}

// --- text from the files, quoted ----------------------------------------------------------------

/// Whether `text` can go to a terminal as it is: lines of well-formed UTF-8 without a control
/// character (C0 but line feeds, DEL, C1), so that nothing in it starts an escape sequence.
::testing::AssertionResult terminalSafe(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    char32_t codePoint = 0;
    const std::size_t length = flink::strings::utf8SequenceLength(text.substr(i), codePoint);
    if (length == 0) return ::testing::AssertionFailure() << "a byte that is not UTF-8 at " << i;
    if ((codePoint < 0x20 && codePoint != U'\n') || (codePoint >= 0x7f && codePoint <= 0x9f)) {
      return ::testing::AssertionFailure()
             << "control character " << static_cast<unsigned>(codePoint) << " at " << i
             << " in: " << text;
    }
    i += length;
  }
  return ::testing::AssertionSuccess();
}

TEST_F(HealthCliTest, TextFromTheFilesNeverMakesALineOfItsOwnNorReachesTheTerminal) {
  // GPU 0's name, as NVML gives it, holds an escape sequence.
  host(2, {R"("name": "NVIDIA\u001b[31m H200")"});
  // Health records whose reasons hold line breaks, escape sequences (ESC, C1 CSI in UTF-8) and
  // a byte that is not UTF-8; a line whose GPU and UUID would (a line break, BEL), which is junk
  // since a gpu= is a GPU's identifier and a uuid= a UUID, or nothing; and a junk line with a raw
  // ESC. The format's percent-encoding lets a writer put anything there.
  std::ofstream(healthFile())
      << "drained\tgpu=1\tuuid=" << uuidOf(1)
      << "\tsince=1000\tuid=0\treason=line one%0Aerror: forged%1B[2J\n"
      << "unhealthy\tgpu=7\tsince=1000\txid=79\tsource=watch\treason=bad%C2%9Bthing\n"
      << "readmitted\tgpu=7%0Afake\tuuid=GPU-x%1B]0;t%07\tsince=1000\n"
      << "drained\tgpu=9\tsince=5\treason=caf%E9\n"
      << "junk \x1b[31mline\n";
  // A record of GPU 0 (its DEVICE column shows the name) and a junk line.
  std::ofstream(coordinationFile()) << "0 " << ::getpid() << "\t1\nbad\x1b[2Jline\x9b\n";

  const CliRun check = cli({"check"});
  EXPECT_EQ(check.exitCode, 1) << check;
  EXPECT_TRUE(terminalSafe(check.out + check.err));
  EXPECT_TRUE(
      contains(check.out, "GPU 1 (" + uuidOf(1) + "): drained since 1970-01-01T00:16:40Z by uid 0"))
      << check;
  EXPECT_TRUE(contains(check.out, ": line one\\nerror: forged\\x1b[2J\n")) << check;
  // GPU 7 is not on this host: its verdict is stale state, a note, and fails no check.
  EXPECT_FALSE(contains(check.out, "GPU 7: unhealthy")) << check;
  EXPECT_TRUE(contains(check.out,
                       "note: unhealthy verdict names GPU 7 which this host does not "
                       "have; `flink-gpu undrain --stale` removes it\n"))
      << check;
  EXPECT_TRUE(contains(check.out,
                       "is not a health record: 'readmitted\\tgpu=7%0Afake\\tuuid=GPU-x"
                       "%1B]0;t%07\\tsince=1000'"))
      << check;
  EXPECT_TRUE(contains(check.out, "is not a health record: 'junk \\x1b[31mline'")) << check;
  EXPECT_TRUE(contains(check.out, "is not a record: 'bad\\x1b[2Jline\\x9b'")) << check;
  for (const std::string& line : linesOf(check.out)) {
    EXPECT_FALSE(line.starts_with("error: forged") || line.starts_with("fake")) << check;
  }

  const CliRun status = cli({"status"});
  EXPECT_EQ(status.exitCode, 0) << status;
  EXPECT_TRUE(terminalSafe(status.out + status.err));
  EXPECT_TRUE(contains(status.out, "NVIDIA\\x1b[31m H200")) << status;
  EXPECT_TRUE(contains(status.out,
                       "\n7    unhealthy  not on this host (state that outlived it: "
                       "see --stale); unhealthy since 1970-01-01T00:16:40Z: Xid 79 "
                       "(bad\\u009bthing)"))
      << status;
  EXPECT_TRUE(contains(status.out, "forged\\x1b[2J")) << status;
  for (const std::string& line : linesOf(status.out)) {
    EXPECT_FALSE(line.starts_with("error: forged") || line.starts_with("fake")) << status;
  }

  // JSON escapes what it must; the values are the records' own.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"status", "--format", "json"},
        std::vector<std::string>{"check", "--format", "json"}}) {
    const CliRun json = cli(args);
    EXPECT_TRUE(terminalSafe(json.out)) << json;
    EXPECT_EQ(linesOf(json.out).size(), 1u) << json;
  }
  const auto gpus = nlohmann::json::parse(cli({"status", "--format", "json"}).out).at("gpus");
  bool seven = false;
  for (const auto& gpu : gpus) {
    EXPECT_NE(gpu.at("gpu"), "7\nfake") << gpus;
    if (gpu.at("gpu") != "7") continue;
    seven = true;
    EXPECT_EQ(gpu.at("health").at("problems").at(0).at("reason"), "bad\xc2\x9bthing");
  }
  EXPECT_TRUE(seven) << gpus;

  // The metrics: UTF-8, escaped as the text format wants, and promtool takes them.
  const CliRun metrics = cli({"status", "--format", "prometheus"});
  EXPECT_EQ(metrics.exitCode, 0) << metrics;
  EXPECT_TRUE(terminalSafe(metrics.out));
  EXPECT_TRUE(contains(metrics.out, "flink_gpu_healthy{gpu=\"7\",uuid=\"\"} 0\n")) << metrics.out;
  EXPECT_TRUE(contains(metrics.out, "flink_gpu_drained{gpu=\"9\",uuid=\"\"} 1\n")) << metrics.out;
  std::ofstream(dir_ / "metrics.prom") << metrics.out;
  const fs::path script =
      writeScript(dir_ / "promtool.sh", "#!/bin/sh\nexec \"$1\" check metrics < \"$2\"\n");
  const flink::process::ProcessResult checked =
      flink::process::run({script.string(), PROMTOOL, (dir_ / "metrics.prom").string()}, {});
  EXPECT_EQ(checked.outcome.value(), 0)
      << checked.stdoutOutput.data << checked.stderrOutput.data << metrics.out;

  // The default discovery's note of the drained GPU is one line too.
  const CliRun discovery = discover(1);
  EXPECT_EQ(discovery.out, "0\n") << discovery;
  EXPECT_TRUE(terminalSafe(discovery.err));
  EXPECT_TRUE(contains(discovery.err,
                       "note: GPU 1 is not handed out: drained since "
                       "1970-01-01T00:16:40Z by uid 0"))
      << discovery;
  for (const std::string& line : linesOf(discovery.err)) {
    EXPECT_FALSE(line.starts_with("error: forged")) << discovery;
  }
}

// --- beside Flink's own script ------------------------------------------------------------------

TEST_F(HealthCliTest, FlinkScriptBesideTheHealthRecordsLosesNothing) {
  host(4);
  ASSERT_EQ(cli({"drain", "--gpu", "3", "--reason", "1 2 3 /d"}).exitCode, 0);
  const std::string health = readFile(healthFile());
  flink::testing::Background sleeper({flink::testing::sleepPath(), "60"}, "/dev/null");
  // Flink's script takes GPUs 0 and 1 with its grep, awk and sed on the coordination file.
  const flink::process::ProcessResult flink = flink::process::run(
      {"/bin/bash", FLINK_SCRIPT, coordinationFile(), "2", sleeper.pidText(), "0", "1", "2", "3"},
      {});
  ASSERT_EQ(flink.outcome.value(), 0) << flink.stdoutOutput.data << flink.stderrOutput.data;
  EXPECT_EQ(flink.stdoutOutput.data, "0,1\n");
  EXPECT_EQ(readFile(healthFile()), health) << "Flink's script touched the health records";
  // Ours hands out GPU 2 only: 0 and 1 are held, 3 is drained; Flink's records stay.
  const CliRun ours = discover(1, {"--enable-coordination-mode", "--owner-pid", sleeper.pidText()});
  EXPECT_EQ(ours.out, "2\n") << ours;
  EXPECT_EQ(discover(1, {"--enable-coordination-mode", "--owner-pid", sleeper.pidText()}).exitCode,
            1);
  const std::string records = readFile(coordinationFile());
  EXPECT_TRUE(contains(records, "0 " + sleeper.pidText() + "\n")) << records;
  EXPECT_TRUE(contains(records, "1 " + sleeper.pidText() + "\n")) << records;
  EXPECT_EQ(readFile(healthFile()), health);
  // undrain after Flink's sed: still one drain to clear, the records untouched.
  const flink::process::ProcessResult again = flink::process::run(
      {"/bin/bash", FLINK_SCRIPT, coordinationFile(), "1", sleeper.pidText(), "3"}, {});
  EXPECT_EQ(again.outcome.value(), 0);
  EXPECT_TRUE(contains(cli({"undrain", "--gpu", "3"}).out, "cleared drained of GPU 3"));
  EXPECT_TRUE(contains(readFile(coordinationFile()), "3 " + sleeper.pidText() + "\n"));
}

}  // namespace

// ---- output a program can rely on: --format json of the commands that change something ------

namespace {

TEST_F(HealthCliTest, TheCommandsThatChangeSomethingSayWhatAsJsonAndWhichFile) {
  host(3);
  CliRun run = cli({"drain", "--gpu", "1", "--reason", "fan", "--format", "json"});
  ASSERT_EQ(run.exitCode, 0) << run;
  nlohmann::json document = nlohmann::json::parse(run.out);
  EXPECT_EQ(document.at("format"), 1);
  EXPECT_EQ(document.at("coordination_file"), coordinationFile());
  EXPECT_EQ(document.at("file"), healthFile().string());
  EXPECT_EQ(document.at("changed"), true);
  EXPECT_EQ(document.at("gpu"), "1");
  EXPECT_EQ(document.at("uuid"), uuidOf(1));
  EXPECT_EQ(document.at("reason"), "fan");
  EXPECT_EQ(document.at("already_drained"), false);
  EXPECT_EQ(run.err, "") << run;

  // The same drain again: the same record, nothing changed.
  run = cli({"drain", "--gpu", "1", "--reason", "fan", "--format", "json"});
  EXPECT_EQ(nlohmann::json::parse(run.out).at("changed"), false) << run;
  EXPECT_EQ(nlohmann::json::parse(run.out).at("already_drained"), true) << run;

  // In text, a note on stderr says which file was written beside which coordination file.
  run = cli({"drain", "--gpu", "2"});
  EXPECT_EQ(run.err, "flink-gpu: note: recorded in " + healthFile().string() +
                         ", beside the coordination file " + coordinationFile() + "\n")
      << run;

  run = cli({"undrain", "--gpu", "1", "--format", "json"});
  ASSERT_EQ(run.exitCode, 0) << run;
  document = nlohmann::json::parse(run.out);
  EXPECT_EQ(document.at("changed"), true);
  EXPECT_EQ(document.at("cleared").size(), 1u) << run;
  EXPECT_EQ(document.at("cleared").at(0).at("kind"), "drained");
  EXPECT_EQ(document.at("cleared").at(0).at("reason"), "fan");
  const std::string before = readFile(healthFile());
  run = cli({"undrain", "--gpu", "0", "--format", "json"});
  document = nlohmann::json::parse(run.out);
  EXPECT_EQ(document.at("changed"), false);
  EXPECT_TRUE(document.at("cleared").empty());
  EXPECT_EQ(readFile(healthFile()), before);

  run = cli({"share", "--gpu", "0", "--replicas", "4", "--format", "json"});
  ASSERT_EQ(run.exitCode, 0) << run;
  document = nlohmann::json::parse(run.out);
  EXPECT_EQ(document.at("file"), coordinationFile() + ".sharing");
  EXPECT_EQ(document.at("declared").at(0).at("gpu"), "0");
  EXPECT_EQ(document.at("declared").at(0).at("replicas"), 4);
  EXPECT_TRUE(document.at("declared").at(0).at("replaced").is_null());
  run = cli({"unshare", "--gpu", "0", "--format", "json"});
  document = nlohmann::json::parse(run.out);
  EXPECT_EQ(document.at("changed"), true);
  EXPECT_EQ(document.at("removed").at(0).at("replicas"), 4);
  run = cli({"unshare", "--gpu", "0", "--format", "json"});
  EXPECT_EQ(nlohmann::json::parse(run.out).at("changed"), false) << run;

  std::ofstream(coordinationFile()) << "0 999999999\n1 " << ::getpid() << "\n";
  run = cli({"release", "--gone", "--format", "json"});
  ASSERT_EQ(run.exitCode, 0) << run;
  document = nlohmann::json::parse(run.out);
  EXPECT_EQ(document.at("file"), coordinationFile());
  EXPECT_EQ(document.at("released").size(), 1u) << run;
  EXPECT_EQ(document.at("released").at(0).at("owner_pid"), 999999999);
  EXPECT_EQ(document.at("released").at(0).at("owner_state"), "gone");
  run = cli({"release", "--gpu", "1", "--format", "json"});
  EXPECT_EQ(run.exitCode, 1) << run;
  document = nlohmann::json::parse(run.out);
  EXPECT_EQ(document.at("changed"), false);
  EXPECT_EQ(document.at("refused").at(0).at("owner_state"), "running");
}

TEST_F(HealthCliTest, StatusFiltersByGpuAndStateAndLeavesOutItsHeaders) {
  host(3);
  ASSERT_EQ(cli({"drain", "--gpu", "2"}).exitCode, 0);
  std::ofstream(coordinationFile()) << "0 " << ::getpid() << "\n1 999999999\n";
  const std::string self = std::to_string(::getpid());

  CliRun run = cli({"status", "--state", "held", "--no-headers"});
  ASSERT_EQ(run.exitCode, 0) << run;
  const std::vector<std::string> lines = linesOf(run.out);
  ASSERT_EQ(lines.size(), 3u) << run;  // the record, a blank line, the GPU
  EXPECT_TRUE(lines[0].starts_with("0  " + self)) << run;
  EXPECT_TRUE(lines[2].starts_with("0  held")) << run;

  // By UUID, in JSON: GPU 2 (drained) and nothing else; it has no record.
  run = cli({"status", "--gpu", uuidOf(2), "--format", "json"});
  ASSERT_EQ(run.exitCode, 0) << run;
  const nlohmann::json document = nlohmann::json::parse(run.out);
  EXPECT_EQ(document.at("gpus").size(), 1u) << run;
  EXPECT_EQ(document.at("gpus").at(0).at("state"), "drained");
  EXPECT_TRUE(document.at("records").empty()) << run;

  run = cli({"status", "--state", "free"});
  EXPECT_TRUE(contains(run.out, "\n1    free")) << run;
  EXPECT_TRUE(contains(run.out, "999999999")) << run;  // GPU 1's record, of a gone owner
  EXPECT_FALSE(contains(run.out, self)) << run;
  EXPECT_EQ(cli({"status", "--state", "lost"}).exitCode, 2);
  EXPECT_EQ(cli({"status", "--gpu", "0,1"}).exitCode, 2);
}

}  // namespace

}  // namespace health_cli_test
