// `flink-gpu status`: reads the coordination file without its lock (coordination::snapshotStatus)
// and prints one row per record — GPU, owner pid, running or gone — as an aligned table or as JSON.
// When NVML can be used, each record also shows what NVML knows of its device (uuid, name, PCI bus
// id, memory). NVML only: status starts no process, so a hung nvidia-smi cannot hang it, and a host
// without NVML gets the records alone, without a word. Shares (docs/sharing.md) show beside: each
// record's share, each declared GPU's declaration and live shares, the state `shared`; a host
// without sharing sees what it always saw.
#include "commands/StatusCommand.h"

#include <algorithm>
#include <exception>
#include <filesystem>
#include <iostream>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "BuildInfo.h"
#include "Console.h"
#include "ExitCode.h"
#include "commands/HostGpuListing.h"
#include "commands/JsonObjectPrinter.h"
#include "flink/externalresource/gpu/GPUInfo.h"
#include "flink/externalresource/gpu/GpuProperties.h"
#include "host/coordination/Coordination.h"
#include "host/enumeration/DeviceIdentifiers.h"
#include "host/enumeration/GpuEnumerator.h"
#include "host/enumeration/KernelGpus.h"
#include "host/enumeration/NvmlEnumerator.h"
#include "host/enumeration/UnitIndex.h"
#include "host/health/HostView.h"
#include "host/nvml/Nvml.h"
#include "host/sharing/SharingDeclarations.h"
#include "host/usage/GpuUse.h"
#include "util/Notice.h"
#include "util/Strings.h"

