// Tests of `flink-gpu status`, `release` and `exec` from the outside: the real binary on a
// coordination file of each test's own, with the commands that `exec` runs kept alive in the
// background where a test needs GPUs to stay held. Every background process is started in a
// process group of its own, and killed and reaped by the test that started it.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <ostream>
#include <regex>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "CliRun.h"
#include "TestSupport.h"
#include "process/Subprocess.h"

extern char** environ;

namespace {

/// status --format json without its size fields, which depend on the file's layout, and with
/// the words after "NVML is not usable: " (which library the test run points at) as "…".
std::string withoutFileSize(const std::string& json) {
  return std::regex_replace(
      std::regex_replace(json, std::regex(R"(,"size_bytes":\d+,"limit_bytes":\d+,"notes":\[\])"),
                         ""),
      std::regex(R"(NVML is not usable: [^"]*")"), "NVML is not usable: …\"");
}

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using flink::testing::Background;
using flink::testing::CliRun;
using flink::testing::FileRecord;
using flink::testing::firstLine;
using flink::testing::kCli;
using flink::testing::linesOf;
using flink::testing::readFile;
using flink::testing::readLines;
using flink::testing::recordsOf;
using flink::testing::runCli;
using flink::testing::TempDir;
using flink::testing::waitForLines;
using flink::testing::writeScript;

using flink::testing::contains;

std::vector<FileRecord> recordsIn(const fs::path& file) { return recordsOf(readLines(file)); }

class CoordinationCommandsTest : public ::testing::Test {
 protected:
  std::string coordinationFile() const { return (dir_ / "coordination").string(); }

  /// Starts `flink-gpu exec --amount <amount> --gpus <gpus> -- /bin/sh -c ...` in the background:
  /// the command writes "<its parent's pid> <CUDA_VISIBLE_DEVICES>" to `<name>.out`, then becomes
  /// `sleep 30`. Its parent is the exec started here, which holds the GPUs.
  std::unique_ptr<Background> startHolder(const std::string& name, int amount,
                                          const std::string& gpus) {
    const fs::path report = dir_ / (name + ".out");
    return std::make_unique<Background>(
        std::vector<std::string>{
            kCli, "exec", "--amount", std::to_string(amount), "--gpus", gpus, "--coordination-file",
            coordinationFile(), "--", "/bin/sh", "-c",
            "echo $PPID $CUDA_VISIBLE_DEVICES > '" + report.string() + "'; exec sleep 30"},
        dir_ / (name + ".stdout"), dir_ / (name + ".stderr"));
  }

  /// The "<pid> <gpus>" a holder wrote, once it has; fails the test after 10 s.
  std::vector<std::string> holderReport(const std::string& name) {
    const auto lines = waitForLines(dir_ / (name + ".out"), 1, 10s);
    if (lines.empty()) {
      ADD_FAILURE() << name << " did not start; stderr: " << readFile(dir_ / (name + ".stderr"));
      return {};
    }
    std::istringstream fields(lines.front());
    std::vector<std::string> words;
    for (std::string word; fields >> word;) words.push_back(word);
    return words;
  }

  /// A command line that creates `marker()` when it runs (to see that it did not).
  std::vector<std::string> touchMarker() const {
    return {"/bin/sh", "-c", "echo ran > '" + marker().string() + "'"};
  }
  fs::path marker() const { return dir_ / "marker"; }

  /// `flink-gpu exec <options> -- <command>` against the test's coordination file.
  CliRun exec(std::vector<std::string> options, const std::vector<std::string>& command) {
    std::vector<std::string> args{"exec", "--coordination-file", coordinationFile()};
    args.insert(args.end(), options.begin(), options.end());
    args.push_back("--");
    args.insert(args.end(), command.begin(), command.end());
    return runCli(args);
  }

  TempDir dir_{"flink-gpu-coordination-cli-test"};
};

// --- status -------------------------------------------------------------------------------

TEST_F(CoordinationCommandsTest, StatusOfAMissingFileSaysNoGpuIsHeld) {
  const CliRun text = runCli({"status", "--coordination-file", coordinationFile()});
  EXPECT_EQ(text.exitCode, 0) << text;
  EXPECT_EQ(text.out,
            "no GPU is held: coordination file " + coordinationFile() + " does not exist\n")
      << text;
  EXPECT_EQ(text.err, "") << text;
  EXPECT_FALSE(fs::exists(coordinationFile())) << "status created the file";

  const CliRun json =
      runCli({"status", "--coordination-file", coordinationFile(), "--format", "json"});
  EXPECT_EQ(json.exitCode, 0) << json;
  EXPECT_EQ(withoutFileSize(json.out),
            "{\"format\":1,\"coordination_file\":\"" + coordinationFile() +
                "\",\"records\":[],\"junk\":[],\"gpus\":[],\"health_records_error\":null,"
                "\"sharing_junk\":[],\"sharing_error\":null,\"nvml\":{\"usable\":false,"
                "\"installed\":false,\"gpus\":null,\"problem\":\"NVML is not usable: …\"},"
                "\"stale\":[],\"stale_cannot_tell\":\"NVML is not usable: …\"}\n")
      << json;
}

