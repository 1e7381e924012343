// `flink-gpu share` and `unshare` from the outside: the real binary on the stand-in
// libnvidia-ml.so.1 of tests/fixtures/nvml. Declaring by replicas and by memory, `all` skipping a
// GPU in MIG mode, MPS, every bad value with its exit code and nothing written, replacing and
// taking out, junk lines kept while the valid ones beside them apply, a symlink refused, and the
// coordination file never written.
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "CliRun.h"
#include "StandInHost.h"
#include "TestSupport.h"

namespace {

namespace fs = std::filesystem;
using flink::testing::CliRun;
using flink::testing::firstLine;
using flink::testing::linesOf;
using flink::testing::readFile;
using flink::testing::runCli;
using flink::testing::standInUuid;
using flink::testing::TempDir;

using flink::testing::contains;

class ShareCliTest : public ::testing::Test {
 protected:
  /// A host of `count` H200s of 143771 MiB; `gpuExtra[i]` replaces GPU i's members after its
  /// UUID when not empty.
  void host(unsigned count, const std::vector<std::string>& gpuExtra = {}) {
    hostFile_ = dir_ / "host.json";
    flink::testing::writeStandInHost(hostFile_, count, gpuExtra);
  }

  std::string coordinationFile() const { return (dir_ / "coordination").string(); }
  fs::path sharingFile() const { return dir_ / "coordination.sharing"; }

  /// `flink-gpu <command> --coordination-file F <args...>`.
  CliRun cli(std::vector<std::string> args) const {
    args.insert(args.begin() + 1, {"--coordination-file", coordinationFile()});
    return runCli(args, {std::string("FLINK_GPU_NVML_LIBRARY=") + FAKE_NVML_FULL,
                         "FAKE_NVML_DEVICES=" + hostFile_.string(), "PATH=/usr/bin:/bin"});
  }

  /// The files of the test's folder but the host description.
  std::vector<std::string> written() const {
    std::vector<std::string> names;
    for (const fs::directory_entry& entry : fs::directory_iterator(dir_.path())) {
      if (entry.path() != hostFile_) names.push_back(entry.path().filename().string());
    }
    return names;
  }

  /// The declaration lines of the sharing file (comments left out).
  std::vector<std::string> declarations() const {
    std::vector<std::string> lines;
    for (const std::string& line : linesOf(readFile(sharingFile()))) {
      if (!line.starts_with('#')) lines.push_back(line);
    }
    return lines;
  }

