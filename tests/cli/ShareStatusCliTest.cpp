// What `flink-gpu status` shows of shares, from the outside: the real binary on the stand-in
// libnvidia-ml.so.1 of tests/fixtures/nvml, share records written by hand as the allocators write
// them, declarations made with `flink-gpu share`. Each record's share and each declared GPU's
// declaration and live shares in JSON, the states shared, held and free, a share lease held
// without its record counted, the SHARE column only where the host shares, the junk and the
// unreadable file of declarations as warnings, and the two gauges beside flink_gpu_held, which
// counts whole GPUs only, all through promtool.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "CliRun.h"
#include "StandInHost.h"
#include "TestSupport.h"
#include "host/coordination/Coordination.h"
#include "host/coordination/Leases.h"
#include "process/Subprocess.h"

namespace {

namespace fs = std::filesystem;
using flink::testing::Background;
using flink::testing::CliRun;
using flink::testing::linesOf;
using flink::testing::runCli;
using flink::testing::sleepPath;
using flink::testing::standInUuid;
using flink::testing::table;
using flink::testing::TempDir;
using flink::testing::writeScript;
using nlohmann::json;

using flink::testing::contains;

class ShareStatusCliTest : public ::testing::Test {
 protected:
  /// A host of `count` H200s of 143771 MiB.
  void host(unsigned count) {
    hostFile_ = dir_ / "host.json";
    flink::testing::writeStandInHost(hostFile_, count);
  }

  std::string coordinationFile() const { return (dir_ / "coordination").string(); }
  fs::path sharingFile() const { return dir_ / "coordination.sharing"; }

  /// `flink-gpu <command> --coordination-file F <args...>`.
  CliRun cli(std::vector<std::string> args) const {
    args.insert(args.begin() + 1, {"--coordination-file", coordinationFile()});
    return runCli(args, {std::string("FLINK_GPU_NVML_LIBRARY=") + FAKE_NVML_FULL,
                         "FAKE_NVML_DEVICES=" + hostFile_.string(), "PATH=/usr/bin:/bin"});
  }

  json statusJson() const {
    const CliRun run = cli({"status", "--format", "json"});
    EXPECT_EQ(run.exitCode, 0) << run;
    return json::parse(run.out);
  }

  /// A running stand-in worker.
  pid_t worker() {
    workers_.push_back(std::make_unique<Background>(
        std::vector<std::string>{sleepPath(), "300"},
        dir_ / ("worker-" + std::to_string(workers_.size()) + ".log")));
    return workers_.back()->pid();
  }

  /// A record of GPU `gpu` for the running process `pid`, as the allocators write it:
  /// `<gpu> <pid>\t<start time>\tuuid=…[\tshare=<slot>]\tpidns=<inode>`.
  static std::string record(unsigned gpu, pid_t pid, const std::string& slot = "") {
    const flink::coordination::Owner owner = flink::coordination::Owner::of(pid);
    EXPECT_TRUE(owner.startTime.has_value()) << pid;
    std::string line = std::to_string(gpu) + ' ' + std::to_string(pid) + '\t' +
                       std::to_string(owner.startTime.value_or(1)) + "\tuuid=" + standInUuid(gpu);
    if (!slot.empty()) line += "\tshare=" + slot;
    if (owner.pidNamespace) line += "\tpidns=" + std::to_string(*owner.pidNamespace);
    return line + '\n';
  }

  /// A share record of a process that is gone.
  static std::string goneRecord(unsigned gpu, const std::string& slot) {
    return std::to_string(gpu) + ' ' + std::to_string(flink::testing::deadPid()) +
           "\t1\tuuid=" + standInUuid(gpu) + "\tshare=" + slot + '\n';
  }

  void writeRecords(const std::string& text) const {
    std::ofstream(coordinationFile(), std::ios::trunc) << text;
  }

  /// Holds share `index` of GPU `gpu` with its lease, in this process, with no record naming
  /// it: what Flink's unanchored `sed` leaves of a leased share.
  void holdShareLease(unsigned gpu, unsigned index) {
    // Under the GPU's UUID, as every version names it (LeaseNames).
    leases_.push_back(flink::coordination::acquireLease(
        coordinationFile(), standInUuid(gpu) + ".share-" + std::to_string(index)));
  }

  /// The GPU `gpu` of status's JSON `gpus`.
  static json gpuOf(const json& status, const std::string& gpu) {
    for (const json& entry : status.at("gpus")) {
      if (entry.at("gpu") == gpu) return entry;
    }
    ADD_FAILURE() << "no GPU " << gpu << " in " << status;
    return json::object();
  }

