// nvidia-smi enumeration: finding it, running it under a time-out, and reading its answer.
// See NvidiaSmi.h for the rules; the messages are the bash script's, word for word, because
// users and their alerting may match on them.
#include "host/enumeration/NvidiaSmi.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdlib>

#include "host/enumeration/DeviceIdentifiers.h"
#include "util/Strings.h"

namespace flink::discovery {
namespace fs = std::filesystem;

namespace {

constexpr const char* kNvidiaSmi = "nvidia-smi";

/// The GPU query: one CSV line per GPU, `<index>, <uuid>, <name>, <pci.bus_id>, <memory.total>`.
constexpr const char* kQueryGpu = "--query-gpu=index,uuid,name,pci.bus_id,memory.total";
constexpr const char* kQueryFormat = "--format=csv,noheader,nounits";
constexpr std::size_t kQueryFields = 5;

/// "8 s" for whole seconds (what NVIDIA_SMI_TIMEOUT gives), "1500 ms" otherwise.
std::string describeDuration(std::chrono::milliseconds duration) {
  if (duration.count() % 1000 == 0) return std::to_string(duration.count() / 1000) + " s";
  return std::to_string(duration.count()) + " ms";
}

/// How a run ended that was not a plain success: "exit code 6", "killed by signal 9 (SIGKILL)";
/// empty for a time-out (whose messages say it their own way).
std::string endingOf(const process::ProcessOutcome& outcome) {
  using Kind = process::ProcessOutcome::Kind;
  if (outcome.kind() == Kind::kExited) return "exit code " + std::to_string(outcome.value());
  if (outcome.kind() != Kind::kSignaled) return {};
  return "killed by " + process::ProcessOutcome::describeSignal(outcome.value());
}

// --- the GPU query's fields -------------------------------------------------------------------

/// nvidia-smi's ways of saying "no value": "[N/A]", "[Not Supported]", "[Unknown Error]",
/// "[Insufficient Permissions]", "[GPU is lost]" and the like, a bare "N/A", or nothing.
bool isNoValue(std::string_view field) noexcept {
  return field.empty() || field == "N/A" || (field.front() == '[' && field.back() == ']');
}

bool isHexDigits(std::string_view text) noexcept {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
  });
}

/// NVML's "domain:bus:device.function", e.g. "00000000:19:00.0" (hex throughout).
bool isPciBusId(std::string_view text) noexcept {
  const std::vector<std::string_view> parts = strings::split(text, ':');
  if (parts.size() != 3 || !isHexDigits(parts[0]) || !isHexDigits(parts[1])) return false;
  const std::size_t dot = parts[2].find('.');
  return dot != std::string_view::npos && isHexDigits(parts[2].substr(0, dot)) &&
         isHexDigits(parts[2].substr(dot + 1));
}

/// Reads one property of GPU `index`: nullopt for a "no value" answer, quietly; nullopt and a
/// warning when `valid` rejects the text.
template <typename Valid>
std::optional<std::string> readProperty(std::string_view field, std::string_view name,
                                        std::string_view index, Valid valid,
                                        std::vector<Notice>& warnings) {
  if (isNoValue(field)) return std::nullopt;
  if (!valid(field)) {
    warnings.push_back(Notice::warning("nvidia-smi printed an invalid " + std::string(name) +
                                       " for GPU " + std::string(index) + ": " +
                                       strings::inQuotes(field) + "; leaving it unknown"));
    return std::nullopt;
  }
  return std::string(field);
}

