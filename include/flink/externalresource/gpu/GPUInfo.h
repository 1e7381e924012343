// One GPU a discovery found: its index, as the discovery script printed it, and what NVML knows
// of the device.
//
// Mirrors org.apache.flink.externalresource.gpu.GPUInfo, which holds only the index. The other
// properties are those the Kubernetes device plugin and Slurm read through NVML; each is present
// only when known, never made up. Instances are made only by GPUDriver.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flink/externalresource/ExternalResourceInfo.h"

namespace flink::externalresource::gpu {

class GPUInfo final : public ExternalResourceInfo {
 public:
  /// The device identifier, always present: a decimal index such as "0" (NVML's and
  /// nvidia-smi's order, which is PCI order), or a "GPU-…"/"MIG-…" UUID, as the script printed it.
  static constexpr std::string_view PROPERTY_KEY_INDEX = "index";
  /// Who made the GPU: "nvidia", "amd" or "intel". Set on every GPU a default discovery hands
  /// out (the `vendor` parameter's script), and on every GPU NVML knows.
  static constexpr std::string_view PROPERTY_KEY_VENDOR = "vendor";
  /// nvmlDeviceGetUUID: "GPU-8c3f…" for a whole GPU, "MIG-4f1e…" for a MIG instance. What
  /// CUDA_VISIBLE_DEVICES and container runtimes take, and stable when indices shift.
  static constexpr std::string_view PROPERTY_KEY_UUID = "uuid";
  /// nvmlDeviceGetName: "NVIDIA H200"; for a MIG instance "NVIDIA H200 MIG 1g.18gb".
  static constexpr std::string_view PROPERTY_KEY_NAME = "name";
  /// nvmlDeviceGetPciInfo's busId, "00000000:19:00.0" (a MIG instance: its GPU's). AMD and Intel
  /// units in the same form, from sysfs; an AMD compute partition carries its partition number
  /// as the function ("00000000:05:00.3"), as rocm-smi and amd-smi print it.
  static constexpr std::string_view PROPERTY_KEY_PCI_BUS_ID = "pci.bus_id";
  /// AMD and Intel: the PCI device id, "0x740f" (sysfs `device`, KFD's `device_id`).
  static constexpr std::string_view PROPERTY_KEY_PCI_DEVICE_ID = "pci.device_id";
  /// nvmlDeviceGetMemoryInfo's total, in MiB, as a decimal ("143771").
  static constexpr std::string_view PROPERTY_KEY_MEMORY_TOTAL = "memory.total";
  /// nvmlDeviceGetMinorNumber: the N of /dev/nvidiaN (whole GPUs).
  static constexpr std::string_view PROPERTY_KEY_MINOR_NUMBER = "minor_number";
  /// nvmlDeviceGetCudaComputeCapability, major.minor: "9.0" for an H100, "8.9" for an L4 (a MIG
  /// instance: its GPU's). NVML only.
  static constexpr std::string_view PROPERTY_KEY_COMPUTE_CAPABILITY = "compute_capability";
  /// AMD and Intel: the N of /dev/dri/renderD<N>, the node the runtime opens.
  static constexpr std::string_view PROPERTY_KEY_RENDER_MINOR = "render_minor";
  /// For a MIG instance: the index of the GPU it is carved from.
  static constexpr std::string_view PROPERTY_KEY_MIG_PARENT_INDEX = "mig.parent_index";
  /// For a MIG instance: nvmlDeviceGetGpuInstanceId.
  static constexpr std::string_view PROPERTY_KEY_MIG_GPU_INSTANCE_ID = "mig.gpu_instance_id";
  /// For a MIG instance: nvmlDeviceGetComputeInstanceId.
  static constexpr std::string_view PROPERTY_KEY_MIG_COMPUTE_INSTANCE_ID =
      "mig.compute_instance_id";
  /// The NUMA node of the GPU's memory and PCIe root, as a decimal ("0"): nvmlDeviceGetNumaNodeId,
  /// else the lowest node of nvmlDeviceGetMemoryAffinity (a MIG instance: its GPU's).
  static constexpr std::string_view PROPERTY_KEY_NUMA_NODE = "numa_node";
  /// The CPUs close to the GPU, as a CPU list ("0-31,64-95"):
  /// nvmlDeviceGetCpuAffinityWithinScope, else nvmlDeviceGetCpuAffinity (a MIG instance: its
  /// GPU's). What `flink-gpu exec --bind-cpus` binds to.
  static constexpr std::string_view PROPERTY_KEY_CPU_AFFINITY = "cpu_affinity";
  /// On hosts whose GPUs join an NVLink fabric (NVSwitch: HGX, GB200), once the GPU's fabric
  /// registration has completed (nvmlDeviceGetGpuFabricInfoV): its clique's id, as a decimal, and
  /// the fabric cluster's UUID (8-4-4-4-12 lower-case hex; absent when the driver gives none).
  /// A MIG instance has its GPU's.
  static constexpr std::string_view PROPERTY_KEY_FABRIC_CLIQUE_ID = "fabric.clique_id";
  static constexpr std::string_view PROPERTY_KEY_FABRIC_CLUSTER_UUID = "fabric.cluster_uuid";
  /// AMD compute partitions only: the partition's number on its GPU (0, 1, …), and the GPU's
  /// compute partition mode in upper case ("CPX").
  static constexpr std::string_view PROPERTY_KEY_PARTITION_ID = "partition.id";
  static constexpr std::string_view PROPERTY_KEY_PARTITION_MODE = "partition.mode";
  /// Intel: the tile's number on its card, on a tile of a multi-tile card handed out alone (the
  /// FLAT hierarchy); on a whole multi-tile card, how many tiles it has.
  static constexpr std::string_view PROPERTY_KEY_TILE = "tile";
  static constexpr std::string_view PROPERTY_KEY_TILES = "tiles";
  /// A share of a GPU the operator declared shared (`--share`; `flink-gpu share`), after every
  /// other key: the share's index on its GPU (0 to K-1) and the declared number of shares (K).
  /// Whole GPUs have none of the share keys. Only where the default discovery ran in-process: a
  /// script run as a process prints indices alone.
  static constexpr std::string_view PROPERTY_KEY_SHARE_INDEX = "share.index";
  static constexpr std::string_view PROPERTY_KEY_SHARE_COUNT = "share.count";
  /// A share's memory in MiB, as declared (the GPU's memory.total / K, rounded down), where the
  /// declaration knows the GPU's memory. Nothing enforces it without MPS.
  static constexpr std::string_view PROPERTY_KEY_SHARE_MEMORY = "share.memory";
  /// A share behind an MPS control daemon: its CUDA_MPS_PIPE_DIRECTORY, and the
  /// CUDA_MPS_ACTIVE_THREAD_PERCENTAGE a client of one share takes (100 / K, rounded down).
  static constexpr std::string_view PROPERTY_KEY_MPS_PIPE_DIRECTORY = "mps.pipe_directory";
  static constexpr std::string_view PROPERTY_KEY_MPS_ACTIVE_THREAD_PERCENTAGE =
      "mps.active_thread_percentage";

