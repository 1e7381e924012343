// `flink-gpu exec --share` from the outside: the real binary on the stand-in libnvidia-ml.so.1 of
// tests/fixtures/nvml, with GPUs declared by `flink-gpu share`. What the command's environment
// holds for a time-sliced and for an MPS share (a real unix socket stands for the MPS control
// daemon), for two GPUs of different K, under --visible-devices and an inherited mask; one MPS
// group per request; the missing daemon refused with nothing left recorded; K holders of one GPU
// and the share free again once one ends; pack and spread; the usage errors; a whole-GPU exec
// dropping inherited share variables; an exec nested in an exec --share; what the allocation file
// says of a time-sliced and of an MPS share.
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
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

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using flink::testing::Background;
using flink::testing::BoundSocket;
using flink::testing::CliRun;
using flink::testing::firstLine;
using flink::testing::kCli;
using flink::testing::linesOf;
using flink::testing::readFile;
using flink::testing::runCli;
using flink::testing::sleepPath;
using flink::testing::standInUuid;
using flink::testing::TempDir;
using flink::testing::waitForLines;

using flink::testing::contains;

/// The variables `env` printed, by name.
std::map<std::string, std::string> variablesOf(const std::string& out) {
  std::map<std::string, std::string> variables;
  for (const std::string& line : linesOf(out)) {
    const std::size_t equals = line.find('=');
    if (equals != std::string::npos) variables[line.substr(0, equals)] = line.substr(equals + 1);
  }
  return variables;
}

std::optional<std::string> valueOf(const std::map<std::string, std::string>& variables,
                                   const std::string& name) {
  const auto found = variables.find(name);
  if (found == variables.end()) return std::nullopt;
  return found->second;
}

class ExecShareCliTest : public ::testing::Test {
 protected:
  /// A host of `count` H200s of 143771 MiB (of unknown memory with `knownMemory` false).
  void host(unsigned count, bool knownMemory = true) {
    flink::testing::writeStandInHost(
        hostFile(), count,
        std::vector<std::string>(
            count, knownMemory ? flink::testing::kH200Members : R"("mig_enabled": false)"));
  }

  fs::path hostFile() const { return dir_ / "host.json"; }
  std::string file() const { return (dir_ / "coordination").string(); }
  /// An MPS pipe directory, created.
  fs::path mpsDirectory(const std::string& name = "mps") const {
    fs::create_directories(dir_ / name);
    return dir_ / name;
  }
  fs::path marker() const { return dir_ / "marker"; }

  std::vector<std::string> environment(const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> env{std::string("FLINK_GPU_NVML_LIBRARY=") + FAKE_NVML_FULL,
                                 "FAKE_NVML_DEVICES=" + hostFile().string(), "PATH=/usr/bin:/bin"};
    env.insert(env.end(), extra.begin(), extra.end());
    return env;
  }

  /// `flink-gpu share --coordination-file F --gpu <gpu> --replicas <k> [--mps <dir>]`, which must
  /// succeed.
  void share(const std::string& gpu, unsigned replicas,
             const std::optional<fs::path>& mps = std::nullopt) const {
    std::vector<std::string> args{"share",      "--coordination-file",   file(), "--gpu", gpu,
                                  "--replicas", std::to_string(replicas)};
    if (mps) args.insert(args.end(), {"--mps", mps->string()});
    const CliRun run = runCli(args, environment());
    ASSERT_EQ(run.exitCode, 0) << run;
  }

  /// `flink-gpu exec --coordination-file F <options> -- <command>`, run to completion.
  CliRun exec(const std::vector<std::string>& options,
              const std::vector<std::string>& command = {"/usr/bin/env"},
              const std::vector<std::string>& extraEnvironment = {}) const {
    std::vector<std::string> args{"exec", "--coordination-file", file()};
    args.insert(args.end(), options.begin(), options.end());
    args.push_back("--");
    args.insert(args.end(), command.begin(), command.end());
    return runCli(args, environment(extraEnvironment));
  }

  /// The command that creates the marker file: run means it is there.
  std::vector<std::string> touchMarker() const { return {"/usr/bin/touch", marker().string()}; }

