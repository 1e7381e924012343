// GPUDriver: configuration checks, one run of the discovery script (or of the default discovery
// in-process, InProcessDiscovery), and the turning of its answer into GPUInfo objects. Process
// handling lives in process/Subprocess, parsing in ScriptOutput, the default discovery in
// host/defaultdiscovery/.
#include "flink/externalresource/gpu/GPUDriver.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <system_error>
#include <vector>

#include "flink/externalresource/gpu/GPUDriverOptions.h"
#include "flink/externalresource/gpu/GPUInfo.h"
#include "flink/externalresource/gpu/GpuProperties.h"
#include "flink/externalresource/gpu/InProcessDiscovery.h"
#include "flink/externalresource/gpu/ScriptFailure.h"
#include "flink/externalresource/gpu/ScriptOutput.h"
#include "flink/util/Exceptions.h"
#include "flink/util/TimeUtils.h"
#include "host/amd/AmdGpus.h"
#include "host/defaultdiscovery/DefaultScript.h"
#include "host/enumeration/NvmlEnumerator.h"
#include "host/enumeration/Vendor.h"
#include "host/enumeration/VisibleDevices.h"
#include "host/intel/IntelGpus.h"
#include "host/placement/Placement.h"
#include "process/Subprocess.h"
#include "util/Logging.h"
#include "util/Notice.h"
#include "util/Strings.h"

namespace flink::externalresource::gpu {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

/// How much of each stream an error message shows; the rest is summarised by its size.
constexpr std::size_t kShownOutputBytes = 2000;

const logging::Logger& log() {
  static const logging::Logger logger("GPUDriver");
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

/// The script to use: the configured path resolved as Flink resolves it. For a default path
/// only (`isDefault`), when that finds nothing, Flink's Docker location too, so that a host with
/// Flink in /opt/flink works without FLINK_HOME. Throws FileNotFoundException naming every place
/// looked at.
fs::path findScript(const std::string& configured, bool isDefault) {
  std::vector<fs::path> candidates{resolveScriptPath(configured)};
  if (isDefault) {
    const fs::path docker = fs::path("/opt/flink") / configured;
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
        log().debug(std::string("No GPU properties: ") + attempt.problem);
      } else {
        log().warn(std::string("No GPU properties: ") + attempt.problem);
      }
      return {};
    }
    for (const Notice& notice : attempt.found->notices) log().debug(notice.line());
    return std::move(attempt.found->devices);
  } catch (const discovery::DiscoveryError& e) {
    log().warn(std::string("No GPU properties: ") + e.what());
    return {};
  }
}

/// What a discovery said besides its answer, logged by kind: a GPU left out (lost, denied by a
/// cgroup) at error level, since it is a fault of the host that an operator must hear of whatever
/// the log level for the rest; any other warning (a mask read with a surprise, a GPU without a
/// render node, a vendor tool used as a fallback) at warn level; notes and details only in the
/// debug line of all that was said, which the caller logs.
void logSaid(const std::vector<Notice>& said) {
  for (const Notice& notice : said) {
    switch (notice.kind) {
      case Notice::Kind::kGpuLeftOut:
        log().error(std::string("The GPU discovery script left a GPU out: ") +
                    strings::quoteForMessage(notice.text, std::string::npos));
        break;
      case Notice::Kind::kWarning:
        log().warn(std::string("The GPU discovery script warns: ") +
                   strings::quoteForMessage(notice.text, std::string::npos));
        break;
      case Notice::Kind::kNote:
      case Notice::Kind::kDetail:
        break;
    }
  }
}

