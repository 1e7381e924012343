// `flink-gpu watch` (see Watch.h): one NVML session for the watch's life, one event set, and the
// health records written only when a verdict is made.
#include "host/health/Watch.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "host/enumeration/UnitIndex.h"
#include "host/health/HealthRecords.h"
#include "host/health/HostHealth.h"
#include "host/nvml/Nvml.h"
#include "host/nvml/NvmlDeviceState.h"
#include "host/nvml/NvmlHealth.h"
#include "host/store/LockedFile.h"
#include "host/store/RecordFile.h"
#include "host/store/Siblings.h"
#include "host/store/StoreError.h"

namespace flink::health {
namespace {

/// One GPU being watched, with its MIG instances (by their ids) for Xids NVML attributes to one.
struct WatchedGpu {
  unsigned index = 0;
  nvml::Device device;
  std::optional<std::string> uuid;
  struct Instance {
    unsigned gpuInstanceId;
    unsigned computeInstanceId;
    std::string uuid;
  };
  std::vector<Instance> instances;
  bool lostRecorded = false;
  /// The driver has NVML_FI_DEV_GET_GPU_RECOVERY_ACTION for it: its verdicts may end by the
  /// driver's word.
  bool recoveryField = false;
  /// The recovery action last read (nullopt before the first read).
  std::optional<unsigned> lastAction;
  /// What was last said of its re-admission, so that a poll says it once, not every time.
  std::string lastSaid;
};

constexpr unsigned kNoAction = static_cast<unsigned>(nvml::RecoveryAction::kNone);

std::vector<WatchedGpu::Instance> migInstancesOf(const nvml::Device& device) {
  std::vector<WatchedGpu::Instance> instances;
  const nvml::Result<nvml::MigMode> mode = device.migMode();
  if (!mode.ok() || !mode.value.enabled()) return instances;
  const nvml::Result<unsigned> slots = device.maxMigDeviceCount();
  if (!slots.ok()) return instances;
  for (unsigned slot = 0; slot < slots.value; ++slot) {
    const nvml::Result<nvml::Device> mig = device.migDeviceByIndex(slot);
    if (!mig.ok()) continue;
    const nvml::Result<std::string> uuid = mig.value.uuid();
    const nvml::Result<unsigned> gi = mig.value.gpuInstanceId();
    const nvml::Result<unsigned> ci = mig.value.computeInstanceId();
    if (uuid.ok() && gi.ok() && ci.ok()) instances.push_back({gi.value, ci.value, uuid.value});
  }
  return instances;
}

/// Sleeps `duration` in short steps, returning early (true) when a stop is requested.
bool sleepUnlessStopped(std::chrono::milliseconds duration, const WatchOptions& options) {
  const auto until = std::chrono::steady_clock::now() + duration;
  while (std::chrono::steady_clock::now() < until) {
    if (options.stopRequested()) return true;
    std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(
        std::chrono::milliseconds(50), std::chrono::duration_cast<std::chrono::milliseconds>(
                                           until - std::chrono::steady_clock::now()) +
                                           std::chrono::milliseconds(1)));
  }
  return options.stopRequested();
}

class Watcher {
 public:
  explicit Watcher(const WatchOptions& options) : options_(options) {}

