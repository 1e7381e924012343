// The health file's line format and its reading and writing through CoordinationFile (see
// HealthRecords.h).
#include "host/health/HealthRecords.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <utility>

#include "host/coordination/CoordinationFile.h"
#include "host/coordination/Siblings.h"
#include "process/FileDescriptor.h"
#include "util/Strings.h"

namespace flink::health {
namespace {

constexpr const char* kHeader =
    "# flink-gpu health records: drained and unhealthy GPUs (see flink-gpu's docs/operating.md)";

/// What the file holds, in every message about it.
constexpr const char* kWhat = "health records";

/// How many times a change is planned again when someone replaced the file while we had it.
constexpr int kAttempts = 5;

std::string encode(std::string_view value) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f || c == '%') {
      out += '%';
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    } else {
      out += c;
    }
  }
  return out;
}

int hexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

std::optional<std::string> decode(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (std::size_t i = 0; i < value.size(); ++i) {
    if (value[i] != '%') {
      out += value[i];
      continue;
    }
    if (i + 2 >= value.size()) return std::nullopt;
    const int high = hexDigit(value[i + 1]);
    const int low = hexDigit(value[i + 2]);
    if (high < 0 || low < 0) return std::nullopt;
    out += static_cast<char>(high * 16 + low);
    i += 2;
  }
  return out;
}

template <typename T>
std::optional<T> number(std::string_view text) {
  T value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

std::optional<HealthRecord> parseLine(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t start = 0;
  while (start <= line.size()) {
    const std::size_t tab = line.find('\t', start);
    const std::size_t end = tab == std::string_view::npos ? line.size() : tab;
    fields.push_back(line.substr(start, end - start));
    start = end + 1;
  }
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
    const std::size_t equals = field.find('=');
    if (equals == std::string_view::npos || equals == 0) return std::nullopt;
    const std::string_view key = field.substr(0, equals);
    const std::optional<std::string> value = decode(field.substr(equals + 1));
    if (!value) return std::nullopt;
    if (key == "gpu") {
      record.gpu = *value;
    } else if (key == "uuid") {
      record.uuid = *value;
    } else if (key == "since") {
      const auto since = number<std::int64_t>(*value);
      if (!since) return std::nullopt;
      record.since = *since;
      haveSince = true;
    } else if (key == "uid") {
      const auto uid = number<uid_t>(*value);
      if (!uid) return std::nullopt;
      record.uid = *uid;
    } else if (key == "xid") {
      const auto xid = number<std::uint64_t>(*value);
      if (!xid) return std::nullopt;
      record.xid = *xid;
    } else if (key == "source") {
      record.source = *value;
    } else if (key == "reason") {
      record.reason = *value;
    } else {
      record.extra.emplace_back(field);
    }
  }
  if (record.gpu.empty() || !haveSince) return std::nullopt;
  return record;
}

HealthFile fileOf(const std::filesystem::path& path, const coordination::CoordinationFile& file) {
  HealthFile health;
  health.path = path;
  health.exists = file.exists();
  health.parsed = parseHealth(file.text());
  health.notes = file.notes();
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

std::filesystem::path healthPathOf(const std::filesystem::path& coordinationFile) {
  std::filesystem::path path = coordinationFile;
  path += ".health";
  return path;
}

std::string formatHealthRecord(const HealthRecord& record) {
  std::string line(kindName(record.kind));
  const auto add = [&line](std::string_view key, std::string_view value) {
    line += '\t';
    line += key;
    line += '=';
    line += encode(value);
  };
  add("gpu", record.gpu);
  if (record.uuid) add("uuid", *record.uuid);
  add("since", std::to_string(record.since));
  if (record.uid) add("uid", std::to_string(*record.uid));
  if (record.xid) add("xid", std::to_string(*record.xid));
  if (record.source) add("source", *record.source);
  if (!record.reason.empty()) add("reason", record.reason);
  for (const std::string& extra : record.extra) line += '\t' + extra;
  return line;
}

ParsedHealth parseHealth(std::string_view text) {
  ParsedHealth parsed;
  std::size_t lineNumber = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t newline = text.find('\n', start);
    const std::size_t end = newline == std::string_view::npos ? text.size() : newline;
    const std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++lineNumber;
    if (strings::trim(line).empty() || line.front() == '#') continue;
    if (std::optional<HealthRecord> record = parseLine(line)) {
      parsed.records.push_back(std::move(*record));
    } else {
      parsed.junk.push_back({lineNumber, std::string(line)});
    }
  }
  return parsed;
}

std::string formatHealth(const ParsedHealth& health) {
  if (health.records.empty() && health.junk.empty()) return "";
  std::string text = std::string(kHeader) + '\n';
  for (const HealthRecord& record : health.records) text += formatHealthRecord(record) + '\n';
  for (const coordination::JunkLine& junk : health.junk) text += junk.text + '\n';
  return text;
}

HealthFile readHealth(const std::filesystem::path& coordinationFile) {
  const std::filesystem::path path = healthPathOf(coordinationFile);
  // Without waiting on its lock: anyone who may read the file may hold that lock.
  const coordination::CoordinationFile file = coordination::CoordinationFile::openSibling(
      path, kWhat, coordination::SiblingTrust::ofPath(coordinationFile),
      coordination::CoordinationFile::Access::kSnapshot, coordination::kDefaultLockTimeout);
  return fileOf(path, file);
}

