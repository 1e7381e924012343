// The line format and the reading and writing of the records files beside the coordination file
// (see RecordFile.h).
#include "host/store/RecordFile.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include "host/enumeration/DeviceIdentifiers.h"
#include "host/store/LockWait.h"
#include "host/store/LockedFile.h"
#include "host/store/Siblings.h"
#include "host/store/StoreError.h"
#include "process/FileDescriptor.h"
#include "util/FileOwnership.h"
#include "util/Strings.h"

namespace flink::store {
namespace {

/// How many times a change is planned again when someone replaced the file while we had it.
constexpr int kAttempts = 5;

int hexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

std::vector<std::string> describeJunk(const std::vector<JunkLine>& junk, const std::string& file,
                                      const std::string& what, const std::string& repair,
                                      std::size_t shown) {
  std::vector<std::string> lines;
  for (std::size_t i = 0; i < junk.size() && i < shown; ++i) {
    lines.push_back("ignoring line " + std::to_string(junk[i].lineNumber) + " of " +
                    strings::quoteForMessage(file, std::string::npos) + ", which is not a " + what +
                    ": '" + strings::quoteForMessage(junk[i].text) + "'");
  }
  if (junk.size() > shown) {
    lines.push_back("... and " + std::to_string(junk.size() - shown) + " more lines of " +
                    strings::quoteForMessage(file, std::string::npos) + " that are not " + what +
                    "s (" + repair + ")");
  }
  return lines;
}

std::string encodeFieldValue(std::string_view value) {
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

std::optional<std::string> decodeFieldValue(std::string_view value) {
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

std::vector<std::string_view> splitFields(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t start = 0;
  while (start <= line.size()) {
    const std::size_t tab = line.find('\t', start);
    const std::size_t end = tab == std::string_view::npos ? line.size() : tab;
    fields.push_back(line.substr(start, end - start));
    start = end + 1;
  }
  return fields;
}

std::optional<Field> parseField(std::string_view field) {
  const std::size_t equals = field.find('=');
  if (equals == std::string_view::npos || equals == 0) return std::nullopt;
  std::optional<std::string> value = decodeFieldValue(field.substr(equals + 1));
  if (!value) return std::nullopt;
  return Field{field.substr(0, equals), std::move(*value)};
}

void appendField(std::string& line, std::string_view key, std::string_view value) {
  line += '\t';
  line += key;
  line += '=';
  line += encodeFieldValue(value);
}

void forEachRecordLine(std::string_view text,
                       const std::function<bool(std::string_view line)>& line,
                       std::vector<JunkLine>& junk) {
  std::size_t lineNumber = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t newline = text.find('\n', start);
    const std::size_t end = newline == std::string_view::npos ? text.size() : newline;
    const std::string_view current = text.substr(start, end - start);
    start = end + 1;
    ++lineNumber;
    if (strings::trim(current).empty() || current.front() == '#') continue;
    if (!line(current)) junk.push_back({lineNumber, std::string(current)});
  }
}

bool isRecordedGpu(std::string_view value) noexcept { return device::isDeviceIdentifier(value); }

bool isRecordedUuid(std::string_view value) noexcept {
  return device::isUuid(value) && device::isDeviceIdentifier(value);
}

bool isRecordedPath(std::string_view value) noexcept {
  return value.starts_with('/') && std::none_of(value.begin(), value.end(), [](char c) {
           const auto byte = static_cast<unsigned char>(c);
           return byte < 0x20 || byte == 0x7f;
         });
}

namespace {

SiblingRecordsText textOf(const std::filesystem::path& path, const LockedFile& file) {
  SiblingRecordsText read;
  read.path = path;
  read.exists = file.exists();
  read.text = file.text();
  read.notes = file.notes();
  read.warnings = file.warnings();
  return read;
}

/// Takes the writers' lock of the records file `path`, `<path>.lock`: a file that only those who
/// may write the records can open (and so lock), never written. Readers take no lock at all
/// (RecordFile::read), so a reader can stall neither the writers nor the allocators. One that
/// fails the trust rules is moved aside where this process may (`warnings`), else refused.
/// @throws StoreError naming the lock and the cause.
process::FileDescriptor lockWriters(const std::filesystem::path& path, const std::string& what,
                                    const SiblingTrust& trust, std::vector<std::string>& warnings) {
  std::filesystem::path lock = path;
  lock += ".lock";
  const std::string whose = what + " " + path.string() + ": their writers' lock";
  OpenedSibling opened = openAdmittedSibling(whose, lock, O_RDONLY, trust, warnings,
                                             /*create=*/true, SiblingReaders::kWritersOnly);
  if (!opened.fd) {
    throw StoreError(StoreError::causeOf(opened.error),
                     whose + " " + lock.string() +
                         ": cannot open it: " + files::whyCannotOpen(lock, opened.error));
  }
  const auto deadline = std::chrono::steady_clock::now() + kDefaultLockTimeout;
  LockWait wait(lock, [&lock] { return flockHolder(lock); });
  while (::flock(opened.fd.get(), LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    if (error == EINTR) continue;
    if (error != EWOULDBLOCK || std::chrono::steady_clock::now() >= deadline) {
      const std::optional<pid_t> holder = flockHolder(lock);
      throw StoreError(
          error == EWOULDBLOCK ? StoreError::Cause::kLocked : StoreError::causeOf(error),
          whose + " " + lock.string() + ": " +
              (error == EWOULDBLOCK
                   ? "still held by " +
                         (holder ? "process " + std::to_string(*holder)
                                 : std::string("another process")) +
                         " after " + std::to_string(kDefaultLockTimeout.count()) + " ms"
                   : "cannot lock it: " + std::string(std::strerror(error))));
    }
    wait.stillWaiting();
    wait.pause(deadline);
  }
  wait.acquired();
  return std::move(opened.fd);
}

}  // namespace

namespace {

/// "uid 1000, alice"; "uid 4242" for a user the name service does not know.
std::string describeUser(uid_t user) {
  const std::string name = files::userName(user);
  const std::string uid = "uid " + std::to_string(user);
  return name == uid ? uid : uid + ", " + name;
}

}  // namespace

void refuseWriterWhoMayNotWrite(const std::filesystem::path& file, const std::string& what) {
  struct stat info {};
  // No coordination file yet: what is made beside it is this user's (Siblings.h, unanchored).
  if (::lstat(file.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) return;
  const uid_t user = ::geteuid();
  if (SiblingTrust::of(info).thisProcessMayWrite()) return;
  const std::string shown = strings::quoteForMessage(file.string());
  throw StoreError(
      StoreError::Cause::kAccessDenied,
      "refusing to write the " + what + " beside coordination file " + shown + ": this user (" +
          describeUser(user) + ") may not write the coordination file (" + describeOwnership(info) +
          "), so every worker would refuse what it wrote there; run this as root or as "
          "the file's owner, or give the workers a group that may write it (`chgrp "
          "GROUP " +
          shown + " && chmod g+rw " + shown + "`)");
}

RecordFile::RecordFile(std::filesystem::path coordinationFile, std::string suffix, std::string what,
                       std::string record, std::string repair)
    : coordinationFile_(std::move(coordinationFile)),
      suffix_(std::move(suffix)),
      what_(std::move(what)),
      record_(std::move(record)),
      repair_(std::move(repair)) {}

std::filesystem::path RecordFile::path() const {
  std::filesystem::path path = coordinationFile_;
  path += suffix_;
  return path;
}

SiblingRecordsText RecordFile::read() const {
  const std::filesystem::path file = path();
  // Without waiting on its lock: anyone who may read the file may hold that lock.
  const LockedFile opened =
      LockedFile::openSibling(file, what_, SiblingTrust::ofPath(coordinationFile_),
                              LockedFile::Access::kSnapshot, kDefaultLockTimeout);
  return textOf(file, opened);
}

SiblingRecordsText RecordFile::update(
    const std::function<std::string(const std::string&)>& change) const {
  refuseWriterWhoMayNotWrite(coordinationFile_, what_);
  const std::filesystem::path file = path();
  const SiblingTrust trust = SiblingTrust::ofPath(coordinationFile_);
  std::vector<std::string> warnings;
  const process::FileDescriptor writers = lockWriters(file, what_, trust, warnings);
  // Dropped before the descriptor closes, as LockedFile's lock is: a child of fork() has a copy,
  // which would keep every writer waiting until it exits or execs.
  const process::FlockGuard dropLock(writers.get());
  for (int attempt = 1;; ++attempt) {
    LockedFile opened = LockedFile::openSibling(
        file, what_, trust, LockedFile::Access::kWriteUnlocked, kDefaultLockTimeout);
    SiblingRecordsText read = textOf(file, opened);
    read.warnings.insert(read.warnings.begin(), warnings.begin(), warnings.end());
    read.text = change(opened.text());
    // A change that changes nothing writes nothing.
    if (read.text == opened.text()) {
      read.exists = true;
      return read;
    }
    opened.replace(read.text);
    if (!opened.interfered() || attempt == kAttempts) {
      read.exists = true;
      return read;
    }
  }
}

std::vector<std::string> RecordFile::describeJunk(const std::vector<JunkLine>& junk) const {
  return store::describeJunk(junk, path().string(), record_, repair_);
}

}  // namespace flink::store
