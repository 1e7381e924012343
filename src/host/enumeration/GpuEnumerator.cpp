#include "host/enumeration/GpuEnumerator.h"

#include <algorithm>

#include "host/enumeration/DeviceIdentifiers.h"
#include "util/Strings.h"

namespace flink::discovery {

Enumeration StaticEnumerator::enumerate() {
  Enumeration listed;
  listed.devices.reserve(identifiers_.size());
  for (const std::string& identifier : identifiers_) {
    GpuDevice device;
    device.identifier = identifier;
    listed.devices.push_back(std::move(device));
  }
  return listed;
}

std::vector<GpuDevice> allocatableUnits(const std::vector<GpuDevice>& devices, bool mig) {
  std::vector<GpuDevice> units;
  units.reserve(devices.size());
  for (const GpuDevice& device : devices) {
    const bool unit =
        mig ? (device.isMigInstance() || !device.migEnabled) : !device.isMigInstance();
    if (unit) units.push_back(device);
  }
  return units;
}

std::unordered_map<std::string, std::vector<std::string>> relatedUnits(
    const std::vector<GpuDevice>& devices) {
  std::unordered_map<std::string, std::vector<std::string>> related;
  for (const GpuDevice& device : devices) {
    if (!device.mig) continue;
    // Whole GPUs are identified by their index, as the sources print it.
    const std::string parent = std::to_string(device.mig->parentIndex);
    related[parent].push_back(device.identifier);
    related[device.identifier].push_back(parent);
  }
  return related;
}

std::vector<std::string> migGpusWithoutInstances(const std::vector<GpuDevice>& devices) {
  std::vector<std::string> empty;
  for (const GpuDevice& gpu : devices) {
    if (!gpu.migEnabled || gpu.isMigInstance()) continue;
    const bool hasInstance =
        std::any_of(devices.begin(), devices.end(), [&](const GpuDevice& device) {
          return device.mig && std::to_string(device.mig->parentIndex) == gpu.identifier;
        });
    if (!hasInstance) empty.push_back(gpu.identifier);
  }
  return empty;
}

std::vector<std::string> identifiersOf(const std::vector<GpuDevice>& devices) {
  std::vector<std::string> identifiers;
  identifiers.reserve(devices.size());
  for (const GpuDevice& device : devices) identifiers.push_back(device.identifier);
  return identifiers;
}

std::unordered_map<std::string, std::string> uuidsByIdentifier(
    const std::vector<GpuDevice>& devices) {
  std::unordered_map<std::string, std::string> uuids;
  for (const GpuDevice& device : devices) {
    if (device.uuid && !device.isMigInstance()) uuids.emplace(device.identifier, *device.uuid);
  }
  return uuids;
}

std::vector<std::string> parseGpuList(std::string_view text) {
  std::vector<std::string> gpus;
  for (std::string_view commaPart : strings::split(text, ',')) {
    for (const std::string& part : strings::splitWhitespace(commaPart)) {
      if (!device::isDeviceIdentifier(part)) {
        throw DiscoveryError("invalid GPU '" + strings::quoteForMessage(part) + "'" +
                             " in --gpus: expected an index (e.g. 0) or a GPU-/MIG- UUID");
      }
      gpus.push_back(device::canonicalDeviceIdentifier(part));
    }
  }
  return gpus;
}

}  // namespace flink::discovery
