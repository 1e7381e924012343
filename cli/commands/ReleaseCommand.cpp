// `flink-gpu release`: removes records from the coordination file (coordination::releaseChecked,
// under its lock), selected by owner pid or by GPU. A record whose owner is known to run (by pid
// and start time, or by its held lease) is refused unless --force; one whose owner cannot be
// judged from here (another pid namespace, no lease) is released with a warning that says so.
#include "commands/ReleaseCommand.h"

#include <sys/types.h>

#include <algorithm>
#include <exception>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "Console.h"
#include "ExitCode.h"
#include "commands/ChangeDocument.h"
#include "commands/HostGpuListing.h"
#include "host/coordination/Coordination.h"
#include "host/enumeration/DeviceIdentifiers.h"
#include "host/enumeration/GpuEnumerator.h"
#include "host/enumeration/NvidiaSmi.h"  // DiscoveryError
#include "host/enumeration/NvmlEnumerator.h"
#include "host/enumeration/UnitIndex.h"
#include "util/Strings.h"

namespace flink::cli {
namespace {

/// "0", or "0 (GPU-…)" for a record that says its GPU's UUID (a container numbers from 0), quoted
/// as text from the file.
std::string recordedGpu(const coordination::Record& record) {
  std::string text = strings::quoteForMessage(record.gpu);
  if (record.uuid) text += " (" + strings::quoteForMessage(*record.uuid) + ")";
  return text;
}

/// Records in release's JSON document: each with its owner and its verdict.
nlohmann::ordered_json recordsJson(const std::vector<coordination::RecordStatus>& entries) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const coordination::RecordStatus& entry : entries) {
    list.push_back(nlohmann::ordered_json{
        {"gpu", entry.record.gpu},
        {"uuid", entry.record.uuid ? nlohmann::ordered_json(*entry.record.uuid)
                                   : nlohmann::ordered_json(nullptr)},
        {"owner_pid", entry.record.owner.pid},
        {"owner_state", std::string(liveness::livenessName(entry.liveness))}});
  }
  return list;
}

/// release's JSON document: the records released and refused.
void printReleased(const ReleaseOptions& options,
                   const std::vector<coordination::RecordStatus>& released,
                   const std::vector<coordination::RecordStatus>& refused) {
  printChangeDocument(std::cout, options.coordination.path, options.coordination.path,
                      !released.empty(),
                      nlohmann::ordered_json{{"released", recordsJson(released)},
                                             {"refused", recordsJson(refused)}});
}

/// What a release's text says of many records: `line` of each of the first 20 (those `line`
/// gives an empty text for are skipped), then how many more there are; a full file holds hundreds
/// of thousands, which `--format json` lists.
std::vector<std::string> shownLines(
    const std::vector<coordination::RecordStatus>& entries,
    const std::function<std::string(const coordination::RecordStatus&)>& line) {
  constexpr std::size_t kShown = 20;
  std::vector<std::string> lines;
  std::size_t more = 0;
  for (const coordination::RecordStatus& entry : entries) {
    std::string text = line(entry);
    if (text.empty()) continue;
    if (lines.size() < kShown) {
      lines.push_back(std::move(text));
    } else {
      ++more;
    }
  }
  if (more > 0) {
    lines.push_back("... and " + std::to_string(more) +
                    " more like these (`--format json` lists every record)");
  }
  return lines;
}

/// The text of what --gone and --stale released: "released GPU 0 (owner pid 12, gone)" and `why`,
/// for the first records (shownLines).
void printReleasedLines(const std::vector<coordination::RecordStatus>& released,
                        const std::string& why) {
  for (const std::string& line :
       shownLines(released, [&why](const coordination::RecordStatus& entry) {
         return "released GPU " + recordedGpu(entry.record) + " (owner pid " +
                std::to_string(entry.record.owner.pid) + ", " +
                std::string(liveness::livenessName(entry.liveness)) + ")" + why;
       })) {
    std::cout << line << '\n';
  }
}

}  // namespace