  int run() {
    std::shared_ptr<const nvml::NvmlLibrary> library;
    std::unique_ptr<nvml::NvmlSession> session;
    try {
      library = nvml::NvmlLibrary::load();
      session = std::make_unique<nvml::NvmlSession>(library);
    } catch (const nvml::NvmlError& e) {
      log(std::string("error: NVML is not usable: ") + e.what());
      return 1;
    }
    const nvml::NvmlHealthApi api(*library);
    state_.emplace(*library);
    prober_.emplace(*session);
    const nvml::Result<unsigned> count = session->deviceCount();
    if (!count.ok()) {
      log("error: NVML is not usable: " + library->describeFailure(count.function, count.code));
      return 1;
    }
    nvml::Result<std::shared_ptr<nvml::EventSet>> created = api.createEventSet();
    if (!created.ok()) {
      log("error: cannot watch: " + library->describeFailure(created.function, created.code));
      return 1;
    }
    nvml::EventSet& set = *created.value;

    for (unsigned index = 0; index < count.value; ++index) {
      const nvml::Result<nvml::Device> handle = session->deviceByIndex(index);
      if (!handle.ok()) {
        notWatched(index, library->describeFailure(handle.function, handle.code));
        continue;
      }
      WatchedGpu gpu;
      gpu.index = index;
      gpu.device = handle.value;
      gpu.uuid = handle.value.uuid().get();
      const nvml::Result<std::uint64_t> supported = api.supportedEventTypes(gpu.device);
      if (!supported.ok()) {
        notWatched(index, library->describeFailure(supported.function, supported.code));
        continue;
      }
      // The field where the driver has it (a driver without it answers kNotSupported, a library
      // without nvmlDeviceGetFieldValues kFunctionNotFound): its event too, where offered.
      const nvml::Return field = state_->recoveryAction(gpu.device).code;
      gpu.recoveryField =
          field != nvml::Return::kNotSupported && field != nvml::Return::kFunctionNotFound;
      const std::uint64_t types =
          supported.value & (nvml::kEventXidCritical | nvml::kEventDoubleBitEcc |
                             (gpu.recoveryField ? nvml::kEventGpuRecoveryAction : 0));
      if ((types & (nvml::kEventXidCritical | nvml::kEventDoubleBitEcc)) == 0) {
        notWatched(index, "it reports neither Xid nor double-bit ECC events");
        continue;
      }
      const nvml::Result<bool> registered = set.registerEvents(gpu.device, types);
      if (!registered.ok()) {
        notWatched(index, library->describeFailure(registered.function, registered.code));
        continue;
      }
      gpu.instances = migInstancesOf(gpu.device);
      gpus_.push_back(std::move(gpu));
    }
    std::string watched;
    for (const WatchedGpu& gpu : gpus_) {
      watched += (watched.empty() ? "" : ",") + std::to_string(gpu.index);
    }
    // The records it will write, checked now: a verdict is no use in records no allocator reads.
    try {
      (void)readHealth(options_.coordinationFile);
    } catch (const store::StoreError& e) {
      log(std::string("warning: the health records cannot be used now: ") + e.what() +
          "; verdicts are held and tried again until they can be written");
    }
    log("watching GPU(s) " + (watched.empty() ? std::string("none") : watched) + " of " +
        std::to_string(count.value) + " through " +
        (api.hasWaitV2() ? "nvmlEventSetWait_v2" : "nvmlEventSetWait (no MIG attribution)") +
        "; verdicts are recorded in " + healthPathOf(options_.coordinationFile).string() +
        ", beside the coordination file " + options_.coordinationFile.string());
    std::string byDriver;
    for (const WatchedGpu& gpu : gpus_) {
      if (gpu.recoveryField) byDriver += (byDriver.empty() ? "" : ",") + std::to_string(gpu.index);
    }
    if (options_.readmit == Readmit::kNever) {
      log("--readmit never: every verdict stays until an operator acts (`flink-gpu undrain`)");
    } else if (byDriver.empty()) {
      log("re-admits no GPU on the driver's word: no GPU watched has the recovery-action field; "
          "verdicts stay until an operator acts (`flink-gpu undrain`)");
    } else {
      log("re-admits GPU(s) " + byDriver +
          " on the driver's word: a verdict during which the driver asked a recovery action ends "
          "when it asks none and the GPU answers; other verdicts and drains stay until an "
          "operator acts");
    }
    reviewRecovery();
    if (options_.watching) options_.watching();

    auto backoff = options_.firstBackoff;
    while (!options_.stopRequested()) {
      flushPending();
      if (std::chrono::steady_clock::now() >= nextReview_) reviewRecovery();
      if (gpus_.empty()) {
        // Nothing to wait for; stay, so that a systemd unit does not restart in a loop.
        if (sleepUnlessStopped(std::chrono::milliseconds(options_.waitSliceMs), options_)) break;
        continue;
      }
      const nvml::Result<nvml::Event> event = set.wait(options_.waitSliceMs);
      if (event.code == nvml::Return::kTimeout) continue;
      if (event.ok()) {
        backoff = options_.firstBackoff;
        handle(event.value);
        continue;
      }
      const std::string failure = library->describeFailure(event.function, event.code);
      if (event.code == nvml::Return::kGpuIsLost) {
        lost(event.value.device, failure);
      } else {
        log("warning: " + failure + "; waiting again in " + std::to_string(backoff.count()) +
            " ms");
      }
      if (sleepUnlessStopped(backoff, options_)) break;
      backoff = std::min(backoff * 2, options_.maxBackoff);
    }
    nextFlush_ = {};  // one last try, whatever the pause
    flushPending();
    if (!pending_.empty()) {
      // NVML delivers an event once: a verdict not written now is lost unless someone acts.
      // The file watched, unless it is the default the command takes anyway.
      const std::string fileOption =
          options_.coordinationFile == std::filesystem::path(coordination::kDefaultCoordinationFile)
              ? std::string()
              : " --coordination-file '" + options_.coordinationFile.string() + "'";
      for (const HealthRecord& verdict : pending_) {
        log("error: GPU " + verdict.gpu + " was found unhealthy (" + verdict.reason +
            ") but the verdict could not be recorded; record it by hand: `flink-gpu drain --gpu " +
            verdict.gpu + fileOption + " --reason 'Xid " +
            (verdict.xid ? std::to_string(*verdict.xid) : std::string("?")) + "'`");
      }
      log("stopped with " + std::to_string(pending_.size()) + " verdict(s) not recorded");
      return 1;
    }
    log("stopped");
    return 0;
  }

