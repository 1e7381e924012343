// GPUDriver with the default discovery in-process: recognised by content, never by name; the
// same answers, records and causes as the script, on stand-in NVML hosts; no process started;
// the GPUs leased for the driver's life; the script's time-out.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "LogCapture.h"
#include "TestSupport.h"
#include "flink/externalresource/gpu/GPUDriver.h"
#include "flink/externalresource/gpu/GPUDriverFactory.h"
#include "flink/externalresource/gpu/GPUDriverOptions.h"
#include "flink/externalresource/gpu/GPUInfo.h"
#include "flink/util/Exceptions.h"
#include "host/coordination/Coordination.h"
#include "host/coordination/Leases.h"
#include "host/defaultdiscovery/DefaultDiscovery.h"
#include "host/health/HealthRecords.h"

#ifndef DEFAULT_DISCOVERY_SCRIPT
#error "DEFAULT_DISCOVERY_SCRIPT (the built nvidia-gpu-discovery.sh) must be defined by the build"
#endif

namespace flink::externalresource::gpu {
namespace {

namespace fs = std::filesystem;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using testing::LogCapture;
using testing::ScopedEnvironment;
using testing::TempDir;
using namespace std::chrono_literals;

/// The name of the thread in-process runs are done on.
constexpr std::string_view kRunThread = "flink-gpu-run";

constexpr const char* kFourGpus = R"({"devices": [
  {"uuid": "GPU-00000000-1111-2222-3333-444444444444", "pci_bus_id": "00000000:19:00.0"},
  {"uuid": "GPU-11111111-1111-2222-3333-444444444444", "pci_bus_id": "00000000:3B:00.0"},
  {"uuid": "GPU-22222222-1111-2222-3333-444444444444", "pci_bus_id": "00000000:5D:00.0"},
  {"uuid": "GPU-33333333-1111-2222-3333-444444444444", "pci_bus_id": "00000000:9A:00.0"}
]})";

/// What one discovery gave: the identifiers, or the cause of its failure (the script's first
/// stderr line, as the driver's message carries it), and the coordination file's records.
struct Outcome {
  std::vector<std::string> gpus;
  std::string cause;
  std::vector<std::string> records;
  friend bool operator==(const Outcome&, const Outcome&) = default;
};

std::ostream& operator<<(std::ostream& out, const Outcome& outcome) {
  out << "gpus [";
  for (const std::string& gpu : outcome.gpus) out << gpu << ' ';
  out << "] cause '" << outcome.cause << "' records [";
  for (const std::string& record : outcome.records) out << record << "; ";
  return out << ']';
}

/// The cause in a driver's message: what follows "exited with code 1: " (script) or
/// "failed: " (in-process), to the end of that line.
std::string causeIn(const std::string& message) {
  for (const std::string marker : {"exited with code 1: ", "(run in-process) failed: "}) {
    const std::size_t at = message.find(marker);
    if (at == std::string::npos) continue;
    const std::size_t start = at + marker.size();
    return message.substr(start, message.find('\n', start) - start);
  }
  return "(no cause in: " + message + ")";
}

class GPUDriverInProcessTest : public ::testing::Test {
 protected:
  GPUDriverInProcessTest() {
    // Our script and program, installed as a plugin folder would hold them.
    fs::create_directories(plugin_);
    fs::copy_file(DEFAULT_DISCOVERY_SCRIPT, script_);
    fs::copy_file(fs::path(DEFAULT_DISCOVERY_SCRIPT).parent_path() / "nvidia-gpu-discovery",
                  plugin_ / "nvidia-gpu-discovery");
    host(kFourGpus);
  }

  void host(const std::string& json) const { std::ofstream(dir_ / "host.json") << json; }
  fs::path coordinationFile() const { return dir_ / "coordination"; }

  std::unique_ptr<GPUDriver> driver(bool inProcess, const std::string& args,
                                    std::chrono::milliseconds timeout = 10s) const {
    Configuration config;
    config.set(GPUDriverOptions::DISCOVERY_SCRIPT_PATH, script_.string());
    config.set(GPUDriverOptions::DISCOVERY_SCRIPT_ARG, args);
    config.set(GPUDriverOptions::DISCOVERY_SCRIPT_IN_PROCESS, inProcess);
    config.set(GPUDriverOptions::DISCOVERY_SCRIPT_TIMEOUT, timeout);
    return GPUDriverFactory().createGPUDriver(config);
  }

