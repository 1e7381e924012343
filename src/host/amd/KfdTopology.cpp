#include "host/amd/KfdTopology.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <map>
#include <system_error>
#include <tuple>

#include "host/enumeration/GpuEnumerator.h"
#include "host/enumeration/Vendor.h"
#include "util/Strings.h"

namespace flink::amd {

namespace fs = std::filesystem;
using discovery::DiscoveryError;

std::string nvmlBusId(const PciAddress& address) {
  char text[32];
  std::snprintf(text, sizeof text, "%08X:%02X:%02X.%X", address.domain, address.bus, address.device,
                address.function);
  return text;
}

std::string sysfsPciName(const PciAddress& address) {
  char text[32];
  std::snprintf(text, sizeof text, "%04x:%02x:%02x.%x", address.domain, address.bus, address.device,
                address.function);
  return text;
}

namespace {

std::optional<unsigned> parseHex(std::string_view text, std::size_t minDigits,
                                 std::size_t maxDigits) {
  if (text.size() < minDigits || text.size() > maxDigits) return std::nullopt;
  unsigned value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value, 16);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace

std::optional<PciAddress> parsePciAddress(std::string_view text) {
  text = strings::trim(text);
  // [domain:]bus:device.function
  const std::size_t dot = text.rfind('.');
  if (dot == std::string_view::npos) return std::nullopt;
  const std::string_view function = text.substr(dot + 1);
  const std::string_view head = text.substr(0, dot);
  const std::vector<std::string_view> parts = strings::split(head, ':');
  if (parts.size() != 2 && parts.size() != 3) return std::nullopt;
  PciAddress address;
  std::size_t next = 0;
  if (parts.size() == 3) {
    const auto domain = parseHex(parts[0], 1, 8);
    if (!domain) return std::nullopt;
    address.domain = *domain;
    next = 1;
  }
  const auto bus = parseHex(parts[next], 1, 2);
  const auto device = parseHex(parts[next + 1], 1, 2);
  const auto fn = parseHex(function, 1, 1);
  if (!bus || !device || !fn || *device > 0x1f || *fn > 7) return std::nullopt;
  address.bus = *bus;
  address.device = *device;
  address.function = *fn;
  return address;
}

std::optional<std::uint64_t> KfdProperties::get(std::string_view name) const {
  for (const auto& [key, value] : values) {
    if (key == name) return value;
  }
  return std::nullopt;
}

KfdProperties parseKfdProperties(std::string_view text, const std::string& file) {
  KfdProperties properties;
  std::size_t number = 0;
  for (std::string_view line : strings::split(text, '\n')) {
    ++number;
    if (strings::isBlank(line)) continue;
    std::string_view rest = line;
    const std::string_view name = strings::nextToken(rest);
    const std::string_view value = strings::nextToken(rest);
    std::uint64_t parsed = 0;
    const bool digits = strings::isDigits(value);
    const auto [end, error] =
        digits ? std::from_chars(value.data(), value.data() + value.size(), parsed)
               : std::from_chars_result{value.data(), std::errc::invalid_argument};
    if (!digits || error != std::errc() || end != value.data() + value.size() ||
        !strings::isBlank(rest)) {
      throw DiscoveryError(
          "malformed KFD properties file " + file + ": line " + std::to_string(number) +
              " is not '<name> <decimal>': '" + strings::quoteForMessage(line) + "'",
          {"every AMD GPU index after this node would be a guess, so none is printed"});
    }
    properties.values.emplace_back(std::string(name), parsed);
  }
  return properties;
}

LocationId decodeLocationId(std::uint64_t locationId, std::uint64_t domain) {
  LocationId location;
  location.address.domain = static_cast<std::uint32_t>(domain);
  location.address.bus = static_cast<unsigned>((locationId >> 8) & 0xff);
  location.address.device = static_cast<unsigned>((locationId >> 3) & 0x1f);
  location.address.function = static_cast<unsigned>(locationId & 0x7);
  location.highPartition = static_cast<unsigned>((locationId >> 28) & 0xf);
  return location;
}

fs::path kfdNodesFolder(const fs::path& sysfsRoot) {
  return sysfsRoot / "class" / "kfd" / "kfd" / "topology" / "nodes";
}

namespace {

KfdProperties readProperties(const fs::path& file) {
  int error = 0;
  const std::optional<std::string> text = discovery::readSmallFile(file, &error);
  if (!text) {
    throw DiscoveryError("cannot read the KFD properties file " + file.string() + ": " +
                         std::strerror(error));
  }
  return parseKfdProperties(*text, file.string());
}

std::uint64_t required(const KfdProperties& properties, const char* name, const fs::path& file) {
  if (const auto value = properties.get(name)) return *value;
  throw DiscoveryError(
      "malformed KFD properties file " + file.string() + ": it has no '" + name + "' line",
      {"every AMD GPU index after this node would be a guess, so none is printed"});
}

std::optional<std::uint64_t> frameBufferBytes(const fs::path& nodeFolder) {
  const fs::path banks = nodeFolder / "mem_banks";
  std::error_code error;
  if (!fs::is_directory(banks, error)) return std::nullopt;
  std::optional<std::uint64_t> total;
  for (const fs::directory_entry& bank : fs::directory_iterator(banks, error)) {
    const fs::path file = bank.path() / "properties";
    if (!fs::exists(file, error)) continue;
    const KfdProperties properties = readProperties(file);
    const auto heap = properties.get("heap_type");
    const auto size = properties.get("size_in_bytes");
    if (heap && (*heap == 1 || *heap == 2) && size) total = total.value_or(0) + *size;
  }
  return total;
}

}  // namespace

std::optional<std::vector<KfdNode>> readKfdTopology(const fs::path& sysfsRoot) {
  const fs::path folder = kfdNodesFolder(sysfsRoot);
  std::error_code error;
  if (!fs::is_directory(folder, error)) return std::nullopt;
  std::vector<std::pair<unsigned, fs::path>> found;
  for (const fs::directory_entry& entry : fs::directory_iterator(folder, error)) {
    const std::string name = entry.path().filename().string();
    unsigned id = 0;
    const auto [end, failed] = std::from_chars(name.data(), name.data() + name.size(), id);
    if (name.empty() || failed != std::errc() || end != name.data() + name.size()) continue;
    found.emplace_back(id, entry.path());
  }
  if (error) {
    throw DiscoveryError("cannot list the KFD topology at " + folder.string() + ": " +
                         error.message());
  }
  std::sort(found.begin(), found.end());
  std::vector<KfdNode> nodes;
  for (const auto& [id, nodeFolder] : found) {
    KfdNode node;
    node.id = id;
    node.propertiesFile = nodeFolder / "properties";
    const KfdProperties properties = readProperties(node.propertiesFile);
    node.gpu = required(properties, "simd_count", node.propertiesFile) != 0;
    if (node.gpu) {
      const std::uint64_t location = required(properties, "location_id", node.propertiesFile);
      node.renderMinor = required(properties, "drm_render_minor", node.propertiesFile);
      node.location = decodeLocationId(location, properties.get("domain").value_or(0));
      node.uniqueId = properties.get("unique_id").value_or(0);
      node.deviceId = properties.get("device_id");
      node.memoryBytes = frameBufferBytes(nodeFolder);
      if (!node.memoryBytes) {
        if (const auto local = properties.get("local_mem_size"); local && *local != 0) {
          node.memoryBytes = local;
        }
      }
    }
    nodes.push_back(std::move(node));
  }
  return nodes;
}

std::vector<KfdUnit> kfdUnitsOf(const std::vector<KfdNode>& nodes) {
  using Key = std::tuple<std::uint32_t, unsigned, unsigned, std::uint64_t>;
  const auto keyOf = [](const KfdNode& node) {
    const PciAddress& a = node.location.address;
    return Key{a.domain, a.bus, a.device, node.uniqueId};
  };
  std::map<Key, std::size_t> sharing;
  for (const KfdNode& node : nodes) {
    if (node.gpu) ++sharing[keyOf(node)];
  }
  std::vector<KfdUnit> units;
  for (const KfdNode& node : nodes) {
    if (!node.gpu) continue;
    KfdUnit unit;
    unit.node = node;
    unit.busId = node.location.address;
    unit.device = node.location.address;
    if (sharing[keyOf(node)] > 1 || node.location.highPartition != 0) {
      const unsigned partition = node.location.highPartition != 0 ? node.location.highPartition
                                                                  : node.location.address.function;
      unit.partition = partition;
      unit.busId.function = partition;
      unit.device.function = 0;
    }
    units.push_back(std::move(unit));
  }
  return units;
}

}  // namespace flink::amd