 private:
  void log(const std::string& line) const { options_.log(line); }

  void notWatched(unsigned index, const std::string& why) {
    // Not a verdict: some boards are too old for events.
    log("note: GPU " + std::to_string(index) + " is not watched (not called unhealthy): " + why);
  }

  WatchedGpu* gpuOf(nvmlDevice_st* device) {
    for (WatchedGpu& gpu : gpus_) {
      if (gpu.device.rawHandle() == device) return &gpu;
    }
    return nullptr;
  }

  void handle(const nvml::Event& event) {
    WatchedGpu* gpu = gpuOf(event.device);
    if (gpu == nullptr) {
      log("warning: an event for a GPU that is not watched (type " + std::to_string(event.type) +
          "), ignored");
      return;
    }
    HealthRecord record;
    record.kind = RecordKind::kUnhealthy;
    record.gpu = std::to_string(gpu->index);
    record.uuid = gpu->uuid;
    record.source = "watch";
    std::string where = "GPU " + record.gpu;
    if (event.type == nvml::kEventXidCritical) {
      if (!isCriticalXid(event.data, options_)) {
        log("Xid " + std::to_string(event.data) + " on GPU " + record.gpu +
            " ignored (an application's error, not the GPU's)");
        return;
      }
      record.xid = event.data;
      const std::string name = xidDescription(event.data);
      record.reason = "critical Xid error event" + (name.empty() ? "" : ": " + name);
      if (event.gpuInstanceId && event.computeInstanceId) {
        for (const WatchedGpu::Instance& instance : gpu->instances) {
          if (instance.gpuInstanceId == *event.gpuInstanceId &&
              instance.computeInstanceId == *event.computeInstanceId) {
            record.gpu = instance.uuid;
            record.uuid.reset();
            where = "MIG instance " + instance.uuid + " of GPU " + std::to_string(gpu->index);
          }
        }
      }
    } else if (event.type == nvml::kEventDoubleBitEcc) {
      record.reason = "double-bit ECC error event";
    } else if (event.type == nvml::kEventGpuRecoveryAction) {
      // The event's data is not trusted: the field is read again.
      reviewRecovery(*gpu);
      return;
    } else {
      return;
    }
    // Said to be skipped only once that is recorded (flushPending).
    log(where + " is unhealthy: " +
        (record.xid ? "Xid " + std::to_string(*record.xid) + ", " : "") + record.reason);
    record.since = nowSeconds();
    pending_.push_back(std::move(record));
    flushPending();
    // Whether the driver asks for recovery now, after this verdict.
    if (pending_.empty()) reviewRecovery(*gpu);
  }

  void lost(nvmlDevice_st* device, const std::string& failure) {
    std::vector<WatchedGpu*> lostGpus;
    if (WatchedGpu* named = gpuOf(device)) {
      lostGpus.push_back(named);
    } else {
      // NVML did not say which: ask each; only those that answer "lost" are.
      for (WatchedGpu& each : gpus_) {
        if (each.device.uuid().code == nvml::Return::kGpuIsLost) lostGpus.push_back(&each);
      }
      if (lostGpus.empty()) log("warning: " + failure + ", but no GPU answers as lost");
    }
    for (WatchedGpu* gpu : lostGpus) {
      if (gpu->lostRecorded) continue;
      gpu->lostRecorded = true;
      HealthRecord record;
      record.kind = RecordKind::kUnhealthy;
      record.gpu = std::to_string(gpu->index);
      record.uuid = gpu->uuid;
      record.source = "watch";
      record.reason = "lost: " + failure;
      record.since = nowSeconds();
      log("GPU " + record.gpu + " is unhealthy: " + record.reason);
      pending_.push_back(std::move(record));
    }
    flushPending();
  }

