// Leases of GPUs by flock. See Leases.h.
#include "coordination/Leases.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace flink::coordination {
namespace {

namespace fs = std::filesystem;
using process::FileDescriptor;

[[noreturn]] void fail(const fs::path& path, const std::string& what, int error = 0) {
  std::string message = "lease " + path.string() + ": " + what;
  if (error != 0) message += ": " + std::string(std::strerror(error));
  throw CoordinationError(message);
}

/// A name that is one path component of ours: letters, digits, '-', '.', '_'.
bool isSafeName(const std::string& name) {
  if (name.empty() || name == "." || name == ".." || name.size() > 200) return false;
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '.' || c == '_';
    if (!ok) return false;
  }
  return true;
}

/// The lease folder, opened without following a symlink; created (with `mode` made searchable,
/// and sticky when anyone may write it, as /var/tmp is) when `create`. Invalid when it is missing.
FileDescriptor openFolder(const fs::path& folder, bool create, mode_t mode) {
  const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  FileDescriptor fd(::open(folder.c_str(), flags));
  if (!fd && errno == ENOENT && create) {
    // r-- becomes r-x for the same class; world-writable folders get the sticky bit.
    mode_t folderMode = mode | ((mode & 0444) >> 2);
    if (folderMode & 0002) folderMode |= S_ISVTX;
    if (::mkdir(folder.c_str(), folderMode) != 0 && errno != EEXIST) {
      fail(folder, "cannot create the lease folder", errno);
    }
    // mkdir applies the umask: set what was asked for when the folder is ours.
    FileDescriptor made(::open(folder.c_str(), flags));
    struct stat info {};
    if (made && ::fstat(made.get(), &info) == 0 && info.st_uid == ::geteuid()) {
      (void)::fchmod(made.get(), folderMode);
    }
    fd = std::move(made);
  }
  if (!fd) {
    if (errno == ENOENT && !create) return fd;
    if (errno == ELOOP || errno == ENOTDIR) fail(folder, "refusing to use it: not a folder");
    fail(folder, "cannot open the lease folder", errno);
  }
  return fd;
}

/// Whether some process holds the lease file `name` of the open lease folder `dir`: an
/// exclusive flock of our own cannot be had. A free one is removed when `removeWhenFree`; one
/// that cannot be opened is taken as held (it cannot be shown free), a missing one as free.
bool heldIn(int dir, const std::string& name, bool removeWhenFree) {
  FileDescriptor fd(::openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd) return errno != ENOENT;
  while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    return true;  // EWOULDBLOCK: held (by this process too, through another descriptor)
  }
  if (removeWhenFree) (void)::unlinkat(dir, name.c_str(), 0);
  return false;
}

}  // namespace

fs::path leaseFolderOf(const fs::path& file) {
  fs::path folder = file;
  folder += ".leases";
  return folder;
}

std::string leaseNameOf(const std::string& unit,
                        const std::unordered_map<std::string, std::string>& uuids) {
  if (unit.starts_with("GPU-") || unit.starts_with("MIG-")) return unit;
  if (const auto it = uuids.find(unit); it != uuids.end()) return it->second;
  return "index-" + unit;
}

void Lease::keepAcrossExec() const {
  const int flags = ::fcntl(fd_.get(), F_GETFD);
  if (flags < 0 || ::fcntl(fd_.get(), F_SETFD, flags & ~FD_CLOEXEC) != 0) {
    throw CoordinationError("lease " + name_ +
                            ": cannot keep it across exec: " + std::strerror(errno));
  }
}

Lease acquireLease(const fs::path& file, const std::string& name, mode_t mode) {
  const fs::path folder = leaseFolderOf(file);
  const fs::path path = folder / name;
  if (!isSafeName(name)) fail(path, "refusing a lease name that is not a plain file name");
  const FileDescriptor dir = openFolder(folder, /*create=*/true, mode);
  for (int attempt = 0; attempt < 16; ++attempt) {
    FileDescriptor fd(::openat(dir.get(), name.c_str(),
                               O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode));
    if (!fd) fail(path, "cannot open it", errno);
    struct stat opened {};
    if (::fstat(fd.get(), &opened) != 0 || !S_ISREG(opened.st_mode)) {
      fail(path, "refusing to use it: not a regular file");
    }
    while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
      if (errno == EINTR) continue;
      if (errno == EWOULDBLOCK) fail(path, "it is held by another running process");
      fail(path, "cannot lock it", errno);
    }
    // Whoever found it free before us may have removed it: then lock the file now there.
    struct stat current {};
    if (::fstatat(dir.get(), name.c_str(), &current, AT_SYMLINK_NOFOLLOW) == 0 &&
        current.st_ino == opened.st_ino && current.st_dev == opened.st_dev) {
      return Lease(name, std::move(fd));
    }
  }
  fail(path, "it kept being removed while it was taken");
}

LeaseFolder LeaseFolder::open(const fs::path& file) {
  LeaseFolder folder;
  const fs::path path = leaseFolderOf(file);
  folder.dir_ = openFolder(path, /*create=*/false, 0);
  if (!folder.dir_) return folder;  // no folder: no lease is held
  // fdopendir takes the descriptor it is given: list through a duplicate, keep ours for openat.
  const int listed = ::fcntl(folder.dir_.get(), F_DUPFD_CLOEXEC, 0);
  if (listed < 0) fail(path, "cannot list the lease folder", errno);
  DIR* entries = ::fdopendir(listed);
  if (entries == nullptr) {
    const int error = errno;
    ::close(listed);
    fail(path, "cannot list the lease folder", error);
  }
  while (const dirent* entry = ::readdir(entries)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") folder.names_.insert(name);
  }
  ::closedir(entries);
  return folder;
}

bool LeaseFolder::held(const std::string& name, bool removeWhenFree) {
  if (!isSafeName(name)) return true;              // not a lease of ours: cannot be shown free
  if (!dir_ || !names_.count(name)) return false;  // no lease file: not held
  const bool held = heldIn(dir_.get(), name, removeWhenFree);
  if (!held && removeWhenFree) names_.erase(name);
  return held;
}

bool leaseHeld(const fs::path& file, const std::string& name, bool removeWhenFree) {
  if (!isSafeName(name)) return true;
  const FileDescriptor dir = openFolder(leaseFolderOf(file), /*create=*/false, 0);
  if (!dir) return false;  // no folder: no lease is held
  return heldIn(dir.get(), name, removeWhenFree);
}

}  // namespace flink::coordination