TEST_F(CoordinationCommandsTest, StatusShowsTheGpusOfRunningCommands) {
  auto first = startHolder("first", 1, "0,1,2");
  const auto firstReport = holderReport("first");
  auto second = startHolder("second", 1, "0,1,2");
  const auto secondReport = holderReport("second");
  ASSERT_EQ(firstReport, (std::vector<std::string>{std::to_string(first->pid()), "0"}));
  ASSERT_EQ(secondReport, (std::vector<std::string>{std::to_string(second->pid()), "1"}));

  // A record of a process that is gone: this test's pid, with a start time it never had.
  {
    std::ofstream append(coordinationFile(), std::ios::app);
    append << "2 " << ::getpid() << " 1\n";
  }

  const CliRun text = runCli({"status", "--coordination-file", coordinationFile()});
  EXPECT_EQ(text.exitCode, 0) << text;
  const auto row = [](const std::string& gpu, pid_t pid, const std::string& state) {
    std::string line = gpu + std::string(5 - gpu.size(), ' ');
    const std::string pidText = std::to_string(pid);
    line += pidText + std::string(11 - pidText.size(), ' ') + state + '\n';
    return line;
  };
  EXPECT_EQ(text.out, "GPU  OWNER PID  OWNER\n" + row("0", first->pid(), "running") +
                          row("1", second->pid(), "running") + row("2", ::getpid(), "gone"))
      << text;
  EXPECT_EQ(text.err, "") << text;

  const CliRun json =
      runCli({"status", "--coordination-file", coordinationFile(), "--format", "json"});
  ASSERT_EQ(json.exitCode, 0) << json;
  const auto parsed = nlohmann::json::parse(json.out);
  EXPECT_EQ(parsed.at("coordination_file"), coordinationFile());
  const auto& records = parsed.at("records");
  ASSERT_EQ(records.size(), 3u) << json;
  EXPECT_EQ(records[0].at("gpu"), "0");
  EXPECT_EQ(records[0].at("owner_pid"), first->pid());
  EXPECT_TRUE(records[0].at("owner_start_time").is_number_unsigned()) << json;
  EXPECT_EQ(records[0].at("running"), true);
  EXPECT_EQ(records[1].at("gpu"), "1");
  EXPECT_EQ(records[1].at("owner_pid"), second->pid());
  EXPECT_EQ(records[1].at("running"), true);
  EXPECT_EQ(records[2].at("owner_pid"), ::getpid());
  EXPECT_EQ(records[2].at("owner_start_time"), 1);
  EXPECT_EQ(records[2].at("running"), false);
  EXPECT_TRUE(parsed.at("junk").empty()) << json;
  // The keys in the documented order.
  EXPECT_TRUE(json.out.starts_with("{\"format\":1,\"coordination_file\":")) << json;
  EXPECT_TRUE(contains(json.out, "{\"gpu\":\"0\",\"vendor\":\"nvidia\",\"owner_pid\":")) << json;
}

TEST_F(CoordinationCommandsTest, StatusShowsATwoFieldRecordWithoutStartTime) {
  writeScript(coordinationFile(), "0 " + std::to_string(::getpid()) + "\n",
              fs::perms::owner_read | fs::perms::owner_write);
  const CliRun json =
      runCli({"status", "--coordination-file", coordinationFile(), "--format", "json"});
  ASSERT_EQ(json.exitCode, 0) << json;
  const auto record = nlohmann::json::parse(json.out).at("records").at(0);
  EXPECT_TRUE(record.at("owner_start_time").is_null()) << json;
  EXPECT_EQ(record.at("running"), true) << json;  // Flink's own form: pid alone, this process
}

TEST_F(CoordinationCommandsTest, StatusReportsJunkLines) {
  writeScript(coordinationFile(), "0 " + std::to_string(::getpid()) + " 1\nthis is junk\n",
              fs::perms::owner_read | fs::perms::owner_write);

  const CliRun text = runCli({"status", "--coordination-file", coordinationFile()});
  EXPECT_EQ(text.exitCode, 0) << text;
  EXPECT_TRUE(text.out.starts_with("GPU  OWNER PID  OWNER\n")) << text;
  ASSERT_EQ(linesOf(text.err).size(), 1u) << text;
  EXPECT_TRUE(text.err.starts_with("flink-gpu: warning:")) << text;
  EXPECT_TRUE(contains(text.err, "line 2")) << text;
  EXPECT_TRUE(contains(text.err, "'this is junk'")) << text;

  const CliRun json =
      runCli({"status", "--coordination-file", coordinationFile(), "--format", "json"});
  EXPECT_EQ(json.exitCode, 0) << json;
  EXPECT_EQ(json.err, "") << json;
  const auto parsed = nlohmann::json::parse(json.out);
  EXPECT_EQ(parsed.at("records").size(), 1u) << json;
  EXPECT_EQ(parsed.at("junk"), nlohmann::json::parse(R"([{"line":2,"text":"this is junk"}])"))
      << json;
}

TEST_F(CoordinationCommandsTest, StatusRejectsAnUnknownFormat) {
  const CliRun run =
      runCli({"status", "--coordination-file", coordinationFile(), "--format", "yaml"});
  EXPECT_EQ(run.exitCode, 2) << run;
  EXPECT_EQ(run.out, "") << run;
}

TEST_F(CoordinationCommandsTest, AMissingFolderIsNamedAsMissing) {
  // A mistyped --coordination-file: its folder, not a bare "No such file or directory".
  const std::string missing = (dir_ / "nodir").string();
  const std::string file = missing + "/coordination";
  std::vector<std::string> args{"exec", "--coordination-file", file, "--amount", "1", "--gpus", "0",
                                "--"};
  for (const std::string& word : touchMarker()) args.push_back(word);
  CliRun run = runCli(args);
  EXPECT_EQ(run.exitCode, 1) << run;
  EXPECT_EQ(run.err, "flink-gpu: error: coordination file " + file +
                         ": cannot create it: the folder " + missing + " does not exist\n")
      << run;
  EXPECT_FALSE(fs::exists(marker()));

  run = runCli({"status", "--coordination-file", file});
  EXPECT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(firstLine(run.out), "no GPU is held: coordination file " + file +
                                    " does not exist, nor does its folder " + missing)
      << run;

  run = runCli({"check", "--coordination-file", file});
  EXPECT_EQ(run.exitCode, 1) << run;
  EXPECT_TRUE(contains(run.out, "coordination file " + file +
                                    " does not exist and cannot be created: the folder " + missing +
                                    " does not exist"))
      << run;

  // A file where a folder should be.
  std::ofstream(dir_ / "plain") << "x\n";
  const std::string underAFile = (dir_ / "plain/coordination").string();
  args[2] = underAFile;
  args.insert(args.begin() + 7, {"--health", "ignore"});
  run = runCli(args);
  EXPECT_EQ(run.exitCode, 1) << run;
  EXPECT_EQ(run.err, "flink-gpu: error: coordination file " + underAFile + ": cannot open it: " +
                         (dir_ / "plain").string() + " is not a folder: it is a regular file\n")
      << run;
}

// --- exec ---------------------------------------------------------------------------------

/// The records a command printed (`cat` of the coordination file, after its first line).
std::vector<FileRecord> recordsPrinted(const std::string& out) {
  const std::vector<std::string> lines = linesOf(out);
  return lines.empty() ? std::vector<FileRecord>{}
                       : recordsOf(std::vector<std::string>(lines.begin() + 1, lines.end()));
}

