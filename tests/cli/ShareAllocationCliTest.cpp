// Shares from the outside: the real nvidia-gpu-discovery program with --share on the stand-in
// libnvidia-ml.so.1, beside `flink-gpu share` and `drain`, and beside what Flink's own script
// does to the same file (tests/fixtures/flink-script): the island host's placement of a fresh
// share, a drained GPU giving no new share, Flink's script reading share lines as taken, and a
// share's lease outliving Flink's unanchored `sed`.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "CliRun.h"
#include "StandInHost.h"
#include "TestSupport.h"
#include "host/coordination/Coordination.h"
#include "host/coordination/ShareAllocation.h"

namespace {

namespace fs = std::filesystem;
using flink::testing::Background;
using flink::testing::CliRun;
using flink::testing::firstLine;
using flink::testing::linesOf;
using flink::testing::readFile;
using flink::testing::runCli;
using flink::testing::runCliAt;
using flink::testing::sleepPath;
using flink::testing::standInUuid;
using flink::testing::TempDir;

using flink::testing::contains;

class ShareAllocationCliTest : public ::testing::Test {
 protected:
  /// A host of `count` H200s of 143771 MiB without topology.
  void host(unsigned count) {
    hostFile_ = dir_ / "host.json";
    flink::testing::writeStandInHost(hostFile_, count);
  }

  std::vector<std::string> environment() const {
    return {std::string("FLINK_GPU_NVML_LIBRARY=") + FAKE_NVML_FULL,
            "FAKE_NVML_DEVICES=" + hostFile_.string(), "PATH=/usr/bin:/bin"};
  }
  std::string file() const { return (dir_ / "coordination").string(); }

  /// `flink-gpu <command> --coordination-file F <args...>`.
  CliRun cli(std::vector<std::string> args) const {
    args.insert(args.begin() + 1, {"--coordination-file", file()});
    return runCli(args, environment());
  }

  /// nvidia-gpu-discovery <amount> --enable-coordination-mode --coordination-file F
  /// --owner-pid <owner> <args...>, as Flink's driver runs it, with `more` environment.
  CliRun discover(const std::string& amount, pid_t owner, std::vector<std::string> args,
                  const std::vector<std::string>& more = {}) const {
    args.insert(args.begin(), {amount, "--enable-coordination-mode", "--coordination-file", file(),
                               "--owner-pid", std::to_string(owner)});
    std::vector<std::string> env = environment();
    env.insert(env.end(), more.begin(), more.end());
    return runCliAt(FLINK_GPU_DISCOVERY, dir_.path(), args, env);
  }

  /// A running stand-in worker.
  std::unique_ptr<Background> worker() {
    const std::string name = "worker-" + std::to_string(workers_++);
    return std::make_unique<Background>(std::vector<std::string>{sleepPath(), "300"},
                                        dir_ / (name + ".log"));
  }

  /// Runs what Flink's own script does to the file for `amount` of `gpus` for `owner`.
  CliRun flinkScript(const std::string& amount, pid_t owner,
                     const std::vector<std::string>& gpus) const {
    std::vector<std::string> args{"/bin/bash", FLINK_SCRIPT, file(), amount, std::to_string(owner)};
    args.insert(args.end(), gpus.begin(), gpus.end());
    return runCliAt("/usr/bin/env", dir_.path(), args, {"PATH=/usr/bin:/bin"});
  }

