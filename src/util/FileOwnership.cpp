#include "util/FileOwnership.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

namespace flink::files {

std::optional<std::string> lookupUserName(uid_t uid) {
  struct passwd entry {};
  struct passwd* found = nullptr;
  char buffer[1024];
  if (::getpwuid_r(uid, &entry, buffer, sizeof buffer, &found) == 0 && found != nullptr) {
    return std::string(found->pw_name);
  }
  return std::nullopt;
}

std::optional<std::string> lookupGroupName(gid_t gid) {
  struct group entry {};
  struct group* found = nullptr;
  char buffer[4096];
  if (::getgrgid_r(gid, &entry, buffer, sizeof buffer, &found) == 0 && found != nullptr) {
    return std::string(found->gr_name);
  }
  return std::nullopt;
}

std::string userName(uid_t uid) {
  return lookupUserName(uid).value_or("uid " + std::to_string(uid));
}

std::string groupName(gid_t gid) {
  return lookupGroupName(gid).value_or("gid " + std::to_string(gid));
}

std::string modeText(mode_t mode) {
  char buffer[8];
  std::snprintf(buffer, sizeof buffer, "%04o", static_cast<unsigned>(mode & 07777));
  return buffer;
}

std::string describeOwnership(const struct stat& info) {
  return "owner " + userName(info.st_uid) + ", group " + groupName(info.st_gid) + ", mode " +
         modeText(info.st_mode);
}

std::string kindOf(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "a file of another kind";
}

std::optional<std::string> whyOthersMayReplaceIn(const struct stat& folder) {
  if (!S_ISDIR(folder.st_mode)) return "it is " + kindOf(folder.st_mode) + ", not a folder";
  if (folder.st_uid != ::geteuid() && folder.st_uid != 0) {
    return "its owner " + userName(folder.st_uid) + " is neither this user nor root";
  }
  if ((folder.st_mode & (S_IWGRP | S_IWOTH)) && !(folder.st_mode & S_ISVTX)) {
    return std::string(folder.st_mode & S_IWOTH ? "anyone"
                                                : "its group " + groupName(folder.st_gid)) +
           " may write it and it lacks the sticky bit, so others may rename what is made in it "
           "and put something else in its place";
  }
  return std::nullopt;
}

FolderOnPath openFolderOthersMayNotReplace(const std::filesystem::path& folder,
                                           std::optional<std::string> (*rule)(const struct stat&)) {
  constexpr int kFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  FolderOnPath result;
  if (!folder.is_absolute()) {
    result.where = folder;
    result.error = EINVAL;
    result.why = "it is not an absolute path";
    return result;
  }
  // "a/../b" is "b" here: with no symbolic link on the way (refused below), ".." is the folder
  // above, judged already.
  std::vector<std::string> names;
  for (const std::filesystem::path& name : folder.lexically_normal().relative_path()) {
    if (!name.empty() && name != ".") names.push_back(name.string());
  }
  // What stopped the walk at `where`, the folder itself or, named first, one above it.
  std::filesystem::path where = "/";
  const auto refuse = [&](bool itself, std::string why) {
    if (result.fd >= 0) ::close(result.fd);
    result.fd = -1;
    result.where = where;
    result.why = itself ? std::move(why) : where.string() + " on its path: " + why;
    return result;
  };
  result.fd = ::open("/", kFlags);
  if (result.fd < 0) {
    result.error = errno;
    return refuse(names.empty(), std::strerror(result.error));
  }
  for (std::size_t next = 0;; ++next) {
    const bool itself = next == names.size();
    if (::fstat(result.fd, &result.info) != 0) return refuse(itself, std::strerror(errno));
    result.opened = true;
    if (std::optional<std::string> why = (itself ? rule : whyOthersMayReplaceIn)(result.info)) {
      return refuse(itself, std::move(*why));
    }
    if (itself) {
      result.where = where;
      return result;
    }
    const int parent = result.fd;
    const char* name = names[next].c_str();
    where /= names[next];
    result.opened = false;
    result.fd = ::openat(parent, name, kFlags);
    if (result.fd < 0) {
      result.error = errno;
      // What is there instead of a folder (a symbolic link, a file), in the rule's words.
      struct stat info {};
      std::optional<std::string> why;
      if ((result.error == ELOOP || result.error == ENOTDIR) &&
          ::fstatat(parent, name, &info, AT_SYMLINK_NOFOLLOW) == 0) {
        why = whyOthersMayReplaceIn(info);
      }
      ::close(parent);
      return refuse(next + 1 == names.size(), why.value_or(std::strerror(result.error)));
    }
    ::close(parent);
  }
}

std::string whyCannotOpen(const std::filesystem::path& path, int error) {
  if (error == ENOENT || error == ENOTDIR) {
    std::filesystem::path folder = path.parent_path();
    if (folder.empty()) folder = ".";
    struct stat info {};
    if (error == ENOENT && ::stat(folder.c_str(), &info) != 0 && errno == ENOENT) {
      return "the folder " + folder.string() + " does not exist";
    }
    // ENOTDIR: the nearest of its folders that is something else.
    for (; !folder.empty(); folder = folder.parent_path()) {
      if (::stat(folder.c_str(), &info) == 0 && !S_ISDIR(info.st_mode)) {
        return folder.string() + " is not a folder: it is " + kindOf(info.st_mode);
      }
      if (folder == folder.parent_path()) break;
    }
  }
  return std::strerror(error);
}

}  // namespace flink::files