TEST_F(CoordinationCommandsTest, ExecSetsCudaVisibleDevicesAndOwnsTheGpusWhileItsCommandRuns) {
  const CliRun run = exec(
      {"--amount", "2", "--gpus", "0,1,2"},
      {"/bin/sh", "-c", "echo $$ $PPID $CUDA_VISIBLE_DEVICES; cat '" + coordinationFile() + "'"});
  ASSERT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.err, "") << run;
  std::istringstream words(run.out);
  pid_t commandPid = 0;
  pid_t execPid = 0;
  std::string visible;
  ASSERT_TRUE(words >> commandPid >> execPid >> visible) << run;
  EXPECT_EQ(visible, "0,1") << run;
  EXPECT_NE(commandPid, execPid) << run;

  // While the command ran, the records named exec, its parent; once it ended, they went.
  const auto records = recordsPrinted(run.out);
  ASSERT_EQ(records.size(), 2u) << run;
  EXPECT_EQ(records[0].gpu, "0");
  EXPECT_EQ(records[1].gpu, "1");
  EXPECT_EQ(records[0].pid, execPid) << "the record's owner is not exec";
  EXPECT_EQ(records[1].pid, execPid);
  EXPECT_TRUE(recordsIn(coordinationFile()).empty()) << readFile(coordinationFile());
}

TEST_F(CoordinationCommandsTest, ExecPassesTheCommandsExitCodeAndOptionsThrough) {
  // No `--`: from the first word on, everything is the command's, -v and --amount included.
  const CliRun run =
      runCli({"exec", "--coordination-file", coordinationFile(), "--gpus", "0", "-n", "1",
              "/bin/sh", "-c", "echo \"$@\"; exit 3", "sh", "-v", "--amount", "5"});
  EXPECT_EQ(run.exitCode, 3) << run;
  EXPECT_EQ(run.out, "-v --amount 5\n") << run;
  EXPECT_EQ(run.err, "") << run;
}

TEST_F(CoordinationCommandsTest, ConcurrentExecsGetDisjointGpus) {
  // Started together, so that their allocations race on the lock.
  auto first = startHolder("first", 2, "0 1 2 3");
  auto second = startHolder("second", 2, "0 1 2 3");
  const auto firstReport = holderReport("first");
  const auto secondReport = holderReport("second");
  ASSERT_EQ(firstReport.size(), 2u);
  ASSERT_EQ(secondReport.size(), 2u);
  EXPECT_EQ(firstReport[0], std::to_string(first->pid()));
  EXPECT_EQ(secondReport[0], std::to_string(second->pid()));
  std::vector<std::string> together{firstReport[1], secondReport[1]};
  std::sort(together.begin(), together.end());
  EXPECT_EQ(together, (std::vector<std::string>{"0,1", "2,3"}));

  const auto records = recordsIn(coordinationFile());
  ASSERT_EQ(records.size(), 4u) << readFile(coordinationFile());
  for (const FileRecord& record : records) {
    const pid_t expected = contains(firstReport[1], record.gpu) ? first->pid() : second->pid();
    EXPECT_EQ(record.pid, expected) << "GPU " << record.gpu;
  }
}

TEST_F(CoordinationCommandsTest, NotEnoughFreeGpusExitsOneNamingTheHolder) {
  auto holder = startHolder("holder", 1, "0,1");
  ASSERT_EQ(holderReport("holder").size(), 2u);
  const std::string before = readFile(coordinationFile());

  const CliRun run = exec({"--amount", "2", "--gpus", "0,1"}, touchMarker());
  EXPECT_EQ(run.exitCode, 1) << run;
  EXPECT_EQ(run.out, "") << run;
  EXPECT_EQ(firstLine(run.err),
            "flink-gpu: error: not enough free GPUs: 2 requested, 1 free, 1 held")
      << run;
  EXPECT_TRUE(contains(run.err, "GPU 0 is held by process " + std::to_string(holder->pid())))
      << run;
  EXPECT_FALSE(fs::exists(marker())) << "the command ran";
  EXPECT_EQ(readFile(coordinationFile()), before);
}

TEST_F(CoordinationCommandsTest, AShortfallNamesAFewHoldersOfEachGpuAndCountsTheRest) {
  // GPUs 0 and 1 shared twenty ways, every share held (by this test's process): a file can hold a
  // great many records of one GPU, and the error names eight of each GPU's, then how many more.
  std::string text;
  for (int share = 0; share < 20; ++share) {
    for (const char* gpu : {"0", "1"}) {
      text += std::string(gpu) + " " + std::to_string(::getpid()) +
              "\tshare=" + std::to_string(share) + "/20\n";
    }
  }
  writeScript(coordinationFile(), text,
              fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                  fs::perms::others_read);
  const CliRun run =
      runCli({"discover", "--discovery-args",
              "--gpus 0,1 --enable-coordination-mode --coordination-file " + coordinationFile()});
  EXPECT_EQ(run.exitCode, 1) << run;
  EXPECT_TRUE(contains(run.err, "not enough free GPUs: 1 requested, 0 free, 2 held")) << run;
  for (const std::string gpu : {"0", "1"}) {
    std::size_t named = 0;
    for (std::size_t at = run.err.find("GPU " + gpu + " is shared: share ");
         at != std::string::npos; at = run.err.find("GPU " + gpu + " is shared: share ", at + 1)) {
      ++named;
    }
    EXPECT_EQ(named, 8u) << run;
    EXPECT_TRUE(contains(run.err, "GPU " + gpu + " is shared: share 7/20 is held by process " +
                                      std::to_string(::getpid())))
        << run;
    EXPECT_TRUE(contains(run.err, "... and 12 more like these of GPU " + gpu +
                                      " (`flink-gpu status` lists every record)"))
        << run;
  }
  EXPECT_EQ(readFile(coordinationFile()), text);
}

TEST_F(CoordinationCommandsTest, TheGpuIsFreeAgainWhenTheCommandEnds) {
  auto holder = startHolder("holder", 1, "0");
  ASSERT_EQ(holderReport("holder").size(), 2u);
  const CliRun refused = exec({"--amount", "1", "--gpus", "0"}, touchMarker());
  ASSERT_EQ(refused.exitCode, 1) << refused;
  EXPECT_TRUE(contains(refused.err, "held by process " + std::to_string(holder->pid()))) << refused;

  holder->stop();  // the command ends (killed, here): its GPU comes back

  const CliRun run =
      exec({"--amount", "1", "--gpus", "0"},
           {"/bin/sh", "-c", "echo $PPID $CUDA_VISIBLE_DEVICES; cat '" + coordinationFile() + "'"});
  ASSERT_EQ(run.exitCode, 0) << run;
  std::istringstream words(run.out);
  pid_t execPid = 0;
  std::string visible;
  ASSERT_TRUE(words >> execPid >> visible) << run;
  EXPECT_EQ(visible, "0");
  const auto records = recordsPrinted(run.out);
  ASSERT_EQ(records.size(), 1u) << run;
  EXPECT_EQ(records[0].pid, execPid);
}

