// The allocation file exec gives its command (see AllocationFile.h).
#include "host/defaultdiscovery/AllocationFile.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <random>
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

/// The folder's and the file's names: a prefix, six random letters or digits (as mkdtemp's
/// XXXXXX), a suffix.
constexpr const char* kFolderPrefix = "flink-gpu-exec.";
constexpr const char* kFileName = "allocation.json";
constexpr const char* kNestedFilePrefix = "allocation-";
constexpr const char* kNestedFileSuffix = ".json";
/// How many random names are tried before giving up (mkdtemp tries far more; six characters of
/// 62 make a clash of even a few tries unlikely).
constexpr int kNameTries = 100;
/// How deep the folders a command makes in its allocation folder are removed.
constexpr unsigned kMaxRemovalDepth = 64;

constexpr int kFolderFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;

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

/// `prefix`, six random letters or digits, `suffix`.
std::string randomName(std::string_view prefix, std::string_view suffix) {
  static constexpr std::string_view kCharacters =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::random_device device;
  std::string name(prefix);
  for (int i = 0; i < 6; ++i) name += kCharacters[device() % kCharacters.size()];
  name += suffix;
  return name;
}

/// Why a folder of this stat is not private to this user (whyNotPrivateFolder).
std::optional<std::string> whyNotPrivate(const struct stat& info) {
  if (!S_ISDIR(info.st_mode)) return "it is " + files::kindOf(info.st_mode) + ", not a folder";
  if (info.st_uid != ::geteuid() || (info.st_mode & 07777) != S_IRWXU) {
    return files::describeOwnership(info) + "; only this user's folders of mode 0700 are used";
  }
  return std::nullopt;
}

/// Why the folder `path` could not be opened (O_NOFOLLOW: `error` ELOOP or ENOTDIR for what is
/// no folder, a symlink too), in words.
std::string whyCannotOpenFolder(const fs::path& path, int error) {
  struct stat info {};
  if ((error == ELOOP || error == ENOTDIR) && ::lstat(path.c_str(), &info) == 0 &&
      !S_ISDIR(info.st_mode)) {
    return "it is " + files::kindOf(info.st_mode) + ", not a folder";
  }
  return std::strerror(error);
}