int runJunkRelease(const ReleaseOptions& options) {
  // Only the lines shown are kept: a file of up to 256 MiB may hold millions.
  constexpr std::size_t kShown = 20;
  coordination::ReleasedJunk removed;
  try {
    removed = coordination::releaseJunk(options.coordination.path, kShown);
  } catch (const store::StoreError& e) {
    printError(e.what());
    return kDiscoveryFailed;
  }
  if (options.format == OutputFormat::kJson) {
    nlohmann::ordered_json lines = nlohmann::ordered_json::array();
    for (const store::JunkLine& line : removed.lines) {
      lines.push_back(nlohmann::ordered_json{{"line", line.lineNumber}, {"text", line.text}});
    }
    // `lines`: the first 20 of them.
    printChangeDocument(
        std::cout, options.coordination.path, options.coordination.path, removed.count > 0,
        nlohmann::ordered_json{{"removed_lines", removed.count}, {"lines", std::move(lines)}});
    return kSuccess;
  }
  if (removed.count == 0) {
    std::cout << "no line to remove: every line is a record (coordination file "
              << options.coordination.path << ")\n";
    return kSuccess;
  }
  for (const store::JunkLine& line : removed.lines) {
    std::cout << "removed line " << line.lineNumber << ": '" << strings::quoteForMessage(line.text)
              << "'\n";
  }
  if (removed.count > kShown) std::cout << "... and " << removed.count - kShown << " more\n";
  std::cout << "removed " << removed.count << " line(s) that were not records\n";
  return kSuccess;
}

/// --gone: every record whose owner is known to be gone; one that cannot be judged stays.
int runGoneRelease(const ReleaseOptions& options) {
  std::vector<coordination::RecordStatus> removed;
  try {
    removed = coordination::releaseGone(options.coordination.path);
  } catch (const store::StoreError& e) {
    printError(e.what());
    return kDiscoveryFailed;
  }
  if (options.format == OutputFormat::kJson) {
    printReleased(options, removed, {});
    return kSuccess;
  }
  printReleasedLines(removed, "");
  std::cout << "removed " << removed.size()
            << " record(s) of owners that are gone (coordination file " << options.coordination.path
            << ")\n";
  return kSuccess;
}

/// The warnings after records were released: an owner that still runs (--force), one that
/// could not be judged from here.
void warnAboutReleased(const std::vector<coordination::RecordStatus>& released) {
  const auto warningOf = [](const coordination::RecordStatus& entry) -> std::string {
    const std::string gpu = recordedGpu(entry.record);
    if (coordination::knownToRun(entry.liveness) && entry.record.lease) {
      return "process " + std::to_string(entry.record.owner.pid) +
             " is still running and may still be using GPU " + gpu +
             " (--force); while its lease is held (by the process or what it started), no "
             "worker gets the GPU";
    }
    if (coordination::knownToRun(entry.liveness)) {
      return "process " + std::to_string(entry.record.owner.pid) +
             " is still running and may still be using GPU " + gpu +
             " (--force); the next worker may get it too";
    }
    if (entry.liveness == coordination::Liveness::kUnjudgeable ||
        entry.liveness == coordination::Liveness::kLeaseMissing) {
      return "process " + std::to_string(entry.record.owner.pid) + " of GPU " + gpu +
             " could not be judged from here (" +
             (entry.otherPidNamespace
                  ? "it is of another pid namespace, " +
                        std::to_string(entry.record.owner.pidNamespace.value_or(0)) + ","
                  : std::string("no start time was recorded,")) +
             (entry.record.lease ? " and its lease file is missing" : " and it holds no lease") +
             "): if it still runs there, it may still be using the GPU";
    }
    return {};
  };
  for (const std::string& line : shownLines(released, warningOf)) printWarning(line);
}