TEST_F(CoordinationCommandsTest, MissingCommandExits127AndReleasesTheGpus) {
  const CliRun byName = exec({"--amount", "2", "--gpus", "0,1"}, {"flink-gpu-no-such-command"});
  EXPECT_EQ(byName.exitCode, 127) << byName;
  EXPECT_EQ(byName.out, "") << byName;
  EXPECT_EQ(firstLine(byName.err),
            "flink-gpu: error: cannot run 'flink-gpu-no-such-command': command not found")
      << byName;
  EXPECT_TRUE(recordsIn(coordinationFile()).empty()) << readFile(coordinationFile());

  const std::string missing = (dir_ / "missing").string();
  const CliRun byPath = exec({"--amount", "1", "--gpus", "0,1"}, {missing});
  EXPECT_EQ(byPath.exitCode, 127) << byPath;
  EXPECT_TRUE(firstLine(byPath.err).starts_with("flink-gpu: error: cannot run '" + missing + "'"))
      << byPath;
  EXPECT_TRUE(recordsIn(coordinationFile()).empty()) << readFile(coordinationFile());
}

TEST_F(CoordinationCommandsTest, CommandThatCannotBeExecutedExits126AndReleasesTheGpus) {
  const fs::path plain = writeScript(dir_ / "plain.sh", "#!/bin/sh\necho ran\n",
                                     fs::perms::owner_read | fs::perms::owner_write);
  const CliRun run = exec({"--amount", "1", "--gpus", "0"}, {plain.string()});
  EXPECT_EQ(run.exitCode, 126) << run;
  EXPECT_EQ(run.out, "") << run;
  EXPECT_TRUE(
      firstLine(run.err).starts_with("flink-gpu: error: cannot run '" + plain.string() + "': "))
      << run;
  EXPECT_TRUE(recordsIn(coordinationFile()).empty()) << readFile(coordinationFile());
}

TEST_F(CoordinationCommandsTest, ExecUsageErrorsExitTwoAndRunNothing) {
  const std::vector<std::vector<std::string>> cases = {
      {"exec", "--coordination-file", coordinationFile(), "--amount", "1", "--gpus", "0"},
      {"exec", "--coordination-file", coordinationFile(), "--amount", "1", "--gpus", "0", "--"},
      {"exec", "--coordination-file", coordinationFile(), "--amount", "0", "--gpus", "0", "--",
       "/bin/sh", "-c", "echo ran > '" + marker().string() + "'"},
      {"exec", "--coordination-file", coordinationFile(), "--amount", "-1", "--gpus", "0", "--",
       "/bin/sh", "-c", "echo ran > '" + marker().string() + "'"},
      {"exec", "--coordination-file", coordinationFile(), "--amount", "1", "--gpus", "0,x", "--",
       "/bin/sh", "-c", "echo ran > '" + marker().string() + "'"},
      {"exec", "--coordination-file", coordinationFile(), "--amount", "1", "--gpus", " , ", "--",
       "/bin/sh", "-c", "echo ran > '" + marker().string() + "'"},
      {"exec", "--coordination-file", coordinationFile(), "--gpus", "0", "--", "/bin/sh", "-c",
       "echo ran > '" + marker().string() + "'"},
  };
  for (const auto& args : cases) {
    const CliRun run = runCli(args);
    EXPECT_EQ(run.exitCode, 2) << run;
    EXPECT_EQ(run.out, "") << run;
    EXPECT_TRUE(firstLine(run.err).starts_with("flink-gpu: error:")) << run;
  }
  EXPECT_FALSE(fs::exists(marker())) << "a command ran";
  EXPECT_FALSE(fs::exists(coordinationFile())) << "a usage error touched the coordination file";
}

TEST_F(CoordinationCommandsTest, ExecRefusesTheAmountsDiscoverRefusesInItsWords) {
  // Each a usage error of both commands, said alike; the command never runs and no GPU is taken.
  // 99999999999999999999 was taken for 2^63 - 1 GPUs, 0x2 for 2, +1 and ' 1' for 1, and two,
  // 1.5 and 1e3 got CLI11's own words.
  const fs::path script = writeScript(dir_ / "two-gpus.sh", "#!/bin/sh\necho 0,1\n");
  for (const std::string amount :
       {"99999999999999999999", "two", "1.5", "", "-1", "0", "0x2", "1e3", "+1", " 1"}) {
    const CliRun discover =
        runCli({"discover", "--discovery-script", script.string(), "--amount", amount});
    const CliRun run = exec({"--amount", amount, "--gpus", "0,1,2"}, touchMarker());
    EXPECT_EQ(discover.exitCode, 2) << discover;
    EXPECT_EQ(run.exitCode, 2) << run;
    EXPECT_EQ(run.out, "") << run;
    EXPECT_EQ(run.err, discover.err) << run;
    const std::string wanted = "flink-gpu: error: invalid --amount '" + amount +
                               "': the amount of GPUs must be a positive integer" +
                               (amount == "99999999999999999999" ? " below 2^63\n" : "\n");
    EXPECT_EQ(run.err, wanted) << run;
  }
  EXPECT_FALSE(fs::exists(marker())) << "a command ran";
  EXPECT_FALSE(fs::exists(coordinationFile())) << "a usage error touched the coordination file";
  // What both accept, leading zeros included.
  const CliRun zeros =
      exec({"--amount", "002", "--gpus", "0,1,2"}, {"/bin/sh", "-c", "echo $CUDA_VISIBLE_DEVICES"});
  EXPECT_EQ(zeros.exitCode, 0) << zeros;
  EXPECT_EQ(zeros.out, "0,1\n") << zeros;
}

TEST_F(CoordinationCommandsTest, FewerGpusOnTheHostThanAskedExitsOne) {
  const CliRun run = exec({"--amount", "3", "--gpus", "0,1"}, touchMarker());
  EXPECT_EQ(run.exitCode, 1) << run;
  EXPECT_TRUE(firstLine(run.err).starts_with("flink-gpu: error: only 2 GPU(s)")) << run;
  EXPECT_FALSE(fs::exists(marker()));
}

