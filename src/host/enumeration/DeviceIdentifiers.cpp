#include "host/enumeration/DeviceIdentifiers.h"

#include <algorithm>
#include <cctype>
#include <cstddef>

#include "util/Strings.h"

namespace flink::device {
namespace {

constexpr std::size_t kMaxIndexDigits = 9;

bool isHex(char c) noexcept { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

/// Hex digits and dashes, with at least one hex digit (UUIDs, and the prefixes CUDA accepts).
bool isUuidBody(std::string_view text) noexcept {
  return std::any_of(text.begin(), text.end(), isHex) &&
         std::all_of(text.begin(), text.end(), [](char c) { return isHex(c) || c == '-'; });
}

/// `<gpu uuid body>/<gpu instance id>/<compute instance id>`, the older MIG form after MIG-GPU-.
bool isOldMigBody(std::string_view text) noexcept {
  const std::size_t first = text.find('/');
  if (first == std::string_view::npos) return false;
  const std::size_t second = text.find('/', first + 1);
  if (second == std::string_view::npos) return false;
  return isUuidBody(text.substr(0, first)) &&
         strings::isDigits(text.substr(first + 1, second - first - 1)) &&
         strings::isDigits(text.substr(second + 1));
}

bool isHexDigits(std::string_view text, std::size_t size) noexcept {
  return text.size() == size && std::all_of(text.begin(), text.end(), isHex);
}

/// `<domain>:<bus>:<device>.<function>`: an 8- or 4-hex-digit domain, 2-digit bus and device, a
/// function of 0 to 7 (NVML's form, and the kernel's).
bool isPciBusId(std::string_view text) noexcept {
  const std::size_t colon = text.find(':');
  if (colon != 8 && colon != 4) return false;
  const std::string_view rest = text.substr(colon + 1);
  return isHexDigits(text.substr(0, colon), colon) && rest.size() == 7 &&
         isHexDigits(rest.substr(0, 2), 2) && rest[2] == ':' && isHexDigits(rest.substr(3, 2), 2) &&
         rest[5] == '.' && rest[6] >= '0' && rest[6] <= '7';
}

/// Level Zero's `<card>.<tile>`.
bool isTileIndex(std::string_view text) noexcept {
  const std::size_t dot = text.find('.');
  if (dot == std::string_view::npos) return false;
  const std::string_view card = text.substr(0, dot);
  const std::string_view tile = text.substr(dot + 1);
  return strings::isDigits(card) && strings::isDigits(tile) && card.size() <= kMaxIndexDigits &&
         tile.size() <= kMaxIndexDigits;
}

std::string canonicalIndex(std::string_view digits) {
  const std::size_t firstNonZero = digits.find_first_not_of('0');
  return firstNonZero == std::string_view::npos ? "0" : std::string(digits.substr(firstNonZero));
}

}  // namespace

bool isVendorUnitName(std::string_view text) noexcept {
  if (text.starts_with(kAmdRecordPrefix)) return isPciBusId(text.substr(4));
  if (!text.starts_with(kIntelRecordPrefix)) return false;
  text.remove_prefix(6);
  const std::size_t slash = text.find('/');
  if (slash == std::string_view::npos) return isPciBusId(text);
  const std::string_view tile = text.substr(slash + 1);
  return isPciBusId(text.substr(0, slash)) && strings::isDigits(tile) &&
         tile.size() <= kMaxIndexDigits;
}

bool isDeviceIdentifier(std::string_view text) noexcept {
  if (strings::isDigits(text)) return text.size() <= kMaxIndexDigits;
  if (isTileIndex(text)) return true;
  if (isVendorUnitName(text)) return true;
  if (text.starts_with("GPU-")) return isUuidBody(text.substr(4));
  // Drivers before R470: MIG-GPU-<gpu uuid>/<gpu instance id>/<compute instance id>.
  if (text.starts_with("MIG-GPU-")) return isOldMigBody(text.substr(8));
  if (text.starts_with("MIG-")) return isUuidBody(text.substr(4));
  return false;
}

bool isCanonicalDeviceIdentifier(std::string_view identifier) noexcept {
  if (strings::isDigits(identifier)) return identifier.size() == 1 || identifier.front() != '0';
  if (isTileIndex(identifier) || isVendorUnitName(identifier)) {
    return canonicalDeviceIdentifier(identifier) == identifier;
  }
  return std::none_of(identifier.begin(), identifier.end(),
                      [](char c) { return c >= 'A' && c <= 'F'; });
}

std::string canonicalDeviceIdentifier(std::string_view identifier) {
  if (isTileIndex(identifier)) {
    const std::size_t dot = identifier.find('.');
    return canonicalIndex(identifier.substr(0, dot)) + '.' +
           canonicalIndex(identifier.substr(dot + 1));
  }
  if (isVendorUnitName(identifier)) {
    // The bus id's hex digits in upper case, as NVML writes bus ids; the tile without zeros.
    // The domain in NVML's 8 digits, whichever width lspci or the kernel (4) wrote it in.
    const std::size_t colon = identifier.find(':');
    std::string canonical(identifier.substr(0, colon + 1));
    std::string_view rest = identifier.substr(colon + 1);
    if (rest.find(':') == 4) canonical += "0000";
    const std::size_t slash = rest.find('/');
    for (const char c : rest.substr(0, slash)) {
      canonical += (c >= 'a' && c <= 'f') ? static_cast<char>(c - 'a' + 'A') : c;
    }
    if (slash != std::string_view::npos) canonical += '/' + canonicalIndex(rest.substr(slash + 1));
    return canonical;
  }
  if (!strings::isDigits(identifier)) {
    // Hex digits in lower case, as NVML and nvidia-smi write them; no letter of the prefixes
    // ("GPU-", "MIG-", "MIG-GPU-") is one.
    std::string canonical(identifier);
    for (char& c : canonical) {
      if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
    }
    return canonical;
  }
  return canonicalIndex(identifier);
}

}  // namespace flink::device
