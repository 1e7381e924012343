#include "host/amd/RocmMasks.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>

#include "util/Strings.h"

namespace flink::amd {

namespace {

std::string quoted(std::string_view entry, std::size_t position) {
  return "'" + strings::quoteForMessage(entry) + "' (entry " + std::to_string(position + 1) + ")";
}

/// The units whose UUID starts with `prefix` (upper case already).
std::vector<std::size_t> unitsWithUuidPrefix(const std::string& prefix,
                                             const std::vector<std::optional<std::string>>& uuids) {
  std::vector<std::size_t> matches;
  for (std::size_t i = 0; i < uuids.size(); ++i) {
    if (uuids[i] && strings::toUpper(*uuids[i]).starts_with(prefix)) matches.push_back(i);
  }
  return matches;
}

/// Several matching units: "8 units (the partitions of one GPU share its UUID)" when they share
/// one UUID, else "2 GPUs", or "2 GPUs (9 units: the partitions of a GPU share its UUID)". A unit
/// without a UUID is a GPU of its own.
std::string describeMatches(const std::vector<std::size_t>& matches,
                            const std::vector<std::optional<std::string>>& uuids, bool* oneGpu) {
  std::vector<std::string> distinct;
  std::size_t withoutUuid = 0;
  for (const std::size_t unit : matches) {
    if (!uuids[unit]) {
      ++withoutUuid;
      continue;
    }
    const std::string key = strings::toUpper(*uuids[unit]);
    if (std::find(distinct.begin(), distinct.end(), key) == distinct.end()) distinct.push_back(key);
  }
  const std::size_t gpus = distinct.size() + withoutUuid;
  const std::string units = std::to_string(matches.size()) + " units";
  if (oneGpu != nullptr) *oneGpu = gpus == 1;
  if (gpus == 1) return units + " (the partitions of one GPU share its UUID)";
  const std::string described = std::to_string(gpus) + " GPUs";
  if (gpus == matches.size()) return described;
  return described + " (" + units + ": the partitions of a GPU share its UUID)";
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

/// HIP's index form (atoi's value spelled back as the entry): decimal digits, no sign, no leading
/// zero. SIZE_MAX for one past any list (more than 9 digits).
std::optional<std::size_t> hipIndex(std::string_view entry) {
  if (!strings::isDigits(entry)) return std::nullopt;
  if (entry.size() > 1 && entry.front() == '0') return std::nullopt;
  if (entry.size() > 9) return SIZE_MAX;
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
    const std::string wanted = strings::toUpper(entry);
    if (wanted.starts_with("GPU-")) {
      if (wanted.size() < 5 || wanted.size() > 20) {
        reading.stop = quoted(entry, position) + " is no UUID or UUID prefix of 5 to 20 characters";
        return reading;
      }
      const std::vector<std::size_t> matches = unitsWithUuidPrefix(wanted, uuids);
      if (matches.empty()) {
        reading.stop = quoted(entry, position) + " names no usable GPU";
        return reading;
      }
      if (matches.size() > 1) {
        bool oneGpu = false;
        const std::string described = describeMatches(matches, uuids, &oneGpu);
        reading.stop = quoted(entry, position) + (oneGpu ? " names " : " matches ") + described;
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
  std::vector<std::string_view> entries = strings::split(value, ',');
  // HIP's loop ends when the position after a comma reaches the end: a final comma adds nothing.
  if (entries.size() > 1 && entries.back().empty()) entries.pop_back();
  std::vector<std::size_t> chosenBy;  // the entry position that chose each of reading.chosen
  for (std::size_t position = 0; position < entries.size(); ++position) {
    const std::string_view entry = entries[position];
    std::size_t unit = 0;
    if (entry.find("GPU-") != std::string_view::npos) {
      std::vector<std::size_t> matches;
      bool otherCase = false;
      for (std::size_t i = 0; i < uuids.size(); ++i) {
        const std::string uuid = uuids[i].value_or(kRocrUuidOfNone);
        if (uuid.find(entry) != std::string::npos) matches.push_back(i);
        if (strings::toUpper(uuid).find(strings::toUpper(entry)) != std::string::npos)
          otherCase = true;
      }
      if (matches.empty()) {
        reading.stop = quoted(entry, position) + " names no GPU that ROCr left" +
                       (otherCase ? " (HIP compares UUIDs case-sensitively, and ROCr's are "
                                    "'GPU-' and lower-case hex digits)"
                                  : "");
        return reading;
      }
      unit = matches.front();
      if (matches.size() > 1) {
        reading.surprises.push_back(
            quoted(entry, position) + " matches " + describeMatches(matches, uuids, nullptr) +
            " that ROCr left, and HIP takes the first, index " + std::to_string(unit));
      }
    } else {
      const std::optional<std::size_t> index = hipIndex(entry);
      if (!index) {
        reading.stop = quoted(entry, position) + " is neither a GPU index nor a GPU-… UUID" +
                       (strings::toUpper(entry).find("GPU-") != std::string::npos
                            ? " (HIP looks for 'GPU-' in upper case)"
                            : "");
        return reading;
      }
      if (*index >= uuids.size()) {
        reading.stop = quoted(entry, position) + " names no GPU that ROCr left (there are " +
                       std::to_string(uuids.size()) + ")";
        return reading;
      }
      unit = *index;
    }
    const auto already = std::find(reading.chosen.begin(), reading.chosen.end(), unit);
    if (already != reading.chosen.end()) {
      const auto first = static_cast<std::size_t>(already - reading.chosen.begin());
      reading.surprises.push_back(quoted(entry, position) + " names the GPU that entry " +
                                  std::to_string(chosenBy[first] + 1) + " chose already ('" +
                                  strings::quoteForMessage(reading.spelled[first]) +
                                  "'), so HIP skips it and reads on");
      continue;
    }
    reading.chosen.push_back(unit);
    reading.spelled.emplace_back(entry);
    chosenBy.push_back(position);
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