/// Whether `a` and `b` are the same file.
bool sameFile(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/// Removes everything in the folder `folder` (a descriptor), folders in it `depth` deep, through
/// descriptors: nothing is reached by a path, and no symlink followed. @returns 0, else the errno
/// of the first thing that could not be removed (the rest is tried all the same).
int removeEntriesOf(int folder, unsigned depth) {
  // A descriptor of its own for the listing: fdopendir takes it, and its offset is its own.
  DIR* listing = nullptr;
  if (const int own = ::openat(folder, ".", kFolderFlags); own >= 0) {
    listing = ::fdopendir(own);
    if (listing == nullptr) ::close(own);
  }
  if (listing == nullptr) return errno;
  std::vector<std::string> names;
  while (const dirent* entry = ::readdir(listing)) {
    const std::string_view name = entry->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
  }
  ::closedir(listing);
  int failed = 0;
  for (const std::string& name : names) {
    struct stat info {};
    if (::fstatat(folder, name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno != ENOENT && failed == 0) failed = errno;
      continue;
    }
    int flags = 0;
    if (S_ISDIR(info.st_mode)) {
      flags = AT_REMOVEDIR;
      const process::FileDescriptor inner(::openat(folder, name.c_str(), kFolderFlags));
      int error = inner ? 0 : errno;
      if (error == 0) error = depth == 0 ? ELOOP : removeEntriesOf(inner.get(), depth - 1);
      if (error != 0) {
        if (failed == 0) failed = error;
        continue;
      }
    }
    if (::unlinkat(folder, name.c_str(), flags) != 0 && errno != ENOENT && failed == 0) {
      failed = errno;
    }
  }
  return failed;
}

/// Makes a new folder "flink-gpu-exec.XXXXXX" in `base` (a descriptor), opens it and makes it
/// mode 0700, and checks that what the descriptor holds is the folder made: this user's, mode
/// 0700, and what the name in `base` names. @returns its name and descriptor, else why not.
struct MadeFolder {
  std::string name;
  process::FileDescriptor fd;
  std::string error;
};
MadeFolder makeFolderIn(int base) {
  MadeFolder made;
  for (int tries = 0; tries < kNameTries; ++tries) {
    made.name = randomName(kFolderPrefix, "");
    if (::mkdirat(base, made.name.c_str(), S_IRWXU) == 0) break;
    if (errno != EEXIST || tries + 1 == kNameTries) {
      made.error = std::strerror(errno);
      return made;
    }
  }
  made.fd.reset(::openat(base, made.name.c_str(), kFolderFlags));
  if (!made.fd || ::fchmod(made.fd.get(), S_IRWXU) != 0) {
    made.error = std::strerror(errno);
    made.fd.reset();
    // In a base where no one else may replace it, the name is still the folder made.
    (void)::unlinkat(base, made.name.c_str(), AT_REMOVEDIR);
    return made;
  }
  struct stat opened {};
  struct stat named {};
  if (::fstat(made.fd.get(), &opened) != 0 ||
      ::fstatat(base, made.name.c_str(), &named, AT_SYMLINK_NOFOLLOW) != 0 ||
      !sameFile(opened, named) || whyNotPrivate(opened)) {
    // Someone replaced it between the mkdir and the open: theirs is left alone.
    made.error = "the folder made was replaced before it could be opened";
    made.fd.reset();
  }
  return made;
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
  return whyNotPrivate(info);
}

std::optional<Allocation> readAllocationFile(const fs::path& path) {
  if (!path.is_absolute() || !path.has_filename()) return std::nullopt;
  // The folder is judged on the descriptor the file is then opened through.
  const process::FileDescriptor folder(::open(path.parent_path().c_str(), kFolderFlags));
  struct stat folderInfo {};
  if (!folder || ::fstat(folder.get(), &folderInfo) != 0 || whyNotPrivate(folderInfo)) {
    return std::nullopt;
  }
  // O_NONBLOCK: a FIFO put there must not stall the reader; it is refused below.
  process::FileDescriptor fd(::openat(folder.get(), path.filename().c_str(),
                                      O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
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

std::vector<AllocationFolderBase> allocationFolderBases(const char* xdgRuntimeDir,
                                                        const char* tmpDir) {
  std::vector<AllocationFolderBase> bases;
  const auto given = [](const char* value) {
    return value != nullptr && *value != '\0' && fs::path(value).is_absolute();
  };
  // systemd's per-user folder (0700, this user's, cleared at logout) when it is what it should
  // be; else a shared temporary folder that no one else may rename the folder out of, where
  // mkdtemp's folder is private all the same.
  if (given(xdgRuntimeDir)) {
    bases.push_back({.path = xdgRuntimeDir, .variable = "XDG_RUNTIME_DIR", .privateOnly = true});
  }
  if (given(tmpDir) && fs::path(tmpDir) != "/tmp") {
    bases.push_back({.path = tmpDir, .variable = "TMPDIR", .privateOnly = false});
  }
  bases.push_back({.path = "/tmp", .variable = "", .privateOnly = false});
  return bases;
}

AllocationFile::AllocationFile(AllocationFile&& other) noexcept
    : file_(std::exchange(other.file_, {})),
      folder_(std::exchange(other.folder_, {})),
      base_(std::move(other.base_)),
      folderFd_(std::move(other.folderFd_)),
      name_(std::exchange(other.name_, {})) {}

AllocationFile& AllocationFile::operator=(AllocationFile&& other) noexcept {
  if (this != &other) {
    remove();
    file_ = std::exchange(other.file_, {});
    folder_ = std::exchange(other.folder_, {});
    base_ = std::move(other.base_);
    folderFd_ = std::move(other.folderFd_);
    name_ = std::exchange(other.name_, {});
  }
  return *this;
}

AllocationFile::~AllocationFile() { remove(); }

std::vector<std::string> AllocationFile::remove() noexcept {
  std::vector<std::string> warnings;
  try {
    if (base_ && folderFd_) {
      // The folder is this user's, mode 0700: what is in it was put there by this exec, by
      // exec's nested in its command, or by the command itself. Emptied through its descriptor,
      // wherever it is now.
      if (const int error = removeEntriesOf(folderFd_.get(), kMaxRemovalDepth)) {
        warnings.push_back("not everything in the allocation file's folder " + folder_.string() +
                           " could be removed (" + std::strerror(error) + "); the rest is left");
      }
      // Removed by its name in the base only while that name still holds it.
      struct stat made {};
      struct stat named {};
      if (::fstat(folderFd_.get(), &made) != 0) {
        warnings.push_back("the allocation file's folder " + folder_.string() +
                           " is left: " + std::strerror(errno));
      } else if (::fstatat(base_.get(), name_.c_str(), &named, AT_SYMLINK_NOFOLLOW) != 0) {
        warnings.push_back("the allocation file's folder " + folder_.string() +
                           " was moved away during the command; it was emptied and is left "
                           "where it is now");
      } else if (!sameFile(made, named)) {
        warnings.push_back("the allocation file's folder " + folder_.string() +
                           " was replaced during the command by " + files::kindOf(named.st_mode) +
                           " (" + files::describeOwnership(named) +
                           "), which is left alone; exec's own folder, moved away, was emptied "
                           "and is left where it is now");
      } else if (::unlinkat(base_.get(), name_.c_str(), AT_REMOVEDIR) != 0) {
        warnings.push_back("cannot remove the allocation file's folder " + folder_.string() + ": " +
                           std::strerror(errno));
      }
    } else if (folderFd_ && !name_.empty()) {
      // A nested exec's file, in the enclosing exec's folder; the command may have removed it.
      (void)::unlinkat(folderFd_.get(), name_.c_str(), 0);
    }
  } catch (...) {  // out of memory for a message: what is left stays, unsaid
  }
  file_.clear();
  folder_.clear();
  base_.reset();
  folderFd_.reset();
  name_.clear();
  return warnings;
}

AllocationFile AllocationFile::inNewFolder(const std::vector<AllocationFolderBase>& bases,
                                           std::string_view text,
                                           std::vector<std::string>& warnings) {
  std::string failures;
  const auto fail = [&](const fs::path& where, const std::string& why) {
    failures += (failures.empty() ? "" : "; ") + where.string() + ": " + why;
  };
  for (const AllocationFolderBase& base : bases) {
    // Every folder on its path judged, from / down, on the descriptors the walk opened, and the
    // folder made through the base's: what is judged is what is used.
    files::FolderOnPath opened = files::openFolderOthersMayNotReplace(
        base.path, base.privateOnly ? whyNotPrivate : files::whyOthersMayReplaceIn);
    process::FileDescriptor baseFd(opened.fd);
    if (const std::optional<std::string>& why = opened.why) {
      // One missing, or that this user may not enter, is no one's to judge: passed over quietly.
      const bool quiet = opened.error == ENOENT || opened.error == EACCES;
      if (!quiet && !base.privateOnly && !base.variable.empty()) {
        warnings.push_back(
            base.variable + " " + base.path.string() + " is not used for the allocation file: " +
            *why + (opened.opened ? " (" + files::describeOwnership(opened.info) + ")" : ""));
      }
      fail(base.path, *why);
      continue;
    }
    MadeFolder folder = makeFolderIn(baseFd.get());
    if (!folder.fd) {
      fail(base.path, folder.error);
      continue;
    }
    AllocationFile made;
    made.folder_ = base.path / folder.name;
    made.file_ = made.folder_ / kFileName;
    made.base_ = std::move(baseFd);
    made.folderFd_ = std::move(folder.fd);
    made.name_ = folder.name;
    process::FileDescriptor file(::openat(made.folderFd_.get(), kFileName,
                                          O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                                          S_IRUSR | S_IWUSR));
    const int error = file ? fillAndClose(std::move(file), text) : errno;
    if (error == 0) return made;
    fail(made.file_, std::strerror(error));
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
  const auto refuse = [&](const std::string& why) {
    return std::runtime_error("cannot write an allocation file into " + folder.string() + ": " +
                              why);
  };
  // Judged on the descriptor the file is then made through.
  process::FileDescriptor folderFd(::open(folder.c_str(), kFolderFlags));
  if (!folderFd) throw refuse(whyCannotOpenFolder(folder, errno));
  struct stat info {};
  if (::fstat(folderFd.get(), &info) != 0) throw refuse(std::strerror(errno));
  if (const std::optional<std::string> why = whyNotPrivate(info)) throw refuse(*why);
  // O_CREAT | O_EXCL (a symlink in the way is not followed), mode 0600.
  std::string name;
  process::FileDescriptor file;
  for (int tries = 0; tries < kNameTries && !file; ++tries) {
    name = randomName(kNestedFilePrefix, kNestedFileSuffix);
    file.reset(::openat(folderFd.get(), name.c_str(),
                        O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, S_IRUSR | S_IWUSR));
    if (!file && errno != EEXIST) break;
  }
  if (!file) throw refuse(std::strerror(errno));
  AllocationFile made;
  made.file_ = folder / name;
  made.folderFd_ = std::move(folderFd);
  made.name_ = name;
  if (const int error = fillAndClose(std::move(file), text)) {
    throw std::runtime_error("cannot write the allocation file " + made.file_.string() + ": " +
                             std::strerror(error));
  }
  return made;
}

}  // namespace flink::defaultdiscovery