TEST_F(CoordinationCommandsTest, ExecAsksNvidiaSmiWithoutGpus) {
  const fs::path bin = dir_ / "fake-bin";
  writeScript(bin / "nvidia-smi", "#!/bin/sh\nprintf '0\\n1\\n2\\n'\n");
  const CliRun run = runCli({"exec", "--coordination-file", coordinationFile(), "--amount", "2",
                             "--", "/bin/sh", "-c", "echo $CUDA_VISIBLE_DEVICES"},
                            {"PATH=" + bin.string() + ":/usr/bin:/bin"});
  EXPECT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, "0,1\n") << run;
  EXPECT_EQ(run.err, "") << run;
}

TEST_F(CoordinationCommandsTest, ExecWhenNvidiaSmiFailsExitsOne) {
  const fs::path bin = dir_ / "fake-bin";
  writeScript(bin / "nvidia-smi", "#!/bin/sh\necho 'NVIDIA-SMI has failed'\nexit 9\n");
  const CliRun run = runCli({"exec", "--coordination-file", coordinationFile(), "--amount", "1",
                             "--", "/bin/sh", "-c", "echo ran > '" + marker().string() + "'"},
                            {"PATH=" + bin.string() + ":/usr/bin:/bin"});
  EXPECT_EQ(run.exitCode, 1) << run;
  EXPECT_TRUE(firstLine(run.err).starts_with("flink-gpu: error:")) << run;
  EXPECT_TRUE(contains(run.err, "NVIDIA-SMI has failed")) << run;
  EXPECT_FALSE(fs::exists(marker()));
  EXPECT_FALSE(fs::exists(coordinationFile()));
}

TEST_F(CoordinationCommandsTest, ExecHelpSaysTheCommandRunsAsItsChild) {
  const CliRun run = runCli({"exec", "--help"});
  EXPECT_EQ(run.exitCode, 0) << run;
  // Not "replaces flink-gpu in the same process (same pid)", as it once did.
  EXPECT_FALSE(contains(run.out, "same pid")) << run;
  EXPECT_TRUE(contains(run.out, "The command runs as flink-gpu's child")) << run;
  EXPECT_TRUE(contains(run.out, "the command's $PPID")) << run;
  const CliRun top = runCli({"--help"});
  for (const char* command : {"status", "release", "exec"}) {
    EXPECT_TRUE(contains(top.out, command)) << top;
  }
}

// --- release ------------------------------------------------------------------------------

/// Records of this test process with a start time it never had (so: gone), and of pid 1
/// (running, whatever it is).
std::string sampleRecords() {
  const std::string self = std::to_string(::getpid());
  return "0 " + self + " 1\n1 1\n2 " + self + " 1\n";
}

TEST_F(CoordinationCommandsTest, ReleaseByOwner) {
  writeScript(coordinationFile(), sampleRecords(), fs::perms::owner_read | fs::perms::owner_write);
  const std::string self = std::to_string(::getpid());
  const CliRun run =
      runCli({"release", "--owner", self, "--coordination-file", coordinationFile()});
  EXPECT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out,
            "released GPU 0 (owner pid " + self + ")\nreleased GPU 2 (owner pid " + self + ")\n")
      << run;
  EXPECT_EQ(run.err, "") << run;
  EXPECT_EQ(readLines(coordinationFile()), (std::vector<std::string>{"1 1"}));
}

TEST_F(CoordinationCommandsTest, ReleaseByGpuOfARunningOwnerIsRefusedWithoutForce) {
  writeScript(coordinationFile(), sampleRecords(), fs::perms::owner_read | fs::perms::owner_write);
  const CliRun refused =
      runCli({"release", "--gpu", "01", "--coordination-file", coordinationFile()});
  EXPECT_EQ(refused.exitCode, 1) << refused;
  EXPECT_EQ(refused.out, "") << refused;
  EXPECT_EQ(firstLine(refused.err),
            "flink-gpu: error: refusing to release: GPU 1 is held by process 1, which is running")
      << refused;
  EXPECT_NE(refused.err.find("flink-gpu release --force"), std::string::npos) << refused;
  EXPECT_EQ(readFile(coordinationFile()), sampleRecords()) << "nothing was removed";

  const CliRun forced =
      runCli({"release", "--gpu", "01", "--force", "--coordination-file", coordinationFile()});
  EXPECT_EQ(forced.exitCode, 0) << forced;
  EXPECT_EQ(forced.out, "released GPU 1 (owner pid 1)\n") << forced;
  EXPECT_TRUE(firstLine(forced.err).starts_with("flink-gpu: warning: process 1 is still running"))
      << forced;
  EXPECT_EQ(recordsIn(coordinationFile()).size(), 2u) << readFile(coordinationFile());
}

TEST_F(CoordinationCommandsTest, ReleaseOfARunningCommandsGpuNeedsForce) {
  auto holder = startHolder("holder", 1, "0,1");
  ASSERT_EQ(holderReport("holder").size(), 2u);
  const std::string pid = std::to_string(holder->pid());
  const CliRun refused =
      runCli({"release", "--owner", pid, "--coordination-file", coordinationFile()});
  EXPECT_EQ(refused.exitCode, 1) << refused;
  EXPECT_EQ(recordsIn(coordinationFile()).size(), 1u) << readFile(coordinationFile());
  const CliRun run =
      runCli({"release", "--owner", pid, "--force", "--coordination-file", coordinationFile()});
  EXPECT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, "released GPU 0 (owner pid " + pid + ")\n") << run;
  // exec leases what it holds: the record goes, the GPU stays held while the lease does.
  EXPECT_EQ(run.err, "flink-gpu: warning: process " + pid +
                         " is still running and may still be using GPU 0 (--force); while its "
                         "lease is held (by the process or what it started), no worker gets the "
                         "GPU\n")
      << run;
  EXPECT_TRUE(recordsIn(coordinationFile()).empty()) << readFile(coordinationFile());
}