/// Total memory in MiB: digits, which --format=...,nounits gives; " MiB" is tolerated (the
/// unit nvidia-smi prints without nounits). nullopt when the text is anything else.
std::optional<std::uint64_t> parseMebibytes(std::string_view text) noexcept {
  if (text.ends_with("MiB")) text = strings::trim(text.substr(0, text.size() - 3));
  if (!strings::isDigits(text)) return std::nullopt;
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

/// One GPU line of the query, already split on commas; its first field is an index.
GpuDevice readGpuLine(const std::vector<std::string_view>& fields, std::vector<Notice>& warnings) {
  GpuDevice device;
  // "00" and "0" are one GPU: one coordination record.
  device.identifier = device::canonicalDeviceIdentifier(strings::trim(fields[0]));
  const std::string_view index = device.identifier;
  if (fields.size() == 1) return device;  // an index only: older tools, stand-ins
  if (fields.size() < kQueryFields) {
    warnings.push_back(Notice::warning(
        "nvidia-smi printed " + std::to_string(fields.size()) + " fields for GPU " +
        device.identifier + ", not " + std::to_string(kQueryFields) +
        " (index, uuid, name, pci.bus_id, memory.total); its properties are unknown"));
    return device;
  }

  device.uuid = readProperty(
      strings::trim(fields[1]), "uuid", index,
      [](std::string_view uuid) {
        return uuid.starts_with("GPU-") && device::isDeviceIdentifier(uuid);
      },
      warnings);

  // Everything between the uuid and the PCI bus id is the name, which may hold commas.
  std::string name;
  for (std::size_t i = 2; i + 2 < fields.size(); ++i) {
    if (i > 2) name += ',';
    name += fields[i];
  }
  const std::string_view trimmedName = strings::trim(name);
  if (!isNoValue(trimmedName)) device.name = std::string(trimmedName);

  device.pciBusId = readProperty(strings::trim(fields[fields.size() - 2]), "pci.bus_id", index,
                                 isPciBusId, warnings);

  const std::string_view memory = strings::trim(fields.back());
  if (!isNoValue(memory)) {
    device.memoryTotalMiB = parseMebibytes(memory);
    if (!device.memoryTotalMiB) {
      warnings.push_back(Notice::warning("nvidia-smi printed an invalid memory.total for GPU " +
                                         device.identifier + ": " + strings::inQuotes(memory) +
                                         "; leaving it unknown"));
    }
  }
  return device;
}

// --- GPUs nvidia-smi cannot use ---------------------------------------------------------------

/// nvidia-smi's line for a GPU it lists but cannot open (lost, or denied by a cgroup), printed
/// among the CSV lines of the others: "Unable to determine the device handle for GPU
/// 0000:0B:00.0: Unknown Error". The GPU's PCI bus id, or nullopt for any other line. It names a
/// GPU that is lost or denied, whatever nvidia-smi's exit code.
std::optional<std::string> unopenableGpu(std::string_view line) {
  // Drivers print it with and without a space before the bus id ("for GPU0000:3B:00.0").
  constexpr std::string_view kUnable = "Unable to determine the device handle for GPU";
  if (!line.starts_with(kUnable)) return std::nullopt;
  const std::string_view rest = strings::trim(line.substr(kUnable.size()));
  const std::size_t colon = rest.find(": ");
  const std::string_view bus = rest.substr(0, colon);
  if (!isPciBusId(bus)) return std::nullopt;
  return std::string(bus);
}

/// nvidia-smi's field values that mean the GPU itself cannot be used, as NVML's
/// NVML_ERROR_GPU_IS_LOST, NVML_ERROR_UNKNOWN and NVML_ERROR_NO_PERMISSION do.
bool isUnusableValue(std::string_view field) noexcept {
  return field == "[GPU is lost]" || field == "[Unknown Error]" ||
         field == "[Insufficient Permissions]";
}

/// Why the GPU of a CSV line cannot be used ("uuid is [GPU is lost]"), or nullopt.
std::optional<std::string> unusableBecause(const std::vector<std::string_view>& fields) {
  for (std::size_t i = 1; i < fields.size(); ++i) {
    const std::string_view field = strings::trim(fields[i]);
    if (!isUnusableValue(field)) continue;
    // A name with a comma in it shifts the fields; the last two are still bus id and memory.
    const char* name = fields.size() < kQueryFields ? "a field"
                       : i == 1                     ? "uuid"
                       : i + 1 == fields.size()     ? "memory.total"
                       : i + 2 == fields.size()     ? "pci.bus_id"
                                                    : "name";
    return std::string(name) + " is " + std::string(field);
  }
  return std::nullopt;
}

// --- nvidia-smi -L ----------------------------------------------------------------------------

/// `GPU 0: NVIDIA H200 (UUID: GPU-...)`.
struct ListedGpu {
  std::string index;                ///< canonical
  std::optional<std::string> name;  ///< nullopt when not printed
  std::optional<std::string> uuid;  ///< nullopt when not a GPU- UUID
};

/// `MIG 1g.18gb     Device  0: (UUID: MIG-...)`.
struct ListedMig {
  std::string profile;
  std::string uuid;
};

/// The value of a trailing "(UUID: <value>)", and the text before it; nullopt without one.
std::optional<std::pair<std::string_view, std::string_view>> splitUuid(std::string_view line) {
  constexpr std::string_view kOpen = "(UUID:";
  const std::size_t open = line.rfind(kOpen);
  if (open == std::string_view::npos || !line.ends_with(')')) return std::nullopt;
  const std::string_view value =
      strings::trim(line.substr(open + kOpen.size(), line.size() - 1 - open - kOpen.size()));
  return std::make_pair(line.substr(0, open), value);
}

/// `line` is trimmed.
std::optional<ListedGpu> parseListedGpu(std::string_view line) {
  if (!line.starts_with("GPU ")) return std::nullopt;
  const std::string_view rest = line.substr(4);
  const std::size_t colon = rest.find(':');
  if (colon == std::string_view::npos || !strings::isDigits(rest.substr(0, colon)))
    return std::nullopt;
  const auto uuid = splitUuid(rest.substr(colon + 1));
  if (!uuid) return std::nullopt;
  ListedGpu gpu;
  gpu.index = device::canonicalDeviceIdentifier(rest.substr(0, colon));
  const std::string_view name = strings::trim(uuid->first);
  if (!isNoValue(name)) gpu.name = std::string(name);
  if (uuid->second.starts_with("GPU-") && device::isDeviceIdentifier(uuid->second)) {
    gpu.uuid = std::string(uuid->second);
  }
  return gpu;
}

/// `line` is trimmed. Both MIG UUID forms: `MIG-<uuid>` (R470 on), `MIG-GPU-<uuid>/<gi>/<ci>`.
std::optional<ListedMig> parseListedMig(std::string_view line) {
  if (!line.starts_with("MIG ")) return std::nullopt;
  const auto uuid = splitUuid(line);
  if (!uuid || !uuid->second.starts_with("MIG-") || !device::isDeviceIdentifier(uuid->second)) {
    return std::nullopt;
  }
  const std::string_view rest = strings::trim(line.substr(4));
  const std::size_t end = std::find_if(rest.begin(), rest.end(), strings::isSpace) - rest.begin();
  if (end == 0 || end >= rest.size()) return std::nullopt;
  return ListedMig{std::string(rest.substr(0, end)), std::string(uuid->second)};
}

/// Where the listed GPU is among the whole GPUs of `devices`: the one with its UUID, else the
/// one with its index, unless that one is known to have another UUID (the two runs disagree
/// then, and its instances are better left out than put under the wrong GPU).
std::optional<std::size_t> findListedGpu(const std::vector<GpuDevice>& devices,
                                         const ListedGpu& gpu) {
  if (gpu.uuid) {
    for (std::size_t i = 0; i < devices.size(); ++i) {
      if (!devices[i].isMigInstance() && devices[i].uuid == gpu.uuid) return i;
    }
  }
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const GpuDevice& device = devices[i];
    if (device.isMigInstance() || device.identifier != gpu.index) continue;
    if (gpu.uuid && device.uuid && device.uuid != gpu.uuid) return std::nullopt;
    return i;
  }
  return std::nullopt;
}

