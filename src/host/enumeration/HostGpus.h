// The host's GPUs as the default discovery and flink-gpu exec see them: a list given on the
// command line, else NVML, else nvidia-smi.
//
// NVML is asked first: it needs no process and tells more (MIG instances with their placement,
// MIG mode even without instances). When it cannot be used, nvidia-smi is run instead. Why NVML
// was passed over is said where it matters: always when the library is there but fails (a
// driver/library version mismatch, a missing function), and only among the details of a failure
// when the library is simply absent (a host without the NVIDIA driver, where nvidia-smi's own
// "not found" is the message that counts).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "host/enumeration/GpuEnumerator.h"
#include "host/enumeration/NvidiaSmi.h"

namespace flink::discovery {

struct HostGpuOptions {
  /// The host's GPUs as given (--gpus): no NVML, no nvidia-smi.
  std::optional<std::vector<std::string>> listed;
  /// List MIG instances too (nvidia-smi -L when NVML cannot be used).
  bool mig = false;
  /// How to run nvidia-smi when it comes to that (its `mig` is set from the field above).
  NvidiaSmiOptions nvidiaSmi;
  /// Also read how the GPUs are connected (Enumeration::topology), where NVML can tell.
  bool topology = false;
  /// When NVML fails with a driver/library version mismatch and nvidia-smi fails too, list the
  /// GPUs the kernel's driver knows (KernelGpus.h) instead of failing: for the operator's
  /// commands (drain), which name GPUs, never for a discovery, which would hand out GPUs that
  /// CUDA cannot open.
  bool kernelListOnMismatch = false;
};

/// Where enumerateHostGpus found the GPUs.
enum class HostGpuSource {
  kListed,     ///< the list given (--gpus): identifiers only
  kNvml,       ///< NVML: every property, MIG instances, the topology
  kNvidiaSmi,  ///< nvidia-smi: uuid, name, pci.bus_id and memory.total, as it was asked
  kVendor,     ///< AMD's or Intel's enumeration (sysfs, else their tools): HostUnits::vendorHost
  kKernel,     ///< the kernel's list (/proc/driver/nvidia/gpus): uuid, name, pci.bus_id, minor
};

/// "--gpus", "NVML", "nvidia-smi", "the AMD or Intel discovery" or "the kernel's driver", for
/// messages.
std::string_view sourceName(HostGpuSource source) noexcept;

/// What enumerateHostGpus found, and from where.
struct HostGpus {
  Enumeration found;
  HostGpuSource source = HostGpuSource::kListed;
};

/// @throws DiscoveryError when no source can tell. When the NVML library is there but fails, its
///         failure is the cause (what()) and nvidia-smi's is among the details; when the library
///         is absent, nvidia-smi's failure is the cause and NVML's absence a detail. A driver/
///         library version mismatch (kind kNvmlVersionMismatch) says what fixes it, and the
///         details name the GPUs the kernel knows.
HostGpus enumerateHostGpus(const HostGpuOptions& options);

}  // namespace flink::discovery