TEST_F(CoordinationCommandsTest, ReleaseOfAGoneOwnerOrOneOfAnotherNamespaceNeedsNoForce) {
  const pid_t gone = flink::testing::deadPid();
  writeScript(coordinationFile(), "0 " + std::to_string(gone) + "\t5\n1 1\t5\tpidns=1\n",
              fs::perms::owner_read | fs::perms::owner_write);
  const CliRun dead = runCli({"release", "--gpu", "0", "--coordination-file", coordinationFile()});
  EXPECT_EQ(dead.exitCode, 0) << dead;
  EXPECT_EQ(dead.err, "") << dead;
  const CliRun other = runCli({"release", "--gpu", "1", "--coordination-file", coordinationFile()});
  EXPECT_EQ(other.exitCode, 0) << other;
  EXPECT_NE(other.err.find("of another pid namespace, 1,"), std::string::npos) << other;
  EXPECT_TRUE(recordsIn(coordinationFile()).empty()) << readFile(coordinationFile());
}

TEST_F(CoordinationCommandsTest, ACommandThatClosesItsDescriptorsKeepsItsGpusWhileItRuns) {
  // As sudo (closefrom), daemons and Python's os.closerange do: the lease's descriptor goes, the
  // command runs on, and so its GPU stays taken.
  const fs::path report = dir_ / "closer.out";
  Background closer(
      {kCli, "exec", "--amount", "1", "--gpus", "0,1", "--coordination-file", coordinationFile(),
       "--", "/bin/bash", "-c",
       "for fd in /proc/$$/fd/*; do fd=${fd##*/}; [ \"$fd\" -gt 2 ] && eval \"exec $fd>&-\"; "
       "done; ls /proc/$$/fd > '" +
           report.string() + "'; exec sleep 30"},
      dir_ / "closer.stdout", dir_ / "closer.stderr");
  const auto open = waitForLines(report, 3, 10s);
  ASSERT_EQ(open, (std::vector<std::string>{"0", "1", "2"})) << readFile(dir_ / "closer.stderr");
  const CliRun second = runCli({"exec", "--amount", "2", "--gpus", "0,1", "--coordination-file",
                                coordinationFile(), "--", "true"});
  EXPECT_EQ(second.exitCode, 1) << second;
  EXPECT_NE(second.err.find("GPU 0 is held by process " + std::to_string(closer.pid())),
            std::string::npos)
      << second;
  // Once it has ended, its GPU comes back.
  closer.stop();
  const CliRun after = runCli({"exec", "--amount", "2", "--gpus", "0,1", "--coordination-file",
                               coordinationFile(), "--", "true"});
  EXPECT_EQ(after.exitCode, 0) << after;
}

TEST_F(CoordinationCommandsTest, AnExecRunByAnExecGetsWhatThatOneAlreadyHolds) {
  // `flink-gpu exec … -- flink-gpu exec …`: one process tree, one allocation, the outer exec's.
  const auto nestedExec = [&](const std::string& innerAmount,
                              const std::vector<std::string>& command) {
    std::vector<std::string> args{"exec",
                                  "--amount",
                                  "1",
                                  "--gpus",
                                  "0,1,2",
                                  "--coordination-file",
                                  coordinationFile(),
                                  "--",
                                  kCli,
                                  "exec",
                                  "--amount",
                                  innerAmount,
                                  "--gpus",
                                  "0,1,2",
                                  "--coordination-file",
                                  coordinationFile(),
                                  "--"};
    args.insert(args.end(), command.begin(), command.end());
    return runCli(args);
  };
  // The inner exec becomes the command: its parent is the outer one, the records' owner.
  const CliRun nested = nestedExec(
      "1", {"/bin/sh", "-c", "echo $CUDA_VISIBLE_DEVICES $PPID; cat '" + coordinationFile() + "'"});
  ASSERT_EQ(nested.exitCode, 0) << nested;
  std::istringstream fields(nested.out);
  std::string gpu;
  std::string pid;
  fields >> gpu >> pid;
  EXPECT_EQ(gpu, "0") << nested;
  const std::vector<FileRecord> records = recordsPrinted(nested.out);
  ASSERT_EQ(records.size(), 1u) << nested;
  EXPECT_EQ(records[0].gpu, "0");
  EXPECT_EQ(std::to_string(records[0].pid), pid) << nested;
  EXPECT_TRUE(recordsIn(coordinationFile()).empty()) << readFile(coordinationFile());
  // It cannot ask for more than it holds.
  const CliRun more = nestedExec("2", {"true"});
  EXPECT_EQ(more.exitCode, 1) << more;
  EXPECT_NE(more.err.find("one allocation per process"), std::string::npos) << more;
}

TEST_F(CoordinationCommandsTest, ALeaseStillHeldIsHeldWhenItsFileIsRemovedOrReplaced) {
  // The command ends at once, leaving a child that holds its lease (and so may use the GPU);
  // then the lease file goes (systemd-tmpfiles, rm), or someone puts a free file in its place.
  const fs::path childPid = dir_ / "child";
  Background command(
      {kCli, "exec", "--amount", "1", "--gpus", "0", "--coordination-file", coordinationFile(),
       "--", "/bin/sh", "-c", "sleep 60 > /dev/null 2>&1 & echo $! > '" + childPid.string() + "'"},
      dir_ / "command.out", dir_ / "command.err");
  // Not reaped (its group, the child with it, would go): a zombie, whose pid holds nothing.
  ASSERT_EQ(waitForLines(childPid, 1, 10s).size(), 1u) << readFile(dir_ / "command.err");
  EXPECT_EQ(flink::testing::waitUntilGone({command.pid()}, 10s), std::vector<pid_t>{});
  const pid_t child = static_cast<pid_t>(std::stol(readFile(childPid)));
  const fs::path lease = fs::path(coordinationFile() + ".leases") / "index-0";
  for (const bool replace : {false, true}) {
    fs::remove(lease);
    if (replace) std::ofstream(lease).flush();
    const CliRun second = runCli({"exec", "--amount", "1", "--gpus", "0", "--coordination-file",
                                  coordinationFile(), "--", "true"});
    EXPECT_EQ(second.exitCode, 1) << (replace ? "replaced: " : "removed: ") << second;
  }
  // status says why it is held: the kernel lists the child's lock (/proc/locks), or, where it
  // leaves it out, the lease file is missing.
  const CliRun status = runCli({"status", "--coordination-file", coordinationFile()});
  EXPECT_TRUE(contains(status.out, "lease held by another process") ||
              contains(status.out, "its lease file is missing"))
      << status;
  ::kill(child, SIGKILL);
  EXPECT_EQ(flink::testing::waitUntilGone({child}, 10s), std::vector<pid_t>{});
  // Nothing here can tell that the lease went with the child: held until an operator says.
  const CliRun release =
      runCli({"release", "--gpu", "0", "--coordination-file", coordinationFile()});
  ASSERT_EQ(release.exitCode, 0) << release;
  const CliRun after = runCli({"exec", "--amount", "1", "--gpus", "0", "--coordination-file",
                               coordinationFile(), "--", "true"});
  EXPECT_EQ(after.exitCode, 0) << after;
}

