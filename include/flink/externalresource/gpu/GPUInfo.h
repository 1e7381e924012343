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
  /// nvmlDeviceGetUUID: "GPU-8c3f…" for a whole GPU, "MIG-4f1e…" for a MIG instance. What
  /// CUDA_VISIBLE_DEVICES and container runtimes take, and stable when indices shift.
  static constexpr std::string_view PROPERTY_KEY_UUID = "uuid";
  /// nvmlDeviceGetName: "NVIDIA H200"; for a MIG instance "NVIDIA H200 MIG 1g.18gb".
  static constexpr std::string_view PROPERTY_KEY_NAME = "name";
  /// nvmlDeviceGetPciInfo's busId, "00000000:19:00.0" (a MIG instance: its GPU's).
  static constexpr std::string_view PROPERTY_KEY_PCI_BUS_ID = "pci.bus_id";
  /// nvmlDeviceGetMemoryInfo's total, in MiB, as a decimal ("143771").
  static constexpr std::string_view PROPERTY_KEY_MEMORY_TOTAL = "memory.total";
  /// nvmlDeviceGetMinorNumber: the N of /dev/nvidiaN (whole GPUs).
  static constexpr std::string_view PROPERTY_KEY_MINOR_NUMBER = "minor_number";
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

  /// The value of a known property (see getKeys), else std::nullopt.
  std::optional<std::string> getProperty(std::string_view key) const override;

  /// The keys of the known properties: "index" first, then those of the others that are known,
  /// in the order they are declared above.
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
