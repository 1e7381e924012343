// GPUs set up for sharing without a sharing declaration, from the outside: `flink-gpu check` on
// the stand-in libnvidia-ml.so.1 notes a GPU in EXCLUSIVE_PROCESS compute mode, and one an MPS
// control daemon serves (MPS clients in NVML's list, or an nvidia-cuda-mps-server process where
// check sees the host's pids), unless a declaration names it; the exit code never changes.
#include <sys/types.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "CliRun.h"
#include "StandInHost.h"
#include "TestSupport.h"
#include "process/Subprocess.h"

namespace {

namespace fs = std::filesystem;
using flink::testing::Background;
using flink::testing::CliRun;
using flink::testing::kH200Members;
using flink::testing::runCli;
using flink::testing::sleepPath;
using flink::testing::standInUuid;
using flink::testing::TempDir;

using flink::testing::contains;

constexpr const char* kExclusiveProcess = R"(, "compute_mode": 3)";

/// NVML's process list of a GPU: `pids` in `list` ("compute", "mps").
std::string processes(const std::vector<pid_t>& pids, const std::string& list) {
  std::string text;
  for (const pid_t pid : pids) {
    text += std::string(text.empty() ? "" : ", ") + R"({"pid": )" + std::to_string(pid) +
            R"(, "used_mib": 300, "list": ")" + list + R"("})";
  }
  return R"(, "processes": [)" + text + "]";
}

class SharingNotesCliTest : public ::testing::Test {
 protected:
  /// A host of two H200s, GPU i with kH200Members and then `extra[i]`.
  void host(const std::vector<std::string>& extra) {
    std::vector<std::string> members;
    for (const std::string& more : extra) members.push_back(std::string(kH200Members) + more);
    flink::testing::writeStandInHost(dir_ / "host.json", 2, members);
  }

  std::vector<std::string> environment(const char* library = FAKE_NVML_FULL) const {
    return {std::string("FLINK_GPU_NVML_LIBRARY=") + library,
            "FAKE_NVML_DEVICES=" + (dir_ / "host.json").string(), "PATH=/usr/bin:/bin"};
  }

  std::string coordinationFile() const { return (dir_ / "coordination").string(); }

  CliRun cli(std::vector<std::string> args, const char* library = FAKE_NVML_FULL) const {
    args.insert(args.begin() + 1, {"--coordination-file", coordinationFile()});
    return runCli(args, environment(library));
  }

  /// `check --format json`'s notes of `kind`.
  std::vector<nlohmann::json> notesOf(const std::string& kind,
                                      const char* library = FAKE_NVML_FULL) const {
    const CliRun run = cli({"check", "--format", "json"}, library);
    EXPECT_EQ(run.exitCode, 0) << run;
    const nlohmann::json document = nlohmann::json::parse(run.out);
    std::vector<nlohmann::json> found;
    for (const nlohmann::json& note : document.at("notes")) {
      if (note["kind"] == kind) found.push_back(note);
    }
    return found;
  }

  /// A process of this test, running `program` (a copy of sleep).
  std::unique_ptr<Background> process(const std::string& program = sleepPath()) {
    return std::make_unique<Background>(std::vector<std::string>{program, "60"},
                                        dir_ / ("process-" + std::to_string(processes_++)));
  }

  /// A process called nvidia-cuda-mps-server (comm is cut to 15 characters: argv[0] tells it).
  std::unique_ptr<Background> mpsServer() {
    const fs::path server = dir_ / "nvidia-cuda-mps-server";
    if (!fs::exists(server)) fs::copy_file(sleepPath(), server);
    return process(server.string());
  }

  TempDir dir_{"flink-gpu-sharing-notes-cli-test"};
  int processes_ = 0;
};

TEST_F(SharingNotesCliTest, ExclusiveProcessWithoutADeclarationIsANote) {
  host({kExclusiveProcess, ""});
  const CliRun check = cli({"check"});
  EXPECT_EQ(check.exitCode, 0) << check;
  EXPECT_TRUE(contains(check.out, "note: GPU 0 (" + standInUuid(0) +
                                      ") is in EXCLUSIVE_PROCESS compute mode but not declared "
                                      "shared: one CUDA process at a time may use it"))
      << check;
  EXPECT_TRUE(contains(check.out,
                       "`nvidia-smi -i 0 -c DEFAULT` resets it, or `flink-gpu share "
                       "--gpu 0 --replicas K --mps DIR` declares it\n"))
      << check;
  EXPECT_FALSE(contains(check.out, "GPU 1 (")) << check;
  EXPECT_TRUE(contains(check.out, "ok: 2 GPU(s)")) << check;

  const std::vector<nlohmann::json> notes = notesOf("compute_mode");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0]["cause"], "compute_mode");
  EXPECT_EQ(notes[0]["gpu"], "0");
  EXPECT_TRUE(contains(notes[0]["text"].get<std::string>(), "EXCLUSIVE_PROCESS")) << notes[0];
}

TEST_F(SharingNotesCliTest, ADeclaredGpuInExclusiveProcessModeIsNoNote) {
  host({kExclusiveProcess, kExclusiveProcess});
  ASSERT_EQ(cli({"share", "--gpu", "0", "--replicas", "2", "--mps", "/run/nvidia-mps"}).exitCode,
            0);
  ASSERT_EQ(cli({"share", "--gpu", standInUuid(1), "--replicas", "3"}).exitCode, 0);
  const CliRun check = cli({"check"});
  EXPECT_EQ(check.exitCode, 0) << check;
  EXPECT_FALSE(contains(check.out, "EXCLUSIVE_PROCESS")) << check;
  EXPECT_TRUE(notesOf("compute_mode").empty());
}

