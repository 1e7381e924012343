// The allocation file exec gives its command (see AllocationFile.h).
#include "host/defaultdiscovery/AllocationFile.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "process/FileDescriptor.h"
#include "util/FileOwnership.h"

namespace flink::defaultdiscovery {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

/// The most a reader reads of an allocation file: far more than any host's units take.
constexpr std::size_t kMaxFileBytes = 1 << 20;

/// The folder's and the file's names.
constexpr const char* kFolderTemplate = "flink-gpu-exec.XXXXXX";
constexpr const char* kFileName = "allocation.json";
constexpr const char* kNestedFileTemplate = "allocation-XXXXXX.json";
constexpr int kNestedFileSuffixLength = 5;  // ".json"

template <typename T>
ordered_json orNull(const std::optional<T>& value) {
  return value ? ordered_json(*value) : ordered_json(nullptr);
}

/// `member` of `object` when it is there and not null; `ok` false when it is there but of
/// another type than `check` accepts.
template <typename T, typename Check>
std::optional<T> optionalMember(const nlohmann::json& object, const char* member, Check check,
                                bool& ok) {
  const auto found = object.find(member);
  if (found == object.end() || found->is_null()) return std::nullopt;
  if (!check(*found)) {
    ok = false;
    return std::nullopt;
  }
  return found->get<T>();
}

bool isText(const nlohmann::json& value) { return value.is_string(); }
bool isCount(const nlohmann::json& value) { return value.is_number_unsigned(); }
bool isSmallCount(const nlohmann::json& value) {
  return value.is_number_unsigned() &&
         value.get<std::uint64_t>() <= std::numeric_limits<unsigned>::max();
}

std::optional<AllocatedShare> parseShare(const nlohmann::json& json, bool& ok) {
  if (!json.is_object() || !json.contains("index") || !json.contains("count") ||
      !isSmallCount(json["index"]) || !isSmallCount(json["count"])) {
    ok = false;
    return std::nullopt;
  }
  AllocatedShare share;
  share.index = json["index"].get<unsigned>();
  share.count = json["count"].get<unsigned>();
  share.memoryMiB = optionalMember<std::uint64_t>(json, "memory_mib", isCount, ok);
  share.mpsPipeDirectory = optionalMember<std::string>(json, "mps_pipe_directory", isText, ok);
  share.mpsActiveThreadPercentage =
      optionalMember<unsigned>(json, "mps_active_thread_percentage", isSmallCount, ok);
  return share;
}

std::optional<AllocatedUnit> parseUnit(const nlohmann::json& json, bool& ok) {
  if (!json.is_object() || !json.contains("index") || !json["index"].is_string()) {
    ok = false;
    return std::nullopt;
  }
  AllocatedUnit unit;
  unit.index = json["index"].get<std::string>();
  unit.uuid = optionalMember<std::string>(json, "uuid", isText, ok);
  unit.pciBusId = optionalMember<std::string>(json, "pci.bus_id", isText, ok);
  unit.name = optionalMember<std::string>(json, "name", isText, ok);
  unit.memoryTotalMiB = optionalMember<std::uint64_t>(json, "memory.total", isCount, ok);
  if (const auto share = json.find("share"); share != json.end() && !share->is_null()) {
    unit.share = parseShare(*share, ok);
  }
  return unit;
}

/// Writes all of `text` to `fd`. @returns 0, else the errno.
int writeAll(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t written = ::write(fd, text.data(), text.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    text.remove_prefix(static_cast<std::size_t>(written));
  }
  return 0;
}

/// Writes `text` into the new file `fd` (mode 0600 whatever the umask) and closes it.
/// @returns 0, else the errno.
int fillAndClose(process::FileDescriptor fd, std::string_view text) {
  if (::fchmod(fd.get(), S_IRUSR | S_IWUSR) != 0) return errno;
  if (const int error = writeAll(fd.get(), text)) return error;
  // A close that fails may mean the data did not reach the file (NFS): the command must not read
  // half of it.
  if (::close(fd.release()) != 0) return errno;
  return 0;
}

}  // namespace

