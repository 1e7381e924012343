// The allocation file of `flink-gpu exec` (FLINK_GPU_ALLOCATION_FILE) from the outside: the real
// binary on the stand-in libnvidia-ml.so.1. What the file says under an inherited mask and with
// --bind-cpus (its JSON, parsed, compared whole), its folder and modes, where it goes
// ($XDG_RUNTIME_DIR, $TMPDIR, and /tmp when others may replace the folder in $TMPDIR, or $TMPDIR
// in a folder above it), a stale inherited value replaced; the folder swapped for another during
// the command (the impostor left alone, the folder emptied wherever it was moved); its removal
// when the command ends, exits non-zero, is killed, when exec is sent SIGTERM, when the command
// cannot be run and when nothing is run; an exec nested in an exec (the enclosing file kept, or
// one of its own beside it, removed with the enclosing folder), and one whose enclosing process
// gave it no file.
// The share's members are ExecShareCliTest's (it has the stand-in MPS daemon).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "CliRun.h"
#include "StandInHost.h"
#include "TestSupport.h"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using flink::testing::allowedCpus;
using flink::testing::Background;
using flink::testing::CliRun;
using flink::testing::kCli;
using flink::testing::readFile;
using flink::testing::readLines;
using flink::testing::runCli;
using flink::testing::standInUuid;
using flink::testing::TempDir;
using flink::testing::waitForLines;
using nlohmann::json;

std::string busIdOf(unsigned index) {
  char busId[32];
  std::snprintf(busId, sizeof busId, "00000000:%02X:00.0", 0x19 + index);
  return busId;
}

/// What the file says of stand-in GPU `gpu` of host(), seen as ordinal `index`.
json unitOf(unsigned gpu, const std::string& index) {
  return {{"index", index},
          {"uuid", standInUuid(gpu)},
          {"pci.bus_id", busIdOf(gpu)},
          {"name", "NVIDIA H200"},
          {"memory.total", 143771}};
}

class ExecAllocationFileCliTest : public ::testing::Test {
 protected:
  ExecAllocationFileCliTest() { fs::create_directory(tmp()); }

  /// Four H200s of 143771 MiB with their PCI bus ids; GPU 0's CPU is the first this test may use.
  void SetUp() override {
    std::vector<std::string> members;
    const std::vector<unsigned> cpus = allowedCpus();
    for (unsigned i = 0; i < 4; ++i) {
      members.push_back(
          std::string(flink::testing::kH200Members) + R"(, "pci_bus_id": ")" + busIdOf(i) + "\"" +
          (i == 0 && !cpus.empty() ? R"(, "cpu_affinity": ")" + std::to_string(cpus[0]) + "\""
                                   : std::string()));
    }
    flink::testing::writeStandInHost(dir_ / "host.json", 4, members);
  }

  std::string file() const { return (dir_ / "coordination").string(); }
  /// $TMPDIR of every exec: where its folder goes ($XDG_RUNTIME_DIR is empty, not set).
  fs::path tmp() const { return dir_ / "tmp"; }

  std::vector<std::string> environment(const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> env{std::string("FLINK_GPU_NVML_LIBRARY=") + FAKE_NVML_FULL,
                                 "FAKE_NVML_DEVICES=" + (dir_ / "host.json").string(),
                                 "PATH=/usr/bin:/bin",
                                 "TMPDIR=" + tmp().string(),
                                 "XDG_RUNTIME_DIR=",
                                 "DIR=" + dir_.path().string(),
                                 std::string("CLI=") + kCli,
                                 "FILE=" + file()};
    env.insert(env.end(), extra.begin(), extra.end());
    return env;
  }

  /// `flink-gpu exec --coordination-file F <options> -- <command>`, run to completion.
  CliRun exec(const std::vector<std::string>& options, const std::vector<std::string>& command,
              const std::vector<std::string>& extraEnvironment = {}) const {
    std::vector<std::string> args{"exec", "--coordination-file", file()};
    args.insert(args.end(), options.begin(), options.end());
    args.push_back("--");
    args.insert(args.end(), command.begin(), command.end());
    return runCli(args, environment(extraEnvironment));
  }

  /// A command that keeps, in $DIR/<name>.*, what it was given: the file's path (`.path`), its
  /// parent's pid (`.ppid`: exec's), the modes of the file and its folder (`.modes`), and a copy
  /// of the file (`.json`).
  std::vector<std::string> report(const std::string& name = "seen") const {
    const std::string at = "\"$DIR/" + name;
    return {"/bin/sh", "-c",
            "f=\"$FLINK_GPU_ALLOCATION_FILE\"; echo \"$f\" > " + at + ".path\"; echo $PPID > " +
                at + ".ppid\"; stat -c %a \"$f\" \"${f%/*}\" > " + at + ".modes\"; cp \"$f\" " +
                at + ".json\""};
  }

  std::string line(const std::string& file) const {
    const std::vector<std::string> lines = readLines(dir_ / file);
    return lines.empty() ? std::string() : lines[0];
  }
  json copy(const std::string& name = "seen") const {
    return json::parse(readFile(dir_ / (name + ".json")), nullptr, false);
  }
  /// What a file of exec's owner `name`.ppid and these units and CPUs says.
  json expected(const std::string& name, const json& units, const json& cpus = nullptr) const {
    return {{"format", 1},
            {"owner_pid", std::atoi(line(name + ".ppid").c_str())},
            {"units", units},
            {"cpus", cpus}};
  }

  /// Nothing is left in $TMPDIR.
  void expectNothingLeft(const std::string& when) const {
    EXPECT_TRUE(fs::is_empty(tmp())) << when << ": " << fs::directory_iterator(tmp())->path();
  }

  TempDir dir_{"exec-allocation-file"};
};

