// Every GPU of the host, for status, check and the metrics (see HostView.h).
#include "host/health/HostView.h"

#include <algorithm>
#include <cctype>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "host/coordination/Leases.h"
#include "host/enumeration/DeviceIdentifiers.h"
#include "host/enumeration/UnitIndex.h"
#include "host/liveness/HostFacts.h"
#include "host/store/StoreError.h"
#include "util/Strings.h"

namespace flink::cli {
namespace {

discovery::GpuDevice deviceNamed(const std::string& gpu, const std::optional<std::string>& uuid) {
  discovery::GpuDevice device;
  device.identifier = gpu;
  device.uuid = uuid;
  return device;
}

/// The units of the view: an index of every unit, and for each the device it shows as (what NVML
/// lists; a GPU known only from a record, a health record or a lease shows as it is named there).
struct ViewUnits {
  discovery::UnitIndex index;
  std::vector<discovery::GpuDevice> shown;  // by UnitRef

  explicit ViewUnits(const std::vector<discovery::GpuDevice>& devices)
      : index(discovery::UnitIndex::of(devices)), shown(devices) {}

  /// A unit this host does not list, as a record names it: one unit per GPU such records name
  /// (by its UUID where they say one, else by their identifier).
  discovery::UnitRef addNamed(const std::string& gpu, const std::optional<std::string>& uuid) {
    discovery::Unit unit;
    unit.id = uuid ? *uuid : gpu;
    unit.uuid = uuid                                                  ? uuid
                : device::isUuid(gpu) && !gpu.starts_with("MIG-GPU-") ? std::optional(gpu)
                                                                      : std::nullopt;
    const discovery::UnitRef ref = index.add(std::move(unit));
    if (ref == shown.size()) shown.push_back(deviceNamed(gpu, uuid));
    return ref;
  }

