// CUDA_VISIBLE_DEVICES as CUDA reads it. See VisibleDevices.h for the rules.
#include "host/enumeration/VisibleDevices.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <set>
#include <tuple>

#include "util/Strings.h"

namespace flink::discovery {
namespace {

/// "domain:bus:device.function" as numbers, for ordering; nullopt when it is not that form.
std::optional<std::tuple<unsigned long, unsigned long, unsigned long, unsigned long>> pciKey(
    const std::optional<std::string>& busId) {
  if (!busId) return std::nullopt;
  unsigned long parts[4] = {};
  std::string_view rest = *busId;
  for (int i = 0; i < 4; ++i) {
    const char separator = i < 2 ? ':' : '.';
    const std::size_t end = i < 3 ? rest.find(separator) : rest.size();
    if (end == std::string_view::npos || end == 0) return std::nullopt;
    const std::string_view part = rest.substr(0, end);
    const auto [last, error] =
        std::from_chars(part.data(), part.data() + part.size(), parts[i], 16);
    if (error != std::errc() || last != part.data() + part.size()) return std::nullopt;
    rest = i < 3 ? rest.substr(end + 1) : std::string_view();
  }
  return std::make_tuple(parts[0], parts[1], parts[2], parts[3]);
}

/// The device whose UUID is `wanted` (lower case) or, when none is, every device whose UUID
/// starts with it (one: the device it names; several: an ambiguous prefix, which names none).
/// `whole`: among whole GPUs, else among MIG instances.
EntryMatch byUuid(const std::vector<GpuDevice>& devices, const std::string& wanted, bool whole) {
  std::vector<const GpuDevice*> starting;
  for (const GpuDevice& device : devices) {
    if (!device.uuid || device.isMigInstance() == whole) continue;
    const std::string uuid = strings::toLower(*device.uuid);
    if (uuid == wanted) return {&device, {}};
    if (uuid.starts_with(wanted)) starting.push_back(&device);
  }
  if (starting.size() == 1) return {starting.front(), {}};
  // A prefix that several UUIDs share names none of them: CUDA cannot tell which is meant.
  return {nullptr, starting.size() > 1 ? std::move(starting) : std::vector<const GpuDevice*>()};
}

/// MIG-GPU-<gpu uuid>/<gi>/<ci>: the instance of that GPU with those ids. A GPU UUID prefix
/// that several GPUs share is ambiguous here too.
EntryMatch byMigTriple(const std::vector<GpuDevice>& devices, std::string_view entry) {
  const std::vector<std::string_view> parts = strings::split(entry.substr(4), '/');
  if (parts.size() != 3) return {};
  const std::optional<unsigned> gi = strings::parseUnsigned(parts[1]);
  const std::optional<unsigned> ci = strings::parseUnsigned(parts[2]);
  if (!gi || !ci) return {};
  EntryMatch parent = byUuid(devices, strings::toLower(parts[0]), true);
  if (parent.device == nullptr) return parent;
  // MIG instances name their parent by index (identifier of the whole GPU).
  for (const GpuDevice& device : devices) {
    if (!device.mig || std::to_string(device.mig->parentIndex) != parent.device->identifier) {
      continue;
    }
    if (device.mig->gpuInstanceId == gi && device.mig->computeInstanceId == ci) {
      return {&device, {}};
    }
  }
  return {};
}

bool severalModels(const std::vector<const GpuDevice*>& gpus) {
  std::set<std::string> names;
  for (const GpuDevice* gpu : gpus) {
    if (gpu->name) names.insert(*gpu->name);
  }
  return names.size() > 1;
}

}  // namespace

std::string VisibleDevicesMask::describe() const {
  return std::string(kVisibleDevicesVariable) + "=" + strings::quoteForMessage(value);
}

std::optional<VisibleDevicesMask> parseVisibleDevices(const char* value) {
  if (value == nullptr) return std::nullopt;
  VisibleDevicesMask mask;
  mask.value = value;
  const std::string_view text = strings::trim(mask.value);
  if (text.empty() || text == kNoDevFiles) return mask;
  for (std::string_view entry : strings::split(text, ',')) {
    mask.entries.emplace_back(strings::trim(entry));
  }
  return mask;
}

std::optional<VisibleDevicesMask> inheritedVisibleDevices() {
  return parseVisibleDevices(std::getenv(kVisibleDevicesVariable));
}

bool inheritedPciBusOrder() {
  const char* order = std::getenv(kDeviceOrderVariable);
  return order != nullptr && std::string_view(order) == "PCI_BUS_ID";
}

std::vector<const GpuDevice*> cudaIndexOrder(const std::vector<GpuDevice>& devices) {
  std::vector<const GpuDevice*> gpus;
  bool everyBusKnown = true;
  for (const GpuDevice& device : devices) {
    if (device.isMigInstance()) continue;
    gpus.push_back(&device);
    if (!pciKey(device.pciBusId)) everyBusKnown = false;
  }
  if (everyBusKnown) {
    std::stable_sort(gpus.begin(), gpus.end(), [](const GpuDevice* a, const GpuDevice* b) {
      return *pciKey(a->pciBusId) < *pciKey(b->pciBusId);
    });
  }
  return gpus;
}

EntryMatch matchVisibleDeviceEntry(std::string_view entry, const std::vector<GpuDevice>& devices) {
  if (strings::isDigits(entry)) {
    const std::optional<unsigned> index = strings::parseUnsigned(entry);
    const std::vector<const GpuDevice*> order = cudaIndexOrder(devices);
    return {index && *index < order.size() ? order[*index] : nullptr, {}};
  }
  const std::string lower = strings::toLower(entry);
  if (lower.starts_with("mig-gpu-")) return byMigTriple(devices, entry);
  // "GPU-" or "MIG-" and at least one character of the UUID: "GPU-" alone names nothing.
  if (lower.size() > 4 && lower.starts_with("gpu-")) return byUuid(devices, lower, true);
  if (lower.size() > 4 && lower.starts_with("mig-")) return byUuid(devices, lower, false);
  return {};
}

const GpuDevice* resolveVisibleDeviceEntry(std::string_view entry,
                                           const std::vector<GpuDevice>& devices) {
  return matchVisibleDeviceEntry(entry, devices).device;
}

std::string describeDevice(const GpuDevice& device) {
  if (device.mig) {
    return "MIG instance " + device.identifier + " of GPU " +
           std::to_string(device.mig->parentIndex);
  }
  return "GPU " + device.identifier + (device.uuid ? " (" + *device.uuid + ")" : std::string());
}

std::string describeAmbiguity(const std::vector<const GpuDevice*>& candidates) {
  std::string text = "ambiguous: it could mean ";
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (i > 0) text += i + 1 == candidates.size() ? " or " : ", ";
    text += describeDevice(*candidates[i]);
  }
  return text;
}

