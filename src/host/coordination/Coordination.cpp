// The coordination file's records: parsing and formatting them, the allocation rule, and the
// changes that blank records in place and append new ones. See Coordination.h for the contract.
#include "host/coordination/Coordination.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <iterator>
#include <limits>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "host/coordination/RecordEdits.h"
#include "host/enumeration/DeviceIdentifiers.h"
#include "host/enumeration/UnitIndex.h"
#include "host/store/LockedFile.h"
#include "process/FileDescriptor.h"
#include "util/Strings.h"

namespace flink::coordination {
namespace {

namespace fs = std::filesystem;
using process::FileDescriptor;

template <typename Int>
std::optional<Int> parseDecimal(std::string_view text) {
  Int value{};
  if (text.empty() || text.front() == '-' || text.front() == '+') return std::nullopt;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

/// A boot id as the kernel writes it (a UUID): hex digits and dashes, at most 64 characters.
bool isBootId(std::string_view text) {
  if (text.empty() || text.size() > 64) return false;
  return std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == '-';
  });
}

struct OwnerHash {
  std::size_t operator()(const Owner& owner) const noexcept {
    return std::hash<pid_t>{}(owner.pid) * 31 +
           std::hash<std::uint64_t>{}(owner.startTime.value_or(~std::uint64_t{0}));
  }
};

/// `probe` asked once per distinct owner: a file may hold many records of one owner, and each
/// answer is a read of /proc. For one read of the file (under its lock).
class RememberedOwners {
 public:
  explicit RememberedOwners(LivenessProbe probe) : probe_(std::move(probe)) {}

  bool operator()(const Owner& owner) {
    const auto [it, inserted] = known_.try_emplace(owner, false);
    if (inserted) it->second = probe_(owner);
    return it->second;
  }

 private:
  LivenessProbe probe_;
  std::unordered_map<Owner, bool, OwnerHash> known_;
};

}  // namespace

namespace {

/// The record on one line, or nullopt for a line that is not one: `<gpu> <pid>`, then an
/// optional start time, then `key=value` fields, separated by spaces or tabs.
std::optional<Record> parseRecord(std::string_view line) {
  // Split in place: a file holds a record for every GPU of the host, read at every allocation.
  std::string_view rest = line;
  const std::string_view gpu = strings::nextToken(rest);
  const std::string_view pidText = strings::nextToken(rest);
  if (pidText.empty() || !device::isDeviceIdentifier(gpu)) return std::nullopt;
  const std::optional<pid_t> pid = parseDecimal<pid_t>(pidText);
  if (!pid || *pid <= 0) return std::nullopt;
  Record record{std::string(gpu), Owner{*pid, std::nullopt, std::nullopt}};
  std::string_view field = strings::nextToken(rest);
  if (!field.empty() && field.find('=') == std::string_view::npos) {
    record.owner.startTime = parseDecimal<std::uint64_t>(field);
    if (!record.owner.startTime) return std::nullopt;
    field = strings::nextToken(rest);
  }
  for (; !field.empty(); field = strings::nextToken(rest)) {
    const std::size_t equals = field.find('=');
    if (equals == std::string_view::npos || equals == 0 || equals + 1 == field.size()) {
      return std::nullopt;
    }
    const std::string_view key = field.substr(0, equals);
    const std::string_view value = field.substr(equals + 1);
    if (key == "uuid") {
      if (record.uuid || !device::isDeviceIdentifier(value)) return std::nullopt;
      record.uuid = std::string(value);
    } else if (key == "share" && !record.share && parseShareSlot(value)) {
      record.share = parseShareSlot(value);
    } else if (key == "lease") {
      if (record.lease) return std::nullopt;
      record.lease = std::string(value);
    } else if (key == "leasefile") {
      const std::size_t colon = value.find(':');
      if (record.leaseFile || colon == std::string_view::npos) return std::nullopt;
      const auto device = parseDecimal<std::uint64_t>(value.substr(0, colon));
      const auto inode = parseDecimal<std::uint64_t>(value.substr(colon + 1));
      if (!device || !inode) return std::nullopt;
      record.leaseFile = LeaseFile{*device, *inode};
    } else if (key == "boot") {
      if (record.owner.bootId || !isBootId(value)) return std::nullopt;
      record.owner.bootId = std::string(value);
    } else if (key == "pidns") {
      if (record.owner.pidNamespace) return std::nullopt;
      record.owner.pidNamespace = parseDecimal<std::uint64_t>(value);
      if (!record.owner.pidNamespace) return std::nullopt;
    } else {
      record.extra.emplace_back(field);
    }
  }
  return record;
}

}  // namespace

std::optional<ShareSlot> parseShareSlot(std::string_view text) {
  const std::size_t slash = text.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  const std::optional<unsigned> index = parseDecimal<unsigned>(text.substr(0, slash));
  const std::optional<unsigned> count = parseDecimal<unsigned>(text.substr(slash + 1));
  if (!index || !count || *count == 0 || *count > kMaxShareCount || *index >= *count)
    return std::nullopt;
  return ShareSlot{*index, *count};
}

std::string formatShareSlot(const ShareSlot& slot) {
  return std::to_string(slot.index) + '/' + std::to_string(slot.count);
}

std::vector<std::string> describeJunk(const std::vector<JunkLine>& junk, const std::string& file) {
  return store::describeJunk(junk, file, "record", "`flink-gpu release --junk` removes them");
}

ParsedRecords parseRecords(std::string_view text) {
  ParsedRecords parsed;
  std::size_t lineNumber = 0;
  std::size_t offset = 0;
  const std::vector<std::string_view> lines = strings::split(text, '\n');
  // Room for a record on each line that is not blank, made once: a vector grown as it goes
  // would copy a file at its limit of short records (half a million of them, ~250 bytes each)
  // several times and hold two copies at once. What junk leaves unused is never touched.
  // Which lines are blank is told once: a padded file's blank lines are kilobytes each.
  std::vector<bool> blank(lines.size());
  std::size_t expected = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    blank[i] = strings::isBlank(lines[i]);
    if (!blank[i]) ++expected;
  }
  parsed.records.reserve(expected);
  parsed.recordSpans.reserve(expected);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    ++lineNumber;
    const LineSpan span{offset, line.size()};
    offset += line.size() + 1;
    if (blank[i]) continue;
    if (std::optional<Record> record = parseRecord(line)) {
      parsed.records.push_back(std::move(*record));
      parsed.recordSpans.push_back(span);
    } else {
      parsed.junk.push_back(JunkLine{lineNumber, std::string(strings::trim(line))});
      parsed.junkSpans.push_back(span);
    }
  }
  return parsed;
}

