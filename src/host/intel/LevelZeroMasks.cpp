#include "host/intel/LevelZeroMasks.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <numeric>
#include <string_view>

#include "host/enumeration/GpuEnumerator.h"
#include "util/Strings.h"

namespace flink::intel {

namespace {

using discovery::DiscoveryError;

/// A decimal index as the discovery reads one: digits only, no leading zero, at most 9 digits
/// (Level Zero would truncate a longer one to 32 bits, and read a leading zero as octal).
std::optional<std::uint32_t> decimalIndex(std::string_view text) noexcept {
  if (text.empty() || text.size() > 9) return std::nullopt;
  if (text.size() > 1 && text.front() == '0') return std::nullopt;
  std::uint32_t value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<std::uint32_t>(c - '0');
  }
  return value;
}

/// One ZE_AFFINITY_MASK entry: as spelled (spaces around it removed), and its numbers.
struct MaskEntry {
  std::string text;
  std::vector<std::uint32_t> parts;
};

[[noreturn]] void refuseEntry(const char* variable, std::string_view value,
                              std::string_view entry) {
  throw DiscoveryError(
      std::string(variable) + "=" + strings::quoteForMessage(value) +
          " has an entry the discovery does not read: \"" + strings::quoteForMessage(entry) + "\"",
      {std::string("entries are <index> or <card>.<tile>, each a decimal number without leading "
                   "zeros: Level Zero would read another spelling as C's base-0 numbers do, or "
                   "fail on it, so the discovery does not guess which device it names")});
}

std::vector<MaskEntry> splitAffinityMask(std::string_view value) {
  std::vector<std::string_view> pieces = strings::split(value, ',');
  // Level Zero's split drops what follows a last comma ("0,1," is 0,1), nothing else.
  if (pieces.size() > 1 && pieces.back().empty()) pieces.pop_back();
  std::vector<MaskEntry> entries;
  for (std::string_view piece : pieces) {
    const std::string_view entry = strings::trim(piece);
    MaskEntry parsed{std::string(entry), {}};
    for (std::string_view part : strings::split(entry, '.')) {
      const auto number = decimalIndex(part);
      if (!number) refuseEntry(kAffinityMaskVariable, value, entry);
      parsed.parts.push_back(*number);
    }
    entries.push_back(std::move(parsed));
  }
  return entries;
}

Notice skipped(std::string_view entry, std::string_view why) {
  return Notice::warning(std::string(kAffinityMaskVariable) + " entry " + std::string(entry) +
                         " is skipped, as Level Zero skips it: " + std::string(why));
}

/// FLAT and COMBINED: entries index tiles, card-major.
void applyFlatMask(const std::vector<unsigned>& tiles, const std::vector<MaskEntry>& entries,
                   LevelZeroDevices& result) {
  std::vector<std::pair<std::size_t, unsigned>> tileOf;  // device index -> (card, tile)
  for (std::size_t card = 0; card < tiles.size(); ++card) {
    for (unsigned tile = 0; tile < tiles[card]; ++tile) tileOf.emplace_back(card, tile);
  }
  std::vector<std::optional<std::string>> named(tileOf.size());
  for (const MaskEntry& entry : entries) {
    if (entry.parts.front() >= tileOf.size()) {
      result.warnings.push_back(
          skipped(entry.text, "there " + std::string(tileOf.size() == 1 ? "is" : "are") + " only " +
                                  std::to_string(tileOf.size()) +
                                  (tileOf.size() == 1 ? " device" : " devices")));
      continue;
    }
    if (entry.parts.size() > 1) {
      result.warnings.push_back(skipped(entry.text,
                                        "under the FLAT hierarchy its entries index devices, not "
                                        "<card>.<tile>"));
      continue;
    }
    if (!named[entry.parts.front()]) named[entry.parts.front()] = entry.text;
  }
  for (std::size_t i = 0; i < tileOf.size(); ++i) {
    if (!named[i]) continue;
    const auto [card, tile] = tileOf[i];
    result.devices.push_back(
        {card, tiles[card] > 1 ? std::optional<unsigned>(tile) : std::nullopt, *named[i], true});
  }
}

/// COMPOSITE: `K` is card K, `K.S` tile S of card K.
void applyCompositeMask(const std::vector<unsigned>& tiles, std::string_view value,
                        const std::vector<MaskEntry>& entries, LevelZeroDevices& result) {
  struct CardEntries {
    std::optional<std::string> whole;
    std::map<unsigned, std::string> tiles;
  };
  std::vector<CardEntries> byCard(tiles.size());
  for (const MaskEntry& entry : entries) {
    if (entry.parts.size() > 2) refuseEntry(kAffinityMaskVariable, value, entry.text);
    const std::uint32_t card = entry.parts.front();
    if (card >= tiles.size()) {
      result.warnings.push_back(skipped(
          entry.text, "there " + std::string(tiles.size() == 1 ? "is" : "are") + " only " +
                          std::to_string(tiles.size()) + (tiles.size() == 1 ? " card" : " cards")));
      continue;
    }
    if (entry.parts.size() == 1) {
      if (!byCard[card].whole) byCard[card].whole = entry.text;
      continue;
    }
    const std::uint32_t tile = entry.parts[1];
    if (tile >= tiles[card]) {
      result.warnings.push_back(skipped(entry.text, "card " + std::to_string(card) + " has " +
                                                        std::to_string(tiles[card]) +
                                                        (tiles[card] == 1 ? " tile" : " tiles")));
      continue;
    }
    byCard[card].tiles.emplace(tile, entry.text);
  }
  for (std::size_t card = 0; card < tiles.size(); ++card) {
    const CardEntries& named = byCard[card];
    if (named.whole) {
      result.devices.push_back({card, std::nullopt, *named.whole, true});
    } else if (named.tiles.size() == 1) {
      const auto& [tile, text] = *named.tiles.begin();
      result.devices.push_back(
          {card, tiles[card] > 1 ? std::optional<unsigned>(tile) : std::nullopt, text, true});
    } else if (named.tiles.size() > 1) {
      std::vector<std::string> spelled;
      for (const auto& [tile, text] : named.tiles) spelled.push_back(text);
      result.devices.push_back({card, std::nullopt, spelled.front(), false});
      result.warnings.push_back(Notice::warning(
          std::string(kAffinityMaskVariable) + " names " + strings::join(spelled, " and ") +
          ", tiles of card " + std::to_string(card) +
          ": Level Zero makes them one device, which is not handed out"));
    }
  }
}

[[noreturn]] void refuseSelector(std::string_view value) {
  throw DiscoveryError(
      std::string(kDeviceSelectorVariable) + "=" + strings::quoteForMessage(value) +
          " is not a form the discovery reads",
      {"it reads level_zero:<indices> (as Ray writes it), level_zero:* and level_zero:gpu",
       "exclusions (!…), other backends, several terms and sub-device forms are not read, so as "
       "not to guess which devices SYCL gives"});
}

void applySelector(std::string_view value, LevelZeroDevices& result) {
  const std::size_t colon = value.find(':');
  if (colon == std::string_view::npos || value.find(';') != std::string_view::npos ||
      strings::toLower(value.substr(0, colon)) != "level_zero") {
    refuseSelector(value);
  }
  const std::string_view list = value.substr(colon + 1);
  std::vector<LevelZeroDevice> selected;
  if (list == "*" || strings::toLower(list) == "gpu") {
    for (std::size_t i = 0; i < result.devices.size(); ++i) {
      selected.push_back(result.devices[i]);
      selected.back().identifier = std::to_string(i);
    }
  } else {
    std::vector<std::optional<std::string>> named(result.devices.size());
    for (std::string_view entry : strings::split(list, ',')) {
      const auto index = decimalIndex(entry);
      if (!index) refuseSelector(value);
      if (*index >= result.devices.size()) {
        result.warnings.push_back(Notice::warning(
            std::string(kDeviceSelectorVariable) + " entry " + std::string(entry) +
            " is skipped: Level Zero gives " + std::to_string(result.devices.size()) +
            (result.devices.size() == 1 ? " device" : " devices")));
        continue;
      }
      if (!named[*index]) named[*index] = std::string(entry);
    }
    for (std::size_t i = 0; i < result.devices.size(); ++i) {
      if (!named[i]) continue;
      selected.push_back(result.devices[i]);
      selected.back().identifier = *named[i];
    }
  }
  result.devices = std::move(selected);
}

}  // namespace