std::optional<unsigned> parseIndex(std::string_view digits) noexcept {
  unsigned value = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (error != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return value;
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
  if (strings::isDigits(text) && text.front() != '0' && text.size() <= 5) {
    setting.timeout = std::chrono::seconds(std::stoi(std::string(text)));
    return setting;
  }
  setting.note = Notice::note("ignoring NVIDIA_SMI_TIMEOUT='" + strings::quoteForMessage(text) +
                              "' (not a positive integer); using " +
                              std::to_string(kDefaultNvidiaSmiTimeout.count()) + " s");
  return setting;
}

NvidiaSmiLocation findNvidiaSmi(std::string_view searchPath, const std::vector<fs::path>& folders) {
  return process::findProgram(kNvidiaSmi, searchPath, folders);
}

Enumeration interpretNvidiaSmiOutput(std::string_view output,
                                     const process::ProcessOutcome& outcome,
                                     std::chrono::milliseconds timeout) {
  Enumeration result;
  std::vector<Notice> propertyWarnings;
  std::vector<std::string> printed;  // every line that is not a GPU, as "nvidia-smi: <line>"
  std::vector<LeftOutGpu> leftOut;   // GPUs nvidia-smi lists but cannot use
  std::string firstLine;
  bool noDevices = false;
  for (std::string_view rawLine : strings::split(output, '\n')) {
    const std::string_view line = strings::trim(rawLine);
    if (line.empty()) continue;
    const std::vector<std::string_view> fields = strings::split(line, ',');
    if (strings::isDigits(strings::trim(fields.front()))) {
      if (std::optional<std::string> why = unusableBecause(fields)) {
        const std::string index = device::canonicalDeviceIdentifier(strings::trim(fields.front()));
        std::string gpu = "GPU " + index;
        if (fields.size() >= kQueryFields) {
          const std::string_view bus = strings::trim(fields[fields.size() - 2]);
          if (isPciBusId(bus)) gpu += " (" + std::string(bus) + ")";
        }
        leftOut.push_back({std::move(gpu), *why});
        continue;
      }
      result.devices.push_back(readGpuLine(fields, propertyWarnings));
      continue;
    }
    if (std::optional<std::string> bus = unopenableGpu(line)) {
      leftOut.push_back({"GPU " + *bus, std::string(line)});
      continue;
    }
    if (firstLine.empty()) firstLine = std::string(line);
    if (line.find("No devices were found") != std::string_view::npos) noDevices = true;
    printed.push_back("nvidia-smi: " + std::string(line));
  }

  using Kind = process::ProcessOutcome::Kind;
  const bool timedOut = outcome.kind() == Kind::kTimedOut;
  const std::string ending = endingOf(outcome);

  std::vector<Notice> leftOutNotices;
  for (const LeftOutGpu& gpu : leftOut) {
    leftOutNotices.push_back(
        Notice::gpuLeftOut("nvidia-smi: " + gpu.gpu + " left out: " + gpu.error));
  }
  if (result.devices.empty()) {
    if (!leftOut.empty()) {
      // Every GPU it lists is one it cannot use: name each, whatever the exit code says.
      std::vector<std::string> each;
      for (const LeftOutGpu& gpu : leftOut) each.push_back(gpu.describe());
      std::vector<std::string> details = linesOf(leftOutNotices);
      details.insert(details.end(), printed.begin(), printed.end());
      throw DiscoveryError("no usable NVIDIA GPU: nvidia-smi lists " +
                               std::to_string(leftOut.size()) +
                               " GPU(s), and every one is left out: " + strings::join(each, "; "),
                           std::move(details), DiscoveryError::Kind::kNoUsableGpu);
    }
    // The order matters: "No devices were found" comes with exit code 6, and is the real cause.
    if (noDevices) {
      throw DiscoveryError("no NVIDIA GPU found: nvidia-smi printed \"No devices were found\"",
                           std::move(printed), DiscoveryError::Kind::kNoGpu);
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
                           std::move(printed), DiscoveryError::Kind::kNoGpu);
    }
    throw DiscoveryError("no NVIDIA GPU found: nvidia-smi listed no GPU", std::move(printed),
                         DiscoveryError::Kind::kNoGpu);
  }

  const std::string count = std::to_string(result.devices.size());
  // nvidia-smi exits non-zero for a GPU it cannot open; when that GPU's own line is all it had
  // to say, the exit code adds nothing.
  const bool exitExplained = !leftOut.empty() && printed.empty();
  if (timedOut) {
    result.notices.push_back(Notice::warning("nvidia-smi did not answer within " +
                                             describeDuration(timeout) + "; using the " + count +
                                             " GPU index(es) it printed before"));
  } else if (outcome.kind() == Kind::kExited && outcome.value() != 0 && !exitExplained) {
    result.notices.push_back(Notice::warning("nvidia-smi exited with code " +
                                             std::to_string(outcome.value()) + " but listed " +
                                             count + " GPU(s); using them"));
  } else if (outcome.kind() == Kind::kSignaled) {
    result.notices.push_back(Notice::warning("nvidia-smi was " + ending + " but listed " + count +
                                             " GPU(s); using them"));
  }
  result.notices.insert(result.notices.end(), leftOutNotices.begin(), leftOutNotices.end());
  result.notices.insert(result.notices.end(), propertyWarnings.begin(), propertyWarnings.end());
  for (std::string& line : printed) result.notices.push_back(Notice::detail(std::move(line)));
  result.leftOut = std::move(leftOut);
  return result;
}

