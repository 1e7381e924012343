#include "host/intel/XpuSmi.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <string>

#include "host/enumeration/GpuEnumerator.h"
#include "util/Strings.h"

namespace flink::intel {

namespace {

[[noreturn]] void notTheToolsJson(std::string_view output, const std::string& why) {
  throw discovery::DiscoveryError(
      "xpu-smi discovery -j answered something that is not its JSON device list: " + why,
      {"xpu-smi printed: " + strings::quoteForMessage(output, 400)});
}

}  // namespace

std::vector<IntelCard> parseXpuSmiDiscovery(std::string_view output) {
  nlohmann::json answer;
  try {
    answer = nlohmann::json::parse(output.begin(), output.end());
  } catch (const nlohmann::json::exception&) {
    notTheToolsJson(output, "not JSON");
  }
  if (!answer.is_object() || !answer.contains("device_list") || !answer["device_list"].is_array()) {
    notTheToolsJson(output, "no device_list array");
  }
  std::vector<IntelCard> cards;
  for (const nlohmann::json& entry : answer["device_list"]) {
    if (!entry.is_object() || !entry.contains("pci_bdf_address") ||
        !entry["pci_bdf_address"].is_string()) {
      notTheToolsJson(output, "a device without pci_bdf_address");
    }
    const std::string bdf = entry["pci_bdf_address"].get<std::string>();
    const auto address = parsePciAddress(bdf);
    if (!address) {
      notTheToolsJson(
          output, "pci_bdf_address \"" + strings::quoteForMessage(bdf) + "\" is not a PCI bus id");
    }
    IntelCard card;
    card.address = *address;
    card.tiles = 1;
    card.tileMemoryBytes.assign(1, std::nullopt);
    if (entry.contains("device_name") && entry["device_name"].is_string()) {
      const std::string name(strings::trim(entry["device_name"].get<std::string>()));
      if (!name.empty()) card.name = name;
    }
    if (entry.contains("pci_device_id") && entry["pci_device_id"].is_string()) {
      const std::string text = entry["pci_device_id"].get<std::string>();
      char* end = nullptr;
      const unsigned long id = std::strtoul(text.c_str(), &end, 16);
      if (!text.empty() && end != text.c_str() && *end == '\0' && id <= 0xffff) {
        card.deviceId = static_cast<std::uint32_t>(id);
      }
    }
    cards.push_back(std::move(card));
  }
  return cards;
}

}  // namespace flink::intel
