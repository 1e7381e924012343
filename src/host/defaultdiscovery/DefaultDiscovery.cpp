// The default discovery's two steps. See DefaultDiscovery.h.
#include "host/defaultdiscovery/DefaultDiscovery.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "host/enumeration/DeviceIdentifiers.h"
#include "host/enumeration/HostGpus.h"
#include "host/enumeration/KernelGpus.h"
#include "host/enumeration/NvidiaSmi.h"
#include "host/enumeration/NvmlEnumerator.h"
#include "host/enumeration/NvmlTopology.h"
#include "host/nvml/Nvml.h"
#include "host/sharing/MpsDaemon.h"
#include "host/sharing/SharingDeclarations.h"
#include "process/FileDescriptor.h"
#include "util/Strings.h"

namespace flink::defaultdiscovery {
namespace {

using discovery::DiscoveryError;
using Stage = DiscoveryFailure::Stage;

[[noreturn]] void failWith(Stage stage, const std::string& cause, Report& report) {
  throw DiscoveryFailure(stage, cause, std::move(report));
}

/// The same unit twice would be handed out twice; nvidia-smi never lists one twice, a --gpus
/// list may.
std::vector<std::string> withoutDuplicates(std::vector<std::string> gpus, Report& report) {
  std::vector<std::string> unique;
  std::unordered_set<std::string> seen;
  for (std::string& gpu : gpus) {
    if (seen.insert(gpu).second) {
      unique.push_back(std::move(gpu));
    } else {
      report.notes.push_back(
          Notice::note("GPU " + gpu + " is listed more than once; counted once"));
    }
  }
  return unique;
}

/// The placement rule over `host`'s topology, for coordination::AllocationRequest::choose; empty
/// when units go by index (asked for, or nothing known of how they are connected).
/// `readsTopology`: whether the chooser may read the topology itself (plain mode); under the
/// coordination file's lock it uses only a topology read before (nothing slow under the lock),
/// and without one takes the first free units.
std::function<std::vector<std::string>(const std::vector<std::string>&, std::size_t)> chooserFor(
    const HostUnits& host, placement::Policy policy, bool readsTopology = true) {
  if (policy != placement::Policy::kTopology || !host.topologyWanted) return {};
  return [&host, readsTopology](const std::vector<std::string>& free,
                                std::size_t amount) -> std::vector<std::string> {
    // No choice to make: no topology to read.
    if (free.size() <= amount) return free;
    if (!readsTopology && !host.topologyRead) return {};  // the first free ones
    const std::optional<placement::Topology>& topology = host.topology();
    if (!topology || !topology->anythingKnown()) return {};  // the first free ones
    return placement::choose(*topology, free, amount);
  };
}

/// How many of `units` no record of the coordination file names, read without its lock: a hint
/// only (the free set is decided under the lock), to read the topology before the lock where the
/// placement will likely have a choice, and not where every GPU but the one asked for is held.
std::size_t unitsNoRecordNames(const HostUnits& host, const std::vector<std::string>& units,
                               const std::filesystem::path& file) {
  process::FileDescriptor fd(::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd) return units.size();
  std::string text;
  // Two pages of stack: a run's thread may be new, and each page it touches first faults.
  char buffer[8192];
  ssize_t n;
  while ((n = ::read(fd.get(), buffer, sizeof buffer)) > 0 &&
         text.size() <= store::kMaxCoordinationFileBytes) {
    text.append(buffer, static_cast<std::size_t>(n));
  }
  // By the index's record reading (unitsNamedBy's rule), as positions in the index.
  std::vector<bool> named(host.index->size(), false);
  for (const coordination::Record& record : coordination::parseRecords(text).records) {
    for (const discovery::UnitRef ref : host.index->namedByRecord(record.gpu, record.uuid)) {
      named[ref] = true;
    }
  }
  std::size_t unnamed = 0;
  for (const std::string& unit : units) {
    const std::optional<discovery::UnitRef> ref = host.index->find(unit);
    unnamed += ref && named[*ref] ? 0 : 1;
  }
  return unnamed;
}

/// Why fewer units match --select than are requested: "only 2 GPUs match name~H100, 3
/// requested (matching: 2,3)", "no MIG instance matches mig=yes,name~2g, 1 requested"; under a
/// mask, counting those it allows.
std::string selectionShortfall(const HostUnits& host, const std::vector<std::string>& units,
                               const GrantRequest& request) {
  const bool instances =
      !units.empty() && std::all_of(units.begin(), units.end(), [](const std::string& unit) {
        return unit.starts_with("MIG-");
      });
  const std::string noun = instances ? "MIG instance" : "GPU";
  std::string cause = units.empty() ? "no " + noun + " matches "
                      : units.size() == 1
                          ? "only 1 " + noun + " matches "
                          : "only " + std::to_string(units.size()) + " " + noun + "s match ";
  cause += *host.selectedBy;
  if (host.masked) cause += " among those " + host.mask->describe() + " allows";
  cause += ", " + request.amountText + " requested";
  if (!units.empty()) cause += " (matching: " + strings::join(host.answerFor(units), ",") + ")";
  if (host.selectsMigWithoutMig) cause += " (MIG instances are units only with --mig)";
  return cause;
}

/// The lines of a shortfall's details: each once (the allocations of two kinds read the same
/// file), and at most a few a unit, then one that counts the rest of that unit's: a file can hold
/// a great many records of one GPU.
class ShortfallLines {
 public:
  static constexpr std::size_t kShownPerUnit = 8;

  explicit ShortfallLines(std::string firstLine) { lines_.push_back(std::move(firstLine)); }