TEST_F(ExecAllocationFileCliTest, UnderAnInheritedMaskItListsTheUnitsAsTheCommandSeesThem) {
  // exec sees GPUs 2 and 3 only; its command sees them as CUDA's 0 and 1. A value inherited from
  // elsewhere is replaced.
  const CliRun run = exec({"-n", "2"}, report(),
                          {"CUDA_VISIBLE_DEVICES=2,3", "FLINK_GPU_ALLOCATION_FILE=/etc/passwd"});
  ASSERT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.err, "") << run;
  EXPECT_EQ(copy(), expected("seen", json::array({unitOf(2, "0"), unitOf(3, "1")})))
      << readFile(dir_ / "seen.json");
  // Its own folder in $TMPDIR, which only this user may enter; the file 0600.
  const fs::path path = line("seen.path");
  EXPECT_EQ(path.parent_path().parent_path(), tmp()) << path;
  EXPECT_THAT(path.parent_path().filename().string(), ::testing::StartsWith("flink-gpu-exec."));
  EXPECT_EQ(path.filename(), "allocation.json");
  EXPECT_EQ(readLines(dir_ / "seen.modes"), (std::vector<std::string>{"600", "700"}));
  // Gone with the command, folder and all.
  EXPECT_FALSE(fs::exists(path.parent_path())) << path;
  expectNothingLeft("after the command");
}

TEST_F(ExecAllocationFileCliTest, WithBindCpusItListsTheCpusBoundTo) {
  const std::vector<unsigned> cpus = allowedCpus();
  ASSERT_FALSE(cpus.empty());
  const CliRun bound = exec({"-n", "1", "--placement", "index", "--bind-cpus"}, report());
  ASSERT_EQ(bound.exitCode, 0) << bound;
  EXPECT_EQ(copy(), expected("seen", json::array({unitOf(0, "0")}), json::array({cpus[0]})))
      << readFile(dir_ / "seen.json");
  // GPU 1's CPUs are unknown: the command is not bound, and the file says so.
  const CliRun unbound =
      exec({"-n", "2", "--placement", "index", "--bind-cpus"}, report("unbound"));
  ASSERT_EQ(unbound.exitCode, 0) << unbound;
  EXPECT_EQ(copy("unbound"), expected("unbound", json::array({unitOf(0, "0"), unitOf(1, "1")})))
      << readFile(dir_ / "unbound.json");
  expectNothingLeft("after the commands");
}