std::string allocationText(const Allocation& allocation) {
  ordered_json units = ordered_json::array();
  for (const AllocatedUnit& unit : allocation.units) {
    ordered_json members = {{"index", unit.index},
                            {"uuid", orNull(unit.uuid)},
                            {"pci.bus_id", orNull(unit.pciBusId)},
                            {"name", orNull(unit.name)},
                            {"memory.total", orNull(unit.memoryTotalMiB)}};
    if (unit.share) {
      members["share"] = {
          {"index", unit.share->index},
          {"count", unit.share->count},
          {"memory_mib", orNull(unit.share->memoryMiB)},
          {"mps_pipe_directory", orNull(unit.share->mpsPipeDirectory)},
          {"mps_active_thread_percentage", orNull(unit.share->mpsActiveThreadPercentage)}};
    }
    units.push_back(std::move(members));
  }
  const ordered_json file = {{"format", kAllocationFileFormat},
                             {"owner_pid", allocation.ownerPid},
                             {"units", std::move(units)},
                             {"cpus", orNull(allocation.cpus)}};
  // A name NVML gives is not necessarily UTF-8: replaced, never a throw.
  return file.dump(2, ' ', false, ordered_json::error_handler_t::replace) + '\n';
}

std::optional<Allocation> parseAllocationText(std::string_view text) {
  const nlohmann::json json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) return std::nullopt;
  const auto format = json.find("format");
  if (format == json.end() || !format->is_number_integer() ||
      format->get<std::int64_t>() != kAllocationFileFormat) {
    return std::nullopt;
  }
  const auto owner = json.find("owner_pid");
  const auto units = json.find("units");
  if (owner == json.end() || !owner->is_number_unsigned() ||
      owner->get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<pid_t>::max()) ||
      units == json.end() || !units->is_array()) {
    return std::nullopt;
  }
  bool ok = true;
  Allocation allocation;
  allocation.ownerPid = owner->get<pid_t>();
  for (const nlohmann::json& entry : *units) {
    if (std::optional<AllocatedUnit> unit = parseUnit(entry, ok)) {
      allocation.units.push_back(std::move(*unit));
    }
  }
  if (const auto cpus = json.find("cpus"); cpus != json.end() && !cpus->is_null()) {
    if (!cpus->is_array()) return std::nullopt;
    allocation.cpus.emplace();
    for (const nlohmann::json& cpu : *cpus) {
      if (!isSmallCount(cpu)) return std::nullopt;
      allocation.cpus->push_back(cpu.get<unsigned>());
    }
  }
  if (!ok) return std::nullopt;
  return allocation;
}

std::optional<std::string> whyNotPrivateFolder(const fs::path& folder) {
  struct stat info {};
  if (::lstat(folder.c_str(), &info) != 0) return std::string(std::strerror(errno));
  if (!S_ISDIR(info.st_mode)) return "it is " + files::kindOf(info.st_mode) + ", not a folder";
  if (info.st_uid != ::geteuid() || (info.st_mode & 07777) != S_IRWXU) {
    return files::describeOwnership(info) + "; only this user's folders of mode 0700 are used";
  }
  return std::nullopt;
}

std::optional<Allocation> readAllocationFile(const fs::path& path) {
  if (!path.is_absolute() || whyNotPrivateFolder(path.parent_path())) return std::nullopt;
  // O_NONBLOCK: a FIFO put there must not stall the reader; it is refused below.
  process::FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (!fd) return std::nullopt;
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0 || !S_ISREG(info.st_mode) || info.st_nlink != 1 ||
      info.st_uid != ::geteuid()) {
    return std::nullopt;
  }
  std::string text;
  char buffer[8192];
  while (text.size() <= kMaxFileBytes) {
    const ssize_t got = ::read(fd.get(), buffer, sizeof buffer);
    if (got < 0) {
      if (errno == EINTR) continue;
      return std::nullopt;
    }
    if (got == 0) return parseAllocationText(text);
    text.append(buffer, static_cast<std::size_t>(got));
  }
  return std::nullopt;
}