  /// Each of `amounts` asked of one driver in turn, then the records (without their lease
  /// field, which only the in-process driver writes); the coordination file starts empty.
  std::vector<Outcome> discover(bool inProcess, const std::string& args,
                                const std::vector<std::int64_t>& amounts) const {
    fs::remove(coordinationFile());
    const std::unique_ptr<GPUDriver> gpuDriver = driver(inProcess, args);
    EXPECT_EQ(gpuDriver->runsInProcess(), inProcess);
    std::vector<Outcome> outcomes;
    for (const std::int64_t amount : amounts) {
      Outcome outcome;
      try {
        for (const auto& info : gpuDriver->retrieveResourceInfo(amount)) {
          outcome.gpus.push_back(dynamic_cast<const GPUInfo&>(*info).index());
        }
      } catch (const FlinkException& e) {
        outcome.cause = causeIn(e.what());
      }
      outcome.records = records();
      outcomes.push_back(std::move(outcome));
    }
    return outcomes;
  }

  /// `<gpu> <pid> uuid=<uuid>` for each record.
  std::vector<std::string> records() const {
    std::vector<std::string> lines;
    const coordination::ParsedRecords parsed =
        coordination::parseRecords(testing::readFile(coordinationFile()));
    for (const coordination::Record& record : parsed.records) {
      lines.push_back(record.gpu + " " + std::to_string(record.owner.pid) +
                      " uuid=" + record.uuid.value_or("-"));
    }
    return lines;
  }

  /// The in-process driver and the script agree, request by request.
  void expectSameAsScript(const std::string& args, const std::vector<std::int64_t>& amounts) {
    const std::vector<Outcome> script = discover(false, args, amounts);
    const std::vector<Outcome> inProcess = discover(true, args, amounts);
    ASSERT_EQ(inProcess.size(), script.size());
    // The script itself must have done something to agree with: GPUs, or a cause.
    for (const Outcome& outcome : script) {
      EXPECT_TRUE(!outcome.gpus.empty() || outcome.cause.rfind("(no cause", 0) != 0) << outcome;
    }
    for (std::size_t i = 0; i < script.size(); ++i) {
      EXPECT_EQ(inProcess[i], script[i]) << "request " << i << " of '" << args << "'";
    }
  }

  TempDir dir_{"gpu-driver-in-process"};
  fs::path plugin_ = dir_ / "plugins/external-resource-gpu";
  fs::path script_ = plugin_ / "nvidia-gpu-discovery.sh";
  ScopedEnvironment library_{"FLINK_GPU_NVML_LIBRARY", FAKE_NVML_FULL};
  ScopedEnvironment host_{"FAKE_NVML_DEVICES", (dir_ / "host.json").string()};
};

TEST_F(GPUDriverInProcessTest, OurScriptIsKnownByItsContentAndItsProgram) {
  EXPECT_TRUE(driver(true, "")->runsInProcess());
  EXPECT_FALSE(driver(false, "")->runsInProcess());

  // Through a symbolic link, as a Flink distribution may link the plugin in.
  const fs::path linked = dir_ / "linked.sh";
  fs::create_symlink(script_, linked);
  Configuration config;
  config.set(GPUDriverOptions::DISCOVERY_SCRIPT_PATH, linked.string());
  EXPECT_TRUE(GPUDriverFactory().createGPUDriver(config)->runsInProcess());

  // A byte more, and it is someone else's script.
  std::ofstream(script_, std::ios::app) << "# local change\n";
  EXPECT_FALSE(driver(true, "")->runsInProcess());
}

TEST_F(GPUDriverInProcessTest, OurProgramConfiguredWithoutItsWrapperIsOursToo) {
  // discovery-script.path naming the program spares Flink's Java driver the sh wrapper; ours
  // knows the program by its mark, wherever it is and whatever it is called.
  const fs::path program = plugin_ / "nvidia-gpu-discovery";
  const auto configured = [](const fs::path& path) {
    Configuration config;
    config.set(GPUDriverOptions::DISCOVERY_SCRIPT_PATH, path.string());
    return GPUDriverFactory().createGPUDriver(config);
  };
  EXPECT_TRUE(configured(program)->runsInProcess());
  const fs::path linked = dir_ / "discover-gpus";
  fs::create_symlink(program, linked);
  EXPECT_TRUE(configured(linked)->runsInProcess());
  const fs::path copied = dir_ / "copied-nvidia-gpu-discovery";
  fs::copy_file(program, copied);
  const std::unique_ptr<GPUDriver> fromCopy = configured(copied);
  EXPECT_TRUE(fromCopy->runsInProcess());
  const ExternalResourceInfoSet infos = fromCopy->retrieveResourceInfo(2);
  ASSERT_EQ(infos.size(), 2u);
  EXPECT_EQ(dynamic_cast<const GPUInfo&>(*infos[0]).index(), "0");

  // Another program is run, whatever its name.
  const fs::path other = dir_ / "other" / "nvidia-gpu-discovery";
  fs::create_directories(other.parent_path());
  fs::copy_file("/bin/true", other);
  EXPECT_FALSE(configured(other)->runsInProcess());
}

