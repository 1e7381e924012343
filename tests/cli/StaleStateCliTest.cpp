// State that outlived its GPU, from the outside: the real flink-gpu on the stand-in
// libnvidia-ml.so.1 of tests/fixtures/nvml. Records, drains, verdicts and sharing declarations of
// a GPU that went away between a grant and a status, of a board replaced (another UUID at the
// same index) and of a MIG layout changed are listed by status and check (text, JSON, the
// metrics) and removed by release, undrain and unshare --stale, nothing else touched; a running
// owner's record is kept with a refusal; a masked view, or a host whose GPUs cannot be listed,
// judges nothing and removes nothing.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "CliRun.h"
#include "StandInHost.h"
#include "TestSupport.h"

namespace stale_state_cli_test {

namespace {

namespace fs = std::filesystem;
using flink::testing::Background;
using flink::testing::CliRun;
using flink::testing::linesOf;
using flink::testing::readFile;
using flink::testing::runCli;
using flink::testing::sleepPath;
using flink::testing::standInUuid;
using flink::testing::TempDir;

constexpr const char* kNewUuid = "GPU-99999999-0000-4000-8000-999999999999";
constexpr const char* kMigA = "MIG-5e1f0a2b-3c4d-4e5f-8a6b-7c8d9e0f1a2b";
constexpr const char* kMigB = "MIG-6f2a1b3c-4d5e-4f6a-9b7c-8d9e0f1a2b3c";
constexpr const char* kMigC = "MIG-7a3b2c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d";

using flink::testing::contains;

class StaleStateCliTest : public ::testing::Test {
 protected:
  void host(unsigned count, const std::vector<std::string>& members = {}) {
    flink::testing::writeStandInHost(hostFile(), count, members);
  }
  /// GPU 0 whole, GPU 1 in MIG mode with the instances `instances` (gpu instance ids 1, 2, …).
  void migHost(const std::vector<std::string>& instances) {
    std::string slots;
    for (std::size_t i = 0; i < instances.size(); ++i) {
      slots += std::string(i == 0 ? "" : ",") + R"({"uuid": ")" + instances[i] +
               R"(", "name": "NVIDIA H200 MIG 3g.71gb", "gpu_instance_id": )" +
               std::to_string(i + 1) + R"(, "compute_instance_id": 0})";
    }
    std::ofstream(hostFile(), std::ios::trunc)
        << R"({"devices": [{"uuid": ")" << standInUuid(0)
        << R"(", "name": "NVIDIA H200", "mig_enabled": false}, {"uuid": ")" << standInUuid(1)
        << R"(", "name": "NVIDIA H200", "mig_enabled": true, "mig": [)" << slots << "]}]}";
  }

  fs::path hostFile() const { return dir_ / "host.json"; }
  std::string coordinationFile() const { return (dir_ / "coordination").string(); }
  fs::path healthFile() const { return dir_ / "coordination.health"; }
  fs::path sharingFile() const { return dir_ / "coordination.sharing"; }

  /// `flink-gpu <command> --coordination-file F <args...>` on the stand-in host, with `extra`
  /// variables.
  CliRun cli(std::vector<std::string> args, const std::vector<std::string>& extra = {}) const {
    args.insert(args.begin() + 1, {"--coordination-file", coordinationFile()});
    std::vector<std::string> environment{std::string("FLINK_GPU_NVML_LIBRARY=") + FAKE_NVML_FULL,
                                         "FAKE_NVML_DEVICES=" + hostFile().string(),
                                         "PATH=/usr/bin:/bin"};
    environment.insert(environment.end(), extra.begin(), extra.end());
    return runCli(args, environment);
  }

  /// Every file of the folder, by name, with what it holds.
  std::vector<std::pair<std::string, std::string>> files() const {
    std::vector<std::pair<std::string, std::string>> all;
    for (const fs::directory_entry& entry : fs::directory_iterator(dir_.path())) {
      if (entry.is_regular_file())
        all.emplace_back(entry.path().filename().string(), readFile(entry.path()));
    }
    std::sort(all.begin(), all.end());
    return all;
  }

  /// The record, drain, verdict and declaration of GPU 2 on a host of 3, and of GPU 0 beside.
  void stateOfThreeGpus() {
    host(3);
    const std::string& dead = dead_;
    std::ofstream(coordinationFile()) << "0 " << dead << "\tuuid=" << standInUuid(0) << "\n2 "
                                      << dead << "\tuuid=" << standInUuid(2) << "\n";
    ASSERT_EQ(cli({"drain", "--gpu", "2", "--reason", "fan"}).exitCode, 0);
    ASSERT_EQ(cli({"drain", "--gpu", "0"}).exitCode, 0);
    std::ofstream(healthFile(), std::ios::app)
        << "unhealthy\tgpu=2\tuuid=" << standInUuid(2) << "\tsince=1000\txid=79\tsource=watch\n";
    ASSERT_EQ(cli({"share", "--gpu", "2", "--replicas", "2"}).exitCode, 0);
    ASSERT_EQ(cli({"share", "--gpu", "1", "--replicas", "2"}).exitCode, 0);
  }

  TempDir dir_{"flink-gpu-stale-cli-test"};
  /// A pid no process has: the owner of the records stateOfThreeGpus writes.
  std::string dead_ = std::to_string(flink::testing::deadPid());
};