namespace flink::cli {
namespace {

using externalresource::gpu::GPUInfo;

/// The host's devices as NVML lists them (MIG instances included), and how much of the host they
/// are (discovery::coverageOf); none when NVML cannot be used, which only -v mentions. A GPU left
/// out (lost, denied) is named at every verbosity but -q: an operator reading the table should
/// know why a GPU is missing from it.
HostLook nvmlDevices() {
  HostLook look;
  try {
    discovery::Enumeration found = discovery::NvmlEnumerator().enumerate();
    for (const Notice& notice : found.notices) {
      if (notice.kind == Notice::Kind::kGpuLeftOut) {
        printWarning(notice.text);
      } else if (verbosity() >= Verbosity::kVerbose) {
        std::cerr << "flink-gpu: " << notice.line() << '\n';
      }
    }
    look.coverage = discovery::coverageOf(found, true);
    look.devices = std::move(found.devices);
    return look;
  } catch (const discovery::DiscoveryError& e) {
    look.coverage.cannotTell = e.what();
    if (e.kind() == discovery::DiscoveryError::Kind::kNoUsableGpu) {
      // Every GPU is lost or denied: the records are still shown, without devices.
      printWarning(e.what());
    } else if (verbosity() >= Verbosity::kVerbose) {
      std::cerr << "flink-gpu: no GPU properties: " << e.what() << '\n';
    }
    return look;
  } catch (const std::exception& e) {  // NvmlError
    look.coverage.cannotTell = e.what();
    if (verbosity() >= Verbosity::kVerbose) {
      std::cerr << "flink-gpu: no GPU properties: " << e.what() << '\n';
    }
    return look;
  }
}

/// What status shows of a device: GPUInfo's uuid, name, pci.bus_id and memory.total, those known.
using DeviceProperties = std::vector<std::pair<std::string, std::string>>;

/// What status shows of each of `devices`, in their order.
std::vector<DeviceProperties> propertiesOfDevices(
    const std::vector<discovery::GpuDevice>& devices) {
  std::vector<DeviceProperties> shown(devices.size());
  for (std::size_t i = 0; i < devices.size(); ++i) {
    for (auto& [key, value] : externalresource::gpu::propertiesOf(devices[i])) {
      if (key == GPUInfo::PROPERTY_KEY_UUID || key == GPUInfo::PROPERTY_KEY_NAME ||
          key == GPUInfo::PROPERTY_KEY_PCI_BUS_ID || key == GPUInfo::PROPERTY_KEY_MEMORY_TOTAL) {
        shown[i].emplace_back(std::move(key), std::move(value));
      }
    }
  }
  return shown;
}

/// The properties (of `properties`, one per device of `devices`) of the device each record names,
/// in record order; nullptr for a record NVML does not know (or all, when NVML cannot be used or
/// there is no record). Each device's once: a file can hold hundreds of thousands of records of
/// a few GPUs.
std::vector<const DeviceProperties*> propertiesOfRecords(
    const coordination::Status& status, const std::vector<discovery::GpuDevice>& devices,
    const std::vector<DeviceProperties>& properties) {
  std::vector<const DeviceProperties*> ofRecords(status.records.size(), nullptr);
  if (status.records.empty() || devices.empty()) return ofRecords;
  // The device each record names, by the allocators' rule (a container's record names the GPU
  // by its own index, with its UUID); a UnitRef of this index is the device's position.
  const discovery::UnitIndex index = discovery::UnitIndex::of(devices);
  for (std::size_t i = 0; i < status.records.size(); ++i) {
    const coordination::Record& record = status.records[i].record;
    const std::vector<discovery::UnitRef> named = index.namedByRecord(record.gpu, record.uuid);
    if (named.size() != 1) continue;  // none, or a prefix of several GPUs' UUIDs
    ofRecords[i] = &properties[named.front()];
  }
  return ofRecords;
}

std::optional<std::string> valueOf(const DeviceProperties& properties, std::string_view key) {
  for (const auto& [name, value] : properties) {
    if (name == key) return value;
  }
  return std::nullopt;
}

/// "NVIDIA H200, 00000000:19:00.0, 143771 MiB", of what is known; the uuid is left to JSON.
std::string describe(const DeviceProperties& properties) {
  std::vector<std::string> parts;
  if (auto name = valueOf(properties, GPUInfo::PROPERTY_KEY_NAME)) parts.push_back(*name);
  if (auto bus = valueOf(properties, GPUInfo::PROPERTY_KEY_PCI_BUS_ID)) parts.push_back(*bus);
  if (auto memory = valueOf(properties, GPUInfo::PROPERTY_KEY_MEMORY_TOTAL)) {
    parts.push_back(*memory + " MiB");
  }
  return strings::join(parts, ", ");
}

/// "running", "gone", "other pid namespace", "lease held by another process" (a leased record
/// whose pid is gone: the command passed the lease to a child), or why a record is held that its
/// pid cannot judge (coordination::describeLiveness).
std::string ownerState(const coordination::RecordStatus& entry) {
  return coordination::describeLiveness(entry);
}

/// The sharing declarations beside the coordination file, as status sees them: none when there
/// are none, or when they cannot be read (`error`: status still shows everything else).
struct Sharing {
  std::optional<sharing::DeclarationsFile> file;
  std::string error;
  /// Parallel to HostView::gpus: the declaration of each whole GPU, where declared.
  std::vector<std::optional<sharing::Declaration>> declarationOf;

