// GPUDriver: configuration checks, one run of the discovery script (or of the default discovery
// in-process), and the turning of its answer into GPUInfo objects. Process handling lives in
// process/Subprocess, parsing in DiscoveryOutput, the default discovery in defaultdiscovery/.
#include "flink/externalresource/gpu/GPUDriver.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <vector>

#include "coordination/Coordination.h"
#include "coordination/CoordinationFile.h"
#include "defaultdiscovery/DefaultDiscovery.h"
#include "defaultdiscovery/DefaultScript.h"
#include "defaultdiscovery/DiscoveryArguments.h"
#include "discovery/NvmlEnumerator.h"
#include "discovery/VisibleDevices.h"
#include "externalresource/gpu/DiscoveryOutput.h"
#include "externalresource/gpu/GpuProperties.h"
#include "flink/externalresource/gpu/GPUDriverOptions.h"
#include "flink/externalresource/gpu/GPUInfo.h"
#include "flink/util/Exceptions.h"
#include "flink/util/TimeUtils.h"
#include "logging/Logging.h"
#include "placement/Placement.h"
#include "process/Subprocess.h"
#include "util/Strings.h"

namespace flink::externalresource::gpu {

namespace fs = std::filesystem;

namespace {

/// An in-process run given up on at the time-out, told through `ended` when it has ended (and
/// given back what it recorded).
struct AbandonedRun {
  std::mutex mutex;
  std::condition_variable ended;
  bool over = false;
};

}  // namespace

/// What in-process discoveries recorded and leased: given back when the driver goes.
struct GPUDriver::Holdings {
  struct Held {
    fs::path coordinationFile;
    coordination::Owner owner;
    std::vector<std::string> granted;
    std::vector<coordination::Lease> leases;
  };
  std::mutex mutex;
  std::vector<Held> held;
  /// Runs given up on at the time-out.
  std::vector<std::shared_ptr<AbandonedRun>> abandoned;
};

namespace {

using Clock = std::chrono::steady_clock;

/// How much of each stream an error message shows; the rest is summarised by its size.
constexpr std::size_t kShownOutputBytes = 2000;

const std::shared_ptr<spdlog::logger>& log() {
  static const auto logger = logging::get("GPUDriver");
  return logger;
}

/// The absolute, normalised path `path` names: a relative one against $FLINK_HOME when it is set,
/// else against the working directory (Flink's rule). FLINK_HOME itself may be relative.
fs::path resolveScriptPath(const fs::path& path) {
  fs::path resolved = path;
  if (resolved.is_relative()) {
    const char* flinkHome = std::getenv("FLINK_HOME");
    const fs::path base =
        (flinkHome != nullptr && *flinkHome != '\0') ? fs::path(flinkHome) : fs::current_path();
    resolved = base / resolved;
  }
  return fs::absolute(resolved).lexically_normal();
}

/// Whether anything is at `path` (a dangling link is not).
bool somethingAt(const fs::path& path) {
  struct stat status {};
  return ::stat(path.c_str(), &status) == 0 || (errno != ENOENT && errno != ENOTDIR);
}

/// The script to use: the configured path resolved as Flink resolves it. For the default path
/// only, when that finds nothing, Flink's Docker location too, so that a host with Flink in
/// /opt/flink works without FLINK_HOME. Throws FileNotFoundException naming every place looked at.
fs::path findScript(const std::string& configured) {
  std::vector<fs::path> candidates{resolveScriptPath(configured)};
  if (configured == *GPUDriverOptions::DISCOVERY_SCRIPT_PATH.defaultValue()) {
    const fs::path docker(GPUDriverOptions::DOCKER_DEFAULT_DISCOVERY_SCRIPT);
    if (candidates.front() != docker) candidates.push_back(docker);
  }
  for (const fs::path& candidate : candidates) {
    if (somethingAt(candidate)) return candidate;
  }
  std::string message =
      "The GPU discovery script does not exist in path " + candidates.front().string();
  if (candidates.size() > 1) {
    const char* flinkHome = std::getenv("FLINK_HOME");
    message += std::string(" (the default '") + configured + "', resolved against " +
               ((flinkHome != nullptr && *flinkHome != '\0') ? "$FLINK_HOME"
                                                             : "the working directory, "
                                                               "$FLINK_HOME being unset") +
               "), nor in " + candidates.back().string();
  }
  throw FileNotFoundException(message + ".");
}

/// One stream's capture for a message: its text up to kShownOutputBytes, then a size note.
std::string describeStream(const char* name, const process::CapturedOutput& captured) {
  const std::string_view text = strings::trim(captured.data);
  if (text.empty() && captured.discardedBytes == 0) return std::string(name) + ": (empty)";
  // Line by line with control characters escaped: a script's output must not drive the
  // terminal that reads the error (escape sequences, a changed window title).
  std::string described = std::string(name) + ":";
  for (std::string_view line :
       strings::split(text.substr(0, std::min(text.size(), kShownOutputBytes)), '\n')) {
    described += '\n';
    described += strings::quoteForMessage(line, kShownOutputBytes);
  }
  const std::size_t hidden =
      (text.size() > kShownOutputBytes ? text.size() - kShownOutputBytes : 0) +
      captured.discardedBytes;
  if (hidden > 0) described += "\n... (" + std::to_string(hidden) + " more bytes)";
  return described;
}

std::string describeOutputs(const process::ProcessResult& result) {
  return describeStream("stdout", result.stdoutOutput) + "\n" +
         describeStream("stderr", result.stderrOutput);
}

/// The first non-blank line of stderr, else of stdout: usually the script's own reason.
std::string firstReason(const process::ProcessResult& result) {
  for (const auto* captured : {&result.stderrOutput, &result.stdoutOutput}) {
    for (std::string_view line : strings::split(captured->data, '\n')) {
      if (!strings::isBlank(line)) return strings::quoteForMessage(strings::trim(line));
    }
  }
  return "it printed nothing";
}

/// The host's devices as NVML lists them, MIG instances included; none when NVML cannot be
/// used (the reason is logged: at debug level when the library is simply not installed).
std::vector<discovery::GpuDevice> nvmlDevices() {
  try {
    discovery::NvmlAttempt attempt = discovery::attemptNvmlEnumeration();
    if (!attempt.found) {
      if (attempt.libraryAbsent) {
        log()->debug("No GPU properties: {}", attempt.problem);
      } else {
        log()->warn("No GPU properties: {}", attempt.problem);
      }
      return {};
    }
    for (const std::string& warning : attempt.found->warnings) log()->debug("{}", warning);
    return std::move(attempt.found->devices);
  } catch (const discovery::DiscoveryError& e) {
    log()->warn("No GPU properties: {}", e.what());
    return {};
  }
}

/// A script's stderr after a run that answered: at debug level, but a GPU the script left out
/// (lost, denied by a cgroup) is a fault of the host that an operator must hear of, whatever the
/// log level for the rest.
void logScriptStderr(std::string_view text) {
  if (text.empty()) return;
  log()->debug("The GPU discovery script wrote to stderr: {}",
               strings::quoteForMessage(text, kShownOutputBytes));
  for (std::string_view line : strings::split(text, '\n')) {
    line = strings::trim(line);
    if (discovery::isLeftOutWarning(line)) {
      log()->error("The GPU discovery script left a GPU out: {}",
                   strings::quoteForMessage(line.substr(std::string_view("warning: ").size())));
    }
  }
}

/// What one in-process run of the default discovery found and took.
struct InProcessAnswer {
  std::vector<std::string> answer;
  std::vector<discovery::GpuDevice> devices;
  discovery::HostGpuSource source = discovery::HostGpuSource::kListed;
  defaultdiscovery::Report report;
  /// Coordination mode: what was recorded, for whom, and its leases.
  bool recorded = false;
  /// The records are this process's (no --owner-pid naming another): leased, and given back
  /// with the driver. Records for another owner follow its pid, as the script's do.
  bool ownRecords = false;
  fs::path coordinationFile;
  coordination::Owner owner;
  std::vector<std::string> granted;
  std::vector<coordination::Lease> leases;
};

/// What is left until `deadline`, rounded up: a wait given it inside the run never ends before
/// the driver's own, so a run that ran out of time is always told as a time-out.
std::chrono::milliseconds remainingUntil(Clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

/// What an in-process run is doing, for the message of a time-out.
enum class InProcessStage { kStarting, kFindingGpus, kAllocating };

/// The default discovery's work for `<amount> <arguments>`, as nvidia-gpu-discovery does it,
/// for this process (the script's parent) unless the arguments name an owner; `stage` follows
/// where it is.
/// @throws defaultdiscovery::DiscoveryFailure as the program would fail (kArguments for its
///         command line).
InProcessAnswer discoverInProcess(const std::vector<std::string>& argv, Clock::time_point deadline,
                                  std::atomic<InProcessStage>& stage, fs::path& coordinationFile) {
  defaultdiscovery::DiscoveryArguments args;
  try {
    args = defaultdiscovery::parseDiscoveryArguments(argv);
  } catch (const discovery::DiscoveryError& e) {
    defaultdiscovery::Report report;
    report.details = e.details();
    throw defaultdiscovery::DiscoveryFailure(defaultdiscovery::DiscoveryFailure::Stage::kArguments,
                                             e.what(), std::move(report));
  }
  InProcessAnswer result;
  result.report.notes = args.notes;
  result.owner = coordination::Owner::of(args.ownerPid.value_or(::getpid()));

  stage = InProcessStage::kFindingGpus;
  defaultdiscovery::HostUnitsOptions hostOptions = defaultdiscovery::hostUnitsOptionsFor(args);
  hostOptions.timeLimit = remainingUntil(deadline);
  hostOptions.inProcess = true;
  defaultdiscovery::HostUnits host = defaultdiscovery::findHostUnits(hostOptions, result.report);

  // Written before the stage says so: the caller reads it once it sees kAllocating.
  coordinationFile = args.coordinationFile;
  stage = InProcessStage::kAllocating;
  defaultdiscovery::GrantRequest request = defaultdiscovery::grantRequestFor(args, result.owner);
  result.ownRecords = args.coordination && (!args.ownerPid || *args.ownerPid == ::getpid());
  request.lease = result.ownRecords;
  request.lockTimeout = std::min(coordination::kDefaultLockTimeout, remainingUntil(deadline));
  defaultdiscovery::Grant grant = defaultdiscovery::grantUnits(host, request, result.report);

  result.answer = std::move(grant.answer);
  result.devices = std::move(host.devices);
  result.source = host.source;
  result.recorded = grant.recorded;
  result.coordinationFile = args.coordinationFile;
  result.granted = std::move(grant.granted);
  result.leases = std::move(grant.leases);
  return result;
}

/// Gives back what an in-process run recorded; logs instead of throwing.
void giveBackQuietly(const fs::path& file, const coordination::Owner& owner,
                     const std::vector<std::string>& granted) noexcept {
  try {
    defaultdiscovery::giveBack(file, owner, granted);
  } catch (const std::exception& e) {
    log()->warn("Could not give back GPU(s) {} in the coordination file {}: {}",
                strings::join(granted, ","), file.string(), e.what());
  }
}

/// One in-process discovery on a thread of its own, so that the caller can stop waiting at the
/// time-out even where NVML does not return. Shared by the caller and the thread; the one that
/// finishes last owns what is left: a run given up on gives back what it recorded itself.
struct InProcessRun {
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  bool abandoned = false;
  /// Set with `abandoned`: the driver's record of the run, told when it ends.
  std::shared_ptr<AbandonedRun> ending;
  std::optional<InProcessAnswer> answer;
  std::exception_ptr error;
  /// Where the run is, for the caller's message at the time-out.
  std::atomic<InProcessStage> stage{InProcessStage::kStarting};
  /// The coordination file, set before `stage` becomes kAllocating.
  fs::path coordinationFile;
};

std::string joinInfos(const std::vector<std::shared_ptr<const ExternalResourceInfo>>& infos) {
  std::string joined = "[";
  for (const auto& info : infos) {
    if (joined.size() > 1) joined += ", ";
    joined += info->toString();
  }
  return joined + "]";
}

/// Each identifier a discovery answered, in its order, with what NVML knows of the device it
/// names among `devices` (none: the index only): what its GPUInfo is made of.
std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>> describe(
    std::vector<std::string> identifiers, const std::vector<discovery::GpuDevice>& devices) {
  std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>> described;
  described.reserve(identifiers.size());
  // Under an inherited CUDA_VISIBLE_DEVICES the default discovery prints the mask's own entries,
  // which CUDA reads against the devices it can open (a UUID prefix, an index among the usable
  // GPUs): read them the same way, so that the properties say which physical GPU each is.
  const bool masked = discovery::inheritedVisibleDevices().has_value();
  for (std::string& identifier : identifiers) {
    std::vector<std::pair<std::string, std::string>> properties;
    if (!devices.empty()) {
      const discovery::GpuDevice* device =
          masked ? discovery::resolveVisibleDeviceEntry(identifier, devices)
                 : findDevice(devices, identifier);
      if (device != nullptr) {
        properties = propertiesOf(*device);
      } else {
        log()->warn(
            "NVML knows no GPU {}, which the discovery script printed; its GPUInfo has "
            "the index only.",
            identifier);
      }
    }
    described.emplace_back(std::move(identifier), std::move(properties));
  }
  return described;
}

}  // namespace

GPUDriver::GPUDriver(const Configuration& config) {
  const std::string configured = config.get(GPUDriverOptions::DISCOVERY_SCRIPT_PATH);
  if (strings::isBlank(configured)) {
    throw IllegalConfigurationException(
        "GPU discovery script ('external-resource.<resource_name>.param." +
        GPUDriverOptions::DISCOVERY_SCRIPT_PATH.key() + "') is not configured.");
  }
  script_ = findScript(configured);

  struct stat status {};
  if (::stat(script_.c_str(), &status) != 0) {
    throw FlinkException("Cannot access the GPU discovery script " + script_.string() + ": " +
                         std::generic_category().message(errno) + ".");
  }
  if (!S_ISREG(status.st_mode)) {
    throw FlinkException("The GPU discovery script " + script_.string() +
                         " is not a regular file.");
  }
  if (::access(script_.c_str(), X_OK) != 0) {
    throw FlinkException("The discovery script " + script_.string() + " is not executable.");
  }

  if (auto args = config.getOptional(GPUDriverOptions::DISCOVERY_SCRIPT_ARG)) {
    arguments_ = strings::splitWhitespace(*args);
  } else {
    arguments_ = {"null"};  // Flink formats the missing value into the command line as "null".
  }

  if (auto placement = config.getOptional(GPUDriverOptions::PLACEMENT)) {
    const std::string value(strings::trim(*placement));
    if (!placement::parsePolicy(value)) {
      throw IllegalConfigurationException(
          "Invalid value '" + strings::quoteForMessage(*placement) + "' for configuration key '" +
          GPUDriverOptions::PLACEMENT.key() + "': expected topology or index.");
    }
    arguments_.push_back("--placement");
    arguments_.push_back(value);
  }

  nvmlEnabled_ = config.get(GPUDriverOptions::NVML_ENABLED);
  timeout_ = config.get(GPUDriverOptions::DISCOVERY_SCRIPT_TIMEOUT);
  if (timeout_.count() <= 0) {
    throw IllegalConfigurationException(
        "Invalid value '" + formatDuration(timeout_) + "' for configuration key '" +
        GPUDriverOptions::DISCOVERY_SCRIPT_TIMEOUT.key() + "': the time-out must be positive.");
  }

  inProcess_ = config.get(GPUDriverOptions::DISCOVERY_SCRIPT_IN_PROCESS) &&
               defaultdiscovery::isDefaultDiscoveryScript(script_);
  if (inProcess_) {
    holdings_ = std::make_unique<Holdings>();
    log()->debug("The GPU discovery script {} is the default discovery: running it in-process.",
                 script_.string());
  }
}

ExternalResourceInfoSet GPUDriver::toInfoSet(
    std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>> gpus) {
  std::vector<std::shared_ptr<const ExternalResourceInfo>> infos;
  infos.reserve(gpus.size());
  for (auto& [identifier, properties] : gpus) {
    infos.push_back(
        std::shared_ptr<const GPUInfo>(new GPUInfo(std::move(identifier), std::move(properties))));
  }
  // Formatted only when it is logged: each GPUInfo's text is a dozen strings.
  if (log()->should_log(spdlog::level::info)) {
    log()->info("Discovered GPU resources: {}", joinInfos(infos));
  }
  return ExternalResourceInfoSet(std::move(infos));
}

GPUDriver::~GPUDriver() {
  if (!holdings_) return;
  const std::lock_guard<std::mutex> lock(holdings_->mutex);
  // A run given up on gives back what it recorded when it ends: give it a moment to, so that a
  // worker shutting down leaves nothing behind. One stuck in NVML is left to the process's end.
  const Clock::time_point patience = Clock::now() + std::chrono::seconds(1);
  for (const std::shared_ptr<AbandonedRun>& run : holdings_->abandoned) {
    std::unique_lock<std::mutex> ending(run->mutex);
    run->ended.wait_until(ending, patience, [&] { return run->over; });
  }
  for (const Holdings::Held& held : holdings_->held) {
    giveBackQuietly(held.coordinationFile, held.owner, held.granted);
  }
  // The leases go with holdings_, after the records: no allocator sees a record whose lease was
  // dropped while it is still being removed.
}

ExternalResourceInfoSet GPUDriver::retrieveInProcess(std::int64_t gpuAmount) {
  std::vector<std::string> argv{std::to_string(gpuAmount)};
  argv.insert(argv.end(), arguments_.begin(), arguments_.end());
  const Clock::time_point deadline = Clock::now() + timeout_;

  auto run = std::make_shared<InProcessRun>();
  try {
    std::thread([run, argv, deadline] {
      std::optional<InProcessAnswer> answer;
      std::exception_ptr error;
      try {
        answer = discoverInProcess(argv, deadline, run->stage, run->coordinationFile);
      } catch (...) {
        error = std::current_exception();
      }
      const std::lock_guard<std::mutex> lock(run->mutex);
      if (run->abandoned) {
        // The caller has thrown TimeoutException: nobody will use these GPUs.
        if (answer && answer->recorded) {
          giveBackQuietly(answer->coordinationFile, answer->owner, answer->granted);
        }
        answer.reset();  // its leases go now
        const std::lock_guard<std::mutex> over(run->ending->mutex);
        run->ending->over = true;
        run->ending->ended.notify_all();
        return;
      }
      run->answer = std::move(answer);
      run->error = error;
      run->done = true;
      run->finished.notify_all();
    }).detach();
  } catch (const std::system_error& e) {
    throw FlinkException("Could not run the GPU discovery in-process: cannot start a thread: " +
                         std::string(e.what()));
  }

  std::unique_lock<std::mutex> lock(run->mutex);
  if (!run->finished.wait_until(lock, deadline, [&] { return run->done; })) {
    run->abandoned = true;
    run->ending = std::make_shared<AbandonedRun>();
    {
      const std::lock_guard<std::mutex> held(holdings_->mutex);
      holdings_->abandoned.push_back(run->ending);
    }
    const InProcessStage stage = run->stage;
    std::string doing = stage == InProcessStage::kFindingGpus
                            ? "finding the host's GPUs (NVML, else nvidia-smi)"
                            : "starting";
    if (stage == InProcessStage::kAllocating) {
      // Who holds the lock, as the kernel tells it (the file's contents say nothing of it).
      const std::optional<pid_t> holder = coordination::flockHolder(run->coordinationFile);
      doing = "allocating through the coordination file " + run->coordinationFile.string() + ", ";
      if (!holder) {
        doing += "whose lock it was waiting for or had just let go";
      } else if (*holder == ::getpid()) {
        doing +=
            "whose lock this process itself holds: an in-process discovery of this process "
            "given up on at an earlier time-out, or one running on another thread, still has it";
      } else {
        doing += "whose lock process " + std::to_string(*holder) + " holds";
      }
    }
    const std::string message = "The GPU discovery script " + script_.string() +
                                " (run in-process) did not finish within " +
                                formatDuration(timeout_) + " (it was " + doing +
                                "); GPUs it records after this are given back.";
    log()->warn("{}", message);
    throw TimeoutException(message);
  }
  const std::exception_ptr error = run->error;
  std::optional<InProcessAnswer> answer = std::move(run->answer);
  lock.unlock();

  if (error) {
    try {
      std::rethrow_exception(error);
    } catch (const defaultdiscovery::DiscoveryFailure& e) {
      using Stage = defaultdiscovery::DiscoveryFailure::Stage;
      std::string message =
          "The GPU discovery script " + script_.string() + " (run in-process) failed: " + e.what();
      for (const std::string& line : e.report().lines()) message += "\n" + line;
      const bool outOfTime =
          (e.stage() == Stage::kEnumeration || e.stage() == Stage::kCoordination) &&
          Clock::now() >= deadline;
      log()->warn("{}", message);
      if (outOfTime) throw TimeoutException(message);
      throw FlinkException(message);
    } catch (const std::exception& e) {
      const std::string message = "The GPU discovery script " + script_.string() +
                                  " (run in-process) failed: unexpected error: " + e.what();
      log()->warn("{}", message);
      throw FlinkException(message);
    }
  }

  std::string said;
  for (const std::string& line : answer->report.lines()) said += line + '\n';
  logScriptStderr(said);
  if (answer->recorded && answer->ownRecords) {
    const std::lock_guard<std::mutex> held(holdings_->mutex);
    holdings_->held.push_back({std::move(answer->coordinationFile), answer->owner, answer->granted,
                               std::move(answer->leases)});
  }
  // The devices enumerated already say what is known of them: everything NVML tells, or what
  // nvidia-smi was asked for (uuid, name, pci.bus_id, memory.total), where NVML cannot be used
  // and asking it again would tell nothing. A --gpus list knows only identifiers: NVML is asked
  // as for a script.
  std::vector<discovery::GpuDevice> devices;
  if (nvmlEnabled_) {
    devices = answer->source != discovery::HostGpuSource::kListed ? std::move(answer->devices)
                                                                  : nvmlDevices();
  }
  return toInfoSet(describe(std::move(answer->answer), devices));
}

void GPUDriver::killRunningDiscoveries() noexcept { process::signalAllRunning(SIGKILL); }

ExternalResourceInfoSet GPUDriver::retrieveResourceInfo(std::int64_t gpuAmount) {
  if (gpuAmount <= 0) {
    throw std::invalid_argument("Found illegal amount of GPUs: " + std::to_string(gpuAmount) +
                                ". The amount must be positive.");
  }

  if (inProcess_) return retrieveInProcess(gpuAmount);

  std::vector<std::string> argv{script_.string(), std::to_string(gpuAmount)};
  argv.insert(argv.end(), arguments_.begin(), arguments_.end());
  process::RunOptions options;
  options.timeout = timeout_;

  process::ProcessResult result;
  try {
    try {
      result = process::run(argv, options);
    } catch (const process::SpawnError& e) {
      if (e.code().value() != ENOEXEC) throw;
      // No #! line. Java's Runtime.exec, and so Flink, then runs the file with /bin/sh, as
      // execvp does; existing scripts may rely on it. The script is still a file run by an
      // interpreter, never a command line for a shell to parse.
      log()->warn("The GPU discovery script {} has no #! line; running it with /bin/sh.",
                  script_.string());
      argv.insert(argv.begin(), "/bin/sh");
      result = process::run(argv, options);
    }
  } catch (const std::exception& e) {
    throw FlinkException("Could not run the GPU discovery script: " + std::string(e.what()));
  }

  if (result.outcome.kind() == process::ProcessOutcome::Kind::kTimedOut) {
    const std::string message = "The GPU discovery script " + script_.string() +
                                " did not finish within " + formatDuration(timeout_) +
                                "; it and every process it started were killed.\n" +
                                describeOutputs(result);
    log()->warn("{}", message);
    throw TimeoutException(message);
  }
  if (!result.outcome.succeeded()) {
    const std::string message = "The GPU discovery script " + script_.string() + " " +
                                result.outcome.toString() + ": " + firstReason(result) + "\n" +
                                describeOutputs(result);
    log()->warn("{}", message);
    throw FlinkException(message);
  }
  logScriptStderr(result.stderrOutput.data);

  if (result.stdoutOutput.discardedBytes > 0 &&
      result.stdoutOutput.data.find('\n') == std::string::npos) {
    // Only the start of the first line was kept: its end, and so the last GPUs, are unknown.
    const std::string message =
        "The GPU discovery script " + script_.string() + " printed a first line longer than " +
        std::to_string(result.stdoutOutput.data.size()) + " bytes, which is not a list of GPUs.";
    log()->warn("{}", message);
    throw FlinkException(message);
  }

  DiscoveryOutput output;
  try {
    output = parseDiscoveryOutput(result.stdoutOutput.data);
  } catch (const FlinkException& e) {
    const std::string message = "The GPU discovery script " + script_.string() + " printed " +
                                e.what() + ".\n" + describeStream("stderr", result.stderrOutput);
    log()->warn("{}", message);
    throw FlinkException(message);
  }

  if (output.ignoredLines > 0) {
    log()->warn(
        "The GPU discovery script printed {} more line(s) after the first; only the first line "
        "is read. Output: {}",
        output.ignoredLines, strings::quoteForMessage(result.stdoutOutput.data, kShownOutputBytes));
  }
  for (const std::string& duplicate : output.duplicates) {
    log()->warn("The GPU discovery script printed GPU {} more than once; it is counted once.",
                duplicate);
  }
  if (output.identifiers.size() < static_cast<std::uint64_t>(gpuAmount)) {
    log()->warn("Asked the GPU discovery script for {} GPU(s), it found {}.", gpuAmount,
                output.identifiers.size());
  } else if (output.identifiers.size() > static_cast<std::uint64_t>(gpuAmount)) {
    log()->warn("Asked the GPU discovery script for {} GPU(s), it printed {}; all are returned.",
                gpuAmount, output.identifiers.size());
  }

  if (output.resourceName && *output.resourceName != "gpu") {
    log()->warn(
        "The GPU discovery script answered for the resource '{}', not 'gpu'; its addresses "
        "are used as GPUs.",
        strings::quoteForMessage(*output.resourceName));
  }

  return toInfoSet(describe(std::move(output.identifiers),
                            nvmlEnabled_ ? nvmlDevices() : std::vector<discovery::GpuDevice>{}));
}

}  // namespace flink::externalresource::gpu