  /// `flink-gpu exec --share -n 1 -- sleep` in the background, once its command runs: it writes
  /// its parent's pid (exec's, the share's owner) into `<name>.started`, then becomes sleep.
  std::unique_ptr<Background> holder(const std::string& name) const {
    const fs::path started = dir_ / (name + ".started");
    std::vector<std::string> args{"/usr/bin/env"};
    const std::vector<std::string> env = environment();
    args.insert(args.end(), env.begin(), env.end());
    args.insert(args.end(),
                {kCli, "exec", "--coordination-file", file(), "--share", "-n", "1", "--", "/bin/sh",
                 "-c", "echo $PPID > '" + started.string() + "'; exec " + sleepPath() + " 60"});
    auto process = std::make_unique<Background>(args, dir_ / (name + ".log"));
    EXPECT_EQ(waitForLines(started, 1, 10s).size(), 1u) << readFile(dir_ / (name + ".log"));
    return process;
  }

  /// The lines of the coordination file that record a share.
  std::vector<std::string> shareRecords() const {
    std::vector<std::string> lines;
    if (!fs::exists(file())) return lines;
    for (const std::string& line : linesOf(readFile(file()))) {
      if (contains(line, "\tshare=")) lines.push_back(line);
    }
    return lines;
  }

  TempDir dir_{"exec-share"};
};

TEST_F(ExecShareCliTest, ATimeSlicedShareGetsItsIndexAndMemoryAndNoMpsVariable) {
  host(2);
  share("0", 2);
  // Inherited MPS client variables would make the command join a daemon it was not given.
  const CliRun run =
      exec({"--share", "-n", "1"}, {"/usr/bin/env"},
           {"CUDA_MPS_PIPE_DIRECTORY=/run/other-mps", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=10",
            "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=1M", "CUDA_MPS_LOG_DIRECTORY=/var/log/mps"});
  ASSERT_EQ(run.exitCode, 0) << run;
  const auto variables = variablesOf(run.out);
  EXPECT_EQ(valueOf(variables, "CUDA_VISIBLE_DEVICES"), "0") << run;
  EXPECT_EQ(valueOf(variables, "CUDA_DEVICE_ORDER"), "PCI_BUS_ID") << run;
  // 143771 MiB in 2 shares, rounded down.
  EXPECT_EQ(valueOf(variables, "FLINK_GPU_SHARE_MEMORY_MIB"), "71885") << run;
  EXPECT_EQ(valueOf(variables, "CUDA_MPS_PIPE_DIRECTORY"), std::nullopt) << run;
  EXPECT_EQ(valueOf(variables, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), std::nullopt) << run;
  EXPECT_EQ(valueOf(variables, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), std::nullopt) << run;
  // The daemon's own variable is left as it was.
  EXPECT_EQ(valueOf(variables, "CUDA_MPS_LOG_DIRECTORY"), "/var/log/mps") << run;
  EXPECT_EQ(run.err, "") << run;

  const CliRun uuid = exec({"--share", "-n", "1", "--visible-devices", "uuid"});
  ASSERT_EQ(uuid.exitCode, 0) << uuid;
  EXPECT_EQ(valueOf(variablesOf(uuid.out), "CUDA_VISIBLE_DEVICES"), standInUuid(0)) << uuid;
  // A CUDA_DEVICE_ORDER already set is the user's.
  const CliRun fastest =
      exec({"--share", "-n", "1"}, {"/usr/bin/env"}, {"CUDA_DEVICE_ORDER=FASTEST_FIRST"});
  EXPECT_EQ(valueOf(variablesOf(fastest.out), "CUDA_DEVICE_ORDER"), "FASTEST_FIRST") << fastest;
}