  bool anyDeclared() const { return file && !file->parsed.declarations.empty(); }
};

/// Reads the declarations and finds each GPU's (by UUID where both know one), filling
/// GpuView::declaredShares for the metrics.
Sharing readSharing(const std::string& coordinationFile, HostView& host) {
  Sharing sharing;
  try {
    sharing.file = sharing::readDeclarations(coordinationFile);
  } catch (const store::StoreError& e) {
    sharing.error = e.what();
    host.sharingError = sharing.error;
  }
  sharing.declarationOf.assign(host.gpus.size(), std::nullopt);
  if (!sharing.anyDeclared()) return sharing;
  // Each declaration read once, by the view's index.
  const std::vector<const sharing::Declaration*> declared =
      sharing::declarationsOf(sharing.file->parsed, *host.index);
  for (std::size_t i = 0; i < host.gpus.size(); ++i) {
    GpuView& view = host.gpus[i];
    if (view.isMigInstance) continue;
    const sharing::Declaration* declaration = declared[host.refs[i]];
    if (declaration == nullptr) continue;
    sharing.declarationOf[i] = *declaration;
    view.declaredShares = declaration->replicas;
  }
  return sharing;
}

/// The GPUs declared shared with MPS, by the view's name of each: their MPS server explains
/// itself (host/usage/GpuUse.h).
std::unordered_set<std::string> mpsSharedGpus(const HostView& host, const Sharing& sharing) {
  std::unordered_set<std::string> shared;
  for (std::size_t i = 0; i < host.gpus.size(); ++i) {
    if (sharing.declarationOf[i] && sharing.declarationOf[i]->isMps()) {
      shared.insert(host.gpus[i].gpu);
    }
  }
  return shared;
}

/// JSON's `share` of a record: {"index", "count"}, or null for a whole GPU's.
nlohmann::ordered_json shareJson(const coordination::Record& record) {
  if (!record.share) return nullptr;
  return nlohmann::ordered_json{{"index", record.share->index}, {"count", record.share->count}};
}

/// JSON's `sharing` of a GPU: its declaration and live shares, or null when not declared.
nlohmann::ordered_json sharingJson(const GpuView& view,
                                   const std::optional<sharing::Declaration>& declaration) {
  if (!declaration) return nullptr;
  nlohmann::ordered_json json;
  json["replicas"] = declaration->replicas;
  json["memory_per_share"] = declaration->memoryPerShareMiB
                                 ? nlohmann::ordered_json(*declaration->memoryPerShareMiB)
                                 : nlohmann::ordered_json(nullptr);
  json["mps_pipe_directory"] = declaration->mpsPipeDirectory
                                   ? nlohmann::ordered_json(*declaration->mpsPipeDirectory)
                                   : nlohmann::ordered_json(nullptr);
  json["shares_held"] = view.liveShares().size();
  return json;
}

/// "declared shared: up to 4 workers, 35942 MiB each, MPS /run/nvidia-mps".
std::string describeDeclaration(const sharing::Declaration& declaration) {
  std::string text = "declared shared: up to " + std::to_string(declaration.replicas) + " workers";
  if (declaration.memoryPerShareMiB) {
    text += ", " + std::to_string(*declaration.memoryPerShareMiB) + " MiB each";
  }
  if (declaration.mpsPipeDirectory) text += ", MPS " + *declaration.mpsPipeDirectory;
  return text;
}

/// The host table's detail of a GPU: what sharing says of it, then describeView. A shared GPU
/// begins "2 of 4 shares held" (K from its declaration, else from its share records, which were
/// granted under it); a declared GPU says so, first when free.
std::string describeGpu(const GpuView& view,
                        const std::optional<sharing::Declaration>& declaration) {
  std::vector<std::string> first;
  std::vector<std::string> last;
  if (view.state == GpuState::kShared) {
    std::optional<unsigned> count;
    if (declaration) {
      count = declaration->replicas;
    } else {
      for (const coordination::RecordStatus& holder : view.holders) {
        if (holder.running && holder.record.share) {
          count = std::max(count.value_or(0), holder.record.share->count);
        }
      }
    }
    const std::size_t live = view.liveShares().size();
    first.push_back(std::to_string(live) +
                    (count ? " of " + std::to_string(*count) : std::string()) +
                    (live == 1 && !count ? " share held" : " shares held"));
    // Its declaration was taken out while shares live: they keep it until they end.
    if (!declaration) last.push_back("not declared shared: no new share is handed out");
  } else if (declaration) {
    (view.state == GpuState::kFree || view.state == GpuState::kBusy ? first : last)
        .push_back(describeDeclaration(*declaration));
  }
  std::vector<std::string> parts = std::move(first);
  if (std::string rest = describeView(view); !rest.empty()) parts.push_back(std::move(rest));
  parts.insert(parts.end(), last.begin(), last.end());
  return strings::join(parts, "; ");
}

/// JSON's `health` object of one GPU.
nlohmann::ordered_json healthJson(const HostView& host, const GpuView& view) {
  nlohmann::ordered_json health;
  // Healthy from the records alone is not known: null while NVML cannot be asked.
  health["healthy"] = !view.healthy() || host.probe.usable ? nlohmann::ordered_json(view.healthy())
                                                           : nlohmann::ordered_json(nullptr);
  health["drained"] = view.drained();
  nlohmann::ordered_json problems = nlohmann::ordered_json::array();
  for (const health::Problem& problem : view.problems) {
    nlohmann::ordered_json entry;
    entry["kind"] = health::stateWord(problem.kind);
    entry["cause"] = health::causeWord(problem.kind);
    entry["text"] = problem.text;
    if (problem.record) {
      entry["since"] = problem.record->since;
      if (problem.record->xid) entry["xid"] = *problem.record->xid;
      if (problem.record->uid) entry["uid"] = *problem.record->uid;
      entry["reason"] = problem.record->reason;
    }
    problems.push_back(std::move(entry));
  }
  health["problems"] = std::move(problems);
  if (const health::HealthRecord* xid = view.lastXid()) {
    health["last_xid"] = *xid->xid;
    health["last_xid_time"] = xid->since;
  }
  if (view.persistenceMode) health["persistence_mode"] = *view.persistenceMode;
  if (view.recoveryAction) health["recovery_action"] = *view.recoveryAction;
  if (!view.notes.empty()) {
    nlohmann::ordered_json notes = nlohmann::ordered_json::array();
    for (const health::HealthNote& note : view.notes) {
      notes.push_back({{"cause", health::noteWord(note.kind)}, {"text", note.text}});
    }
    health["notes"] = std::move(notes);
  }
  return health;
}

/// What the kernel's list says of a GPU: {"pci_bus_id", "uuid", "model", "minor", "excluded"}.
nlohmann::ordered_json kernelGpuJson(const discovery::KernelGpu& gpu) {
  using Json = nlohmann::ordered_json;
  return Json{{"pci_bus_id", gpu.pciBusId},
              {"uuid", gpu.uuid ? Json(*gpu.uuid) : Json(nullptr)},
              {"model", gpu.model ? Json(*gpu.model) : Json(nullptr)},
              {"minor", gpu.minor ? Json(*gpu.minor) : Json(nullptr)},
              {"excluded", gpu.excluded}};
}

/// JSON's entry of the `i`-th GPU of the host in `gpus`.
nlohmann::ordered_json gpuJson(const HostView& host, const Sharing& sharing, std::size_t i) {
  const GpuView& view = host.gpus[i];
  nlohmann::ordered_json gpu;
  gpu["gpu"] = view.gpu;
  if (view.uuid) gpu["uuid"] = *view.uuid;
  gpu["state"] = std::string(gpuStateWord(view.state));
  nlohmann::ordered_json holders = nlohmann::ordered_json::array();
  for (const coordination::RecordStatus& holder : view.holders) {
    holders.push_back(nlohmann::ordered_json{{"owner_pid", holder.record.owner.pid},
                                             {"running", holder.running},
                                             {"other_pid_namespace", holder.otherPidNamespace},
                                             {"share", shareJson(holder.record)}});
  }
  gpu["holders"] = std::move(holders);
  gpu["held_by_lease"] = view.heldByLease;
  nlohmann::ordered_json foreign = nlohmann::ordered_json::array();
  for (const usage::ForeignProcess& process : view.foreignProcesses) {
    foreign.push_back(nlohmann::ordered_json{
        {"pid", process.pid},
        {"name", process.name ? nlohmann::ordered_json(*process.name) : nullptr},
        {"used_mib", process.usedMiB ? nlohmann::ordered_json(*process.usedMiB) : nullptr}});
  }
  // null where NVML did not tell its processes: neither busy nor known free of them.
  gpu["foreign_processes"] =
      view.processesUnread ? nlohmann::ordered_json(nullptr) : std::move(foreign);
  gpu["memory_without_process_mib"] = view.memoryWithoutProcessMiB
                                          ? nlohmann::ordered_json(*view.memoryWithoutProcessMiB)
                                          : nlohmann::ordered_json(nullptr);
  gpu["sharing"] = sharingJson(view, sharing.declarationOf[i]);
  gpu["health"] = healthJson(host, view);
  // Known from the kernel's list alone (NVML failing with a version mismatch).
  if (view.kernel) gpu["kernel"] = kernelGpuJson(*view.kernel);
  return gpu;
}

/// JSON's entry of one record, with what NVML knows of its device.
nlohmann::ordered_json recordJson(const coordination::RecordStatus& entry,
                                  const DeviceProperties* properties) {
  nlohmann::ordered_json record;
  record["gpu"] = entry.record.gpu;
  record["vendor"] = std::string(device::vendorOfUnit(entry.record.gpu));
  record["owner_pid"] = entry.record.owner.pid;
  if (entry.record.owner.startTime) {
    record["owner_start_time"] = *entry.record.owner.startTime;
  } else {
    record["owner_start_time"] = nullptr;
  }
  record["running"] = entry.running;
  record["owner_state"] = ownerState(entry);
  if (entry.record.lease) record["lease"] = *entry.record.lease;
  record["other_pid_namespace"] = entry.otherPidNamespace;
  if (entry.record.uuid) record["record_uuid"] = *entry.record.uuid;
  record["share"] = shareJson(entry.record);
  if (properties != nullptr) {
    for (const auto& [key, value] : *properties) record[key] = value;
  }
  return record;
}

nlohmann::ordered_json junkJson(const store::JunkLine& line) {
  return nlohmann::ordered_json{{"line", line.lineNumber}, {"text", line.text}};
}

/// The document, member by member (JsonObjectPrinter): records and GPUs one at a time.
void printJson(const std::string& file, const coordination::Status& status,
               const std::vector<const DeviceProperties*>& properties, const HostView& host,
               const Sharing& sharing) {
  using Json = nlohmann::ordered_json;
  JsonObjectPrinter<Json> document(std::cout);
  document.member("format", kJsonFormat);
  document.member("coordination_file", file);
  document.arrayMember("records", status.records.size(),
                       [&](std::size_t i) { return recordJson(status.records[i], properties[i]); });
  document.arrayMember("junk", status.junk.size(),
                       [&](std::size_t i) { return junkJson(status.junk[i]); });
  document.member("size_bytes", status.sizeBytes);
  document.member("limit_bytes", status.limitBytes);
  document.member("notes", status.notes);
  document.arrayMember("gpus", host.gpus.size(),
                       [&](std::size_t i) { return gpuJson(host, sharing, i); });
  // The GPUs' health above says nothing of drains and verdicts when this is set.
  document.member("health_records_error",
                  host.healthError.empty() ? Json(nullptr) : Json(host.healthError));
  const std::vector<store::JunkLine> noJunk;
  const std::vector<store::JunkLine>& sharingJunk =
      sharing.file ? sharing.file->parsed.junk : noJunk;
  document.arrayMember("sharing_junk", sharingJunk.size(),
                       [&](std::size_t i) { return junkJson(sharingJunk[i]); });
  // The GPUs' `sharing` above is null for every GPU when this is set, declared or not.
  document.member("sharing_error", sharing.error.empty() ? Json(nullptr) : Json(sharing.error));
  // Whether NVML could be asked: while it cannot, no GPU's health is known ("healthy": null).
  document.member("nvml",
                  Json{{"usable", host.probe.usable},
                       {"installed", !host.probe.libraryAbsent},
                       {"gpus", host.probe.usable ? Json(host.probe.count) : Json(nullptr)},
                       {"problem", host.probe.usable ? Json(nullptr) : Json(host.probe.problem)}});
  // Only when NVML fails with a driver/library version mismatch: the GPUs the kernel knows,
  // excluded ones included, and what reading them found.
  if (host.kernel) {
    document.arrayMember("kernel_gpus", host.kernel->gpus.size(),
                         [&](std::size_t i) { return kernelGpuJson(host.kernel->gpus[i]); });
    document.member("kernel_notes", linesOf(host.kernel->notices));
  }
  // State that names a GPU this host does not have; why it cannot be told, where it cannot.
  document.arrayMember("stale", host.stale.size(), [&](std::size_t i) {
    const StaleEntry& entry = host.stale[i];
    return Json{{"kind", std::string(staleKindWord(entry.kind))},
                {"gpu", entry.gpu},
                {"uuid", entry.uuid ? Json(*entry.uuid) : Json(nullptr)},
                {"owner_pid", entry.ownerPid ? Json(*entry.ownerPid) : Json(nullptr)},
                {"owner_running", entry.ownerPid ? Json(entry.ownerRunning) : Json(nullptr)},
                {"text", entry.text}};
  });
  document.member("stale_cannot_tell",
                  host.coverage.whole() ? Json(nullptr) : Json(host.coverage.cannotTell));
  document.end();
}

/// Columns separated by two spaces, each as wide as its widest cell; no trailing blanks. Each
/// cell is quoted (strings::quoteForMessage): what the records, the health records and NVML
/// tell (a GPU's name, a reason) may hold a line break or an escape sequence, and a row is one
/// line on a terminal.
void printTable(std::vector<std::vector<std::string>> rows, bool header) {
  if (!header && !rows.empty()) rows.erase(rows.begin());
  for (auto& row : rows) {
    for (std::string& cell : row) cell = strings::quoteForMessage(cell, std::string::npos);
  }
  std::vector<std::size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()));
    for (std::size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line.append(widths[i] - row[i].size() + 2, ' ');
    }
    // A last cell that is empty (a device NVML does not know) leaves only padding.
    line.erase(line.find_last_not_of(' ') + 1);
    std::cout << line << '\n';
  }
}

