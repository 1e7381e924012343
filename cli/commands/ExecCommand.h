// `flink-gpu exec`: runs a command with GPUs of its own — allocates them in the coordination file
// for this process, sets CUDA_VISIBLE_DEVICES, runs the command as its child and waits for it, as
// flock(1) does: the records name exec's pid and exec holds their leases, so the GPUs are held
// while the command runs, whatever it does, and given back once it ends. Under an inherited
// CUDA_VISIBLE_DEVICES only the GPUs it names are allocated, and the command gets the mask's own
// entries for them; CUDA_DEVICE_ORDER=PCI_BUS_ID is set unless already set. With --share it holds
// a share of each GPU instead, recorded and leased the same way.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "commands/CoordinationFileOption.h"
#include "host/enumeration/Vendor.h"
#include "host/health/HostHealth.h"
#include "host/placement/Placement.h"
#include "host/usage/GpuUse.h"

namespace flink::cli {

/// --visible-devices: how the command's CUDA_VISIBLE_DEVICES names whole GPUs.
enum class VisibleDevices {
  kIndex,  ///< "index": NVML's index, which is CUDA's under CUDA_DEVICE_ORDER=PCI_BUS_ID
  kUuid,   ///< "uuid": GPU-…
};

struct ExecOptions {
  /// As typed: read by runExec as discover reads its own (commands/AmountOption.h).
  std::string amount;
  CoordinationFileOptions coordination;
  /// --vendor nvidia|amd|intel: whose GPUs to allocate (nullopt: NVIDIA's, as always). AMD's
  /// and Intel's come from sysfs; the command then gets their runtimes' variables
  /// (ROCR_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES, ZE_AFFINITY_MASK) instead of CUDA's.
  std::optional<discovery::Vendor> vendor;
  /// --gpus: the host's GPUs, instead of asking NVML or nvidia-smi.
  std::optional<std::string> gpus;
  /// --mig: allocate MIG instances (their MIG-… UUIDs go into CUDA_VISIBLE_DEVICES) instead of
  /// the GPUs in MIG mode they are carved from. A usage error with --gpus.
  bool mig = false;
  /// --select EXPR, as typed (hostGpus reads it: host/enumeration/UnitSelector.h): only the
  /// units that match are allocated. A usage error with --vendor amd|intel.
  std::optional<std::string> select;
  /// --visible-devices: what CUDA_VISIBLE_DEVICES gets when no mask is inherited. MIG instances
  /// are always given by MIG UUID; an inherited mask's own entries always win.
  VisibleDevices visibleDevices = VisibleDevices::kIndex;
  /// Whether --visible-devices was given: without it an MPS share gets its GPU's UUID (a daemon
  /// started under a mask numbers the GPUs its own way), anything else the index.
  bool visibleDevicesGiven = false;
  /// --share: one share on each of `amount` distinct GPUs the operator declared shared
  /// (`flink-gpu share`) instead of whole GPUs; the command also gets the share's memory and,
  /// behind an MPS control daemon, CUDA's MPS client variables
  /// (host/defaultdiscovery/ChildEnvironment.h). A usage error with --mig and with --vendor
  /// amd|intel.
  bool share = false;
  /// --share-placement pack|spread, as typed (runExec checks it): which GPUs' shares go first
  /// (host/coordination/ShareAllocation.h). A usage error without --share.
  std::optional<std::string> sharePlacement;
  /// --placement topology|index: which of the free GPUs to take (host/placement/Placement.h).
  placement::Policy placement = placement::Policy::kTopology;
  /// --bind-cpus: run the command on the CPUs close to its GPUs (sched_setaffinity).
  bool bindCpus = false;
  /// --health skip|warn|ignore: what to do with unhealthy GPUs (host/health/HostHealth.h).
  health::HealthMode health = health::HealthMode::kSkip;
  /// --foreign skip|warn|ignore: what to do with GPUs a process no record explains uses
  /// (host/usage/GpuUse.h).
  usage::ForeignMode foreign = usage::ForeignMode::kSkip;
  /// The command and its arguments.
  std::vector<std::string> command;
};

/// Allocates the GPUs, runs the command and waits for it (docs/command-line.md, exec).
/// @returns the command's exit code, 128 + N when signal N ended it; else an ExitCode, or 127
///          (command not found) / 126 (cannot be executed) as shells do.
int runExec(const ExecOptions& options);

}  // namespace flink::cli