TEST_F(ExecShareCliTest, AnMpsShareGetsTheUuidThePipeDirectoryAPercentageAndAPinnedLimit) {
  host(2);
  const fs::path mps = mpsDirectory();
  share("1", 3, mps);
  BoundSocket daemon(mps / "control");
  const CliRun run =
      exec({"--share", "-n", "1"}, {"/usr/bin/env"}, {"CUDA_MPS_LOG_DIRECTORY=/var/log/mps"});
  ASSERT_EQ(run.exitCode, 0) << run;
  const auto variables = variablesOf(run.out);
  EXPECT_EQ(valueOf(variables, "CUDA_VISIBLE_DEVICES"), standInUuid(1)) << run;
  EXPECT_EQ(valueOf(variables, "CUDA_DEVICE_ORDER"), "PCI_BUS_ID") << run;
  EXPECT_EQ(valueOf(variables, "CUDA_MPS_PIPE_DIRECTORY"), mps.string()) << run;
  // 100 / 3, rounded down; 143771 MiB / 3 = 47923 MiB.
  EXPECT_EQ(valueOf(variables, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "33") << run;
  EXPECT_EQ(valueOf(variables, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "0=47923M") << run;
  EXPECT_EQ(valueOf(variables, "FLINK_GPU_SHARE_MEMORY_MIB"), "47923") << run;
  EXPECT_EQ(valueOf(variables, "CUDA_MPS_LOG_DIRECTORY"), "/var/log/mps") << run;
  EXPECT_EQ(run.err, "") << run;

  const CliRun index = exec({"--share", "-n", "1", "--visible-devices", "index"});
  ASSERT_EQ(index.exitCode, 0) << index;
  EXPECT_EQ(valueOf(variablesOf(index.out), "CUDA_VISIBLE_DEVICES"), "1") << index;
  EXPECT_EQ(valueOf(variablesOf(index.out), "CUDA_MPS_PIPE_DIRECTORY"), mps.string()) << index;

  // An inherited mask keeps its own entries; the ordinal is still the place in it.
  const CliRun masked = exec({"--share", "-n", "1"}, {"/usr/bin/env"}, {"CUDA_VISIBLE_DEVICES=1"});
  ASSERT_EQ(masked.exitCode, 0) << masked;
  EXPECT_EQ(valueOf(variablesOf(masked.out), "CUDA_VISIBLE_DEVICES"), "1") << masked;
  EXPECT_EQ(valueOf(variablesOf(masked.out), "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "0=47923M")
      << masked;
}

TEST_F(ExecShareCliTest, TwoGpusOfDifferentKGetTheSmallestPercentageAndAnEntryEach) {
  host(2);
  const fs::path mps = mpsDirectory();
  share("0", 2, mps);
  share("1", 3, mps);
  BoundSocket daemon(mps / "control");
  const CliRun run = exec({"--share", "-n", "2"});
  ASSERT_EQ(run.exitCode, 0) << run;
  const auto variables = variablesOf(run.out);
  EXPECT_EQ(valueOf(variables, "CUDA_VISIBLE_DEVICES"), standInUuid(0) + "," + standInUuid(1))
      << run;
  EXPECT_EQ(valueOf(variables, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "33") << run;
  EXPECT_EQ(valueOf(variables, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "0=71885M,1=47923M") << run;
  EXPECT_EQ(valueOf(variables, "FLINK_GPU_SHARE_MEMORY_MIB"), "71885,47923") << run;
}

/// What FLINK_GPU_ALLOCATION_FILE of a command run by exec --share says, and exec's pid (`owner`).
nlohmann::json allocationFileOf(const CliRun& run, int& owner) {
  const std::size_t newline = run.out.find('\n');
  if (newline == std::string::npos) return nullptr;
  owner = std::atoi(run.out.substr(0, newline).c_str());
  return nlohmann::json::parse(run.out.substr(newline + 1), nullptr, false);
}

/// The command that prints its parent's pid (exec's), then its allocation file.
const std::vector<std::string> kShowAllocationFile{
    "/bin/sh", "-c", "echo $PPID; cat \"$FLINK_GPU_ALLOCATION_FILE\""};

TEST_F(ExecShareCliTest, TheAllocationFileTellsATimeSlicedShare) {
  host(1);
  share("0", 2);
  const CliRun run = exec({"--share", "-n", "1"}, kShowAllocationFile);
  ASSERT_EQ(run.exitCode, 0) << run;
  int owner = 0;
  const nlohmann::json file = allocationFileOf(run, owner);
  // The stand-in host tells no PCI bus id: null, not made up.
  const nlohmann::json expected = {
      {"format", 1},
      {"owner_pid", owner},
      {"units", nlohmann::json::array({{{"index", "0"},
                                        {"uuid", standInUuid(0)},
                                        {"pci.bus_id", nullptr},
                                        {"name", "NVIDIA H200"},
                                        {"memory.total", 143771},
                                        {"share",
                                         {{"index", 0},
                                          {"count", 2},
                                          {"memory_mib", 71885},
                                          {"mps_pipe_directory", nullptr},
                                          {"mps_active_thread_percentage", nullptr}}}}})},
      {"cpus", nullptr}};
  EXPECT_EQ(file, expected) << run;
  EXPECT_GT(owner, 0) << run;
}

TEST_F(ExecShareCliTest, TheAllocationFileTellsMpsSharesInCudaVisibleDevicesOrder) {
  host(2);
  const fs::path mps = mpsDirectory();
  share("0", 2, mps);
  share("1", 3, mps);
  BoundSocket daemon(mps / "control");
  const CliRun run = exec({"--share", "-n", "2"}, kShowAllocationFile);
  ASSERT_EQ(run.exitCode, 0) << run;
  int owner = 0;
  const nlohmann::json file = allocationFileOf(run, owner);
  const auto unit = [&](unsigned gpu, unsigned count, unsigned memory, unsigned percentage) {
    return nlohmann::json{{"index", std::to_string(gpu)},
                          {"uuid", standInUuid(gpu)},
                          {"pci.bus_id", nullptr},
                          {"name", "NVIDIA H200"},
                          {"memory.total", 143771},
                          {"share",
                           {{"index", 0},
                            {"count", count},
                            {"memory_mib", memory},
                            {"mps_pipe_directory", mps.string()},
                            {"mps_active_thread_percentage", percentage}}}};
  };
  const nlohmann::json expected = {
      {"format", 1},
      {"owner_pid", owner},
      {"units", nlohmann::json::array({unit(0, 2, 71885, 50), unit(1, 3, 47923, 33)})},
      {"cpus", nullptr}};
  EXPECT_EQ(file, expected) << run;
}

TEST_F(ExecShareCliTest, OneRequestStaysBehindOneMpsDaemonOrTimeSliced) {
  host(2);
  const fs::path mps = mpsDirectory();
  share("0", 2, mps);
  share("1", 2);
  BoundSocket daemon(mps / "control");
  const CliRun mixed = exec({"--share", "-n", "2"}, touchMarker());
  EXPECT_EQ(mixed.exitCode, 1) << mixed;
  EXPECT_EQ(firstLine(mixed.err),
            "flink-gpu: error: not enough free GPU shares: 2 requested, 1 free")
      << mixed;
  EXPECT_FALSE(fs::exists(marker()));
  EXPECT_EQ(shareRecords(), std::vector<std::string>{}) << readFile(file());
  // Behind the same daemon, both go together.
  share("1", 2, mps);
  const CliRun together = exec({"--share", "-n", "2"});
  ASSERT_EQ(together.exitCode, 0) << together;
  EXPECT_EQ(valueOf(variablesOf(together.out), "CUDA_VISIBLE_DEVICES"),
            standInUuid(0) + "," + standInUuid(1))
      << together;
  EXPECT_EQ(valueOf(variablesOf(together.out), "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "50")
      << together;
}

TEST_F(ExecShareCliTest, WithoutItsDaemonAnMpsShareIsGivenBackAndTheCommandNotRun) {
  host(1);
  const fs::path mps = mpsDirectory();
  share("0", 2, mps);
  const CliRun missing = exec({"--share", "-n", "1"}, touchMarker());
  EXPECT_EQ(missing.exitCode, 1) << missing;
  EXPECT_EQ(firstLine(missing.err),
            "flink-gpu: error: no MPS control daemon runs for " + mps.string() + " (" +
                (mps / "control").string() + " does not exist): start it with " +
                "CUDA_MPS_PIPE_DIRECTORY=" + mps.string() + " nvidia-cuda-mps-control -d")
      << missing;
  EXPECT_TRUE(
      contains(missing.err, "the share(s) of GPU(s) 0 are given back; the command was not run"))
      << missing;
  EXPECT_FALSE(fs::exists(marker()));
  EXPECT_EQ(shareRecords(), std::vector<std::string>{}) << readFile(file());

  // Something else at the socket's path is no daemon either.
  std::ofstream(mps / "control").flush();
  const CliRun regular = exec({"--share", "-n", "1"}, touchMarker());
  EXPECT_EQ(regular.exitCode, 1) << regular;
  EXPECT_TRUE(contains(firstLine(regular.err),
                       (mps / "control").string() + " is a regular file, not the daemon's socket"))
      << regular;
  EXPECT_FALSE(fs::exists(marker()));
  EXPECT_EQ(shareRecords(), std::vector<std::string>{}) << readFile(file());
  fs::remove(mps / "control");

  // A FIFO is taken for the daemon's, as a socket is.
  ASSERT_EQ(::mkfifo((mps / "control").c_str(), 0600), 0) << std::strerror(errno);
  const CliRun fifo = exec({"--share", "-n", "1"}, touchMarker());
  EXPECT_EQ(fifo.exitCode, 0) << fifo;
  EXPECT_TRUE(fs::exists(marker()));
  fs::remove(mps / "control");
  fs::remove(marker());

  // Once the daemon is there, the share the failed runs gave back is had: share 0 of 2, recorded
  // for exec, the parent of the command, while the command runs.
  BoundSocket daemon(mps / "control");
  const CliRun after =
      exec({"--share", "-n", "1"}, {"/bin/sh", "-c", "echo $PPID; cat '" + file() + "'"});
  ASSERT_EQ(after.exitCode, 0) << after;
  const std::vector<std::string> lines = linesOf(after.out);
  ASSERT_GE(lines.size(), 2u) << after;
  std::vector<std::string> own;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].starts_with("0 " + lines[0] + "\t")) own.push_back(lines[i]);
  }
  ASSERT_EQ(own.size(), 1u) << after;
  EXPECT_TRUE(contains(own[0], "\tshare=0/2\t")) << own[0];
}

TEST_F(ExecShareCliTest, KHoldersShareOneGpuAndAShareIsFreeOnceItsHolderEnds) {
  host(1);
  share("0", 2);
  const auto first = holder("first");
  const auto second = holder("second");
  EXPECT_EQ(shareRecords().size(), 2u) << readFile(file());
  const CliRun third = exec({"--share", "-n", "1"}, touchMarker());
  EXPECT_EQ(third.exitCode, 1) << third;
  EXPECT_EQ(firstLine(third.err),
            "flink-gpu: error: not enough free GPU shares: 1 requested, 0 free")
      << third;
  EXPECT_TRUE(contains(third.err, "GPU 0 has no free share: 2 of 2 shares held")) << third;
  EXPECT_FALSE(fs::exists(marker()));

  // The first holder took share 0; once it ends, that share is had at once.
  first->stop();
  const CliRun next =
      exec({"--share", "-n", "1"}, {"/bin/sh", "-c", "echo $PPID; cat '" + file() + "'"});
  ASSERT_EQ(next.exitCode, 0) << next;
  const std::vector<std::string> lines = linesOf(next.out);
  ASSERT_GE(lines.size(), 2u) << next;
  bool found = false;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].starts_with("0 " + lines[0] + "\t")) {
      EXPECT_TRUE(contains(lines[i], "\tshare=0/2\t")) << lines[i];
      found = true;
    }
  }
  EXPECT_TRUE(found) << next;
}

TEST_F(ExecShareCliTest, PackTakesTheSharedGpuFirstAndSpreadAFreshOne) {
  host(2);
  share("all", 2);
  const auto first = holder("first");
  const CliRun pack = exec({"--share", "-n", "1"});
  ASSERT_EQ(pack.exitCode, 0) << pack;
  EXPECT_EQ(valueOf(variablesOf(pack.out), "CUDA_VISIBLE_DEVICES"), "0") << pack;
  const CliRun spread = exec({"--share", "-n", "1", "--share-placement", "spread"});
  ASSERT_EQ(spread.exitCode, 0) << spread;
  EXPECT_EQ(valueOf(variablesOf(spread.out), "CUDA_VISIBLE_DEVICES"), "1") << spread;
  const CliRun packGiven = exec({"--share", "-n", "1", "--share-placement=pack"});
  EXPECT_EQ(valueOf(variablesOf(packGiven.out), "CUDA_VISIBLE_DEVICES"), "0") << packGiven;
}

TEST_F(ExecShareCliTest, UsageErrorsExitTwoAndRunNothing) {
  host(1);
  share("0", 2);
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"--share", "--mig"},
       "flink-gpu: error: --share cannot be used with --mig: MIG instances are not shared"},
      {{"--share", "--vendor", "amd"},
       "flink-gpu: error: --share is for NVIDIA GPUs; it cannot be used with --vendor amd"},
      {{"--share", "--vendor", "intel"},
       "flink-gpu: error: --share is for NVIDIA GPUs; it cannot be used with --vendor intel"},
      {{"--share", "--share-placement", "bogus"},
       "flink-gpu: error: invalid --share-placement 'bogus': expected pack or spread"},
      {{"--share", "--share-placement", ""},
       "flink-gpu: error: invalid --share-placement '': expected pack or spread"},
      {{"--share-placement", "spread"},
       "flink-gpu: error: --share-placement applies only with --share: it says which GPUs' "
       "shares go first"},
  };
  for (const auto& [options, error] : cases) {
    std::vector<std::string> args{"-n", "1"};
    args.insert(args.end(), options.begin(), options.end());
    const CliRun run = exec(args, touchMarker());
    EXPECT_EQ(run.exitCode, 2) << run;
    EXPECT_EQ(firstLine(run.err), error) << run;
    EXPECT_FALSE(fs::exists(marker())) << run;
  }
  EXPECT_EQ(shareRecords(), std::vector<std::string>{});
}