  /// The value of a known property (see getKeys), else std::nullopt.
  std::optional<std::string> getProperty(std::string_view key) const override;

  /// The keys of the known properties: "index" first, then those of the others that are known,
  /// in the order the discovery gave them (for NVIDIA's: the order declared above).
  std::vector<std::string> getKeys() const override;

  /// "GPU Device(<index>)", as Flink prints it.
  std::string toString() const override;

  /// The device identifier (the "index" property).
  const std::string& index() const noexcept { return properties_.front().second; }

  /// Two GPUInfo are equal when their indices are (Flink's equality): the same device.
  friend bool operator==(const GPUInfo& a, const GPUInfo& b) noexcept {
    return a.index() == b.index();
  }

 private:
  friend class GPUDriver;
  using Properties = std::vector<std::pair<std::string, std::string>>;

  /// `properties`: the known ones besides the index, in getKeys order.
  explicit GPUInfo(std::string index, Properties properties = {});

  /// The index first, then the others.
  Properties properties_;
};

}  // namespace flink::externalresource::gpu

/// Hashes the index, consistent with operator==.
template <>
struct std::hash<flink::externalresource::gpu::GPUInfo> {
  std::size_t operator()(const flink::externalresource::gpu::GPUInfo& info) const noexcept {
    return std::hash<std::string>{}(info.index());
  }
};
