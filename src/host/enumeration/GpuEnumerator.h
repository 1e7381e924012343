// What the default discovery knows about the host's GPUs, and the interface of the sources that
// tell it (nvidia-smi, NVML, a fixed list).
//
// A source lists devices: every whole GPU and, where it can see them, the MIG instances of the
// GPUs that have MIG mode on (each right after its parent). Which of them are the units that get
// handed out is decided later (see allocatableUnits), not by the source.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "host/placement/Topology.h"
#include "util/Notice.h"

namespace flink::discovery {

/// Discovery cannot go on. what() is the cause, one line; details() are further lines (what
/// nvidia-smi printed, where it was looked for) to print after it; kind() is the cause as a value,
/// for callers that act on it (a hint, a fallback to the next source), so that none reads the text.
class DiscoveryError : public std::runtime_error {
 public:
  enum class Kind {
    kFailed,         ///< any other cause: a source failed or answered something unusable
    kNoDriver,       ///< no NVIDIA driver: nvidia-smi is nowhere to be found
    kNvmlNotUsable,  ///< the NVML library is absent or cannot be used ("NVML is not usable: …")
    /// NVML cannot be used because the library and the kernel module are of different driver
    /// versions (NVML_ERROR_LIB_RM_VERSION_MISMATCH: an upgrade without a reboot). A kind of
    /// kNvmlNotUsable, told apart because nothing but a reboot or a reload of the module helps,
    /// and because the kernel's list still names the GPUs (KernelGpus.h).
    kNvmlVersionMismatch,
    kNoGpu,        ///< the driver is there and lists no GPU
    kNoUsableGpu,  ///< GPUs are listed, and every one is left out (lost, denied)
  };

  explicit DiscoveryError(const std::string& cause, std::vector<std::string> details = {},
                          Kind kind = Kind::kFailed)
      : std::runtime_error(cause), details_(std::move(details)), kind_(kind) {}
  const std::vector<std::string>& details() const noexcept { return details_; }
  Kind kind() const noexcept { return kind_; }

 private:
  std::vector<std::string> details_;
  Kind kind_;
};

/// Where a MIG instance sits: NVML's ids, which nvidia-smi -L does not print.
struct MigPlacement {
  /// The index of the GPU the instance is carved from.
  unsigned parentIndex = 0;
  /// nvmlDeviceGetGpuInstanceId / nvmlDeviceGetComputeInstanceId of the MIG device handle.
  std::optional<unsigned> gpuInstanceId;
  std::optional<unsigned> computeInstanceId;
};

/// A CUDA compute capability, major.minor ("9.0" for an H100, "8.9" for an L4), ordered as
/// versions are: 10.0 > 9.0 > 8.9.
struct ComputeCapability {
  unsigned major = 0;
  unsigned minor = 0;

  /// "9.0", as nvidia-smi's compute_cap prints it.
  std::string text() const { return std::to_string(major) + "." + std::to_string(minor); }
  friend auto operator<=>(const ComputeCapability&, const ComputeCapability&) = default;
};

/// One device: a whole GPU or a MIG instance, with what its source knew of it. Every optional
/// field is nullopt when the source did not say (nvidia-smi's "[N/A]", an NVML call that is not
/// supported), never a made-up value.
struct GpuDevice {
  /// What the discovery protocol prints and CUDA_VISIBLE_DEVICES accepts: a whole GPU's index
  /// ("0"), a MIG instance's UUID ("MIG-…").
  std::string identifier;
  /// "GPU-…" for a whole GPU, "MIG-…" for a MIG instance.
  std::optional<std::string> uuid;
  /// The product name, e.g. "NVIDIA H200" (for MIG, the instance's, e.g. "NVIDIA H200 MIG
  /// 1g.18gb").
  std::optional<std::string> name;
  /// The PCI bus id, "domain:bus:device.function" as NVML prints it ("00000000:19:00.0"). A MIG
  /// instance has its parent's.
  std::optional<std::string> pciBusId;
  /// Total memory in MiB (for MIG, the instance's share).
  std::optional<std::uint64_t> memoryTotalMiB;
  /// The N of /dev/nvidiaN (whole GPUs only).
  std::optional<unsigned> minorNumber;
  /// nvmlDeviceGetCudaComputeCapability (NVML only; a MIG instance has its GPU's).
  std::optional<ComputeCapability> computeCapability;
  /// A whole GPU whose current MIG mode is enabled: its instances, not itself, are the units
  /// with --mig.
  bool migEnabled = false;
  /// Set exactly for MIG instances.
  std::optional<MigPlacement> mig;
  // ---- topology (host/enumeration/NvmlTopology.h; NVML only) ----
  /// The NUMA node of the GPU (a MIG instance: its GPU's).
  std::optional<unsigned> numaNode;
  /// The CPUs close to the GPU, ascending (a MIG instance: its GPU's).
  std::optional<std::vector<unsigned>> cpus;
  // ---- end of topology ----
  /// Its NVLink fabric's clique and cluster UUID (nvmlDeviceGetGpuFabricInfoV), once its
  /// registration has completed successfully; a MIG instance has its GPU's. NVML only.
  std::optional<unsigned> fabricCliqueId;
  std::optional<std::string> fabricClusterUuid;