TEST_F(ExecShareCliTest, NothingDeclaredExitsOneNamingTheShareCommand) {
  host(2);
  const CliRun run = exec({"--share", "-n", "1"}, touchMarker());
  EXPECT_EQ(run.exitCode, 1) << run;
  EXPECT_EQ(firstLine(run.err),
            "flink-gpu: error: no GPU of this host is declared shared (flink-gpu share)")
      << run;
  EXPECT_FALSE(fs::exists(marker()));
}

TEST_F(ExecShareCliTest, AShareOfUnknownMemoryLeavesTheMemoryVariablesOutWithANote) {
  host(1, /*knownMemory=*/false);
  const fs::path mps = mpsDirectory();
  share("0", 2, mps);
  BoundSocket daemon(mps / "control");
  const CliRun run =
      exec({"--share", "-n", "1"}, {"/usr/bin/env"},
           {"FLINK_GPU_SHARE_MEMORY_MIB=1", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=1M"});
  ASSERT_EQ(run.exitCode, 0) << run;
  const auto variables = variablesOf(run.out);
  EXPECT_EQ(valueOf(variables, "FLINK_GPU_SHARE_MEMORY_MIB"), std::nullopt) << run;
  EXPECT_EQ(valueOf(variables, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), std::nullopt) << run;
  EXPECT_EQ(valueOf(variables, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "50") << run;
  EXPECT_EQ(valueOf(variables, "CUDA_MPS_PIPE_DIRECTORY"), mps.string()) << run;
  EXPECT_EQ(run.err,
            "flink-gpu: note: the memory of a share of GPU(s) 0 is unknown (the GPU's memory was "
            "not known when it was declared shared): FLINK_GPU_SHARE_MEMORY_MIB is not set, and "
            "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT does not limit it\n")
      << run;
}

TEST_F(ExecShareCliTest, AWholeGpuCommandGetsNoInheritedShareVariable) {
  host(1);
  const CliRun run =
      exec({"-n", "1"}, {"/usr/bin/env"},
           {"FLINK_GPU_SHARE_MEMORY_MIB=71885", "CUDA_MPS_PIPE_DIRECTORY=/run/mps",
            "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=71885M",
            "CUDA_MPS_LOG_DIRECTORY=/var/log/mps"});
  ASSERT_EQ(run.exitCode, 0) << run;
  const auto variables = variablesOf(run.out);
  EXPECT_EQ(valueOf(variables, "CUDA_VISIBLE_DEVICES"), "0") << run;
  for (const char* name :
       {"FLINK_GPU_SHARE_MEMORY_MIB", "CUDA_MPS_PIPE_DIRECTORY",
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"}) {
    EXPECT_EQ(valueOf(variables, name), std::nullopt) << name << run;
  }
  EXPECT_EQ(valueOf(variables, "CUDA_MPS_LOG_DIRECTORY"), "/var/log/mps") << run;
}

TEST_F(ExecShareCliTest, AnExecInsideAnExecShareGetsNothingMore) {
  host(2);
  share("0", 2);
  for (const bool innerShare : {true, false}) {
    std::vector<std::string> inner{kCli, "exec", "--coordination-file", file(), "-n", "1"};
    if (innerShare) inner.push_back("--share");
    inner.push_back("--");
    const std::vector<std::string> touch = touchMarker();
    inner.insert(inner.end(), touch.begin(), touch.end());
    const CliRun run = exec({"--share", "-n", "1"}, inner);
    EXPECT_EQ(run.exitCode, 1) << run;
    EXPECT_TRUE(
        firstLine(run.err).starts_with("flink-gpu: error: this process already holds a share of "
                                       "GPU(s) 0 from process "))
        << run;
    EXPECT_FALSE(fs::exists(marker())) << run;
  }
  // And an exec --share inside a whole-GPU exec gets no share besides.
  const CliRun whole =
      exec({"-n", "1", "--gpus", "1"}, {kCli, "exec", "--coordination-file", file(), "-n", "1",
                                        "--share", "--", "/usr/bin/touch", marker().string()});
  EXPECT_EQ(whole.exitCode, 1) << whole;
  EXPECT_TRUE(firstLine(whole.err).starts_with(
      "flink-gpu: error: this process already holds GPU(s) 1 whole from process "))
      << whole;
  EXPECT_TRUE(firstLine(whole.err).ends_with(
      ", which started it, and gets no share besides: one allocation per process tree"))
      << whole;
  EXPECT_FALSE(fs::exists(marker())) << whole;
}

}  // namespace