std::string formatRecords(const std::vector<Record>& records) {
  std::string text;
  text.reserve(records.size() * 48);
  for (const Record& record : records) {
    text += record.gpu;
    // An AMD or Intel record holds no space at all: Flink's script, which knows GPUs by index,
    // neither reads it (`grep "^<gpu> "`) nor deletes it (`sed "/<gpu> /d"`).
    text += device::isVendorUnitName(record.gpu) ? '\t' : ' ';
    text += std::to_string(record.owner.pid);
    if (record.owner.startTime) text += '\t' + std::to_string(*record.owner.startTime);
    if (record.uuid) text += "\tuuid=" + *record.uuid;
    if (record.share) text += "\tshare=" + formatShareSlot(*record.share);
    if (record.owner.pidNamespace) text += "\tpidns=" + std::to_string(*record.owner.pidNamespace);
    if (record.owner.bootId) text += "\tboot=" + *record.owner.bootId;
    if (record.lease) text += "\tlease=" + *record.lease;
    if (record.leaseFile) {
      text += "\tleasefile=" + std::to_string(record.leaseFile->device) + ':' +
              std::to_string(record.leaseFile->inode);
    }
    for (const std::string& field : record.extra) text += '\t' + field;
    text += '\n';
  }
  return text;
}

namespace {

/// Why `unit` is busy while `related` is held: "its MIG instance MIG-… is held …".
std::string whyBusy(const std::string& unit, const std::string& related,
                    const std::string& holder) {
  const auto isMig = [](std::string_view gpu) { return gpu.starts_with("MIG-"); };
  // An Intel tile's record name is its card's and "/<tile>".
  const auto isTile = [](std::string_view gpu) {
    return gpu.starts_with(device::kIntelRecordPrefix) && gpu.find('/') != std::string_view::npos;
  };
  if (!isMig(unit) && isMig(related)) return "its MIG instance " + related + holder;
  if (isMig(unit) && !isMig(related))
    return "GPU " + related + ", which it is carved from," + holder;
  if (!isTile(unit) && isTile(related)) return "its tile " + related + holder;
  if (isTile(unit) && !isTile(related))
    return "card " + related + ", which it is part of," + holder;
  return "GPU " + related + ", which shares its hardware," + holder;
}

}  // namespace

std::string describe(const BlockedUnit& blocked) {
  return "GPU " + blocked.gpu + " is busy: " +
         whyBusy(blocked.gpu, blocked.heldBy.gpu,
                 " is held by process " + std::to_string(blocked.heldBy.owner.pid));
}

std::vector<std::string> describeReclaimed(const std::vector<Record>& reclaimed,
                                           std::size_t shown) {
  // The first `shown` records, a line repeated told once, then how many more.
  std::vector<std::string> lines;
  std::size_t told = 0;
  for (; told < reclaimed.size() && told < shown; ++told) {
    const Record& record = reclaimed[told];
    std::string line = "took back " +
                       (record.share ? "share " + formatShareSlot(*record.share) + " of GPU "
                                     : std::string("GPU ")) +
                       record.gpu + " from process " + std::to_string(record.owner.pid) +
                       ", which is no longer running";
    if (std::find(lines.begin(), lines.end(), line) == lines.end())
      lines.push_back(std::move(line));
  }
  if (told < reclaimed.size()) {
    lines.push_back("... and took back " + std::to_string(reclaimed.size() - told) +
                    " more records of processes that are no longer running");
  }
  return lines;
}

Liveness judge(const Record& record, const LivenessProbe& isRunningProbe, const LeaseProbe& lease,
               const liveness::Reader& reader) {
  return liveness::judge(
      liveness::Holder{record.owner, record.lease.has_value()}, reader, isRunningProbe,
      [&] { return lease ? lease(*record.lease, record.leaseFile) : LeaseState::kMissing; });
}

namespace {

/// Why the pid of `owner` says nothing here: "another pid namespace", "this process has no /proc
/// of its own pid namespace", …
std::string whyPidSaysNothing(const Owner& owner, const liveness::Reader& reader) {
  switch (liveness::namespaceOf(owner, reader)) {
    case liveness::Namespace::kOther:
      return "another pid namespace";
    case liveness::Namespace::kUnknown:
      if (!reader.ownProc) {
        return "this process has no /proc of its own pid namespace, so no pid can be judged here";
      }
      return "its writer could not tell its own pid namespace (it had no /proc)";
    case liveness::Namespace::kSame:
      break;
  }
  return !owner.startTime ? "no start time recorded" : "its owner is gone";
}

}  // namespace

std::string describeLiveness(const RecordStatus& status) {
  const liveness::Reader& reader = liveness::HostFacts::system().reader();
  const Owner& owner = status.record.owner;
  const bool foreign = liveness::namespaceOf(owner, reader) != liveness::Namespace::kSame;
  switch (status.liveness) {
    case Liveness::kRunning:
      return "running";
    case Liveness::kLeaseHeld:
      return !foreign                   ? "lease held by another process"
             : status.otherPidNamespace ? "other pid namespace, lease held"
                                        : "lease held (" + whyPidSaysNothing(owner, reader) + ")";
    case Liveness::kUnjudgeable:
      return status.otherPidNamespace
                 ? "other pid namespace"
                 : "held: it cannot be judged from here (" + whyPidSaysNothing(owner, reader) +
                       ", and it has no lease); `flink-gpu release` frees it";
    case Liveness::kLeaseMissing:
      return "held: its lease file is missing, and its pid cannot show that nothing it started "
             "still holds the lease (" +
             whyPidSaysNothing(owner, reader) + "); `flink-gpu release` frees it";
    case Liveness::kLeaseUnopenable:
      return "held: its lease file cannot be opened by this user, and its pid cannot show it gone "
             "(" +
             whyPidSaysNothing(owner, reader) + ")";
    case Liveness::kGone:
      return "gone";
    case Liveness::kEarlierBoot:
      return "gone (an earlier boot)";
  }
  return "gone";
}