/// --stale: every record of a GPU this host does not have, judged by the host's index
/// (UnitIndex::presence) under the file's lock; a running owner's is kept, with an error.
int runStaleRelease(const ReleaseOptions& options) {
  const HostLook look = lookAtHost();
  if (!look.coverage.whole()) {
    if (options.format == OutputFormat::kJson) {
      printChangeDocument(std::cout, options.coordination.path, options.coordination.path, false,
                          nlohmann::ordered_json{{"released", nlohmann::ordered_json::array()},
                                                 {"refused", nlohmann::ordered_json::array()},
                                                 {"cannot_tell", look.coverage.cannotTell}});
    }
    printError("cannot tell which records name a GPU this host no longer has: " +
               look.coverage.cannotTell + "; nothing was removed");
    return kDiscoveryFailed;
  }
  const discovery::UnitIndex host = discovery::UnitIndex::of(look.devices);
  coordination::Released result;
  try {
    result = coordination::releaseStale(
        options.coordination.path, [&](const coordination::Record& record) {
          return host.presence(record.gpu, record.uuid, look.coverage) ==
                 discovery::Presence::kNotOnThisHost;
        });
  } catch (const store::StoreError& e) {
    printError(e.what());
    return kDiscoveryFailed;
  }
  if (options.format == OutputFormat::kJson) {
    printReleased(options, result.released, result.refused);
  } else {
    printReleasedLines(result.released, ": this host does not have it");
    if (result.released.empty() && result.refused.empty()) {
      std::cout << "no record names a GPU this host does not have (coordination file "
                << options.coordination.path << ")\n";
    } else if (!result.released.empty()) {
      std::cout << "removed " << result.released.size()
                << " record(s) of GPUs this host does not have (coordination file "
                << options.coordination.path << ")\n";
    }
  }
  warnAboutReleased(result.released);
  if (result.refused.empty()) return kSuccess;
  printError(strings::join(
      shownLines(result.refused,
                 [](const coordination::RecordStatus& entry) {
                   const std::string pid = std::to_string(entry.record.owner.pid);
                   return "kept the record of process " + pid + " for GPU " +
                          recordedGpu(entry.record) +
                          ", which this host does not have: the process, or what it started, "
                          "still runs and may still use what it holds; `flink-gpu release "
                          "--owner " +
                          pid + "` removes its records once it no longer does";
                 }),
      "\n"));
  return kDiscoveryFailed;
}