/// A discovery script's stderr, which another program wrote, read by the line protocol our
/// discovery program writes it in (Notice::line; docs/discovery-script-protocol.md, "What the
/// script says on stderr"), which any script may follow: a line "warning: <text>" is a warning,
/// and a GPU left out when <text> names a "GPU " and says " left out: " (as NVML's, nvidia-smi's
/// and the placement's lines do: "warning: NVML: GPU 1 left out: …"); "note: <text>" is a note;
/// any other line is a detail. The one place where a line's words decide what it is: inside the
/// process, the kind travels with the text.
std::vector<Notice> readScriptStderr(std::string_view text) {
  constexpr std::string_view kWarning = Notice::kWarningPrefix;
  constexpr std::string_view kNote = Notice::kNotePrefix;
  std::vector<Notice> said;
  for (std::string_view line : strings::split(text, '\n')) {
    line = strings::trim(line);
    if (line.empty()) continue;
    if (line.starts_with(kWarning)) {
      const std::string_view words = line.substr(kWarning.size());
      const bool leftOut = words.find(" left out: ") != std::string_view::npos &&
                           words.find("GPU ") != std::string_view::npos;
      said.push_back(leftOut ? Notice::gpuLeftOut(std::string(words))
                             : Notice::warning(std::string(words)));
    } else if (line.starts_with(kNote)) {
      said.push_back(Notice::note(std::string(line.substr(kNote.size()))));
    } else {
      said.push_back(Notice::detail(std::string(line)));
    }
  }
  return said;
}

/// A script's stderr after a run that answered: all of it at debug level, and what it says by
/// its kind (logSaid).
void logScriptStderr(std::string_view text) {
  if (text.empty()) return;
  log().debug(std::string("The GPU discovery script wrote to stderr: ") +
              strings::quoteForMessage(text, kShownOutputBytes));
  logSaid(readScriptStderr(text));
}

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
/// `index`: one of `devices` made already, or null.
std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>> describe(
    std::vector<std::string> identifiers, const std::vector<discovery::GpuDevice>& devices,
    std::shared_ptr<const discovery::UnitIndex> index = nullptr) {
  std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>> described;
  described.reserve(identifiers.size());
  // Under an inherited CUDA_VISIBLE_DEVICES the default discovery prints the mask's own entries,
  // which CUDA reads against the devices it can open (a UUID prefix, an index among the usable
  // GPUs): read them the same way, so that the properties say which physical GPU each is.
  const bool masked = discovery::inheritedVisibleDevices().has_value();
  std::optional<DeviceFinder> finder;
  if (!masked && !devices.empty()) finder.emplace(devices, std::move(index));
  for (std::string& identifier : identifiers) {
    std::vector<std::pair<std::string, std::string>> properties;
    if (!devices.empty()) {
      const discovery::GpuDevice* device =
          masked ? discovery::resolveVisibleDeviceEntry(identifier, devices)
                 : finder->find(identifier);
      if (device != nullptr) {
        properties = propertiesOf(*device);
      } else {
        log().warn(std::string("NVML knows no GPU ") + identifier +
                   ", which the discovery script printed; its GPUInfo carries no properties of the "
                   "device.");
      }
    }
    described.emplace_back(std::move(identifier), std::move(properties));
  }
  return described;
}

/// Each identifier an AMD or Intel discovery printed, with what sysfs tells of the unit it names
/// under this process's masks, as the script read them (the worker's environment is the
/// script's): the index only where the enumeration fails or knows no such unit.
std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>>
describeVendorUnits(discovery::Vendor vendor, std::vector<std::string> identifiers) {
  std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>> described;
  std::optional<discovery::VendorHost> host;
  try {
    host = vendor == discovery::Vendor::kAmd ? amd::findAmdUnits(discovery::VendorOptions{})
                                             : intel::findIntelUnits(discovery::VendorOptions{});
  } catch (const discovery::DiscoveryError& e) {
    log().warn(std::string("No GPU properties: ") + e.what());
  }
  for (std::string& identifier : identifiers) {
    std::vector<std::pair<std::string, std::string>> properties;
    if (host) {
      const auto unit = std::find_if(host->units.begin(), host->units.end(),
                                     [&](const discovery::VendorUnit& candidate) {
                                       return candidate.identifier == identifier;
                                     });
      if (unit != host->units.end()) {
        properties = unit->properties;
      } else {
        log().warn(std::string("The ") + std::string(discovery::vendorName(vendor)) +
                   " discovery knows no GPU " + identifier +
                   ", which the discovery script printed; its GPUInfo carries no properties of the "
                   "device.");
      }
    }
    described.emplace_back(std::move(identifier), std::move(properties));
  }
  return described;
}

}  // namespace

