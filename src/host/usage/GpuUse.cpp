// Which processes use each GPU, and whether a record explains them. See GpuUse.h.
#include "host/usage/GpuUse.h"

#include <algorithm>
#include <memory>
#include <unordered_map>

#include "host/nvml/Nvml.h"
#include "host/nvml/NvmlDeviceState.h"
#include "util/Strings.h"

namespace flink::usage {
namespace {

constexpr std::uint64_t kMiB = 1024 * 1024;

/// At most this many processes are named in one line; the rest are counted.
constexpr std::size_t kProcessesNamed = 5;

/// The NVML handle of `device`: a whole GPU by its index, a MIG instance by its UUID among the
/// slots of its GPU.
std::optional<nvml::Device> handleOf(const nvml::NvmlSession& session,
                                     const discovery::GpuDevice& device) {
  const std::optional<unsigned> index = device.mig
                                            ? std::optional<unsigned>(device.mig->parentIndex)
                                            : strings::parseUnsigned(device.identifier);
  if (!index) return std::nullopt;
  const nvml::Result<nvml::Device> gpu = session.deviceByIndex(*index);
  if (!gpu.ok()) return std::nullopt;
  if (!device.mig) return gpu.value;
  const nvml::Result<unsigned> slots = gpu.value.maxMigDeviceCount();
  if (!slots.ok()) return std::nullopt;
  for (unsigned slot = 0; slot < slots.value; ++slot) {
    const nvml::Result<nvml::Device> instance = gpu.value.migDeviceByIndex(slot);
    if (!instance.ok()) continue;
    const nvml::Result<std::string> uuid = instance.value.uuid();
    if (uuid.ok() && device.uuid &&
        strings::toLower(uuid.value) == strings::toLower(*device.uuid)) {
      return instance.value;
    }
  }
  return std::nullopt;
}

/// The processes on `device`. A MIG-mode GPU lists its instances' processes to privileged
/// callers only (kNoPermission otherwise), while each instance lists its own to anyone: a worker
/// that is not root then reads them instance by instance, so that a process on one instance
/// still makes the whole GPU busy. The whole GPU's answer where that is not possible.
nvml::Result<std::vector<nvml::Process>> processesOf(const nvml::DeviceStateApi& api,
                                                     const nvml::Device& device) {
  nvml::Result<std::vector<nvml::Process>> whole = api.runningProcesses(device);
  if (whole.code != nvml::Return::kNoPermission) return whole;
  const nvml::Result<unsigned> slots = device.maxMigDeviceCount();
  if (!slots.ok()) return whole;
  nvml::Result<std::vector<nvml::Process>> instances{nvml::Return::kSuccess, {}, whole.function};
  bool any = false;
  for (unsigned slot = 0; slot < slots.value; ++slot) {
    const nvml::Result<nvml::Device> instance = device.migDeviceByIndex(slot);
    if (!instance.ok()) continue;  // an empty slot
    const nvml::Result<std::vector<nvml::Process>> own = api.runningProcesses(instance.value);
    if (!own.ok()) return whole;  // one instance untold: the GPU cannot be judged
    instances.value.insert(instances.value.end(), own.value.begin(), own.value.end());
    any = true;
  }
  return any ? instances : whole;
}

/// Whether a record naming unit `named` speaks for processes on unit `unit`: the same unit, or
/// the one is the other's GPU (a MIG instance's processes are its GPU's too).
bool covers(const discovery::UnitIndex& index, discovery::UnitRef named, discovery::UnitRef unit) {
  if (named == unit) return true;
  return index[named].parent == unit || index[unit].parent == named;
}

std::string processesText(const std::vector<ForeignProcess>& processes, bool withNames) {
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < processes.size() && i < kProcessesNamed; ++i) {
    // "process 4242 (…)" without its first word: the caller says "process" or "processes".
    parts.push_back(describeProcess(processes[i], withNames).substr(8));
  }
  if (processes.size() > kProcessesNamed) {
    parts.push_back(std::to_string(processes.size() - kProcessesNamed) + " more");
  }
  if (parts.size() == 1) return "process " + parts.front();
  const std::string last = parts.back();
  parts.pop_back();
  return "processes " + strings::join(parts, ", ") + " and " + last;
}

}  // namespace