std::size_t applyNvidiaSmiMigListing(Enumeration& enumeration, std::string_view listOutput) {
  std::vector<GpuDevice>& devices = enumeration.devices;
  std::vector<Notice> warnings;
  std::size_t added = 0;
  std::optional<ListedGpu> gpu;         // the GPU line the MIG lines below belong to
  std::optional<std::size_t> parentAt;  // where that GPU is in `devices`
  bool reportedMissingParent = false;   // one warning per GPU the query did not list
  for (std::string_view rawLine : strings::split(listOutput, '\n')) {
    const std::string_view line = strings::trim(rawLine);
    if (line.empty()) continue;
    if (std::optional<ListedGpu> listed = parseListedGpu(line)) {
      gpu = std::move(listed);
      parentAt = findListedGpu(devices, *gpu);
      reportedMissingParent = false;
      continue;
    }
    const std::optional<ListedMig> mig = parseListedMig(line);
    if (!mig) {
      warnings.push_back(Notice::detail("nvidia-smi -L: " + std::string(line)));
      continue;
    }
    if (!gpu) {
      warnings.push_back(Notice::warning("nvidia-smi -L listed MIG instance " + mig->uuid +
                                         " before any GPU; ignoring it"));
      continue;
    }
    const std::optional<unsigned> parentIndex =
        parentAt ? parseIndex(devices[*parentAt].identifier) : std::nullopt;
    if (!parentIndex) {
      if (!reportedMissingParent) {
        warnings.push_back(Notice::warning("nvidia-smi -L listed MIG instances of GPU " +
                                           gpu->index +
                                           (gpu->uuid ? " (" + *gpu->uuid + ")" : std::string()) +
                                           ", which the GPU query did not list; ignoring them"));
        reportedMissingParent = true;
      }
      continue;
    }
    if (std::any_of(devices.begin(), devices.end(),
                    [&](const GpuDevice& device) { return device.identifier == mig->uuid; })) {
      continue;  // listed already (a second application, or twice in the listing)
    }

    GpuDevice& parent = devices[*parentAt];
    parent.migEnabled = true;
    GpuDevice instance;
    instance.identifier = mig->uuid;
    instance.uuid = mig->uuid;
    const std::optional<std::string>& parentName = parent.name ? parent.name : gpu->name;
    if (parentName) instance.name = *parentName + " MIG " + mig->profile;
    instance.pciBusId = parent.pciBusId;
    instance.mig = MigPlacement{*parentIndex, std::nullopt, std::nullopt};
    // After the parent and the instances placed after it before.
    std::size_t at = *parentAt + 1;
    while (at < devices.size() && devices[at].mig && devices[at].mig->parentIndex == *parentIndex) {
      ++at;
    }
    devices.insert(devices.begin() + static_cast<std::ptrdiff_t>(at), std::move(instance));
    ++added;
  }
  enumeration.notices.insert(enumeration.notices.end(), warnings.begin(), warnings.end());
  return added;
}