TEST_F(GPUDriverInProcessTest, AScriptOfOnesOwnWithOurNameStaysAScript) {
  testing::writeScript(script_, "#!/bin/sh\necho 3\n");
  const std::unique_ptr<GPUDriver> gpuDriver = driver(true, "");
  EXPECT_FALSE(gpuDriver->runsInProcess());
  const ExternalResourceInfoSet infos = gpuDriver->retrieveResourceInfo(1);
  ASSERT_EQ(infos.size(), 1u);
  EXPECT_EQ(dynamic_cast<const GPUInfo&>(*infos[0]).index(), "3");
}

TEST_F(GPUDriverInProcessTest, OurScriptWithoutItsProgramStaysAScriptAndFailsAsOne) {
  fs::remove(plugin_ / "nvidia-gpu-discovery");
  const std::unique_ptr<GPUDriver> gpuDriver = driver(true, "");
  EXPECT_FALSE(gpuDriver->runsInProcess());
  try {
    gpuDriver->retrieveResourceInfo(1);
    FAIL() << "no exception";
  } catch (const FlinkException& e) {
    EXPECT_THAT(e.what(), HasSubstr("is missing or not executable")) << e.what();
  }
}

TEST_F(GPUDriverInProcessTest, StartsNoProcess) {
  // Every process started and waited for adds its page faults to RUSAGE_CHILDREN: an exec'd
  // program takes hundreds. Nothing in-process may add any.
  const auto childFaults = [] {
    rusage usage{};
    ::getrusage(RUSAGE_CHILDREN, &usage);
    return usage.ru_minflt;
  };
  const auto indices = [](const ExternalResourceInfoSet& infos) {
    std::vector<std::string> gpus;
    for (const auto& info : infos) gpus.push_back(dynamic_cast<const GPUInfo&>(*info).index());
    return gpus;
  };

  const long before = childFaults();
  EXPECT_EQ(indices(driver(true, "")->retrieveResourceInfo(2)),
            (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(childFaults(), before) << "the in-process driver started a process";

  // The same measure sees the script.
  EXPECT_EQ(indices(driver(false, "")->retrieveResourceInfo(2)),
            (std::vector<std::string>{"0", "1"}));
  EXPECT_GT(childFaults(), before) << "the script run was not seen";
}

TEST_F(GPUDriverInProcessTest, OurScriptBesideAProgramThatIsNotOursStaysAScript) {
  // A site's wrapper in place of our program: the script would run it, so the driver must.
  fs::rename(plugin_ / "nvidia-gpu-discovery", dir_ / "real-nvidia-gpu-discovery");
  testing::writeScript(plugin_ / "nvidia-gpu-discovery", "#!/bin/sh\necho 7\n");
  const std::unique_ptr<GPUDriver> wrapped = driver(true, "");
  EXPECT_FALSE(wrapped->runsInProcess());
  const ExternalResourceInfoSet infos = wrapped->retrieveResourceInfo(1);
  ASSERT_EQ(infos.size(), 1u);
  EXPECT_EQ(dynamic_cast<const GPUInfo&>(*infos[0]).index(), "7");

  // Another program altogether (any ELF without our mark).
  fs::remove(plugin_ / "nvidia-gpu-discovery");
  fs::copy_file("/bin/true", plugin_ / "nvidia-gpu-discovery");
  EXPECT_FALSE(driver(true, "")->runsInProcess());

  // Our script linked from elsewhere, with a program of one's own beside the link: the script
  // runs the one beside the link.
  fs::remove(plugin_ / "nvidia-gpu-discovery");
  fs::rename(dir_ / "real-nvidia-gpu-discovery", plugin_ / "nvidia-gpu-discovery");
  const fs::path elsewhere = dir_ / "elsewhere";
  fs::create_directories(elsewhere);
  fs::create_symlink(script_, elsewhere / "nvidia-gpu-discovery.sh");
  testing::writeScript(elsewhere / "nvidia-gpu-discovery", "#!/bin/sh\necho 5\n");
  Configuration config;
  config.set(GPUDriverOptions::DISCOVERY_SCRIPT_PATH,
             (elsewhere / "nvidia-gpu-discovery.sh").string());
  EXPECT_FALSE(GPUDriverFactory().createGPUDriver(config)->runsInProcess());
}

TEST_F(GPUDriverInProcessTest, OurProgramStrippedIsStillOurs) {
  // Installed programs are stripped (cmake --install strips): the mark's section stays.
  const fs::path program = plugin_ / "nvidia-gpu-discovery";
  const std::string strip = "strip '" + program.string() + "'";
  ASSERT_EQ(std::system(strip.c_str()), 0);
  EXPECT_TRUE(driver(true, "")->runsInProcess());
}

TEST_F(GPUDriverInProcessTest, PlainModeAnswersAsTheScript) { expectSameAsScript("", {1, 4, 5}); }

TEST_F(GPUDriverInProcessTest, CoordinationAnswersAndRecordsAsTheScript) {
  const std::string args = "--enable-coordination-mode --coordination-file " +
                           coordinationFile().string() + " --placement index";
  // Each request of one owner takes new GPUs (Flink's rule); the fourth finds none free.
  expectSameAsScript(args, {1, 2, 1, 1});
}

TEST_F(GPUDriverInProcessTest, TopologyPlacementChoosesAsTheScript) {
  ScopedEnvironment topology("FAKE_NVML_DEVICES", std::string(FAKE_NVML_HOSTS) + "/pcie-8.json");
  expectSameAsScript(
      "--enable-coordination-mode --coordination-file " + coordinationFile().string(),
      {2, 2, 3, 2});
}

TEST_F(GPUDriverInProcessTest, SelectedUnitsAsTheScript) {
  // Two L4s and two H100s (one in MIG mode): the driver's arguments choose by kind, and a request
  // the matching units cannot meet fails with the same cause.
  ScopedEnvironment mixed("FAKE_NVML_DEVICES", std::string(FAKE_NVML_HOSTS) + "/mixed-4.json");
  const std::string coordination =
      "--enable-coordination-mode --coordination-file " + coordinationFile().string();
  expectSameAsScript(coordination + " --select name~L4", {1, 1, 1});
  expectSameAsScript(coordination + " --select compute_capability>=9.0 --mig", {2, 1, 1});
  expectSameAsScript("--select name~L4,memory.total>20000", {1});
  const std::vector<Outcome> l4 = discover(true, coordination + " --select name~L4", {2});
  ASSERT_EQ(l4.size(), 1u);
  EXPECT_EQ(l4[0].gpus, (std::vector<std::string>{"0", "1"})) << l4[0];
}

TEST_F(GPUDriverInProcessTest, MigUnitsAsTheScript) {
  host(R"({"devices": [
    {"uuid": "GPU-00000000-1111-2222-3333-444444444444"},
    {"uuid": "GPU-11111111-1111-2222-3333-444444444444", "mig_enabled": true, "mig": [
      {"uuid": "MIG-aaaaaaaa-1111-2222-3333-444444444444", "gpu_instance_id": 1,
       "compute_instance_id": 0},
      {"uuid": "MIG-bbbbbbbb-1111-2222-3333-444444444444", "gpu_instance_id": 2,
       "compute_instance_id": 0}]}]})");
  expectSameAsScript(
      "--mig --enable-coordination-mode --coordination-file " + coordinationFile().string(),
      {2, 1, 1});
}