TEST_F(CoordinationCommandsTest, StatusShowsAGpuHeldByALeaseWithoutItsRecordAsHeld) {
  auto holder = startHolder("holder", 1, "0,1");
  ASSERT_EQ(holderReport("holder").size(), 2u);
  ASSERT_EQ(runCli({"release", "--gpu", "0", "--force", "--coordination-file", coordinationFile()})
                .exitCode,
            0);
  const CliRun text = runCli({"status", "--coordination-file", coordinationFile()});
  EXPECT_EQ(text.exitCode, 0) << text;
  EXPECT_TRUE(contains(text.out, "held by a lease of another process, without a record")) << text;
  const CliRun metrics =
      runCli({"status", "--coordination-file", coordinationFile(), "--format", "prometheus"});
  EXPECT_TRUE(contains(metrics.out, "flink_gpu_held{gpu=\"0\",uuid=\"\"} 1\n")) << metrics;
  // And no allocation takes it.
  const CliRun other = runCli({"exec", "--amount", "2", "--gpus", "0,1", "--coordination-file",
                               coordinationFile(), "--", "true"});
  EXPECT_EQ(other.exitCode, 1) << other;
}

TEST_F(CoordinationCommandsTest, AnExecStartedWithItsStandardDescriptorsClosedKeepsItsLease) {
  // Started with 0, 1 and 2 closed, its lease would be the command's stderr, which a daemon's
  // `>/dev/null 2>&1` closes: the child it leaves must still hold the GPU.
  const fs::path childPid = dir_ / "child";
  Background command(
      {"/bin/sh", "-c",
       "exec '" + std::string(kCli) + "' exec --amount 1 --gpus 0 " + "--coordination-file '" +
           coordinationFile() + "' -- /bin/sh -c '(exec </dev/null >/dev/null 2>&1; sleep 60) & " +
           "echo $! > " + childPid.string() + "' <&- >&- 2>&-"},
      dir_ / "command.out", dir_ / "command.err");
  ASSERT_EQ(waitForLines(childPid, 1, 10s).size(), 1u) << readFile(dir_ / "command.err");
  EXPECT_EQ(flink::testing::waitUntilGone({command.pid()}, 10s), std::vector<pid_t>{});
  const CliRun second = runCli({"exec", "--amount", "1", "--gpus", "0", "--coordination-file",
                                coordinationFile(), "--", "true"});
  EXPECT_EQ(second.exitCode, 1) << second;
  ::kill(static_cast<pid_t>(std::stol(readFile(childPid))), SIGKILL);
}

TEST_F(CoordinationCommandsTest, ReleaseOfNothingSaysSo) {
  writeScript(coordinationFile(), sampleRecords(), fs::perms::owner_read | fs::perms::owner_write);
  const CliRun byGpu = runCli({"release", "--gpu", "7", "--coordination-file", coordinationFile()});
  EXPECT_EQ(byGpu.exitCode, 0) << byGpu;
  EXPECT_TRUE(byGpu.out.starts_with("GPU 7 is not held")) << byGpu;
  // An owner with no record is a failure, as kill(1)'s "no such process": a mistyped pid must
  // not pass for done.
  const CliRun byOwner =
      runCli({"release", "--owner", "999999999", "--coordination-file", coordinationFile()});
  EXPECT_EQ(byOwner.exitCode, 1) << byOwner;
  EXPECT_TRUE(byOwner.err.starts_with("flink-gpu: error: no GPU is held by process 999999999"))
      << byOwner;
  EXPECT_EQ(byOwner.out, "") << byOwner;
  EXPECT_EQ(readFile(coordinationFile()), sampleRecords());

  const CliRun missing =
      runCli({"release", "--gpu", "0", "--coordination-file", (dir_ / "missing").string()});
  EXPECT_EQ(missing.exitCode, 0) << missing;
  EXPECT_FALSE(fs::exists(dir_ / "missing"));
}

TEST_F(CoordinationCommandsTest, ReleaseGoneRemovesTheRecordsOfOwnersKnownToBeGone) {
  const std::string self = std::to_string(::getpid());
  // Running (no start time); gone (no such pid); gone (this pid, another start time: reused);
  // of another pid namespace without a lease: cannot be judged, so held.
  writeScript(coordinationFile(),
              "0 " + self + "\n1 999999999\n2 " + self + "\t1\n3 1\t5\tpidns=1\n",
              fs::perms::owner_read | fs::perms::owner_write);
  const CliRun run = runCli({"release", "--gone", "--coordination-file", coordinationFile()});
  EXPECT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, "released GPU 1 (owner pid 999999999, gone)\nreleased GPU 2 (owner pid " +
                         self + ", gone)\nremoved 2 record(s) of owners that are gone " +
                         "(coordination file " + coordinationFile() + ")\n")
      << run;
  EXPECT_EQ(readLines(coordinationFile()),
            (std::vector<std::string>{"0 " + self, "3 1\t5\tpidns=1"}));
  const CliRun again = runCli({"release", "--gone", "--coordination-file", coordinationFile()});
  EXPECT_EQ(again.exitCode, 0) << again;
  EXPECT_THAT(again.out, ::testing::HasSubstr("removed 0 record(s)")) << again;
}