  TempDir dir_{"flink-gpu-share-cli-test"};
  fs::path hostFile_;
};

TEST_F(ShareCliTest, ReplicasSplitTheMemoryRoundedDown) {
  host(2);
  const CliRun share = cli({"share", "--gpu", "0", "--replicas", "4"});
  EXPECT_EQ(share.exitCode, 0) << share;
  EXPECT_EQ(share.out,
            "shared GPU 0 (" + standInUuid(0) + "): 4 shares of 35942 MiB, time-sliced\n")
      << share;
  const std::string text = readFile(sharingFile());
  EXPECT_TRUE(text.starts_with("# ")) << text;
  ASSERT_EQ(declarations().size(), 1u) << text;
  EXPECT_TRUE(declarations()[0].starts_with("shared\tgpu=0\tuuid=" + standInUuid(0) +
                                            "\treplicas=4\tmemory=35942\tsince="))
      << text;
  EXPECT_TRUE(declarations()[0].ends_with("\tuid=" + std::to_string(::getuid()))) << text;
  EXPECT_FALSE(contains(text, "mps=")) << text;
  // share writes nothing into the coordination file.
  EXPECT_FALSE(fs::exists(coordinationFile()));
}

TEST_F(ShareCliTest, AMissingFolderOfTheCoordinationFileIsNamed) {
  host(2);
  const std::string missing = (dir_ / "nodir").string();
  const CliRun share =
      runCli({"share", "--gpu", "0", "--replicas", "2", "--coordination-file", missing + "/c"},
             {std::string("FLINK_GPU_NVML_LIBRARY=") + FAKE_NVML_FULL,
              "FAKE_NVML_DEVICES=" + hostFile_.string(), "PATH=/usr/bin:/bin"});
  EXPECT_EQ(share.exitCode, 1) << share;
  EXPECT_TRUE(firstLine(share.err).ends_with(": cannot create it: the folder " + missing +
                                             " does not exist"))
      << share;
  EXPECT_FALSE(fs::exists(missing));
}

TEST_F(ShareCliTest, ShareMemoryGivesKRoundedDownAndAUuidNamesTheGpu) {
  host(2);
  const CliRun share = cli({"share", "--gpu", standInUuid(1), "--share-memory", "40960"});
  EXPECT_EQ(share.exitCode, 0) << share;
  EXPECT_EQ(share.out,
            "shared GPU 1 (" + standInUuid(1) + "): 3 shares of 40960 MiB, time-sliced\n")
      << share;
  ASSERT_EQ(declarations().size(), 1u);
  EXPECT_TRUE(contains(declarations()[0],
                       "\tgpu=1\tuuid=" + standInUuid(1) + "\treplicas=3\tmemory=40960\t"))
      << declarations()[0];
}

TEST_F(ShareCliTest, AnIslandHostsH200InFourShares) {
  hostFile_ = fs::path(FAKE_NVML_HOSTS) / "islands-8.json";
  const CliRun share = cli({"share", "--gpu", "3", "--replicas", "4"});
  EXPECT_EQ(share.exitCode, 0) << share;
  EXPECT_TRUE(contains(share.out, "4 shares of 35942 MiB, time-sliced")) << share;
}

TEST_F(ShareCliTest, AllSkipsAGpuInMigModeWithANoteAndMpsNamesItsDirectory) {
  host(3, {"", R"("memory_total_mib": 143771, "mig_enabled": true, "mig": [])"});
  const CliRun share = cli({"share", "--gpu", "all", "--replicas", "3", "--mps", "/run/mps 1"});
  EXPECT_EQ(share.exitCode, 0) << share;
  EXPECT_EQ(share.out, "shared GPU 0 (" + standInUuid(0) +
                           "): 3 shares of 47923 MiB, MPS /run/mps 1\n"
                           "shared GPU 2 (" +
                           standInUuid(2) + "): 3 shares of 47923 MiB, MPS /run/mps 1\n")
      << share;
  EXPECT_TRUE(
      contains(share.err, "note: GPU 1 (" + standInUuid(1) + ") is in MIG mode: not shared"))
      << share;
  ASSERT_EQ(declarations().size(), 2u);
  for (const std::string& line : declarations()) {
    EXPECT_TRUE(contains(line, "\treplicas=3\tmemory=47923\tmps=/run/mps 1\tsince=")) << line;
    EXPECT_FALSE(contains(line, "gpu=1\t")) << line;
  }
}

TEST_F(ShareCliTest, TooLittleMemoryToSplitGivesSharesWithoutABudgetAndMpsIsSpelledOnce) {
  host(2, {R"("memory_total_mib": 3, "mig_enabled": false)"});
  const CliRun share = cli({"share", "--gpu", "0", "--replicas", "4", "--mps", "/run//mps/./a/"});
  EXPECT_EQ(share.exitCode, 0) << share;
  EXPECT_EQ(share.out,
            "shared GPU 0 (" + standInUuid(0) + "): 4 shares (memory unknown), MPS /run/mps/a\n")
      << share;
  EXPECT_TRUE(contains(share.err, "reports 3 MiB of memory, less than a MiB a share")) << share;
  ASSERT_EQ(declarations().size(), 1u);
  EXPECT_FALSE(contains(declarations()[0], "memory=")) << declarations()[0];
  EXPECT_TRUE(contains(declarations()[0], "\tmps=/run/mps/a\t")) << declarations()[0];
  // CUDA's own pipe directory is taken, with a warning: its daemon serves every CUDA process.
  const CliRun defaultDirectory =
      cli({"share", "--gpu", "1", "--replicas", "2", "--mps", "/tmp/nvidia-mps"});
  EXPECT_EQ(defaultDirectory.exitCode, 0) << defaultDirectory;
  EXPECT_TRUE(
      contains(defaultDirectory.err, "warning: /tmp/nvidia-mps is CUDA's own pipe directory"))
      << defaultDirectory;
}

TEST_F(ShareCliTest, BadValuesAreUsageErrorsThatQuoteThemAndWriteNothing) {
  host(2);
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--gpu", "0", "--replicas", "0"}, "invalid --replicas '0': "},
      {{"--gpu", "0", "--replicas", "1"}, "invalid --replicas '1': "},
      {{"--gpu", "0", "--replicas", "49"}, "invalid --replicas '49': "},
      {{"--gpu", "0", "--replicas=-4"}, "invalid --replicas '-4': "},
      {{"--gpu", "0", "--replicas", "2.5"}, "invalid --replicas '2.5': "},
      {{"--gpu", "0", "--replicas", "four"}, "invalid --replicas 'four': "},
      {{"--gpu", "0"}, "give --replicas K (how many workers share each GPU) or --share-memory"},
      {{"--gpu", "0", "--replicas", "2", "--share-memory", "1024"},
       "give --replicas or --share-memory, not both (--replicas '2', --share-memory '1024')"},
      {{"--gpu", "0", "--share-memory", "0"}, "invalid --share-memory '0': "},
      {{"--gpu", "0", "--share-memory", "1.5"}, "invalid --share-memory '1.5': "},
      {{"--gpu", "0", "--share-memory", "lots"}, "invalid --share-memory 'lots': "},
      {{"--gpu", "0", "--replicas", "2", "--mps", "run/mps"}, "invalid --mps 'run/mps': "},
      {{"--gpu", "zero", "--replicas", "2"}, "invalid --gpu 'zero': "},
      {{"--gpu", "MIG-aa000000-0000-4000-8000-000000000001", "--replicas", "2"},
       "invalid --gpu 'MIG-aa000000-0000-4000-8000-000000000001': "},
      {{"--gpu", "0,1", "--replicas", "2"}, "invalid --gpu '0,1': "},
      {{"--replicas", "2"}, "share needs --gpu ID|all"},
  };
  for (const auto& [args, error] : cases) {
    std::vector<std::string> argv{"share"};
    argv.insert(argv.end(), args.begin(), args.end());
    const CliRun share = cli(argv);
    EXPECT_EQ(share.exitCode, 2) << share;
    EXPECT_TRUE(firstLine(share.err).starts_with("flink-gpu: error: " + error)) << share;
    EXPECT_EQ(share.out, "") << share;
    EXPECT_TRUE(written().empty()) << share;
  }
  const CliRun unshare = cli({"unshare", "--gpu", "one"});
  EXPECT_EQ(unshare.exitCode, 2) << unshare;
  EXPECT_EQ(cli({"unshare"}).exitCode, 2);
  EXPECT_TRUE(written().empty());
}