TEST_F(GPUDriverInProcessTest, AnInheritedMaskAndAnUnhealthyGpuAsTheScript) {
  host(R"({"devices": [
    {"uuid": "GPU-00000000-1111-2222-3333-444444444444"},
    {"uuid": "GPU-11111111-1111-2222-3333-444444444444", "lost": true},
    {"uuid": "GPU-22222222-1111-2222-3333-444444444444"},
    {"uuid": "GPU-33333333-1111-2222-3333-444444444444"}]})");
  ScopedEnvironment mask("CUDA_VISIBLE_DEVICES", "3,1,GPU-0");
  expectSameAsScript(
      "--enable-coordination-mode --coordination-file " + coordinationFile().string(), {1, 1, 1});
}

TEST_F(GPUDriverInProcessTest, ADrainedGpuUnderAMaskIsNotHandedOut) {
  // The mask names GPU 2, which an operator drained: neither way hands it out.
  ScopedEnvironment mask("CUDA_VISIBLE_DEVICES", "2,0");
  health::updateHealth(coordinationFile(), [](std::vector<health::HealthRecord>& records) {
    health::HealthRecord drained;
    drained.kind = health::RecordKind::kDrained;
    drained.gpu = "2";
    drained.since = health::nowSeconds();
    drained.reason = "fan noise";
    records.push_back(drained);
  });
  for (const bool inProcess : {false, true}) {
    fs::remove(coordinationFile());
    const ExternalResourceInfoSet infos =
        driver(inProcess,
               "--enable-coordination-mode --coordination-file " + coordinationFile().string())
            ->retrieveResourceInfo(1);
    ASSERT_EQ(infos.size(), 1u);
    EXPECT_EQ(dynamic_cast<const GPUInfo&>(*infos[0]).index(), "0") << inProcess;
  }
}

