// `flink-gpu watch`: a process for a host's whole life that listens to NVML's events for
// critical Xid errors and double-bit ECC errors on every GPU, as NVIDIA's Kubernetes device plugin
// does, and records each verdict in the host's health records (HealthRecords.h), from where every
// allocator on the host (the default discovery, exec, the driver through the discovery) skips
// that GPU until an operator runs `flink-gpu undrain`.
//
// NVML: nvmlEventSetCreate; per GPU nvmlDeviceGetSupportedEventTypes and nvmlDeviceRegisterEvents;
// then nvmlEventSetWait_v2 (the plain nvmlEventSetWait where _v2 is missing, which cannot tell
// MIG instances) in slices, so that a stop request is seen within one slice. An Xid that NVML
// attributes to a MIG instance makes that instance unhealthy, not its siblings.
//
// Never holds a lock while waiting: the health file is locked only to record a verdict.
//
// NVIDIA's own verdict: where the driver has NVML_FI_DEV_GET_GPU_RECOVERY_ACTION, the watch
// registers nvmlEventTypeGpuRecoveryAction too and reads the field at start, at each such event,
// after each verdict and every recoveryPoll. An action other than NONE is recorded: a verdict of
// its own where the GPU has none of watch's, else a mark (recovery_action=N) on watch's verdicts
// of the GPU. With Readmit::kDriver, once the field reads NONE again and the GPU answers
// (health::GpuProber finds no problem, and its UUID is the one watched), watch removes its
// marked verdicts and writes a `readmitted` line with source=watch. It never removes an
// operator's drain, nor a verdict it did not mark (the driver asked nothing since, or has no
// such field).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "host/health/HealthRecords.h"
#include "process/FileDescriptor.h"

namespace flink::health {

/// Xids that applications cause (NVIDIA's device plugin ignores the same): 13 graphics engine
/// exception, 31 GPU memory page fault, 43 GPU stopped processing, 45 preemptive cleanup, 68
/// video processor exception, 109 context switch timeout.
inline const std::set<std::uint64_t> kDefaultIgnoredXids = {13, 31, 43, 45, 68, 109};

/// A short name for well-known Xids ("GPU has fallen off the bus" for 79); empty otherwise.
std::string xidDescription(std::uint64_t xid);

/// What watch writes for its verdicts (unhealthy records), in order: each replaces the unhealthy
/// records of the unit it names (the latest Xid and its time), or is added where there is none;
/// every other record stays. Linear in the records for each verdict (watch holds one, or the few
/// made while the records could not be written). Returns the file after the change.
/// @throws store::StoreError as updateHealth does.
HealthFile recordVerdicts(const std::filesystem::path& coordinationFile,
                          const std::vector<HealthRecord>& verdicts);

/// Parses "13,31,43" (commas or whitespace; empty is an empty list).
/// @throws std::invalid_argument naming the part that is not a number.
std::set<std::uint64_t> parseXidList(const std::string& text);

/// --readmit: whether watch re-admits a GPU it recorded unhealthy once the driver asks no
/// recovery action any more.
enum class Readmit {
  kDriver,  ///< on the driver's word (the default)
  kNever,   ///< never: every verdict stays until an operator acts
};

struct WatchOptions {
  std::filesystem::path coordinationFile;
  /// Xids that are not critical (--ignore-xids).
  std::set<std::uint64_t> ignoredXids = kDefaultIgnoredXids;
  /// When set, only these Xids are critical (--critical-xids), whatever ignoredXids says.
  std::optional<std::set<std::uint64_t>> criticalXids;
  /// Asked between wait slices; true ends the watch.
  std::function<bool()> stopRequested;
  /// Where the watch's lines go (one line each, no '\n').
  std::function<void(const std::string&)> log;
  /// Called once, after the line that says what is watched: NVML is open, every GPU that can be
  /// is registered for events, and the first wait follows (a service manager's "ready"). Not
  /// called when NVML cannot be used. May be empty.
  std::function<void()> watching;
  /// --readmit.
  Readmit readmit = Readmit::kDriver;
  /// How often the recovery action is read without an event (a driver may change it without
  /// one, and an event can come while a verdict is being written).
  std::chrono::milliseconds recoveryPoll{5000};
  /// How long one nvmlEventSetWait may block: the longest a stop request waits.
  unsigned waitSliceMs = 200;
  /// The first and the longest pause after a wait error.
  std::chrono::milliseconds firstBackoff{100};
  std::chrono::milliseconds maxBackoff{5000};
};

/// Whether `xid` is critical under `options`.
bool isCriticalXid(std::uint64_t xid, const WatchOptions& options);

/// The one watch of a host: an exclusive flock on `<coordination file>.watch`, a file beside the
/// coordination file (host/store/Siblings.h) that is never written. Released when this
/// object goes (or its process dies).
class WatchLock {
 public:
  /// The lock, or the pid of the watch that holds it, as the kernel tells it (/proc/locks; 0 when
  /// it cannot be told).
  /// A lock file that fails the trust rules (a link, another user's who may not write the
  /// coordination file, one of another user's that no watch holds) is moved aside where this
  /// process may (store::admitSibling: root, or the coordination file's owner in a folder that is
  /// not sticky), with a line in `warnings`, and made anew.
  /// @throws std::runtime_error when the lock file cannot be opened or made, or fails those rules
  ///         and this process may not move it aside.
  static std::variant<WatchLock, pid_t> acquire(const std::filesystem::path& coordinationFile,
                                                std::vector<std::string>& warnings);
  const std::filesystem::path& path() const { return path_; }

 private:
  WatchLock(std::filesystem::path path, process::FileDescriptor fd)
      : path_(std::move(path)), fd_(std::move(fd)) {}
  std::filesystem::path path_;
  process::FileDescriptor fd_;
};

/// Watches until stopRequested() says so. Returns 0 after a stop request, 1 when NVML cannot be
/// used at all (the reason logged), or when it stops with verdicts it could not record (each
/// logged with the `drain` that records it: NVML does not deliver an event again). Never throws for
/// a GPU's failure: a GPU that cannot register events is logged once and not watched; wait errors
/// other than a lost GPU are logged and retried with a growing pause (firstBackoff doubling up to
/// maxBackoff).
int watch(const WatchOptions& options);

}  // namespace flink::health
