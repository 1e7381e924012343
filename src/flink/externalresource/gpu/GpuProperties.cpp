#include "flink/externalresource/gpu/GpuProperties.h"

#include <memory>
#include <utility>

#include "flink/externalresource/gpu/GPUInfo.h"
#include "host/enumeration/UnitIndex.h"
#include "host/placement/Topology.h"
#include "util/Strings.h"

namespace flink::externalresource::gpu {

std::vector<std::pair<std::string, std::string>> propertiesOf(const discovery::GpuDevice& device) {
  std::vector<std::pair<std::string, std::string>> properties;
  const auto add = [&](std::string_view key, const auto& value) {
    if (!value) return;
    if constexpr (std::is_same_v<std::decay_t<decltype(*value)>, std::string>) {
      properties.emplace_back(key, *value);
    } else {
      properties.emplace_back(key, std::to_string(*value));
    }
  };
  properties.emplace_back(GPUInfo::PROPERTY_KEY_VENDOR, "nvidia");
  add(GPUInfo::PROPERTY_KEY_UUID, device.uuid);
  add(GPUInfo::PROPERTY_KEY_NAME, device.name);
  add(GPUInfo::PROPERTY_KEY_PCI_BUS_ID, device.pciBusId);
  add(GPUInfo::PROPERTY_KEY_MEMORY_TOTAL, device.memoryTotalMiB);
  add(GPUInfo::PROPERTY_KEY_MINOR_NUMBER, device.minorNumber);
  if (device.computeCapability) {
    properties.emplace_back(GPUInfo::PROPERTY_KEY_COMPUTE_CAPABILITY,
                            device.computeCapability->text());
  }
  if (device.mig) {
    add(GPUInfo::PROPERTY_KEY_MIG_PARENT_INDEX, std::optional<unsigned>(device.mig->parentIndex));
    add(GPUInfo::PROPERTY_KEY_MIG_GPU_INSTANCE_ID, device.mig->gpuInstanceId);
    add(GPUInfo::PROPERTY_KEY_MIG_COMPUTE_INSTANCE_ID, device.mig->computeInstanceId);
  }
  add(GPUInfo::PROPERTY_KEY_NUMA_NODE, device.numaNode);
  if (device.cpus) {
    properties.emplace_back(GPUInfo::PROPERTY_KEY_CPU_AFFINITY,
                            placement::formatCpuList(*device.cpus));
  }
  add(GPUInfo::PROPERTY_KEY_FABRIC_CLIQUE_ID, device.fabricCliqueId);
  add(GPUInfo::PROPERTY_KEY_FABRIC_CLUSTER_UUID, device.fabricClusterUuid);
  return properties;
}

std::vector<std::pair<std::string, std::string>> propertiesOf(
    const defaultdiscovery::ShareGrant& share) {
  std::vector<std::pair<std::string, std::string>> properties{
      {std::string(GPUInfo::PROPERTY_KEY_SHARE_INDEX), std::to_string(share.slot.index)},
      {std::string(GPUInfo::PROPERTY_KEY_SHARE_COUNT), std::to_string(share.slot.count)}};
  if (share.memoryMiB) {
    properties.emplace_back(GPUInfo::PROPERTY_KEY_SHARE_MEMORY, std::to_string(*share.memoryMiB));
  }
  if (share.mpsPipeDirectory) {
    properties.emplace_back(GPUInfo::PROPERTY_KEY_MPS_PIPE_DIRECTORY, *share.mpsPipeDirectory);
    // What one client of K may take of the GPU's threads; a declared K is 2 to 48, never 0.
    const unsigned percentage = share.activeThreadPercentage();
    properties.emplace_back(GPUInfo::PROPERTY_KEY_MPS_ACTIVE_THREAD_PERCENTAGE,
                            std::to_string(percentage));
  }
  return properties;
}

DeviceFinder::DeviceFinder(const std::vector<discovery::GpuDevice>& devices,
                           std::shared_ptr<const discovery::UnitIndex> index)
    : devices_(&devices),
      index_(
          index ? std::move(index)
                : std::make_shared<const discovery::UnitIndex>(discovery::UnitIndex::of(devices))) {
}

const discovery::GpuDevice* DeviceFinder::find(std::string_view identifier) const {
  // The one rule of which unit a spelling names (host/enumeration/UnitIndex.h): a UnitRef of an
  // index of devices is the device's position.
  const discovery::EntryNaming named = index_->entry(identifier);
  return named.unit && *named.unit < devices_->size() ? &(*devices_)[*named.unit] : nullptr;
}

}  // namespace flink::externalresource::gpu