TEST_F(StaleStateCliTest, AGpuGoneSinceItsGrantIsListedByStatusAndCheck) {
  stateOfThreeGpus();
  host(2);  // GPU 2 is gone
  const std::string gpu2 = "GPU 2 (" + standInUuid(2) + ")";

  const CliRun status = cli({"status"});
  EXPECT_EQ(status.exitCode, 0) << status;
  for (const std::string& note :
       {"flink-gpu: note: record of process " + dead_ + " names " + gpu2 +
            " which this host does not have; `flink-gpu release --stale` removes it",
        "flink-gpu: note: drain names " + gpu2 +
            " which this host does not have; `flink-gpu undrain --stale` removes it",
        "flink-gpu: note: unhealthy verdict names " + gpu2 +
            " which this host does not have; `flink-gpu undrain --stale` removes it",
        "flink-gpu: note: sharing declaration names " + gpu2 +
            " which this host does not have; `flink-gpu unshare --stale` removes it"}) {
    EXPECT_TRUE(contains(status.err, note + "\n")) << note << "\n" << status;
  }
  // GPU 0's and GPU 1's state is not stale.
  EXPECT_FALSE(contains(status.err, "GPU 0")) << status;
  EXPECT_FALSE(contains(status.err, "GPU 1")) << status;

  const auto report = nlohmann::json::parse(cli({"status", "--format", "json"}).out);
  EXPECT_EQ(report.at("format"), 1);
  ASSERT_EQ(report.at("stale").size(), 4u) << report.at("stale");
  EXPECT_EQ(report.at("stale")[0].at("kind"), "record");
  EXPECT_EQ(report.at("stale")[0].at("gpu"), "2");
  EXPECT_EQ(report.at("stale")[0].at("uuid"), standInUuid(2));
  EXPECT_EQ(report.at("stale")[0].at("owner_running"), false);
  EXPECT_EQ(report.at("stale")[1].at("kind"), "drain");
  EXPECT_EQ(report.at("stale")[2].at("kind"), "unhealthy");
  EXPECT_EQ(report.at("stale")[3].at("kind"), "sharing");
  EXPECT_TRUE(report.at("stale_cannot_tell").is_null());

  const CliRun metrics = cli({"status", "--format", "prometheus"});
  EXPECT_EQ(metrics.exitCode, 0) << metrics;
  EXPECT_TRUE(contains(metrics.out, "# TYPE flink_gpu_stale_entries gauge\n")) << metrics;
  for (const char* kind : {"record", "drain", "unhealthy", "sharing"}) {
    EXPECT_TRUE(
        contains(metrics.out, std::string("flink_gpu_stale_entries{kind=\"") + kind + "\"} 1\n"))
        << kind << metrics;
  }

  // check: notes, which do not change its exit code (the drain of GPU 0 does).
  const CliRun check = cli({"check"});
  EXPECT_TRUE(contains(check.out, "note: sharing declaration names " + gpu2 +
                                      " which this host does not have; `flink-gpu unshare "
                                      "--stale` removes it\n"))
      << check;
  const auto checked = nlohmann::json::parse(cli({"check", "--format", "json"}).out);
  int stale = 0;
  for (const auto& note : checked.at("notes")) {
    if (note.at("kind") != "stale") continue;
    ++stale;
    EXPECT_EQ(note.at("gpu"), "2") << note;
  }
  EXPECT_EQ(stale, 4) << checked;
  // A drain and a verdict of a GPU the host no longer has fail no health check.
  for (const auto& problem : checked.at("problems")) EXPECT_NE(problem.at("gpu"), "2") << problem;
  // Its row says so: its index may be another GPU's some day.
  EXPECT_TRUE(contains(status.out, "not on this host")) << status;
}