TEST_F(GPUDriverInProcessTest, GpusHeldByLeasesAloneAreNotCountedFree) {
  // Another worker's leases on every GPU, their records gone (an operator's release).
  std::vector<coordination::Lease> leases;
  for (const char* uuid :
       {"GPU-00000000-1111-2222-3333-444444444444", "GPU-11111111-1111-2222-3333-444444444444",
        "GPU-22222222-1111-2222-3333-444444444444", "GPU-33333333-1111-2222-3333-444444444444"}) {
    leases.push_back(coordination::acquireLease(coordinationFile(), uuid));
  }
  const std::string args =
      "--enable-coordination-mode --coordination-file " + coordinationFile().string();
  expectSameAsScript(args, {1});
  EXPECT_EQ(discover(true, args, {1})[0].cause,
            "not enough free GPUs: 1 requested, 0 free, 4 held");
}

TEST_F(GPUDriverInProcessTest, AGpuLeftOutIsLoggedAsAnErrorByItsKind) {
  // GPU 1 is lost: NVML leaves it out, and the driver is told so as a value, not as a line to
  // read back. A note (an argument ignored) is no warning.
  host(R"({"devices": [
    {"uuid": "GPU-00000000-1111-2222-3333-444444444444", "pci_bus_id": "00000000:19:00.0"},
    {"uuid": "GPU-11111111-1111-2222-3333-444444444444", "pci_bus_id": "00000000:3B:00.0",
     "lost": true},
    {"uuid": "GPU-22222222-1111-2222-3333-444444444444", "pci_bus_id": "00000000:5D:00.0"}
  ]})");
  const std::unique_ptr<GPUDriver> gpuDriver = driver(true, "--device-type nvidia");
  ASSERT_TRUE(gpuDriver->runsInProcess());
  LogCapture log;
  std::vector<std::string> gpus;
  for (const auto& info : gpuDriver->retrieveResourceInfo(2)) {
    gpus.push_back(dynamic_cast<const GPUInfo&>(*info).index());
  }
  EXPECT_EQ(gpus, (std::vector<std::string>{"0", "2"}));
  EXPECT_TRUE(log.contains("error", "left a GPU out: NVML: GPU 1 left out: ")) << log.text();
  EXPECT_FALSE(log.contains("warning", "ignoring unknown argument")) << log.text();
  EXPECT_TRUE(log.contains("debug", "ignoring unknown argument '--device-type'")) << log.text();
}

TEST_F(GPUDriverInProcessTest, BadArgumentsFailWithTheScriptsCause) {
  expectSameAsScript("--owner-pid abc", {1});
  expectSameAsScript("--placement nearest", {1});
  const std::vector<Outcome> outcomes = discover(true, "--gpus 0,x", {1});
  EXPECT_THAT(outcomes[0].cause, HasSubstr("invalid GPU 'x' in --gpus"));
  // A misspelt option of ours fails both ways, rather than handing GPUs out uncoordinated.
  const std::string misspelt =
      "--enable-coordination-mod --coordination-file " + coordinationFile().string();
  expectSameAsScript(misspelt, {1});
  const std::vector<Outcome> refused = discover(true, misspelt, {1});
  EXPECT_EQ(refused[0].cause,
            "unknown option '--enable-coordination-mod': did you mean "
            "'--enable-coordination-mode'?");
  EXPECT_TRUE(refused[0].gpus.empty());
  EXPECT_FALSE(fs::exists(coordinationFile()));
}

// The arguments are read once, when the driver is made: a mistake in them fails every call alike,
// and the default discovery's failure is nested in the exception, its cause as a value.
TEST_F(GPUDriverInProcessTest, AFailureNestsTheDefaultDiscoverysFailure) {
  const std::unique_ptr<GPUDriver> gpuDriver = driver(true, "--owner-pid abc");
  for (int call = 0; call < 2; ++call) {
    try {
      gpuDriver->retrieveResourceInfo(1);
      ADD_FAILURE() << "no exception";
    } catch (const FlinkException& e) {
      EXPECT_THAT(e.what(), HasSubstr("(run in-process) failed: invalid --owner-pid"));
      try {
        std::rethrow_if_nested(e);
        ADD_FAILURE() << "nothing nested in: " << e.what();
      } catch (const defaultdiscovery::DiscoveryFailure& failure) {
        EXPECT_EQ(failure.stage(), defaultdiscovery::DiscoveryFailure::Stage::kArguments);
      }
    }
  }
}

