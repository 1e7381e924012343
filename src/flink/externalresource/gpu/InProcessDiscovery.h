// The default discovery run in the driver's own process (GPUDriver, `discovery-script.in-process`):
// the work of nvidia-gpu-discovery for `<amount> <arguments>`, on a thread other than the caller's
// so that the caller stops waiting at the time-out even where NVML does not return, with the GPUs
// it records in coordination mode leased for the life of this object. The thread of a run that
// ended waits a second for the next run of this process before it ends; it is named
// `flink-gpu-run` (top -H, ps -L).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "host/defaultdiscovery/DefaultDiscovery.h"
#include "host/enumeration/GpuEnumerator.h"
#include "host/enumeration/HostGpus.h"
#include "util/Notice.h"

namespace flink::externalresource::gpu {

class InProcessDiscovery {
 public:
  /// What one discovery answered.
  struct Answer {
    /// The identifiers the program would print, in its order.
    std::vector<std::string> identifiers;
    /// The devices enumerated on the way, and from where (kListed: identifiers only).
    std::vector<discovery::GpuDevice> devices;
    /// An index of `devices` (null with none): how an identifier finds its device.
    std::shared_ptr<const discovery::UnitIndex> index;
    discovery::HostGpuSource source = discovery::HostGpuSource::kListed;
    /// What the program would write to stderr, as values (each its line(), to print): details,
    /// warnings, GPUs left out, notes.
    std::vector<Notice> said;
    /// With --share, the share of each GPU of `identifiers`, in its order (the program prints
    /// nothing of them); empty for whole GPUs.
    std::vector<defaultdiscovery::ShareGrant> shares;
  };

  /// `script`, for messages; `arguments`, the configured ones that follow the amount, are read
  /// here once (a mistake in them fails every discover() as the program would fail).
  InProcessDiscovery(std::filesystem::path script, const std::vector<std::string>& arguments,
                     std::chrono::milliseconds timeout);
  /// Gives back what the runs recorded for this process (records removed, leases dropped);
  /// waits up to a second for runs given up on, which give back what they record themselves.
  /// Fork-safe: a copy destroyed in a child of fork() gives back only what the child itself
  /// allocated (and that only when no thread of the parent held the object's lock at the fork),
  /// never its parent's records or leases.
  ~InProcessDiscovery();
  InProcessDiscovery(const InProcessDiscovery&) = delete;
  InProcessDiscovery& operator=(const InProcessDiscovery&) = delete;

  /// One discovery of `amount` (> 0) GPUs. Thread-safe.
  /// @throws TimeoutException past the time-out, naming what the run was doing; GPUs it records
  ///         after that are given back.
  /// @throws FlinkException when the program would exit non-zero: the message is the cause it
  ///         would print first, then its details and notes. The defaultdiscovery::DiscoveryFailure
  ///         is nested in it (std::rethrow_if_nested), for callers that act on its stage or kind.
  Answer discover(std::int64_t amount);

 private:
  struct Holdings;

  std::filesystem::path script_;
  std::chrono::milliseconds timeout_;
  /// The process that made this object: another one is a child of fork().
  pid_t createdBy_;
  /// The arguments as read once (their amount is replaced on each call), or why they cannot be.
  std::optional<defaultdiscovery::DiscoveryArguments> arguments_;
  std::optional<defaultdiscovery::DiscoveryFailure> argumentsFailure_;
  std::unique_ptr<Holdings> holdings_;
};

}  // namespace flink::externalresource::gpu