TEST_F(StaleStateCliTest, TheStaleOptionsRemoveExactlyThatState) {
  stateOfThreeGpus();
  host(2);
  const std::string& dead = dead_;

  const CliRun release = cli({"release", "--stale"});
  EXPECT_EQ(release.exitCode, 0) << release;
  EXPECT_EQ(release.out, "released GPU 2 (" + standInUuid(2) + ") (owner pid " + dead +
                             ", gone): this host does not have it\nremoved 1 record(s) of GPUs "
                             "this host does not have (coordination file " +
                             coordinationFile() + ")\n")
      << release;
  EXPECT_TRUE(contains(readFile(coordinationFile()), "0 " + dead)) << readFile(coordinationFile());
  EXPECT_FALSE(contains(readFile(coordinationFile()), "2 " + dead));

  const CliRun undrain = cli({"undrain", "--stale", "--format", "json"});
  EXPECT_EQ(undrain.exitCode, 0) << undrain;
  const auto cleared = nlohmann::json::parse(undrain.out);
  EXPECT_EQ(cleared.at("changed"), true);
  ASSERT_EQ(cleared.at("cleared").size(), 2u) << cleared;
  EXPECT_EQ(cleared.at("cleared")[0].at("kind"), "drained");
  EXPECT_EQ(cleared.at("cleared")[0].at("gpu"), "2");
  EXPECT_EQ(cleared.at("cleared")[1].at("kind"), "unhealthy");
  const std::string health = readFile(healthFile());
  EXPECT_TRUE(contains(health, "drained\tgpu=0\t")) << health;
  EXPECT_FALSE(contains(health, "gpu=2")) << health;
  EXPECT_FALSE(contains(health, "readmitted")) << health;

  const CliRun unshare = cli({"unshare", "--stale"});
  EXPECT_EQ(unshare.exitCode, 0) << unshare;
  EXPECT_EQ(unshare.out, "unshared GPU 2 (" + standInUuid(2) +
                             "), which was 2 shares of 71885 MiB, time-sliced: this host does "
                             "not have it\n")
      << unshare;
  EXPECT_TRUE(contains(readFile(sharingFile()), "gpu=1\t")) << readFile(sharingFile());
  EXPECT_FALSE(contains(readFile(sharingFile()), "gpu=2\t"));

  // Nothing stale now: each says so and writes nothing.
  const auto before = files();
  const CliRun again = cli({"release", "--stale"});
  EXPECT_EQ(again.exitCode, 0) << again;
  EXPECT_EQ(again.out, "no record names a GPU this host does not have (coordination file " +
                           coordinationFile() + ")\n");
  EXPECT_EQ(cli({"undrain", "--stale"}).out,
            "no drain or verdict names a GPU this host does not have\n");
  EXPECT_EQ(cli({"unshare", "--stale"}).out,
            "no sharing declaration names a GPU this host does not have\n");
  const auto none = nlohmann::json::parse(cli({"unshare", "--stale", "--format", "json"}).out);
  EXPECT_EQ(none.at("changed"), false);
  EXPECT_EQ(files(), before);
  EXPECT_TRUE(nlohmann::json::parse(cli({"status", "--format", "json"}).out).at("stale").empty());
}