TEST_F(GPUDriverInProcessTest, ItsGpusAreLeasedUntilTheDriverGoes) {
  const std::string args =
      "--enable-coordination-mode --coordination-file " + coordinationFile().string();
  {
    const std::unique_ptr<GPUDriver> gpuDriver = driver(true, args);
    ASSERT_EQ(gpuDriver->retrieveResourceInfo(2).size(), 2u);
    const coordination::ParsedRecords parsed =
        coordination::parseRecords(testing::readFile(coordinationFile()));
    ASSERT_EQ(parsed.records.size(), 2u);
    for (const coordination::Record& record : parsed.records) {
      EXPECT_EQ(record.owner.pid, ::getpid());
      ASSERT_TRUE(record.lease) << record.gpu;
      ASSERT_TRUE(record.uuid) << record.gpu;
      // Named by the GPU's PCI bus id, and held under its UUID too, as older versions name it.
      EXPECT_TRUE(record.lease->starts_with("pci-00000000-")) << *record.lease;
      EXPECT_EQ(coordination::leaseState(coordinationFile(), *record.lease),
                coordination::LeaseState::kHeld);
      EXPECT_EQ(coordination::leaseState(coordinationFile(), *record.uuid),
                coordination::LeaseState::kHeld);
    }
    // Another driver of this process (a second GPU resource) gets the other two.
    EXPECT_EQ(driver(true, args)->retrieveResourceInfo(2).size(), 2u);
  }
  // Destroying the drivers gave everything back.
  EXPECT_TRUE(records().empty());
  EXPECT_NE(
      coordination::leaseState(coordinationFile(), "GPU-00000000-1111-2222-3333-444444444444"),
      coordination::LeaseState::kHeld);
  // The next allocation finds the lease files free and removes them (but the one it takes).
  const std::unique_ptr<GPUDriver> next = driver(true, args);
  ASSERT_EQ(next->retrieveResourceInfo(1).size(), 1u);
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(coordinationFile().string() + ".leases")) {
    left.push_back(entry.path().filename().string());
  }
  std::sort(left.begin(), left.end());
  const std::string mount =
      std::to_string(liveness::HostFacts::system().reader().mountNamespace.value_or(0));
  EXPECT_EQ(left, (std::vector<std::string>{"GPU-00000000-1111-2222-3333-444444444444",
                                            "index-0.mnt-" + mount, "pci-00000000-19-00.0"}));
}

// D6 of the break-it round: a worker that forks (a Python worker, a sidecar started the classic
// way) must not lose its GPUs to its child. The child's copy of the driver, destroyed in the
// child, gives back nothing of the parent's: its records stay, its leases stay held, and Flink's
// script (which reads only the records) still finds the GPU taken. What the child allocates
// itself it gives back.
TEST_F(GPUDriverInProcessTest, AChildOfForkNeverGivesBackItsParentsGpus) {
  const std::string args =
      "--enable-coordination-mode --coordination-file " + coordinationFile().string();
  std::unique_ptr<GPUDriver> gpuDriver = driver(true, args);
  ASSERT_EQ(gpuDriver->retrieveResourceInfo(1).size(), 1u);
  const std::vector<std::string> before = testing::readLines(coordinationFile());
  ASSERT_EQ(before.size(), 1u);
  // The discovery's thread, its answer given, waits a second for another run before it ends:
  // fork once it has, as a worker that forks long after its start does (under TSan a child of a
  // multi-threaded fork may start no thread).
  ASSERT_TRUE(testing::waitForNoThreadNamed(kRunThread, 10s));
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child allocates one GPU of its own, then its copy of the driver goes.
    const bool own = gpuDriver->retrieveResourceInfo(1).size() == 1;
    gpuDriver.reset();
    ::_exit(own ? 0 : 3);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // The parent's record is there as it was, its lease held; the child's own is given back.
  EXPECT_EQ(testing::readLines(coordinationFile()), before);
  const coordination::ParsedRecords parsed =
      coordination::parseRecords(testing::readFile(coordinationFile()));
  ASSERT_EQ(parsed.records.size(), 1u);
  EXPECT_EQ(parsed.records[0].owner.pid, ::getpid());
  EXPECT_EQ(coordination::leaseState(coordinationFile(), *parsed.records[0].lease),
            coordination::LeaseState::kHeld);
  gpuDriver.reset();
  EXPECT_TRUE(records().empty());
}