GPUDriver::GPUDriver(const Configuration& config) {
  const std::string vendor(strings::trim(config.get(GPUDriverOptions::VENDOR)));
  const std::optional<discovery::Vendor> parsedVendor = discovery::parseVendor(vendor);
  if (!parsedVendor) {
    throw IllegalConfigurationException(
        "Invalid value '" + strings::quoteForMessage(config.get(GPUDriverOptions::VENDOR)) +
        "' for configuration key '" + GPUDriverOptions::VENDOR.key() +
        "': expected nvidia, amd or intel.");
  }
  vendor_ = vendor;
  const std::optional<std::string> path =
      config.getOptional(GPUDriverOptions::DISCOVERY_SCRIPT_PATH);
  const std::string vendorDefault = GPUDriverOptions::defaultDiscoveryScript(vendor);
  const std::string configured = path ? *path : vendorDefault;
  if (strings::isBlank(configured)) {
    throw IllegalConfigurationException(
        "GPU discovery script ('external-resource.<resource_name>.param." +
        GPUDriverOptions::DISCOVERY_SCRIPT_PATH.key() + "') is not configured.");
  }
  script_ = findScript(configured, configured == vendorDefault);
  // The vendor's own script, wherever installed (flink-gpu discover passes its absolute path), or
  // the program it execs, named in its place.
  const fs::path defaultName = fs::path(vendorDefault).filename();
  defaultScript_ = script_.filename() == defaultName || script_.filename() == defaultName.stem();

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

  const bool inProcess = config.get(GPUDriverOptions::DISCOVERY_SCRIPT_IN_PROCESS) &&
                         *parsedVendor == discovery::Vendor::kNvidia &&
                         defaultdiscovery::isDefaultDiscoveryScript(script_);
  if (inProcess) {
    inProcessDiscovery_ = std::make_unique<InProcessDiscovery>(script_, arguments_, timeout_);
    log().debug(std::string("The GPU discovery script ") + script_.string() +
                " is the default discovery: running it in-process.");
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
  if (log().enabled(logging::Level::kInfo)) {
    log().info(std::string("Discovered GPU resources: ") + joinInfos(infos));
  }
  return ExternalResourceInfoSet(std::move(infos));
}

GPUDriver::~GPUDriver() = default;

ExternalResourceInfoSet GPUDriver::retrieveInProcess(std::int64_t gpuAmount) {
  InProcessDiscovery::Answer answer = inProcessDiscovery_->discover(gpuAmount);
  // What the program would have written to stderr, as values: logged by kind, never read back.
  if (!answer.said.empty() && log().enabled(logging::Level::kDebug)) {
    log().debug(
        std::string("The GPU discovery script (run in-process) said: ") +
        strings::quoteForMessage(strings::join(linesOf(answer.said), "\n"), kShownOutputBytes));
  }
  logSaid(answer.said);
  // The devices enumerated already say what is known of them: everything NVML tells, or what
  // nvidia-smi was asked for (uuid, name, pci.bus_id, memory.total), where NVML cannot be used
  // and asking it again would tell nothing. A --gpus list knows only identifiers: NVML is asked
  // as for a script.
  std::vector<discovery::GpuDevice> devices;
  std::shared_ptr<const discovery::UnitIndex> index;
  if (nvmlEnabled_) {
    if (answer.source != discovery::HostGpuSource::kListed) {
      devices = std::move(answer.devices);
      index = std::move(answer.index);
    } else {
      devices = nvmlDevices();
    }
  }
  DescribedGpus gpus = describe(std::move(answer.identifiers), devices, std::move(index));
  // A share says what it is after what is known of its GPU, with NVML or without: the grant,
  // not the device, knows it. The answer and its shares are in one order.
  for (std::size_t i = 0; i < answer.shares.size() && i < gpus.size(); ++i) {
    for (auto& property : propertiesOf(answer.shares[i])) {
      gpus[i].second.push_back(std::move(property));
    }
  }
  return toInfoSet(withVendor(std::move(gpus)));
}

void GPUDriver::killRunningDiscoveries() noexcept { process::signalAllRunning(SIGKILL); }

ExternalResourceInfoSet GPUDriver::retrieveResourceInfo(std::int64_t gpuAmount) {
  if (gpuAmount <= 0) {
    throw std::invalid_argument("Found illegal amount of GPUs: " + std::to_string(gpuAmount) +
                                ". The amount must be positive.");
  }

  if (inProcessDiscovery_) return retrieveInProcess(gpuAmount);

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
      log().warn(std::string("The GPU discovery script ") + script_.string() +
                 " has no #! line; running it with /bin/sh.");
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
    log().warn(message);
    throw TimeoutException(message);
  }
  if (!result.outcome.succeeded()) {
    const std::string message = "The GPU discovery script " + script_.string() + " " +
                                result.outcome.toString() + ": " + firstReason(result) + "\n" +
                                describeOutputs(result);
    log().warn(message);
    // The outcome and the streams nested as values, for callers that word their own message.
    try {
      throw ScriptFailure(script_, std::move(result));
    } catch (const ScriptFailure&) {
      std::throw_with_nested(FlinkException(message));
    }
  }
  logScriptStderr(result.stderrOutput.data);

  if (result.stdoutOutput.discardedBytes > 0 &&
      result.stdoutOutput.data.find('\n') == std::string::npos) {
    // Only the start of the first line was kept: its end, and so the last GPUs, are unknown.
    const std::string message =
        "The GPU discovery script " + script_.string() + " printed a first line longer than " +
        std::to_string(result.stdoutOutput.data.size()) + " bytes, which is not a list of GPUs.";
    log().warn(message);
    throw FlinkException(message);
  }

  ScriptOutput output;
  try {
    output = parseScriptOutput(result.stdoutOutput.data);
  } catch (const FlinkException& e) {
    const std::string message = "The GPU discovery script " + script_.string() + " printed " +
                                e.what() + ".\n" + describeStream("stderr", result.stderrOutput);
    log().warn(message);
    throw FlinkException(message);
  }

  if (output.ignoredLines > 0) {
    log().warn(std::string("The GPU discovery script printed ") +
               std::to_string(output.ignoredLines) +
               " more line(s) after the first; only the first line is read. Output: " +
               strings::quoteForMessage(result.stdoutOutput.data, kShownOutputBytes));
  }
  for (const std::string& duplicate : output.duplicates) {
    log().warn(std::string("The GPU discovery script printed GPU ") + duplicate +
               " more than once; it is counted once.");
  }
  if (output.identifiers.size() < static_cast<std::uint64_t>(gpuAmount)) {
    log().warn(std::string("Asked the GPU discovery script for ") + std::to_string(gpuAmount) +
               " GPU(s), it found " + std::to_string(output.identifiers.size()) + ".");
  } else if (output.identifiers.size() > static_cast<std::uint64_t>(gpuAmount)) {
    log().warn(std::string("Asked the GPU discovery script for ") + std::to_string(gpuAmount) +
               " GPU(s), it printed " + std::to_string(output.identifiers.size()) +
               "; all are returned.");
  }

  if (output.resourceName && *output.resourceName != "gpu") {
    log().warn(std::string("The GPU discovery script answered for the resource '") +
               strings::quoteForMessage(*output.resourceName) +
               "', not 'gpu'; its addresses are used as GPUs.");
  }

  if (const discovery::Vendor vendor = *discovery::parseVendor(vendor_);
      vendor != discovery::Vendor::kNvidia) {
    return toInfoSet(withVendor(describeVendorUnits(vendor, std::move(output.identifiers))));
  }
  return toInfoSet(
      withVendor(describe(std::move(output.identifiers),
                          nvmlEnabled_ ? nvmlDevices() : std::vector<discovery::GpuDevice>{})));
}

GPUDriver::DescribedGpus GPUDriver::withVendor(DescribedGpus gpus) const {
  // A default discovery hands out this vendor's GPUs, known or not; another script's GPU is of
  // the vendor only where a source knew the device.
  if (!defaultScript_ && !runsInProcess()) return gpus;
  for (auto& [identifier, properties] : gpus) {
    if (!discovery::propertyOf(properties, GPUInfo::PROPERTY_KEY_VENDOR)) {
      properties.insert(properties.begin(), {std::string(GPUInfo::PROPERTY_KEY_VENDOR), vendor_});
    }
  }
  return gpus;
}

}  // namespace flink::externalresource::gpu