namespace {

template <typename Request>
std::shared_ptr<const discovery::UnitIndex> indexOf(const Request& request) {
  if (request.index) return request.index;
  return std::make_shared<const discovery::UnitIndex>(
      discovery::UnitIndex::ofIdentifiers(request.gpus, request.uuids, request.related));
}

}  // namespace

std::vector<std::string> unitsNamedBy(const Record& record, const discovery::UnitIndex& index) {
  std::vector<std::string> units;
  for (const discovery::UnitRef ref : index.namedByRecord(record.gpu, record.uuid)) {
    units.push_back(index[ref].id);
  }
  return units;
}

std::string describeBlockedByLease(const std::string& unit, const std::string& related) {
  return "GPU " + unit + " is busy: " +
         whyBusy(unit, related, " is held by a lease of another process, without a record");
}

namespace {

/// The rule over `request.gpus`, those passed over for their leases taken out already: which
/// units are free by the records, and which of them to grant. What it gives is not final: its
/// `records` are only those of `granted`, and the records it names (heldByOthers, failClosed,
/// heldByRequester, reclaimedIndices) are named by their index in `current.records`; keepRecords
/// makes it the allocation.
Allocation planUnits(const ParsedRecords& current, const AllocationRequest& request,
                     const discovery::UnitIndex& index, const liveness::Reader& reader,
                     const LivenessProbe& isRunningProbe, LeaseSpace& space) {
  Allocation allocation;

  RememberedOwners running(isRunningProbe);
  const LivenessProbe ownerRunning = [&running](const Owner& owner) { return running(owner); };
  const LeaseProbe leaseOf = [&](const std::string& name, const std::optional<LeaseFile>& file) {
    return space.state(name, file);
  };

  // Which units a record holds: the one rule of the host's index (host/enumeration/UnitIndex.h).
  const auto unitsOf = [&](const Record& record) { return unitsNamedBy(record, index); };

  // Units held (the requester's own included: each request takes new GPUs, as in Flink's
  // script); records of gone owners by unit, taken back only when their unit is needed; records
  // of an earlier boot dropped now.
  std::unordered_set<std::string> taken;
  std::vector<const Record*> holding;  // the records behind `taken`, in the file's order
  std::vector<std::string> holdingUnit;
  std::unordered_map<std::string, std::vector<std::size_t>> goneByUnit;
  std::vector<bool> dropped(current.records.size(), false);
  for (std::size_t i = 0; i < current.records.size(); ++i) {
    const Record& record = current.records[i];
    // A two-field record (Flink's script) with the requester's pid is the requester's too.
    const bool own = sameProcess(record.owner, request.owner);
    const Liveness liveness =
        own ? Liveness::kRunning : judge(record, ownerRunning, leaseOf, reader);
    const std::vector<std::string> units = unitsOf(record);
    if (holdsGpu(liveness)) {
      for (const std::string& unit : units) {
        taken.insert(unit);
        holding.push_back(&record);
        holdingUnit.push_back(unit);
      }
      (own ? allocation.heldByRequester : allocation.heldByOthers).push_back(i);
      if (liveness == Liveness::kLeaseMissing) allocation.failClosed.push_back(i);
    } else if (liveness == Liveness::kEarlierBoot) {
      dropped[i] = true;
    } else {
      for (const std::string& unit : units) goneByUnit[unit].push_back(i);
    }
  }

  // The relations both ways, among distinct units: each unit's neighbours. Built only when there
  // are relations, so that a plain request costs nothing more.
  std::unordered_map<std::string, std::vector<std::string>> neighbours;
  for (const auto& [unit, relatedUnits] : request.related) {
    for (const std::string& other : relatedUnits) {
      if (other == unit) continue;
      for (const auto& [from, to] : {std::pair{&unit, &other}, std::pair{&other, &unit}}) {
        std::vector<std::string>& list = neighbours[*from];
        if (std::find(list.begin(), list.end(), *to) == list.end()) list.push_back(*to);
      }
    }
  }
  const auto neighboursOf = [&](const std::string& gpu) -> const std::vector<std::string>* {
    if (neighbours.empty()) return nullptr;
    const auto it = neighbours.find(gpu);
    return it == neighbours.end() ? nullptr : &it->second;
  };

  // GPUs that no record holds, but a related unit of which one does.
  std::unordered_set<std::string> blocked;
  if (!neighbours.empty() && !holding.empty()) {
    std::unordered_map<std::string, std::vector<std::size_t>> holders;
    for (std::size_t i = 0; i < holding.size(); ++i) holders[holdingUnit[i]].push_back(i);
    std::vector<std::size_t> blockers;
    for (const std::string& gpu : request.gpus) {
      const std::vector<std::string>* related = neighboursOf(gpu);
      if (related == nullptr || taken.count(gpu) || blocked.count(gpu)) continue;
      blockers.clear();
      for (const std::string& other : *related) {
        const auto it = holders.find(other);
        if (it == holders.end()) continue;
        blockers.insert(blockers.end(), it->second.begin(), it->second.end());
      }
      if (blockers.empty()) continue;
      blocked.insert(gpu);
      // In the file's order, whatever the relations' order.
      std::sort(blockers.begin(), blockers.end());
      for (const std::size_t i : blockers) {
        allocation.blocked.push_back(BlockedUnit{gpu, *holding[i]});
      }
    }
  }

  // A unit of a gone owner (its own record, or a related unit's): a crashed owner's children may
  // still use it, so it goes only when the units no record names are not enough.
  const auto ofGoneOwner = [&](const std::string& gpu) {
    if (goneByUnit.count(gpu)) return true;
    if (const std::vector<std::string>* related = neighboursOf(gpu)) {
      for (const std::string& other : *related) {
        if (goneByUnit.count(other)) return true;
      }
    }
    return false;
  };

  std::unordered_set<std::string> grantedSet;
  std::vector<std::string> granted;
  const auto grantable = [&](const std::string& gpu) {
    if (taken.count(gpu) || blocked.count(gpu) || grantedSet.count(gpu)) return false;
    if (const std::vector<std::string>* related = neighboursOf(gpu)) {
      for (const std::string& other : *related) {
        if (grantedSet.count(other)) return false;
      }
    }
    return true;
  };
  const auto grant = [&](const std::string& gpu) {
    if (!grantable(gpu)) return false;
    granted.push_back(gpu);
    grantedSet.insert(gpu);
    return true;
  };
  // The free units of one tier, in `gpus` order, that can still go with what is granted.
  const auto freeUnits = [&](bool goneTier) {
    std::vector<std::string> free;
    std::unordered_set<std::string> seen;
    for (const std::string& gpu : request.gpus) {
      if (ofGoneOwner(gpu) == goneTier && grantable(gpu) && seen.insert(gpu).second) {
        free.push_back(gpu);
      }
    }
    return free;
  };
  // Grants `wanted` more of `free`: the placement rule's choice (host/placement/Placement.h) where
  // it gives one that fits, else the first ones in order. A chooser's failure never fails the
  // allocation.
  const auto take = [&](const std::vector<std::string>& free, std::size_t wanted) {
    const std::size_t before = granted.size();
    // Only where there is a choice to make: the placement rule may read the topology.
    if (request.choose && wanted > 0 && free.size() > wanted) {
      std::vector<std::string> chosen;
      try {
        chosen = request.choose(free, wanted);
      } catch (...) {
        chosen.clear();
      }
      const std::unordered_set<std::string> freeSet(free.begin(), free.end());
      bool valid = chosen.size() == wanted;
      for (std::size_t i = 0; valid && i < chosen.size(); ++i) {
        valid = freeSet.count(chosen[i]) && grant(chosen[i]);
      }
      if (!valid) {
        for (std::size_t i = before; i < granted.size(); ++i) grantedSet.erase(granted[i]);
        granted.resize(before);
      }
    }
    for (const std::string& gpu : free) {
      if (granted.size() >= before + wanted) break;
      grant(gpu);
    }
  };
  const std::vector<std::string> unrecorded = freeUnits(false);
  if (unrecorded.size() >= request.amount) {
    take(unrecorded, request.amount);
  } else if (unrecorded.size() + freeUnits(true).size() >= request.amount) {
    take(unrecorded, unrecorded.size());
    if (granted.size() < request.amount) take(freeUnits(true), request.amount - granted.size());
  }

  allocation.satisfied = request.amount > 0 && granted.size() == request.amount;
  if (allocation.satisfied) {
    // Take back the gone owners' records of what is granted, and of units related to it.
    const auto dropGoneOf = [&](const std::string& unit) {
      if (const auto it = goneByUnit.find(unit); it != goneByUnit.end()) {
        for (const std::size_t i : it->second) dropped[i] = true;
      }
    };
    for (const std::string& gpu : granted) {
      dropGoneOf(gpu);
      if (const std::vector<std::string>* related = neighboursOf(gpu)) {
        for (const std::string& other : *related) dropGoneOf(other);
      }
    }
  }
  for (std::size_t i = 0; i < current.records.size(); ++i) {
    if (dropped[i]) allocation.reclaimedIndices.push_back(i);
  }
  if (allocation.satisfied) {
    // Keep the host's order in the answer.
    for (const std::string& gpu : request.gpus) {
      if (!grantedSet.count(gpu)) continue;
      grantedSet.erase(gpu);  // once, even when `gpus` names it twice
      Record record{gpu, request.owner};
      if (const auto uuid = request.uuids.find(gpu);
          uuid != request.uuids.end() && uuid->second != gpu) {
        record.uuid = uuid->second;
      }
      allocation.granted.push_back(gpu);
      allocation.records.push_back(std::move(record));
    }
  }
  return allocation;
}

/// planUnits' plan made the allocation (detail::keepRecords), and the records the plan names by
/// their index in `read` named by their index in `records` (a held record is kept).
void keepRecords(Allocation& allocation, std::vector<Record> read) {
  const std::vector<std::size_t> kept = detail::keepRecords(
      allocation.records, std::move(read), allocation.reclaimedIndices, allocation.reclaimed);
  for (std::vector<std::size_t>* named :
       {&allocation.heldByOthers, &allocation.failClosed, &allocation.heldByRequester}) {
    for (std::size_t& i : *named) i = kept[i];
  }
}

/// What the lease files say of the units of an index, whatever the records say: the units held
/// by a lease of another process (whole, or a share of them), and those whose lease file this user
/// may not open.
struct HeldLeases {
  std::unordered_set<std::string> whole;
  std::unordered_set<std::string> shared;
  /// Unit → the lease file that cannot be opened.
  std::unordered_map<std::string, std::string> unopenable;
};

HeldLeases heldLeases(const discovery::UnitIndex& index, const liveness::Reader& reader,
                      LeaseSpace& space) {
  HeldLeases held;
  for (const std::string& name : space.names()) {
    if (space.holds(name)) continue;  // this allocation's own, from an earlier attempt
    const std::optional<ShareLeaseName> share = parseShareLeaseName(name);
    const std::vector<discovery::UnitRef> units =
        unitsOfLeaseName(index, share ? std::string_view(share->gpuLease) : name, reader);
    if (units.empty()) continue;
    const LeaseState state = space.state(name, std::nullopt);
    if (!leaseBlocks(state)) continue;
    for (const discovery::UnitRef ref : units) {
      (share ? held.shared : held.whole).insert(index[ref].id);
      if (state == LeaseState::kUnopenable) held.unopenable.emplace(index[ref].id, name);
    }
  }
  return held;
}

}  // namespace

