// The host's GPUs as the operator's commands (drain, share) look them up, so as never to record
// one the host does not have: NVML, else nvidia-smi, and the lines that say what the host has
// when a GPU named is not among them.
#pragma once

#include <string>
#include <vector>

#include "host/enumeration/HostGpus.h"
#include "host/enumeration/UnitIndex.h"
#include "host/health/HostView.h"
#include "host/sharing/SharingDeclarations.h"

namespace flink::cli {

/// The host's devices through NVML; none when it cannot be used.
std::vector<discovery::GpuDevice> nvmlDevicesOrNone();

/// The host's devices through NVML; when it fails with a driver/library version mismatch, the
/// kernel's list (host/enumeration/KernelGpus.h), whose indices are NVML's; else none. For
/// turning a spelling of a GPU into its index and UUID.
std::vector<discovery::GpuDevice> nvmlOrKernelDevices();

/// The host's devices, and how much of the host they are for judging state that outlived its GPU
/// (discovery::UnitIndex::presence).
struct HostLook {
  std::vector<discovery::GpuDevice> devices;
  discovery::HostCoverage coverage;
};

/// Through NVML alone (status and check start no process): none, with a coverage that cannot
/// tell and why, when NVML cannot be used.
HostLook nvmlLookOrNone();

/// The host's GPUs as listHostGpus(true) lists them (NVML, else nvidia-smi with its MIG listing),
/// for the --stale removals; none, with a coverage that cannot tell and why, when neither can.
HostLook lookAtHost();

/// Adds to host.stale each declaration of `parsed` that names a GPU this host does not have
/// (sharing::isStale against host.hostUnits and host.coverage, which findStale set).
void addStaleDeclarations(const sharing::ParsedDeclarations& parsed, HostView& host);

/// The host's GPUs: NVML, else nvidia-smi (with its MIG listing when `mig`), nvidia-smi run under
/// $NVIDIA_SMI_TIMEOUT. The GPUs an enumeration leaves out are printed as warnings.
/// `kernelListOnMismatch`: when NVML and nvidia-smi fail with a driver/library version mismatch,
/// the kernel's list instead, with a warning that says so (drain, which only names GPUs).
/// @throws discovery::DiscoveryError when none can list them.
discovery::HostGpus listHostGpus(bool mig, bool kernelListOnMismatch = false);

/// The lines after an error about a GPU named that say what the host has: its GPUs (or MIG
/// instances, with `mig`) as the source lists them, and those it left out.
std::vector<std::string> whatTheHostHas(const discovery::HostGpus& host, bool mig);

}  // namespace flink::cli