  /// `promtool check metrics` on `metrics`: what it printed, and whether it passed.
  ::testing::AssertionResult promtoolAccepts(const std::string& metrics) const {
    if (!fs::exists(PROMTOOL)) {
      return ::testing::AssertionFailure() << "promtool is missing: run scripts/install-deps.sh";
    }
    std::ofstream(dir_ / "metrics.prom", std::ios::trunc) << metrics;
    // promtool reads stdin.
    const fs::path script =
        writeScript(dir_ / "promtool.sh", "#!/bin/sh\nexec \"$1\" check metrics < \"$2\"\n");
    const flink::process::ProcessResult checked =
        flink::process::run({script.string(), PROMTOOL, (dir_ / "metrics.prom").string()}, {});
    const std::string said = checked.stdoutOutput.data + checked.stderrOutput.data;
    if (checked.outcome.value() != 0 || !said.empty()) {
      return ::testing::AssertionFailure() << said << metrics;
    }
    return ::testing::AssertionSuccess();
  }

  TempDir dir_{"flink-gpu-share-status-test"};
  fs::path hostFile_;
  std::vector<std::unique_ptr<Background>> workers_;
  std::vector<flink::coordination::Lease> leases_;
};

// --- JSON --------------------------------------------------------------------------------------

TEST_F(ShareStatusCliTest, JsonShowsEachShareEachDeclarationAndCountsOnlyLiveShares) {
  host(3);
  ASSERT_EQ(cli({"share", "--gpu", "0", "--replicas", "4"}).exitCode, 0);
  ASSERT_EQ(cli({"share", "--gpu", "1", "--replicas", "2", "--mps", "/run/nvidia-mps"}).exitCode,
            0);
  const pid_t first = worker();
  const pid_t second = worker();
  const pid_t whole = worker();
  // GPU 0: shares 0 and 1 live, share 2's owner gone, share 3 held by its lease alone. GPU 2,
  // not declared, held whole.
  writeRecords(record(0, first, "0/4") + record(0, second, "1/4") + goneRecord(0, "2/4") +
               record(2, whole));
  holdShareLease(0, 3);

  const json status = statusJson();
  const json& records = status.at("records");
  ASSERT_EQ(records.size(), 4u) << status;
  EXPECT_EQ(records[0].at("share"), json::parse(R"({"index":0,"count":4})")) << status;
  EXPECT_EQ(records[1].at("share"), json::parse(R"({"index":1,"count":4})")) << status;
  EXPECT_EQ(records[2].at("share"), json::parse(R"({"index":2,"count":4})")) << status;
  EXPECT_EQ(records[2].at("running"), false) << status;
  EXPECT_TRUE(records[3].at("share").is_null()) << status;

  // The share lease names GPU 0: no unit of its own.
  ASSERT_EQ(status.at("gpus").size(), 3u) << status;
  const json gpu0 = gpuOf(status, "0");
  EXPECT_EQ(gpu0.at("state"), "shared") << gpu0;
  EXPECT_EQ(gpu0.at("sharing"), json::parse(R"({"replicas":4,"memory_per_share":35942,)"
                                            R"("mps_pipe_directory":null,"shares_held":3})"))
      << gpu0;
  EXPECT_EQ(gpu0.at("held_by_lease"), false) << "a share lease does not hold it whole\n" << gpu0;
  ASSERT_EQ(gpu0.at("holders").size(), 3u) << gpu0;
  EXPECT_EQ(gpu0.at("holders")[0].at("owner_pid"), first);
  EXPECT_EQ(gpu0.at("holders")[0].at("share"), json::parse(R"({"index":0,"count":4})"));
  EXPECT_EQ(gpu0.at("holders")[2].at("running"), false);
  EXPECT_EQ(gpu0.at("holders")[2].at("share"), json::parse(R"({"index":2,"count":4})"));

  const json gpu1 = gpuOf(status, "1");
  EXPECT_EQ(gpu1.at("state"), "free") << "declared, without live shares\n" << gpu1;
  EXPECT_EQ(gpu1.at("sharing"), json::parse(R"({"replicas":2,"memory_per_share":71885,)"
                                            R"("mps_pipe_directory":"/run/nvidia-mps",)"
                                            R"("shares_held":0})"))
      << gpu1;

  const json gpu2 = gpuOf(status, "2");
  EXPECT_EQ(gpu2.at("state"), "held") << gpu2;
  EXPECT_TRUE(gpu2.at("sharing").is_null()) << gpu2;
  EXPECT_TRUE(gpu2.at("holders")[0].at("share").is_null()) << gpu2;

  EXPECT_EQ(status.at("sharing_junk"), json::array()) << status;
  EXPECT_TRUE(status.at("sharing_error").is_null()) << status;
}

TEST_F(ShareStatusCliTest, AWholeHolderMakesItHeldADrainComesFirstAndGoneSharesLeaveItFree) {
  host(3);
  ASSERT_EQ(cli({"share", "--gpu", "all", "--replicas", "4"}).exitCode, 0);
  ASSERT_EQ(cli({"drain", "--gpu", "2", "--reason", "Xid 79"}).exitCode, 0);
  const pid_t shareHolder = worker();
  const pid_t wholeHolder = worker();
  const pid_t drainedHolder = worker();
  // GPU 0: a live share beside a whole record (of Flink's form, which knows no shares); GPU 1:
  // only gone shares; GPU 2: drained, with a live share.
  writeRecords(record(0, shareHolder, "0/4") + "0 " + std::to_string(wholeHolder) + '\n' +
               goneRecord(1, "0/4") + goneRecord(1, "1/4") + record(2, drainedHolder, "0/4"));

  const json status = statusJson();
  EXPECT_EQ(gpuOf(status, "0").at("state"), "held") << status;
  EXPECT_EQ(gpuOf(status, "0").at("sharing").at("shares_held"), 1) << status;
  EXPECT_EQ(gpuOf(status, "1").at("state"), "free") << status;
  EXPECT_EQ(gpuOf(status, "1").at("sharing").at("shares_held"), 0) << status;
  EXPECT_EQ(gpuOf(status, "2").at("state"), "drained") << status;
  EXPECT_EQ(gpuOf(status, "2").at("sharing").at("shares_held"), 1) << status;
}

TEST_F(ShareStatusCliTest, SharingJunkIsListedInJsonAndAWarningInTextAndTheRestStillApplies) {
  host(2);
  ASSERT_EQ(cli({"share", "--gpu", "1", "--replicas", "3"}).exitCode, 0);
  // Line 1 is the format's comment, line 2 GPU 1's declaration.
  std::ofstream(sharingFile(), std::ios::app) << "shared\tgpu=0\treplicas=99\tsince=1\n";
  const pid_t holder = worker();
  writeRecords(record(1, holder, "0/3"));

  const json status = statusJson();
  EXPECT_EQ(status.at("sharing_junk"),
            json::parse(R"([{"line":3,"text":"shared\tgpu=0\treplicas=99\tsince=1"}])"))
      << status;
  EXPECT_TRUE(gpuOf(status, "0").at("sharing").is_null()) << status;
  EXPECT_EQ(gpuOf(status, "1").at("sharing").at("replicas"), 3) << status;
  EXPECT_EQ(gpuOf(status, "1").at("state"), "shared") << status;

  const CliRun text = cli({"status"});
  EXPECT_EQ(text.exitCode, 0) << text;
  EXPECT_EQ(text.err, "flink-gpu: warning: ignoring line 3 of " + sharingFile().string() +
                          ", which is not a sharing declaration: "
                          "'shared\\tgpu=0\\treplicas=99\\tsince=1'\n")
      << text;
  EXPECT_TRUE(contains(text.out, "\n1    shared  1 of 3 shares held; share 0/3 held by process " +
                                     std::to_string(holder) + " (running)\n"))
      << text;
}

// --- text ----------------------------------------------------------------------------------------

TEST_F(ShareStatusCliTest, TheShareColumnAppearsOnlyWhereTheHostShares) {
  host(2);
  const std::string pid = std::to_string(::getpid());
  const std::string device = "NVIDIA H200, 143771 MiB";
  writeRecords(record(0, ::getpid()));

  // Nothing shared: the tables as they always were.
  const CliRun plain = cli({"status"});
  EXPECT_EQ(plain.exitCode, 0) << plain;
  EXPECT_EQ(plain.out,
            table({{"GPU", "OWNER PID", "OWNER", "DEVICE"}, {"0", pid, "running", device}}) + "\n" +
                table({{"GPU", "STATE", "DETAIL"},
                       {"0", "held", "held by process " + pid + " (running)"},
                       {"1", "free", ""}}))
      << plain;
  EXPECT_EQ(plain.err, "") << plain;

  // GPU 1 declared: the column, `-` for the whole record, and what GPU 1 may give.
  ASSERT_EQ(cli({"share", "--gpu", "1", "--replicas", "4", "--mps", "/run/nvidia-mps"}).exitCode,
            0);
  const CliRun declared = cli({"status"});
  EXPECT_EQ(declared.exitCode, 0) << declared;
  EXPECT_EQ(declared.out,
            table({{"GPU", "SHARE", "OWNER PID", "OWNER", "DEVICE"},
                   {"0", "-", pid, "running", device}}) +
                "\n" +
                table({{"GPU", "STATE", "DETAIL"},
                       {"0", "held", "held by process " + pid + " (running)"},
                       {"1", "free",
                        "declared shared: up to 4 workers, 35942 MiB each, MPS /run/nvidia-mps"}}))
      << declared;

  // Two shares of GPU 1 live, a third gone.
  const pid_t first = worker();
  const pid_t second = worker();
  const std::string gone = goneRecord(1, "2/4");
  const std::string gonePid = gone.substr(2, gone.find('\t') - 2);
  writeRecords(record(0, ::getpid()) + record(1, first, "0/4") + record(1, second, "1/4") + gone);
  const CliRun shared = cli({"status"});
  EXPECT_EQ(shared.exitCode, 0) << shared;
  const std::string firstPid = std::to_string(first);
  const std::string secondPid = std::to_string(second);
  EXPECT_EQ(shared.out,
            table({{"GPU", "SHARE", "OWNER PID", "OWNER", "DEVICE"},
                   {"0", "-", pid, "running", device},
                   {"1", "0/4", firstPid, "running", device},
                   {"1", "1/4", secondPid, "running", device},
                   {"1", "2/4", gonePid, "gone", device}}) +
                "\n" +
                table({{"GPU", "STATE", "DETAIL"},
                       {"0", "held", "held by process " + pid + " (running)"},
                       {"1", "shared",
                        "2 of 4 shares held; share 0/4 held by process " + firstPid +
                            " (running); share 1/4 held by process " + secondPid +
                            " (running); share 2/4 recorded for process " + gonePid + " (gone)"}}))
      << shared;

  // Share records alone bring the column, declared or not.
  ASSERT_EQ(cli({"unshare", "--gpu", "all"}).exitCode, 0);
  const CliRun undeclared = cli({"status"});
  EXPECT_TRUE(undeclared.out.starts_with("GPU  SHARE  OWNER PID  OWNER")) << undeclared;
  EXPECT_TRUE(contains(undeclared.out, "\n1    shared  2 of 4 shares held; share 0/4 held by "))
      << undeclared;
  EXPECT_TRUE(contains(undeclared.out, "; not declared shared: no new share is handed out\n"))
      << undeclared;
}

TEST_F(ShareStatusCliTest, AShareLeaseWithoutItsRecordShowsAsAShareHeld) {
  host(1);
  ASSERT_EQ(cli({"share", "--gpu", "0", "--replicas", "2"}).exitCode, 0);
  writeRecords("");
  holdShareLease(0, 1);
  const CliRun text = cli({"status"});
  EXPECT_EQ(text.exitCode, 0) << text;
  EXPECT_EQ(text.out, "no GPU is held: coordination file " + coordinationFile() +
                          " has no records\n\n" +
                          table({{"GPU", "STATE", "DETAIL"},
                                 {"0", "shared",
                                  "1 of 2 shares held; share 1 held by a lease of another "
                                  "process, without a record"}}))
      << text;
}

TEST_F(ShareStatusCliTest, AnUnreadableSharingFileIsAWarningAndStatusGoesOnWithoutIt) {
  host(2);
  writeRecords(record(0, ::getpid()));
  const CliRun before = cli({"status"});
  ASSERT_EQ(before.exitCode, 0) << before;
  EXPECT_TRUE(contains(cli({"status", "--format", "prometheus"}).out,
                       "\nflink_gpu_sharing_declarations_readable 1\n"));
  // Declarations that cannot be read: past the size any file of the store may have. (A file that
  // fails the trust rules is moved aside by who may: store/Siblings.h.)
  std::ofstream(sharingFile()) << std::string((4u << 20) + 1, '#');

  const CliRun text = cli({"status"});
  EXPECT_EQ(text.exitCode, 0) << text;
  EXPECT_EQ(text.out, before.out) << text;
  ASSERT_EQ(linesOf(text.err).size(), 1u) << text;
  EXPECT_TRUE(text.err.starts_with("flink-gpu: warning: cannot read the sharing declarations: "))
      << text;
  EXPECT_TRUE(contains(text.err, sharingFile().string())) << text;

  const CliRun jsonRun = cli({"status", "--format", "json"});
  EXPECT_EQ(jsonRun.exitCode, 0) << jsonRun;
  const json status = json::parse(jsonRun.out);
  EXPECT_TRUE(contains(status.at("sharing_error").get<std::string>(), sharingFile().string()))
      << status;
  EXPECT_TRUE(gpuOf(status, "0").at("sharing").is_null()) << status;
  EXPECT_EQ(gpuOf(status, "0").at("state"), "held") << status;

  const CliRun metrics = cli({"status", "--format", "prometheus"});
  EXPECT_EQ(metrics.exitCode, 0) << metrics;
  EXPECT_FALSE(contains(metrics.out, "\nflink_gpu_shares{")) << metrics.out;
  EXPECT_TRUE(contains(metrics.out, "\nflink_gpu_sharing_declarations_readable 0\n"))
      << metrics.out;
  EXPECT_TRUE(promtoolAccepts(metrics.out));
}

// --- metrics -------------------------------------------------------------------------------------

TEST_F(ShareStatusCliTest, MetricsGiveSharesAndSharesHeldAndHeldCountsOnlyWholeGpus) {
  host(4);
  ASSERT_EQ(cli({"share", "--gpu", "0", "--replicas", "4"}).exitCode, 0);
  ASSERT_EQ(cli({"share", "--gpu", "1", "--replicas", "2"}).exitCode, 0);
  const pid_t first = worker();
  const pid_t second = worker();
  const pid_t whole = worker();
  const pid_t leftOver = worker();
  // GPU 0: two live shares, a gone one, one held by its lease alone. GPU 1: declared, free. GPU
  // 2: held whole. GPU 3: a live share of a GPU no longer declared.
  writeRecords(record(0, first, "0/4") + record(0, second, "1/4") + goneRecord(0, "2/4") +
               record(2, whole) + record(3, leftOver, "0/2"));
  holdShareLease(0, 3);

  const CliRun metrics = cli({"status", "--format", "prometheus"});
  EXPECT_EQ(metrics.exitCode, 0) << metrics;
  const std::string& out = metrics.out;
  const auto labels = [](unsigned gpu) {
    return "{gpu=\"" + std::to_string(gpu) + "\",uuid=\"" + standInUuid(gpu) + "\"}";
  };
  for (const char* name : {"flink_gpu_shares", "flink_gpu_shares_held"}) {
    EXPECT_TRUE(contains(out, std::string("# HELP ") + name + " ")) << out;
    EXPECT_TRUE(contains(out, std::string("# TYPE ") + name + " gauge\n")) << out;
  }
  EXPECT_TRUE(contains(out, "\nflink_gpu_shares" + labels(0) + " 4\n")) << out;
  EXPECT_TRUE(contains(out, "\nflink_gpu_shares" + labels(1) + " 2\n")) << out;
  EXPECT_FALSE(contains(out, "\nflink_gpu_shares" + labels(2))) << out;
  EXPECT_FALSE(contains(out, "\nflink_gpu_shares" + labels(3))) << out;
  EXPECT_TRUE(contains(out, "\nflink_gpu_shares_held" + labels(0) + " 3\n")) << out;
  EXPECT_TRUE(contains(out, "\nflink_gpu_shares_held" + labels(1) + " 0\n")) << out;
  EXPECT_FALSE(contains(out, "\nflink_gpu_shares_held" + labels(2))) << out;
  EXPECT_TRUE(contains(out, "\nflink_gpu_shares_held" + labels(3) + " 1\n")) << out;
  // Shares hold no GPU whole.
  EXPECT_TRUE(contains(out, "\nflink_gpu_held" + labels(0) + " 0\n")) << out;
  EXPECT_FALSE(contains(out, "owner_pid=\"" + std::to_string(first) + "\"")) << out;
  EXPECT_TRUE(contains(out, "\nflink_gpu_held" + labels(3) + " 0\n")) << out;
  EXPECT_TRUE(contains(out, "\nflink_gpu_held" + labels(2) + " 1\n")) << out;
  EXPECT_FALSE(contains(out, "owner_pid")) << out;
  EXPECT_TRUE(contains(out, "# HELP flink_gpu_held Whether the GPU is held whole (1)")) << out;
  EXPECT_TRUE(promtoolAccepts(out));
}

}  // namespace