Allocation planAllocation(ParsedRecords current, const AllocationRequest& request,
                          const LivenessProbe& isRunningProbe, LeaseSpace& space) {
  const std::shared_ptr<const discovery::UnitIndex> index = indexOf(request);
  const liveness::Reader& reader = liveness::HostFacts::readerOr(request.reader);

  const HeldLeases held = heldLeases(*index, reader, space);
  // A unit whose lease another process holds is held, record or not: an operator's `release`, or
  // Flink's `sed "/1 /d"` deleting GPU 11's line, can leave a lease without its record. A GPU a
  // share lease of which is held is shared: no whole request takes it.
  std::unordered_set<std::string> passedOver;
  for (const std::string& gpu : request.gpus) {
    if (held.whole.count(gpu) || held.shared.count(gpu)) passedOver.insert(gpu);
  }
  if (request.unusable) {
    for (std::string& gpu : request.unusable(current.records)) passedOver.insert(std::move(gpu));
  }
  // The same for a unit whose related unit (a GPU's MIG instance, an instance's GPU) is held by a
  // lease that no record names: they share hardware.
  std::vector<std::pair<std::string, std::string>> blockedByLease;
  if (!request.related.empty() && !held.whole.empty()) {
    std::unordered_set<std::string> recorded;
    for (const Record& record : current.records) {
      for (std::string& unit : unitsNamedBy(record, *index)) recorded.insert(std::move(unit));
    }
    std::unordered_map<std::string, std::vector<std::string>> neighbours;
    for (const auto& [unit, relatedUnits] : request.related) {
      for (const std::string& other : relatedUnits) {
        if (other == unit) continue;
        neighbours[unit].push_back(other);
        neighbours[other].push_back(unit);
      }
    }
    for (const std::string& gpu : request.gpus) {
      const auto it = neighbours.find(gpu);
      if (it == neighbours.end() || passedOver.count(gpu)) continue;
      for (const std::string& other : it->second) {
        if (recorded.count(other) || !held.whole.count(other)) continue;
        passedOver.insert(gpu);
        blockedByLease.emplace_back(gpu, other);
        break;
      }
    }
  }
  std::vector<std::string> notes;
  for (const std::string& gpu : request.gpus) {
    const auto unopenable = held.unopenable.find(gpu);
    if (passedOver.count(gpu) && unopenable != held.unopenable.end()) {
      notes.push_back("GPU " + gpu + " is passed over: its lease " + unopenable->second +
                      " cannot be opened by this user, so it cannot be shown free");
    }
  }

  Allocation allocation;
  // Planned again each time a lease of what was granted cannot be had: at most once a unit.
  // The request as given, until a unit is passed over: then a copy without those units (the
  // request, its GPUs' relations and UUIDs, is copied only then).
  std::optional<AllocationRequest> narrowed;
  for (std::size_t round = 0;; ++round) {
    if (!passedOver.empty()) {
      if (!narrowed) narrowed = request;
      narrowed->gpus.clear();
      for (const std::string& gpu : request.gpus) {
        if (!passedOver.count(gpu)) narrowed->gpus.push_back(gpu);
      }
    }
    const AllocationRequest& plan = narrowed ? *narrowed : request;
    allocation = planUnits(current, plan, *index, reader, isRunningProbe, space);
    if (!request.lease || allocation.granted.empty()) break;
    // Before the file says so: a lease that cannot be had leaves that unit to others.
    bool replan = false;
    std::vector<std::string> taken;
    const auto added =
        allocation.records.end() - static_cast<std::ptrdiff_t>(allocation.granted.size());
    for (auto record = added; record != allocation.records.end(); ++record) {
      const std::optional<discovery::UnitRef> ref = index->find(record->gpu);
      if (!ref) continue;  // every unit granted is one of the index's
      const LeaseNames names = leaseNamesOf(*index, *ref, reader);
      const LeaseTake take = takeEveryName(space, names, taken);
      if (take.file) {
        record->lease = names.primary;
        record->leaseFile = take.file;
        continue;
      }
      passedOver.insert(record->gpu);
      if (take.failure == LeaseAttempt::Failure::kDenied) {
        notes.push_back("GPU " + record->gpu + " is passed over: one of its leases (" +
                        strings::join(names.all(), ", ") + ") cannot be taken: " + take.why);
      }
      replan = true;
    }
    if (!replan) {
      allocation.leasesTaken = std::move(taken);
      break;
    }
    if (round > request.gpus.size()) {
      // Never reached: each round passes one more unit over. Grant nothing rather than a unit
      // without its lease.
      if (!narrowed) narrowed = request;
      narrowed->gpus.clear();
      allocation = planUnits(current, *narrowed, *index, reader, isRunningProbe, space);
      break;
    }
  }
  keepRecords(allocation, std::move(current.records));
  allocation.junk = std::move(current.junk);
  // Only those no record names: a held record's unit is reported with its record.
  std::unordered_set<std::string> recorded;
  for (const Record& record : allocation.records) {
    for (std::string& unit : unitsNamedBy(record, *index)) recorded.insert(std::move(unit));
  }
  for (const std::string& gpu : request.gpus) {
    if ((held.whole.count(gpu) || held.shared.count(gpu)) && !recorded.count(gpu)) {
      allocation.heldByLeaseOnly.push_back(gpu);
    }
  }
  allocation.blockedByLeaseOnly = std::move(blockedByLease);
  allocation.notes = std::move(notes);
  return allocation;
}

