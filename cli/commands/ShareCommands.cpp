// `flink-gpu share` and `unshare` (see ShareCommands.h).
#include "commands/ShareCommands.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "Console.h"
#include "ExitCode.h"
#include "commands/ChangeDocument.h"
#include "commands/HostGpuListing.h"
#include "host/enumeration/DeviceIdentifiers.h"
#include "host/enumeration/GpuEnumerator.h"
#include "host/enumeration/HostGpus.h"
#include "host/enumeration/UnitIndex.h"
#include "host/enumeration/VisibleDevices.h"
#include "host/health/HealthRecords.h"
#include "host/sharing/MpsDaemon.h"
#include "host/sharing/SharingDeclarations.h"
#include "host/store/StoreError.h"
#include "util/Strings.h"

namespace flink::cli {
namespace {

/// What `--gpu` names: every whole GPU, or one by index or GPU-… UUID (canonical: "01" is "1").
struct GpuChoice {
  bool all = false;
  std::string gpu;
};

/// nullopt after printing the usage error.
std::optional<GpuChoice> gpuChoiceOf(const std::string& text) {
  if (text == "all") return GpuChoice{true, ""};
  const std::string trimmed(strings::trim(text));
  if (trimmed == text && device::isDeviceIdentifier(text) && !device::isVendorUnitName(text) &&
      !device::isMigUuid(text)) {
    return GpuChoice{false, device::canonicalDeviceIdentifier(text)};
  }
  printError("invalid --gpu '" + strings::quoteForMessage(text) + "': expected a whole GPU, an " +
             "index (e.g. 0) or a GPU- UUID, or all" +
             (device::isMigUuid(text) ? "; MIG instances are not shared" : ""));
  return std::nullopt;
}

/// A whole decimal number, nothing around it; nullopt otherwise.
std::optional<std::uint64_t> wholeNumber(const std::string& text) {
  if (!strings::isDigits(text)) return std::nullopt;
  std::uint64_t value = 0;
  for (const char c : text) {
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (value > (UINT64_MAX - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  return value;
}

/// "4 shares of 35942 MiB, time-sliced", "3 shares of 40960 MiB, MPS /run/nvidia-mps-1",
/// "4 shares (memory unknown), time-sliced".
std::string describeShares(const sharing::Declaration& declaration) {
  return std::to_string(declaration.replicas) + " shares" +
         (declaration.memoryPerShareMiB
              ? " of " + std::to_string(*declaration.memoryPerShareMiB) + " MiB"
              : std::string(" (memory unknown)")) +
         (declaration.mpsPipeDirectory
              ? ", MPS " +
                    strings::quoteForMessage(*declaration.mpsPipeDirectory, std::string::npos)
              : std::string(", time-sliced"));
}

std::string nameOf(const sharing::Declaration& declaration) {
  return "GPU " + declaration.gpu + (declaration.uuid ? " (" + *declaration.uuid + ")" : "");
}

/// The whole GPU of the host that `gpu` (a canonical index or GPU-… UUID) names, through the
/// host's index (a UnitRef of an index of devices is the device's position), or nullptr after
/// printing why there is none.
const discovery::GpuDevice* hostGpuOf(const std::string& gpu, const discovery::HostGpus& host) {
  const bool byUuid = device::isUuid(gpu);
  const discovery::UnitIndex index = discovery::UnitIndex::of(host.found.devices);
  if (const std::optional<discovery::UnitRef> unit = index.entry(gpu).unit;
      unit && !index[*unit].isMigInstance() &&
      (!byUuid || index[*unit].uuid == device::canonicalDeviceIdentifier(gpu))) {
    return &host.found.devices[*unit];
  }
  std::string message = byUuid ? "cannot share " + gpu + ": no GPU of this host has this UUID"
                               : "cannot share GPU " + gpu + ": this host has no GPU " + gpu;
  for (const std::string& line : whatTheHostHas(host, false)) message += '\n' + line;
  printError(message);
  return nullptr;
}

/// The declaration for `device`, or nullopt after printing why the host cannot give it.
std::optional<sharing::Declaration> declarationFor(const discovery::GpuDevice& device,
                                                   const std::optional<std::uint64_t>& replicas,
                                                   const std::optional<std::uint64_t>& shareMiB,
                                                   const ShareOptions& options,
                                                   const discovery::HostGpus& host) {
  const std::string name = discovery::describeDevice(device);
  if (device.migEnabled) {
    printError("cannot share " + name +
               ": it is in MIG mode; its MIG instances are not shared, and the whole GPU can be "
               "shared only with MIG mode off");
    return std::nullopt;
  }
  sharing::Declaration declaration;
  declaration.gpu = device.identifier;
  declaration.uuid = device.uuid;
  if (replicas) {
    declaration.replicas = static_cast<unsigned>(*replicas);
    if (device.memoryTotalMiB) {
      const std::uint64_t each =
          sharing::memoryPerShare(*device.memoryTotalMiB, declaration.replicas);
      if (each > 0) {
        declaration.memoryPerShareMiB = each;
      } else {
        // NVML's answer is no memory to split: the shares get no budget, as where it is unknown.
        printNote(name + " reports " + std::to_string(*device.memoryTotalMiB) +
                  " MiB of memory, less than a MiB a share: its shares have no memory budget");
      }
    }
  } else {
    const std::string what =
        "cannot share " + name + " in shares of " + std::to_string(*shareMiB) + " MiB: ";
    if (!device.memoryTotalMiB) {
      printError(what + "its memory is not known (" +
                 std::string(discovery::sourceName(host.source)) +
                 " does not tell it); give --replicas K instead");
      return std::nullopt;
    }
    const std::uint64_t shares = sharing::sharesOfMemory(*device.memoryTotalMiB, *shareMiB);
    if (shares < sharing::kMinReplicas || shares > sharing::kMaxReplicas) {
      printError(what + "its " + std::to_string(*device.memoryTotalMiB) + " MiB give " +
                 std::to_string(shares) + (shares == 1 ? " share" : " shares") +
                 ", and a GPU is shared among " + std::to_string(sharing::kMinReplicas) + " to " +
                 std::to_string(sharing::kMaxReplicas) + " workers");
      return std::nullopt;
    }
    declaration.replicas = static_cast<unsigned>(shares);
    declaration.memoryPerShareMiB = *shareMiB;
  }
  declaration.mpsPipeDirectory = options.mps;
  declaration.uid = ::getuid();
  return declaration;
}

/// A declaration in share's and unshare's JSON documents.
nlohmann::ordered_json declarationJson(const sharing::Declaration& declaration) {
  using Json = nlohmann::ordered_json;
  return Json{
      {"gpu", declaration.gpu},
      {"uuid", declaration.uuid ? Json(*declaration.uuid) : Json(nullptr)},
      {"replicas", declaration.replicas},
      {"memory_per_share",
       declaration.memoryPerShareMiB ? Json(*declaration.memoryPerShareMiB) : Json(nullptr)},
      {"mps_pipe_directory",
       declaration.mpsPipeDirectory ? Json(*declaration.mpsPipeDirectory) : Json(nullptr)}};
}

}  // namespace

int runShare(const ShareOptions& given) {
  ShareOptions spelled = given;  // --mps in its normal form, once checked
  const ShareOptions& options = spelled;
  const std::optional<GpuChoice> choice = gpuChoiceOf(options.gpu);
  if (!choice) return kUsageError;
  if (options.replicas.has_value() == options.shareMemory.has_value()) {
    printError(options.replicas
                   ? "give --replicas or --share-memory, not both (--replicas '" +
                         strings::quoteForMessage(*options.replicas) + "', --share-memory '" +
                         strings::quoteForMessage(*options.shareMemory) + "')"
                   : std::string("give --replicas K (how many workers share each GPU) or "
                                 "--share-memory MIB (how much memory each share gets)"));
    return kUsageError;
  }
  std::optional<std::uint64_t> replicas;
  std::optional<std::uint64_t> shareMiB;
  if (options.replicas) {
    replicas = wholeNumber(*options.replicas);
    if (!replicas || *replicas < sharing::kMinReplicas || *replicas > sharing::kMaxReplicas) {
      printError("invalid --replicas '" + strings::quoteForMessage(*options.replicas) +
                 "': expected a whole number of workers from " +
                 std::to_string(sharing::kMinReplicas) + " to " +
                 std::to_string(sharing::kMaxReplicas));
      return kUsageError;
    }
  } else {
    shareMiB = wholeNumber(*options.shareMemory);
    if (!shareMiB || *shareMiB == 0) {
      printError("invalid --share-memory '" + strings::quoteForMessage(*options.shareMemory) +
                 "': expected a whole number of MiB above 0");
      return kUsageError;
    }
  }
  if (options.mps) {
    const bool control = std::any_of(options.mps->begin(), options.mps->end(), [](char c) {
      return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
    });
    if (!options.mps->starts_with('/') || control) {
      printError("invalid --mps '" + strings::quoteForMessage(*options.mps) +
                 "': the MPS control daemon's pipe directory (CUDA_MPS_PIPE_DIRECTORY) must be " +
                 (control ? "one line without control characters" : "an absolute path"));
      return kUsageError;
    }
    // One directory, one spelling: `/run/mps/` and `/run/mps` are one daemon, and so one group
    // of GPUs a request may take together.
    std::string normal = std::filesystem::path(*options.mps).lexically_normal().string();
    while (normal.size() > 1 && normal.ends_with('/')) normal.pop_back();
    spelled.mps = normal;
    if (normal == sharing::kDefaultMpsPipeDirectory) {
      printWarning(normal +
                   " is CUDA's own pipe directory: a daemon there serves every CUDA process "
                   "of the host that sets no CUDA_MPS_PIPE_DIRECTORY, whole-GPU and time-sliced "
                   "ones too; give these GPUs' daemon a directory of its own");
    }
  }

  discovery::HostGpus host;
  try {
    host = listHostGpus(false);
  } catch (const discovery::DiscoveryError& e) {
    std::string message = std::string("cannot share ") +
                          (choice->all ? "the GPUs" : "GPU " + choice->gpu) +
                          ": share needs to know this host's GPUs, and neither NVML nor "
                          "nvidia-smi can list them: " +
                          e.what();
    for (const std::string& line : e.details()) message += '\n' + line;
    printError(message);
    return kDiscoveryFailed;
  }

  std::vector<sharing::Declaration> declarations;
  if (choice->all) {
    bool anyWhole = false;
    for (const discovery::GpuDevice& device : host.found.devices) {
      if (device.isMigInstance()) continue;
      anyWhole = true;
      if (device.migEnabled) {
        printNote(discovery::describeDevice(device) + " is in MIG mode: not shared");
        continue;
      }
      std::optional<sharing::Declaration> declaration =
          declarationFor(device, replicas, shareMiB, options, host);
      if (!declaration) return kDiscoveryFailed;
      declarations.push_back(std::move(*declaration));
    }
    if (declarations.empty()) {
      std::string message = anyWhole ? "cannot share any GPU: every GPU of this host is in MIG mode"
                                     : "cannot share any GPU: this host has none";
      for (const std::string& line : whatTheHostHas(host, false)) message += '\n' + line;
      printError(message);
      return kDiscoveryFailed;
    }
  } else {
    const discovery::GpuDevice* device = hostGpuOf(choice->gpu, host);
    if (device == nullptr) return kDiscoveryFailed;
    std::optional<sharing::Declaration> declaration =
        declarationFor(*device, replicas, shareMiB, options, host);
    if (!declaration) return kDiscoveryFailed;
    declarations.push_back(std::move(*declaration));
  }

  // One change for all of them: every GPU is declared, or (on an error) none.
  std::vector<std::optional<sharing::Declaration>> replaced(declarations.size());
  sharing::DeclarationsFile written;
  try {
    written = sharing::updateDeclarations(
        options.coordination.path, [&](std::vector<sharing::Declaration>& recorded) {
          const std::int64_t now = health::nowSeconds();
          for (std::size_t i = 0; i < declarations.size(); ++i) {
            sharing::Declaration& declaration = declarations[i];
            declaration.since = now;
            replaced[i].reset();
            std::erase_if(recorded, [&](const sharing::Declaration& old) {
              if (!sharing::names(old, declaration.gpu, declaration.uuid)) {
                return false;
              }
              replaced[i] = old;
              return true;
            });
            recorded.push_back(declaration);
          }
        });
  } catch (const store::StoreError& e) {
    printError(e.what());
    return kDiscoveryFailed;
  }
  for (const std::string& line : written.warnings) printWarning(line);
  const std::string sharingPath = sharing::sharingFileOf(options.coordination.path).path().string();
  if (options.format == OutputFormat::kJson) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < declarations.size(); ++i) {
      nlohmann::ordered_json entry = declarationJson(declarations[i]);
      entry["replaced"] = replaced[i] ? declarationJson(*replaced[i]) : nullptr;
      list.push_back(std::move(entry));
    }
    printChangeDocument(std::cout, options.coordination.path, sharingPath, true,
                        nlohmann::ordered_json{{"declared", std::move(list)}});
    return kSuccess;
  }
  printNote("recorded in " + sharingPath + ", beside the coordination file " +
            options.coordination.path);
  for (std::size_t i = 0; i < declarations.size(); ++i) {
    std::cout << "shared " << nameOf(declarations[i]) << ": " << describeShares(declarations[i])
              << (replaced[i] ? " (was " + describeShares(*replaced[i]) + ")" : "") << '\n';
  }
  return kSuccess;
}

namespace {

/// `unshare --stale`: every declaration of a GPU this host does not have, judged by the host's
/// index (sharing::isStale, UnitIndex::presence).
int runStaleUnshare(const UnshareOptions& options) {
  const std::string sharingPath = sharing::sharingFileOf(options.coordination.path).path().string();
  const auto document = [&](const std::vector<sharing::Declaration>& removed,
                            const std::optional<std::string>& cannotTell) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const sharing::Declaration& declaration : removed) {
      list.push_back(declarationJson(declaration));
    }
    nlohmann::ordered_json members{{"removed", std::move(list)}};
    if (cannotTell) members["cannot_tell"] = *cannotTell;
    printChangeDocument(std::cout, options.coordination.path, sharingPath, !removed.empty(),
                        members);
  };
  const HostLook look = lookAtHost();
  if (!look.coverage.whole()) {
    if (options.format == OutputFormat::kJson) document({}, look.coverage.cannotTell);
    printError("cannot tell which sharing declarations name a GPU this host no longer has: " +
               look.coverage.cannotTell + "; nothing was removed");
    return kDiscoveryFailed;
  }
  const discovery::UnitIndex host = discovery::UnitIndex::of(look.devices);
  std::vector<sharing::Declaration> removed;
  std::vector<std::string> warnings;
  try {
    // None: nothing is written.
    const sharing::DeclarationsFile read = sharing::readDeclarations(options.coordination.path);
    const bool any = std::any_of(read.parsed.declarations.begin(), read.parsed.declarations.end(),
                                 [&](const sharing::Declaration& declaration) {
                                   return sharing::isStale(declaration, host, look.coverage);
                                 });
    if (any) {
      removed = sharing::removeStaleDeclarations(options.coordination.path, host, look.coverage,
                                                 &warnings);
    } else {
      warnings = read.warnings;
    }
  } catch (const store::StoreError& e) {
    printError(e.what());
    return kDiscoveryFailed;
  }
  for (const std::string& line : warnings) printWarning(line);
  if (options.format == OutputFormat::kJson) {
    document(removed, std::nullopt);
    return kSuccess;
  }
  if (removed.empty()) {
    std::cout << "no sharing declaration names a GPU this host does not have\n";
    return kSuccess;
  }
  for (const sharing::Declaration& declaration : removed) {
    std::cout << "unshared " << strings::quoteForMessage(nameOf(declaration), std::string::npos)
              << ", which was " << describeShares(declaration) << ": this host does not have it\n";
  }
  return kSuccess;
}

}  // namespace