  /// The units a record names, adding the GPU it names where this host does not list it.
  std::vector<discovery::UnitRef> ofRecord(const std::string& gpu,
                                           const std::optional<std::string>& uuid) {
    std::vector<discovery::UnitRef> refs = index.namedByRecord(gpu, uuid);
    if (refs.empty()) refs.push_back(addNamed(gpu, uuid));
    return refs;
  }
};

/// A label value as Prometheus' text format takes it: UTF-8, with backslash, double quote and
/// line feed escaped (\\, \", \n). The format has no other escape, so what would still reach a
/// terminal reading the file (another control character, C0 or C1, or DEL), and each byte that
/// is not part of well-formed UTF-8, becomes U+FFFD. The values come from records (a health
/// record's GPU and UUID may hold anything).
std::string label(std::string_view value) {
  static constexpr std::string_view kReplacement = "\xef\xbf\xbd";  // U+FFFD
  std::string out;
  out.reserve(value.size());
  for (std::size_t i = 0; i < value.size();) {
    char32_t codePoint = 0;
    const std::size_t length = strings::utf8SequenceLength(value.substr(i), codePoint);
    if (length == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    if (codePoint == U'\\' || codePoint == U'"') {
      out += '\\';
      out += static_cast<char>(codePoint);
    } else if (codePoint == U'\n') {
      out += "\\n";
    } else if (codePoint < 0x20 || (codePoint >= 0x7f && codePoint <= 0x9f)) {
      out += kReplacement;
    } else {
      out.append(value.substr(i, length));
    }
    i += length;
  }
  return out;
}

/// One label set for every series of a GPU: a uuid that is not known is empty.
std::string labels(const GpuView& view) {
  return "{gpu=\"" + label(view.gpu) + "\",uuid=\"" + label(view.uuid.value_or("")) + "\"}";
}

}  // namespace

std::string_view gpuStateWord(GpuState state) {
  switch (state) {
    case GpuState::kFree:
      return "free";
    case GpuState::kHeld:
      return "held";
    case GpuState::kShared:
      return "shared";
    case GpuState::kBusy:
      return "busy";
    case GpuState::kUnhealthy:
      return "unhealthy";
    case GpuState::kDrained:
      return "drained";
  }
  return "free";
}

bool GpuView::healthy() const {
  return std::none_of(problems.begin(), problems.end(), [](const health::Problem& problem) {
    return problem.kind != health::Problem::Kind::kDrained;
  });
}

bool GpuView::drained() const {
  return std::any_of(problems.begin(), problems.end(), [](const health::Problem& problem) {
    return problem.kind == health::Problem::Kind::kDrained;
  });
}

bool GpuView::heldWhole() const {
  return heldByLease ||
         std::any_of(holders.begin(), holders.end(), [](const coordination::RecordStatus& holder) {
           return holder.running && !holder.record.share;
         });
}

std::vector<unsigned> GpuView::liveShares() const {
  std::vector<unsigned> live = shareLeases;
  for (const coordination::RecordStatus& holder : holders) {
    if (holder.running && holder.record.share) live.push_back(holder.record.share->index);
  }
  std::sort(live.begin(), live.end());
  live.erase(std::unique(live.begin(), live.end()), live.end());
  return live;
}

const health::HealthRecord* GpuView::lastXid() const {
  const health::HealthRecord* last = nullptr;
  for (const health::Problem& problem : problems) {
    if (!problem.record || !problem.record->xid) continue;
    if (last == nullptr || problem.record->since >= last->since) last = &*problem.record;
  }
  return last;
}

std::string_view staleKindWord(StaleEntry::Kind kind) {
  switch (kind) {
    case StaleEntry::Kind::kRecord:
      return "record";
    case StaleEntry::Kind::kDrain:
      return "drain";
    case StaleEntry::Kind::kUnhealthy:
      return "unhealthy";
    case StaleEntry::Kind::kSharing:
      return "sharing";
  }
  return "record";
}

StaleEntry staleEntry(StaleEntry::Kind kind, const std::string& gpu,
                      const std::optional<std::string>& uuid,
                      const coordination::RecordStatus* record) {
  StaleEntry entry;
  entry.kind = kind;
  entry.gpu = gpu;
  entry.uuid = uuid;
  // "GPU 5", "GPU 2 (GPU-…)", "MIG-…", "GPU-…": what it names, as written.
  const std::string named = device::isUuid(gpu) ? gpu
                            : uuid              ? "GPU " + gpu + " (" + *uuid + ")"
                                                : "GPU " + gpu;
  const std::string gone = " names " + named + " which this host does not have";
  switch (kind) {
    case StaleEntry::Kind::kRecord: {
      const std::string pid = record ? std::to_string(record->record.owner.pid) : "?";
      entry.ownerPid = record ? std::optional<pid_t>(record->record.owner.pid) : std::nullopt;
      entry.ownerRunning = record && coordination::knownToRun(record->liveness);
      entry.text = "record of process " + pid + gone +
                   (entry.ownerRunning
                        ? "; process " + pid +
                              ", or what it started, still runs and may use what it holds, so "
                              "`flink-gpu release --stale` keeps it: `flink-gpu release --owner " +
                              pid + "` removes it"
                        : std::string("; `flink-gpu release --stale` removes it"));
      break;
    }
    case StaleEntry::Kind::kDrain:
      entry.text = "drain" + gone + "; `flink-gpu undrain --stale` removes it";
      break;
    case StaleEntry::Kind::kUnhealthy:
      entry.text = "unhealthy verdict" + gone + "; `flink-gpu undrain --stale` removes it";
      break;
    case StaleEntry::Kind::kSharing:
      entry.text = "sharing declaration" + gone + "; `flink-gpu unshare --stale` removes it";
      break;
  }
  return entry;
}

discovery::Presence HostView::presenceOf(std::string_view gpu,
                                         const std::optional<std::string>& uuid) const {
  if (!hostUnits) return discovery::Presence::kCannotTell;
  return hostUnits->presence(gpu, uuid, coverage);
}

void findStale(HostView& host, const coordination::Status& status,
               const std::vector<discovery::GpuDevice>& devices, discovery::HostCoverage coverage) {
  host.hostUnits = std::make_shared<const discovery::UnitIndex>(discovery::UnitIndex::of(devices));
  host.coverage = std::move(coverage);
  if (!host.coverage.whole()) return;
  const auto gone = [&host](const std::string& gpu, const std::optional<std::string>& uuid) {
    return host.presenceOf(gpu, uuid) == discovery::Presence::kNotOnThisHost;
  };
  for (const coordination::RecordStatus& entry : status.records) {
    if (gone(entry.record.gpu, entry.record.uuid)) {
      host.stale.push_back(
          staleEntry(StaleEntry::Kind::kRecord, entry.record.gpu, entry.record.uuid, &entry));
    }
  }
  // The units only records name that this host does not have: shown apart, never as the host's.
  for (GpuView& view : host.gpus) {
    if (!view.listedByNvml && gone(view.gpu, view.uuid)) view.notOnHost = true;
  }
  if (!host.health) return;
  for (const health::HealthRecord& record : host.health->parsed.records) {
    if (record.kind == health::RecordKind::kReadmitted || !gone(record.gpu, record.uuid)) continue;
    host.stale.push_back(staleEntry(record.kind == health::RecordKind::kDrained
                                        ? StaleEntry::Kind::kDrain
                                        : StaleEntry::Kind::kUnhealthy,
                                    record.gpu, record.uuid));
  }
}

HostView viewHost(const std::string& coordinationFile, const coordination::Status& status,
                  const std::vector<discovery::GpuDevice>& devices, bool askNvml) {
  HostView host;
  if (askNvml) host.probe = health::probeNvml();
  // After a driver upgrade without a reboot NVML cannot answer, but the kernel still names its
  // GPUs: those are the host's, by index in bus order (NVML's), UUID and bus id.
  std::vector<discovery::GpuDevice> kernelDevices;
  std::vector<const discovery::KernelGpu*> kernelListed;
  if (askNvml && !host.probe.usable && host.probe.versionMismatch) {
    // Only where the module's folder is there: else there is no list to show.
    if (discovery::KernelGpus kernel = discovery::readKernelGpus(); kernel.present) {
      host.kernel = std::move(kernel);
    }
    if (host.kernel && devices.empty()) {
      kernelDevices = host.kernel->devices();
      kernelListed = host.kernel->listed();
    }
  }
  const std::vector<discovery::GpuDevice>& shownFirst =
      kernelDevices.empty() ? devices : kernelDevices;
  try {
    host.health = health::readHealth(coordinationFile);
  } catch (const store::StoreError& e) {
    host.healthError = e.what();
  }

  // The units: every device NVML lists, the GPUs it could not give a handle for (lost), then
  // what only the records, health records and leases name, each read once by the index's rule:
  // linear in the records.
  ViewUnits units(shownFirst);
  for (const health::GpuProbe& gpu : host.probe.gpus) {
    const std::string index = std::to_string(gpu.index);
    const bool listed = units.index.find(index) || (gpu.uuid && units.index.byUuid(*gpu.uuid));
    if (!listed) units.addNamed(index, gpu.uuid);
  }
  std::vector<std::vector<discovery::UnitRef>> recordUnits;
  recordUnits.reserve(status.records.size());
  for (const coordination::RecordStatus& entry : status.records) {
    recordUnits.push_back(units.ofRecord(entry.record.gpu, entry.record.uuid));
  }
  if (host.health) {
    for (const health::HealthRecord& record : host.health->parsed.records) {
      if (record.kind != health::RecordKind::kReadmitted) units.ofRecord(record.gpu, record.uuid);
    }
  }
  // Units held by a lease that no record names, which nothing else lists. A share lease holds a
  // share of its whole GPU: that GPU is the unit.
  const liveness::Reader& reader = liveness::HostFacts::system().reader();
  std::vector<std::pair<std::vector<discovery::UnitRef>, std::optional<unsigned>>> leaseUnits;
  for (const std::string& leaseName : status.leasesWithoutRecord) {
    const std::optional<coordination::ShareLeaseName> share =
        coordination::parseShareLeaseName(leaseName);
    const std::string& name = share ? share->gpuLease : leaseName;
    std::vector<discovery::UnitRef> refs =
        coordination::unitsOfLeaseName(units.index, name, reader);
    if (refs.empty()) {
      // Another mount namespace's index names no GPU here: it is an alias of a lease that a
      // name every reader knows holds too.
      if (name.find(".mnt-") != std::string::npos) continue;
      const bool index = name.starts_with("index-");
      refs.push_back(index ? units.addNamed(name.substr(6), std::nullopt)
                           : units.addNamed(name, device::isUuid(name)
                                                      ? std::optional<std::string>(name)
                                                      : std::nullopt));
    }
    leaseUnits.emplace_back(std::move(refs),
                            share ? std::optional<unsigned>(share->index) : std::nullopt);
  }

  // Devices first, in NVML's order; the units only records name after them, indices in numeric
  // order before UUIDs.
  std::vector<discovery::UnitRef> order(units.shown.size());
  for (discovery::UnitRef ref = 0; ref < order.size(); ++ref) order[ref] = ref;
  std::sort(order.begin() + static_cast<std::ptrdiff_t>(shownFirst.size()), order.end(),
            [&](discovery::UnitRef first, discovery::UnitRef second) {
              const std::string& a = units.shown[first].identifier;
              const std::string& b = units.shown[second].identifier;
              const bool aIndex = !a.empty() && std::isdigit(static_cast<unsigned char>(a[0]));
              const bool bIndex = !b.empty() && std::isdigit(static_cast<unsigned char>(b[0]));
              if (aIndex != bIndex) return aIndex;
              if (aIndex && a.size() != b.size()) return a.size() < b.size();
              return a < b;
            });
  std::vector<std::size_t> viewOf(units.shown.size());
  for (std::size_t i = 0; i < order.size(); ++i) viewOf[order[i]] = i;

  const std::vector<health::HealthRecord> noRecords;
  std::vector<std::vector<health::Problem>> verdicts =
      health::assess(units.index, order, host.probe.usable ? &host.probe : nullptr,
                     host.health ? host.health->parsed.records : noRecords);
  // NVML's look at each whole GPU, by the index it is shown as (the last of an index).
  std::unordered_map<std::string, const health::GpuProbe*> probeOf;
  for (const health::GpuProbe& gpu : host.probe.gpus) {
    probeOf.insert_or_assign(std::to_string(gpu.index), &gpu);
  }
  host.gpus.reserve(order.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    const discovery::GpuDevice& unit = units.shown[order[i]];
    GpuView view;
    view.gpu = unit.identifier;
    view.uuid = unit.uuid;
    view.isMigInstance = unit.isMigInstance();
    if (unit.mig) view.parent = std::to_string(unit.mig->parentIndex);
    view.problems = std::move(verdicts[i]);
    if (order[i] < kernelListed.size()) {
      view.kernel = *kernelListed[order[i]];
    } else {
      view.listedByNvml = order[i] < shownFirst.size() || probeOf.count(view.gpu) > 0;
    }
    if (!view.isMigInstance) {
      if (const auto probe = probeOf.find(view.gpu); probe != probeOf.end()) {
        view.persistenceMode = probe->second->persistenceMode;
        view.recoveryAction = probe->second->recoveryAction;
        view.computeMode = probe->second->computeMode;
        view.notes = health::notesOf(*probe->second);
      }
    } else if (view.parent) {
      if (const auto probe = probeOf.find(*view.parent); probe != probeOf.end()) {
        view.notes = health::notesOf(*probe->second);
      }
    }
    host.gpus.push_back(std::move(view));
  }
  for (std::size_t i = 0; i < status.records.size(); ++i) {
    for (const discovery::UnitRef ref : recordUnits[i]) {
      host.gpus[viewOf[ref]].holders.push_back(status.records[i]);
    }
  }
  // A lease held without a record holds its unit unless a running record of it says so already
  // (a worker's lease is held under each of its names, LeaseNames, and a record names one). What
  // the running records of a unit hold is gathered once, not asked of its holders per lease.
  struct RunningHolds {
    bool whole = false;
    std::vector<unsigned> shares;  // ascending
  };
  std::unordered_map<std::size_t, RunningHolds> runningHolds;
  const auto runningHoldsOf = [&](std::size_t at) -> const RunningHolds& {
    const auto [it, added] = runningHolds.try_emplace(at);
    if (added) {
      for (const coordination::RecordStatus& holder : host.gpus[at].holders) {
        if (!holder.running) continue;
        if (holder.record.share) {
          it->second.shares.push_back(holder.record.share->index);
        } else {
          it->second.whole = true;
        }
      }
      std::sort(it->second.shares.begin(), it->second.shares.end());
    }
    return it->second;
  };
  for (const auto& [refs, share] : leaseUnits) {
    for (const discovery::UnitRef ref : refs) {
      GpuView& view = host.gpus[viewOf[ref]];
      const RunningHolds& held = runningHoldsOf(viewOf[ref]);
      const bool recorded =
          share ? std::binary_search(held.shares.begin(), held.shares.end(), *share) : held.whole;
      if (recorded) continue;
      if (!share) {
        view.heldByLease = true;
      } else if (!view.isMigInstance) {  // shares are of whole GPUs only
        view.shareLeases.push_back(*share);
      }
    }
  }
  for (GpuView& view : host.gpus) {
    std::sort(view.shareLeases.begin(), view.shareLeases.end());
    view.shareLeases.erase(std::unique(view.shareLeases.begin(), view.shareLeases.end()),
                           view.shareLeases.end());
  }
  for (GpuView& view : host.gpus) {
    view.state = !view.healthy()              ? GpuState::kUnhealthy
                 : view.drained()             ? GpuState::kDrained
                 : view.heldWhole()           ? GpuState::kHeld
                 : !view.liveShares().empty() ? GpuState::kShared
                                              : GpuState::kFree;
  }
  // Free, but its hardware is in use: a GPU one of whose MIG instances is held, an instance
  // whose GPU is held whole or shared. No allocator hands it out. The held or shared units are
  // gathered first, MIG instances by their GPU and whole GPUs by name, each list in the view's
  // order: a view looks only at those that share its hardware, not at every other unit (units
  // only records name are as many as the records).
  std::unordered_map<std::string_view, std::vector<std::size_t>> heldInstancesOf;
  std::unordered_map<std::string_view, std::vector<std::size_t>> heldWholeNamed;
  for (std::size_t at = 0; at < host.gpus.size(); ++at) {
    const GpuView& other = host.gpus[at];
    if (other.state != GpuState::kHeld && other.state != GpuState::kShared) continue;
    if (!other.isMigInstance) {
      heldWholeNamed[other.gpu].push_back(at);
    } else if (other.parent) {
      heldInstancesOf[*other.parent].push_back(at);
    }
  }
  for (GpuView& view : host.gpus) {
    if (view.state != GpuState::kFree) continue;
    if (!view.isMigInstance) {
      if (const auto it = heldInstancesOf.find(view.gpu); it != heldInstancesOf.end()) {
        for (const std::size_t at : it->second) {
          view.busyBecause.push_back("its MIG instance " + host.gpus[at].gpu + " is held");
        }
      }
    } else if (view.parent) {
      if (const auto it = heldWholeNamed.find(*view.parent); it != heldWholeNamed.end()) {
        for (const std::size_t at : it->second) {
          const GpuView& other = host.gpus[at];
          view.busyBecause.push_back(
              "its GPU " + other.gpu +
              (other.state == GpuState::kHeld ? " is held whole" : " is shared"));
        }
      }
    }
    if (!view.busyBecause.empty()) view.state = GpuState::kBusy;
  }
  host.refs = std::move(order);
  host.index = std::make_shared<const discovery::UnitIndex>(std::move(units.index));
  return host;
}

void addUse(HostView& host, const usage::Judgement& judgement, bool judged) {
  host.useJudged = judged;
  for (GpuView& view : host.gpus) {
    view.processesUnread = std::find(judgement.unread.begin(), judgement.unread.end(), view.gpu) !=
                           judgement.unread.end();
    const usage::UnitVerdict* verdict = judgement.find(view.gpu);
    if (verdict == nullptr) continue;
    view.foreignProcesses = verdict->foreign;
    view.memoryWithoutProcessMiB = verdict->memoryWithoutProcessMiB;
    if (verdict->busy() && view.state == GpuState::kFree) view.state = GpuState::kBusy;
  }
}

std::optional<Notice> judgeUse(HostView& host, const coordination::Status& status,
                               const std::vector<discovery::GpuDevice>& devices,
                               const std::unordered_set<std::string>& mpsShared) {
  if (!host.probe.usable || devices.empty() || !host.index) return std::nullopt;
  std::vector<std::string> units;
  units.reserve(devices.size());
  for (const discovery::GpuDevice& device : devices) units.push_back(device.identifier);
  host.use = usage::readUse(units, devices);
  const std::vector<usage::UnitUse>& use = host.use;
  if (use.empty()) return std::nullopt;
  std::vector<coordination::Record> records;
  records.reserve(status.records.size());
  for (const coordination::RecordStatus& entry : status.records) records.push_back(entry.record);
  liveness::HostFacts& facts = liveness::HostFacts::system();
  const usage::Judgement judgement = usage::judge(use, records, *host.index, mpsShared, facts);
  addUse(host, judgement, liveness::seesHostPids(facts.reader()));
  return usage::unjudgedNote(judgement);
}

std::string describeView(const GpuView& view) {
  std::vector<std::string> parts;
  // A GPU the records name that this host no longer has: its index may now be another GPU's.
  if (view.notOnHost) parts.push_back("not on this host (state that outlived it: see --stale)");
  if (view.kernel) {
    // Known from the kernel alone: by its UUID and bus id, and why NVML does not answer.
    parts.push_back((view.kernel->uuid ? *view.kernel->uuid + ", " : std::string()) +
                    view.kernel->pciBusId + ": driver/library version mismatch");
  }
  for (const health::Problem& problem : view.problems) parts.push_back(problem.text);
  // A few of its records, those that hold it first: a file can hold hundreds of thousands of one
  // GPU's, and the records' own table lists every one.
  constexpr std::size_t kShownHolders = 8;
  std::size_t shown = 0;
  for (const bool running : {true, false}) {
    for (const coordination::RecordStatus& holder : view.holders) {
      if (holder.running != running || shown == kShownHolders) continue;
      ++shown;
      const std::string share =
          holder.record.share ? "share " + coordination::formatShareSlot(*holder.record.share) + " "
                              : "";
      parts.push_back(share + (holder.running ? "held by process " : "recorded for process ") +
                      std::to_string(holder.record.owner.pid) + " (" +
                      coordination::describeLiveness(holder) + ")");
    }
  }
  if (view.holders.size() > kShownHolders) {
    parts.push_back("and " + std::to_string(view.holders.size() - kShownHolders) +
                    " more records (the records' table lists every one)");
  }
  if (view.heldByLease) parts.push_back("held by a lease of another process, without a record");
  for (const unsigned index : view.shareLeases) {
    parts.push_back("share " + std::to_string(index) +
                    " held by a lease of another process, without a record");
  }
  parts.insert(parts.end(), view.busyBecause.begin(), view.busyBecause.end());
  for (const health::HealthNote& note : view.notes) parts.push_back(note.text);
  for (const usage::ForeignProcess& process : view.foreignProcesses) {
    parts.push_back("used by " + usage::describeProcess(process) + ", which no record names");
  }
  if (view.memoryWithoutProcessMiB) {
    parts.push_back(std::to_string(*view.memoryWithoutProcessMiB) +
                    " MiB in use without a process NVML lists");
  }
  std::string text;
  for (const std::string& part : parts) text += (text.empty() ? "" : "; ") + part;
  return text;
}

std::string prometheusMetrics(const HostView& view, const coordination::Status& status,
                              const BuildLabels& build) {
  std::string text;
  const auto family = [&text](const char* name, const char* help) {
    text += std::string("# HELP ") + name + ' ' + help + '\n';
    text += std::string("# TYPE ") + name + " gauge\n";
  };
  family(
      "flink_gpu_held",
      "Whether the GPU is held whole (1): by a record of an owner that holds it, or by its lease "
      "without a record; 0 when free or only shared (shares are flink_gpu_shares_held).");
  for (const GpuView& gpu : view.gpus) {
    text += "flink_gpu_held" + labels(gpu) + (gpu.heldWhole() ? " 1\n" : " 0\n");
  }
  family("flink_gpu_shares",
         "The number of shares the operator declared the GPU shared into (flink-gpu share): how "
         "many workers may hold a share of it at once.");
  for (const GpuView& gpu : view.gpus) {
    if (gpu.declaredShares) {
      text += "flink_gpu_shares" + labels(gpu) + ' ' + std::to_string(*gpu.declaredShares) + '\n';
    }
  }
  family("flink_gpu_shares_held",
         "Shares of the GPU held now: share records whose owner holds them, and share leases "
         "held without a record.");
  for (const GpuView& gpu : view.gpus) {
    const std::size_t live = gpu.liveShares().size();
    if (gpu.declaredShares || live > 0) {
      text += "flink_gpu_shares_held" + labels(gpu) + ' ' + std::to_string(live) + '\n';
    }
  }
  family("flink_gpu_healthy",
         "Whether the GPU is healthy (1): not lost, no reset required, no recovery action the "
         "driver asks, its NVLink fabric registered, no pending or failed row remapping or page "
         "retirement, no verdict of flink-gpu watch; NaN when NVML cannot be asked and no record "
         "says it is unhealthy.");
  for (const GpuView& gpu : view.gpus) {
    text += "flink_gpu_healthy" + labels(gpu) +
            (!gpu.healthy()      ? " 0\n"
             : view.probe.usable ? " 1\n"
                                 : " NaN\n");
  }
  family("flink_gpu_recovery_action",
         "The recovery action the NVIDIA driver asks of the GPU (NVML_FI_DEV_GET_GPU_RECOVERY_"
         "ACTION): 0 none, 1 GPU reset, 2 node reboot, 3 drain peer-to-peer, 4 drain and reset, 5 "
         "recover the IMEX domain; only where the driver tells.");
  for (const GpuView& gpu : view.gpus) {
    if (gpu.recoveryAction) {
      text += "flink_gpu_recovery_action" + labels(gpu) + ' ' +
              std::to_string(*gpu.recoveryAction) + '\n';
    }
  }
  family("flink_gpu_drained", "Whether an operator drained the GPU (1): new allocations skip it.");
  for (const GpuView& gpu : view.gpus) {
    text += "flink_gpu_drained" + labels(gpu) + (gpu.drained() ? " 1\n" : " 0\n");
  }
  family("flink_gpu_last_xid", "The last critical Xid that flink-gpu watch recorded for the GPU.");
  for (const GpuView& gpu : view.gpus) {
    if (const health::HealthRecord* xid = gpu.lastXid()) {
      text += "flink_gpu_last_xid" + labels(gpu) + ' ' + std::to_string(*xid->xid) + '\n';
    }
  }
  family("flink_gpu_last_xid_timestamp_seconds",
         "When flink-gpu watch recorded the last critical Xid of the GPU, in seconds since the "
         "epoch.");
  for (const GpuView& gpu : view.gpus) {
    if (const health::HealthRecord* xid = gpu.lastXid()) {
      text += "flink_gpu_last_xid_timestamp_seconds" + labels(gpu) + ' ' +
              std::to_string(xid->since) + '\n';
    }
  }
  std::size_t dead = 0;
  for (const coordination::RecordStatus& entry : status.records) {
    if (!entry.running) ++dead;
  }
  family("flink_gpu_health_records_readable",
         "Whether the health records could be read (0: flink_gpu_healthy and flink_gpu_drained "
         "say nothing of drains and verdicts, and allocators hand out no GPU).");
  text += std::string("flink_gpu_health_records_readable ") +
          (view.healthError.empty() ? "1" : "0") + '\n';
  family("flink_gpu_sharing_declarations_readable",
         "Whether the sharing declarations could be read (0: flink_gpu_shares says nothing, and "
         "allocators hand out no share).");
  text += std::string("flink_gpu_sharing_declarations_readable ") +
          (view.sharingError.empty() ? "1" : "0") + '\n';
  family("flink_gpu_nvml_up",
         "Whether NVML could be used (1): loaded, initialized, its GPUs counted. 0: GPU health is "
         "unknown, and the GPUs are those the records (or the kernel's list) name.");
  text += std::string("flink_gpu_nvml_up ") + (view.probe.usable ? "1" : "0") + '\n';
  family("flink_gpu_gpus",
         "The GPUs of this host by where they are known from: nvml (nvmlDeviceGetCount, when "
         "NVML can be used), kernel (the kernel driver's list, when NVML fails with a "
         "driver/library version mismatch) and records (units only the coordination, health or "
         "lease records name).");
  std::size_t recordsOnly = 0;
  std::size_t kernelListed = 0;
  for (std::size_t i = 0; i < view.gpus.size(); ++i) {
    if (view.gpus[i].kernel) {
      ++kernelListed;
    } else if (!view.gpus[i].listedByNvml) {
      ++recordsOnly;
    }
  }
  if (view.probe.usable) {
    text += "flink_gpu_gpus{source=\"nvml\"} " + std::to_string(view.probe.count) + '\n';
  }
  if (view.kernel) {
    text += "flink_gpu_gpus{source=\"kernel\"} " + std::to_string(kernelListed) + '\n';
  }
  text += "flink_gpu_gpus{source=\"records\"} " + std::to_string(recordsOnly) + '\n';
  if (view.useJudged) {
    family("flink_gpu_foreign_processes",
           "Processes NVML lists on the GPU that no record explains (not a record's running owner "
           "or its descendant, nor the MPS server of a GPU declared shared with MPS): above 0, "
           "allocators skip the GPU as busy.");
    for (const GpuView& gpu : view.gpus) {
      if (!gpu.listedByNvml) continue;
      text +=
          "flink_gpu_foreign_processes" + labels(gpu) + ' ' +
          (gpu.processesUnread ? std::string("NaN") : std::to_string(gpu.foreignProcesses.size())) +
          '\n';
    }
  }
  family("flink_gpu_build_info", "The flink-gpu that wrote these metrics (always 1).");
  text += "flink_gpu_build_info{version=\"" + label(build.version) + "\",commit=\"" +
          label(build.commit) + "\"} 1\n";
  family("flink_gpu_coordination_records", "Records in the coordination file.");
  text += "flink_gpu_coordination_records " + std::to_string(status.records.size()) + '\n';
  family("flink_gpu_coordination_dead_owner_records",
         "Records of owners that are no longer running, not yet taken back (an allocation takes "
         "one back when it needs its GPU).");
  text += "flink_gpu_coordination_dead_owner_records " + std::to_string(dead) + '\n';
  family("flink_gpu_stale_entries",
         "Records, drains, unhealthy verdicts and sharing declarations that name a GPU this host "
         "does not have (flink-gpu release, undrain and unshare --stale remove them); NaN when "
         "this look at the host cannot tell (NVML not usable, a masked view).");
  for (const StaleEntry::Kind kind : {StaleEntry::Kind::kRecord, StaleEntry::Kind::kDrain,
                                      StaleEntry::Kind::kUnhealthy, StaleEntry::Kind::kSharing}) {
    const auto count =
        std::count_if(view.stale.begin(), view.stale.end(),
                      [kind](const StaleEntry& entry) { return entry.kind == kind; });
    text += "flink_gpu_stale_entries{kind=\"" + std::string(staleKindWord(kind)) + "\"} " +
            (view.coverage.whole() ? std::to_string(count) : std::string("NaN")) + '\n';
  }
  return text;
}

}  // namespace flink::cli