// A worker that forks within the second its run's thread waits: the child has no such thread,
// and its own discovery must not be handed to its parent's (it would never run: a time-out).
TEST_F(GPUDriverInProcessTest, AChildForkedWhileARunThreadWaitsDiscoversOnAThreadOfItsOwn) {
  if (testing::kThreadSanitizer) {
    GTEST_SKIP() << "ThreadSanitizer lets the child of a multi-threaded fork start no thread";
  }
  ASSERT_TRUE(testing::waitForNoThreadNamed(kRunThread, 10s));  // an earlier test's, ending
  const std::string args =
      "--enable-coordination-mode --coordination-file " + coordinationFile().string();
  ASSERT_EQ(driver(true, args)->retrieveResourceInfo(1).size(), 1u);
  ASSERT_EQ(testing::threadsNamed(kRunThread), 1u);  // waiting for the next run
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int code = 3;
    try {
      code = driver(true, args, 5s)->retrieveResourceInfo(1).size() == 1 ? 0 : 4;
    } catch (...) {
    }
    ::_exit(code);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "3: the child's discovery failed (timed out?)";
}

TEST_F(GPUDriverInProcessTest, AKilledWorkersGpusAreTakenBackAtOnce) {
  const std::string args =
      "--enable-coordination-mode --coordination-file " + coordinationFile().string();
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t worker = ::fork();
  ASSERT_GE(worker, 0);
  if (worker == 0) {
    ::close(ready[0]);
    try {
      const std::unique_ptr<GPUDriver> gpuDriver = driver(true, args);
      gpuDriver->retrieveResourceInfo(3);
      (void)!::write(ready[1], "x", 1);
      ::pause();
    } catch (...) {
    }
    ::_exit(1);
  }
  ::close(ready[1]);
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1) << "the worker did not get its GPUs";
  ::close(ready[0]);
  EXPECT_EQ(records().size(), 3u);
  EXPECT_THROW(driver(true, args)->retrieveResourceInfo(2), FlinkException);

  ASSERT_EQ(::kill(worker, SIGKILL), 0);
  ASSERT_EQ(::waitpid(worker, nullptr, 0), worker);
  const std::unique_ptr<GPUDriver> next = driver(true, args);
  EXPECT_EQ(next->retrieveResourceInfo(4).size(), 4u);
}