TEST_F(ExecAllocationFileCliTest, ItGoesInThePrivateRuntimeFolderOfTheUserElseInTmpdir) {
  const fs::path runtime = dir_ / "runtime";
  fs::create_directory(runtime);
  fs::permissions(runtime, fs::perms::owner_all);
  const CliRun run = exec({"-n", "1"}, report(), {"XDG_RUNTIME_DIR=" + runtime.string()});
  ASSERT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(fs::path(line("seen.path")).parent_path().parent_path(), runtime);
  EXPECT_TRUE(fs::is_empty(runtime));
  // One that others may enter is not used.
  fs::permissions(runtime, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
  const CliRun open = exec({"-n", "1"}, report(), {"XDG_RUNTIME_DIR=" + runtime.string()});
  ASSERT_EQ(open.exitCode, 0) << open;
  EXPECT_EQ(fs::path(line("seen.path")).parent_path().parent_path(), tmp());
  expectNothingLeft("after the commands");
}

TEST_F(ExecAllocationFileCliTest, ATmpdirThatOthersMayReplaceTheFolderInIsPassedOverForTmp) {
  // Sticky, as /tmp: used.
  fs::permissions(tmp(), fs::perms::all | fs::perms::sticky_bit);
  const CliRun sticky = exec({"-n", "1"}, report());
  ASSERT_EQ(sticky.exitCode, 0) << sticky;
  EXPECT_EQ(sticky.err, "") << sticky;
  EXPECT_EQ(fs::path(line("seen.path")).parent_path().parent_path(), tmp());
  // Not sticky: anyone could rename exec's folder away and put theirs in its place.
  fs::permissions(tmp(), fs::perms::all);
  const CliRun open = exec({"-n", "1"}, report());
  ASSERT_EQ(open.exitCode, 0) << open;
  // One line: why, and the folder's owner and mode.
  EXPECT_THAT(open.err, ::testing::MatchesRegex(
                            "flink-gpu: warning: TMPDIR " + tmp().string() +
                            " is not used for the allocation file: anyone may write it and it "
                            "lacks the sticky bit, so others may rename what is made in it and "
                            "put something else in its place \\(owner [^\n]*, mode 0777\\)\n"))
      << open;
  const fs::path path = line("seen.path");
  EXPECT_EQ(path.parent_path().parent_path(), "/tmp");
  EXPECT_FALSE(fs::exists(path.parent_path())) << path;
  expectNothingLeft("after the commands");
}

TEST_F(ExecAllocationFileCliTest, ATmpdirBelowAFolderThatOthersMayWriteIsPassedOverForTmp) {
  // $TMPDIR itself 0755, but the folder above it 0777: anyone could rename $TMPDIR away and put
  // a path of theirs, with a forged file at exec's folder's name, in its place.
  const fs::path open = dir_ / "p777";
  const fs::path below = open / "sub";
  fs::create_directories(below);
  fs::permissions(open, fs::perms::all);
  fs::permissions(below, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                             fs::perms::others_read | fs::perms::others_exec);
  const CliRun run = exec({"-n", "1"}, report(), {"TMPDIR=" + below.string()});
  ASSERT_EQ(run.exitCode, 0) << run;
  // One line: the folder above it that failed, why, and its owner and mode.
  EXPECT_THAT(run.err, ::testing::MatchesRegex(
                           "flink-gpu: warning: TMPDIR " + below.string() +
                           " is not used for the allocation file: " + open.string() +
                           " on its path: anyone may write it and it lacks the sticky bit, so "
                           "others may rename what is made in it and put something else in its "
                           "place \\(owner [^\n]*, mode 0777\\)\n"))
      << run;
  const fs::path path = line("seen.path");
  EXPECT_EQ(path.parent_path().parent_path(), "/tmp");
  EXPECT_FALSE(fs::exists(path.parent_path())) << path;
  EXPECT_TRUE(fs::is_empty(below));
}

TEST_F(ExecAllocationFileCliTest, AFolderSwappedDuringTheCommandIsEmptiedAndTheImpostorLeftAlone) {
  fs::permissions(tmp(), fs::perms::all | fs::perms::sticky_bit);
  // What another user could do where the base is not sticky, done by the command itself: its
  // folder renamed away, another with a forged file put at its name.
  const CliRun run = exec({"-n", "1"}, {"/bin/sh", "-c",
                                        "f=\"$FLINK_GPU_ALLOCATION_FILE\"; d=\"${f%/*}\"; "
                                        "echo \"$d\" > \"$DIR/folder\"; mkdir \"$d/mine\"; "
                                        "mv \"$d\" \"$DIR/stolen\" && mkdir \"$d\" && "
                                        "echo forged > \"$d/allocation.json\""});
  ASSERT_EQ(run.exitCode, 0) << run;
  const fs::path folder = line("folder");
  EXPECT_THAT(run.err, ::testing::MatchesRegex(
                           "flink-gpu: warning: the allocation file's folder " + folder.string() +
                           " was replaced during the command by a directory \\(owner [^\n]*\\), "
                           "which is left alone; exec's own folder, moved away, was emptied and "
                           "is left where it is now\n"))
      << run;
  // The impostor is not exec's to remove; exec's own is emptied where it was moved.
  EXPECT_EQ(readFile(folder / "allocation.json"), "forged\n");
  EXPECT_TRUE(fs::is_directory(dir_ / "stolen"));
  EXPECT_TRUE(fs::is_empty(dir_ / "stolen"));
}

TEST_F(ExecAllocationFileCliTest, ItIsRemovedHoweverTheCommandEndsAndNeverLeftWhenNothingRuns) {
  const std::string keepPath = "echo \"$FLINK_GPU_ALLOCATION_FILE\" > \"$DIR/path\"; ";
  for (const auto& [command, status] :
       {std::pair{keepPath + "exit 5", 5}, std::pair{keepPath + "kill -KILL $$", 128 + SIGKILL}}) {
    const CliRun run = exec({"-n", "1"}, {"/bin/sh", "-c", command});
    EXPECT_EQ(run.exitCode, status) << run;
    EXPECT_THAT(line("path"), ::testing::EndsWith("/allocation.json")) << run;
    expectNothingLeft(command);
  }
  // Not found, not executable: nothing left, as nothing recorded is.
  const CliRun missing = exec({"-n", "1"}, {"flink-gpu-no-such-command"});
  EXPECT_EQ(missing.exitCode, 127) << missing;
  expectNothingLeft("command not found");
  const CliRun notExecutable = exec({"-n", "1"}, {(dir_ / "host.json").string()});
  EXPECT_EQ(notExecutable.exitCode, 126) << notExecutable;
  expectNothingLeft("command not executable");
  // Nothing run at all: too few GPUs, or a usage error found once they are granted.
  EXPECT_EQ(exec({"-n", "5"}, report()).exitCode, 1);
  EXPECT_EQ(exec({"-n", "1", "--gpus", "7", "--visible-devices", "uuid"}, report()).exitCode, 2);
  expectNothingLeft("nothing run");
  EXPECT_FALSE(fs::exists(dir_ / "seen.path"));
}

TEST_F(ExecAllocationFileCliTest, ItIsRemovedWhenExecIsSentSigtermAndPassesItOn) {
  std::vector<std::string> args{"/usr/bin/env"};
  for (const std::string& variable : environment()) args.push_back(variable);
  args.insert(args.end(),
              {kCli, "exec", "--coordination-file", file(), "-n", "1", "--", "/bin/sh", "-c",
               "echo \"$FLINK_GPU_ALLOCATION_FILE\" > \"$DIR/path\"; exec " +
                   flink::testing::sleepPath() + " 60"});
  Background running(args, dir_ / "exec.log");
  const std::vector<std::string> path = waitForLines(dir_ / "path", 1, 10s);
  ASSERT_EQ(path.size(), 1u) << readFile(dir_ / "exec.log");
  ASSERT_TRUE(fs::exists(path[0]));
  ASSERT_EQ(::kill(running.pid(), SIGTERM), 0);
  EXPECT_EQ(running.waitForExit(10s), std::optional<int>(128 + SIGTERM))
      << readFile(dir_ / "exec.log");
  expectNothingLeft("after SIGTERM");
}

/// The outer exec's command: keeps what it got (outer.*), runs an inner exec of `-n $AMOUNT`
/// (forked: its parent is this shell, whose parent is the outer exec) whose command keeps what
/// it got (inner.*), then lists the outer folder (`between`).
constexpr const char* kNestedScript = R"(#!/bin/sh
f="$FLINK_GPU_ALLOCATION_FILE"
echo "$f" > "$DIR/outer.path"; echo $PPID > "$DIR/outer.ppid"; cp "$f" "$DIR/outer.json"
$INNER_ENV "$CLI" exec --coordination-file "$FILE" -n "$AMOUNT" -- /bin/sh -c '
  g="$FLINK_GPU_ALLOCATION_FILE"
  echo "${FLINK_GPU_ALLOCATION_FILE-unset}" > "$DIR/inner.path"; echo $PPID > "$DIR/inner.ppid"
  [ -n "$g" ] && { stat -c %a "$g" > "$DIR/inner.modes"; cp "$g" "$DIR/inner.json"; }
  exit 0'
status=$?
ls "${f%/*}" > "$DIR/between"
exit $status
)";

