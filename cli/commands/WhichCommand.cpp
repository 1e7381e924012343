// `flink-gpu which`: see WhichCommand.h. The owner is the one rule's (coordination::treeOwner);
// what each unit is comes from NVML, else nvidia-smi (lookAtHost), else from the record alone;
// a share's memory and MPS daemon from the sharing declarations, as its grant had them; the
// environment from host/defaultdiscovery/ChildEnvironment.h, as `exec` gives it.
#include "commands/WhichCommand.h"

#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <limits>
#include <string>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "Console.h"
#include "ExitCode.h"
#include "commands/CoordinationFileOption.h"
#include "commands/HostGpuListing.h"
#include "host/coordination/Coordination.h"
#include "host/coordination/Leases.h"
#include "host/coordination/TreeOwner.h"
#include "host/defaultdiscovery/ChildEnvironment.h"
#include "host/enumeration/DeviceIdentifiers.h"
#include "host/enumeration/UnitIndex.h"
#include "host/liveness/HostFacts.h"
#include "host/sharing/SharingDeclarations.h"
#include "util/Strings.h"

namespace flink::cli {
namespace {

using nlohmann::ordered_json;

/// One unit the owner holds, as printed.
struct OwnedUnit {
  /// As the record names it ("0", "GPU-…", "MIG-…"), or as the host names a unit known only by
  /// its lease.
  std::string gpu;
  std::optional<std::string> uuid;
  std::optional<std::string> busId;
  std::optional<std::string> name;
  /// For a share: its grant as exec and the in-process driver had it.
  std::optional<defaultdiscovery::ShareGrant> share;
};

/// `unit` with what the host's device says of it, and what the record says where the host does
/// not (its UUID).
void describeFrom(const discovery::GpuDevice* device, OwnedUnit& unit) {
  if (device == nullptr) return;
  if (device->uuid) unit.uuid = device->uuid;
  if (device->pciBusId) unit.busId = device->pciBusId;
  if (device->name) unit.name = device->name;
}

/// The share a record of `unit` holds, with the memory and MPS daemon its GPU's declaration
/// gives (none where the GPU is no longer declared: then only its index and count are known).
defaultdiscovery::ShareGrant shareOf(const coordination::ShareSlot& slot,
                                     const sharing::Declaration* declaration,
                                     const std::optional<std::string>& uuid) {
  defaultdiscovery::ShareGrant share;
  share.slot = slot;
  share.uuid = uuid;
  if (declaration != nullptr) {
    share.memoryMiB = declaration->memoryPerShareMiB;
    share.mpsPipeDirectory = declaration->mpsPipeDirectory;
  }
  return share;
}

ordered_json jsonOf(const OwnedUnit& unit) {
  const auto value = [](const std::optional<std::string>& text) {
    return text ? ordered_json(*text) : ordered_json(nullptr);
  };
  ordered_json json = ordered_json::object();
  json["gpu"] = unit.gpu;
  json["uuid"] = value(unit.uuid);
  json["pci.bus_id"] = value(unit.busId);
  json["name"] = value(unit.name);
  if (unit.share) {
    ordered_json share = ordered_json::object();
    share["index"] = unit.share->slot.index;
    share["count"] = unit.share->slot.count;
    share["memory_mib"] =
        unit.share->memoryMiB ? ordered_json(*unit.share->memoryMiB) : ordered_json(nullptr);
    share["mps_pipe_directory"] = value(unit.share->mpsPipeDirectory);
    json["share"] = std::move(share);
  }
  return json;
}

std::string textOf(const OwnedUnit& unit) {
  std::string line = "GPU " + unit.gpu + ": " + unit.uuid.value_or("UUID unknown") + ", " +
                     unit.busId.value_or("PCI bus id unknown") + ", " +
                     unit.name.value_or("name unknown");
  if (unit.share) {
    line += ", share " + coordination::formatShareSlot(unit.share->slot);
    if (unit.share->memoryMiB) line += " (" + std::to_string(*unit.share->memoryMiB) + " MiB)";
    line += unit.share->mpsPipeDirectory ? ", MPS " + *unit.share->mpsPipeDirectory
                                         : std::string(", time-sliced");
  }
  return line;
}

/// The process's name for a person: "process 4242 (java)".
std::string processText(pid_t pid) {
  const std::optional<std::string> name = liveness::HostFacts::system().processName(pid);
  return "process " + std::to_string(pid) +
         (name ? " (" + strings::quoteForMessage(*name, 64) + ")" : std::string());
}

}  // namespace

int runWhich(const WhichOptions& options) {
  pid_t pid = ::getpid();
  if (options.pid) {
    if (*options.pid <= 0 || *options.pid > std::numeric_limits<pid_t>::max()) {
      printError("invalid --pid " + std::to_string(*options.pid) +
                 ": expected a process id (a positive integer)");
      return kUsageError;
    }
    pid = static_cast<pid_t>(*options.pid);
    if (!liveness::HostFacts::system().process(pid).alive()) {
      printError("process " + std::to_string(pid) + " is not running");
      return kDiscoveryFailed;
    }
  }
  const std::string& file = options.coordination.path;
  // The records as they are: treeOwner matches them to the process's ancestry itself.
  std::vector<coordination::Record> records;
  try {
    records = coordination::snapshotRecords(file).records;
  } catch (const store::StoreError& e) {
    printError(e.what());
    return kDiscoveryFailed;
  }
  const std::vector<coordination::HeldLease> leases = coordination::heldLeases(file);
  const std::optional<coordination::TreeOwner> owner =
      coordination::treeOwner(records, leases, pid);
  if (!owner) {
    const std::string cause =
        records.empty() && leases.empty()
            ? "coordination file " + file + describeFileWithoutRecords(file)
            : "no record of " + file + " names one of them, and none has a lease of it open";
    const auto unseen =
        std::count_if(leases.begin(), leases.end(),
                      [](const coordination::HeldLease& lease) { return lease.holder == 0; });
    const std::string cannotTell =
        unseen == 0 ? std::string()
                    : "; but " + std::to_string(unseen) +
                          " of its leases are held by processes this user cannot look at, so "
                          "whether one of them is of this process's tree cannot be told";
    printError((options.pid ? processText(pid) : std::string("this process")) +
               " holds no GPU, nor does any process it descends from: " + cause + cannotTell);
    return kDiscoveryFailed;
  }

  // What each unit is: the host as NVML (else nvidia-smi) lists it, with MIG instances.
  const HostLook look = lookAtHost();
  const discovery::UnitIndex index = discovery::UnitIndex::of(look.devices);
  std::vector<const sharing::Declaration*> declarations;
  sharing::ParsedDeclarations parsed;
  try {
    parsed = sharing::readDeclarations(file).parsed;
    declarations = sharing::declarationsOf(parsed, index);
  } catch (const store::StoreError& e) {
    printWarning("cannot read the sharing declarations: " + std::string(e.what()) +
                 "; a share's memory and MPS daemon are not shown");
  }
  // The declaration of the one unit `named` (a record's reading, or a lease's unit), if any.
  const auto declarationOf =
      [&](const std::vector<discovery::UnitRef>& named) -> const sharing::Declaration* {
    if (named.size() != 1 || named.front() >= declarations.size()) return nullptr;
    return declarations[named.front()];
  };

  std::vector<OwnedUnit> units;
  std::unordered_set<std::size_t> seen;     // the host's units already listed, by UnitRef
  std::unordered_set<std::string> unknown;  // the records of no unit of the host already listed
  for (const std::size_t i : owner->records) {
    const coordination::Record& record = records[i];
    const std::vector<discovery::UnitRef> named = index.namedByRecord(record.gpu, record.uuid);
    // A record written twice (a copy Flink's `sed -i` made, a writer that appended it again), or
    // one GPU recorded under two spellings, is one unit: listed once.
    const bool listed =
        named.empty()
            ? !unknown
                   .insert(record.gpu + '\t' + record.uuid.value_or("") + '\t' +
                           (record.share ? coordination::formatShareSlot(*record.share) : ""))
                   .second
            : std::all_of(named.begin(), named.end(),
                          [&seen](discovery::UnitRef ref) { return seen.count(ref) > 0; });
    if (listed) continue;
    OwnedUnit unit;
    unit.gpu = record.gpu;
    if (record.uuid) unit.uuid = record.uuid;
    if (device::isUuid(record.gpu)) unit.uuid = record.gpu;
    // The host's unit the record names, where exactly one is.
    if (named.size() == 1 && named.front() < look.devices.size()) {
      describeFrom(&look.devices[named.front()], unit);
    }
    seen.insert(named.begin(), named.end());
    if (record.share) unit.share = shareOf(*record.share, declarationOf(named), unit.uuid);
    units.push_back(std::move(unit));
  }
  // Units it holds by a lease no record names: its GPUs all the same.
  for (const coordination::LeasedUnit& leased :
       coordination::unitsOfLeases(owner->leases, index, liveness::HostFacts::system().reader())) {
    if (!seen.insert(leased.unit).second || leased.unit >= look.devices.size()) continue;
    const discovery::GpuDevice& device = look.devices[leased.unit];
    OwnedUnit unit;
    unit.gpu = device.identifier;
    describeFrom(&device, unit);
    if (leased.share) {
      const sharing::Declaration* declaration = declarationOf({leased.unit});
      const coordination::ShareSlot slot{*leased.share, declaration ? declaration->replicas : 0};
      unit.share = shareOf(slot, declaration, device.uuid);
    }
    units.push_back(std::move(unit));
  }

  switch (options.format) {
    case OutputFormat::kJson: {
      ordered_json json = ordered_json::object();
      json["format"] = kJsonFormat;
      json["owner_pid"] = owner->owner.pid;
      json["gpus"] = ordered_json::array();
      for (const OwnedUnit& unit : units) json["gpus"].push_back(jsonOf(unit));
      std::cout << json.dump(-1, ' ', false, ordered_json::error_handler_t::replace) << '\n';
      break;
    }
    case OutputFormat::kEnv: {
      std::vector<std::string> visible;
      std::vector<std::string> gpus;
      std::vector<defaultdiscovery::ShareGrant> shares;
      for (const OwnedUnit& unit : units) {
        if (!unit.uuid) {
          printWarning("the UUID of GPU " + unit.gpu +
                       " is not known: CUDA_VISIBLE_DEVICES names it as recorded, which a mask or "
                       "device order the child inherits can make another GPU");
        }
        visible.push_back(unit.uuid.value_or(unit.gpu));
        gpus.push_back(unit.gpu);
        if (unit.share) shares.push_back(*unit.share);
      }
      // One request's units are all whole or all shares; a mix (two resources of one owner)
      // gets whole-GPU variables, the share's limits being the worker's own to apply.
      if (shares.size() != units.size()) shares.clear();
      const defaultdiscovery::EnvironmentChanges changes =
          defaultdiscovery::childEnvironment(visible, gpus, shares);
      for (const std::string& note : changes.notes) printNote(note);
      std::cout << defaultdiscovery::shellLines(changes);
      break;
    }
    default: {
      std::cout << "owner: " << processText(owner->owner.pid);
      if (options.pid && owner->depth > 0) std::cout << ", an ancestor of " << processText(pid);
      std::cout << '\n';
      for (const OwnedUnit& unit : units) std::cout << textOf(unit) << '\n';
      break;
    }
  }
  return kSuccess;
}

}  // namespace flink::cli
