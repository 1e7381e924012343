// `flink-gpu drain`, `undrain`, `check` and `watch` (see HealthCommands.h).
#include "commands/HealthCommands.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_set>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "Console.h"
#include "ExitCode.h"
#include "Systemd.h"
#include "commands/ChangeDocument.h"
#include "commands/HostGpuListing.h"
#include "commands/JsonObjectPrinter.h"
#include "host/coordination/Coordination.h"
#include "host/enumeration/DeviceIdentifiers.h"
#include "host/enumeration/GpuEnumerator.h"
#include "host/enumeration/HostGpus.h"
#include "host/enumeration/KernelGpus.h"
#include "host/enumeration/UnitIndex.h"
#include "host/enumeration/VisibleDevices.h"
#include "host/health/HealthRecords.h"
#include "host/health/HostHealth.h"
#include "host/health/HostView.h"
#include "host/health/Watch.h"
#include "host/nvml/Nvml.h"
#include "host/sharing/SharingDeclarations.h"
#include "host/sharing/SharingFacts.h"
#include "host/store/LockedFile.h"
#include "host/store/StoreError.h"
#include "host/usage/GpuUse.h"
#include "host/usage/OtherAllocators.h"
#include "util/FileOwnership.h"
#include "util/Strings.h"

namespace flink::cli {
namespace {

/// For quoteForMessage: the whole text, however long (a reason is shown whole).
constexpr std::size_t kWholeText = std::string::npos;

/// The unit `--gpu` names, with the whole GPU's UUID where NVML tells: a GPU-… UUID becomes its
/// index, so that the record reads as discovery hands the GPU out.
struct Unit {
  std::string gpu;
  std::optional<std::string> uuid;
};

/// The one device identifier or PCI bus id `--gpu` gives (canonical: "01" is "1"); nullopt after
/// printing the usage error.
std::optional<std::string> gpuOption(const std::string& text) {
  std::optional<std::string> gpu = discovery::parseOneGpu(text);
  if (!gpu) {
    printError("invalid --gpu '" + strings::quoteForMessage(text) +
               "': expected one GPU, an index (e.g. 0), a GPU-/MIG- UUID or a PCI bus id");
  }
  return gpu;
}

/// The unit for undrain, which must work for a GPU the host no longer has (an operator cleans up
/// after a GPU was removed): NVML, where it answers, only turns a spelling into its unit (through
/// the host's index: a UUID into its index).
std::optional<Unit> unitOf(const std::string& text) {
  const std::optional<std::string> gpu = gpuOption(text);
  if (!gpu) return std::nullopt;
  if (device::isMigUuid(*gpu)) return Unit{*gpu, std::nullopt};
  const std::vector<discovery::GpuDevice> devices = nvmlOrKernelDevices();
  const discovery::UnitIndex index = discovery::UnitIndex::of(devices);
  const discovery::EntryNaming named = index.entry(*gpu);
  if (named.unit && !index[*named.unit].isMigInstance()) {
    return Unit{index[*named.unit].id, index[*named.unit].uuid};
  }
  return Unit{*gpu, device::isUuid(*gpu) ? std::optional<std::string>(*gpu) : std::nullopt};
}

std::string nameOf(const Unit& unit) {
  return "GPU " + unit.gpu + (unit.uuid && *unit.uuid != unit.gpu ? " (" + *unit.uuid + ")" : "");
}

/// "GPU 0 (GPU-…)", "MIG instance MIG-… of GPU 2": a unit of `index` for messages.
std::string describeUnit(const discovery::UnitIndex& index, discovery::UnitRef ref) {
  const discovery::Unit& unit = index[ref];
  if (unit.parent) return "MIG instance " + unit.id + " of GPU " + index[*unit.parent].id;
  return "GPU " + unit.id + (unit.uuid ? " (" + *unit.uuid + ")" : "");
}

/// The unit of this host that `gpu` names for drain, through the host's index: a whole GPU by
/// index, whole UUID or PCI bus id, or a MIG instance the host has by its UUID; a GPU that NVML
/// counts but left out of the enumeration (lost, or denied by a cgroup) too, since draining it
/// keeps it out once it answers again. A drain is written whole: a UUID prefix is refused.
/// nullopt after printing why it names none.
std::optional<Unit> hostUnitOf(const std::string& gpu, const discovery::HostGpus& host) {
  const bool mig = device::isMigUuid(gpu);
  discovery::UnitIndex index = discovery::UnitIndex::of(host.found.devices);
  discovery::EntryNaming named = index.entry(gpu);
  if (!named.unit && named.ambiguous.empty() && !mig &&
      host.source == discovery::HostGpuSource::kNvml) {
    const health::NvmlProbe probe = health::probeNvml();
    if (probe.usable) {
      for (const health::GpuProbe& counted : probe.gpus) {
        if (!index.find(std::to_string(counted.index))) {
          index.add({std::to_string(counted.index), counted.uuid});
        }
      }
      named = index.entry(gpu);
    }
  }
  std::string cause;
  const std::string canonical = device::canonicalDeviceIdentifier(gpu);
  if (named.unit) {
    const discovery::Unit& unit = index[*named.unit];
    const bool prefix =
        device::isUuid(canonical) && !canonical.starts_with("MIG-GPU-") && unit.uuid != canonical;
    if (!prefix) return Unit{unit.id, unit.isMigInstance() ? std::nullopt : unit.uuid};
    cause = "cannot drain " + gpu + ": it is only the start of the UUID of " +
            describeUnit(index, *named.unit) + ": give the whole UUID" +
            (mig ? "" : " or the index");
  } else if (!named.ambiguous.empty()) {
    std::string candidates;
    for (const discovery::UnitRef ref : named.ambiguous) {
      candidates += (candidates.empty() ? "" : " or ") + describeUnit(index, ref);
    }
    cause = "cannot drain " + gpu + ", which is ambiguous: it could mean " + candidates +
            ": give a whole UUID" + (mig ? "" : " or an index");
  } else if (device::isUuid(canonical)) {
    cause = "cannot drain " + gpu + ": no " + (mig ? "MIG instance" : "GPU") +
            " of this host has this UUID";
  } else {
    cause = "cannot drain GPU " + gpu + ": this host has no GPU " + gpu;
  }
  std::string message = cause;
  for (const std::string& line : whatTheHostHas(host, mig)) message += '\n' + line;
  printError(message);
  return std::nullopt;
}

}  // namespace

// ---- drain, undrain ----

/// A reason is shown in one line of `check` (which NHC and Slurm read line by line) and of the
/// discovery's notes: a control character in it (a newline) would start a line of its own.
bool validReason(const std::string& reason) {
  const bool control = std::any_of(reason.begin(), reason.end(), [](char c) {
    return (static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f;
  });
  if (control) {
    printError("invalid --reason '" + strings::quoteForMessage(reason) +
               "': it must be one line, without control characters but tabs");
  }
  return !control;
}

int runDrain(const DrainOptions& options) {
  if (!validReason(options.reason)) return kUsageError;
  const std::optional<std::string> gpu = gpuOption(options.gpu);
  if (!gpu) return kUsageError;
  discovery::HostGpus host;
  try {
    host = listHostGpus(device::isMigUuid(*gpu), true);
  } catch (const discovery::DiscoveryError& e) {
    // undrain needs no such look, and still works on this host.
    std::string message = "cannot drain GPU " + *gpu +
                          ": drain needs to know this host's GPUs, so as never to record one it "
                          "does not have, and neither NVML nor nvidia-smi can list them: " +
                          e.what();
    for (const std::string& line : e.details()) message += '\n' + line;
    printError(message);
    return kDiscoveryFailed;
  }
  const std::optional<Unit> unit = hostUnitOf(*gpu, host);
  if (!unit) return kDiscoveryFailed;

  health::HealthRecord drain;
  drain.kind = health::RecordKind::kDrained;
  drain.gpu = unit->gpu;
  drain.uuid = unit->uuid;
  drain.uid = ::getuid();
  drain.reason = options.reason;
  // A drain of a GPU already drained keeps the time it was taken out; its reason (and who gave
  // it) is the new one.
  std::optional<health::HealthRecord> previous;
  health::HealthFile written;
  try {
    // The unit made once for every record it is asked of (health::names' rule).
    const discovery::OneUnit named(unit->gpu, unit->uuid);
    written = health::updateHealth(
        options.coordination.path, [&](std::vector<health::HealthRecord>& records) {
          previous.reset();
          for (const health::HealthRecord& record : records) {
            if (record.kind == health::RecordKind::kDrained &&
                named.namedBy(record.gpu, record.uuid) &&
                (!previous || record.since < previous->since)) {
              previous = record;
            }
          }
          std::erase_if(records, [&](const health::HealthRecord& record) {
            return record.kind == health::RecordKind::kDrained &&
                   named.namedBy(record.gpu, record.uuid);
          });
          drain.since = previous ? previous->since : health::nowSeconds();
          records.push_back(drain);
        });
  } catch (const store::StoreError& e) {
    printError(e.what());
    return kDiscoveryFailed;
  }
  for (const std::string& line : written.warnings) printWarning(line);
  const std::string healthPath = health::healthFileOf(options.coordination.path).path().string();
  if (options.format == OutputFormat::kJson) {
    nlohmann::ordered_json members;
    members["gpu"] = unit->gpu;
    members["uuid"] = unit->uuid ? nlohmann::ordered_json(*unit->uuid) : nullptr;
    members["since"] = drain.since;
    members["reason"] = options.reason;
    members["already_drained"] = previous.has_value();
    // Drained before, by the same user for the same reason: the same record, nothing written.
    const bool changed =
        !previous || previous->reason != options.reason || previous->uid != drain.uid;
    printChangeDocument(std::cout, options.coordination.path, healthPath, changed, members);
    return kSuccess;
  }
  printNote("recorded in " + healthPath + ", beside the coordination file " +
            options.coordination.path);
  if (previous) {
    std::cout << nameOf(*unit) << " was already drained since " << health::isoTime(previous->since)
              << (previous->uid ? " by uid " + health::describeUid(*previous->uid) : "")
              << (previous->reason.empty()
                      ? std::string(", without a reason")
                      : ": " + strings::quoteForMessage(previous->reason, kWholeText))
              << (options.reason.empty() ? std::string("; now without a reason")
                                         : "; the reason is now " +
                                               strings::quoteForMessage(options.reason, kWholeText))
              << '\n';
    return kSuccess;
  }
  std::cout << "drained " << nameOf(*unit)
            << ": new allocations skip it; owners that hold it keep it\n";
  return kSuccess;
}

namespace {

/// undrain's members of its JSON document: the GPU, and what it cleared.
nlohmann::ordered_json undrainMembers(const Unit& unit,
                                      const std::vector<health::HealthRecord>& cleared) {
  nlohmann::ordered_json members;
  members["gpu"] = unit.gpu;
  members["uuid"] = unit.uuid ? nlohmann::ordered_json(*unit.uuid) : nullptr;
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const health::HealthRecord& record : cleared) {
    nlohmann::ordered_json entry;
    entry["kind"] = std::string(health::kindName(record.kind));
    entry["since"] = record.since;
    entry["xid"] = record.xid ? nlohmann::ordered_json(*record.xid) : nullptr;
    entry["reason"] = record.reason;
    list.push_back(std::move(entry));
  }
  members["cleared"] = std::move(list);
  return members;
}

}  // namespace

namespace {

/// `undrain --stale`: every drain and verdict of a GPU this host does not have, judged by the
/// host's index (UnitIndex::presence); no re-admission is recorded for a GPU that is not here.
int runStaleUndrain(const DrainOptions& options) {
  using Json = nlohmann::ordered_json;
  const auto document = [&](const std::string& file,
                            const std::vector<health::HealthRecord>& cleared,
                            const std::optional<std::string>& cannotTell) {
    Json list = Json::array();
    for (const health::HealthRecord& record : cleared) {
      Json entry;
      entry["kind"] = std::string(health::kindName(record.kind));
      entry["since"] = record.since;
      entry["xid"] = record.xid ? Json(*record.xid) : Json(nullptr);
      entry["reason"] = record.reason;
      entry["gpu"] = record.gpu;
      entry["uuid"] = record.uuid ? Json(*record.uuid) : Json(nullptr);
      list.push_back(std::move(entry));
    }
    Json members{{"gpu", nullptr}, {"uuid", nullptr}, {"cleared", std::move(list)}};
    if (cannotTell) members["cannot_tell"] = *cannotTell;
    printChangeDocument(std::cout, options.coordination.path, file, !cleared.empty(), members);
  };
  const std::string healthPath = health::healthFileOf(options.coordination.path).path().string();
  const HostLook look = lookAtHost();
  if (!look.coverage.whole()) {
    if (options.format == OutputFormat::kJson) document(healthPath, {}, look.coverage.cannotTell);
    printError("cannot tell which drains and verdicts name a GPU this host no longer has: " +
               look.coverage.cannotTell + "; nothing was removed");
    return kDiscoveryFailed;
  }
  const discovery::UnitIndex host = discovery::UnitIndex::of(look.devices);
  const auto stale = [&](const health::HealthRecord& record) {
    return record.kind != health::RecordKind::kReadmitted &&
           host.presence(record.gpu, record.uuid, look.coverage) ==
               discovery::Presence::kNotOnThisHost;
  };
  std::vector<health::HealthRecord> cleared;
  health::HealthFile written;
  try {
    // None: nothing is written.
    const health::HealthFile read = health::readHealth(options.coordination.path);
    if (std::none_of(read.parsed.records.begin(), read.parsed.records.end(), stale)) {
      for (const std::string& line : read.warnings) printWarning(line);
      if (options.format == OutputFormat::kJson) {
        document(read.path.string(), {}, std::nullopt);
      } else {
        std::cout << "no drain or verdict names a GPU this host does not have\n";
      }
      return kSuccess;
    }
    written = health::updateHealth(options.coordination.path,
                                   [&](std::vector<health::HealthRecord>& records) {
                                     cleared.clear();
                                     for (const health::HealthRecord& record : records) {
                                       if (stale(record)) cleared.push_back(record);
                                     }
                                     std::erase_if(records, stale);
                                   });
  } catch (const store::StoreError& e) {
    printError(e.what());
    return kDiscoveryFailed;
  }
  for (const std::string& line : written.warnings) printWarning(line);
  if (options.format == OutputFormat::kJson) {
    document(written.path.string(), cleared, std::nullopt);
    return kSuccess;
  }
  if (cleared.empty()) {
    std::cout << "no drain or verdict names a GPU this host does not have\n";
    return kSuccess;
  }
  printNote("recorded in " + written.path.string() + ", beside the coordination file " +
            options.coordination.path);
  for (const health::HealthRecord& record : cleared) {
    std::cout << "removed " << health::kindName(record.kind) << " of "
              << strings::quoteForMessage(nameOf(Unit{record.gpu, record.uuid}), kWholeText)
              << " (since " << health::isoTime(record.since)
              << (record.xid ? ", Xid " + std::to_string(*record.xid) : "")
              << (record.reason.empty()
                      ? std::string()
                      : ": " + strings::quoteForMessage(record.reason, kWholeText))
              << "): this host does not have it\n";
  }
  return kSuccess;
}

}  // namespace

int runUndrain(const DrainOptions& options) {
  if (options.stale == !options.gpu.empty()) {
    printError(options.stale ? "give --gpu or --stale, not both"
                             : "undrain needs --gpu GPU or --stale");
    return kUsageError;
  }
  if (!validReason(options.reason)) return kUsageError;
  if (options.stale) return runStaleUndrain(options);
  const std::optional<Unit> unit = unitOf(options.gpu);
  if (!unit) return kUsageError;
  std::vector<health::HealthRecord> cleared;
  health::HealthFile written;
  try {
    const discovery::OneUnit named(unit->gpu, unit->uuid);
    const auto clears = [&](const health::HealthRecord& record) {
      return record.kind != health::RecordKind::kReadmitted &&
             named.namedBy(record.gpu, record.uuid);
    };
    // Nothing to clear: nothing is written (no `readmitted` line for a GPU never taken out).
    const health::HealthFile read = health::readHealth(options.coordination.path);
    if (std::none_of(read.parsed.records.begin(), read.parsed.records.end(), clears)) {
      for (const std::string& line : read.warnings) printWarning(line);
      if (options.format == OutputFormat::kJson) {
        printChangeDocument(std::cout, options.coordination.path, read.path.string(), false,
                            undrainMembers(*unit, {}));
        return kSuccess;
      }
      std::cout << nameOf(*unit) << " was neither drained nor unhealthy: nothing to do\n";
      return kSuccess;
    }
    written = health::updateHealth(
        options.coordination.path, [&](std::vector<health::HealthRecord>& records) {
          cleared.clear();
          for (const health::HealthRecord& record : records) {
            if (clears(record)) cleared.push_back(record);
          }
          // Drained or unhealthy since the look above? Else leave the file as it is.
          if (cleared.empty()) return;
          // An older re-admission is replaced by this one.
          std::erase_if(records, [&](const health::HealthRecord& record) {
            return named.namedBy(record.gpu, record.uuid);
          });
          health::HealthRecord readmitted;
          readmitted.kind = health::RecordKind::kReadmitted;
          readmitted.gpu = unit->gpu;
          readmitted.uuid = unit->uuid;
          readmitted.since = health::nowSeconds();
          readmitted.uid = ::getuid();
          readmitted.reason = options.reason;
          records.push_back(readmitted);
        });
  } catch (const store::StoreError& e) {
    printError(e.what());
    return kDiscoveryFailed;
  }
  for (const std::string& line : written.warnings) printWarning(line);
  if (options.format == OutputFormat::kJson) {
    printChangeDocument(std::cout, options.coordination.path, written.path.string(),
                        !cleared.empty(), undrainMembers(*unit, cleared));
    return kSuccess;
  }
  if (cleared.empty()) {
    std::cout << nameOf(*unit) << " was neither drained nor unhealthy: nothing to do\n";
    return kSuccess;
  }
  printNote("recorded in " + written.path.string() + ", beside the coordination file " +
            options.coordination.path);
  for (const health::HealthRecord& record : cleared) {
    std::cout << "cleared " << health::kindName(record.kind) << " of " << nameOf(*unit)
              << " (since " << health::isoTime(record.since)
              << (record.xid ? ", Xid " + std::to_string(*record.xid) : "")
              << (record.reason.empty() ? "" : ": " + record.reason) << ")\n";
  }
  std::cout << nameOf(*unit) << " is handed out again\n";
  return kSuccess;
}

// ---- check ----

namespace {

struct Finding {
  std::string kind;
  std::optional<std::string> gpu;
  std::string text;
  /// A GPU's problem: what it is (health::causeWord), so that a program tells a row-remap
  /// problem from an Xid verdict without reading the text.
  std::optional<std::string> cause = std::nullopt;
};

/// The coordination file's own problems: its type, whether this user may write it.
void checkCoordinationFile(const std::string& file, std::vector<Finding>& problems) {
  struct stat info {};
  if (::lstat(file.c_str(), &info) != 0) {
    if (errno != ENOENT) {
      problems.push_back(
          {"coordination", std::nullopt,
           "coordination file " + file + " cannot be examined: " + std::strerror(errno)});
      return;
    }
    // Missing: the first allocation creates it, if this user may create files there.
    const std::filesystem::path parent = std::filesystem::path(file).parent_path();
    if (::access(parent.empty() ? "." : parent.c_str(), W_OK | X_OK) != 0) {
      const int error = errno;
      problems.push_back({"coordination", std::nullopt,
                          "coordination file " + file + " does not exist and cannot be created" +
                              (error == ENOENT || error == ENOTDIR
                                   ? ": " + files::whyCannotOpen(file, error)
                                   : " by this user (uid " + std::to_string(::getuid()) + ")")});
    }
    return;
  }
  if (S_ISLNK(info.st_mode) || !S_ISREG(info.st_mode)) {
    problems.push_back({"coordination", std::nullopt,
                        "coordination file " + file + " is not a regular file" +
                            (S_ISLNK(info.st_mode) ? " (a symlink)" : "")});
    return;
  }
  // What every allocation would refuse (as root: another user's file in a sticky folder).
  if (const std::optional<std::string> refusal = store::refusalOf(file, info, true)) {
    problems.push_back(
        {"coordination", std::nullopt, "coordination file " + file + ": " + *refusal});
    return;
  }
  if (::access(file.c_str(), R_OK | W_OK) != 0) {
    problems.push_back({"coordination", std::nullopt,
                        "coordination file " + file + " is not writable by this user (uid " +
                            std::to_string(::getuid()) + ")"});
  }
}

/// Whether a worker ever wrote `file`: it exists and is not empty.
bool everWritten(const std::string& file) {
  std::error_code error;
  return std::filesystem::file_size(file, error) > 0 && !error;
}

/// The classic silent mistake: a check (and drains, shares) of a file no worker uses, while the
/// file the Flink configuration names is the one in use. Said as a note.
void noteAConfiguredFileInUse(const CoordinationFileOptions& coordination,
                              std::vector<Finding>& notes) {
  if (everWritten(coordination.path)) return;
  for (const NamedCoordinationFile& named : coordinationFilesOfTheHost(coordination.flinkConfig)) {
    if (named.path == std::filesystem::path(coordination.path) ||
        !everWritten(named.path.string())) {
      continue;
    }
    notes.push_back({"coordination", std::nullopt,
                     "coordination file " + coordination.path +
                         " has never been written by a worker, but " + named.path.string() +
                         ", which " + named.where + " names, has: give --coordination-file " +
                         named.path.string() + " or --config to check the file in use"});
    return;
  }
}

/// A whole GPU that no declaration names (`declared`, by UnitRef: declarationsOf) but that is
/// set up for sharing: EXCLUSIVE_PROCESS compute mode, or an MPS control daemon serving it. From
/// what viewHost's probe and judgeUse already read of NVML (host.use): no session of its own.
void noteUndeclaredSharing(const HostView& host,
                           const std::vector<const sharing::Declaration*>& declared,
                           std::vector<Finding>& notes) {
  for (std::size_t i = 0; i < host.gpus.size(); ++i) {
    const GpuView& view = host.gpus[i];
    if (view.isMigInstance || !view.listedByNvml || declared[host.refs[i]] != nullptr) continue;
    sharing::GpuSharingFacts facts;
    facts.gpu = view.gpu;
    facts.uuid = view.uuid;
    facts.exclusiveProcess = view.computeMode == nvml::ComputeMode::kExclusiveProcess;
    const auto use =
        std::find_if(host.use.begin(), host.use.end(),
                     [&](const usage::UnitUse& unit) { return unit.unit == view.gpu; });
    if (use != host.use.end()) facts.mps = sharing::mpsSignsOf(*use);
    for (sharing::SharingNote& note : sharing::undeclaredSharingNotes(facts)) {
      notes.push_back(
          {std::string(sharing::sharingNoteWord(note.kind)), note.gpu, std::move(note.text)});
    }
  }
}

}  // namespace

int runCheck(const CheckOptions& options) {
  if (options.expect && *options.expect < 0) {
    printError("invalid --expect " + std::to_string(*options.expect) +
               ": the number of GPUs cannot be negative");
    return kUsageError;
  }
  std::vector<Finding> problems;
  std::vector<Finding> notes;

  coordination::Status status;
  checkCoordinationFile(options.coordination.path, problems);
  try {
    status = coordination::snapshotStatus(options.coordination.path);
  } catch (const store::StoreError& e) {
    problems.push_back({"coordination", std::nullopt, e.what()});
  }
  for (const store::JunkLine& junk : status.junk) {
    problems.push_back({"coordination", std::nullopt,
                        "line " + std::to_string(junk.lineNumber) + " of coordination file " +
                            options.coordination.path + " is not a record: '" +
                            strings::quoteForMessage(junk.text) + "'"});
  }
  for (const coordination::RecordStatus& entry : status.records) {
    if (entry.running) continue;
    notes.push_back({"dead_owner", entry.record.gpu,
                     "GPU " + entry.record.gpu + " is recorded for process " +
                         std::to_string(entry.record.owner.pid) +
                         ", which is no longer running; an allocation takes it back when the "
                         "GPUs no record names are not enough"});
  }

  noteAConfiguredFileInUse(options.coordination, notes);

  // One session held across the enumeration, the health probe and the process lists, so that
  // the driver is initialised once (NVML counts nested inits).
  const std::unique_ptr<nvml::NvmlSession> session = nvml::holdSession();
  const HostLook look = nvmlLookOrNone();
  const std::vector<discovery::GpuDevice>& devices = look.devices;
  HostView host = viewHost(options.coordination.path, status, devices, true);
  findStale(host, status, devices, look.coverage);
  // Processes no record explains (host/usage/GpuUse.h), judged as the allocators judge them.
  // The sharing declarations are read once, for stale ones, the MPS servers of the GPUs shared
  // with MPS, and the GPUs left set up for sharing without a declaration (below).
  std::unordered_set<std::string> mpsShared;
  std::optional<sharing::DeclarationsFile> declarations;
  std::vector<const sharing::Declaration*> declared;
  try {
    declarations = sharing::readDeclarations(options.coordination.path);
    addStaleDeclarations(declarations->parsed, host);
    declared = sharing::declarationsOf(declarations->parsed, *host.index);
    for (std::size_t i = 0; i < host.gpus.size(); ++i) {
      const sharing::Declaration* declaration = declared[host.refs[i]];
      if (declaration != nullptr && declaration->isMps()) mpsShared.insert(host.gpus[i].gpu);
    }
  } catch (const store::StoreError&) {
    // A declarations file check cannot read is status's to say (and the allocators' of shares);
    // an MPS server then counts as foreign here, and no GPU is said to lack a declaration.
  }
  if (const std::optional<Notice> note = judgeUse(host, status, devices, mpsShared)) {
    notes.push_back({"foreign_process", std::nullopt, note->text});
  }
  for (const std::string& allocator : usage::otherAllocators(usage::hostRoot())) {
    notes.push_back({"other_allocator", std::nullopt,
                     "another GPU allocator runs on this host: " + allocator +
                         "; the coordination file does not know which GPUs it hands out, so "
                         "allocators see them only as processes no record names"});
  }
  if (!host.probe.usable && host.kernel) {
    // A driver upgrade without a reboot: one line, with the GPUs the kernel still knows.
    problems.push_back(
        {"nvml", std::nullopt,
         host.probe.problem +
             ": the driver was upgraded and its old kernel module is still loaded; " +
             discovery::describeKernelList(*host.kernel) + "; " +
             std::string(discovery::versionMismatchRemedy()),
         "version_mismatch"});
  } else if (!host.probe.usable) {
    problems.push_back({"nvml", std::nullopt, host.probe.problem});
  } else if (options.expect && host.probe.count < static_cast<std::uint64_t>(*options.expect)) {
    // Slurm's own wording, so that a site's log filters find it.
    problems.push_back({"count", std::nullopt,
                        "gpu count reported lower than expected (" +
                            std::to_string(host.probe.count) + " < " +
                            std::to_string(*options.expect) + ")"});
  }
  if (!host.healthError.empty()) {
    problems.push_back(
        {"health_records", std::nullopt, "cannot read the health records: " + host.healthError});
  } else if (host.health) {
    for (const store::JunkLine& junk : host.health->parsed.junk) {
      problems.push_back({"health_records", std::nullopt,
                          "line " + std::to_string(junk.lineNumber) + " of " +
                              host.health->path.string() + " is not a health record: '" +
                              strings::quoteForMessage(junk.text) + "'"});
    }
  }
  for (const GpuView& view : host.gpus) {
    // A MIG instance's problems are its GPU's, which says them already; a GPU this host no longer
    // has is stale state, a note below, and fails no health check.
    if (view.isMigInstance || view.notOnHost) continue;
    for (const health::Problem& problem : view.problems) {
      problems.push_back(
          {std::string(health::stateWord(problem.kind)), view.gpu,
           "GPU " + view.gpu + (view.uuid ? " (" + *view.uuid + ")" : "") + ": " + problem.text,
           std::string(health::causeWord(problem.kind))});
    }
    for (const health::HealthNote& note : view.notes) {
      notes.push_back({std::string(health::noteWord(note.kind)), view.gpu,
                       "GPU " + view.gpu + ": " + note.text});
    }
    for (const usage::ForeignProcess& process : view.foreignProcesses) {
      notes.push_back({"foreign_process", view.gpu,
                       "GPU " + view.gpu + " is used by " + usage::describeProcess(process) +
                           ", which no record names: allocators skip it as busy"});
    }
    if (view.persistenceMode && !*view.persistenceMode) {
      notes.push_back({"persistence_mode", view.gpu,
                       "GPU " + view.gpu +
                           ": persistence mode is off: NVML initialization and nvidia-smi are "
                           "slow without it (nvidia-smi -pm 1, or run nvidia-persistenced)"});
    }
  }
  if (declarations) noteUndeclaredSharing(host, declared, notes);
  // State that outlived its GPU blocks nothing, but should not sit there unseen.
  for (const StaleEntry& entry : host.stale) {
    notes.push_back({"stale", entry.gpu, entry.text, std::string(staleKindWord(entry.kind))});
  }

  const bool ok = problems.empty();
  if (options.format == OutputFormat::kJson) {
    const auto entry = [](const Finding& finding) {
      nlohmann::ordered_json json;
      json["kind"] = finding.kind;
      // What it is, for a program: a GPU's problem by health::causeWord, another by its kind.
      json["cause"] = finding.cause.value_or(finding.kind);
      json["gpu"] = finding.gpu ? nlohmann::ordered_json(*finding.gpu) : nullptr;
      json["text"] = finding.text;
      return json;
    };
    // Member by member, each finding as it is printed: a file of 100,000 records has as many.
    // ASCII only: JSON escapes C0 controls but not DEL or C1 ones, which a record may hold and a
    // terminal may read as an escape sequence; bytes that are not UTF-8 are replaced.
    JsonObjectPrinter<nlohmann::ordered_json> document(std::cout);
    document.member("format", kJsonFormat);
    document.member("ok", ok);
    document.arrayMember("problems", problems.size(),
                         [&](std::size_t i) { return entry(problems[i]); });
    document.arrayMember("notes", notes.size(), [&](std::size_t i) { return entry(notes[i]); });
    document.end();
  } else {
    // One line per finding, as NHC and Slurm read them: a GPU name or UUID from a health record
    // may hold a line break or an escape sequence.
    for (const Finding& problem : problems) {
      std::cout << strings::quoteForMessage(problem.text, kWholeText) << '\n';
    }
    for (const Finding& note : notes) {
      std::cout << "note: " << strings::quoteForMessage(note.text, kWholeText) << '\n';
    }
    if (ok) std::cout << "ok: " << host.probe.count << " GPU(s), none lost, unhealthy or drained\n";
  }
  return ok ? kSuccess : kDiscoveryFailed;
}

// ---- watch ----

namespace {

std::atomic<bool> gStop{false};

void requestStop(int) { gStop.store(true); }

}  // namespace

int runWatch(const WatchCommandOptions& options) {
  // A line that reaches the journal gets its time there; in a file or on a terminal it carries
  // its own, since watch runs for months.
  setStderrTimestamps(!systemd::stderrIsJournal());
  health::WatchOptions watch;
  watch.coordinationFile = options.coordination.path;
  watch.readmit = options.readmit;
  try {
    if (options.ignoreXids) watch.ignoredXids = health::parseXidList(*options.ignoreXids);
    if (options.criticalXids) watch.criticalXids = health::parseXidList(*options.criticalXids);
  } catch (const std::invalid_argument& e) {
    printError(std::string("invalid Xid list: ") + e.what());
    return kUsageError;
  }
  if (options.ignoreXids && options.criticalXids) {
    printError("give --ignore-xids or --critical-xids, not both");
    return kUsageError;
  }

  std::variant<health::WatchLock, pid_t> lock = pid_t{0};
  try {
    std::vector<std::string> warnings;
    lock = health::WatchLock::acquire(options.coordination.path, warnings);
    for (const std::string& warning : warnings) printWarning(warning);
  } catch (const std::runtime_error& e) {
    printError(std::string("cannot watch: ") + e.what());
    return kDiscoveryFailed;
  }
  if (const pid_t* other = std::get_if<pid_t>(&lock)) {
    printError("another flink-gpu watch is running on this host" +
               (*other > 0 ? " (pid " + std::to_string(*other) + ")" : std::string()) +
               ": one is enough; it holds " + options.coordination.path + ".watch");
    return kDiscoveryFailed;
  }

  // A stop is a request, seen between two waits: the verdicts in hand are written first.
  struct sigaction action {};
  action.sa_handler = requestStop;
  ::sigemptyset(&action.sa_mask);
  ::sigaction(SIGTERM, &action, nullptr);
  ::sigaction(SIGINT, &action, nullptr);
  watch.stopRequested = [] { return gStop.load(); };
  watch.log = [](const std::string& line) { printLine("flink-gpu watch: " + line); };
  // Type=notify: the unit is started once the GPUs are registered, not when the program is.
  bool ready = false;
  const auto tellSystemd = [](std::string_view state) {
    if (const std::error_code error = systemd::notify(state)) {
      const char* socket = std::getenv("NOTIFY_SOCKET");
      printWarning("cannot tell systemd " + std::string(state) + " at $NOTIFY_SOCKET (" +
                   strings::quoteForMessage(socket == nullptr ? "" : socket) +
                   "): " + error.message());
    }
  };
  watch.watching = [&ready, &tellSystemd] {
    ready = true;
    tellSystemd("READY=1");
  };
  const int code = health::watch(watch);
  if (ready) tellSystemd("STOPPING=1");
  return code;
}

}  // namespace flink::cli