TEST_F(SharingNotesCliTest, MpsClientsOnAnUndeclaredGpuAreANote) {
  const auto first = process();
  const auto second = process();
  host({processes({second->pid(), first->pid()}, "mps"), ""});
  const pid_t low = std::min(first->pid(), second->pid());
  const pid_t high = std::max(first->pid(), second->pid());
  const CliRun check = cli({"check"});
  EXPECT_EQ(check.exitCode, 0) << check;
  EXPECT_TRUE(contains(check.out, "note: an MPS control daemon serves GPU 0 (" + standInUuid(0) +
                                      "), which is not declared shared (NVML lists MPS client "
                                      "processes " +
                                      std::to_string(low) + " and " + std::to_string(high) +
                                      " on it): its CUDA processes share one MPS server"))
      << check;
  EXPECT_FALSE(contains(check.out, "serves GPU 1")) << check;

  const std::vector<nlohmann::json> notes = notesOf("mps");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0]["cause"], "mps");
  EXPECT_EQ(notes[0]["gpu"], "0");
  EXPECT_TRUE(notesOf("compute_mode").empty());
}

TEST_F(SharingNotesCliTest, TheMpsServerOfAnUndeclaredGpuIsANote) {
  const auto server = mpsServer();
  host({processes({server->pid()}, "compute"), ""});
  const CliRun check = cli({"check"});
  EXPECT_EQ(check.exitCode, 0) << check;
  EXPECT_TRUE(contains(check.out, "note: an MPS control daemon serves GPU 0 (" + standInUuid(0) +
                                      "), which is not declared shared (NVML lists its MPS "
                                      "server, process " +
                                      server->pidText() + " on it)"))
      << check;
  // A process of another name in the compute list is no sign of MPS.
  const auto other = process();
  host({processes({other->pid()}, "compute"), ""});
  EXPECT_TRUE(notesOf("mps").empty());
}

TEST_F(SharingNotesCliTest, ADeclaredMpsGpuIsNoNote) {
  const auto server = mpsServer();
  const auto client = process();
  host({processes({server->pid()}, "compute") + kExclusiveProcess,
        processes({client->pid()}, "mps")});
  ASSERT_EQ(cli({"share", "--gpu", "all", "--replicas", "2", "--mps", "/run/nvidia-mps"}).exitCode,
            0);
  const CliRun check = cli({"check"});
  EXPECT_EQ(check.exitCode, 0) << check;
  EXPECT_FALSE(contains(check.out, "MPS control daemon")) << check;
  EXPECT_FALSE(contains(check.out, "EXCLUSIVE_PROCESS")) << check;
}

TEST_F(SharingNotesCliTest, ALibraryWithoutTheCallsSaysNothing) {
  const auto client = process();
  host({processes({client->pid()}, "mps") + kExclusiveProcess, kExclusiveProcess});
  const CliRun check = cli({"check"}, FAKE_NVML_REQUIRED_ONLY);
  EXPECT_EQ(check.exitCode, 0) << check;
  EXPECT_FALSE(contains(check.out, "MPS control daemon")) << check;
  EXPECT_FALSE(contains(check.out, "EXCLUSIVE_PROCESS")) << check;
  EXPECT_TRUE(notesOf("mps", FAKE_NVML_REQUIRED_ONLY).empty());
  EXPECT_TRUE(notesOf("compute_mode", FAKE_NVML_REQUIRED_ONLY).empty());
}

TEST_F(SharingNotesCliTest, ASharingFileThatCannotBeReadSaysNothingOfDeclarations) {
  host({kExclusiveProcess, ""});
  // Over 4 MiB: refused, so check cannot tell which GPUs are declared.
  std::ofstream(dir_ / "coordination.sharing") << std::string(5 * 1024 * 1024, '#');
  const CliRun check = cli({"check"});
  EXPECT_EQ(check.exitCode, 0) << check;
  EXPECT_FALSE(contains(check.out, "EXCLUSIVE_PROCESS")) << check;
}

TEST_F(SharingNotesCliTest, InAPidNamespaceOfItsOwnOnlyTheClientListCounts) {
  if (const std::optional<std::string> why = flink::testing::whyNoPidNamespace()) {
    GTEST_SKIP() << *why;
  }
  const std::vector<std::string> unshare = flink::testing::inPidNamespace();
  const auto server = mpsServer();
  const auto client = process();
  host({processes({server->pid()}, "compute"), processes({client->pid()}, "mps")});
  std::vector<std::string> argv = unshare;
  argv.push_back("/usr/bin/env");
  for (const std::string& variable : environment()) argv.push_back(variable);
  argv.insert(argv.end(),
              {flink::testing::kCli, "check", "--coordination-file", coordinationFile()});
  const flink::process::ProcessResult run = flink::process::run(argv, {});
  const std::string& out = run.stdoutOutput.data;
  EXPECT_EQ(run.outcome.value(), 0) << out << run.stderrOutput.data;
  // The server's pid names no process there: it cannot be told by name.
  EXPECT_FALSE(contains(out, "serves GPU 0")) << out;
  EXPECT_TRUE(contains(out, "note: an MPS control daemon serves GPU 1 (" + standInUuid(1) +
                                "), which is not declared shared (NVML lists MPS client process " +
                                client->pidText() + " on it)"))
      << out;
}

}  // namespace