/// A file near its size limit will soon block every allocation on the host: say so first.
void warnAboutTheFile(const std::string& file, const coordination::Status& status) {
  for (const std::string& note : status.notes)
    printWarning("coordination file " + file + ": " + note);
  if (status.limitBytes > 0 && status.sizeBytes * 4 >= status.limitBytes * 3) {
    printWarning("coordination file " + file + " holds " + std::to_string(status.sizeBytes) +
                 " bytes, near its limit of " + std::to_string(status.limitBytes) +
                 ": past it, no GPU can be allocated on this host; `flink-gpu release --junk` "
                 "removes the lines that are not records, and `release --gone` the records of "
                 "gone owners");
  }
}

/// Every GPU of the host, when more is known of it than the records: NVML lists GPUs, there are
/// health records or sharing declarations, or leases hold GPUs without a record.
void printHost(const HostView& host, const Sharing& sharing, const StatusOptions& options) {
  const bool known = host.probe.usable || host.kernel || options.gpu || options.state ||
                     (host.health && !host.health->parsed.records.empty()) ||
                     sharing.anyDeclared() ||
                     std::any_of(host.gpus.begin(), host.gpus.end(), [](const GpuView& view) {
                       return view.heldByLease || !view.shareLeases.empty();
                     });
  if (!known || host.gpus.empty()) return;
  std::cout << '\n';
  std::vector<std::vector<std::string>> rows{{"GPU", "STATE", "DETAIL"}};
  for (std::size_t i = 0; i < host.gpus.size(); ++i) {
    const GpuView& view = host.gpus[i];
    rows.push_back({view.gpu, std::string(gpuStateWord(view.state)),
                    describeGpu(view, sharing.declarationOf[i])});
  }
  printTable(std::move(rows), !options.noHeaders);
}