Allocation planAllocation(ParsedRecords current, const AllocationRequest& request,
                          const LivenessProbe& isRunning, const LeaseProbe& lease) {
  ProbeLeaseSpace space(lease);
  return planAllocation(std::move(current), request, isRunning, space);
}

namespace {

/// What makes two records one: the GPU, the owner's pid, start time and boot, and the share, as
/// views of a record that outlives it. A boot of "-" is none: the identities were once texts, in
/// which an absent boot was written "-".
struct IdentityView {
  std::string_view gpu;
  pid_t pid = 0;
  std::optional<std::uint64_t> startTime;
  std::string_view bootId;
  std::optional<ShareSlot> share;

  explicit IdentityView(const Record& record)
      : gpu(record.gpu),
        pid(record.owner.pid),
        startTime(record.owner.startTime),
        bootId(record.owner.bootId ? std::string_view(*record.owner.bootId) : "-"),
        share(record.share) {}
  friend bool operator==(const IdentityView&, const IdentityView&) = default;
};

struct IdentityViewHash {
  std::size_t operator()(const IdentityView& identity) const noexcept {
    std::size_t hash = std::hash<std::string_view>{}(identity.gpu);
    const auto mix = [&hash](std::size_t value) { hash = hash * 1000003 ^ value; };
    mix(std::hash<pid_t>{}(identity.pid));
    mix(std::hash<std::uint64_t>{}(identity.startTime.value_or(~std::uint64_t{0})));
    mix(std::hash<std::string_view>{}(identity.bootId));
    mix(identity.share ? identity.share->index * 4099u + identity.share->count : 0u);
    return hash;
  }
};

/// The records a compaction has written, by identity, to write two identical records once. Each
/// is held as its line's offset in the text and its identity's hash, in a table at most half full
/// (32 bytes a distinct record, no copy of it), and read again from the text when a hash matches:
/// a compaction of a large file holds little beside the old and the new text.
class WrittenRecords {
 public:
  explicit WrittenRecords(std::string_view text) : text_(text) {}

