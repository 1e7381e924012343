// From what a GPU source knows of a device, and what a share granted says of itself, to GPUInfo's
// properties; and from a printed identifier to the device it names.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "host/defaultdiscovery/DefaultDiscovery.h"
#include "host/enumeration/GpuEnumerator.h"
#include "host/enumeration/UnitIndex.h"

namespace flink::externalresource::gpu {

/// GPUInfo's properties of `device` besides the index, in GPUInfo::getKeys order; an unknown
/// property is left out.
std::vector<std::pair<std::string, std::string>> propertiesOf(const discovery::GpuDevice& device);

/// GPUInfo's properties of the share `share`, in GPUInfo::getKeys order: share.index,
/// share.count, share.memory where declared, and for an MPS share mps.pipe_directory and
/// mps.active_thread_percentage (100 / K, rounded down). They follow a GPU's other properties.
std::vector<std::pair<std::string, std::string>> propertiesOf(
    const defaultdiscovery::ShareGrant& share);

/// The devices a discovery's identifiers name among `devices`, through one index of them made
/// for every look-up (a loop over the answer or the host's GPUs asks it once per GPU).
class DeviceFinder {
 public:
  /// Finds among `devices`, which must outlive the finder, through `index`, an index of them made
  /// already (HostUnits::index), or one it makes (null).
  explicit DeviceFinder(const std::vector<discovery::GpuDevice>& devices,
                        std::shared_ptr<const discovery::UnitIndex> index = nullptr);

  /// The device `identifier` names: for a decimal index, the whole GPU of that index; for a
  /// "GPU-…" or "MIG-…" UUID, the device with that UUID (case-insensitively, as CUDA compares
  /// them). nullptr when none does.
  const discovery::GpuDevice* find(std::string_view identifier) const;

 private:
  const std::vector<discovery::GpuDevice>* devices_;
  std::shared_ptr<const discovery::UnitIndex> index_;
};

}  // namespace flink::externalresource::gpu
