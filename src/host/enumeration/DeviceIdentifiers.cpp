#include "host/enumeration/DeviceIdentifiers.h"

#include <algorithm>
#include <cctype>
#include <cstddef>

namespace flink::device {
namespace {

constexpr std::size_t kMaxIndexDigits = 9;

bool isDigit(char c) noexcept { return c >= '0' && c <= '9'; }

bool isHex(char c) noexcept { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

bool isDigits(std::string_view text) noexcept {
  return !text.empty() && std::all_of(text.begin(), text.end(), isDigit);
}

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
         isDigits(text.substr(first + 1, second - first - 1)) && isDigits(text.substr(second + 1));
}

}  // namespace

bool isDeviceIdentifier(std::string_view text) noexcept {
  if (isDigits(text)) return text.size() <= kMaxIndexDigits;
  if (text.starts_with("GPU-")) return isUuidBody(text.substr(4));
  // Drivers before R470: MIG-GPU-<gpu uuid>/<gpu instance id>/<compute instance id>.
  if (text.starts_with("MIG-GPU-")) return isOldMigBody(text.substr(8));
  if (text.starts_with("MIG-")) return isUuidBody(text.substr(4));
  return false;
}

bool isCanonicalDeviceIdentifier(std::string_view identifier) noexcept {
  if (isDigits(identifier)) return identifier.size() == 1 || identifier.front() != '0';
  return std::none_of(identifier.begin(), identifier.end(),
                      [](char c) { return c >= 'A' && c <= 'F'; });
}

std::string canonicalDeviceIdentifier(std::string_view identifier) {
  if (!isDigits(identifier)) {
    // Hex digits in lower case, as NVML and nvidia-smi write them; no letter of the prefixes
    // ("GPU-", "MIG-", "MIG-GPU-") is one.
    std::string canonical(identifier);
    for (char& c : canonical) {
      if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
    }
    return canonical;
  }
  const std::size_t firstNonZero = identifier.find_first_not_of('0');
  return firstNonZero == std::string_view::npos ? "0"
                                                : std::string(identifier.substr(firstNonZero));
}

}  // namespace flink::device