  /// Writes the verdicts not yet recorded. Those that cannot be written now (a full disk, a
  /// health file that fails its checks) are tried again after a pause that doubles, as the
  /// waits' does, up to maxBackoff; a failure is logged once per change of state, not per try.
  void flushPending() {
    if (pending_.empty()) return;
    const auto now = std::chrono::steady_clock::now();
    if (now < nextFlush_) return;
    try {
      recordVerdicts(options_.coordinationFile, pending_);
      if (!lastFailure_.empty()) {
        log("recorded " + std::to_string(pending_.size()) +
            " verdict(s) held back while the health records could not be written");
      }
      for (const HealthRecord& verdict : pending_) {
        log("recorded GPU " + verdict.gpu +
            " unhealthy: allocators skip it until `flink-gpu undrain --gpu " + verdict.gpu + "`");
      }
      pending_.clear();
      lastFailure_.clear();
      flushBackoff_ = options_.firstBackoff;
      nextFlush_ = {};
    } catch (const store::StoreError& e) {
      if (e.what() != lastFailure_) {
        log(std::string("warning: cannot record the verdict yet: ") + e.what() +
            "; trying again with a pause that doubles up to " +
            std::to_string(options_.maxBackoff.count()) + " ms");
        lastFailure_ = e.what();
      }
      nextFlush_ = now + flushBackoff_;
      flushBackoff_ = std::min(flushBackoff_ * 2, options_.maxBackoff);
    }
  }

  /// Whether `record` is a verdict of this watch on `gpu` or one of its MIG instances.
  static bool ownVerdict(const HealthRecord& record, const WatchedGpu& gpu,
                         const discovery::OneUnit& unit) {
    if (record.kind != RecordKind::kUnhealthy || record.source != "watch") return false;
    if (unit.namedBy(record.gpu, record.uuid)) return true;
    return std::any_of(
        gpu.instances.begin(), gpu.instances.end(), [&](const WatchedGpu::Instance& instance) {
          return discovery::namesUnit(record.gpu, record.uuid, instance.uuid, std::nullopt);
        });
  }

  /// Says `line` of `gpu` unless it was the last thing said of it.
  void sayOnce(WatchedGpu& gpu, const std::string& line) {
    if (gpu.lastSaid == line) return;
    gpu.lastSaid = line;
    log(line);
  }

  /// The health records for a review, or nullopt after saying why not (once per failure).
  std::optional<HealthFile> readForReview() {
    try {
      HealthFile file = readHealth(options_.coordinationFile);
      reviewFailure_.clear();
      return file;
    } catch (const store::StoreError& e) {
      if (e.what() != reviewFailure_) {
        log(std::string("warning: cannot read the health records to follow the driver's "
                        "recovery action: ") +
            e.what() + "; trying again");
        reviewFailure_ = e.what();
      }
      return std::nullopt;
    }
  }

  /// Reads every GPU's recovery action (reviewRecovery(gpu)), and when to do it again.
  void reviewRecovery() {
    for (WatchedGpu& gpu : gpus_) reviewRecovery(gpu);
    nextReview_ = std::chrono::steady_clock::now() + options_.recoveryPoll;
  }

  /// What the driver's recovery action says of `gpu` now: an action recorded (a verdict, or a
  /// mark on watch's verdicts), or none asked, when watch's marked verdicts end (Readmit).
  void reviewRecovery(WatchedGpu& gpu) {
    if (!gpu.recoveryField) return;
    const nvml::Result<unsigned> action = state_->recoveryAction(gpu.device);
    // No answer (a lost GPU is the wait's to tell): nothing changes.
    if (!action.ok()) return;
    const std::optional<unsigned> before = gpu.lastAction;
    gpu.lastAction = action.value;
    const std::string name = "GPU " + std::to_string(gpu.index);
    if (action.value != kNoAction) {
      if (before != action.value) {
        log(name + ": the driver's recovery action: " + nvml::recoveryActionText(action.value));
      }
      recordAction(gpu, action.value);
      return;
    }
    if (before && *before != kNoAction) log(name + ": the driver asks no recovery action now");
    readmit(gpu);
  }

