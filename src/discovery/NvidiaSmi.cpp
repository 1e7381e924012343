// nvidia-smi enumeration: finding it, running it under a time-out, and reading its answer.
// See NvidiaSmi.h for the rules; the messages are the bash script's, word for word, because
// users and their alerting may match on them.
#include "discovery/NvidiaSmi.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "externalresource/gpu/DiscoveryOutput.h"
#include "util/Strings.h"

namespace flink::discovery {
namespace fs = std::filesystem;

namespace {

constexpr const char* kNvidiaSmi = "nvidia-smi";

bool isDigits(std::string_view text) noexcept {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

/// "8 s" for whole seconds (what NVIDIA_SMI_TIMEOUT gives), "1500 ms" otherwise.
std::string describeDuration(std::chrono::milliseconds duration) {
  if (duration.count() % 1000 == 0) return std::to_string(duration.count() / 1000) + " s";
  return std::to_string(duration.count()) + " ms";
}

/// What execvp would run: a regular file (after symlinks) we may execute.
bool isExecutableFile(const fs::path& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
         ::access(path.c_str(), X_OK) == 0;
}

std::string joinPaths(const std::vector<fs::path>& paths) {
  std::string joined;
  for (const fs::path& path : paths) {
    if (!joined.empty()) joined += ", ";
    joined += path.string();
  }
  return joined;
}

}  // namespace

const std::vector<fs::path>& defaultNvidiaSmiFolders() {
  // Debian/Ubuntu and RHEL packages; the .run installer; NVIDIA's container images (mounted by
  // the container toolkit); WSL 2; some appliance installs.
  static const std::vector<fs::path> folders = {
      "/usr/bin", "/usr/local/bin", "/usr/local/nvidia/bin", "/usr/lib/wsl/lib", "/opt/nvidia/bin"};
  return folders;
}

TimeoutSetting parseNvidiaSmiTimeout(const char* value) {
  TimeoutSetting setting;
  if (value == nullptr || *value == '\0') return setting;  // unset or empty: the default, quietly
  const std::string_view text(value);
  // 1 to 99999: no leading zero, at most five digits, as the bash script accepted.
  if (isDigits(text) && text.front() != '0' && text.size() <= 5) {
    setting.timeout = std::chrono::seconds(std::stoi(std::string(text)));
    return setting;
  }
  setting.note = "note: ignoring NVIDIA_SMI_TIMEOUT='" + strings::quoteForMessage(text) +
                 "' (not a positive integer); using " +
                 std::to_string(kDefaultNvidiaSmiTimeout.count()) + " s";
  return setting;
}

NvidiaSmiLocation findNvidiaSmi(std::string_view searchPath, const std::vector<fs::path>& folders) {
  std::vector<fs::path> candidates;
  for (std::string_view entry : strings::split(searchPath, ':')) {
    // An empty PATH entry means the working directory; process::run needs absolute paths.
    std::error_code error;
    fs::path folder = fs::absolute(entry.empty() ? fs::path(".") : fs::path(entry), error);
    if (error) continue;
    candidates.push_back(folder.lexically_normal());
  }
  for (const fs::path& folder : folders) candidates.push_back(folder.lexically_normal());

  NvidiaSmiLocation location;
  for (fs::path& folder : candidates) {
    // "/usr/bin/" and "/usr/bin" are one folder; so are a PATH entry and a default folder.
    std::string key = folder.string();
    while (key.size() > 1 && key.back() == '/') key.pop_back();
    folder = key;
    if (std::find(location.searched.begin(), location.searched.end(), folder) !=
        location.searched.end()) {
      continue;
    }
    location.searched.push_back(folder);
    if (isExecutableFile(folder / kNvidiaSmi)) {
      location.path = folder / kNvidiaSmi;
      return location;
    }
  }
  return location;
}

Enumeration interpretNvidiaSmiOutput(std::string_view output,
                                     const process::ProcessOutcome& outcome,
                                     std::chrono::milliseconds timeout) {
  Enumeration result;
  std::vector<std::string> printed;  // every non-index line, as "nvidia-smi: <line>"
  std::string firstLine;
  bool noDevices = false;
  for (std::string_view rawLine : strings::split(output, '\n')) {
    const std::string_view line = strings::trim(rawLine);
    if (line.empty()) continue;
    if (isDigits(line)) {
      // "00" and "0" are one GPU: one coordination record.
      GpuDevice device;
      device.identifier = externalresource::gpu::canonicalDeviceIdentifier(line);
      result.devices.push_back(std::move(device));
      continue;
    }
    if (firstLine.empty()) firstLine = std::string(line);
    if (line.find("No devices were found") != std::string_view::npos) noDevices = true;
    printed.push_back("nvidia-smi: " + std::string(line));
  }

  using Kind = process::ProcessOutcome::Kind;
  const bool timedOut = outcome.kind() == Kind::kTimedOut;
  // "exit code 6", or for a signal "killed by signal 9 (SIGKILL)".
  std::string ending;
  if (outcome.kind() == Kind::kExited) {
    ending = "exit code " + std::to_string(outcome.value());
  } else if (outcome.kind() == Kind::kSignaled) {
    ending = outcome.toString();
    if (ending.starts_with("was ")) ending.erase(0, 4);
  }

  if (result.devices.empty()) {
    // The order matters: "No devices were found" comes with exit code 6, and is the real cause.
    if (noDevices) {
      throw DiscoveryError("no NVIDIA GPU found: nvidia-smi printed \"No devices were found\"",
                           std::move(printed));
    }
    if (timedOut) {
      throw DiscoveryError(
          "nvidia-smi did not answer within " + describeDuration(timeout) + " and was stopped",
          std::move(printed));
    }
    if (!outcome.succeeded()) {
      throw DiscoveryError(
          "nvidia-smi failed (" + ending + "): " + (firstLine.empty() ? "(no output)" : firstLine),
          std::move(printed));
    }
    if (!firstLine.empty()) {
      throw DiscoveryError("no NVIDIA GPU found: nvidia-smi printed no GPU index: " + firstLine,
                           std::move(printed));
    }
    throw DiscoveryError("no NVIDIA GPU found: nvidia-smi listed no GPU", std::move(printed));
  }

  const std::string count = std::to_string(result.devices.size());
  if (timedOut) {
    result.warnings.push_back("warning: nvidia-smi did not answer within " +
                              describeDuration(timeout) + "; using the " + count +
                              " GPU index(es) it printed before");
  } else if (outcome.kind() == Kind::kExited && outcome.value() != 0) {
    result.warnings.push_back("warning: nvidia-smi exited with code " +
                              std::to_string(outcome.value()) + " but listed " + count +
                              " GPU(s); using them");
  } else if (outcome.kind() == Kind::kSignaled) {
    result.warnings.push_back("warning: nvidia-smi was " + ending + " but listed " + count +
                              " GPU(s); using them");
  }
  result.warnings.insert(result.warnings.end(), printed.begin(), printed.end());
  return result;
}

Enumeration NvidiaSmiEnumerator::enumerate() {
  fs::path executable;
  if (options_.executable) {
    executable = *options_.executable;
  } else {
    std::string searchPath;
    if (options_.searchPath) {
      searchPath = *options_.searchPath;
    } else if (const char* path = std::getenv("PATH")) {
      searchPath = path;
    }
    NvidiaSmiLocation location = findNvidiaSmi(searchPath, options_.folders);
    if (!location.path) {
      throw DiscoveryError(
          "nvidia-smi was not found: no NVIDIA driver on this host",
          {"looked in " + joinPaths(location.searched) +
               " (the folders of PATH, then the usual install folders)",
           "the NVIDIA driver is not installed, or nvidia-smi is in none of these folders "
           "(put its folder on the PATH of the process running the discovery)"});
    }
    executable = *location.path;
  }

  process::RunOptions runOptions;
  runOptions.timeout = options_.timeout;
  // In our process group: when the driver's time-out ends the discovery's group, nvidia-smi
  // goes with it.
  runOptions.newProcessGroup = false;
  process::ProcessResult result;
  try {
    result = process::run({executable.string(), "--query-gpu=index", "--format=csv,noheader"},
                          runOptions);
  } catch (const std::exception& e) {
    throw DiscoveryError("nvidia-smi could not be started: " + std::string(e.what()),
                         {"nvidia-smi: " + executable.string()});
  }
  // nvidia-smi prints its errors on stdout; some wrappers print them on stderr. Both are read,
  // stdout first (the bash script merged them in the order they came).
  std::string output = std::move(result.stdoutOutput.data);
  if (!output.empty() && output.back() != '\n') output += '\n';
  output += result.stderrOutput.data;
  return interpretNvidiaSmiOutput(output, result.outcome, options_.timeout);
}

}  // namespace flink::discovery