  void add(const std::string& unit, std::string line) {
    if (!seen_.insert(line).second) return;
    Count& count = counts_[unit];
    if (count.shown < kShownPerUnit) {
      ++count.shown;
      lines_.push_back(std::move(line));
      return;
    }
    if (count.more++ == 0) withMore_.push_back(unit);
  }

  /// The lines, the counts of those left out last.
  std::vector<std::string> take() && {
    for (const std::string& unit : withMore_) {
      lines_.push_back("... and " + std::to_string(counts_[unit].more) +
                       " more like these of GPU " + unit +
                       " (`flink-gpu status` lists every record)");
    }
    return std::move(lines_);
  }

 private:
  struct Count {
    std::size_t shown = 0;
    std::size_t more = 0;
  };
  std::vector<std::string> lines_;
  std::unordered_set<std::string> seen_;
  std::unordered_map<std::string, Count> counts_;
  std::vector<std::string> withMore_;  // in the order their first line was left out
};

/// Why a coordinated request fell short (`fellShort`: the allocation of each kind tried): the
/// cause, counting the units free, held and busy (a related unit held), with the holders among the
/// details. Linear in the records.
[[noreturn]] void failShort(const std::vector<std::string>& units,
                            const discovery::UnitIndex& index, const GrantRequest& request,
                            const std::vector<coordination::Allocation>& fellShort,
                            const usage::Judgement* use,
                            const std::optional<std::string>& selectedBy, Report& report) {
  const std::unordered_set<std::string> hostGpus(units.begin(), units.end());
  std::unordered_set<std::string> heldGpus;
  std::unordered_set<std::string> busyGpus;
  ShortfallLines held("coordination file: " + request.coordinationFile.string());
  for (const coordination::Allocation& allocation : fellShort) {
    const std::unordered_set<std::size_t> failClosed(allocation.failClosed.begin(),
                                                     allocation.failClosed.end());
    // Other owners' first: they are what a person must look for.
    for (const auto* records : {&allocation.heldByOthers, &allocation.heldByRequester}) {
      for (const std::size_t i : *records) {
        const coordination::Record& record = allocation.records[i];
        // The unit the record names, by the index's rule (a container's own index by UUID).
        std::optional<std::string> unit;
        for (const std::string& named : coordination::unitsNamedBy(record, index)) {
          if (hostGpus.count(named)) {
            unit = named;
            break;
          }
        }
        if (!unit) continue;
        heldGpus.insert(*unit);
        held.add(
            *unit,
            "GPU " + *unit + " is " +
                (record.share
                     ? "shared: share " + coordination::formatShareSlot(*record.share) + " is "
                     : std::string()) +
                "held by process " + std::to_string(record.owner.pid) +
                (records == &allocation.heldByRequester ? " (this owner, from an earlier request)"
                 : failClosed.count(i)
                     ? " (its pid cannot be judged from here and its lease file is missing: "
                       "`flink-gpu release --gpu " +
                           *unit + "` frees it)"
                     : ""));
      }
    }
    for (const std::string& gpu : allocation.heldByLeaseOnly) {
      if (!hostGpus.count(gpu) || !heldGpus.insert(gpu).second) continue;
      held.add(gpu, "GPU " + gpu + " is held by a lease of another process, without a record");
    }
  }
  for (const coordination::Allocation& allocation : fellShort) {
    // Not held, but a GPU whose MIG instance is held, or an instance whose GPU is held whole.
    for (const coordination::BlockedUnit& blocked : allocation.blocked) {
      if (hostGpus.count(blocked.gpu)) busyGpus.insert(blocked.gpu);
      held.add(blocked.gpu, coordination::describe(blocked));
    }
    for (const auto& [gpu, related] : allocation.blockedByLeaseOnly) {
      if (!hostGpus.count(gpu) || !busyGpus.insert(gpu).second) continue;
      held.add(gpu, coordination::describeBlockedByLease(gpu, related));
    }
  }
  std::size_t busy = 0;
  for (const std::string& gpu : busyGpus) busy += heldGpus.count(gpu) ? 0 : 1;
  // Free by the records, but used by a process no record explains (passed over with --foreign
  // skip).
  std::vector<std::string> foreign;
  if (use != nullptr && request.foreign == usage::ForeignMode::kSkip) {
    for (const usage::UnitVerdict& verdict : use->units) {
      if (!verdict.busy() || !hostGpus.count(verdict.unit) || heldGpus.count(verdict.unit) ||
          busyGpus.count(verdict.unit)) {
        continue;
      }
      foreign.push_back(usage::describeBusy(verdict));
    }
  }
  const std::size_t free = units.size() - heldGpus.size() - busy - foreign.size();
  std::string cause = "not enough free GPUs" +
                      (selectedBy ? " matching " + *selectedBy : std::string()) + ": " +
                      request.amountText + " requested, " + std::to_string(free) + " free, " +
                      std::to_string(heldGpus.size()) + " held";
  if (busy > 0) cause += ", " + std::to_string(busy) + " busy because a related unit is held";
  if (!foreign.empty()) {
    cause += ", " + std::to_string(foreign.size()) + " busy: " + strings::join(foreign, "; ");
  }
  if (request.oneKind) cause += " (with --mig, whole GPUs and MIG instances are never mixed)";
  std::vector<Notice> heldDetails;
  for (std::string& line : std::move(held).take()) {
    heldDetails.push_back(Notice::detail(std::move(line)));
  }
  report.details.insert(report.details.begin(), heldDetails.begin(), heldDetails.end());
  failWith(Stage::kShortfall, cause, report);
}

/// The groups of `units` to try a group at a time: all of them, or with GrantRequest::oneKind
/// (and units of both kinds) the MIG instances, then the whole GPUs.
std::vector<std::vector<std::string>> unitsByKind(const std::vector<std::string>& units,
                                                  bool oneKind) {
  if (!oneKind) return {units};
  std::vector<std::string> instances;
  std::vector<std::string> whole;
  for (const std::string& unit : units) {
    (unit.starts_with("MIG-") ? instances : whole).push_back(unit);
  }
  if (instances.empty() || whole.empty()) return {units};
  return {std::move(instances), std::move(whole)};
}

/// What NVML says `units` are doing, for GrantRequest::foreign: read where the units came from
/// NVML and the request looks, before the coordination file's lock; empty otherwise.
std::vector<usage::UnitUse> useOf(const HostUnits& host, const std::vector<std::string>& units,
                                  const GrantRequest& request) {
  if (request.foreign == usage::ForeignMode::kIgnore ||
      host.source != discovery::HostGpuSource::kNvml || host.vendorHost) {
    return {};
  }
  return usage::readUse(units, host.devices);
}

/// The GPUs of the host that `declarations` declare shared with MPS, by index: on them the MPS
/// server explains itself.
std::unordered_set<std::string> mpsSharedIn(const HostUnits& host,
                                            const sharing::ParsedDeclarations& declarations) {
  std::unordered_set<std::string> shared;
  const std::vector<const sharing::Declaration*> of =
      sharing::declarationsOf(declarations, *host.index);
  for (discovery::UnitRef ref = 0; ref < of.size(); ++ref) {
    if (of[ref] != nullptr && of[ref]->isMps()) shared.insert((*host.index)[ref].id);
  }
  return shared;
}

/// The GPUs declared shared with MPS beside `file`, by index, whose MPS server explains itself;
/// read only when some process uses one of the units. Declarations that cannot be read declare
/// none here: such a server is then a process no record names (the allocation of shares says
/// why they cannot be read).
std::unordered_set<std::string> mpsSharedGpus(const HostUnits& host,
                                              const std::vector<usage::UnitUse>& use,
                                              const std::filesystem::path& file) {
  const bool anyProcess = std::any_of(use.begin(), use.end(), [](const usage::UnitUse& unit) {
    return unit.processes && !unit.processes->empty();
  });
  if (!anyProcess || !host.index) return {};
  try {
    return mpsSharedIn(host, sharing::readDeclarations(file).parsed);
  } catch (const store::StoreError&) {
    return {};
  }
}

/// What a grant says of the use of its units: the note of units not judged (once), a warning for
/// each unit `granted` that a process no record explains uses (plain mode, --foreign warn), a
/// note for each passed over (--foreign skip in coordination mode), a note for memory in use
/// without a process on a unit granted.
void reportUse(const usage::Judgement& judgement, const std::vector<std::string>& granted,
               const GrantRequest& request, Report& report) {
  if (std::optional<Notice> note = usage::unjudgedNote(judgement)) {
    report.notes.push_back(std::move(*note));
  }
  const std::unordered_set<std::string> given(granted.begin(), granted.end());
  for (const usage::UnitVerdict& verdict : judgement.units) {
    const bool handedOut = given.count(verdict.unit) > 0;
    if (verdict.busy() && handedOut) {
      report.notes.push_back(Notice::warning(
          usage::describeBusy(verdict) + "; handed out anyway (" +
          (request.coordination ? std::string("--foreign warn")
                                : std::string("plain mode leaves no GPU out: every worker is "
                                              "handed the first GPUs")) +
          ")"));
    } else if (verdict.busy() && request.coordination &&
               request.foreign == usage::ForeignMode::kSkip) {
      report.notes.push_back(Notice::note(usage::describeBusy(verdict) + "; not handed out"));
    }
    if (verdict.memoryWithoutProcessMiB && handedOut) {
      report.notes.push_back(Notice::note(usage::describeMemoryWithoutProcess(verdict)));
    }
  }
}

Grant grantRecorded(const HostUnits& host, const std::vector<std::string>& units,
                    const GrantRequest& request, Report& report) {
  if (!coordination::isRunning(request.owner)) {
    failWith(Stage::kOwner,
             "the owner process " + std::to_string(request.owner.pid) +
                 " is not running: GPUs recorded for it would not stay reserved",
             report);
  }
  coordination::AllocationRequest allocationRequest{units, request.amount, request.owner,
                                                    host.related, host.uuids};
  allocationRequest.index = host.index;
  allocationRequest.lease = request.lease;
  allocationRequest.choose = chooserFor(host, request.placement, /*readsTopology=*/false);
  // NVML is asked now, before the lock; the processes are judged under it, with the records read.
  const std::vector<usage::UnitUse> use = useOf(host, units, request);
  const std::unordered_set<std::string> mpsShared =
      mpsSharedGpus(host, use, request.coordinationFile);
  std::optional<usage::Judgement> judgement;
  if (!use.empty()) {
    allocationRequest.unusable = [&](const std::vector<coordination::Record>& records) {
      judgement = usage::judge(use, records, *host.index, mpsShared);
      return request.foreign == usage::ForeignMode::kSkip ? judgement->busyUnits()
                                                          : std::vector<std::string>();
    };
  }

  const std::vector<std::vector<std::string>> kinds = unitsByKind(units, request.oneKind);
  std::optional<coordination::Allocation> satisfied;
  // The allocation of each kind that fell short, for the shortfall's words.
  std::vector<coordination::Allocation> fellShort;
  const std::string file = request.coordinationFile.string();
  // Once each: a second kind's allocation reads the same file, junk and notes again.
  const auto note = [&report](Notice notice) {
    if (std::find(report.notes.begin(), report.notes.end(), notice) == report.notes.end()) {
      report.notes.push_back(std::move(notice));
    }
  };
  for (const std::vector<std::string>& kind : kinds) {
    allocationRequest.gpus = kind;
    coordination::Allocation allocation;
    try {
      allocation =
          coordination::allocate(request.coordinationFile, allocationRequest, request.lockTimeout);
    } catch (const store::StoreError& e) {
      failWith(Stage::kCoordination, e.what(), report);
    }
    for (const std::string& line : allocation.warnings) note(Notice::warning(line));
    for (const std::string& line : allocation.notes) {
      note(Notice::note("coordination file " + file + ": " + line));
    }
    for (const std::string& line : coordination::describeJunk(allocation.junk, file)) {
      note(Notice::note(line));
    }
    if (request.noteReclaimed) {
      for (std::string& line : coordination::describeReclaimed(allocation.reclaimed)) {
        note(Notice::note(std::move(line)));
      }
    }
    if (allocation.satisfied) {
      satisfied = std::move(allocation);
      break;
    }
    fellShort.push_back(std::move(allocation));
  }
  if (!satisfied) {
    if (judgement) {
      if (std::optional<Notice> unjudged = usage::unjudgedNote(*judgement)) {
        report.notes.push_back(std::move(*unjudged));
      }
    }
    failShort(units, *host.index, request, fellShort, judgement ? &*judgement : nullptr,
              host.selectedBy, report);
  }
  coordination::Allocation& allocation = *satisfied;
  if (judgement) reportUse(*judgement, allocation.granted, request, report);

  Grant grant;
  grant.answer = host.answerFor(allocation.granted);
  grant.records.assign(
      allocation.records.end() - static_cast<std::ptrdiff_t>(allocation.granted.size()),
      allocation.records.end());
  grant.granted = std::move(allocation.granted);
  grant.recorded = true;
  grant.leases = std::move(allocation.leases);
  return grant;
}

/// The words for why `gpu` gave no share, for a shortfall's details; `use` says who uses a GPU
/// given none for being busy.
std::string whyUnshared(const coordination::UnsharedGpu& gpu, bool severalGroups,
                        const std::unordered_set<std::string>& inMigMode,
                        const usage::Judgement* use) {
  using Reason = coordination::UnsharedGpu::Reason;
  const std::string name = "GPU " + gpu.gpu;
  if (gpu.reason == Reason::kNotDeclared && inMigMode.count(gpu.gpu)) {
    return name + " is declared shared but is in MIG mode: it gives no share";
  }
  const std::string holder = gpu.heldBy ? "process " + std::to_string(gpu.heldBy->owner.pid)
                                        : "a lease of another process";
  const std::string shares =
      std::to_string(gpu.liveShares) + " of " + std::to_string(gpu.replicas) + " shares held";
  switch (gpu.reason) {
    case Reason::kNotDeclared:
      return name + " is not declared shared";
    case Reason::kHeldWhole:
      return name + " is held whole by " + holder;
    case Reason::kRelatedHeld:
      return name + " is busy: " + gpu.heldBy->gpu + ", which shares its hardware, is held by " +
             holder;
    case Reason::kHeldByOwner:
      return name + " is held by this owner already" +
             std::string(gpu.heldBy && gpu.heldBy->share ? " (a share)" : " (whole)") +
             ": a request never takes two shares of one GPU";
    case Reason::kUnusable:
      if (const usage::UnitVerdict* verdict = use != nullptr ? use->find(gpu.gpu) : nullptr) {
        return "busy: " + usage::describeBusy(*verdict);
      }
      return name + " is busy: a process no record names uses it";
    case Reason::kNoFreeShare:
      return name + " has no free share: " + shares;
    case Reason::kFreeButShort:
      return name + " has a free share (" + shares + ")" +
             (severalGroups ? ", but the GPUs of one request are all time-sliced or all behind "
                              "one MPS pipe directory"
                            : "");
  }
  return name;
}

Grant grantShares(const HostUnits& host, const std::vector<std::string>& units,
                  const GrantRequest& request, Report& report) {
  if (!request.coordination) {
    failWith(Stage::kArguments,
             "--share needs coordination mode (--enable-coordination-mode): a share exists only "
             "as a record of the coordination file",
             report);
  }
  if (host.vendorHost) {
    failWith(Stage::kArguments, "--share is for NVIDIA GPUs only (flink-gpu share)", report);
  }
  sharing::DeclarationsFile declarations;
  try {
    declarations = sharing::readDeclarations(request.coordinationFile);
  } catch (const store::StoreError& e) {
    failWith(Stage::kCoordination,
             std::string(e.what()) +
                 "; no share is handed out while they "
                 "cannot be read",
             report);
  }
  for (const std::string& line : declarations.warnings) {
    report.notes.push_back(Notice::warning(line));
  }
  for (const std::string& line : declarations.notes) {
    report.notes.push_back(
        Notice::note("sharing declarations " + declarations.path.string() + ": " + line));
  }
  // A few lines and a count, whatever the file holds: Flink's driver reads this program's stderr
  // only once it has ended.
  for (const std::string& line :
       sharing::sharingFileOf(request.coordinationFile).describeJunk(declarations.parsed.junk)) {
    report.notes.push_back(Notice::note(line));
  }

  // What is declared of the host's whole GPUs (every one, not only those allowed here).
  std::unordered_map<std::string, const sharing::Declaration*> declarationOf;
  std::unordered_map<std::string, const discovery::GpuDevice*> deviceOf;
  std::unordered_set<std::string> inMigMode;
  bool anyDeclared = false;
  const std::vector<const sharing::Declaration*> declarationOfUnit =
      sharing::declarationsOf(declarations.parsed, *host.index);
  for (const discovery::GpuDevice& device : host.devices) {
    if (device.isMigInstance()) continue;
    deviceOf.emplace(device.identifier, &device);
    const std::optional<discovery::UnitRef> ref = host.index->find(device.identifier);
    const sharing::Declaration* declaration = ref ? declarationOfUnit[*ref] : nullptr;
    if (declaration == nullptr) continue;
    anyDeclared = true;
    if (device.migEnabled) {
      inMigMode.insert(device.identifier);
      continue;
    }
    declarationOf.emplace(device.identifier, declaration);
  }
  if (!anyDeclared) {
    failWith(Stage::kShortfall, "no GPU of this host is declared shared (flink-gpu share)", report);
  }

  coordination::ShareRequest shareRequest;
  std::set<std::string> groups;
  for (const std::string& unit : units) {
    if (!deviceOf.count(unit)) continue;  // a MIG instance: never shared
    shareRequest.gpus.push_back(unit);
    const auto declared = declarationOf.find(unit);
    if (declared == declarationOf.end()) continue;
    const sharing::Declaration& declaration = *declared->second;
    shareRequest.shareable.push_back(coordination::ShareableGpu{
        unit, declaration.replicas, declaration.mpsPipeDirectory.value_or("")});
    groups.insert(shareRequest.shareable.back().group);
  }
  shareRequest.amount = request.amount;
  shareRequest.owner = request.owner;
  shareRequest.related = host.related;
  shareRequest.uuids = host.uuids;
  shareRequest.index = host.index;
  shareRequest.lease = request.lease;
  shareRequest.placement = request.sharePlacement;
  shareRequest.choose = chooserFor(host, request.placement, /*readsTopology=*/false);
  // As for whole GPUs: NVML is asked now, before the lock, of the GPUs that may give a share; the
  // processes are judged under it, with the records read (share holders' among them).
  std::vector<std::string> declaredGpus;
  for (const coordination::ShareableGpu& gpu : shareRequest.shareable) {
    declaredGpus.push_back(gpu.gpu);
  }
  const std::vector<usage::UnitUse> use = useOf(host, declaredGpus, request);
  std::optional<usage::Judgement> judgement;
  if (!use.empty()) {
    shareRequest.unusable = [&, mpsShared = mpsSharedIn(host, declarations.parsed)](
                                const std::vector<coordination::Record>& records) {
      judgement = usage::judge(use, records, *host.index, mpsShared);
      return request.foreign == usage::ForeignMode::kSkip ? judgement->busyUnits()
                                                          : std::vector<std::string>();
    };
  }

  if (!coordination::isRunning(request.owner)) {
    failWith(Stage::kOwner,
             "the owner process " + std::to_string(request.owner.pid) +
                 " is not running: shares recorded for it would not stay reserved",
             report);
  }
  coordination::ShareAllocation allocation;
  try {
    allocation =
        coordination::allocateShares(request.coordinationFile, shareRequest, request.lockTimeout);
  } catch (const store::StoreError& e) {
    failWith(Stage::kCoordination, e.what(), report);
  }
  const std::string file = request.coordinationFile.string();
  for (const std::string& line : allocation.warnings) {
    report.notes.push_back(Notice::warning(line));
  }
  for (const std::string& line : allocation.notes) {
    report.notes.push_back(Notice::note("coordination file " + file + ": " + line));
  }
  for (const std::string& line : coordination::describeJunk(allocation.junk, file)) {
    report.notes.push_back(Notice::note(line));
  }
  if (request.noteReclaimed) {
    for (std::string& line : coordination::describeReclaimed(allocation.reclaimed)) {
      report.notes.push_back(Notice::note(std::move(line)));
    }
  }
  if (!allocation.satisfied) {
    if (judgement) {
      if (std::optional<Notice> unjudged = usage::unjudgedNote(*judgement)) {
        report.notes.push_back(std::move(*unjudged));
      }
    }
    std::vector<Notice> details{
        Notice::detail("coordination file: " + file),
        Notice::detail("sharing declarations: " + declarations.path.string())};
    for (const coordination::UnsharedGpu& gpu : allocation.unshared) {
      details.push_back(Notice::detail(
          whyUnshared(gpu, groups.size() > 1, inMigMode, judgement ? &*judgement : nullptr)));
    }
    report.details.insert(report.details.begin(), details.begin(), details.end());
    failWith(Stage::kShortfall,
             "not enough free GPU shares" +
                 (host.selectedBy ? " of GPUs matching " + *host.selectedBy : std::string()) +
                 ": " + request.amountText + " requested, " + std::to_string(allocation.freeGpus) +
                 " free",
             report);
  }

  Grant grant;
  for (const coordination::GrantedShare& share : allocation.granted) {
    grant.granted.push_back(share.gpu);
  }
  if (judgement) reportUse(*judgement, grant.granted, request, report);
  std::set<std::string> warnedDirectories;
  for (const coordination::GrantedShare& share : allocation.granted) {
    const sharing::Declaration& declaration = *declarationOf.at(share.gpu);
    // A client that cannot reach its daemon runs without MPS, so without the share's limits;
    // exec refuses to run then, a worker told only indices cannot be stopped, so it is told.
    if (request.warnWithoutMpsDaemon && declaration.mpsPipeDirectory &&
        warnedDirectories.insert(*declaration.mpsPipeDirectory).second) {
      if (const std::optional<std::string> missing =
              sharing::missingMpsDaemon(*declaration.mpsPipeDirectory)) {
        report.notes.push_back(
            Notice::warning(*missing +
                            "; until it runs, a CUDA process given this share runs without MPS, "
                            "so without its limits"));
      }
    }
    ShareGrant given{share.slot, declaration.memoryPerShareMiB, declaration.mpsPipeDirectory,
                     std::nullopt};
    if (const auto uuid = host.uuids.find(share.gpu); uuid != host.uuids.end()) {
      given.uuid = uuid->second;
    }
    grant.shares.push_back(std::move(given));
  }
  grant.answer = host.answerFor(grant.granted);
  grant.recorded = true;
  grant.leases = std::move(allocation.leases);
  grant.records.assign(
      allocation.records.end() - static_cast<std::ptrdiff_t>(allocation.granted.size()),
      allocation.records.end());
  return grant;
}

}  // namespace

std::vector<Notice> Report::notices() const {
  std::vector<Notice> all = details;
  all.insert(all.end(), notes.begin(), notes.end());
  return all;
}

const std::optional<placement::Topology>& HostUnits::topology() const {
  if (!topologyRead) {
    std::optional<placement::Topology> read;
    if (topologyWanted) {
      std::vector<std::string> wholeGpus;
      for (const discovery::GpuDevice& device : devices) {
        if (!device.isMigInstance()) wholeGpus.push_back(device.identifier);
      }
      read = discovery::readNvmlTopology(wholeGpus);
    }
    topologyRead.emplace(std::move(read));
  }
  return *topologyRead;
}

std::vector<std::string> HostUnits::answerFor(const std::vector<std::string>& granted) const {
  if (vendorHost) {
    std::unordered_map<std::string, const std::string*> identifierOf;
    for (const discovery::VendorUnit& unit : vendorHost->units) {
      identifierOf.emplace(unit.recordName, &unit.identifier);
    }
    std::vector<std::string> identifiers;
    identifiers.reserve(granted.size());
    for (const std::string& gpu : granted) {
      const auto found = identifierOf.find(gpu);
      identifiers.push_back(found == identifierOf.end() ? gpu : *found->second);
    }
    return identifiers;
  }
  if (!masked && listedAs.empty()) return granted;
  std::vector<std::string> entries;
  entries.reserve(granted.size());
  for (const std::string& gpu : granted) {
    if (masked) {
      entries.push_back(masked->entryOf(gpu));
    } else {
      const auto listed = listedAs.find(gpu);
      entries.push_back(listed == listedAs.end() ? gpu : listed->second);
    }
  }
  return entries;
}

namespace {

/// The --gpus entries as the host's devices, where NVML lists the host's GPUs: each entry that
/// names one of them (an index, NVML's; a whole or MIG UUID, or a prefix only one has) becomes
/// that device, known by its host identifier and UUID; `listed` keeps the entry as written. An
/// entry naming nothing of NVML's stays as it is. `devices` becomes NVML's devices (for the
/// UUIDs and MIG relations) and the entries that named none.
/// @throws DiscoveryFailure (kArguments) for an entry several GPUs' UUIDs begin with, and for
///         two entries naming one GPU (say by index and by UUID): handed out as two, one GPU
///         would go to two workers.
std::vector<discovery::GpuDevice> resolveListed(
    std::vector<discovery::GpuDevice>& devices, std::vector<discovery::GpuDevice> host,
    std::unordered_map<std::string, std::string>& listed, Report& report) {
  std::vector<discovery::GpuDevice> units;
  std::vector<discovery::GpuDevice> unresolved;
  for (discovery::GpuDevice& entry : devices) {
    const bool byIndex = !device::isUuid(entry.identifier);
    const discovery::GpuDevice* device = nullptr;
    if (byIndex) {
      // NVML's index (parseGpuList's canonical form), as the host's identifiers are; not CUDA's
      // order, as in a mask.
      const auto found = std::find_if(host.begin(), host.end(), [&](const discovery::GpuDevice& d) {
        return !d.isMigInstance() && d.identifier == entry.identifier;
      });
      if (found != host.end()) device = &*found;
    } else {
      const discovery::EntryMatch match =
          discovery::matchVisibleDeviceEntry(entry.identifier, host);
      if (!match.ambiguous.empty()) {
        failWith(Stage::kArguments,
                 "GPU " + entry.identifier + " in --gpus is " +
                     discovery::describeAmbiguity(match.ambiguous) + ": give a whole UUID",
                 report);
      }
      device = match.device;
    }
    if (device == nullptr) {
      units.push_back(entry);
      unresolved.push_back(std::move(entry));
      continue;
    }
    const auto [named, fresh] = listed.emplace(device->identifier, entry.identifier);
    if (!fresh && named->second != entry.identifier) {
      failWith(Stage::kArguments,
               "--gpus names " + discovery::describeDevice(*device) + " twice, as " +
                   named->second + " and as " + entry.identifier +
                   ": it would go to two workers; list it once",
               report);
    }
    units.push_back(*device);  // listed twice alike: counted once, with a note, below
  }
  host.insert(host.end(), std::make_move_iterator(unresolved.begin()),
              std::make_move_iterator(unresolved.end()));
  devices = std::move(host);
  return units;
}

}  // namespace

HostUnits findHostUnits(const HostUnitsOptions& options, Report& report) {
  discovery::HostGpuOptions hostOptions;
  hostOptions.listed = options.listed;
  hostOptions.mig = options.mig;
  hostOptions.nvidiaSmi.ownProcessGroup = options.inProcess;
  // The topology is read when a placement needs it (HostUnits::topology), not with the devices.
  hostOptions.topology = false;
  if (!options.listed) {
    const discovery::TimeoutSetting timeout =
        discovery::parseNvidiaSmiTimeout(std::getenv("NVIDIA_SMI_TIMEOUT"));
    if (timeout.note) report.notes.push_back(*timeout.note);
    hostOptions.nvidiaSmi.timeout = timeout.timeout;
    if (options.timeLimit) {
      hostOptions.nvidiaSmi.timeout = std::min(hostOptions.nvidiaSmi.timeout, *options.timeLimit);
    }
  }

  // One initialisation of NVML for the enumeration, the health probe and the topology (see
  // holdSession), kept by the HostUnits returned.
  std::shared_ptr<nvml::NvmlSession> heldNvml =
      options.listed ? nullptr : std::shared_ptr<nvml::NvmlSession>(nvml::holdSession());
  discovery::HostGpus found;
  try {
    found = discovery::enumerateHostGpus(hostOptions);
  } catch (const DiscoveryError& e) {
    for (const std::string& line : e.details()) report.details.push_back(Notice::detail(line));
    throw DiscoveryFailure(Stage::kEnumeration, e.what(), std::move(report), e.kind());
  }
  report.details = found.found.notices;

  HostUnits host;
  host.source = found.source;
  // With --mig, a GPU in MIG mode is handed out as its instances (by MIG UUID), never whole.
  std::vector<discovery::GpuDevice> units;
  if (options.listed) {
    // NVML's GPUs, where it answers; a list is taken as written where it does not, or lists none.
    std::optional<discovery::Enumeration> nvml;
    try {
      nvml = std::move(discovery::attemptNvmlEnumeration(false).found);
    } catch (const DiscoveryError&) {
      nvml.reset();  // NVML works but lists no GPU: nothing to resolve against
    }
    units =
        nvml ? resolveListed(found.found.devices, std::move(nvml->devices), host.listedAs, report)
             : found.found.devices;
  } else {
    units = discovery::allocatableUnits(found.found.devices, options.mig);
  }
  // The one place --select applies: what does not match is no candidate, for every step below
  // and for grantUnits (not drained, judged for health, masked, recorded or noted).
  if (options.select) {
    discovery::SelectedUnits selected = discovery::selectUnits(*options.select, std::move(units));
    units = std::move(selected.units);
    report.notes.insert(report.notes.end(), selected.notes.begin(), selected.notes.end());
    // Cut and made printable: a selector from exec may be of any length and hold anything.
    host.selectedBy = strings::quoteForMessage(options.select->text());
    host.selectsMigWithoutMig =
        !options.mig && !options.listed && options.select->onlyMigInstances();
  }
  // A GPU the kernel's driver excludes (NVreg_ExcludedGpus) is never handed out, whatever listed
  // it: NVML lists none, but a --gpus list or another container's view may name one.
  {
    const discovery::KernelGpus kernel = discovery::readKernelGpus();
    if (!kernel.excludedGpus().empty()) {
      std::erase_if(units, [&](const discovery::GpuDevice& unit) {
        const discovery::KernelGpu* excluded = discovery::excludedGpuOf(unit, kernel);
        if (excluded == nullptr) return false;
        report.notes.push_back(
            Notice::note("GPU " + unit.identifier +
                         " is not handed out: the kernel's driver excludes it (\"GPU Excluded: "
                         "Yes\" in " +
                         excluded->file.string() + ")"));
        return true;
      });
    }
    for (const Notice& notice : kernel.notices) report.notes.push_back(notice);
  }
  // The one index of the host's devices, for the health records and every reader of the
  // coordination file's (a UnitRef is a device's position: the devices are not changed below).
  auto index =
      std::make_shared<const discovery::UnitIndex>(discovery::UnitIndex::of(found.found.devices));
  health::FilteredUnits healthy;
  try {
    healthy = health::filterUnhealthy(std::move(units), *index,
                                      found.source == discovery::HostGpuSource::kNvml,
                                      options.health, options.coordinationFile);
  } catch (const health::HealthRecordsUnreadable& e) {
    failWith(Stage::kHealth,
             std::string(e.what()) +
                 "; no GPU is handed out while they cannot be read, since a drained or unhealthy "
                 "GPU could be among them (--health ignore reads none)",
             report);
  }
  report.notes.insert(report.notes.end(), healthy.notices.begin(), healthy.notices.end());
  if (options.mig) {
    for (const std::string& gpu : discovery::migGpusWithoutInstances(found.found.devices)) {
      report.notes.push_back(Notice::note("GPU " + gpu +
                                          " is in MIG mode but has no MIG instances, so it offers "
                                          "none (create them with nvidia-smi mig -cgi <profiles> "
                                          "-C)"));
    }
  }
  host.gpus = withoutDuplicates(discovery::identifiersOf(healthy.units), report);
  host.devices = std::move(found.found.devices);
  host.related = discovery::relatedUnits(host.devices);
  host.uuids = discovery::uuidsByIdentifier(host.devices);
  host.index = std::move(index);
  host.topologyWanted = options.topology && found.source == discovery::HostGpuSource::kNvml;
  host.nvmlSession = std::move(heldNvml);

  // The worker's own CUDA_VISIBLE_DEVICES (from its scheduler) limits what it may have; a list
  // given with --gpus is the script's own answer and is taken as it is.
  if (!options.listed) host.mask = discovery::inheritedVisibleDevices();
  if (host.mask) {
    try {
      host.masked = discovery::unitsUnderMask(*host.mask, host.devices, options.mig,
                                              discovery::inheritedPciBusOrder());
    } catch (const DiscoveryError& e) {
      std::vector<Notice> details;
      for (const std::string& line : e.details()) details.push_back(Notice::detail(line));
      report.details.insert(report.details.begin(), details.begin(), details.end());
      failWith(Stage::kMask, e.what(), report);
    }
    report.details.insert(report.details.end(), host.masked->warnings.begin(),
                          host.masked->warnings.end());
    // Only units that are still there after the health filter.
    const std::unordered_set<std::string> healthyUnits(host.gpus.begin(), host.gpus.end());
    std::vector<std::string> allowed;
    for (const std::string& gpu : host.masked->hostIdentifiers) {
      if (healthyUnits.count(gpu)) allowed.push_back(gpu);
    }
    host.gpus = std::move(allowed);
  }
  return host;
}

std::vector<std::string> unitsNotLost(const HostUnits& host, Report& report) {
  if (!host.topologyRead || !*host.topologyRead) return host.gpus;
  std::unordered_map<std::string, std::string> lost;  // GPU index → NVML's failure
  for (const placement::GpuTopology& gpu : (*host.topologyRead)->gpus()) {
    if (gpu.lost) lost.emplace(gpu.identifier, *gpu.lost);
  }
  if (lost.empty()) return host.gpus;
  // A MIG instance goes with its GPU.
  std::unordered_map<std::string, std::string> parentOf;
  for (const discovery::GpuDevice& device : host.devices) {
    if (device.isMigInstance()) {
      parentOf.emplace(device.identifier, std::to_string(device.mig->parentIndex));
    }
  }
  std::vector<std::string> units;
  for (const std::string& gpu : host.gpus) {
    const auto parent = parentOf.find(gpu);
    const std::string& index = parent == parentOf.end() ? gpu : parent->second;
    const auto found = lost.find(index);
    if (found == lost.end()) {
      units.push_back(gpu);
      continue;
    }
    // A fault of the host an operator must hear of, as a GPU the enumeration left out.
    report.notes.push_back(Notice::gpuLeftOut(
        "GPU " + gpu +
        " is left out: " + (parent == parentOf.end() ? "" : "its GPU " + index + " is ") +
        "lost: " + found->second + " (it answered a topology query so)"));
  }
  return units;
}

Grant grantUnits(const HostUnits& host, const GrantRequest& request, Report& report) {
  // Nothing slow under the lock: where the placement may have a choice to make, its topology
  // (NVML queries that grow with the square of the GPUs) is read now, and a GPU it finds lost
  // is left out.
  if (chooserFor(host, request.placement) && host.gpus.size() > request.amount &&
      (!request.coordination ||
       unitsNoRecordNames(host, host.gpus, request.coordinationFile) != request.amount)) {
    (void)host.topology();
  }
  const std::vector<std::string> units = unitsNotLost(host, report);
  if (request.share) return grantShares(host, units, request, report);
  if (units.size() < request.amount) {
    if (host.vendorHost && host.vendorHost->mask) {
      failWith(
          Stage::kShortfall,
          "only " + std::to_string(units.size()) + " GPU(s) allowed by " + *host.vendorHost->mask +
              ", " + request.amountText + " requested" +
              (units.empty() ? std::string()
                             : " (allowed: " + strings::join(host.answerFor(units), ",") + ")"),
          report);
    }
    if (host.selectedBy) {
      failWith(Stage::kShortfall, selectionShortfall(host, units, request), report);
    }
    if (host.masked) {
      failWith(Stage::kShortfall,
               "only " + std::to_string(units.size()) + " GPU(s) allowed by " +
                   host.mask->describe() + ", " + request.amountText +
                   " requested (allowed: " + strings::join(host.masked->entries, ",") + ")",
               report);
    }
    failWith(Stage::kShortfall,
             "only " + std::to_string(units.size()) + " GPU(s) found, " + request.amountText +
                 " requested (found: " +
                 strings::join(host.vendorHost ? host.answerFor(units) : units, ",") + ")",
             report);
  }
  if (request.coordination) return grantRecorded(host, units, request, report);

  Grant grant;
  if (const auto choose = chooserFor(host, request.placement)) {
    grant.granted = choose(units, request.amount);
  }
  if (grant.granted.size() != request.amount) {
    grant.granted.assign(units.begin(),
                         units.begin() + static_cast<std::ptrdiff_t>(request.amount));
  }
  // Plain mode records nothing, so no record explains a process: a warning, never a GPU left out.
  if (const std::vector<usage::UnitUse> use = useOf(host, grant.granted, request); !use.empty()) {
    reportUse(
        usage::judge(use, {}, *host.index, mpsSharedGpus(host, use, request.coordinationFile)),
        grant.granted, request, report);
  }
  grant.answer = host.answerFor(grant.granted);
  return grant;
}

void giveBack(const std::filesystem::path& coordinationFile,
              const std::vector<coordination::Record>& records,
              std::chrono::milliseconds lockTimeout) {
  if (records.empty()) return;
  coordination::release(
      coordinationFile,
      [&](const coordination::Record& record) {
        return std::find(records.begin(), records.end(), record) != records.end();
      },
      lockTimeout);
}

HostUnitsOptions hostUnitsOptionsFor(const DiscoveryArguments& args) {
  HostUnitsOptions options;
  options.listed = args.gpus;
  options.mig = args.mig;
  options.select = args.select;
  options.topology = args.placement == placement::Policy::kTopology;
  // parseDiscoveryArguments accepts only the three modes.
  options.health = args.health;
  options.coordinationFile = args.coordinationFile.path;
  return options;
}

GrantRequest grantRequestFor(const DiscoveryArguments& args, const coordination::Owner& owner) {
  GrantRequest request;
  request.amount = args.amount;
  request.amountText = args.amountText;
  request.coordination = args.coordination;
  request.coordinationFile = args.coordinationFile.path;
  request.owner = owner;
  request.placement = args.placement;
  request.share = args.share;
  request.sharePlacement = args.sharePlacement;
  request.foreign = args.foreign;
  return request;
}

}  // namespace flink::defaultdiscovery
