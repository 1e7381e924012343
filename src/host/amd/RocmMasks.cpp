#include "host/amd/RocmMasks.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "util/Strings.h"

namespace flink::amd {

namespace {

std::string upper(std::string_view text) {
  std::string result(text);
  for (char& c : result) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return result;
}

std::string quoted(std::string_view entry, std::size_t position) {
  return "'" + strings::quoteForMessage(entry) + "' (entry " + std::to_string(position + 1) + ")";
}

/// The units whose UUID starts with `prefix` (upper case already).
std::vector<std::size_t> unitsWithUuidPrefix(const std::string& prefix,
                                             const std::vector<std::optional<std::string>>& uuids,
                                             bool whole) {
  std::vector<std::size_t> matches;
  for (std::size_t i = 0; i < uuids.size(); ++i) {
    if (!uuids[i]) continue;
    const std::string uuid = upper(*uuids[i]);
    if (whole ? uuid == prefix : uuid.starts_with(prefix)) matches.push_back(i);
  }
  return matches;
}

/// ROCr's index form: strtol base 0, the whole entry, not negative.
std::optional<std::size_t> rocrIndex(const std::string& entry) {
  if (entry.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long value = std::strtol(entry.c_str(), &end, 0);
  if (errno != 0 || end == entry.c_str() || *end != '\0' || value < 0) return std::nullopt;
  return static_cast<std::size_t>(value);
}

/// HIP's index form: decimal digits, no sign, no leading zero.
std::optional<std::size_t> hipIndex(std::string_view entry) {
  if (entry.empty() || entry.size() > 9) return std::nullopt;
  if (!std::all_of(entry.begin(), entry.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  if (entry.size() > 1 && entry.front() == '0') return std::nullopt;
  return static_cast<std::size_t>(std::strtoul(std::string(entry).c_str(), nullptr, 10));
}

/// Adds `unit` for `entry`; false (with the reason in `reading.stop`) when it is named already.
bool take(MaskReading& reading, std::size_t unit, std::string_view entry, std::size_t position) {
  if (std::find(reading.chosen.begin(), reading.chosen.end(), unit) != reading.chosen.end()) {
    reading.stop = quoted(entry, position) + " names a GPU named already";
    return false;
  }
  reading.chosen.push_back(unit);
  reading.spelled.emplace_back(entry);
  return true;
}

}  // namespace

MaskReading readRocrVisibleDevices(std::string_view value,
                                   const std::vector<std::optional<std::string>>& uuids) {
  MaskReading reading;
  if (value.empty()) {
    reading.stop = "it is set and empty, which hides every GPU";
    return reading;
  }
  const std::vector<std::string_view> entries = strings::split(value, ',');
  for (std::size_t position = 0; position < entries.size(); ++position) {
    const std::string_view entry = strings::trim(entries[position]);
    const std::string wanted = upper(entry);
    if (wanted.starts_with("GPU-")) {
      if (wanted.size() < 5 || wanted.size() > 20) {
        reading.stop = quoted(entry, position) + " is no UUID or UUID prefix of 5 to 20 characters";
        return reading;
      }
      const std::vector<std::size_t> matches = unitsWithUuidPrefix(wanted, uuids, /*whole=*/false);
      if (matches.empty()) {
        reading.stop = quoted(entry, position) + " names no usable GPU";
        return reading;
      }
      if (matches.size() > 1) {
        reading.stop = quoted(entry, position) + " names " + std::to_string(matches.size()) +
                       " units (the partitions of one GPU share its UUID)";
        return reading;
      }
      if (!take(reading, matches.front(), entry, position)) return reading;
      continue;
    }
    const std::optional<std::size_t> index = rocrIndex(wanted);
    if (!index) {
      reading.stop = quoted(entry, position) + " is neither a GPU index nor a GPU-… UUID";
      return reading;
    }
    if (*index >= uuids.size()) {
      reading.stop = quoted(entry, position) + " names no usable GPU (there are " +
                     std::to_string(uuids.size()) + ")";
      return reading;
    }
    if (!take(reading, *index, entry, position)) return reading;
  }
  return reading;
}

MaskReading readHipVisibleDevices(std::string_view value,
                                  const std::vector<std::optional<std::string>>& uuids) {
  MaskReading reading;
  const std::vector<std::string_view> entries = strings::split(value, ',');
  for (std::size_t position = 0; position < entries.size(); ++position) {
    const std::string_view entry = entries[position];
    const std::string wanted = upper(entry);
    if (wanted.starts_with("GPU-")) {
      const std::vector<std::size_t> matches = unitsWithUuidPrefix(wanted, uuids, /*whole=*/true);
      if (matches.size() != 1) {
        reading.stop = quoted(entry, position) + (matches.empty()
                                                      ? " names no GPU that ROCr left"
                                                      : " names " + std::to_string(matches.size()) +
                                                            " units (the partitions of one GPU "
                                                            "share its UUID)");
        return reading;
      }
      if (!take(reading, matches.front(), entry, position)) return reading;
      continue;
    }
    const std::optional<std::size_t> index = hipIndex(entry);
    if (!index) {
      reading.stop = quoted(entry, position) + " is neither a GPU index nor a GPU-… UUID";
      return reading;
    }
    if (*index >= uuids.size()) {
      reading.stop = quoted(entry, position) + " names no GPU that ROCr left (there are " +
                     std::to_string(uuids.size()) + ")";
      return reading;
    }
    if (!take(reading, *index, entry, position)) return reading;
  }
  return reading;
}

const char* hipMaskVariable(const std::function<const char*(const char*)>& getenv) {
  for (const char* name : {kHipVisibleDevices, kCudaVisibleDevices}) {
    const char* value = getenv(name);
    if (value != nullptr && *value != '\0') return name;
  }
  return nullptr;
}

}  // namespace flink::amd