void printText(const std::string& file, const coordination::Status& status,
               const std::vector<const DeviceProperties*>& properties, const Sharing& sharing,
               const StatusOptions& options) {
  for (const std::string& line : coordination::describeJunk(status.junk, file)) {
    printWarning(line);
  }
  if (sharing.file) {
    for (const std::string& line :
         sharing::sharingFileOf(file).describeJunk(sharing.file->parsed.junk)) {
      printWarning(line);
    }
  }
  if (status.records.empty()) {
    if (options.gpu || options.state) return;  // nothing matches: nothing to show
    std::cout << "no GPU is held: coordination file " << file << describeFileWithoutRecords(file)
              << '\n';
    return;
  }
  // The DEVICE column only when NVML told something: without NVML the table is as it always was.
  const bool anyDevice = std::any_of(
      properties.begin(), properties.end(),
      [](const DeviceProperties* known) { return known != nullptr && !known->empty(); });
  // The SHARE column only where the host shares GPUs: without sharing, the table is as it was.
  const bool anyShare =
      sharing.anyDeclared() ||
      std::any_of(status.records.begin(), status.records.end(),
                  [](const coordination::RecordStatus& entry) { return entry.record.share; });
  std::vector<std::vector<std::string>> rows{{"GPU"}};
  if (anyShare) rows.front().push_back("SHARE");
  rows.front().insert(rows.front().end(), {"OWNER PID", "OWNER"});
  if (anyDevice) rows.front().push_back("DEVICE");
  // Each device described once (a file can hold hundreds of thousands of records of a few GPUs).
  std::unordered_map<const DeviceProperties*, std::string> described;
  const auto describeDevice = [&described](const DeviceProperties* device) {
    auto [at, added] = described.try_emplace(device);
    if (added) at->second = device != nullptr ? describe(*device) : describe({});
    return at->second;
  };
  for (std::size_t i = 0; i < status.records.size(); ++i) {
    const coordination::RecordStatus& entry = status.records[i];
    rows.push_back({entry.record.gpu});
    if (anyShare) {
      rows.back().push_back(entry.record.share ? coordination::formatShareSlot(*entry.record.share)
                                               : "-");
    }
    rows.back().insert(rows.back().end(),
                       {std::to_string(entry.record.owner.pid), ownerState(entry)});
    if (anyDevice) rows.back().push_back(describeDevice(properties[i]));
  }
  printTable(std::move(rows), !options.noHeaders);
}

