// The health rules (see HostHealth.h): one NVML session's look at every GPU, the records beside
// the coordination file, and the verdict for each unit the allocators would hand out.
#include "host/health/HostHealth.h"

#include <charconv>
#include <exception>
#include <filesystem>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "host/enumeration/DeviceIdentifiers.h"
#include "host/enumeration/UnitIndex.h"
#include "host/nvml/Nvml.h"
#include "host/nvml/NvmlDeviceState.h"
#include "host/store/StoreError.h"
#include "util/Strings.h"

namespace flink::health {
namespace {

/// describeUid of each uid asked once: a look-up in the user database each (getpwuid_r may read
/// /etc/passwd whole), and a host's drains are mostly by a few operators.
class UidNames {
 public:
  const std::string& of(uid_t uid) {
    const auto [it, inserted] = names_.try_emplace(uid);
    if (inserted) it->second = describeUid(uid);
    return it->second;
  }

 private:
  std::unordered_map<uid_t, std::string> names_;
};

std::string describeRecord(const HealthRecord& record, UidNames& uids) {
  std::string text(kindName(record.kind));
  if (record.since != 0) text += " since " + isoTime(record.since);  // 0: a line unread
  if (record.kind == RecordKind::kDrained && record.uid) text += " by uid " + uids.of(*record.uid);
  if (record.xid) text += ": Xid " + std::to_string(*record.xid);
  // Problem::text is one line: a reason read from the file may hold anything (a line break, an
  // escape sequence), and is shown quoted, whole.
  const std::string reason = strings::quoteForMessage(record.reason, std::string::npos);
  if (!reason.empty()) text += (record.xid ? " (" + reason + ")" : ": " + reason);
  return text;
}

/// A line of the health records that does not parse but starts as a verdict does (`drained`,
/// `unhealthy`: a hand edit with spaces, a bad number) holds its GPU out all the same: a drained
/// or unhealthy GPU is never handed out because its record could not be read. The GPU is the
/// line's `gpu=` value, and its `uuid=` value (either names it, whatever the other says); its
/// `since` is 0, as nothing of the line can be trusted.
/// None for any other junk (kept and reported, as before).
/// @throws HealthRecordsUnreadable for a verdict line that names no GPU at all: any may be it.
std::vector<HealthRecord> verdictsOfJunk(const store::JunkLine& junk,
                                         const std::filesystem::path& path) {
  const std::vector<std::string> words = strings::splitWhitespace(junk.text);
  if (words.empty()) return {};
  RecordKind kind{};
  // As written or run together with what follows ("drained,gpu=1").
  const std::string first = strings::toLower(words.front());
  if (first.starts_with(kindName(RecordKind::kDrained))) {
    kind = RecordKind::kDrained;
  } else if (first.starts_with(kindName(RecordKind::kUnhealthy))) {
    kind = RecordKind::kUnhealthy;
  } else {
    return {};
  }
  const std::string where =
      "health records " + path.string() + ", line " + std::to_string(junk.lineNumber);
  std::vector<HealthRecord> verdicts;
  for (std::size_t i = 1; i < words.size(); ++i) {
    const std::string_view word = words[i];
    for (const std::string_view key : {std::string_view("gpu="), std::string_view("uuid=")}) {
      if (!word.starts_with(key)) continue;
      const std::string_view value = word.substr(key.size());
      if (!device::isDeviceIdentifier(value) || (key == "uuid=" && !device::isUuid(value))) {
        // "+1", "1x", "0x1", an empty value: which GPU it means cannot be told.
        throw HealthRecordsUnreadable(where + " is a verdict (" + std::string(kindName(kind)) +
                                      ") whose " + std::string(key) +
                                      " cannot be read: " + strings::quoteForMessage(junk.text) +
                                      "; correct or remove it");
      }
      HealthRecord verdict;
      verdict.kind = kind;
      verdict.gpu = std::string(value);
      // A UUID decides over the index where both are known: given as both, it names its GPU.
      if (key == "uuid=") verdict.uuid = verdict.gpu;
      verdict.reason = "its line in the " + where + " cannot be read, so it counts as " +
                       std::string(kindName(kind)) + ": " + strings::quoteForMessage(junk.text);
      verdicts.push_back(std::move(verdict));
    }
  }
  if (verdicts.empty()) {
    throw HealthRecordsUnreadable(where + " is a verdict (" + std::string(kindName(kind)) +
                                  ") that names no GPU (no gpu=): " +
                                  strings::quoteForMessage(junk.text) + "; correct or remove it");
  }
  return verdicts;
}

const GpuProbe* probeOf(const NvmlProbe* probe, const std::string& index) {
  if (probe == nullptr) return nullptr;
  // Asked for every unit: probeNvml lists GPU i at position i, so a GPU is found there without
  // a search. `index` must be written as std::to_string writes the GPU's index ("7", not "07").
  unsigned value = 0;
  const char* end = index.data() + index.size();
  const auto parsed = std::from_chars(index.data(), end, value);
  const bool canonical =
      parsed.ec == std::errc() && parsed.ptr == end && (index.size() == 1 || index.front() != '0');
  if (canonical && value < probe->gpus.size() && probe->gpus[value].index == value) {
    return &probe->gpus[value];
  }
  for (const GpuProbe& gpu : probe->gpus) {
    char text[16];
    const auto written = std::to_chars(text, text + sizeof text, gpu.index);
    if (std::string_view(text, static_cast<std::size_t>(written.ptr - text)) == index) return &gpu;
  }
  return nullptr;
}

/// The problem a record (drained, unhealthy) gives the unit it names.
Problem problemOf(const HealthRecord& record, const std::string& prefix, UidNames& uids) {
  return {record.kind == RecordKind::kDrained ? Problem::Kind::kDrained : Problem::Kind::kUnhealthy,
          prefix + describeRecord(record, uids), record};
}

}  // namespace

std::optional<HealthMode> parseHealthMode(std::string_view text) {
  if (text == "skip") return HealthMode::kSkip;
  if (text == "warn") return HealthMode::kWarn;
  if (text == "ignore") return HealthMode::kIgnore;
  return std::nullopt;
}

std::string_view healthModeName(HealthMode mode) noexcept {
  switch (mode) {
    case HealthMode::kSkip:
      return "skip";
    case HealthMode::kWarn:
      return "warn";
    case HealthMode::kIgnore:
      return "ignore";
  }
  return "skip";
}

std::string_view stateWord(Problem::Kind kind) {
  switch (kind) {
    case Problem::Kind::kLost:
      return "lost";
    case Problem::Kind::kDrained:
      return "drained";
    default:
      return "unhealthy";
  }
}

std::string_view causeWord(Problem::Kind kind) {
  switch (kind) {
    case Problem::Kind::kLost:
      return "lost";
    case Problem::Kind::kResetRequired:
      return "reset_required";
    case Problem::Kind::kRecoveryAction:
      return "recovery_action";
    case Problem::Kind::kFabricNotReady:
      return "fabric_not_ready";
    case Problem::Kind::kRowRemapFailed:
      return "row_remap_failed";
    case Problem::Kind::kRowRemapPending:
      return "row_remap_pending";
    case Problem::Kind::kRetiredPagesPending:
      return "retired_pages_pending";
    case Problem::Kind::kUnhealthy:
      return "watch_verdict";
    case Problem::Kind::kDrained:
      return "drained";
  }
  return "unhealthy";
}

GpuProber::GpuProber(const nvml::NvmlSession& session)
    : session_(session), health_(session.library()), state_(session.library()) {}

GpuProbe GpuProber::probe(unsigned index) const {
  const nvml::NvmlLibrary& library = session_.library();
  GpuProbe gpu;
  gpu.index = index;
  // The first failure of each kind is kept: it says which query answered so.
  const auto verdictOf = [&](nvml::Return code, const char* function) {
    if (code == nvml::Return::kGpuIsLost && !gpu.lost) {
      gpu.lost = library.describeFailure(function, code);
    } else if (code == nvml::Return::kResetRequired && !gpu.resetRequired) {
      gpu.resetRequired = library.describeFailure(function, code);
    }
  };
  const nvml::Result<nvml::Device> handle = session_.deviceByIndex(index);
  if (!handle.ok()) {
    // Only a lost GPU, or one that needs a reset, is a verdict; another failure is no answer
    // about its health.
    verdictOf(handle.code, handle.function);
    return gpu;
  }
  const nvml::Device& device = handle.value;
  const nvml::Result<std::string> uuid = device.uuid();
  gpu.uuid = uuid.get();
  verdictOf(uuid.code, uuid.function);
  const nvml::Result<nvml::Memory> memory = device.memoryInfo();
  verdictOf(memory.code, memory.function);
  const nvml::Result<nvml::RemappedRows> rows = health_.remappedRows(device);
  gpu.remappedRows = rows.get();
  verdictOf(rows.code, rows.function);
  if (!rows.ok()) {
    // GPUs without row remapping (before Ampere) retire pages instead.
    const nvml::Result<bool> pages = health_.retiredPagesPending(device);
    gpu.retiredPagesPending = pages.get();
    verdictOf(pages.code, pages.function);
  }
  const nvml::Result<bool> persistence = health_.persistenceMode(device);
  gpu.persistenceMode = persistence.get();
  verdictOf(persistence.code, persistence.function);
  const nvml::Result<unsigned> action = state_.recoveryAction(device);
  gpu.recoveryAction = action.get();
  verdictOf(action.code, action.function);
  const nvml::Result<nvml::FabricInfo> fabric = state_.fabricInfo(device);
  gpu.fabric = fabric.get();
  verdictOf(fabric.code, fabric.function);
  const nvml::Result<nvml::ComputeMode> mode = state_.computeMode(device);
  gpu.computeMode = mode.get();
  verdictOf(mode.code, mode.function);
  return gpu;
}

NvmlProbe probeNvml() {
  NvmlProbe probe;
  try {
    const std::shared_ptr<const nvml::NvmlLibrary> library = nvml::NvmlLibrary::load();
    const nvml::NvmlSession session(library);
    const nvml::Result<unsigned> count = session.deviceCount();
    if (!count.ok()) {
      probe.problem = std::string("NVML is not usable: ") +
                      library->describeFailure(count.function, count.code);
      return probe;
    }
    probe.usable = true;
    probe.count = count.value;
    const GpuProber prober(session);
    for (unsigned index = 0; index < count.value; ++index) {
      probe.gpus.push_back(prober.probe(index));
    }
  } catch (const nvml::NvmlError& e) {
    probe.usable = false;
    probe.libraryAbsent = e.code() == nvml::Return::kLibraryNotFound;
    probe.versionMismatch = e.code() == nvml::Return::kLibRmVersionMismatch;
    probe.problem = std::string("NVML is not usable: ") + e.what();
    probe.gpus.clear();
  }
  return probe;
}

std::optional<Problem> fabricProblem(const nvml::FabricInfo& fabric) {
  const auto notSupported = static_cast<unsigned>(nvml::FabricState::kNotSupported);
  const auto completed = static_cast<unsigned>(nvml::FabricState::kCompleted);
  if (fabric.state == notSupported) return std::nullopt;
  if (fabric.state != completed) {
    return Problem{Problem::Kind::kFabricNotReady,
                   "NVLink fabric registration in progress (state: " +
                       nvml::fabricStateText(fabric.state) + "): CUDA would fail on it"};
  }
  if (fabric.status != nvml::Return::kSuccess) {
    return Problem{Problem::Kind::kFabricNotReady,
                   "NVLink fabric registration failed (state: completed, status: " +
                       nvml::returnName(fabric.status) + "): CUDA would fail on it"};
  }
  return std::nullopt;
}

std::vector<Problem> problemsOf(const GpuProbe& probe) {
  std::vector<Problem> problems;
  if (probe.lost) problems.push_back({Problem::Kind::kLost, "lost: " + *probe.lost});
  if (probe.resetRequired) {
    problems.push_back({Problem::Kind::kResetRequired, "reset required: " + *probe.resetRequired});
  }
  if (probe.recoveryAction &&
      *probe.recoveryAction != static_cast<unsigned>(nvml::RecoveryAction::kNone)) {
    problems.push_back(
        {Problem::Kind::kRecoveryAction,
         "the driver's recovery action: " + nvml::recoveryActionText(*probe.recoveryAction)});
  }
  if (probe.fabric) {
    if (std::optional<Problem> fabric = fabricProblem(*probe.fabric)) {
      problems.push_back(std::move(*fabric));
    }
  }
  if (probe.remappedRows && probe.remappedRows->failureOccurred) {
    problems.push_back({Problem::Kind::kRowRemapFailed,
                        "row remapping failed (" + std::to_string(probe.remappedRows->uncorrected) +
                            " rows remapped for uncorrectable errors): the GPU needs service"});
  }
  if (probe.remappedRows && probe.remappedRows->pending) {
    problems.push_back(
        {Problem::Kind::kRowRemapPending, "row remapping pending: the GPU needs a reset"});
  }
  if (probe.retiredPagesPending && *probe.retiredPagesPending) {
    problems.push_back(
        {Problem::Kind::kRetiredPagesPending, "retired pages pending: the GPU needs a reset"});
  }
  return problems;
}

std::string_view noteWord(HealthNote::Kind kind) {
  switch (kind) {
    case HealthNote::Kind::kFabricDegraded:
      return "fabric_degraded";
  }
  return "note";
}

std::vector<HealthNote> notesOf(const GpuProbe& probe) {
  std::vector<HealthNote> notes;
  if (probe.fabric && probe.fabric->degradedBandwidth()) {
    notes.push_back({HealthNote::Kind::kFabricDegraded,
                     "its NVLink fabric reports degraded bandwidth: placement ranks it after the "
                     "others"});
  }
  return notes;
}

std::vector<std::vector<Problem>> assess(const discovery::UnitIndex& index,
                                         const std::vector<discovery::UnitRef>& units,
                                         const NvmlProbe* probe,
                                         const std::vector<HealthRecord>& records) {
  // Each record read once, by the index's rule: linear in the records, whatever their number.
  std::vector<std::vector<const HealthRecord*>> named(index.size());
  for (const HealthRecord& record : records) {
    if (record.kind == RecordKind::kReadmitted) continue;
    for (const discovery::UnitRef ref : index.namedByRecord(record.gpu, record.uuid)) {
      named[ref].push_back(&record);
    }
  }
  std::vector<std::vector<discovery::UnitRef>> instances(index.size());
  for (discovery::UnitRef ref = 0; ref < index.size(); ++ref) {
    if (index[ref].parent) instances[*index[ref].parent].push_back(ref);
  }
  UidNames uids;
  const auto addRecords = [&](discovery::UnitRef ref, const std::string& prefix,
                              std::vector<Problem>& problems) {
    for (const HealthRecord* record : named[ref]) {
      problems.push_back(problemOf(*record, prefix, uids));
    }
  };

  std::vector<std::vector<Problem>> verdicts(units.size());
  for (std::size_t i = 0; i < units.size(); ++i) {
    const discovery::UnitRef ref = units[i];
    const discovery::Unit& unit = index[ref];
    std::vector<Problem>& problems = verdicts[i];
    if (unit.parent) {
      const std::string& parent = index[*unit.parent].id;
      if (const GpuProbe* gpu = probeOf(probe, parent)) {
        for (Problem& problem : problemsOf(*gpu)) {
          problem.text = "its GPU " + parent + ": " + problem.text;
          problems.push_back(std::move(problem));
        }
      }
      addRecords(*unit.parent, "its GPU " + parent + ": ", problems);
      addRecords(ref, "", problems);
      continue;
    }
    if (const GpuProbe* gpu = probeOf(probe, unit.id)) {
      for (Problem& problem : problemsOf(*gpu)) problems.push_back(std::move(problem));
    }
    addRecords(ref, "", problems);
    for (const discovery::UnitRef instance : instances[ref]) {
      addRecords(instance, "its MIG instance " + index[instance].id + ": ", problems);
    }
  }
  return verdicts;
}

std::vector<std::vector<Problem>> assess(const std::vector<discovery::GpuDevice>& units,
                                         const discovery::UnitIndex& devices,
                                         const NvmlProbe* probe,
                                         const std::vector<HealthRecord>& records) {
  std::vector<discovery::UnitRef> refs;
  refs.reserve(units.size());
  // A unit the devices do not know is added to a copy of their index: the caller's stays theirs.
  std::optional<discovery::UnitIndex> extended;
  for (const discovery::GpuDevice& unit : units) {
    const discovery::UnitIndex& index = extended ? *extended : devices;
    if (const std::optional<discovery::UnitRef> known = index.find(unit.identifier)) {
      refs.push_back(*known);
      continue;
    }
    if (!extended) extended.emplace(devices);
    refs.push_back(extended->add(discovery::Unit{unit.identifier, unit.uuid}));
  }
  return assess(extended ? *extended : devices, refs, probe, records);
}

FilteredUnits filterUnhealthy(std::vector<discovery::GpuDevice> units,
                              const discovery::UnitIndex& devices, bool askNvml, HealthMode mode,
                              const std::filesystem::path& coordinationFile) {
  FilteredUnits filtered;
  if (mode == HealthMode::kIgnore) {
    filtered.units = std::move(units);
    return filtered;
  }
  std::vector<HealthRecord> records;
  try {
    HealthFile file = readHealth(coordinationFile);
    records = std::move(file.parsed.records);
    for (const std::string& warning : file.warnings) {
      filtered.notices.push_back(Notice::warning(warning));
    }
    for (const std::string& note : file.notes) {
      filtered.notices.push_back(
          Notice::note("health records " + file.path.string() + ": " + note));
    }
    for (const store::JunkLine& junk : file.parsed.junk) {
      std::vector<HealthRecord> verdicts = verdictsOfJunk(junk, file.path);
      records.insert(records.end(), std::make_move_iterator(verdicts.begin()),
                     std::make_move_iterator(verdicts.end()));
    }
  } catch (const store::StoreError& e) {
    // A drained or unhealthy GPU is never handed out because its record could not be read.
    throw HealthRecordsUnreadable(e.what());
  }
  std::optional<NvmlProbe> probe;
  if (askNvml) probe = probeNvml();
  const std::vector<std::vector<Problem>> verdicts =
      assess(units, devices, probe && probe->usable ? &*probe : nullptr, records);
  filtered.units.reserve(units.size());
  for (std::size_t i = 0; i < units.size(); ++i) {
    if (verdicts[i].empty()) {
      // What does not keep it out is said all the same (a MIG instance: its GPU's).
      const GpuProbe* gpu =
          probe && probe->usable
              ? probeOf(&*probe, units[i].mig ? std::to_string(units[i].mig->parentIndex)
                                              : units[i].identifier)
              : nullptr;
      if (gpu != nullptr) {
        for (const HealthNote& note : notesOf(*gpu)) {
          filtered.notices.push_back(Notice::note("GPU " + units[i].identifier + ": " + note.text));
        }
      }
      filtered.units.push_back(std::move(units[i]));
      continue;
    }
    // A few problems and a count: a file of junk verdicts for one GPU must not make one line that
    // grows with the file.
    std::string why;
    for (std::size_t p = 0; p < verdicts[i].size() && p < store::kJunkLinesShown; ++p) {
      why += (why.empty() ? "" : "; ") + verdicts[i][p].text;
    }
    if (verdicts[i].size() > store::kJunkLinesShown) {
      why += "; and " + std::to_string(verdicts[i].size() - store::kJunkLinesShown) + " more";
    }
    if (mode == HealthMode::kWarn) {
      filtered.notices.push_back(Notice::warning("GPU " + units[i].identifier + " is " +
                                                 std::string(stateWord(verdicts[i].front().kind)) +
                                                 ", handed out anyway (--health warn): " + why));
      filtered.units.push_back(std::move(units[i]));
    } else {
      filtered.notices.push_back(
          Notice::note("GPU " + units[i].identifier + " is not handed out: " + why));
    }
  }
  return filtered;
}

}  // namespace flink::health