  /// Whether a record of `record`'s identity was written already; if not, it is now, from the
  /// line at `offset`.
  bool writtenBefore(const Record& record, std::size_t offset) {
    if ((used_ + 1) * 2 > slots_.size()) grow();
    const IdentityView identity(record);
    const std::size_t hash = IdentityViewHash{}(identity);
    for (std::size_t at = hash & (slots_.size() - 1);; at = (at + 1) & (slots_.size() - 1)) {
      Slot& slot = slots_[at];
      if (slot.line == 0) {
        slot = Slot{hash, offset + 1};
        ++used_;
        return false;
      }
      if (slot.hash == hash && IdentityView(recordAt(slot.line - 1)) == identity) return true;
    }
  }

 private:
  struct Slot {
    std::size_t hash = 0;
    std::size_t line = 0;  // its offset + 1; 0: empty
  };

  /// The record on the line at `offset` (written, so a record).
  Record recordAt(std::size_t offset) const {
    const std::size_t end = text_.find('\n', offset);
    return *parseRecord(text_.substr(offset, end == std::string_view::npos ? end : end - offset));
  }

  void grow() {
    std::vector<Slot> old(std::max<std::size_t>(64, slots_.size() * 2));
    old.swap(slots_);
    for (const Slot& slot : old) {
      if (slot.line == 0) continue;
      std::size_t at = slot.hash & (slots_.size() - 1);
      while (slots_[at].line != 0) at = (at + 1) & (slots_.size() - 1);
      slots_[at] = slot;
    }
  }

  std::string_view text_;
  std::vector<Slot> slots_;  // a power of two of them
  std::size_t used_ = 0;
};

/// Where new lines go: records are never moved by a change, and none crosses a page boundary,
/// so that writing one is never cut in two (see Journal.h).
constexpr std::size_t kLayoutPage = 4096;

/// The bytes of the blank line that goes before a line of `size` bytes (its '\n' included) at the
/// end of a text of `length` bytes: the rest of the page when the line would cross a page
/// boundary, else none.
std::size_t paddingBefore(std::size_t length, std::size_t size) {
  const std::size_t used = length % kLayoutPage;
  return used != 0 && used + size > kLayoutPage && size <= kLayoutPage ? kLayoutPage - used : 0;
}

/// Before a line of `size` bytes (its '\n' included) goes at the end of `text`: a blank line that
/// fills the rest of the page when the line would cross a page boundary (paddingBefore).
void padForLine(std::string& text, std::size_t size) {
  if (const std::size_t room = paddingBefore(text.size(), size); room > 0) {
    text.append(room - 1, ' ');
    text += '\n';
  }
}

/// Appends `line` (with its '\n') to `text`, first padding to the next page with a blank line
/// when the line would cross a page boundary.
void appendLine(std::string& text, std::string_view line) {
  padForLine(text, line.size());
  text += line;
}

/// Calls `each(line, offset, index)` for each line of `text` (without its '\n'; a last line
/// without one too) that begins before `end`, `index` counting from 0.
template <typename Each>
void forEachLine(std::string_view text, std::size_t end, Each&& each) {
  std::size_t index = 0;
  for (std::size_t start = 0; start < end && start < text.size(); ++index) {
    const std::size_t newline = text.find('\n', start);
    const std::size_t stop = newline == std::string_view::npos ? text.size() : newline;
    each(text.substr(start, stop - start), start, index);
    start = stop + 1;
  }
}

}  // namespace

detail::LineEdit::LineEdit(std::string_view before, const BlankChoice& blank) : before_(before) {
  // Read once: which lines are blanked, and of the text they leave, where its last line that is
  // more than whitespace ends and how many spaces and tabs lie before that.
  std::size_t blankBytes = 0;
  forEachLine(
      before, before.size(), [&](std::string_view line, std::size_t offset, std::size_t index) {
        const bool blanked = blank(line, LineSpan{offset, line.size()}, index + 1);
        blank_.push_back(blanked);
        if (blanked) {
          ++blanked_;
          blankBytes += line.size();
          return;
        }
        for (const char c : line) blankBytes += (c == ' ' || c == '\t') ? 1 : 0;
        if (!strings::isBlank(line)) {
          size_ = offset + line.size() + 1;  // with its '\n', written where the text has none
          blankBytes_ = blankBytes;
        }
      });
}

std::string detail::LineEdit::text(const std::vector<Record>& added) const {
  // The size of the text laid out in place: the lines kept, then each record added, after the
  // blank line that pads to the next page where it would cross one (appendLine).
  std::vector<std::string> addedLines;
  addedLines.reserve(added.size());
  for (const Record& record : added) addedLines.push_back(formatRecords({record}));
  std::size_t inPlace = size_;
  for (const std::string& line : addedLines) {
    inPlace += paddingBefore(inPlace, line.size()) + line.size();
  }
  std::string text;
  // Compacted when more than half is blank, and when laid out in place the text would pass the
  // most a coordination file holds: a full file still takes a change that its blank lines (gone
  // owners' records this change takes back, those earlier changes blanked) and its repeated
  // records make room for. Only then: compaction lays every line out by the page rule, and a file
  // that another writer (Flink's script) appended to without it can come out larger.
  if (size_ > 4 * kLayoutPage && (blankBytes_ * 2 > size_ || inPlace > kMaxCoordinationFileBytes)) {
    // Compaction: the lines laid out anew, in order; two identical records (same GPU, owner and
    // start time) are one, written once.
    WrittenRecords written(before_);
    forEachLine(before_, size_, [&](std::string_view line, std::size_t offset, std::size_t index) {
      if (blank_[index] || strings::isBlank(line)) return;
      if (const std::optional<Record> record = parseRecord(line)) {
        if (written.writtenBefore(*record, offset)) return;
      }
      padForLine(text, line.size() + 1);
      text += line;
      text += '\n';
    });
  } else {
    // In place: blanked lines become spaces, their '\n' stays; what is blank at the end is cut
    // off (a truncate moves nothing).
    text.reserve(size_ + added.size() * 2 * kLayoutPage);
    forEachLine(before_, size_, [&](std::string_view line, std::size_t, std::size_t index) {
      if (blank_[index]) {
        text.append(line.size(), ' ');
      } else {
        text += line;
      }
      text += '\n';
    });
  }
  for (const std::string& line : addedLines) appendLine(text, line);
  return text;
}