TEST_F(ShareCliTest, WhatTheHostCannotGiveExitsOneNamingTheCauseAndWritesNothing) {
  host(3, {"", R"("memory_total_mib": 143771, "mig_enabled": true, "mig": [])",
           R"("mig_enabled": false)"});
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--gpu", "7", "--replicas", "2"}, "cannot share GPU 7: this host has no GPU 7"},
      {{"--gpu", standInUuid(7), "--replicas", "2"},
       "cannot share " + standInUuid(7) + ": no GPU of this host has this UUID"},
      {{"--gpu", "1", "--replicas", "2"},
       "cannot share GPU 1 (" + standInUuid(1) + "): it is in MIG mode"},
      {{"--gpu", "0", "--share-memory", "100000"},
       "cannot share GPU 0 (" + standInUuid(0) +
           ") in shares of 100000 MiB: its 143771 MiB give 1 share, and a GPU is shared among 2 "
           "to 48 workers"},
      {{"--gpu", "0", "--share-memory", "2048"},
       "cannot share GPU 0 (" + standInUuid(0) +
           ") in shares of 2048 MiB: its 143771 MiB give 70 "
           "shares"},
      {{"--gpu", "2", "--share-memory", "1024"},
       "cannot share GPU 2 (" + standInUuid(2) +
           ") in shares of 1024 MiB: its memory is not known"},
      // One GPU that cannot be shared fails all: nothing is written for the others either.
      {{"--gpu", "all", "--share-memory", "1024"}, "cannot share GPU 0 (" + standInUuid(0) + ")"},
  };
  for (const auto& [args, error] : cases) {
    std::vector<std::string> argv{"share"};
    argv.insert(argv.end(), args.begin(), args.end());
    const CliRun share = cli(argv);
    EXPECT_EQ(share.exitCode, 1) << share;
    EXPECT_TRUE(firstLine(share.err).starts_with("flink-gpu: error: " + error)) << share;
    EXPECT_EQ(share.out, "") << share;
    EXPECT_TRUE(written().empty()) << share;
  }
  // The error says what the host has.
  EXPECT_TRUE(
      contains(cli({"share", "--gpu", "7", "--replicas", "2"}).err,
               "NVML lists GPU 0 (" + standInUuid(0) + "), GPU 1 (" + standInUuid(1) + "), GPU 2"));
  // Where the memory is unknown, replicas still declare the GPU, without a memory.
  const CliRun unknown = cli({"share", "--gpu", "2", "--replicas", "2"});
  EXPECT_EQ(unknown.exitCode, 0) << unknown;
  EXPECT_TRUE(contains(unknown.out, "2 shares (memory unknown), time-sliced")) << unknown;
  EXPECT_FALSE(contains(readFile(sharingFile()), "memory=")) << readFile(sharingFile());
}

TEST_F(ShareCliTest, AllOnAHostWhoseEveryGpuIsInMigModeIsAnError) {
  host(1, {R"("memory_total_mib": 143771, "mig_enabled": true, "mig": [])"});
  const CliRun share = cli({"share", "--gpu", "all", "--replicas", "2"});
  EXPECT_EQ(share.exitCode, 1) << share;
  EXPECT_TRUE(contains(share.err, "every GPU of this host is in MIG mode")) << share;
  EXPECT_TRUE(written().empty());
}