TEST_F(GPUDriverInProcessTest, ThreadsOnOneDriverGetDistinctGpus) {
  const std::unique_ptr<GPUDriver> gpuDriver =
      driver(true, "--enable-coordination-mode --coordination-file " + coordinationFile().string());
  std::vector<std::string> got(4);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < got.size(); ++i) {
    threads.emplace_back([&, i] {
      got[i] = dynamic_cast<const GPUInfo&>(*gpuDriver->retrieveResourceInfo(1)[0]).index();
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(std::set<std::string>(got.begin(), got.end()),
            (std::set<std::string>{"0", "1", "2", "3"}));
}

// A run's thread serves the next run of this process, of any driver, if it comes within a
// second (starting and ending a thread for each cost more than the rest of a discovery's set-up),
// and ends after: a worker that discovers once keeps no thread.
TEST_F(GPUDriverInProcessTest, RunsOneAfterAnotherShareOneThreadThatEndsAfterASecond) {
  // An earlier test's run given up on may still be ending on a thread of its own.
  ASSERT_TRUE(testing::waitForNoThreadNamed(kRunThread, 10s));
  const std::string args =
      "--enable-coordination-mode --coordination-file " + coordinationFile().string();
  const std::unique_ptr<GPUDriver> first = driver(true, args);
  const std::unique_ptr<GPUDriver> second = driver(true, args);
  ASSERT_EQ(first->retrieveResourceInfo(1).size(), 1u);
  ASSERT_EQ(second->retrieveResourceInfo(2).size(), 2u);
  ASSERT_EQ(first->retrieveResourceInfo(1).size(), 1u);
  EXPECT_EQ(records().size(), 4u);
  EXPECT_EQ(testing::threadsNamed(kRunThread), 1u);
  EXPECT_TRUE(testing::waitForNoThreadNamed(kRunThread, 10s));
}

TEST_F(GPUDriverInProcessTest, TheLockWaitEndsAtTheTimeOutNamingTheHolderTheKernelTells) {
  // Another worker holds the coordination file's lock (as Flink's script does while it runs).
  { const std::ofstream create(coordinationFile()); }
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t holder = ::fork();
  if (holder == 0) {
    const int fd = ::open(coordinationFile().c_str(), O_RDWR | O_CLOEXEC);
    const bool locked = fd >= 0 && ::flock(fd, LOCK_EX) == 0;
    (void)::write(ready[1], locked ? "y" : "n", 1);
    ::pause();
    ::_exit(0);
  }
  char answer = 0;
  ASSERT_EQ(::read(ready[0], &answer, 1), 1);
  ASSERT_EQ(answer, 'y');
  // Time enough to reach the lock (start the run's thread, find the GPUs) on a slow machine: a
  // time-out before it would name that stage instead.
  const std::unique_ptr<GPUDriver> gpuDriver = driver(
      true, "--enable-coordination-mode --coordination-file " + coordinationFile().string(), 3s);
  try {
    gpuDriver->retrieveResourceInfo(1);
    ADD_FAILURE() << "no exception";
  } catch (const TimeoutException& e) {
    // Which of the two waits ends first, the driver's or the lock's own (given what is left of
    // the driver's), is up to the scheduler; either way the message names the holder.
    const std::string pid = std::to_string(holder);
    EXPECT_THAT(e.what(), AnyOf(HasSubstr("whose lock process " + pid + " holds"),
                                HasSubstr("still locked by process " + pid + " after")))
        << e.what();
  }
  ::kill(holder, SIGKILL);
  ::waitpid(holder, nullptr, 0);
  ::close(ready[0]);
  ::close(ready[1]);
}

TEST_F(GPUDriverInProcessTest, TheLockWaitEndsAtTheTimeOut) {
  // This process itself holds the coordination file's lock, as a run given up on at an earlier
  // time-out would: the message says so rather than blame another worker.
  const int fd = ::open(coordinationFile().c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  // Time enough to reach the lock on a slow machine (see above).
  std::unique_ptr<GPUDriver> gpuDriver = driver(
      true, "--enable-coordination-mode --coordination-file " + coordinationFile().string(), 3s);
  const auto start = std::chrono::steady_clock::now();
  try {
    gpuDriver->retrieveResourceInfo(1);
    ADD_FAILURE() << "no exception";
  } catch (const TimeoutException& e) {
    // The driver's wait or the lock's own may end first (see above); both name the file and
    // this process as the holder.
    EXPECT_THAT(e.what(), HasSubstr("coordination file " + coordinationFile().string()))
        << e.what();
    EXPECT_THAT(e.what(), AnyOf(HasSubstr("whose lock this process itself holds"),
                                HasSubstr("still locked by this process itself")))
        << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s + 5s);  // not forever
  ::close(fd);
  // Nothing is left recorded once the driver is gone. (The run given up on may still take the
  // lock once it is free, between its last try and its deadline's check, and then gives back
  // what it recorded at once; the driver's end waits for it.)
  gpuDriver.reset();
  EXPECT_TRUE(records().empty());
}

TEST_F(GPUDriverInProcessTest, AHangingNvidiaSmiEndsAtTheTimeOut) {
  // No NVML; the nvidia-smi on PATH never answers.
  ScopedEnvironment noNvml("FLINK_GPU_NVML_LIBRARY", (dir_ / "no-libnvidia-ml.so.1").string());
  const fs::path bin = dir_ / "bin";
  fs::create_directories(bin);
  // It starts a child of its own, as a wedged nvidia-smi's helpers would be.
  const fs::path child = dir_ / "child.pid";
  testing::writeScript(bin / "nvidia-smi",
                       "#!/bin/sh\nsleep 30 &\necho $! > '" + child.string() + "'\nwait\n");
  ScopedEnvironment path("PATH", bin.string() + ":/usr/bin:/bin");
  // Time enough for the stand-in to have started its child and written its pid on a slow
  // machine.
  const std::unique_ptr<GPUDriver> gpuDriver = driver(true, "", 3s);
  const auto start = std::chrono::steady_clock::now();
  try {
    gpuDriver->retrieveResourceInfo(1);
    FAIL() << "no exception";
  } catch (const TimeoutException& e) {
    EXPECT_THAT(e.what(), HasSubstr("(run in-process)")) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s + 5s);  // not nvidia-smi's 30 s
  // nvidia-smi ran in a process group of its own, which the time-out ended whole.
  const std::vector<std::string> pid = testing::waitForLines(child, 1, 2s);
  ASSERT_EQ(pid.size(), 1u);
  EXPECT_TRUE(testing::waitUntilGone({static_cast<pid_t>(std::stol(pid[0]))}, 3s).empty())
      << "nvidia-smi's child outlived the time-out";
}

}  // namespace
}  // namespace flink::externalresource::gpu