std::vector<fs::path> allocationFolderBases(const char* xdgRuntimeDir, const char* tmpDir) {
  std::vector<fs::path> bases;
  // systemd's per-user folder (0700, this user's, cleared at logout) when it is what it should
  // be; else a shared temporary folder, where mkdtemp's folder is private all the same.
  if (xdgRuntimeDir != nullptr && *xdgRuntimeDir != '\0' && fs::path(xdgRuntimeDir).is_absolute() &&
      !whyNotPrivateFolder(xdgRuntimeDir)) {
    bases.emplace_back(xdgRuntimeDir);
  }
  if (tmpDir != nullptr && *tmpDir != '\0' && fs::path(tmpDir).is_absolute()) {
    bases.emplace_back(tmpDir);
  }
  if (bases.empty() || bases.back() != "/tmp") bases.emplace_back("/tmp");
  return bases;
}

AllocationFile::AllocationFile(AllocationFile&& other) noexcept
    : file_(std::exchange(other.file_, {})), folder_(std::exchange(other.folder_, {})) {}

AllocationFile& AllocationFile::operator=(AllocationFile&& other) noexcept {
  if (this != &other) {
    remove();
    file_ = std::exchange(other.file_, {});
    folder_ = std::exchange(other.folder_, {});
  }
  return *this;
}

AllocationFile::~AllocationFile() { remove(); }

void AllocationFile::remove() noexcept {
  std::error_code ignored;
  if (!folder_.empty()) {
    // The folder is this user's, mode 0700: what is in it was put there by this exec, by exec's
    // nested in its command, or by the command itself. remove_all follows no symlink.
    fs::remove_all(folder_, ignored);
  } else if (!file_.empty()) {
    fs::remove(file_, ignored);
  }
  file_.clear();
  folder_.clear();
}

AllocationFile AllocationFile::inNewFolder(const std::vector<fs::path>& bases,
                                           std::string_view text) {
  std::string failures;
  for (const fs::path& base : bases) {
    std::string name = (base / kFolderTemplate).string();
    if (::mkdtemp(name.data()) == nullptr) {
      failures += (failures.empty() ? "" : "; ") + base.string() + ": " + std::strerror(errno);
      continue;
    }
    AllocationFile made;
    made.folder_ = name;
    made.file_ = made.folder_ / kFileName;
    process::FileDescriptor folder(
        ::open(name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    int error = folder ? 0 : errno;
    if (error == 0 && ::fchmod(folder.get(), S_IRWXU) != 0) error = errno;
    if (error == 0) {
      process::FileDescriptor file(::openat(folder.get(), kFileName,
                                            O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                                            S_IRUSR | S_IWUSR));
      error = file ? fillAndClose(std::move(file), text) : errno;
    }
    if (error == 0) return made;
    failures += (failures.empty() ? "" : "; ") + made.file_.string() + ": " + std::strerror(error);
    // `made` removes the folder.
  }
  throw std::runtime_error("cannot write an allocation file (" + failures + ")");
}

AllocationFile AllocationFile::besideEnclosing(const fs::path& enclosing, std::string_view text) {
  const fs::path folder = enclosing.parent_path();
  if (!enclosing.is_absolute()) {
    throw std::runtime_error("the enclosing allocation file " + enclosing.string() +
                             " is not an absolute path");
  }
  if (const std::optional<std::string> why = whyNotPrivateFolder(folder)) {
    throw std::runtime_error("cannot write an allocation file into " + folder.string() + ": " +
                             *why);
  }
  std::string name = (folder / kNestedFileTemplate).string();
  // mkostemps: O_CREAT | O_EXCL (a symlink in the way is not followed), mode 0600.
  process::FileDescriptor file(::mkostemps(name.data(), kNestedFileSuffixLength, O_CLOEXEC));
  if (!file) {
    throw std::runtime_error("cannot write an allocation file into " + folder.string() + ": " +
                             std::strerror(errno));
  }
  AllocationFile made;
  made.file_ = name;
  if (const int error = fillAndClose(std::move(file), text)) {
    throw std::runtime_error("cannot write the allocation file " + name + ": " +
                             std::strerror(error));
  }
  return made;
}

}  // namespace flink::defaultdiscovery