MaskResolution resolveVisibleDevices(const VisibleDevicesMask& mask,
                                     const std::vector<GpuDevice>& devices, bool pciBusOrder) {
  MaskResolution resolution;
  bool anyIndex = false;
  for (std::size_t i = 0; i < mask.entries.size(); ++i) {
    const std::string& entry = mask.entries[i];
    EntryMatch match = matchVisibleDeviceEntry(entry, devices);
    const GpuDevice* device = match.device;
    if (device == nullptr) {
      // What CUDA makes visible is the same either way: nothing from this entry on.
      std::string warning =
          mask.describe() + ": entry " + strings::inQuotes(entry) +
          (match.ambiguous.empty() ? std::string(" names no device of this host")
                                   : " is " + describeAmbiguity(match.ambiguous)) +
          ", so CUDA ignores it";
      if (i + 1 < mask.entries.size()) {
        std::vector<std::string> rest(mask.entries.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                                      mask.entries.end());
        warning += " and every entry after it (" + strings::join(rest, ",") + ")";
      }
      resolution.warnings.push_back(Notice::warning(std::move(warning)));
      resolution.stop = MaskStop{i, std::move(match.ambiguous)};
      break;
    }
    anyIndex = anyIndex || strings::isDigits(entry);
    const auto same =
        std::find_if(resolution.visible.begin(), resolution.visible.end(),
                     [&](const VisibleDevice& seen) { return seen.device == device; });
    if (same != resolution.visible.end()) {
      resolution.warnings.push_back(Notice::warning(
          mask.describe() + ": entry " + strings::inQuotes(entry) + " names the same device as " +
          strings::inQuotes(same->entry) + "; counted once"));
      continue;
    }
    resolution.visible.push_back({entry, device});
  }
  if (anyIndex && !pciBusOrder && severalModels(cudaIndexOrder(devices))) {
    resolution.warnings.push_back(Notice::warning(
        mask.describe() +
        " names GPUs by index on a host of several GPU models without "
        "CUDA_DEVICE_ORDER=PCI_BUS_ID: CUDA then numbers the fastest GPU first, so an index is "
        "ambiguous; it is read in PCI bus order (NVML's); set CUDA_DEVICE_ORDER=PCI_BUS_ID, or "
        "name GPUs by UUID"));
  }
  return resolution;
}