Hierarchy parseHierarchy(const char* value) {
  if (value == nullptr || *value == '\0' || std::strcmp(value, "FLAT") == 0 ||
      std::strcmp(value, "COMBINED") == 0) {
    return Hierarchy::kFlat;
  }
  if (std::strcmp(value, "COMPOSITE") == 0) return Hierarchy::kComposite;
  throw DiscoveryError(std::string(kHierarchyVariable) + "=" + strings::quoteForMessage(value) +
                           " is not a hierarchy Level Zero reads",
                       {"Level Zero reads FLAT, COMBINED and COMPOSITE, in upper case, and takes "
                        "its product's default for any other value; the discovery does not guess "
                        "which"});
}

LevelZeroDevices levelZeroDevices(const std::vector<unsigned>& tiles, Hierarchy hierarchy,
                                  const char* affinityMask, const char* deviceSelector) {
  LevelZeroDevices result;
  const bool masked =
      affinityMask != nullptr && *affinityMask != '\0' && std::strcmp(affinityMask, "default") != 0;
  if (!masked) {
    std::size_t index = 0;
    for (std::size_t card = 0; card < tiles.size(); ++card) {
      if (hierarchy == Hierarchy::kComposite || tiles[card] <= 1) {
        result.devices.push_back({card, std::nullopt, std::to_string(index++), true});
        continue;
      }
      for (unsigned tile = 0; tile < tiles[card]; ++tile) {
        result.devices.push_back({card, tile, std::to_string(index++), true});
      }
    }
  } else {
    const std::vector<MaskEntry> entries = splitAffinityMask(affinityMask);
    if (hierarchy == Hierarchy::kFlat) {
      applyFlatMask(tiles, entries, result);
    } else {
      applyCompositeMask(tiles, affinityMask, entries, result);
    }
    result.mask = std::string(kAffinityMaskVariable) + "=" + affinityMask;
    result.maskVariable = MaskVariable::kAffinityMask;
  }
  if (deviceSelector != nullptr) {
    applySelector(deviceSelector, result);
    result.mask = std::string(kDeviceSelectorVariable) + "=" + deviceSelector;
    result.maskVariable = MaskVariable::kDeviceSelector;
  }
  return result;
}

std::size_t unmaskedIndex(const std::vector<unsigned>& tiles, Hierarchy hierarchy, std::size_t card,
                          std::optional<unsigned> tile) {
  if (hierarchy == Hierarchy::kComposite) return card;
  std::size_t index = 0;
  for (std::size_t c = 0; c < card; ++c) index += std::max(tiles[c], 1u);
  return index + tile.value_or(0);
}

}  // namespace flink::intel