  /// The driver asks `action` of `gpu`: watch's verdicts of it are marked with it, or, where it
  /// has none, one is recorded.
  void recordAction(WatchedGpu& gpu, unsigned action) {
    const std::optional<HealthFile> read = readForReview();
    if (!read) return;
    const std::string index = std::to_string(gpu.index);
    const discovery::OneUnit unit(index, gpu.uuid);
    bool own = false;
    bool marked = true;
    for (const HealthRecord& record : read->parsed.records) {
      if (!ownVerdict(record, gpu, unit)) continue;
      own = true;
      marked = marked && record.recoveryAction == action;
    }
    if (own && marked) return;  // as recorded already
    const std::string words = nvml::recoveryActionText(action);
    bool added = false;
    try {
      updateHealth(options_.coordinationFile, [&](std::vector<HealthRecord>& records) {
        added = true;
        for (HealthRecord& record : records) {
          if (!ownVerdict(record, gpu, unit)) continue;
          record.recoveryAction = action;
          added = false;
        }
        if (!added) return;
        HealthRecord verdict;
        verdict.kind = RecordKind::kUnhealthy;
        verdict.gpu = index;
        verdict.uuid = gpu.uuid;
        verdict.since = nowSeconds();
        verdict.recoveryAction = action;
        verdict.source = "watch";
        verdict.reason = "the driver's recovery action: " + words;
        records.push_back(std::move(verdict));
      });
    } catch (const store::StoreError& e) {
      sayOnce(gpu, std::string("warning: cannot record the driver's recovery action for GPU ") +
                       index + " yet: " + e.what() + "; trying again");
      return;
    }
    const std::string until = options_.readmit == Readmit::kNever
                                  ? "`flink-gpu undrain --gpu " + index + "`"
                                  : "the driver asks no recovery action and it answers, or "
                                    "`flink-gpu undrain --gpu " +
                                        index + "`";
    gpu.lastSaid.clear();
    log(added ? "recorded GPU " + index + " unhealthy (the driver's recovery action: " + words +
                    "): allocators skip it until " + until
              : "GPU " + index + ": its verdict is kept until " + until);
  }