std::optional<ForeignMode> parseForeignMode(std::string_view text) {
  if (text == "skip") return ForeignMode::kSkip;
  if (text == "warn") return ForeignMode::kWarn;
  if (text == "ignore") return ForeignMode::kIgnore;
  return std::nullopt;
}

std::string_view foreignModeName(ForeignMode mode) noexcept {
  switch (mode) {
    case ForeignMode::kSkip:
      return "skip";
    case ForeignMode::kWarn:
      return "warn";
    case ForeignMode::kIgnore:
      return "ignore";
  }
  return "skip";
}

std::vector<UnitUse> readUse(const std::vector<std::string>& units,
                             const std::vector<discovery::GpuDevice>& devices) {
  std::vector<UnitUse> use;
  if (units.empty()) return use;
  try {
    const std::shared_ptr<const nvml::NvmlLibrary> library = nvml::NvmlLibrary::load();
    const nvml::NvmlSession session(library);
    const nvml::DeviceStateApi api(*library);
    for (const std::string& unit : units) {
      const auto device =
          std::find_if(devices.begin(), devices.end(),
                       [&](const discovery::GpuDevice& d) { return d.identifier == unit; });
      if (device == devices.end()) continue;
      const std::optional<nvml::Device> handle = handleOf(session, *device);
      if (!handle) continue;
      UnitUse entry;
      entry.unit = unit;
      const nvml::Result<std::vector<nvml::Process>> processes = processesOf(api, *handle);
      if (processes.ok()) {
        std::vector<GpuProcess> listed;
        for (const nvml::Process& process : processes.value) {
          GpuProcess gpuProcess;
          gpuProcess.pid = static_cast<pid_t>(process.pid);
          if (process.usedBytes) gpuProcess.usedMiB = *process.usedBytes / kMiB;
          gpuProcess.mpsClient = (process.lists & nvml::kMpsProcess) != 0;
          listed.push_back(gpuProcess);
        }
        entry.processes = std::move(listed);
      }
      if (const nvml::Result<nvml::MemoryUse> memory = api.memoryUse(*handle); memory.ok()) {
        entry.memoryUsedMiB = memory.value.usedBytes / kMiB;
      }
      use.push_back(std::move(entry));
    }
  } catch (const nvml::NvmlError&) {
    // NVML cannot be used: nothing is known, and nothing is judged. The enumeration says why.
    use.clear();
  }
  return use;
}

Explanation explain(pid_t pid, std::span<const liveness::Owner> owners, bool mpsShared,
                    liveness::HostFacts& facts) {
  const liveness::Reader& reader = facts.reader();
  if (!liveness::seesHostPids(reader)) return Explanation::kUnjudgeable;
  // The owners whose pids name processes here, running as recorded.
  std::vector<liveness::Owner> running;
  for (const liveness::Owner& owner : owners) {
    if (liveness::namespaceOf(owner, reader) != liveness::Namespace::kSame) continue;
    if (liveness::ownerRuns(owner, facts)) running.push_back(owner);
  }
  if (!running.empty()) {
    const std::vector<liveness::Owner> chain = liveness::ancestry(pid, facts);
    for (std::size_t depth = 0; depth < chain.size(); ++depth) {
      const bool owns = std::any_of(running.begin(), running.end(), [&](const liveness::Owner& o) {
        return liveness::sameProcess(o, chain[depth]);
      });
      if (owns) return depth == 0 ? Explanation::kRecordOwner : Explanation::kOwnerDescendant;
    }
  }
  if (mpsShared && facts.processName(pid) == kMpsServerName) return Explanation::kMpsServer;
  return Explanation::kUnexplained;
}