std::vector<std::size_t> detail::keepRecords(std::vector<Record>& records, std::vector<Record> read,
                                             const std::vector<std::size_t>& reclaimedIndices,
                                             std::vector<Record>& reclaimed) {
  // In place: the kept records move up over those taken back, in the vector that was read.
  reclaimed.reserve(reclaimed.size() + reclaimedIndices.size());
  std::vector<std::size_t> kept(read.size());
  std::size_t next = 0;
  auto taken = reclaimedIndices.begin();
  for (std::size_t i = 0; i < read.size(); ++i) {
    if (taken != reclaimedIndices.end() && *taken == i) {
      reclaimed.push_back(std::move(read[i]));
      ++taken;
      continue;
    }
    kept[i] = next;
    if (next != i) read[next] = std::move(read[i]);
    ++next;
  }
  read.erase(read.begin() + static_cast<std::ptrdiff_t>(next), read.end());
  std::move(records.begin(), records.end(), std::back_inserter(read));
  records = std::move(read);
  return kept;
}

std::string detail::editRecords(std::string_view before, const std::vector<LineSpan>& blank,
                                const std::vector<Record>& added) {
  std::vector<std::size_t> offsets;
  offsets.reserve(blank.size());
  for (const LineSpan& span : blank) offsets.push_back(span.offset);
  std::sort(offsets.begin(), offsets.end());
  const LineEdit edit(before, [&offsets](std::string_view, const LineSpan& line, std::size_t) {
    return std::binary_search(offsets.begin(), offsets.end(), line.offset);
  });
  return edit.text(added);
}

namespace {

/// A line of the file as parseRecords reads it: junk when it is neither blank nor a record.
bool isJunk(std::string_view line) { return !strings::isBlank(line) && !parseRecord(line); }

}  // namespace

Allocation allocate(const fs::path& file, const AllocationRequest& request,
                    std::chrono::milliseconds lockTimeout) {
  return detail::allocateInFile<Allocation>(
      file, lockTimeout,
      [&request](ParsedRecords&& parsed, LeaseSpace& space) {
        return planAllocation(std::move(parsed), request, isRunning, space);
      },
      [](const LockedFile& opened, const Allocation& allocation, FolderLeaseSpace& space) {
        detail::removeFreeLeases(opened, allocation.records, allocation.leasesTaken, space);
      });
}

void detail::removeFreeLeases(const LockedFile& opened, const std::vector<Record>& records,
                              const std::vector<std::string>& leasesTaken,
                              FolderLeaseSpace& space) {
  if (opened.interfered()) return;
  // Free lease files that no record names any more go now (we hold the file's lock).
  space.removeFreeExcept(namedLeases(records, leasesTaken));
}

std::unordered_set<std::string> detail::namedLeases(const std::vector<Record>& records,
                                                    const std::vector<std::string>& leasesTaken) {
  std::unordered_set<std::string> named(leasesTaken.begin(), leasesTaken.end());
  for (const Record& record : records) {
    if (record.lease) named.insert(*record.lease);
  }
  return named;
}

namespace {

/// Each record with its liveness, under the file's lock; two identical records are shown once.
std::vector<RecordStatus> judgeAll(std::vector<Record> records, LeaseFolder& folder) {
  // The first of each identity, found before any record moves (the views point into them).
  std::vector<bool> first(records.size(), false);
  {
    std::unordered_set<IdentityView, IdentityViewHash> seen;
    seen.reserve(records.size());
    for (std::size_t i = 0; i < records.size(); ++i) {
      first[i] = seen.insert(IdentityView(records[i])).second;
    }
  }
  const LeaseProbe lease = [&folder](const std::string& name,
                                     const std::optional<LeaseFile>& file) {
    return folder.state(name, file);
  };
  RememberedOwners running(isRunning);
  const LivenessProbe ownerRunning = [&running](const Owner& owner) { return running(owner); };
  std::vector<RecordStatus> judged;
  judged.reserve(records.size());
  for (std::size_t i = 0; i < records.size(); ++i) {
    if (!first[i]) continue;
    Record& record = records[i];
    const Liveness liveness = judge(record, ownerRunning, lease);
    const bool other = inOtherPidNamespace(record.owner);
    judged.push_back(RecordStatus{std::move(record), holdsGpu(liveness), other, liveness});
  }
  return judged;
}

}  // namespace

namespace {

Status statusOf(const LockedFile& opened) {
  Status status;
  status.limitBytes = kMaxCoordinationFileBytes;
  if (!opened.exists()) return status;
  status.sizeBytes = opened.text().size();
  status.notes = opened.notes();
  ParsedRecords parsed = parseRecords(opened.text());
  status.junk = std::move(parsed.junk);
  // Under the shared lock no allocator of ours creates lease files: one listing holds. In a
  // snapshot, a lease an allocation is taking may show without its record yet.
  LeaseFolder leaseFolder = LeaseFolder::open(opened.path(), opened.trust());
  status.records = judgeAll(std::move(parsed.records), leaseFolder);
  status.warnings = opened.warnings();
  status.warnings.insert(status.warnings.end(), leaseFolder.warnings().begin(),
                         leaseFolder.warnings().end());
  std::unordered_set<std::string> named;
  for (const RecordStatus& entry : status.records) {
    if (entry.record.lease) named.insert(*entry.record.lease);
  }
  for (const std::string& name : leaseFolder.names()) {
    if (!named.count(name) && leaseBlocks(leaseFolder.state(name))) {
      status.leasesWithoutRecord.push_back(name);
    }
  }
  std::sort(status.leasesWithoutRecord.begin(), status.leasesWithoutRecord.end());
  return status;
}

}  // namespace