TEST_F(ExecAllocationFileCliTest, AnExecUnderAnExecKeepsTheEnclosingFileOrWritesOneBesideIt) {
  const std::string script = flink::testing::writeScript(dir_ / "nested.sh", kNestedScript);
  // Both GPUs of the outer one: its file is the inner command's.
  const CliRun all = exec({"-n", "2", "--placement", "index"}, {script}, {"AMOUNT=2"});
  ASSERT_EQ(all.exitCode, 0) << all;
  EXPECT_EQ(all.err, "") << all;
  EXPECT_EQ(line("inner.path"), line("outer.path"));
  EXPECT_EQ(readLines(dir_ / "between"), std::vector<std::string>{"allocation.json"});
  EXPECT_EQ(copy("inner"), expected("outer", json::array({unitOf(0, "0"), unitOf(1, "1")})));
  expectNothingLeft("both GPUs");

  // One of them: a file of its own in the outer folder, which the inner exec, having become its
  // command, leaves there, and the outer one removes with its folder.
  const CliRun one = exec({"-n", "2", "--placement", "index"}, {script}, {"AMOUNT=1"});
  ASSERT_EQ(one.exitCode, 0) << one;
  EXPECT_EQ(one.err, "") << one;
  const fs::path inner = line("inner.path");
  EXPECT_NE(inner, fs::path(line("outer.path")));
  EXPECT_EQ(inner.parent_path(), fs::path(line("outer.path")).parent_path());
  EXPECT_THAT(inner.filename().string(), ::testing::MatchesRegex("allocation-.*\\.json"));
  EXPECT_EQ(line("inner.modes"), "600");
  EXPECT_THAT(readLines(dir_ / "between"),
              ::testing::UnorderedElementsAre("allocation.json", inner.filename().string()));
  // The records are the outer exec's: so is the owner.
  EXPECT_EQ(copy("inner"), expected("outer", json::array({unitOf(0, "0")})))
      << readFile(dir_ / "inner.json");
  expectNothingLeft("one GPU");
}

TEST_F(ExecAllocationFileCliTest, AnExecUnderAProcessThatGaveItNoFileSetsNoneAndSaysWhy) {
  const std::string script = flink::testing::writeScript(dir_ / "nested.sh", kNestedScript);
  for (const char* inherited :
       {"-u FLINK_GPU_ALLOCATION_FILE", "FLINK_GPU_ALLOCATION_FILE=/etc/passwd"}) {
    const CliRun run =
        exec({"-n", "1"}, {script}, {"AMOUNT=1", std::string("INNER_ENV=env ") + inherited});
    ASSERT_EQ(run.exitCode, 0) << run;
    EXPECT_EQ(line("inner.path"), "unset") << inherited;
    EXPECT_EQ(run.err,
              "flink-gpu: warning: FLINK_GPU_ALLOCATION_FILE is not set for the command: "
              "the process holding the GPUs (" +
                  line("outer.ppid") + ") gave this one no allocation file\n")
        << run;
    expectNothingLeft(inherited);
  }
}

}  // namespace