/// --gpu and --state: keeps the GPUs of the host that are `gpu` (any spelling of it) and in
/// `state`, and the records that name them. The metrics are never filtered.
void keepOnly(coordination::Status& status, std::vector<const DeviceProperties*>& properties,
              HostView& host, Sharing& sharing, const std::optional<std::string>& gpu,
              const std::optional<GpuState>& state) {
  // No such GPU: a unit no view has.
  discovery::UnitRef unit = std::numeric_limits<discovery::UnitRef>::max();
  if (gpu && host.index) {
    if (const std::optional<discovery::UnitRef> named = host.index->entry(*gpu).unit) unit = *named;
  }
  std::vector<GpuView> views;
  std::vector<discovery::UnitRef> refs;
  std::vector<std::optional<sharing::Declaration>> declarations;
  for (std::size_t i = 0; i < host.gpus.size(); ++i) {
    if (gpu && host.refs[i] != unit) continue;
    if (state && host.gpus[i].state != *state) continue;
    views.push_back(host.gpus[i]);
    refs.push_back(host.refs[i]);
    declarations.push_back(sharing.declarationOf[i]);
  }
  host.gpus = std::move(views);
  host.refs = std::move(refs);
  sharing.declarationOf = std::move(declarations);
  // A record is shown when it is a holder of a GPU kept: the same GPU text and owner pid. Looked
  // up in a set, not by a walk of every holder for each record (a file of hundreds of thousands of
  // records of one GPU made `status --gpu` quadratic: minutes).
  std::unordered_set<std::string> holders;
  const auto holderKey = [](const coordination::Record& record) {
    return std::to_string(record.owner.pid) + ' ' + record.gpu;
  };
  for (const GpuView& view : host.gpus) {
    for (const coordination::RecordStatus& holder : view.holders) {
      holders.insert(holderKey(holder.record));
    }
  }
  const auto kept = [&](const coordination::RecordStatus& entry) {
    return holders.count(holderKey(entry.record)) > 0;
  };
  std::vector<coordination::RecordStatus> records;
  std::vector<const DeviceProperties*> shown;
  for (std::size_t i = 0; i < status.records.size(); ++i) {
    if (!kept(status.records[i])) continue;
    records.push_back(status.records[i]);
    shown.push_back(properties[i]);
  }
  status.records = std::move(records);
  properties = std::move(shown);
}

}  // namespace

