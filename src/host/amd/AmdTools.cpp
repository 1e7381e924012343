#include "host/amd/AmdTools.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

#include "host/enumeration/GpuEnumerator.h"
#include "util/Strings.h"

namespace flink::amd {

using discovery::DiscoveryError;
using nlohmann::json;

std::string rocrUuid(unsigned long long uniqueId) {
  char text[32];
  std::snprintf(text, sizeof text, "GPU-%016llx", uniqueId);
  return text;
}

namespace {

[[noreturn]] void notToolJson(const std::string& tool, std::string_view output,
                              const std::string& why) {
  throw DiscoveryError(tool + " printed something that is not its JSON list of GPUs (" + why +
                           "): '" + strings::quoteForMessage(strings::trim(output)) + "'",
                       {"no AMD GPU index is printed from an answer that cannot be read"});
}

json parseJson(const std::string& tool, std::string_view output) {
  json document = json::parse(output.begin(), output.end(), nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded()) notToolJson(tool, output, "not JSON");
  return document;
}

}  // namespace

std::vector<ToolGpu> parseAmdSmiList(std::string_view output) {
  const std::string tool = "amd-smi";
  const json document = parseJson(tool, output);
  if (!document.is_array()) notToolJson(tool, output, "not a JSON array");
  std::vector<ToolGpu> gpus;
  for (const json& entry : document) {
    if (!entry.is_object()) notToolJson(tool, output, "an entry is not an object");
    const auto bdf = entry.find("bdf");
    if (bdf == entry.end() || !bdf->is_string()) {
      notToolJson(tool, output, "an entry has no \"bdf\"");
    }
    const std::optional<PciAddress> address = parsePciAddress(bdf->get<std::string>());
    if (!address) notToolJson(tool, output, "\"bdf\" is not a PCI address");
    gpus.push_back(ToolGpu{*address, std::nullopt});
  }
  return gpus;
}

std::vector<ToolGpu> parseRocmSmiJson(std::string_view output) {
  const std::string tool = "rocm-smi";
  const json document = parseJson(tool, output);
  if (!document.is_object()) notToolJson(tool, output, "not a JSON object");
  std::map<unsigned, ToolGpu> cards;
  for (const auto& [key, value] : document.items()) {
    if (!key.starts_with("card") || key.size() == 4) continue;
    unsigned card = 0;
    const char* first = key.data() + 4;
    const char* last = key.data() + key.size();
    const auto [end, error] = std::from_chars(first, last, card);
    if (error != std::errc() || end != last) continue;
    if (!value.is_object()) notToolJson(tool, output, key + " is not an object");
    const auto bus = value.find("PCI Bus");
    if (bus == value.end() || !bus->is_string()) {
      notToolJson(tool, output, key + " has no \"PCI Bus\"");
    }
    const std::optional<PciAddress> address = parsePciAddress(bus->get<std::string>());
    if (!address) notToolJson(tool, output, key + "'s \"PCI Bus\" is not a PCI address");
    ToolGpu gpu{*address, std::nullopt};
    if (const auto id = value.find("Unique ID"); id != value.end()) {
      if (!id->is_string()) notToolJson(tool, output, key + "'s \"Unique ID\" is not a string");
      std::string_view text = strings::trim(id->get_ref<const std::string&>());
      if (text != "N/A") {
        if (text.starts_with("0x") || text.starts_with("0X")) text.remove_prefix(2);
        unsigned long long uniqueId = 0;
        const auto [idEnd, idError] =
            std::from_chars(text.data(), text.data() + text.size(), uniqueId, 16);
        if (text.empty() || text.size() > 16 || idError != std::errc() ||
            idEnd != text.data() + text.size()) {
          notToolJson(tool, output, key + "'s \"Unique ID\" is not hex");
        }
        if (uniqueId != 0) gpu.uuid = rocrUuid(uniqueId);
      }
    }
    cards.emplace(card, std::move(gpu));
  }
  std::vector<ToolGpu> gpus;
  for (auto& [card, gpu] : cards) gpus.push_back(std::move(gpu));
  return gpus;
}

}  // namespace flink::amd