namespace {

/// stdout, then stderr; `result` is left without its stdout.
std::string mergedOutput(process::ProcessResult& result) {
  // nvidia-smi prints its errors on stdout; some wrappers print them on stderr. Both are read,
  // stdout first (the bash script merged them in the order they came).
  std::string output = std::move(result.stdoutOutput.data);
  if (!output.empty() && output.back() != '\n') output += '\n';
  output += result.stderrOutput.data;
  return output;
}

/// Runs `nvidia-smi -L` until `deadline` (`timeout` after the query started) and adds the MIG
/// instances it lists to `found`; its failures become warnings.
void listMigInstances(const fs::path& executable, std::chrono::steady_clock::time_point deadline,
                      std::chrono::milliseconds timeout, bool ownProcessGroup, Enumeration& found) {
  const std::string budget = describeDuration(timeout) + " for both nvidia-smi runs";
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  if (left <= std::chrono::milliseconds::zero()) {
    found.notices.push_back(Notice::warning("no time left to run nvidia-smi -L (" + budget +
                                            "); MIG instances are not listed"));
    return;
  }
  process::RunOptions runOptions;
  runOptions.timeout = left;
  runOptions.newProcessGroup = ownProcessGroup;
  process::ProcessResult result;
  try {
    result = process::run({executable.string(), "-L"}, runOptions);
  } catch (const std::exception& e) {
    found.notices.push_back(
        Notice::warning("nvidia-smi -L could not be started: " + std::string(e.what()) +
                        "; MIG instances are not listed"));
    return;
  }
  // What it printed is used even when it failed: a MIG-enabled GPU whose instances are listed
  // is better handed out as instances than whole.
  const std::size_t before = found.notices.size();
  const std::size_t added = applyNvidiaSmiMigListing(found, mergedOutput(result));
  if (result.outcome.succeeded()) return;
  std::string warning =
      result.outcome.kind() == process::ProcessOutcome::Kind::kTimedOut
          ? "nvidia-smi -L did not answer in time (" + budget + ") and was stopped; "
          : "nvidia-smi -L failed (" + endingOf(result.outcome) + "); ";
  warning += added == 0
                 ? std::string("MIG instances are not listed")
                 : "only the " + std::to_string(added) + " MIG instance(s) it printed are listed";
  found.notices.insert(found.notices.begin() + static_cast<std::ptrdiff_t>(before),
                       Notice::warning(std::move(warning)));
}

}  // namespace

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
           "(put its folder on the PATH of the process running the discovery)"},
          DiscoveryError::Kind::kNoDriver);
    }
    executable = *location.path;
  }

  // One time-out for both runs, so that the whole stays within what the caller planned for.
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  process::RunOptions runOptions;
  runOptions.timeout = options_.timeout;
  // In our process group, unless asked otherwise: when the driver's time-out ends the
  // discovery's group, nvidia-smi goes with it.
  runOptions.newProcessGroup = options_.ownProcessGroup;
  process::ProcessResult result;
  try {
    result = process::run({executable.string(), kQueryGpu, kQueryFormat}, runOptions);
  } catch (const std::exception& e) {
    throw DiscoveryError("nvidia-smi could not be started: " + std::string(e.what()),
                         {"nvidia-smi: " + executable.string()});
  }
  Enumeration found =
      interpretNvidiaSmiOutput(mergedOutput(result), result.outcome, options_.timeout);
  if (options_.mig) {
    listMigInstances(executable, deadline, options_.timeout, options_.ownProcessGroup, found);
  }
  return found;
}

}  // namespace flink::discovery