namespace {

/// Takes the health records' writers' lock, `<coordination file>.health.lock`: a file that only
/// those who may write the records can open (and so lock), never written. Readers take no lock
/// at all (readHealth), so a reader can stall neither the writers nor the allocators.
/// @throws coordination::CoordinationError naming the lock and the cause.
process::FileDescriptor lockWriters(const std::filesystem::path& coordinationFile,
                                    const coordination::SiblingTrust& trust) {
  std::filesystem::path path = healthPathOf(coordinationFile);
  path += ".lock";
  const std::string what =
      std::string(kWhat) + " " + healthPathOf(coordinationFile).string() + ": their writers' lock";
  coordination::OpenedSibling opened;
  for (int attempt = 0; attempt < 16; ++attempt) {
    opened = coordination::openSiblingAt(AT_FDCWD, path, O_RDONLY);
    if (opened.fd || opened.error != ENOENT) break;
    process::FileDescriptor made = coordination::createSiblingAt(
        AT_FDCWD, path, O_RDONLY, trust, coordination::SiblingReaders::kWritersOnly);
    if (!made && errno == EEXIST) continue;
    if (!made) {
      throw coordination::CoordinationError(what + " " + path.string() +
                                            ": cannot create it: " + std::strerror(errno));
    }
    opened.fd = std::move(made);
    if (::fstat(opened.fd.get(), &opened.info) != 0) opened.error = errno;
    break;
  }
  if (!opened.fd) {
    throw coordination::CoordinationError(
        what + " " + path.string() + ": " +
        (opened.error == ELOOP ? std::string("refusing to use it: it is a symbolic link")
                               : "cannot open it: " + std::string(std::strerror(opened.error))));
  }
  coordination::checkSibling(what, path, opened.info, trust, coordination::SiblingKind::kFile);
  const auto deadline = std::chrono::steady_clock::now() + coordination::kDefaultLockTimeout;
  while (::flock(opened.fd.get(), LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    if (error == EINTR) continue;
    if (error != EWOULDBLOCK || std::chrono::steady_clock::now() >= deadline) {
      const std::optional<pid_t> holder = coordination::flockHolder(path);
      throw coordination::CoordinationError(
          what + " " + path.string() + ": " +
          (error == EWOULDBLOCK
               ? "still held by " +
                     (holder ? "process " + std::to_string(*holder)
                             : std::string("another process")) +
                     " after " + std::to_string(coordination::kDefaultLockTimeout.count()) + " ms"
               : "cannot lock it: " + std::string(std::strerror(error))));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return std::move(opened.fd);
}

}  // namespace

HealthFile updateHealth(const std::filesystem::path& coordinationFile,
                        const std::function<void(std::vector<HealthRecord>&)>& change) {
  const std::filesystem::path path = healthPathOf(coordinationFile);
  const coordination::SiblingTrust trust = coordination::SiblingTrust::ofPath(coordinationFile);
  const process::FileDescriptor writers = lockWriters(coordinationFile, trust);
  for (int attempt = 1;; ++attempt) {
    coordination::CoordinationFile file = coordination::CoordinationFile::openSibling(
        path, kWhat, trust, coordination::CoordinationFile::Access::kWriteUnlocked,
        coordination::kDefaultLockTimeout);
    HealthFile health = fileOf(path, file);
    change(health.parsed.records);
    file.replace(formatHealth(health.parsed));
    if (!file.interfered() || attempt == kAttempts) {
      health.exists = true;
      return health;
    }
  }
}

namespace {

/// How a person may write a unit in a record by hand, made one: an index without leading zeros
/// ("01" is GPU 1), a UUID in lower case (NVML's; "GPU-8932F937…" is the same GPU).
std::string canonicalUnit(std::string_view unit) {
  if (!unit.empty() &&
      std::all_of(unit.begin(), unit.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    const std::size_t first = unit.find_first_not_of('0');
    return std::string(first == std::string_view::npos ? unit.substr(unit.size() - 1)
                                                       : unit.substr(first));
  }
  return strings::toLower(unit);
}

}  // namespace

bool names(const HealthRecord& record, std::string_view gpu,
           const std::optional<std::string>& uuid) {
  const std::string recorded = canonicalUnit(record.gpu);
  const std::string unit = canonicalUnit(gpu);
  const std::optional<std::string> recordedUuid =
      record.uuid ? std::optional<std::string>(canonicalUnit(*record.uuid)) : std::nullopt;
  const std::optional<std::string> unitUuid =
      uuid ? std::optional<std::string>(canonicalUnit(*uuid)) : std::nullopt;
  const bool mig = recorded.starts_with("mig-");
  if (recorded == unit) {
    // The same index on another numbering is another GPU: the UUIDs decide where both say.
    return !(recordedUuid && unitUuid && !unit.starts_with("mig-") && *recordedUuid != *unitUuid);
  }
  if (unitUuid && (recorded == *unitUuid || (recordedUuid && *recordedUuid == *unitUuid))) {
    return !mig;
  }
  return false;
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