TEST_F(ShareCliTest, DeclaringAgainReplacesAndUnshareTakesOut) {
  host(2);
  ASSERT_EQ(cli({"share", "--gpu", "all", "--replicas", "2"}).exitCode, 0);
  const CliRun again = cli({"share", "--gpu", "1", "--replicas", "8", "--mps", "/run/mps-1"});
  EXPECT_EQ(again.exitCode, 0) << again;
  EXPECT_EQ(again.out, "shared GPU 1 (" + standInUuid(1) +
                           "): 8 shares of 17971 MiB, MPS /run/mps-1 (was 2 shares of 71885 MiB, "
                           "time-sliced)\n")
      << again;
  ASSERT_EQ(declarations().size(), 2u);
  EXPECT_TRUE(contains(declarations()[0], "gpu=0\t")) << declarations()[0];
  EXPECT_TRUE(contains(declarations()[1], "gpu=1\tuuid=" + standInUuid(1) + "\treplicas=8\t"))
      << declarations()[1];

  const CliRun unshare = cli({"unshare", "--gpu", standInUuid(1)});
  EXPECT_EQ(unshare.exitCode, 0) << unshare;
  EXPECT_EQ(unshare.out, "unshared GPU 1 (" + standInUuid(1) +
                             "), which was 8 shares of 17971 MiB, MPS /run/mps-1\n")
      << unshare;
  ASSERT_EQ(declarations().size(), 1u);
  EXPECT_EQ(cli({"unshare", "--gpu", "1"}).out, "GPU 1 was not declared shared\n");
  EXPECT_EQ(cli({"unshare", "--gpu", "all"}).exitCode, 0);
  EXPECT_TRUE(declarations().empty());
  EXPECT_EQ(cli({"unshare", "--gpu", "all"}).out, "no GPU was declared shared\n");
  EXPECT_FALSE(fs::exists(coordinationFile()));
}

TEST_F(ShareCliTest, UnshareWorksForAGpuTheHostNoLongerHas) {
  host(1);
  std::ofstream(sharingFile()) << "# by hand\nshared\tgpu=5\tuuid=" << standInUuid(5)
                               << "\treplicas=4\tsince=5\n";
  const CliRun unshare = cli({"unshare", "--gpu", "5"});
  EXPECT_EQ(unshare.exitCode, 0) << unshare;
  EXPECT_TRUE(contains(unshare.out, "unshared GPU 5 (" + standInUuid(5) + ")")) << unshare;
  EXPECT_TRUE(declarations().empty());
}

TEST_F(ShareCliTest, JunkLinesAreKeptAndTheValidOnesBesideThemStillApply) {
  host(2);
  const std::vector<std::string> junk = {
      "exclusive\tgpu=0\treplicas=4\tsince=5",
      "shared\treplicas=4\tsince=5",
      "shared\tgpu=1\treplicas=64\tsince=5",
  };
  {
    std::ofstream file(sharingFile());
    file << "# by hand\n" << junk[0] << "\nshared\tgpu=1\treplicas=4\tsince=5\n";
    file << junk[1] << '\n' << junk[2] << '\n';
  }
  // The valid declaration of GPU 1 applies: declaring it again replaces it.
  const CliRun share = cli({"share", "--gpu", "1", "--replicas", "2"});
  EXPECT_EQ(share.exitCode, 0) << share;
  EXPECT_TRUE(contains(share.out, "(was 4 shares (memory unknown), time-sliced)")) << share;
  const CliRun unshare = cli({"unshare", "--gpu", "all"});
  EXPECT_EQ(unshare.exitCode, 0) << unshare;
  EXPECT_TRUE(contains(unshare.out, "unshared GPU 1")) << unshare;
  // The junk is what is left, as it was.
  EXPECT_EQ(declarations(), junk);
}

TEST_F(ShareCliTest, ASymlinkedSharingFileIsMovedAsideAndNeverFollowed) {
  if (::geteuid() != 0) GTEST_SKIP() << "no coordination file here: only root may move it aside";
  host(1);
  const fs::path target = dir_ / "elsewhere";
  std::ofstream(target) << "precious\n";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"share", "--gpu", "0", "--replicas", "2"},
        std::vector<std::string>{"unshare", "--gpu", "0"}}) {
    fs::remove(sharingFile());
    fs::create_symlink(target, sharingFile());
    const CliRun run = cli(args);
    EXPECT_EQ(run.exitCode, 0) << run;
    EXPECT_TRUE(contains(firstLine(run.err), "warning: sharing declarations " +
                                                 sharingFile().string() +
                                                 " failed the trust rules (it is a symbolic link"))
        << run;
    EXPECT_FALSE(fs::is_symlink(sharingFile()));
  }
  EXPECT_EQ(flink::testing::movedAside(sharingFile()).size(), 2u);
  EXPECT_EQ(readFile(target), "precious\n");
}

}  // namespace