  /// The driver asks no recovery action of `gpu`: watch's verdicts of it marked with one end, if
  /// the GPU answers (health::problemsOf, the allocators' rule, finds nothing, and its UUID is
  /// the one watched).
  void readmit(WatchedGpu& gpu) {
    const std::optional<HealthFile> read = readForReview();
    if (!read) return;
    const std::string index = std::to_string(gpu.index);
    const discovery::OneUnit unit(index, gpu.uuid);
    std::size_t marked = 0;
    std::size_t others = 0;
    for (const HealthRecord& record : read->parsed.records) {
      if (record.kind == RecordKind::kReadmitted) continue;
      if (ownVerdict(record, gpu, unit) && record.recoveryAction) {
        ++marked;
      } else if (unit.namedBy(record.gpu, record.uuid) || ownVerdict(record, gpu, unit)) {
        ++others;
      }
    }
    const std::string name = "GPU " + index;
    if (marked == 0) {
      if (others > 0) {
        sayOnce(gpu, name + " stays out: the driver asked no recovery action during its verdict, " +
                         "or an operator drained it; it stays until `flink-gpu undrain --gpu " +
                         index + "`");
      }
      return;
    }
    if (options_.readmit == Readmit::kNever) {
      sayOnce(gpu, name +
                       ": the driver asks no recovery action now; --readmit never: its verdict "
                       "stays until `flink-gpu undrain --gpu " +
                       index + "`");
      return;
    }
    const GpuProbe probe = prober_->probe(gpu.index);
    const std::vector<Problem> problems = problemsOf(probe);
    std::string why;
    if (!problems.empty()) {
      why = problems.front().text;
    } else if (!probe.uuid) {
      why = "it does not answer with its UUID";
    } else if (gpu.uuid && *probe.uuid != *gpu.uuid) {
      why = "it answers with another UUID, " + *probe.uuid;
    }
    if (!why.empty()) {
      sayOnce(gpu,
              name + " is not re-admitted yet: the driver asks no recovery action, but " + why);
      return;
    }
    std::optional<unsigned> asked;
    std::size_t cleared = 0;
    bool stillOut = false;
    try {
      updateHealth(options_.coordinationFile, [&](std::vector<HealthRecord>& records) {
        cleared = 0;
        asked.reset();
        for (const HealthRecord& record : records) {
          if (ownVerdict(record, gpu, unit) && record.recoveryAction) {
            ++cleared;
            asked = record.recoveryAction;
          }
        }
        if (cleared == 0) return;
        // Its marked verdicts, and an older re-admission of the GPU, which this one replaces.
        std::erase_if(records, [&](const HealthRecord& record) {
          return (ownVerdict(record, gpu, unit) && record.recoveryAction) ||
                 (record.kind == RecordKind::kReadmitted && unit.namedBy(record.gpu, record.uuid));
        });
        stillOut = std::any_of(records.begin(), records.end(), [&](const HealthRecord& record) {
          return record.kind != RecordKind::kReadmitted &&
                 (unit.namedBy(record.gpu, record.uuid) || ownVerdict(record, gpu, unit));
        });
        HealthRecord readmitted;
        readmitted.kind = RecordKind::kReadmitted;
        readmitted.gpu = index;
        readmitted.uuid = gpu.uuid;
        readmitted.since = nowSeconds();
        readmitted.recoveryAction = asked;
        readmitted.source = "watch";
        readmitted.reason = "the driver asks no recovery action any more (it asked: " +
                            nvml::recoveryActionText(*asked) + "), and the GPU answers";
        records.push_back(std::move(readmitted));
      });
    } catch (const store::StoreError& e) {
      sayOnce(gpu, std::string("warning: cannot re-admit ") + name + " yet: " + e.what() +
                       "; trying again");
      return;
    }
    if (cleared == 0) return;
    gpu.lastSaid.clear();
    log("re-admitted " + name + " (readmitted, source=watch): the driver asks no recovery action " +
        "any more (it asked: " + nvml::recoveryActionText(*asked) + ") and the GPU answers; " +
        std::to_string(cleared) + " verdict(s) of watch cleared" +
        (stillOut ? "; it stays out for its other records (an operator's drain, or a verdict "
                    "during which the driver asked nothing) until `flink-gpu undrain --gpu " +
                        index + "`"
                  : ""));
  }

  const WatchOptions& options_;
  std::optional<nvml::DeviceStateApi> state_;
  std::optional<GpuProber> prober_;
  /// When the recovery actions are read next without an event.
  std::chrono::steady_clock::time_point nextReview_{};
  /// The last failure to read the health records for a review ("" while they are read).
  std::string reviewFailure_;
  std::vector<WatchedGpu> gpus_;
  std::vector<HealthRecord> pending_;
  /// The failure to write pending_ last logged ("" while writes succeed), and when to try next.
  std::string lastFailure_;
  std::chrono::milliseconds flushBackoff_ = options_.firstBackoff;
  std::chrono::steady_clock::time_point nextFlush_{};
};

}  // namespace

std::string xidDescription(std::uint64_t xid) {
  static const std::map<std::uint64_t, const char*> kNames = {
      {13, "graphics engine exception"},
      {31, "GPU memory page fault"},
      {43, "GPU stopped processing"},
      {45, "preemptive cleanup"},
      {48, "double-bit ECC error"},
      {61, "internal micro-controller breakpoint"},
      {62, "internal micro-controller halt"},
      {63, "ECC page retirement or row remapping recording event"},
      {64, "ECC page retirement or row remapping recording failure"},
      {68, "video processor exception"},
      {74, "NVLink error"},
      {79, "GPU has fallen off the bus"},
      {92, "high single-bit ECC error rate"},
      {94, "contained ECC error"},
      {95, "uncontained ECC error"},
      {109, "context switch timeout"},
      {119, "GSP RPC timeout"},
      {120, "GSP error"},
      {999, "an Xid the driver does not know"},
  };
  const auto found = kNames.find(xid);
  return found == kNames.end() ? std::string() : std::string(found->second);
}