Status readStatus(const fs::path& file, std::chrono::milliseconds lockTimeout) {
  return statusOf(LockedFile::open(file, LockedFile::Access::kRead, lockTimeout));
}

Status snapshotStatus(const fs::path& file) {
  return statusOf(LockedFile::open(file, LockedFile::Access::kSnapshot, kDefaultLockTimeout));
}

ParsedRecords readRecords(const fs::path& file, std::chrono::milliseconds lockTimeout) {
  const LockedFile opened = LockedFile::open(file, LockedFile::Access::kRead, lockTimeout);
  return opened.exists() ? parseRecords(opened.text()) : ParsedRecords{};
}

ParsedRecords snapshotRecords(const fs::path& file) {
  const LockedFile opened =
      LockedFile::open(file, LockedFile::Access::kSnapshot, kDefaultLockTimeout);
  return opened.exists() ? parseRecords(opened.text()) : ParsedRecords{};
}

namespace {

bool fileExists(const fs::path& file) {
  std::error_code error;
  return fs::symlink_status(file, error).type() != fs::file_type::not_found;
}

}  // namespace

std::vector<Record> release(const fs::path& file,
                            const std::function<bool(const Record&)>& predicate,
                            std::chrono::milliseconds lockTimeout) {
  if (!fileExists(file)) return {};
  // A file grown past its limit by records alone is repaired by releasing some.
  return detail::changeFile(file, lockTimeout, kMaxRepairableFileBytes,
                            [&](LockedFile& opened, bool) {
                              const ParsedRecords parsed = parseRecords(opened.text());
                              std::vector<LineSpan> blank;
                              std::vector<Record> released;
                              for (std::size_t i = 0; i < parsed.records.size(); ++i) {
                                if (!predicate(parsed.records[i])) continue;
                                released.push_back(parsed.records[i]);
                                blank.push_back(parsed.recordSpans[i]);
                              }
                              if (!released.empty())
                                opened.replace(detail::editRecords(opened.text(), blank, {}));
                              return released;
                            });
}

namespace {

/// releaseChecked's, releaseGone's and releaseStale's work: the records `predicate` picks, of
/// those `goneOnly` leaves (all, or those whose owner is known to be gone). A refused record
/// stops every removal when `allOrNothing`, else only its own.
Released releaseJudged(const fs::path& file, const std::function<bool(const Record&)>& predicate,
                       bool force, bool goneOnly, std::chrono::milliseconds lockTimeout,
                       bool allOrNothing = true) {
  if (!fileExists(file)) return {};
  return detail::changeFile(
      file, lockTimeout, kMaxRepairableFileBytes, [&](LockedFile& opened, bool) {
        const ParsedRecords parsed = parseRecords(opened.text());
        LeaseFolder folder = LeaseFolder::open(file, opened.trust());
        const LeaseProbe lease = [&folder](const std::string& name,
                                           const std::optional<LeaseFile>& taken) {
          return folder.state(name, taken);
        };
        RememberedOwners running(isRunning);
        const LivenessProbe ownerRunning = [&running](const Owner& owner) {
          return running(owner);
        };
        Released result;
        std::vector<LineSpan> blank;
        for (std::size_t i = 0; i < parsed.records.size(); ++i) {
          const Record& record = parsed.records[i];
          if (!predicate(record)) continue;
          const Liveness liveness = judge(record, ownerRunning, lease);
          if (goneOnly && holdsGpu(liveness)) continue;
          RecordStatus judged{record, holdsGpu(liveness), inOtherPidNamespace(record.owner),
                              liveness};
          if (knownToRun(liveness) && !force) {
            result.refused.push_back(std::move(judged));
            continue;
          }
          result.released.push_back(std::move(judged));
          blank.push_back(parsed.recordSpans[i]);
        }
        if (!result.refused.empty() && allOrNothing) {
          // All or nothing: the operator asked for these together.
          result.released.clear();
          return result;
        }
        if (!blank.empty()) opened.replace(detail::editRecords(opened.text(), blank, {}));
        return result;
      });
}

}  // namespace

Released releaseChecked(const fs::path& file, const std::function<bool(const Record&)>& predicate,
                        bool force, std::chrono::milliseconds lockTimeout) {
  return releaseJudged(file, predicate, force, /*goneOnly=*/false, lockTimeout);
}

Released releaseStale(const fs::path& file, const std::function<bool(const Record&)>& predicate,
                      std::chrono::milliseconds lockTimeout) {
  return releaseJudged(file, predicate, /*force=*/false, /*goneOnly=*/false, lockTimeout,
                       /*allOrNothing=*/false);
}

std::vector<RecordStatus> releaseGone(const fs::path& file, std::chrono::milliseconds lockTimeout) {
  return releaseJudged(
             file, [](const Record&) { return true; }, /*force=*/false, /*goneOnly=*/true,
             lockTimeout)
      .released;
}

ReleasedJunk releaseJunk(const fs::path& file, std::size_t shown,
                         std::chrono::milliseconds lockTimeout) {
  if (!fileExists(file)) return {};
  return detail::changeFile(
      file, lockTimeout, kMaxRepairableFileBytes, [&](LockedFile& opened, bool) {
        // The lines read as parseRecords reads them, one at a time: no list of them (a file of
        // `yes` has one for every two bytes), only the first `shown`.
        ReleasedJunk removed;
        const detail::LineEdit edit(
            opened.text(), [&](std::string_view line, const LineSpan&, std::size_t number) {
              if (!isJunk(line)) return false;
              if (removed.lines.size() < shown) {
                removed.lines.push_back(JunkLine{number, std::string(strings::trim(line))});
              }
              ++removed.count;
              return true;
            });
        if (removed.count > 0) opened.replace(edit.text({}));
        return removed;
      });
}

std::vector<JunkLine> releaseJunk(const fs::path& file, std::chrono::milliseconds lockTimeout) {
  return releaseJunk(file, std::numeric_limits<std::size_t>::max(), lockTimeout).lines;
}

}  // namespace flink::coordination