  bool isMigInstance() const noexcept { return mig.has_value(); }
};

/// A GPU the source lists but that cannot be used: NVML gives no handle for it, or a query that
/// discovery needs fails with NVML_ERROR_GPU_IS_LOST, NVML_ERROR_UNKNOWN or
/// NVML_ERROR_NO_PERMISSION (a cgroup that denies the device), or nvidia-smi prints an error line
/// for it. It is left out; the others are handed out.
struct LeftOutGpu {
  /// Which GPU: "GPU 1", "GPU 1 (00000000:3B:00.0)", "GPU 0000:0B:00.0" (nvidia-smi names it by
  /// PCI bus id), "GPU 0 MIG slot 2".
  std::string gpu;
  /// The source's error: "nvmlDeviceGetUUID failed: GPU is lost (NVML_ERROR_GPU_IS_LOST, 15)",
  /// "Unable to determine the device handle for GPU 0000:0B:00.0: Unknown Error".
  std::string error;

  /// "<gpu>: <error>", for the message that names every GPU left out.
  std::string describe() const { return gpu + ": " + error; }
};

/// The devices a source reported, and what else it had to say.
struct Enumeration {
  /// In the order reported: whole GPUs by index, each MIG-enabled GPU followed by its instances.
  std::vector<GpuDevice> devices;
  /// What to say on stderr: a warning about how the source ended, then what it printed that was
  /// not a GPU (details, `nvidia-smi: ...`). Each GPU of leftOut has its notice here too, of kind
  /// kGpuLeftOut ("warning: NVML: GPU 1 left out: …"), so that a caller printing the notices
  /// names every GPU left out, and one that shows only those picks them by kind.
  std::vector<Notice> notices;
  /// The GPUs (and MIG instances) left out, in the order listed.
  std::vector<LeftOutGpu> leftOut;
  /// How the whole GPUs are connected, when the source was asked for it and could tell (NVML,
  /// HostGpuOptions::topology); its relations may still be unknown.
  std::optional<placement::Topology> topology;
};

/// A source of the host's GPUs.
class GpuEnumerator {
 public:
  virtual ~GpuEnumerator() = default;
  /// @throws DiscoveryError when the source cannot tell (absent, failing, no GPU at all).
  virtual Enumeration enumerate() = 0;
};

/// A fixed list, given on the command line (--gpus) by custom scripts and tests: identifiers
/// only, no properties.
class StaticEnumerator : public GpuEnumerator {
 public:
  explicit StaticEnumerator(std::vector<std::string> identifiers)
      : identifiers_(std::move(identifiers)) {}
  Enumeration enumerate() override;

 private:
  std::vector<std::string> identifiers_;
};

/// Splits a GPU list on commas and whitespace (newlines included, as a custom script may pass
/// nvidia-smi's output as it is), dropping empty parts. Each part must be a device identifier
/// (host/enumeration/DeviceIdentifiers.h); decimal indices lose their leading zeros, so "01" and
/// "1" are one GPU in the coordination file.
/// @throws DiscoveryError naming the first part that is not a device identifier.
std::vector<std::string> parseGpuList(std::string_view text);

/// The units to hand out. Without MIG: every whole GPU (MIG instances are dropped, as nvidia-smi
/// lists GPUs). With MIG: every MIG instance, plus each whole GPU whose MIG mode is off; a GPU
/// with MIG on is never a unit beside its own instances.
std::vector<GpuDevice> allocatableUnits(const std::vector<GpuDevice>& devices, bool mig);

/// Which units share hardware, by identifier: each GPU (by index) with the MIG instances carved
/// from it (by MIG UUID), and each instance with its GPU. Two instances of one GPU are not
/// related: MIG isolates them. Give it every device enumerated, not only the allocatable units:
/// an instance that another worker holds must block its GPU for a worker that hands out whole
/// GPUs. Empty when the source listed no MIG instance (nvidia-smi without --mig, --gpus).
/// This is coordination::RelatedUnits, for AllocationRequest::related.
std::unordered_map<std::string, std::vector<std::string>> relatedUnits(
    const std::vector<GpuDevice>& devices);

/// The whole GPUs in MIG mode that have no MIG instance among `devices`: with MIG, they offer
/// no unit at all, which a user asking for units should be told.
std::vector<std::string> migGpusWithoutInstances(const std::vector<GpuDevice>& devices);

/// The `GPU-…` UUID of each whole GPU of `devices` that has one, by identifier: what
/// coordination::AllocationRequest::uuids takes.
std::unordered_map<std::string, std::string> uuidsByIdentifier(
    const std::vector<GpuDevice>& devices);

/// The identifiers of `devices`, in order.
std::vector<std::string> identifiersOf(const std::vector<GpuDevice>& devices);

}  // namespace flink::discovery