  TempDir dir_{"flink-gpu-share-allocation-test"};
  fs::path hostFile_;
  int workers_ = 0;
};

TEST_F(ShareAllocationCliTest, TheProgramHandsOutSharesAndRecordsThemInFlinksForm) {
  host(2);
  ASSERT_EQ(cli({"share", "--gpu", "0", "--replicas", "2"}).exitCode, 0);
  const auto first = worker();
  const CliRun a = discover("1", first->pid(), {"--share"});
  ASSERT_EQ(a.exitCode, 0) << a;
  EXPECT_EQ(a.out, "0\n");
  const std::vector<std::string> lines = linesOf(readFile(file()));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(lines[0].starts_with("0 " + first->pidText() + "\t")) << lines[0];
  EXPECT_TRUE(contains(lines[0], "\tshare=0/2\t")) << lines[0];
  EXPECT_EQ(std::count(lines[0].begin(), lines[0].end(), ' '), 1) << lines[0];

  const auto second = worker();
  EXPECT_EQ(discover("1", second->pid(), {"--share"}).out, "0\n");
  const auto third = worker();
  const CliRun refused = discover("1", third->pid(), {"--share"});
  EXPECT_EQ(refused.exitCode, 1) << refused;
  EXPECT_EQ(firstLine(refused.err), "not enough free GPU shares: 1 requested, 0 free") << refused;
  EXPECT_TRUE(contains(refused.err, "GPU 0 has no free share: 2 of 2 shares held")) << refused;
  EXPECT_TRUE(contains(refused.err, "GPU 1 is not declared shared")) << refused;
  // A whole request cannot have GPU 0 while shares of it live: GPU 1, then nothing.
  EXPECT_EQ(discover("1", third->pid(), {}).out, "1\n");
  const auto fourth = worker();
  EXPECT_EQ(discover("1", fourth->pid(), {}).exitCode, 1);
  // Once both share holders are gone, GPU 0 goes whole, its share records taken back.
  first->stop();
  second->stop();
  const CliRun whole = discover("1", fourth->pid(), {});
  EXPECT_EQ(whole.out, "0\n") << whole;
  EXPECT_FALSE(contains(readFile(file()), "share=")) << readFile(file());
}

TEST_F(ShareAllocationCliTest, AnMpsShareWithoutItsDaemonIsGivenWithAWarning) {
  host(1);
  const fs::path pipe = dir_ / "mps";
  fs::create_directory(pipe);
  ASSERT_EQ(cli({"share", "--gpu", "0", "--replicas", "2", "--mps", pipe.string()}).exitCode, 0);
  const auto owner = worker();
  const CliRun run = discover("1", owner->pid(), {"--share"});
  EXPECT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, "0\n");
  EXPECT_TRUE(contains(run.err, "warning: no MPS control daemon runs for " + pipe.string() + " (" +
                                    (pipe / "control").string() + " does not exist)"))
      << run;
  EXPECT_TRUE(contains(run.err, "a CUDA process given this share runs without MPS")) << run;
  // With the daemon's socket there, no warning.
  const int socket = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(socket, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const std::string control = (pipe / "control").string();
  ASSERT_LT(control.size(), sizeof address.sun_path);
  std::memcpy(address.sun_path, control.c_str(), control.size() + 1);
  ASSERT_EQ(::bind(socket, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);
  const auto other = worker();
  const CliRun quiet = discover("1", other->pid(), {"--share"});
  ::close(socket);
  EXPECT_EQ(quiet.out, "0\n") << quiet;
  EXPECT_FALSE(contains(quiet.err, "warning")) << quiet;
}

TEST_F(ShareAllocationCliTest, AWholeRequestShortOfASharedGpuSaysItIsShared) {
  host(1);
  ASSERT_EQ(cli({"share", "--gpu", "0", "--replicas", "2"}).exitCode, 0);
  const auto holder = worker();
  ASSERT_EQ(discover("1", holder->pid(), {"--share"}).out, "0\n");
  const auto other = worker();
  const CliRun whole = discover("1", other->pid(), {});
  EXPECT_EQ(whole.exitCode, 1) << whole;
  EXPECT_TRUE(
      contains(whole.err, "GPU 0 is shared: share 0/2 is held by process " + holder->pidText()))
      << whole;
}

TEST_F(ShareAllocationCliTest, NothingDeclaredNamesTheShareCommand) {
  host(2);
  const auto owner = worker();
  const CliRun run = discover("1", owner->pid(), {"--share"});
  EXPECT_EQ(run.exitCode, 1) << run;
  EXPECT_EQ(firstLine(run.err), "no GPU of this host is declared shared (flink-gpu share)") << run;
  EXPECT_FALSE(fs::exists(file()) && !readFile(file()).empty());
}

TEST_F(ShareAllocationCliTest, OnTheIslandHostAFreshShareGoesWhereItSpoilsNoWholeIsland) {
  hostFile_ = fs::path(FAKE_NVML_HOSTS) / "islands-8.json";
  ASSERT_EQ(cli({"share", "--gpu", "all", "--replicas", "4"}).exitCode, 0);
  // GPU 4 of the second island is held whole: the first island stays whole for whole requests.
  const auto whole = worker();
  std::ofstream(file()) << "4 " << whole->pid() << '\n';
  const auto owner = worker();
  const CliRun topology = discover("1", owner->pid(), {"--share"});
  EXPECT_EQ(topology.out, "5\n") << topology;
  // By index, as Flink's rule: the first declared GPU.
  const auto other = worker();
  const CliRun index = discover("1", other->pid(), {"--share", "--placement", "index"});
  EXPECT_EQ(index.out, "5\n") << "pack: the GPU that already has a share first\n" << index;
  const auto spread = worker();
  const CliRun spreadIndex = discover(
      "1", spread->pid(), {"--share", "--placement", "index", "--share-placement", "spread"});
  EXPECT_EQ(spreadIndex.out, "0\n") << spreadIndex;
}

TEST_F(ShareAllocationCliTest, AfterUnshareLiveSharesKeepTheGpuUntilTheyEnd) {
  host(2);
  ASSERT_EQ(cli({"share", "--gpu", "0", "--replicas", "4"}).exitCode, 0);
  const auto holder = worker();
  ASSERT_EQ(discover("1", holder->pid(), {"--share"}).out, "0\n");
  ASSERT_EQ(cli({"unshare", "--gpu", "0"}).exitCode, 0);
  // The share is never revoked: its record stays, no new share is handed out of GPU 0, and no
  // whole request takes it while the share lives.
  EXPECT_TRUE(contains(readFile(file()), "\tshare=0/4")) << readFile(file());
  const auto other = worker();
  const CliRun share = discover("1", other->pid(), {"--share"});
  EXPECT_EQ(share.exitCode, 1) << share;
  EXPECT_EQ(firstLine(share.err), "no GPU of this host is declared shared (flink-gpu share)");
  EXPECT_EQ(discover("2", other->pid(), {}).exitCode, 1);
  EXPECT_EQ(discover("1", other->pid(), {}).out, "1\n");
  // Once it ends, whole requests take GPU 0 as any free GPU.
  holder->stop();
  const auto last = worker();
  EXPECT_EQ(discover("1", last->pid(), {}).out, "0\n");
}

TEST_F(ShareAllocationCliTest, AnInheritedMaskLimitsTheSharesAndKeepsItsOwnEntries) {
  host(3);
  ASSERT_EQ(cli({"share", "--gpu", "all", "--replicas", "2"}).exitCode, 0);
  const auto owner = worker();
  // Only GPU 2 is allowed, by its UUID: the share is of GPU 2, printed as the mask's entry.
  const std::string uuid2 = standInUuid(2);
  const CliRun run = discover("1", owner->pid(), {"--share"}, {"CUDA_VISIBLE_DEVICES=" + uuid2});
  EXPECT_EQ(run.exitCode, 0) << run;
  EXPECT_EQ(run.out, uuid2 + "\n") << run;
  EXPECT_TRUE(readFile(file()).starts_with("2 " + owner->pidText() + "\t")) << readFile(file());
  const CliRun two = discover("2", owner->pid(), {"--share"}, {"CUDA_VISIBLE_DEVICES=" + uuid2});
  EXPECT_EQ(two.exitCode, 1) << two;
}

TEST_F(ShareAllocationCliTest, ADrainedGpuGivesNoNewShareAndItsHoldersKeepTheirs) {
  host(2);
  ASSERT_EQ(cli({"share", "--gpu", "all", "--replicas", "4"}).exitCode, 0);
  const auto first = worker();
  ASSERT_EQ(discover("1", first->pid(), {"--share"}).out, "0\n");
  ASSERT_EQ(cli({"drain", "--gpu", "0", "--reason", "Xid 79"}).exitCode, 0);
  const auto second = worker();
  const CliRun run = discover("1", second->pid(), {"--share"});
  EXPECT_EQ(run.out, "1\n") << "pack would take GPU 0, but it is drained\n" << run;
  const std::string text = readFile(file());
  EXPECT_TRUE(contains(text, "0 " + first->pidText() + "\t")) << text;
}

TEST_F(ShareAllocationCliTest, FlinksScriptReadsShareLinesAsTakenAndTakesBackOnlyALoneDeadOne) {
  host(1);
  const pid_t dead1 = flink::testing::deadPid();
  const pid_t dead2 = flink::testing::deadPid();
  const auto flinkWorker = worker();
  // Two share lines of GPU 0, both owners dead: Flink's take-back test breaks on the two owners
  // and leaves GPU 0 taken, the file as it was.
  const std::string two = "0 " + std::to_string(dead1) + "\t1\tshare=0/4\n0 " +
                          std::to_string(dead2) + "\t1\tshare=1/4\n";
  std::ofstream(file(), std::ios::trunc) << two;
  const CliRun flink = flinkScript("1", flinkWorker->pid(), {"0"});
  EXPECT_EQ(flink.exitCode, 1) << flink;
  EXPECT_TRUE(contains(flink.out + flink.err, "Could not get enough GPU resources")) << flink;
  EXPECT_EQ(readFile(file()), two);
  // Our allocators take them back.
  ASSERT_EQ(cli({"share", "--gpu", "0", "--replicas", "4"}).exitCode, 0);
  const auto ours = worker();
  EXPECT_EQ(discover("1", ours->pid(), {"--share"}).out, "0\n");
  // A live share line alone: taken for Flink too.
  const auto flinkAgain = worker();
  EXPECT_EQ(flinkScript("1", flinkAgain->pid(), {"0"}).exitCode, 1);
  // One share line whose owner is dead: Flink takes GPU 0 back, which is right (no share lives).
  std::ofstream(file(), std::ios::trunc) << "0 " << dead1 << "\t1\tshare=0/4\n";
  const CliRun back = flinkScript("1", flinkWorker->pid(), {"0"});
  EXPECT_EQ(back.exitCode, 0) << back;
  EXPECT_EQ(back.out, "0\n");
  EXPECT_EQ(readFile(file()), "0 " + flinkWorker->pidText() + "\n");
}

TEST_F(ShareAllocationCliTest, AShareLeaseOutlivesFlinksSedOfAnotherGpusLine) {
  host(11);
  ASSERT_EQ(cli({"share", "--gpu", "10", "--replicas", "2"}).exitCode, 0);
  // This process holds share 0 of GPU 10 with its lease, as exec and the driver do; GPU 0 is a
  // dead Flink worker's.
  flink::coordination::ShareRequest request;
  request.gpus = {"10"};
  request.shareable = {{"10", 2, ""}};
  request.amount = 1;
  request.owner = flink::coordination::Owner::of(::getpid());
  request.uuids = {{"10", standInUuid(10)}};
  request.lease = true;
  std::ofstream(file(), std::ios::trunc) << "0 " << flink::testing::deadPid() << '\n';
  const flink::coordination::ShareAllocation held =
      flink::coordination::allocateShares(file(), request);
  ASSERT_TRUE(held.satisfied);
  // Under the GPU's UUID and its index in this mount namespace's numbering (LeaseNames).
  ASSERT_EQ(held.leases.size(), 2u);
  // Flink's script takes GPU 0 back with `sed -i "/0 /d"`, which deletes GPU 10's line too.
  const auto flinkWorker = worker();
  ASSERT_EQ(flinkScript("1", flinkWorker->pid(), {"0"}).out, "0\n");
  EXPECT_FALSE(contains(readFile(file()), "10 ")) << readFile(file());
  // The leased share stays taken: no whole request takes GPU 10, the next share request gets
  // its other share, and then none is left.
  const auto last = worker();
  const CliRun whole = discover("10", last->pid(), {});
  EXPECT_EQ(whole.exitCode, 1) << whole;
  EXPECT_TRUE(contains(whole.err, "GPU 10 is held by a lease of another process, without a record"))
      << whole;
  const auto next = worker();
  const CliRun share = discover("1", next->pid(), {"--share"});
  EXPECT_EQ(share.out, "10\n") << share;
  EXPECT_TRUE(contains(readFile(file()), "\tshare=1/2")) << readFile(file());
  EXPECT_EQ(discover("1", last->pid(), {"--share"}).exitCode, 1);
}

}  // namespace
