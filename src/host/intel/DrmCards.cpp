#include "host/intel/DrmCards.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <system_error>

#include "host/enumeration/GpuEnumerator.h"
#include "host/enumeration/Vendor.h"
#include "util/Strings.h"

namespace flink::intel {

namespace fs = std::filesystem;

namespace {

constexpr std::uint32_t kIntelVendor = 0x8086;

bool isHexDigit(char c) noexcept {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/// `text` as hex digits only (at most `maxDigits` of them), else nullopt.
std::optional<std::uint32_t> hexField(std::string_view text, std::size_t maxDigits) noexcept {
  if (text.empty() || text.size() > maxDigits) return std::nullopt;
  if (!std::all_of(text.begin(), text.end(), isHexDigit)) return std::nullopt;
  std::uint32_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value, 16);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

/// The number after `prefix` in a name such as "card3", "tile1", "renderD128": digits only.
std::optional<unsigned> numberAfter(std::string_view name, std::string_view prefix) noexcept {
  if (!name.starts_with(prefix)) return std::nullopt;
  const std::string_view digits = name.substr(prefix.size());
  if (digits.size() > 9 || !strings::isDigits(digits)) return std::nullopt;
  unsigned value = 0;
  std::from_chars(digits.data(), digits.data() + digits.size(), value);
  return value;
}

/// The numbers N of the entries `<prefix>N` of `folder`, ascending; empty when it does not exist.
std::vector<unsigned> numberedEntries(const fs::path& folder, std::string_view prefix) {
  std::vector<unsigned> numbers;
  std::error_code error;
  for (fs::directory_iterator it(folder, error), end; !error && it != end; it.increment(error)) {
    if (const auto number = numberAfter(it->path().filename().string(), prefix)) {
      numbers.push_back(*number);
    }
  }
  std::sort(numbers.begin(), numbers.end());
  return numbers;
}

/// A sysfs attribute holding one number ("0x8086\n", "34359738368\n"), read with base 0 (hex
/// with 0x). nullopt when absent or not a number.
std::optional<std::uint64_t> readNumber(const fs::path& path) {
  const auto text = discovery::readSmallFile(path);
  if (!text) return std::nullopt;
  const std::string value(strings::trim(*text));
  if (value.empty() || value.front() == '-' || value.front() == '+') return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const unsigned long long number = std::strtoull(value.c_str(), &end, 0);
  if (errno != 0 || end == value.c_str() || *end != '\0') return std::nullopt;
  return number;
}

/// The card's PCI address: the name of the folder its `device` link resolves to, else the
/// PCI_SLOT_NAME of `device/uevent`.
std::optional<PciAddress> cardAddress(const fs::path& card) {
  std::error_code error;
  const fs::path target = fs::read_symlink(card / "device", error);
  if (!error) {
    if (auto address = parsePciAddress(target.filename().string())) return address;
  }
  if (const auto uevent = discovery::readSmallFile(card / "device" / "uevent")) {
    for (std::string_view line : strings::split(*uevent, '\n')) {
      constexpr std::string_view kSlot = "PCI_SLOT_NAME=";
      if (line.starts_with(kSlot)) return parsePciAddress(strings::trim(line.substr(kSlot.size())));
    }
  }
  return std::nullopt;
}

}  // namespace

std::string PciAddress::nvmlForm() const {
  char text[32];
  std::snprintf(text, sizeof text, "%08X:%02X:%02X.%X", domain, bus, device, function);
  return text;
}

std::optional<PciAddress> parsePciAddress(std::string_view text) noexcept {
  // DDDD:BB:DD.F
  const std::size_t firstColon = text.find(':');
  if (firstColon == std::string_view::npos) return std::nullopt;
  const std::size_t secondColon = text.find(':', firstColon + 1);
  const std::size_t dot = text.find('.', firstColon + 1);
  if (secondColon == std::string_view::npos || dot == std::string_view::npos || dot < secondColon) {
    return std::nullopt;
  }
  const std::string_view domainText = text.substr(0, firstColon);
  if (domainText.size() < 4) return std::nullopt;
  const auto domain = hexField(domainText, 8);
  const auto bus = hexField(text.substr(firstColon + 1, secondColon - firstColon - 1), 2);
  const auto device = hexField(text.substr(secondColon + 1, dot - secondColon - 1), 2);
  const auto function = hexField(text.substr(dot + 1), 1);
  if (!domain || !bus || !device || !function) return std::nullopt;
  if (text.substr(firstColon + 1, secondColon - firstColon - 1).size() != 2 ||
      text.substr(secondColon + 1, dot - secondColon - 1).size() != 2 || *device > 0x1f ||
      *function > 7) {
    return std::nullopt;
  }
  return PciAddress{*domain, *bus, *device, *function};
}

std::string IntelCard::recordName() const { return "intel:" + address.nvmlForm(); }

std::string IntelCard::tileRecordName(unsigned tile) const {
  if (!multiTile()) return recordName();
  return recordName() + "/" + std::to_string(tile);
}

std::string IntelCard::describe() const {
  if (cardNumber) return "card " + std::to_string(*cardNumber) + " (" + address.nvmlForm() + ")";
  return "GPU " + address.nvmlForm();
}

std::vector<IntelCard> readDrmCards(const fs::path& sysfsRoot) {
  const fs::path drm = sysfsRoot / "class" / "drm";
  std::vector<IntelCard> cards;
  for (const unsigned number : numberedEntries(drm, "card")) {
    const fs::path card = drm / ("card" + std::to_string(number));
    // A DRM device that is no PCI device (vkms, simpledrm) has no vendor: not an Intel GPU.
    const auto vendor = readNumber(card / "device" / "vendor");
    if (!vendor || *vendor != kIntelVendor) continue;

    IntelCard found;
    found.cardNumber = number;
    const auto address = cardAddress(card);
    if (!address) {
      throw discovery::DiscoveryError(
          "cannot read the PCI bus id of Intel GPU card" + std::to_string(number),
          {"looked at the target of " + (card / "device").string() + " and PCI_SLOT_NAME in " +
           (card / "device" / "uevent").string()});
    }
    found.address = *address;
    if (const auto deviceId = readNumber(card / "device" / "device");
        deviceId && *deviceId <= 0xffff) {
      found.deviceId = static_cast<std::uint32_t>(*deviceId);
    }
    std::error_code error;
    const fs::path driver = fs::read_symlink(card / "device" / "driver", error);
    if (!error) found.driver = driver.filename().string();

    // xe: device/tile<T>; i915: card<N>/gt/gt<T>. Either may list none (an older i915).
    std::vector<unsigned> tiles = numberedEntries(card / "device", "tile");
    const bool xeTiles = !tiles.empty();
    if (!xeTiles) tiles = numberedEntries(card / "gt", "gt");
    if (found.address.isIntegrated() || tiles.size() <= 1) {
      found.tiles = 1;
    } else {
      found.tiles = static_cast<unsigned>(tiles.size());
    }
    if (xeTiles) {
      for (unsigned t = 0; t < found.tiles; ++t) {
        found.tileMemoryBytes.push_back(readNumber(
            card / "device" / ("tile" + std::to_string(tiles[t])) / "physical_vram_size_bytes"));
      }
    } else {
      found.tileMemoryBytes.assign(found.tiles, std::nullopt);
    }

    const std::vector<unsigned> renderNodes = numberedEntries(card / "device" / "drm", "renderD");
    if (!renderNodes.empty()) found.renderMinor = renderNodes.front();
    cards.push_back(std::move(found));
  }
  return cards;
}

std::vector<IntelCard> levelZeroOrder(std::vector<IntelCard> cards, bool pciOrder) {
  std::stable_sort(cards.begin(), cards.end(), [pciOrder](const IntelCard& a, const IntelCard& b) {
    if (!pciOrder && a.address.isIntegrated() != b.address.isIntegrated()) {
      return b.address.isIntegrated();
    }
    return a.address < b.address;
  });
  return cards;
}

bool pciOrderRequested(const char* value) noexcept {
  if (value == nullptr) return false;
  return std::strtoll(value, nullptr, 10) != 0;
}

}  // namespace flink::intel