int runRelease(const ReleaseOptions& options) {
  const int chosen = (options.owner ? 1 : 0) + (options.gpu ? 1 : 0) + (options.junk ? 1 : 0) +
                     (options.gone ? 1 : 0) + (options.stale ? 1 : 0);
  if (chosen != 1) {
    printError(chosen > 1
                   ? "give one of --owner, --gpu, --gone, --stale and --junk, not several"
                   : "nothing to release: give --owner PID, --gpu GPU, --gone, --stale or --junk");
    return kUsageError;
  }
  if (options.stale && options.force) {
    printError(
        "--stale never removes the record of an owner that runs, --force or not: give "
        "--owner PID --force for that");
    return kUsageError;
  }
  if (options.junk) return runJunkRelease(options);
  if (options.gone) return runGoneRelease(options);
  if (options.stale) return runStaleRelease(options);

  std::function<bool(const coordination::Record&)> matches;
  std::string what;
  if (options.owner) {
    if (*options.owner <= 0 || *options.owner > std::numeric_limits<pid_t>::max()) {
      printError("invalid --owner " + std::to_string(*options.owner) +
                 ": expected a process id (a positive integer)");
      return kUsageError;
    }
    const auto pid = static_cast<pid_t>(*options.owner);
    matches = [pid](const coordination::Record& record) { return record.owner.pid == pid; };
    what = "no GPU is held by process " + std::to_string(pid);
  } else {
    // The unit, through the host's index (NVML's devices where it answers: a container records
    // the host's GPU 2 as its GPU 0, with its UUID), and the records that name it by its rule.
    const std::optional<std::string> parsed = discovery::parseOneGpu(*options.gpu);
    if (!parsed) {
      printError("invalid --gpu '" + strings::quoteForMessage(*options.gpu) +
                 "': expected one GPU, an index (e.g. 0), a GPU-/MIG- UUID, a PCI bus id, or an "
                 "AMD or Intel unit as recorded (amd:<bus id>, intel:<bus id>[/<tile>])");
      return kUsageError;
    }
    std::vector<discovery::GpuDevice> devices;
    try {
      devices = discovery::NvmlEnumerator().enumerate().devices;
    } catch (const std::exception&) {
      // No NVML: the records are matched against the GPU as given.
    }
    auto index = std::make_shared<discovery::UnitIndex>(discovery::UnitIndex::of(devices));
    const std::string& given = *parsed;
    const bool busId = discovery::canonicalPciBusId(given).has_value();
    const discovery::EntryNaming named = index->entry(given);
    if (!named.ambiguous.empty()) {
      std::string candidates;
      for (const discovery::UnitRef ref : named.ambiguous) {
        candidates += (candidates.empty() ? "" : ", ") + (*index)[ref].id;
      }
      printError("invalid --gpu '" + strings::quoteForMessage(*options.gpu) +
                 "': it begins the UUID of several GPUs (" + candidates + "); give a whole UUID");
      return kUsageError;
    }
    if (!named.unit && busId) {
      printError("no GPU of this host has the PCI bus id " + given +
                 (devices.empty() ? " (NVML does not answer here; give an index or a UUID)" : ""));
      return kDiscoveryFailed;
    }
    discovery::UnitRef unit = 0;
    if (named.unit) {
      unit = *named.unit;
    } else {
      // Not one of NVML's GPUs (or no NVML): the records are matched against it as given.
      discovery::Unit asGiven;
      asGiven.id = given;
      asGiven.vendorUnit = device::isVendorUnitName(given);
      if (device::isUuid(given) && !given.starts_with("MIG-GPU-")) asGiven.uuid = given;
      unit = index->add(std::move(asGiven));
    }
    const std::string gpu = (*index)[unit].id;
    matches = [index, unit](const coordination::Record& record) {
      const std::vector<discovery::UnitRef> refs = index->namedByRecord(record.gpu, record.uuid);
      return std::find(refs.begin(), refs.end(), unit) != refs.end();
    };
    what = "GPU " + gpu + " is not held";
  }

  coordination::Released result;
  try {
    result = coordination::releaseChecked(options.coordination.path, matches, options.force);
  } catch (const store::StoreError& e) {
    printError(e.what());
    return kDiscoveryFailed;
  }

  if (options.format == OutputFormat::kJson)
    printReleased(options, result.released, result.refused);
  if (!result.refused.empty()) {
    std::string message =
        "refusing to release: " +
        strings::join(
            shownLines(result.refused,
                       [](const coordination::RecordStatus& entry) {
                         return "GPU " + recordedGpu(entry.record) + " is held by process " +
                                std::to_string(entry.record.owner.pid) + ", which is " +
                                (entry.liveness != coordination::Liveness::kLeaseHeld ? "running"
                                 : entry.otherPidNamespace
                                     ? "of another pid namespace and holds its lease"
                                     : "gone but whose lease is held (a process it "
                                       "started still runs)");
                       }),
            "; ");
    message +=
        "\nnothing was released: releasing a running worker's GPU hands it to the next worker "
        "as well; `flink-gpu release --force` releases it anyway";
    printError(message);
    return kDiscoveryFailed;
  }
  if (result.released.empty()) {
    const std::string line = what + " (coordination file " + options.coordination.path + ")";
    if (!options.owner) {
      if (options.format != OutputFormat::kJson) std::cout << line << '\n';
      return kSuccess;
    }
    printError(line + ": nothing was released");
    return kDiscoveryFailed;
  }
  if (options.format != OutputFormat::kJson) {
    for (const std::string& line :
         shownLines(result.released, [](const coordination::RecordStatus& entry) {
           return "released GPU " + recordedGpu(entry.record) + " (owner pid " +
                  std::to_string(entry.record.owner.pid) + ")";
         })) {
      std::cout << line << '\n';
    }
  }
  warnAboutReleased(result.released);
  return kSuccess;
}

}  // namespace flink::cli