TEST_F(StaleStateCliTest, ReleaseOfManyStaleRecordsNamesTwentyOfEachKindAndCountsTheRest) {
  // On a host of 2 GPUs: 30 records of GPUs it does not have whose owner runs (kept), and 30 whose
  // owner is of another pid namespace without a lease (released, each with a warning).
  host(2);
  const std::string self = std::to_string(::getpid());
  std::ofstream records(coordinationFile());
  for (int gpu = 40; gpu < 70; ++gpu) records << gpu << ' ' << self << '\n';
  for (int gpu = 80; gpu < 110; ++gpu) records << gpu << " 5000\t777\tpidns=4026999999\n";
  records.close();
  const CliRun release = cli({"release", "--stale"});
  EXPECT_EQ(release.exitCode, 1) << release;
  const auto count = [](const std::string& text, const std::string& what) {
    std::size_t found = 0;
    for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
      ++found;
    }
    return found;
  };
  EXPECT_EQ(count(release.out, "released GPU "), 20u) << release;
  EXPECT_EQ(count(release.err, "could not be judged from here"), 20u) << release;
  EXPECT_EQ(count(release.err, "kept the record of process " + self), 20u) << release;
  EXPECT_EQ(count(release.out + release.err,
                  "... and 10 more like these (`--format json` lists every record)"),
            3u)
      << release;
  EXPECT_TRUE(contains(release.out, "removed 30 record(s) of GPUs this host does not have"))
      << release;
}

TEST_F(StaleStateCliTest, NothingStaleWritesNoFile) {
  host(2);
  for (const std::vector<std::string>& args : {std::vector<std::string>{"release", "--stale"},
                                               {"undrain", "--stale"},
                                               {"unshare", "--stale"}}) {
    const CliRun run = cli(args);
    EXPECT_EQ(run.exitCode, 0) << run;
    EXPECT_TRUE(files().empty() || (files().size() == 1 && files()[0].first == "host.json")) << run;
  }
}

TEST_F(StaleStateCliTest, AReplacedBoardsStateIsStaleAndARunningOwnersRecordIsKept) {
  host(2);
  const std::string dead = std::to_string(flink::testing::deadPid());
  Background owner({sleepPath(), "60"}, dir_ / "sleep.log");
  const std::string running = owner.pidText();
  std::ofstream(coordinationFile())
      << "1 " << dead << "\tuuid=" << standInUuid(1) << "\n1 " << running
      << "\tuuid=" << standInUuid(1) << "\n0 " << running << "\tuuid=" << standInUuid(0) << "\n";
  ASSERT_EQ(cli({"drain", "--gpu", "1"}).exitCode, 0);
  // GPU 1's board is replaced: another UUID at the same index.
  host(2);
  {
    std::string text = readFile(hostFile());
    text.replace(text.find(standInUuid(1)), standInUuid(1).size(), kNewUuid);
    std::ofstream(hostFile(), std::ios::trunc) << text;
  }

  const CliRun status = cli({"status"});
  EXPECT_TRUE(contains(
      status.err, "note: drain names GPU 1 (" + standInUuid(1) + ") which this host does not have"))
      << status;
  EXPECT_TRUE(contains(status.err, "note: record of process " + running + " names GPU 1 (" +
                                       standInUuid(1) +
                                       ") which this host does not have; process " + running +
                                       ", or what it started, still runs"))
      << status;

  const CliRun release = cli({"release", "--stale"});
  EXPECT_EQ(release.exitCode, 1) << release;
  EXPECT_TRUE(contains(release.out, "released GPU 1 (" + standInUuid(1) + ") (owner pid " + dead))
      << release;
  EXPECT_TRUE(contains(release.err, "flink-gpu: error: kept the record of process " + running +
                                        " for GPU 1 (" + standInUuid(1) +
                                        "), which this host does not have: the process, or what "
                                        "it started, still runs and may still use what it "
                                        "holds; `flink-gpu release --owner " +
                                        running + "` removes its records once it no longer does"))
      << release;
  const std::string records = readFile(coordinationFile());
  EXPECT_FALSE(contains(records, "1 " + dead)) << records;
  EXPECT_TRUE(contains(records, "1 " + running)) << records;
  EXPECT_TRUE(contains(records, "0 " + running)) << records;

  const CliRun report = cli({"release", "--stale", "--format", "json"});
  EXPECT_EQ(report.exitCode, 1) << report;
  const auto document = nlohmann::json::parse(report.out);
  EXPECT_EQ(document.at("changed"), false);
  ASSERT_EQ(document.at("refused").size(), 1u) << document;
  EXPECT_EQ(document.at("refused")[0].at("owner_pid"), owner.pid());

  EXPECT_EQ(cli({"release", "--stale", "--force"}).exitCode, 2);
  EXPECT_EQ(cli({"undrain", "--stale"}).exitCode, 0);
  EXPECT_FALSE(contains(readFile(healthFile()), "drained")) << readFile(healthFile());
}