std::set<std::uint64_t> parseXidList(const std::string& text) {
  std::set<std::uint64_t> xids;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = text.find_first_of(", \t\n", start);
    const std::string part =
        text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    start = end == std::string::npos ? text.size() : end + 1;
    if (part.empty()) continue;
    std::uint64_t xid = 0;
    const auto [at, error] = std::from_chars(part.data(), part.data() + part.size(), xid);
    if (error != std::errc() || at != part.data() + part.size()) {
      throw std::invalid_argument("'" + part + "' is not an Xid (a number)");
    }
    xids.insert(xid);
  }
  return xids;
}

bool isCriticalXid(std::uint64_t xid, const WatchOptions& options) {
  if (options.criticalXids) return options.criticalXids->count(xid) > 0;
  return options.ignoredXids.count(xid) == 0;
}

std::variant<WatchLock, pid_t> WatchLock::acquire(const std::filesystem::path& coordinationFile,
                                                  std::vector<std::string>& warnings) {
  // A watch writes the health records: a user who may not write the coordination file makes
  // nothing beside it (store/RecordFile.h), not even this lock.
  try {
    store::refuseWriterWhoMayNotWrite(coordinationFile, "watch lock and health records");
  } catch (const store::StoreError& e) {
    throw std::runtime_error(e.what());
  }
  std::filesystem::path path = coordinationFile;
  path += ".watch";
  const store::SiblingTrust trust = store::SiblingTrust::ofPath(coordinationFile);
  // Who holds it is the kernel's word, never the file's contents.
  const auto holder = [&path] { return store::flockHolder(path).value_or(0); };
  // One planted by someone else never keeps the host from its watch: moved aside where this
  // process may (store::openAdmittedSibling, with a warning) and made anew, else refused naming
  // the fix. Read-only: flock needs no more, and nothing is ever written to it.
  try {
    for (int attempt = 0; attempt < 16; ++attempt) {
      store::OpenedSibling opened =
          store::openAdmittedSibling("watch lock", path, O_RDONLY, trust, warnings, true);
      if (!opened.fd) {
        throw std::runtime_error("cannot open " + path.string() + ": " +
                                 std::strerror(opened.error));
      }
      if (opened.info.st_uid != ::geteuid()) {
        // Another user's who may write the coordination file (the trust rules passed): a watch
        // of theirs that holds it is the host's watch. Not held, its owner could remove it and
        // take another while ours is held: two watches. Moved aside where this process may.
        if (const pid_t running = holder(); running > 0) return running;
        const std::string why = "it is owned by " + store::describeOwnership(opened.info) +
                                ", another user, who could remove it while this watch holds it";
        if (store::mayMoveAside(path, trust) &&
            !store::admitSibling("watch lock", path, opened.info, why, store::SiblingKind::kFile,
                                 trust, warnings)) {
          continue;
        }
        throw std::runtime_error("watch lock " + path.string() + ": refusing to use it: " + why +
                                 "; remove it (`rm " + path.string() + "`) once no watch runs");
      }
      // Only this user may open it, so nobody else can hold its lock and pass for a watch (one
      // made before this rule, or just now with the coordination file's mode, made so).
      if ((opened.info.st_mode & 07777) != 0600) (void)::fchmod(opened.fd.get(), 0600);
      if (::flock(opened.fd.get(), LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK) {
          throw std::runtime_error("cannot lock " + path.string() + ": " + std::strerror(errno));
        }
        return holder();
      }
      return WatchLock(std::move(path), std::move(opened.fd));
    }
  } catch (const store::StoreError& e) {
    throw std::runtime_error(e.what());
  }
  throw std::runtime_error("watch lock " + path.string() +
                           ": it kept being replaced while this watch took it");
}

HealthFile recordVerdicts(const std::filesystem::path& coordinationFile,
                          const std::vector<HealthRecord>& verdicts) {
  return updateHealth(coordinationFile, [&verdicts](std::vector<HealthRecord>& records) {
    for (const HealthRecord& verdict : verdicts) {
      // The verdict's unit made once, not once per record.
      const discovery::OneUnit unit(verdict.gpu, verdict.uuid);
      bool updated = false;
      for (HealthRecord& record : records) {
        if (record.kind == RecordKind::kUnhealthy && unit.namedBy(record.gpu, record.uuid)) {
          record = verdict;  // the latest Xid and its time
          updated = true;
        }
      }
      if (!updated) records.push_back(verdict);
    }
  });
}

int watch(const WatchOptions& options) { return Watcher(options).run(); }

}  // namespace flink::health
