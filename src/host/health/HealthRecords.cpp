// The health file's line format and its reading and writing through store::LockedFile (see
// HealthRecords.h).
#include "host/health/HealthRecords.h"

#include <pwd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <string>
#include <utility>

#include "host/enumeration/UnitIndex.h"
#include "host/store/RecordFile.h"

namespace flink::health {
namespace {

constexpr const char* kHeader =
    "# flink-gpu health records: drained and unhealthy GPUs (see flink-gpu's docs/operating.md)";

/// What the file holds, in every message about it.
constexpr const char* kWhat = "health records";

/// `<coordination file>.health`.
constexpr std::string_view kSuffix = ".health";

std::optional<HealthRecord> parseLine(std::string_view line) {
  const std::vector<std::string_view> fields = store::splitFields(line);
  HealthRecord record;
  if (fields.front() == "drained") {
    record.kind = RecordKind::kDrained;
  } else if (fields.front() == "unhealthy") {
    record.kind = RecordKind::kUnhealthy;
  } else if (fields.front() == "readmitted") {
    record.kind = RecordKind::kReadmitted;
  } else {
    return std::nullopt;
  }
  bool haveSince = false;
  for (std::size_t i = 1; i < fields.size(); ++i) {
    const std::string_view field = fields[i];
    const std::optional<store::Field> parsed = store::parseField(field);
    if (!parsed) return std::nullopt;
    const std::string_view key = parsed->key;
    const std::string& value = parsed->value;
    if (key == "gpu") {
      // Each value as what it is, or the line is junk: none reaches a terminal or a GPU's name
      // unchecked (a percent-encoded escape sequence decodes to anything).
      if (!store::isRecordedGpu(value)) return std::nullopt;
      record.gpu = value;
    } else if (key == "uuid") {
      if (!store::isRecordedUuid(value)) return std::nullopt;
      record.uuid = value;
    } else if (key == "since") {
      const auto since = store::parseFieldNumber<std::int64_t>(value);
      if (!since) return std::nullopt;
      record.since = *since;
      haveSince = true;
    } else if (key == "uid") {
      const auto uid = store::parseFieldNumber<uid_t>(value);
      if (!uid) return std::nullopt;
      record.uid = *uid;
    } else if (key == "xid") {
      const auto xid = store::parseFieldNumber<std::uint64_t>(value);
      if (!xid) return std::nullopt;
      record.xid = *xid;
    } else if (key == "recovery_action") {
      const auto action = store::parseFieldNumber<unsigned>(value);
      if (!action) return std::nullopt;
      record.recoveryAction = *action;
    } else if (key == "source") {
      const bool word = !value.empty() && std::all_of(value.begin(), value.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || c == '-';
      });
      if (!word) return std::nullopt;
      record.source = value;
    } else if (key == "reason") {
      record.reason = value;
    } else {
      record.extra.emplace_back(field);
    }
  }
  if (record.gpu.empty() || !haveSince) return std::nullopt;
  return record;
}

HealthFile fileOf(store::SiblingRecordsText read) {
  HealthFile health;
  health.path = std::move(read.path);
  health.exists = read.exists;
  health.parsed = parseHealth(read.text);
  health.notes = std::move(read.notes);
  health.warnings = std::move(read.warnings);
  return health;
}

}  // namespace

std::string_view kindName(RecordKind kind) {
  switch (kind) {
    case RecordKind::kDrained:
      return "drained";
    case RecordKind::kUnhealthy:
      return "unhealthy";
    case RecordKind::kReadmitted:
      return "readmitted";
  }
  return "unknown";
}

store::RecordFile healthFileOf(const std::filesystem::path& coordinationFile) {
  return store::RecordFile(coordinationFile, std::string(kSuffix), kWhat, "health record",
                           "`flink-gpu undrain --gpu …` rewrites a GPU's lines; others are for "
                           "you to correct or remove");
}

std::filesystem::path healthPathOf(const std::filesystem::path& coordinationFile) {
  return healthFileOf(coordinationFile).path();
}

std::string formatHealthRecord(const HealthRecord& record) {
  std::string line(kindName(record.kind));
  const auto add = [&line](std::string_view key, std::string_view value) {
    store::appendField(line, key, value);
  };
  add("gpu", record.gpu);
  if (record.uuid) add("uuid", *record.uuid);
  add("since", std::to_string(record.since));
  if (record.uid) add("uid", std::to_string(*record.uid));
  if (record.xid) add("xid", std::to_string(*record.xid));
  if (record.recoveryAction) add("recovery_action", std::to_string(*record.recoveryAction));
  if (record.source) add("source", *record.source);
  if (!record.reason.empty()) add("reason", record.reason);
  for (const std::string& extra : record.extra) line += '\t' + extra;
  return line;
}

ParsedHealth parseHealth(std::string_view text) {
  auto parsed = store::parseSiblingRecords<HealthRecord>(text, parseLine);
  return ParsedHealth{std::move(parsed.records), std::move(parsed.junk)};
}

std::string formatHealth(const ParsedHealth& health) {
  return store::formatSiblingRecords(kHeader, health.records, health.junk, formatHealthRecord);
}

HealthFile readHealth(const std::filesystem::path& coordinationFile) {
  return fileOf(healthFileOf(coordinationFile).read());
}

HealthFile updateHealth(const std::filesystem::path& coordinationFile,
                        const std::function<void(std::vector<HealthRecord>&)>& change) {
  return fileOf(healthFileOf(coordinationFile).update([&change](const std::string& text) {
    ParsedHealth parsed = parseHealth(text);
    change(parsed.records);
    return formatHealth(parsed);
  }));
}

bool names(const HealthRecord& record, std::string_view gpu,
           const std::optional<std::string>& uuid) {
  return discovery::namesUnit(record.gpu, record.uuid, gpu, uuid);
}

std::int64_t nowSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string isoTime(std::int64_t secondsSinceEpoch) {
  const std::time_t time = static_cast<std::time_t>(secondsSinceEpoch);
  std::tm utc{};
  if (::gmtime_r(&time, &utc) == nullptr) return std::to_string(secondsSinceEpoch);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

std::string describeUid(uid_t uid) {
  struct passwd entry {};
  struct passwd* found = nullptr;
  char buffer[1024];
  if (::getpwuid_r(uid, &entry, buffer, sizeof buffer, &found) == 0 && found != nullptr) {
    return std::to_string(uid) + " (" + found->pw_name + ")";
  }
  return std::to_string(uid);
}

}  // namespace flink::health