TEST_F(StaleStateCliTest, AnInstanceOfAnOldMigLayoutIsStale) {
  migHost({kMigA, kMigB});
  const std::string dead = std::to_string(flink::testing::deadPid());
  std::ofstream(coordinationFile()) << kMigA << " " << dead << "\n" << kMigB << " " << dead << "\n";
  std::ofstream(healthFile()) << "unhealthy\tgpu=" << kMigA << "\tuuid=" << standInUuid(1)
                              << "\tsince=1000\txid=94\tsource=watch\n";
  migHost({kMigB, kMigC});  // instance A is gone, B stays, C is new

  const auto report = nlohmann::json::parse(cli({"status", "--format", "json"}).out);
  ASSERT_EQ(report.at("stale").size(), 2u) << report.at("stale");
  EXPECT_EQ(report.at("stale")[0].at("gpu"), kMigA);
  EXPECT_EQ(report.at("stale")[1].at("kind"), "unhealthy");
  EXPECT_TRUE(
      contains(report.at("stale")[1].at("text").get<std::string>(),
               std::string("unhealthy verdict names ") + kMigA + " which this host does not have"));

  EXPECT_EQ(cli({"release", "--stale"}).exitCode, 0);
  EXPECT_EQ(cli({"undrain", "--stale"}).exitCode, 0);
  const std::string records = readFile(coordinationFile());
  EXPECT_FALSE(contains(records, kMigA)) << records;
  EXPECT_TRUE(contains(records, kMigB)) << records;
  EXPECT_FALSE(contains(readFile(healthFile()), kMigA));
}

TEST_F(StaleStateCliTest, AMaskedViewOrAHostWithoutItsGpusJudgesNothing) {
  stateOfThreeGpus();
  host(2);
  const auto before = files();
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{"CUDA_VISIBLE_DEVICES=0"},
        std::vector<std::string>{"NVIDIA_VISIBLE_DEVICES=0"},
        // Neither NVML nor nvidia-smi answers.
        std::vector<std::string>{"FLINK_GPU_NVML_LIBRARY=" + (dir_ / "none.so").string()}}) {
    const CliRun status = cli({"status", "--format", "json"}, extra);
    const auto report = nlohmann::json::parse(status.out);
    EXPECT_TRUE(report.at("stale").empty()) << status;
    EXPECT_FALSE(report.at("stale_cannot_tell").is_null()) << status;
    EXPECT_FALSE(contains(cli({"status"}, extra).err, "which this host does not have"));
    EXPECT_FALSE(contains(cli({"check"}, extra).out, "which this host does not have"));
    const CliRun metrics = cli({"status", "--format", "prometheus"}, extra);
    EXPECT_TRUE(contains(metrics.out, "flink_gpu_stale_entries{kind=\"record\"} NaN\n")) << metrics;
    for (const std::string command : {"release", "undrain", "unshare"}) {
      const CliRun run = cli({command, "--stale"}, extra);
      EXPECT_EQ(run.exitCode, 1) << run;
      EXPECT_TRUE(contains(run.err, "flink-gpu: error: cannot tell which ")) << run;
      EXPECT_TRUE(contains(run.err, "; nothing was removed\n")) << run;
    }
    EXPECT_EQ(files(), before) << extra.front();
  }
  const CliRun masked = cli({"release", "--stale"}, {"CUDA_VISIBLE_DEVICES=0"});
  EXPECT_TRUE(contains(masked.err, "CUDA_VISIBLE_DEVICES=0 masks this view of the host's GPUs"))
      << masked;
}

TEST_F(StaleStateCliTest, StaleIsInsteadOfGpu) {
  host(2);
  for (const std::string command : {"undrain", "unshare"}) {
    const CliRun neither = cli({command});
    EXPECT_EQ(neither.exitCode, 2) << neither;
    EXPECT_TRUE(contains(neither.err, command + " needs --gpu ")) << neither;
    const CliRun both = cli({command, "--gpu", "0", "--stale"});
    EXPECT_EQ(both.exitCode, 2) << both;
    EXPECT_TRUE(contains(both.err, "give --gpu or --stale, not both")) << both;
  }
  const CliRun both = cli({"release", "--gone", "--stale"});
  EXPECT_EQ(both.exitCode, 2) << both;
}

}  // namespace

}  // namespace stale_state_cli_test
