// The trust rules for files beside the coordination file. See Siblings.h.
#include "host/store/Siblings.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "host/store/StoreError.h"
#include "util/FileOwnership.h"
#include "util/Strings.h"

namespace flink::store {
namespace {

namespace fs = std::filesystem;
using files::groupName;
using files::modeText;
using files::userName;
using process::FileDescriptor;

/// Whether `user` is a member of `group` (its primary group or a supplementary one). Asked of
/// the name service, so remembered per (user, group): a host has few users.
bool isMember(uid_t user, gid_t group) {
  static std::mutex mutex;
  static std::unordered_map<unsigned long long, bool> known;
  const unsigned long long key = (static_cast<unsigned long long>(user) << 32) | group;
  {
    const std::lock_guard<std::mutex> lock(mutex);
    if (const auto it = known.find(key); it != known.end()) return it->second;
  }
  bool member = false;
  struct passwd entry {};
  struct passwd* found = nullptr;
  std::vector<char> buffer(4096);
  if (::getpwuid_r(user, &entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr) {
    if (found->pw_gid == group) {
      member = true;
    } else {
      int count = 64;
      std::vector<gid_t> groups(static_cast<std::size_t>(count));
      if (::getgrouplist(found->pw_name, found->pw_gid, groups.data(), &count) < 0) {
        groups.resize(static_cast<std::size_t>(count));
        (void)::getgrouplist(found->pw_name, found->pw_gid, groups.data(), &count);
      }
      groups.resize(static_cast<std::size_t>(std::max(count, 0)));
      member = std::find(groups.begin(), groups.end(), group) != groups.end();
    }
  }
  const std::lock_guard<std::mutex> lock(mutex);
  known.emplace(key, member);
  return member;
}

/// This process's umask, read from /proc/self/status (umask(2) can only be read by changing it,
/// which would race with the other threads' files); 022 where /proc does not tell.
mode_t currentUmask() {
  FileDescriptor fd(::open("/proc/self/status", O_RDONLY | O_CLOEXEC));
  if (!fd) return 022;
  char buffer[4096];
  const ssize_t size = ::read(fd.get(), buffer, sizeof buffer);
  if (size <= 0) return 022;
  const std::string_view text(buffer, static_cast<std::size_t>(size));
  const std::size_t at = text.find("\nUmask:");
  if (at == std::string_view::npos) return 022;
  std::string_view rest = text.substr(at + 7);
  const std::string_view value = strings::nextToken(rest);
  mode_t mask = 0;
  for (const char c : value) {
    if (c < '0' || c > '7') return 022;
    mask = static_cast<mode_t>(mask * 8 + static_cast<mode_t>(c - '0'));
  }
  return mask & 0777;
}

/// The mode a sibling of this kind gets: the coordination file's bits (a folder: searchable
/// where readable, sticky where its group or others may write it, setgid where its group may).
mode_t siblingMode(const SiblingTrust& trust, SiblingKind kind, bool withGroup,
                   SiblingReaders readers) {
  mode_t mode = trust.mode() & 0666;
  if (readers == SiblingReaders::kWritersOnly) {
    // Readable by a class only where it may write: the owner always.
    mode |= 0600;
    if (!(mode & 0020)) mode &= ~static_cast<mode_t>(0040);
    if (!(mode & 0002)) mode &= ~static_cast<mode_t>(0004);
  }
  // Another group than the coordination file's gets no more than everyone does.
  if (!withGroup) {
    const mode_t groupAndOthers = (mode >> 3) & mode & 0007;
    mode = (mode & ~static_cast<mode_t>(0070)) | (groupAndOthers << 3);
  }
  if (kind == SiblingKind::kFile) return mode;
  mode |= (mode & 0444) >> 2;  // r-- becomes r-x
  if (mode & 0022) mode |= S_ISVTX;
  if (withGroup && (mode & 0020)) mode |= S_ISGID;
  return mode;
}

/// Gives the sibling just made (`fd`, ours) the coordination file's group and mode. The group
/// first: chmod would drop a setgid bit for a group this user is not in.
void giveModeAndGroup(int fd, const SiblingTrust& trust, SiblingKind kind,
                      SiblingReaders readers = SiblingReaders::kAsTheFile) {
  struct stat info {};
  bool withGroup = ::fstat(fd, &info) == 0 && info.st_gid == trust.group();
  if (!withGroup) withGroup = ::fchown(fd, static_cast<uid_t>(-1), trust.group()) == 0;
  // Without the file's group, the file's group bits would be given to another group.
  (void)::fchmod(fd, siblingMode(trust, kind, withGroup, readers));
}

}  // namespace

SiblingTrust SiblingTrust::of(const struct stat& coordinationFile) {
  return SiblingTrust(true, coordinationFile.st_uid, coordinationFile.st_gid,
                      coordinationFile.st_mode & 07777);
}

SiblingTrust SiblingTrust::ofPath(const fs::path& file) {
  struct stat info {};
  if (::lstat(file.c_str(), &info) == 0 && S_ISREG(info.st_mode)) return of(info);
  return unanchored();
}

SiblingTrust SiblingTrust::unanchored() {
  return SiblingTrust(false, ::geteuid(), ::getegid(), 0666 & ~currentUmask());
}

bool SiblingTrust::mayWrite(uid_t user) const {
  if (user == 0 || user == owner_) return true;
  if (mode_ & S_IWOTH) return true;
  return (mode_ & S_IWGRP) && isMember(user, group_);
}

bool SiblingTrust::thisProcessMayWrite() const {
  const uid_t user = ::geteuid();
  if (user == 0 || user == owner_ || (mode_ & S_IWOTH)) return true;
  if (!(mode_ & S_IWGRP)) return false;
  if (::getegid() == group_) return true;
  // The groups this process has, given at run time or not (what the kernel checks a write with).
  const int count = ::getgroups(0, nullptr);
  if (count <= 0) return isMember(user, group_);
  std::vector<gid_t> groups(static_cast<std::size_t>(count));
  const int got = ::getgroups(count, groups.data());
  if (got > 0 && std::find(groups.begin(), groups.begin() + got, group_) != groups.begin() + got) {
    return true;
  }
  return isMember(user, group_);
}

std::optional<std::string> SiblingTrust::distrust(const struct stat& sibling,
                                                  SiblingKind kind) const {
  if (kind == SiblingKind::kFolder) {
    if (!S_ISDIR(sibling.st_mode)) return "it is not a folder";
  } else {
    if (!S_ISREG(sibling.st_mode)) return "it is not a regular file";
    if (sibling.st_nlink > 1) {
      return "it has " + std::to_string(sibling.st_nlink) +
             " hard links, so using it would change another file";
    }
  }
  const std::string coordination = anchored_ ? "the coordination file" : "a file of this user";
  // A file of the coordination file's group, which that group may write, was made by a member
  // (or in a setgid folder of that group): a member's, even one whose groups the name service
  // does not list (given at run time: systemd's SupplementaryGroups=, a pod's
  // supplementalGroups).
  const bool groupMade = sibling.st_gid == group_ && (mode_ & S_IWGRP);
  if (sibling.st_uid != ::geteuid() && !groupMade && !mayWrite(sibling.st_uid)) {
    return "its owner " + userName(sibling.st_uid) + " may not write " + coordination;
  }
  const bool anyoneMayWrite = mode_ & S_IWOTH;
  if ((sibling.st_mode & S_IWOTH) && !anyoneMayWrite) {
    return "anyone may write it, but not " + coordination;
  }
  if ((sibling.st_mode & S_IWGRP) && !anyoneMayWrite &&
      !((mode_ & S_IWGRP) && sibling.st_gid == group_)) {
    return "its group " + groupName(sibling.st_gid) + " may write it, but may not write " +
           coordination;
  }
  if (kind == SiblingKind::kFolder && (sibling.st_mode & (S_IWGRP | S_IWOTH)) &&
      !(sibling.st_mode & S_ISVTX)) {
    return "others may write it, but it lacks the sticky bit, so they may remove or replace "
           "the files of others in it";
  }
  return std::nullopt;
}

std::string describeOwnership(const struct stat& info) { return files::describeOwnership(info); }

void refuseSibling(const std::string& what, const fs::path& path, const struct stat& info,
                   const std::string& why, SiblingKind kind) {
  const std::string shown = strings::quoteForMessage(path.string(), std::string::npos);
  const std::string aside = shown + ".untrusted";
  throw StoreError(StoreError::Cause::kRefused,
                   what + " " + shown + ": refusing to use it: " + why + " (" +
                       describeOwnership(info) + "); a file beside the coordination file is " +
                       "used only when nobody who may not write the coordination file could "
                       "have made or changed it. Move it aside as root (`sudo mv -- " +
                       shown + " " + aside +
                       "`; any flink-gpu command run as root that meets it does so " +
                       "itself, and keeps it), and it is made anew" +
                       (kind == SiblingKind::kFolder ? std::string(" (it is a folder)") : ""));
}

fs::path asidePathOf(const fs::path& asideOf) {
  return asideOf.string() + ".untrusted-" + std::to_string(::time(nullptr)) + "-" +
         std::to_string(::getpid());
}

bool wasMovedAside(std::string_view path) {
  return path.find(".untrusted-") != std::string_view::npos;
}

bool mayMoveAside(const fs::path& path, const SiblingTrust& trust) {
  const uid_t user = ::geteuid();
  if (user == 0) return true;
  if (!trust.anchored() || user != trust.owner()) return false;
  const fs::path folder = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  struct stat info {};
  if (::stat(folder.c_str(), &info) != 0 || (info.st_mode & S_ISVTX)) return false;
  return ::access(folder.c_str(), W_OK | X_OK) == 0;
}

bool admitSibling(const std::string& what, const fs::path& path, const struct stat& info,
                  const std::string& why, SiblingKind kind, const SiblingTrust& trust,
                  std::vector<std::string>& warnings) {
  if (mayMoveAside(path, trust)) {
    // A file of a folder of siblings (a lease) goes beside the folder, where nothing reads it.
    const fs::path parent = path.parent_path();
    const bool inSiblingFolder = parent.extension() == ".leases";
    const fs::path base = asidePathOf(
        inSiblingFolder ? fs::path(parent.string() + "." + path.filename().string()) : path);
    // Never over another one moved aside before (in the same second, by the same process).
    for (int n = 1; n <= 100; ++n) {
      const fs::path aside = n == 1 ? base : fs::path(base.string() + "-" + std::to_string(n));
      if (::renameat2(AT_FDCWD, path.c_str(), AT_FDCWD, aside.c_str(), RENAME_NOREPLACE) == 0) {
        warnings.push_back(what + " " + strings::quoteForMessage(path.string(), std::string::npos) +
                           " failed the trust rules (" + why + "; " + describeOwnership(info) +
                           "): moved aside to " +
                           strings::quoteForMessage(aside.string(), std::string::npos) +
                           ", kept for you to read; a new one is made");
        return false;
      }
      if (errno != EEXIST) break;
    }
  }
  refuseSibling(what, path, info, why, kind);
}

bool admitSibling(const std::string& what, const fs::path& path, const struct stat& info,
                  const SiblingTrust& trust, SiblingKind kind, std::vector<std::string>& warnings) {
  const std::optional<std::string> why = trust.distrust(info, kind);
  if (!why) return true;
  return admitSibling(what, path, info, *why, kind, trust, warnings);
}

OpenedSibling openSiblingAt(int dirfd, const fs::path& name, int flags) {
  OpenedSibling opened;
  opened.fd =
      FileDescriptor(::openat(dirfd, name.c_str(), flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!opened.fd) {
    // O_NOFOLLOW on a symlink: ELOOP; O_DIRECTORY on a file: ENOTDIR.
    opened.error = errno;
    return opened;
  }
  if (::fstat(opened.fd.get(), &opened.info) != 0) {
    opened.error = errno;
    opened.fd.reset();
  }
  return opened;
}

FileDescriptor createSiblingAt(int dirfd, const fs::path& name, int flags,
                               const SiblingTrust& trust, SiblingReaders readers) {
  FileDescriptor fd(::openat(dirfd, name.c_str(),
                             flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600));
  if (fd) giveModeAndGroup(fd.get(), trust, SiblingKind::kFile, readers);
  return fd;
}

OpenedSibling openAdmittedSibling(const std::string& what, const fs::path& path, int flags,
                                  const SiblingTrust& trust, std::vector<std::string>& warnings,
                                  bool create, SiblingReaders readers) {
  // Each round either uses what is there, or moves it aside (or it went): a bounded few.
  for (int attempt = 0; attempt < 16; ++attempt) {
    OpenedSibling opened = openSiblingAt(AT_FDCWD, path, flags);
    if (opened.fd) {
      if (admitSibling(what, path, opened.info, trust, SiblingKind::kFile, warnings)) return opened;
      continue;  // moved aside
    }
    if (opened.error == ENOENT) {
      if (!create) return opened;
      FileDescriptor made = createSiblingAt(AT_FDCWD, path, flags, trust, readers);
      if (!made && errno == EEXIST) continue;
      if (!made || ::fstat(made.get(), &opened.info) != 0) {
        const int error = errno;
        throw StoreError(StoreError::causeOf(error),
                         what + " " + path.string() +
                             ": cannot create it: " + files::whyCannotOpen(path, error));
      }
      opened.fd = std::move(made);
      opened.error = 0;
      return opened;
    }
    struct stat there {};
    if (::lstat(path.c_str(), &there) != 0) {
      if (errno == ENOENT) continue;
      return opened;
    }
    if (S_ISLNK(there.st_mode) || !S_ISREG(there.st_mode)) {
      const char* why = S_ISLNK(there.st_mode) ? "it is a symbolic link" : "it is no regular file";
      if (!admitSibling(what, path, there, why, SiblingKind::kFile, trust, warnings)) continue;
      return opened;
    }
    // A regular file this process may not open: the rules judge its owner and mode.
    if (!admitSibling(what, path, there, trust, SiblingKind::kFile, warnings)) continue;
    return opened;
  }
  throw StoreError(StoreError::Cause::kInterfered,
                   what + " " + path.string() + ": it kept being replaced while it was opened");
}

int createSiblingFolderAt(int dirfd, const fs::path& name, const SiblingTrust& trust) {
  if (::mkdirat(dirfd, name.c_str(), 0700) != 0) return errno;
  FileDescriptor fd(::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return errno;
  giveModeAndGroup(fd.get(), trust, SiblingKind::kFolder);
  return 0;
}

}  // namespace flink::store