const UnitVerdict* Judgement::find(std::string_view unit) const {
  for (const UnitVerdict& verdict : units) {
    if (verdict.unit == unit) return &verdict;
  }
  return nullptr;
}

std::vector<std::string> Judgement::busyUnits() const {
  std::vector<std::string> busy;
  for (const UnitVerdict& verdict : units) {
    if (verdict.busy()) busy.push_back(verdict.unit);
  }
  return busy;
}

Judgement judge(const std::vector<UnitUse>& use, const std::vector<coordination::Record>& records,
                const discovery::UnitIndex& index, const std::unordered_set<std::string>& mpsShared,
                liveness::HostFacts& facts) {
  Judgement judgement;
  const bool judgeable = liveness::seesHostPids(facts.reader());
  // Each record's units, read once, only when a process is to be judged.
  std::optional<std::vector<std::vector<discovery::UnitRef>>> recordUnits;
  for (const UnitUse& unit : use) {
    if (unit.processes && unit.processes->empty()) {
      if (unit.memoryUsedMiB && *unit.memoryUsedMiB >= kMemoryWithoutProcessNoteMiB) {
        judgement.units.push_back(UnitVerdict{unit.unit, {}, unit.memoryUsedMiB});
      }
      continue;
    }
    if (!unit.processes) {
      judgement.unread.push_back(unit.unit);
      continue;
    }
    if (!judgeable) {
      judgement.unjudged.push_back(unit.unit);
      continue;
    }
    std::vector<liveness::Owner> owners;
    if (const std::optional<discovery::UnitRef> ref = index.find(unit.unit)) {
      if (!recordUnits) {
        recordUnits.emplace();
        for (const coordination::Record& record : records) {
          recordUnits->push_back(index.namedByRecord(record.gpu, record.uuid));
        }
      }
      for (std::size_t i = 0; i < records.size(); ++i) {
        for (const discovery::UnitRef named : (*recordUnits)[i]) {
          if (covers(index, named, *ref)) {
            owners.push_back(records[i].owner);
            break;
          }
        }
      }
    }
    const bool mps = mpsShared.count(unit.unit) > 0;
    std::vector<ForeignProcess> foreign;
    for (const GpuProcess& process : *unit.processes) {
      if (explain(process.pid, owners, mps, facts) != Explanation::kUnexplained) continue;
      foreign.push_back({process.pid, process.usedMiB, facts.processName(process.pid)});
    }
    if (!foreign.empty()) {
      judgement.units.push_back(UnitVerdict{unit.unit, std::move(foreign), std::nullopt});
    }
  }
  return judgement;
}

std::string describeProcess(const ForeignProcess& process, bool withName) {
  std::vector<std::string> about;
  if (withName && process.name) about.push_back(strings::quoteForMessage(*process.name, 64));
  if (process.usedMiB) about.push_back(std::to_string(*process.usedMiB) + " MiB");
  return "process " + std::to_string(process.pid) +
         (about.empty() ? std::string() : " (" + strings::join(about, ", ") + ")");
}

std::string describeBusy(const UnitVerdict& verdict) {
  return "GPU " + verdict.unit + " is used by " + processesText(verdict.foreign, false) +
         ", which no record names";
}

std::string describeMemoryWithoutProcess(const UnitVerdict& verdict) {
  return "GPU " + verdict.unit + " has " +
         std::to_string(verdict.memoryWithoutProcessMiB.value_or(0)) +
         " MiB of memory in use, but NVML lists no process on it (a process of another container, "
         "or memory the driver did not give back)";
}

std::optional<Notice> unjudgedNote(const Judgement& judgement) {
  if (judgement.unjudged.empty()) return std::nullopt;
  return Notice::note(
      "NVML lists processes on GPU(s) " + strings::join(judgement.unjudged, ",") +
      ", but this process does not see the host's process ids (it runs in a pid namespace of its "
      "own), so it cannot tell whether a record explains them; they are not counted as busy");
}

}  // namespace flink::usage
