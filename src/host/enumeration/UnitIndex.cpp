// The one index of a host's units and their spellings. See UnitIndex.h for the two readings.
#include "host/enumeration/UnitIndex.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "host/enumeration/DeviceIdentifiers.h"
#include "host/enumeration/Vendor.h"
#include "host/enumeration/VisibleDevices.h"
#include "util/Strings.h"

namespace flink::discovery {
namespace {

bool isHex(char c) noexcept {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

bool isHexDigits(std::string_view text, std::size_t size) noexcept {
  return text.size() == size && std::all_of(text.begin(), text.end(), isHex);
}

std::string upperHex(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'a' && c <= 'f') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

/// Whether `a` and `b` are UUIDs of one kind: both a GPU's or both a MIG instance's.
bool sameKind(std::string_view a, std::string_view b) noexcept {
  return (a.starts_with("GPU-") && b.starts_with("GPU-")) ||
         (a.starts_with("MIG-") && !a.starts_with("MIG-GPU-") && b.starts_with("MIG-") &&
          !b.starts_with("MIG-GPU-"));
}

bool isOldMigName(std::string_view canonical) noexcept {
  return canonical.starts_with("MIG-GPU-") && canonical.find('/') != std::string_view::npos;
}

}  // namespace

std::optional<std::string> canonicalPciBusId(std::string_view text) {
  // <domain>:<bus>:<device>.<function>, the domain in 4 (the kernel's, lspci's) or 8 (NVML's) hex
  // digits; the function 0 to 7.
  const std::size_t colon = text.find(':');
  if (colon != 4 && colon != 8) return std::nullopt;
  const std::string_view rest = text.substr(colon + 1);
  if (!isHexDigits(text.substr(0, colon), colon) || rest.size() != 7 ||
      !isHexDigits(rest.substr(0, 2), 2) || rest[2] != ':' || !isHexDigits(rest.substr(3, 2), 2) ||
      rest[5] != '.' || rest[6] < '0' || rest[6] > '7') {
    return std::nullopt;
  }
  return (colon == 4 ? std::string("0000") : std::string()) + upperHex(text.substr(0, colon)) +
         ':' + upperHex(rest);
}

std::optional<std::string> parseOneGpu(std::string_view text) {
  if (std::optional<std::string> busId = canonicalPciBusId(text)) return busId;
  try {
    std::vector<std::string> gpus = parseGpuList(text);
    if (gpus.size() == 1) return std::move(gpus.front());
  } catch (const DiscoveryError&) {
  }
  return std::nullopt;
}

UnitRef UnitIndex::add(Unit unit) {
  unit.id = device::canonicalDeviceIdentifier(unit.id);
  if (const auto it = byId_.find(unit.id); it != byId_.end()) return it->second;
  return push(std::move(unit));
}

UnitRef UnitIndex::push(Unit unit) {
  unit.id = device::canonicalDeviceIdentifier(unit.id);
  // A unit known by its UUID (or a prefix of it: --gpus without NVML) has that UUID.
  if (!unit.uuid && device::isUuid(unit.id) && !unit.id.starts_with("MIG-GPU-"))
    unit.uuid = unit.id;
  if (unit.uuid) unit.uuid = device::canonicalDeviceIdentifier(*unit.uuid);
  if (unit.pciBusId) {
    const std::optional<std::string> bus = canonicalPciBusId(*unit.pciBusId);
    unit.pciBusId = bus;
  }
  const UnitRef ref = units_.size();
  byId_.emplace(unit.id, ref);  // the first unit of an id keeps it
  if (unit.uuid) {
    uuidsInOrder_.emplace(*unit.uuid, ref);  // after those of the same UUID: refs ascend
    uuidLengths_.insert(unit.uuid->size());
  }
  if (unit.parent && unit.gpuInstanceId && unit.computeInstanceId) {
    instances_.emplace(std::tuple(*unit.parent, *unit.gpuInstanceId, *unit.computeInstanceId), ref);
  }
  // A whole unit's bus id names it; a MIG instance or an Intel tile shares its GPU's.
  if (unit.pciBusId && !unit.parent && unit.id.find('/') == std::string::npos) {
    byBus_.emplace(*unit.pciBusId, ref);
  }
  for (std::string& alias : unit.aliases) {
    alias = device::canonicalDeviceIdentifier(alias);
    byAlias_.emplace(alias, ref);
  }
  units_.push_back(std::move(unit));
  return ref;
}

UnitIndex UnitIndex::of(const std::vector<GpuDevice>& devices) {
  UnitIndex index;
  // Made for every discovery of a host's devices: grown once.
  index.units_.reserve(devices.size());
  index.byId_.reserve(devices.size());
  index.byBus_.reserve(devices.size());
  // A MIG instance's GPU, by index: needed only where there are instances.
  const bool instances = std::any_of(devices.begin(), devices.end(), [](const GpuDevice& device) {
    return device.mig.has_value();
  });
  std::unordered_map<std::string, UnitRef> wholeByIndex;
  for (const GpuDevice& device : devices) {
    Unit unit;
    unit.id = device.identifier;
    unit.uuid = device.uuid;
    unit.pciBusId = device.pciBusId;
    if (device.mig) {
      unit.gpuInstanceId = device.mig->gpuInstanceId;
      unit.computeInstanceId = device.mig->computeInstanceId;
      if (const auto it = wholeByIndex.find(std::to_string(device.mig->parentIndex));
          it != wholeByIndex.end()) {
        unit.parent = it->second;
      }
    }
    const bool whole = !device.mig;
    const UnitRef ref = index.push(std::move(unit));  // a UnitRef is the device's position
    if (whole && instances) {
      wholeByIndex.emplace(device::canonicalDeviceIdentifier(device.identifier), ref);
    }
  }
  return index;
}

UnitIndex UnitIndex::of(const VendorHost& vendor) {
  UnitIndex index;
  for (const VendorUnit& vendorUnit : vendor.units) {
    Unit unit;
    unit.id = vendorUnit.recordName;
    unit.uuid = propertyOf(vendorUnit.properties, "uuid");
    unit.pciBusId = propertyOf(vendorUnit.properties, "pci.bus_id");
    unit.vendorUnit = true;
    unit.aliases.push_back(vendorUnit.identifier);
    index.add(std::move(unit));
  }
  // Units this process may not be handed but that share hardware with one it may (an Intel
  // card's tiles under a mask): another worker's record of one holds its card here.
  for (const auto& [unit, others] : vendor.related) {
    for (const std::string& id : others) {
      for (const std::string& name : {unit, id}) {
        if (index.find(name)) continue;
        Unit related;
        related.id = name;
        related.vendorUnit = true;
        index.add(std::move(related));
      }
    }
  }
  return index;
}

UnitIndex UnitIndex::ofIdentifiers(
    const std::vector<std::string>& ids, const std::unordered_map<std::string, std::string>& uuids,
    const std::unordered_map<std::string, std::vector<std::string>>& related) {
  UnitIndex index;
  const auto addId = [&](const std::string& id) {
    Unit unit;
    unit.id = id;
    unit.vendorUnit = device::isVendorUnitName(id);
    if (const auto it = uuids.find(id); it != uuids.end()) {
      unit.uuid = it->second;
    } else if (device::isUuid(id) && !id.starts_with("MIG-GPU-")) {
      unit.uuid = id;
    }
    index.add(std::move(unit));
  };
  for (const std::string& id : ids) addId(id);
  for (const auto& [unit, others] : related) {
    addId(unit);
    for (const std::string& other : others) addId(other);
  }
  // A MIG instance related to a whole GPU is carved from it.
  for (const auto& [unit, others] : related) {
    for (const std::string& other : others) {
      const std::optional<UnitRef> a = index.find(unit);
      const std::optional<UnitRef> b = index.find(other);
      if (!a || !b) continue;
      Unit& first = index.units_[*a];
      Unit& second = index.units_[*b];
      if (device::isMigUuid(first.id) && !device::isMigUuid(second.id) && !first.parent) {
        first.parent = *b;
      } else if (device::isMigUuid(second.id) && !device::isMigUuid(first.id) && !second.parent) {
        second.parent = *a;
      }
    }
  }
  return index;
}

std::optional<UnitRef> UnitIndex::find(std::string_view id) const {
  const auto it =
      byId_.find(device::isCanonicalDeviceIdentifier(id) ? std::string(id)
                                                         : device::canonicalDeviceIdentifier(id));
  if (it == byId_.end()) return std::nullopt;
  return it->second;
}

std::optional<UnitRef> UnitIndex::byUuid(std::string_view uuid) const {
  const std::string canonical = device::isCanonicalDeviceIdentifier(uuid)
                                    ? std::string(uuid)
                                    : device::canonicalDeviceIdentifier(uuid);
  // The first unit of that UUID: the first of its equal range.
  const auto it = uuidsInOrder_.lower_bound(canonical);
  if (it == uuidsInOrder_.end() || it->first != canonical) return std::nullopt;
  return it->second;
}

std::optional<UnitRef> UnitIndex::byPciBusId(std::string_view busId) const {
  const std::optional<std::string> canonical = canonicalPciBusId(busId);
  if (!canonical) return std::nullopt;
  const auto it = byBus_.find(*canonical);
  if (it == byBus_.end()) return std::nullopt;
  return it->second;
}

std::vector<UnitRef> UnitIndex::byUuidPrefix(std::string_view uuid) const {
  std::vector<UnitRef> matches;
  if (!sameKind(uuid, uuid)) return matches;  // neither a GPU's nor a MIG instance's
  // Those that begin with it: a range of the UUIDs in order.
  for (auto it = uuidsInOrder_.lower_bound(uuid);
       it != uuidsInOrder_.end() && it->first.starts_with(uuid); ++it) {
    if (sameKind(it->first, uuid)) matches.push_back(it->second);
  }
  // Those that are a shorter prefix of it: its prefix of each length a UUID here has.
  for (const std::size_t length : uuidLengths_) {
    if (length >= uuid.size()) break;
    const auto [first, last] = uuidsInOrder_.equal_range(uuid.substr(0, length));
    for (auto it = first; it != last; ++it) {
      if (sameKind(it->first, uuid)) matches.push_back(it->second);
    }
  }
  std::sort(matches.begin(), matches.end());
  return matches;
}

std::optional<UnitRef> UnitIndex::byOldMigName(std::string_view name) const {
  // MIG-GPU-<gpu uuid>/<gpu instance id>/<compute instance id>
  const std::vector<std::string_view> parts = strings::split(name.substr(4), '/');
  if (parts.size() != 3) return std::nullopt;
  const std::optional<unsigned> gi = strings::parseUnsigned(parts[1]);
  const std::optional<unsigned> ci = strings::parseUnsigned(parts[2]);
  if (!gi || !ci) return std::nullopt;
  std::optional<UnitRef> gpu = byUuid(parts[0]);
  if (!gpu) {
    const std::vector<UnitRef> prefixed = byUuidPrefix(parts[0]);
    if (prefixed.size() != 1) return std::nullopt;
    gpu = prefixed.front();
  }
  const auto it = instances_.find(std::tuple(*gpu, *gi, *ci));
  if (it == instances_.end()) return std::nullopt;
  return it->second;
}

std::vector<UnitRef> UnitIndex::namedByRecord(std::string_view gpu,
                                              const std::optional<std::string>& gpuUuid) const {
  const std::string name = device::canonicalDeviceIdentifier(gpu);
  if (isOldMigName(name)) {
    if (const std::optional<UnitRef> ref = byOldMigName(name)) return {*ref};
    // An instance this host cannot place: by its name, as a unit known by that id.
    if (const std::optional<UnitRef> ref = find(name)) return {*ref};
    return {};
  }
  // The UUID the record claims: the field itself where it is one (a MIG instance's record names
  // it alone, whatever whole GPU's UUID is written beside it), else the one beside an index.
  std::optional<std::string> claim;
  if (device::isUuid(name)) {
    claim = name;
  } else if (gpuUuid) {
    claim = device::canonicalDeviceIdentifier(*gpuUuid);
  }
  const auto nvidia = [this](UnitRef ref) { return !units_[ref].vendorUnit; };
  if (claim) {
    if (const std::optional<UnitRef> exact = byUuid(*claim); exact && nvidia(*exact)) {
      return {*exact};
    }
    std::vector<UnitRef> prefixed = byUuidPrefix(*claim);
    prefixed.erase(
        std::remove_if(prefixed.begin(), prefixed.end(), [&](UnitRef ref) { return !nvidia(ref); }),
        prefixed.end());
    if (!prefixed.empty()) return prefixed;
    if (device::isUuid(name)) return {};  // a GPU this host does not have
    // An index with a UUID this host does not know: the GPU of that index here is another one
    // when its UUID is known, else (no UUID known here) the index decides.
    const std::optional<UnitRef> byIndex = find(name);
    if (!byIndex || !nvidia(*byIndex) || units_[*byIndex].uuid) return {};
    return {*byIndex};
  }
  // An index (Flink's records), a Level Zero index or an AMD or Intel record name.
  if (const std::optional<UnitRef> ref = find(name)) return {*ref};
  return {};
}

EntryNaming UnitIndex::entry(std::string_view text) const {
  EntryNaming naming;
  if (const std::optional<std::string> bus = canonicalPciBusId(text)) {
    naming.unit = byPciBusId(*bus);
    return naming;
  }
  const std::string name = device::canonicalDeviceIdentifier(text);
  if (const std::optional<UnitRef> ref = find(name)) {
    naming.unit = ref;
    return naming;
  }
  if (const auto alias = byAlias_.find(name); alias != byAlias_.end()) {
    naming.unit = alias->second;
    return naming;
  }
  if (isOldMigName(name)) {
    naming.unit = byOldMigName(name);
    return naming;
  }
  if (!device::isUuid(name)) return naming;
  if (const std::optional<UnitRef> exact = byUuid(name)) {
    naming.unit = exact;
    return naming;
  }
  // A prefix: the one unit whose UUID begins so; several are ambiguous.
  std::vector<UnitRef> matches;
  for (auto it = uuidsInOrder_.lower_bound(name);
       it != uuidsInOrder_.end() && it->first.starts_with(name); ++it) {
    if (sameKind(it->first, name)) matches.push_back(it->second);
  }
  std::sort(matches.begin(), matches.end());
  if (matches.size() == 1) {
    naming.unit = matches.front();
  } else if (matches.size() > 1) {
    naming.ambiguous = std::move(matches);
  }
  return naming;
}

OneUnit::OneUnit(std::string_view unitId, const std::optional<std::string>& unitUuid) {
  Unit unit;
  unit.id = std::string(unitId);
  unit.uuid = unitUuid;
  unit.vendorUnit = device::isVendorUnitName(unitId);
  if (!unit.uuid && device::isUuid(unitId) && !unitId.starts_with("MIG-GPU-")) {
    unit.uuid = std::string(unitId);
  }
  index_.add(std::move(unit));
}

bool OneUnit::namedBy(std::string_view recordGpu,
                      const std::optional<std::string>& recordUuid) const {
  return !index_.namedByRecord(recordGpu, recordUuid).empty();
}

bool namesUnit(std::string_view recordGpu, const std::optional<std::string>& recordUuid,
               std::string_view unitId, const std::optional<std::string>& unitUuid) {
  return OneUnit(unitId, unitUuid).namedBy(recordGpu, recordUuid);
}

std::optional<std::string> UnitIndex::gpuUuidOf(UnitRef ref) const {
  const Unit& unit = units_[ref];
  if (unit.parent) return units_[*unit.parent].uuid;
  if (unit.uuid && unit.uuid->starts_with("GPU-")) return unit.uuid;
  return std::nullopt;
}

std::string_view presenceWord(Presence presence) noexcept {
  switch (presence) {
    case Presence::kKnown:
      return "known";
    case Presence::kNotOnThisHost:
      return "not on this host";
    case Presence::kCannotTell:
      return "cannot tell";
  }
  return "cannot tell";
}

HostCoverage coverageOf(const Enumeration& found, bool migListed) {
  HostCoverage coverage;
  coverage.migListed = migListed;
  coverage.cannotTell.clear();
  // A masked view sees some of the host's GPUs: the others are not gone. CUDA reads a set but
  // empty CUDA_VISIBLE_DEVICES as a mask too (it hides every device).
  if (const char* mask = std::getenv(kVisibleDevicesVariable); mask != nullptr) {
    coverage.cannotTell = std::string(kVisibleDevicesVariable) + "=" +
                          strings::quoteForMessage(mask) + " masks this view of the host's GPUs";
  } else if (const char* runtime = std::getenv("NVIDIA_VISIBLE_DEVICES");
             runtime != nullptr && std::string_view(runtime) != "all") {
    coverage.cannotTell = "NVIDIA_VISIBLE_DEVICES=" + strings::quoteForMessage(runtime) +
                          " (a container's) may show only some of the host's GPUs";
  } else if (!found.leftOut.empty()) {
    coverage.cannotTell = "GPU(s) left out of the enumeration have no known UUID (" +
                          found.leftOut.front().gpu + (found.leftOut.size() > 1 ? ", …)" : ")");
  } else if (std::any_of(found.devices.begin(), found.devices.end(), [](const GpuDevice& device) {
               return !device.isMigInstance() && !device.uuid;
             })) {
    coverage.cannotTell = "a GPU's UUID is not known";
  } else if (found.devices.empty()) {
    coverage.cannotTell = "no GPU is listed";
  }
  return coverage;
}

Presence UnitIndex::presence(std::string_view gpu, const std::optional<std::string>& gpuUuid,
                             const HostCoverage& coverage) const {
  if (!coverage.whole() || device::isVendorUnitName(gpu)) return Presence::kCannotTell;
  const std::string name = device::canonicalDeviceIdentifier(gpu);
  const auto nvidia = [this](UnitRef ref) { return !units_[ref].vendorUnit; };
  if (device::isMigUuid(name)) {
    if (!coverage.migListed) return Presence::kCannotTell;
    // The instance itself decides, whatever GPU UUID is written beside it (namedByRecord's rule).
    return namedByRecord(name).empty() ? Presence::kNotOnThisHost : Presence::kKnown;
  }
  std::optional<std::string> claim;
  if (device::isUuid(name)) {
    claim = name;
  } else if (gpuUuid) {
    claim = device::canonicalDeviceIdentifier(*gpuUuid);
  }
  if (claim) {
    if (!claim->starts_with("GPU-")) return Presence::kCannotTell;  // not a whole GPU's UUID
    const std::optional<UnitRef> exact = byUuid(*claim);
    if (exact && nvidia(*exact)) return Presence::kKnown;
    const std::vector<UnitRef> prefixed = byUuidPrefix(*claim);
    return std::any_of(prefixed.begin(), prefixed.end(), nvidia) ? Presence::kKnown
                                                                 : Presence::kNotOnThisHost;
  }
  // An index: NVML's and nvidia-smi's decimal ones. Level Zero's <card>.<tile> is not NVIDIA's.
  if (!strings::isDigits(name)) {
    return Presence::kCannotTell;
  }
  const std::optional<UnitRef> ref = find(name);
  return ref && nvidia(*ref) && !units_[*ref].isMigInstance() ? Presence::kKnown
                                                              : Presence::kNotOnThisHost;
}

}  // namespace flink::discovery