int runStatus(const StatusOptions& options) {
  coordination::Status status;
  try {
    status = coordination::snapshotStatus(options.coordination.path);
  } catch (const store::StoreError& e) {
    printError(e.what());
    return kDiscoveryFailed;
  }
  // Read after the file's lock is let go: NVML may take a moment, and allocations must not wait.
  // One session held across the enumeration, the health probe and the process lists, so that
  // the driver is initialised once (NVML counts nested inits).
  const std::unique_ptr<nvml::NvmlSession> session = nvml::holdSession();
  const HostLook look = nvmlDevices();
  const std::vector<discovery::GpuDevice>& devices = look.devices;
  HostView host = viewHost(options.coordination.path, status, devices, true);
  // NVML failing with a version mismatch: the records' devices are the kernel's list.
  const std::vector<discovery::GpuDevice> kernelDevices =
      devices.empty() && host.kernel ? host.kernel->devices() : std::vector<discovery::GpuDevice>();
  const std::vector<discovery::GpuDevice>& recordDevices =
      kernelDevices.empty() ? devices : kernelDevices;
  const std::vector<DeviceProperties> deviceProperties = propertiesOfDevices(recordDevices);
  const std::vector<const DeviceProperties*> properties =
      propertiesOfRecords(status, recordDevices, deviceProperties);
  findStale(host, status, devices, look.coverage);
  Sharing sharing = readSharing(options.coordination.path, host);
  if (sharing.file) addStaleDeclarations(sharing.file->parsed, host);
  if (const std::optional<Notice> note =
          judgeUse(host, status, devices, mpsSharedGpus(host, sharing))) {
    printNote(note->text);
  }
  std::vector<const DeviceProperties*> shownProperties = properties;
  if (options.gpu || options.state) {
    const std::optional<std::string> gpu =
        options.gpu ? discovery::parseOneGpu(*options.gpu) : std::nullopt;
    if (options.gpu && !gpu) {
      printError("invalid --gpu '" + strings::quoteForMessage(*options.gpu) +
                 "': expected one GPU, an index (e.g. 0), a GPU-/MIG- UUID or a PCI bus id");
      return kUsageError;
    }
    keepOnly(status, shownProperties, host, sharing, gpu, options.state);
  }
  if (options.format == OutputFormat::kPrometheus) {
    // For node_exporter's textfile collector: nothing but the exposition format on stdout, and
    // exit 0 whatever it says, so that the collector publishes it (flink_gpu_nvml_up 0 too).
    std::cout << prometheusMetrics(host, status, {buildVersion(), buildCommit()});
    return kSuccess;
  }
  // NVML installed but not usable (a driver that fails): the GPUs' health is unknown, and GPUs no
  // record names are not shown. Said, and the exit code is check's. A host without NVML at all
  // (no NVIDIA driver: AMD, Intel, a custom script's GPUs) shows its records as it always did.
  const bool nvmlBroken = !host.probe.usable && !host.probe.libraryAbsent;
  if (nvmlBroken && host.kernel) {
    // An error, not a warning: it is why status exits 1, and -q must still say it.
    printError(host.probe.problem +
               ": the driver was upgraded and its old kernel module is still loaded; the GPUs' "
               "health is unknown, and the GPUs shown are the kernel's list (" +
               (discovery::nvidiaProcRoot() / "gpus").string() +
               "), by index in PCI bus order; to use them again: " +
               std::string(discovery::versionMismatchRemedy()));
    for (const Notice& notice : host.kernel->notices) printWarning(notice.text);
    for (const discovery::KernelGpu* gpu : host.kernel->excludedGpus()) {
      printWarning("GPU " + gpu->describe() +
                   " is excluded by the kernel's driver (GPU Excluded: Yes): never handed out");
    }
  } else if (nvmlBroken) {
    // An error, not a warning: it is why status exits 1, and -q must still say it.
    printError(host.probe.problem +
               "; the GPUs' health is unknown, and GPUs that no record names are not shown");
  }
  warnAboutTheFile(options.coordination.path, status);
  // Files beside it that failed the trust rules and were moved aside (store::admitSibling).
  for (const std::string& line : status.warnings) printWarning(line);
  if (host.health) {
    for (const std::string& line : host.health->warnings) printWarning(line);
  }
  if (sharing.file) {
    for (const std::string& line : sharing.file->warnings) printWarning(line);
  }
  if (!host.healthError.empty())
    printWarning("cannot read the health records: " + host.healthError);
  if (host.health) {
    for (const std::string& line :
         health::healthFileOf(options.coordination.path).describeJunk(host.health->parsed.junk)) {
      printWarning(line);
    }
  }
  // Status works on without them, as on a host that shares nothing.
  if (!sharing.error.empty()) {
    printWarning("cannot read the sharing declarations: " + sharing.error);
  }
  // State that outlived its GPU (a board replaced, a MIG layout changed) blocks nothing, but
  // should not sit there unseen.
  for (const StaleEntry& entry : host.stale) {
    printNote(strings::quoteForMessage(entry.text, std::string::npos));
  }
  if (options.format == OutputFormat::kJson) {
    printJson(options.coordination.path, status, shownProperties, host, sharing);
  } else {
    printText(options.coordination.path, status, shownProperties, sharing, options);
    printHost(host, sharing, options);
  }
  return nvmlBroken ? kDiscoveryFailed : kSuccess;
}

}  // namespace flink::cli
