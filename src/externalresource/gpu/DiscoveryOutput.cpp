#include "externalresource/gpu/DiscoveryOutput.h"

#include <algorithm>
#include <cctype>
#include <unordered_set>

#include "flink/util/Exceptions.h"
#include "util/Strings.h"

namespace flink::externalresource::gpu {
namespace {

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

constexpr std::size_t kMaxIndexDigits = 9;

}  // namespace

std::string canonicalDeviceIdentifier(std::string_view identifier) {
  if (!isDigits(identifier)) return std::string(identifier);
  const std::size_t firstNonZero = identifier.find_first_not_of('0');
  return firstNonZero == std::string_view::npos ? "0"
                                                : std::string(identifier.substr(firstNonZero));
}

bool isDeviceIdentifier(std::string_view part) noexcept {
  if (isDigits(part)) return part.size() <= kMaxIndexDigits;
  if (part.starts_with("GPU-")) return isUuidBody(part.substr(4));
  if (part.starts_with("MIG-GPU-")) {
    // Drivers before R470: MIG-GPU-<gpu uuid>/<gpu instance id>/<compute instance id>.
    const auto parts = strings::split(part.substr(8), '/');
    return parts.size() == 3 && isUuidBody(parts[0]) && isDigits(parts[1]) && isDigits(parts[2]);
  }
  if (part.starts_with("MIG-")) return isUuidBody(part.substr(4));
  return false;
}

DiscoveryOutput parseDiscoveryOutput(std::string_view stdoutText) {
  // A script saved by a Windows editor may start with a UTF-8 byte order mark.
  if (stdoutText.starts_with("\xEF\xBB\xBF")) stdoutText.remove_prefix(3);
  const std::size_t newline = stdoutText.find('\n');
  const std::string_view firstLine = stdoutText.substr(0, newline);

  DiscoveryOutput output;
  if (newline != std::string_view::npos) {
    for (std::string_view line : strings::split(stdoutText.substr(newline + 1), '\n')) {
      if (!strings::isBlank(line)) ++output.ignoredLines;
    }
  }

  std::unordered_set<std::string> seen;
  for (std::string_view rawPart : strings::split(firstLine, ',')) {
    const std::string_view part = strings::trim(rawPart);
    if (part.empty()) continue;
    if (!isDeviceIdentifier(part)) {
      throw FlinkException("\"" + strings::quoteForMessage(strings::trim(firstLine)) +
                           "\", which is not a list of GPUs: \"" +
                           strings::quoteForMessage(part, 80) +
                           "\" is not a device index (a number of at most 9 digits) nor a "
                           "GPU-/MIG- UUID");
    }
    std::string identifier = canonicalDeviceIdentifier(part);
    if (seen.insert(identifier).second) {
      output.identifiers.push_back(std::move(identifier));
    } else if (std::find(output.duplicates.begin(), output.duplicates.end(), identifier) ==
               output.duplicates.end()) {
      output.duplicates.push_back(std::move(identifier));
    }
  }
  return output;
}

}  // namespace flink::externalresource::gpu