TEST_F(CoordinationCommandsTest, ReleaseGoneNamesTwentyRecordsAndCountsTheRest) {
  // A file can hold hundreds of thousands of gone owners' records: the text names twenty, the
  // JSON every one.
  std::string text;
  for (int pid = 0; pid < 25; ++pid) text += "0 " + std::to_string(999999000 + pid) + "\n";
  writeScript(coordinationFile(), text, fs::perms::owner_read | fs::perms::owner_write);
  const CliRun run = runCli({"release", "--gone", "--coordination-file", coordinationFile()});
  EXPECT_EQ(run.exitCode, 0) << run;
  std::vector<std::string> lines;
  std::istringstream out(run.out);
  for (std::string line; std::getline(out, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 22u) << run;
  EXPECT_EQ(lines[19], "released GPU 0 (owner pid 999999019, gone)");
  EXPECT_EQ(lines[20], "... and 5 more like these (`--format json` lists every record)");
  EXPECT_THAT(lines[21], ::testing::StartsWith("removed 25 record(s) of owners that are gone"));
  writeScript(coordinationFile(), text, fs::perms::owner_read | fs::perms::owner_write);
  const CliRun json =
      runCli({"release", "--gone", "--format", "json", "--coordination-file", coordinationFile()});
  EXPECT_EQ(json.exitCode, 0) << json;
  EXPECT_EQ(nlohmann::json::parse(json.out).at("released").size(), 25u) << json;
}

// A writer that waits on another process's lock says so after a second, naming the file and
// the holder, then how the wait ended; status does not wait at all.
TEST_F(CoordinationCommandsTest, AWaitForTheLockIsToldAndStatusDoesNotWait) {
  const std::string self = std::to_string(::getpid());
  writeScript(coordinationFile(), "0 " + self + "\n1 999999999\n",
              fs::perms::owner_read | fs::perms::owner_write);
  // flock(1) holds the file's lock (Flink's script takes the same lock) for `seconds`.
  const auto holdTheLock = [&](const std::string& name, const std::string& seconds) {
    const fs::path ready = dir_ / name;
    auto holder = std::make_unique<Background>(
        std::vector<std::string>{"/usr/bin/flock", coordinationFile(), "/bin/sh", "-c",
                                 "echo locked > " + ready.string() + "; sleep " + seconds},
        dir_ / (name + ".log"));
    EXPECT_EQ(waitForLines(ready, 1, 10s).size(), 1u);
    return holder;
  };

  // Held for a minute: status reads the records all the same (a wait would have ended in its
  // 10 s time-out, exit 1).
  std::unique_ptr<Background> holder = holdTheLock("ready-status", "60");
  const CliRun status = runCli({"status", "--coordination-file", coordinationFile()});
  EXPECT_EQ(status.exitCode, 0) << status;
  EXPECT_TRUE(contains(status.out, "999999999")) << status;
  EXPECT_FALSE(contains(status.err, "lock")) << status;
  holder->stop();

  // Held until release has said that it waits (after a second of waiting), then let go: release
  // goes on, and says how the wait ended. (A holder that let go after a fixed time raced a slow
  // start of release: one that reached the lock less than a second before it was let go had
  // nothing to say.)
  holder = holdTheLock("ready-release", "60");
  const fs::path releaseOut = dir_ / "release.out";
  const fs::path releaseErr = dir_ / "release.err";
  Background release({kCli, "release", "--gpu", "1", "--coordination-file", coordinationFile()},
                     releaseOut, releaseErr);
  ASSERT_EQ(waitForLines(releaseErr, 1, 30s).size(), 1u);
  const std::string heldBy = holder->pidText();
  holder->stop();
  EXPECT_EQ(release.waitForExit(30s), std::optional<int>(0)) << readFile(releaseErr);
  const std::vector<std::string> err = linesOf(readFile(releaseErr));
  ASSERT_EQ(err.size(), 2u) << readFile(releaseErr);
  // The holder's command line, cut at 120 bytes.
  EXPECT_TRUE(err[0].starts_with("flink-gpu: note: waiting for the lock of " + coordinationFile() +
                                 ", held by process " + heldBy + " (/usr/bin/flock " +
                                 coordinationFile() + " /bin/sh -c echo locked > "))
      << err[0];
  EXPECT_TRUE(
      err[1].starts_with("flink-gpu: note: got the lock of " + coordinationFile() + " after "))
      << err[1];
  EXPECT_EQ(readFile(releaseOut), "released GPU 1 (owner pid 999999999)\n");
}

TEST_F(CoordinationCommandsTest, ReleaseNeedsExactlyOneOfOwnerAndGpu) {
  writeScript(coordinationFile(), sampleRecords(), fs::perms::owner_read | fs::perms::owner_write);
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"release", "--coordination-file", coordinationFile()},
           {"release", "--owner", "1", "--gpu", "1", "--coordination-file", coordinationFile()},
           {"release", "--owner", "0", "--coordination-file", coordinationFile()},
           {"release", "--owner", "x", "--coordination-file", coordinationFile()},
           {"release", "--owner", "99999999999", "--coordination-file", coordinationFile()},
           {"release", "--gpu", "x", "--coordination-file", coordinationFile()},
           {"release", "--gpu", "0,1", "--coordination-file", coordinationFile()}}) {
    const CliRun run = runCli(args);
    EXPECT_EQ(run.exitCode, 2) << run;
    EXPECT_EQ(run.out, "") << run;
    EXPECT_TRUE(firstLine(run.err).starts_with("flink-gpu: error:")) << run;
  }
  EXPECT_EQ(readFile(coordinationFile()), sampleRecords());
}

// --- a coordination file that must not be used -------------------------------------------

TEST_F(CoordinationCommandsTest, SymlinkAtTheCoordinationPathIsRefusedByEveryCommand) {
  const fs::path target = dir_ / "target";
  writeScript(target, sampleRecords(), fs::perms::owner_read | fs::perms::owner_write);
  fs::create_symlink(target, coordinationFile());

  const std::vector<std::vector<std::string>> cases = {
      {"status", "--coordination-file", coordinationFile()},
      {"status", "--coordination-file", coordinationFile(), "--format", "json"},
      {"release", "--gpu", "1", "--coordination-file", coordinationFile()},
      {"release", "--owner", std::to_string(::getpid()), "--coordination-file", coordinationFile()},
      {"exec", "--amount", "1", "--gpus", "3", "--coordination-file", coordinationFile(), "--",
       "/bin/sh", "-c", "echo ran > '" + marker().string() + "'"},
  };
  for (const auto& args : cases) {
    const CliRun run = runCli(args);
    EXPECT_EQ(run.exitCode, 1) << run;
    EXPECT_EQ(run.out, "") << run;
    const std::string first = firstLine(run.err);
    EXPECT_TRUE(first.starts_with("flink-gpu: error: coordination file " + coordinationFile()))
        << run;
    EXPECT_TRUE(contains(first, "symbolic link")) << run;
  }
  EXPECT_FALSE(fs::exists(marker())) << "exec ran the command";
  EXPECT_EQ(readFile(target), sampleRecords()) << "the symlink's target was changed";
  EXPECT_TRUE(fs::is_symlink(coordinationFile()));
}

}  // namespace