int runUnshare(const UnshareOptions& options) {
  if (options.stale == !options.gpu.empty()) {
    printError(options.stale ? "give --gpu or --stale, not both"
                             : "unshare needs --gpu ID|all or --stale");
    return kUsageError;
  }
  if (options.stale) return runStaleUnshare(options);
  const std::optional<GpuChoice> choice = gpuChoiceOf(options.gpu);
  if (!choice) return kUsageError;
  std::optional<std::string> gpu;
  std::optional<std::string> uuid;
  if (!choice->all) {
    // The GPU may be gone from the host (an operator cleans up): NVML, where it answers, only
    // turns a spelling into its GPU through the host's index (a UUID into its index, an index
    // into one with its UUID, which decides).
    gpu = choice->gpu;
    if (device::isUuid(*gpu)) uuid = gpu;
    const std::vector<discovery::GpuDevice> devices = nvmlDevicesOrNone();
    const discovery::UnitIndex index = discovery::UnitIndex::of(devices);
    if (const std::optional<discovery::UnitRef> unit = index.entry(*gpu).unit;
        unit && !index[*unit].isMigInstance()) {
      gpu = index[*unit].id;
      uuid = index[*unit].uuid;
    }
  }
  std::vector<sharing::Declaration> removed;
  std::vector<std::string> warnings;
  try {
    // Nothing to take out: nothing is written (no sharing file made for a GPU never shared).
    const sharing::DeclarationsFile read = sharing::readDeclarations(options.coordination.path);
    const bool any = std::any_of(read.parsed.declarations.begin(), read.parsed.declarations.end(),
                                 [&](const sharing::Declaration& declaration) {
                                   return !gpu || sharing::names(declaration, *gpu, uuid);
                                 });
    if (any)
      removed = sharing::removeDeclarations(options.coordination.path, gpu, uuid, &warnings);
    else
      warnings = read.warnings;
  } catch (const store::StoreError& e) {
    printError(e.what());
    return kDiscoveryFailed;
  }
  for (const std::string& line : warnings) printWarning(line);
  if (options.format == OutputFormat::kJson) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const sharing::Declaration& declaration : removed) {
      list.push_back(declarationJson(declaration));
    }
    printChangeDocument(std::cout, options.coordination.path,
                        sharing::sharingFileOf(options.coordination.path).path().string(),
                        !removed.empty(), nlohmann::ordered_json{{"removed", std::move(list)}});
    return kSuccess;
  }
  if (removed.empty()) {
    std::cout << (choice->all ? std::string("no GPU was declared shared")
                              : (device::isUuid(choice->gpu) ? "" : "GPU ") + choice->gpu +
                                    " was not declared shared")
              << '\n';
    return kSuccess;
  }
  for (const sharing::Declaration& declaration : removed) {
    std::cout << "unshared " << nameOf(declaration) << ", which was " << describeShares(declaration)
              << '\n';
  }
  return kSuccess;
}

}  // namespace flink::cli