std::string MaskedUnits::entryOf(const std::string& hostIdentifier) const {
  for (std::size_t i = 0; i < hostIdentifiers.size(); ++i) {
    if (hostIdentifiers[i] == hostIdentifier) return entries[i];
  }
  return hostIdentifier;
}

MaskedUnits unitsUnderMask(const VisibleDevicesMask& mask, const std::vector<GpuDevice>& devices,
                           bool mig, bool pciBusOrder) {
  if (mask.hidesEveryDevice()) {
    throw DiscoveryError(
        mask.describe() + " hides every GPU from this worker: no GPU to hand out",
        {std::string("the scheduler gave this worker no GPU (") + kVisibleDevicesVariable +
         " empty or " + kNoDevFiles + "); unset it to use every GPU of the host"});
  }
  MaskResolution resolution = resolveVisibleDevices(mask, devices, pciBusOrder);
  MaskedUnits units;
  units.warnings = std::move(resolution.warnings);
  for (const VisibleDevice& visible : resolution.visible) {
    const GpuDevice& device = *visible.device;
    const bool unit =
        mig ? (device.isMigInstance() || !device.migEnabled) : !device.isMigInstance();
    if (!unit) {
      units.warnings.push_back(Notice::warning(
          mask.describe() + ": entry " + strings::inQuotes(visible.entry) + " is " +
          (device.isMigInstance()
               ? "a MIG instance, which is handed out only with --mig; leaving it out"
               : "a GPU in MIG mode, which --mig hands out only as its MIG instances; leaving it "
                 "out")));
      continue;
    }
    units.hostIdentifiers.push_back(device.identifier);
    units.entries.push_back(visible.entry);
  }
  if (units.hostIdentifiers.empty()) {
    std::vector<std::string> details = linesOf(units.warnings);
    details.push_back("GPUs of this host: " + strings::join(identifiersOf(devices), ","));
    std::string cause = mask.describe() + " names no GPU of this host that can be handed out";
    if (resolution.visible.empty() && resolution.stop && !resolution.stop->ambiguous.empty()) {
      // Its first entry is a prefix several UUIDs share: say so first, not "no device".
      cause += ": its entry " + strings::inQuotes(mask.entries[resolution.stop->entry]) + " is " +
               describeAmbiguity(resolution.stop->ambiguous);
    }
    throw DiscoveryError(cause, std::move(details));
  }
  return units;
}

}  // namespace flink::discovery
