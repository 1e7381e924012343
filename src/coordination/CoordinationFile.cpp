// The locked, journaled coordination file. See CoordinationFile.h for the contract.
#include "coordination/CoordinationFile.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <thread>

#include "coordination/Journal.h"
#include "util/Strings.h"

namespace flink::coordination {
namespace {

namespace fs = std::filesystem;
using process::FileDescriptor;

std::string errorText(int error) { return std::strerror(error); }

[[noreturn]] void fail(const fs::path& file, const std::string& what, int error = 0) {
  std::string message = "coordination file " + file.string() + ": " + what;
  if (error != 0) message += ": " + errorText(error);
  throw CoordinationError(message);
}

std::string userName(uid_t uid) {
  if (const passwd* entry = ::getpwuid(uid)) return entry->pw_name;
  return "uid " + std::to_string(uid);
}

std::string groupName(gid_t gid) {
  if (const group* entry = ::getgrgid(gid)) return entry->gr_name;
  return "gid " + std::to_string(gid);
}

std::string modeText(mode_t mode) {
  char buffer[8];
  std::snprintf(buffer, sizeof buffer, "%04o", static_cast<unsigned>(mode & 07777));
  return buffer;
}

/// "owner alice, group flink, mode 0644" of `path`, or "" when it cannot be told.
std::string ownership(const fs::path& path) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) return "";
  return "owner " + userName(info.st_uid) + ", group " + groupName(info.st_gid) + ", mode " +
         modeText(info.st_mode);
}

/// A file this user may not open, lock or create: say whose it is and how workers of several
/// users share it.
[[noreturn]] void failAccess(const fs::path& file, const fs::path& culprit, const std::string& what,
                             int error) {
  std::string message = "coordination file " + file.string() + ": " + what;
  if (culprit != file) message += " " + culprit.string();
  message += ": " + errorText(error);
  const std::string owned = ownership(culprit);
  if (!owned.empty()) message += " (" + owned + ")";
  if (error == EROFS) {
    message +=
        "; it is on a read-only file system: give the workers a --coordination-file on a "
        "writable one";
  } else {
    const fs::path folder = culprit.parent_path().empty() ? fs::path(".") : culprit.parent_path();
    const std::string folderOwned = ownership(folder);
    message +=
        "; workers of several users must all be able to write it and its journal: "
        "e.g. `chgrp GROUP " +
        culprit.string() + " && chmod g+rw " + culprit.string() +
        "` for a group they share, or keep the file in a folder of that group with the "
        "setgid bit (chmod 2775)";
    if (!folderOwned.empty())
      message += " (the folder " + folder.string() + ": " + folderOwned + ")";
  }
  throw CoordinationError(message);
}

bool isAccessError(int error) { return error == EACCES || error == EPERM || error == EROFS; }

/// The pid that holds a flock on (device, inode), from /proc/locks, if one does.
std::optional<std::string> lockHolder(std::uint64_t device, std::uint64_t inode) {
  FileDescriptor fd(::open("/proc/locks", O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  std::string text;
  char buffer[8192];
  ssize_t n;
  while ((n = ::read(fd.get(), buffer, sizeof buffer)) > 0 && text.size() < (1 << 20)) {
    text.append(buffer, static_cast<std::size_t>(n));
  }
  // "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF": major:minor:inode, majors in hex.
  char wanted[64];
  std::snprintf(wanted, sizeof wanted, "%02x:%02x:%llu", ::major(static_cast<dev_t>(device)),
                ::minor(static_cast<dev_t>(device)), static_cast<unsigned long long>(inode));
  for (std::string_view line : strings::split(text, '\n')) {
    const std::vector<std::string> fields = strings::splitWhitespace(line);
    // A blocked waiter's line starts "1: -> FLOCK ...": skip those.
    if (fields.size() >= 6 && fields[1] == "FLOCK" && fields[5] == wanted) return fields[4];
  }
  return std::nullopt;
}

/// Opens `path` read-write without following a symlink; creates it (mode 0666 less the umask)
/// only when it is missing. O_CREAT is not given for a file that exists: with
/// fs.protected_regular, the kernel refuses O_CREAT on another user's file in a sticky folder
/// such as /var/tmp even when its mode lets us write it.
int openNoFollow(const fs::path& path, int accessFlags, bool create) {
  const int flags = accessFlags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK;
  while (true) {
    const int fd = ::open(path.c_str(), flags);
    if (fd >= 0 || errno != ENOENT || !create) return fd;
    const int created = ::open(path.c_str(), flags | O_CREAT | O_EXCL, 0666);
    if (created >= 0 || errno != EEXIST) return created;
  }
}

/// Refuses what is not a plain file of ours to rewrite.
struct stat checkedStat(int fd, const fs::path& file, const fs::path& culprit) {
  struct stat info {};
  if (::fstat(fd, &info) != 0) fail(file, "cannot stat " + culprit.string(), errno);
  const std::string name = culprit == file ? "it" : culprit.string();
  if (!S_ISREG(info.st_mode)) fail(file, "refusing to use " + name + ": it is not a regular file");
  if (info.st_nlink > 1) {
    fail(file, "refusing to use " + name + ": it has " + std::to_string(info.st_nlink) +
                   " hard links, so writing it would change another file");
  }
  return info;
}

std::string readAll(int fd, std::uint64_t size, const fs::path& file, const char* what) {
  std::string text(static_cast<std::size_t>(size), '\0');
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::pread(fd, text.data() + done, text.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(file, std::string("cannot read ") + what, errno);
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  text.resize(done);
  return text;
}

void truncateTo(int fd, std::uint64_t size, const fs::path& file, const char* what) {
  while (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
    if (errno != EINTR) fail(file, std::string("cannot truncate ") + what, errno);
  }
}

std::size_t pageSize() {
  static const std::size_t size = [] {
    const long value = ::sysconf(_SC_PAGESIZE);
    return value > 0 ? static_cast<std::size_t>(value) : std::size_t{4096};
  }();
  return size;
}

}  // namespace

fs::path journalPathOf(const fs::path& file) {
  fs::path journal = file;
  journal += ".journal";
  return journal;
}

CoordinationFile CoordinationFile::open(const fs::path& file, Access access,
                                        std::chrono::milliseconds lockTimeout,
                                        std::uint64_t maxBytes) {
  const bool write = access == Access::kWrite;
  const int lockType = write ? LOCK_EX : LOCK_SH;
  const auto deadline = std::chrono::steady_clock::now() + lockTimeout;
  CoordinationFile result(file, access);
  while (true) {
    FileDescriptor fd(openNoFollow(file, write ? O_RDWR : O_RDONLY, write));
    if (!fd) {
      const int error = errno;
      if (error == ENOENT && !write) return result;
      if (error == ELOOP) fail(file, "refusing to use it: it is a symbolic link");
      if (error == EISDIR) fail(file, "refusing to use it: it is a directory");
      if (isAccessError(error)) {
        std::error_code ignored;
        failAccess(file, fs::exists(file, ignored) ? file : file.parent_path(),
                   fs::exists(file, ignored)
                       ? (write ? "cannot open it for writing" : "cannot open it")
                       : "cannot create it in",
                   error);
      }
      fail(file, "cannot open it", error);
    }
    const struct stat opened = checkedStat(fd.get(), file, file);

    while (::flock(fd.get(), lockType | LOCK_NB) != 0) {
      if (errno == EINTR) continue;
      if (errno == ENOLCK || isAccessError(errno)) failAccess(file, file, "cannot lock it", errno);
      if (errno != EWOULDBLOCK) fail(file, "cannot lock it", errno);
      if (std::chrono::steady_clock::now() >= deadline) {
        const auto holder = lockHolder(opened.st_dev, opened.st_ino);
        fail(file, "still locked by " + (holder ? "process " + *holder : "another process") +
                       " after " + std::to_string(lockTimeout.count()) + " ms");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }

    // Someone may have replaced the file (Flink's script edits it with `sed -i`) between our open
    // and our lock: then we hold the lock of a file nobody else will look at. Keep that lock (a
    // Flink script that opened the old file waits on it) and start again on the file now there.
    struct stat current {};
    if (::lstat(file.c_str(), &current) == 0 && current.st_dev == opened.st_dev &&
        current.st_ino == opened.st_ino) {
      // The size must be read under the lock: the previous holder may have just grown it.
      const struct stat locked = checkedStat(fd.get(), file, file);
      if (static_cast<std::uint64_t>(locked.st_size) > maxBytes) {
        fail(file, "refusing to use it: " + std::to_string(locked.st_size) +
                       " bytes is more than a coordination file holds (" +
                       std::to_string(maxBytes) +
                       "); `flink-gpu release --junk` removes the lines that are not records");
      }
      result.fd_ = std::move(fd);
      result.maxBytes_ = maxBytes;
      result.device_ = locked.st_dev;
      result.inode_ = locked.st_ino;
      result.mode_ = locked.st_mode & 0666;
      result.group_ = locked.st_gid;
      result.text_ =
          readAll(result.fd_.get(), static_cast<std::uint64_t>(locked.st_size), file, "it");
      result.recover(maxBytes);
      return result;
    }
    result.replaced_.push_back(std::move(fd));
    if (std::chrono::steady_clock::now() >= deadline || result.replaced_.size() > 64) {
      fail(file, "it kept being replaced while waiting for its lock");
    }
  }
}

FileDescriptor CoordinationFile::openJournal(bool create) {
  const fs::path journal = journalPathOf(path_);
  const bool write = access_ == Access::kWrite;
  FileDescriptor fd(openNoFollow(journal, write ? O_RDWR : O_RDONLY, create));
  if (!fd) {
    const int error = errno;
    if (error == ENOENT) return fd;
    if (error == ELOOP)
      fail(path_, "refusing to use its journal " + journal.string() + ": it is a symbolic link");
    if (isAccessError(error)) {
      std::error_code ignored;
      if (fs::exists(journal, ignored))
        failAccess(path_, journal, "cannot open its journal", error);
      failAccess(path_, journal.parent_path(), "cannot create its journal in", error);
    }
    fail(path_, "cannot open its journal " + journal.string(), error);
  }
  const struct stat info = checkedStat(fd.get(), path_, journal);
  if (create && info.st_size == 0 && info.st_uid == ::geteuid()) {
    // As shared as the file itself, so that every worker that can write one can write both.
    // Best effort: a group we are not in cannot be given.
    (void)::fchmod(fd.get(), mode_);
    if (info.st_gid != group_) (void)::fchown(fd.get(), static_cast<uid_t>(-1), group_);
  }
  return fd;
}

void CoordinationFile::recover(std::uint64_t maxBytes) {
  FileDescriptor journal = openJournal(/*create=*/false);
  if (!journal) return;
  const struct stat info = checkedStat(journal.get(), path_, journalPathOf(path_));
  if (info.st_size == 0) return;
  // Old and new bytes of a file of at most maxBytes, and the headers.
  if (static_cast<std::uint64_t>(info.st_size) > 2 * maxBytes + (1 << 20)) {
    fail(path_, "refusing to use its journal " + journalPathOf(path_).string() + ": " +
                    std::to_string(info.st_size) + " bytes is more than a journal of it holds");
  }
  const std::string bytes =
      readAll(journal.get(), static_cast<std::uint64_t>(info.st_size), path_, "its journal");
  const std::optional<Journal> pending = decodeJournal(bytes);

  std::string note;
  std::optional<std::string> before;
  if (!pending) {
    // Its writer died before it sealed it, and so before it touched the file (or the journal
    // was damaged since: then the file may hold a change cut short, which cannot be undone).
    note =
        "discarded a journal that is not whole (a writer died while writing it, or it was "
        "damaged)";
  } else if (pending->device != device_ || pending->inode != inode_) {
    note = "ignored a journal of an earlier file at this path";
  } else if (!isPartOfChange(*pending, text_)) {
    note =
        "a change cut short was left in the journal, but the file was changed since by "
        "another program (Flink's script?): kept the file as it is";
  } else {
    before = rolledBack(*pending, text_);
    note = "rolled back a change that its writer did not finish (it was killed)";
  }

  if (access_ == Access::kRead) {
    // Readers only look: the next writer puts the file back.
    if (before) {
      text_ = std::move(*before);
      note =
          "a change that its writer did not finish (it was killed) is shown rolled back; the "
          "next allocation puts the file back";
    }
    if (!note.empty()) notes_.push_back(note);
    return;
  }
  if (before) {
    restore(text_, *before);
    text_ = std::move(*before);
  }
  truncateTo(journal.get(), 0, path_, "its journal");
  if (!note.empty()) notes_.push_back(note);
}

void CoordinationFile::writeAll(int fd, const std::string& bytes, std::uint64_t offset,
                                const char* what) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n =
        ::pwrite(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(path_, std::string("cannot write ") + what, errno);
    done += static_cast<std::size_t>(n);
  }
}

void CoordinationFile::restore(const std::string& current, const std::string& target) {
  // Shrink first, so that no write lands past the end and leaves a gap of zeros; then put back
  // each page that differs. Every step leaves bytes of one side or the other of the change, so a
  // restore cut short is completed by the next opener like the change itself.
  std::string_view now = current;
  if (now.size() > target.size()) {
    truncateTo(fd_.get(), target.size(), path_, "it");
    now = now.substr(0, target.size());
  }
  for (const JournalWrite& write : planWrites(now, target, pageSize())) {
    writeAll(fd_.get(), write.after, write.offset, "it");
  }
}

bool CoordinationFile::changedUnderLock() const {
  // Flink's script keeps writing after its own `sed -i` replaced the file, under the lock of the
  // file it replaced: appends we did not see would be overwritten.
  struct stat info {};
  return !stillAtPath() || (::fstat(fd_.get(), &info) == 0 &&
                            static_cast<std::uint64_t>(info.st_size) != text_.size());
}

void CoordinationFile::replace(const std::string& text) {
  if (access_ != Access::kWrite) fail(path_, "internal error: replace() on a file opened to read");
  if (text == text_) return;
  if (text.size() > maxBytes_ && text.size() > text_.size()) {
    fail(path_, "refusing to grow it to " + std::to_string(text.size()) +
                    " bytes, past the most a coordination file holds (" +
                    std::to_string(maxBytes_) +
                    "); `flink-gpu release --junk` removes the lines that are not records; the "
                    "file is unchanged");
  }
  if (changedUnderLock()) {
    interfered_ = true;
    return;
  }
  const std::vector<JournalWrite> writes = planWrites(text_, text, pageSize());
  const Journal journal{device_, inode_, text_.size(), text.size(), writes};
  const std::string unchanged = "; the file is unchanged";

  FileDescriptor journalFd = openJournal(/*create=*/true);
  try {
    writeAll(journalFd.get(), encodeJournal(journal), 0, "its journal");
  } catch (const CoordinationError& e) {
    (void)::ftruncate(journalFd.get(), 0);
    throw CoordinationError(e.what() + unchanged);
  }

  if (changedUnderLock()) {  // again, now that the journal is written: the window stays small
    (void)::ftruncate(journalFd.get(), 0);
    interfered_ = true;
    return;
  }

  // The room the file grows into, before a byte of it is overwritten: a full disk or a quota
  // then fails here, with the file untouched. File systems without fallocate go on.
  if (text.size() > text_.size()) {
    const int error = ::fallocate(fd_.get(), FALLOC_FL_KEEP_SIZE, static_cast<off_t>(text_.size()),
                                  static_cast<off_t>(text.size() - text_.size()))
                          ? errno
                          : 0;
    if (error != 0 && error != EOPNOTSUPP && error != ENOSYS && error != EINVAL) {
      (void)::ftruncate(journalFd.get(), 0);
      fail(path_, "cannot make room for " + std::to_string(text.size() - text_.size()) +
                      " more bytes: " + errorText(error) + unchanged);
    }
  }

  std::string failure;
  try {
    for (const JournalWrite& write : writes) writeAll(fd_.get(), write.after, write.offset, "it");
    // Past the new end, the writes left '\n' (see planWrites); cut it off.
    if (text.size() < text_.size()) truncateTo(fd_.get(), text.size(), path_, "it");
    truncateTo(journalFd.get(), 0, path_, "its journal");
    text_ = text;
    return;
  } catch (const CoordinationError& e) {
    failure = e.what();
  }

  // Put the old bytes back (they fit: the space was theirs), from what the file holds now.
  try {
    struct stat info {};
    if (::fstat(fd_.get(), &info) != 0) fail(path_, "cannot stat it", errno);
    const std::string now =
        readAll(fd_.get(), static_cast<std::uint64_t>(info.st_size), path_, "it");
    restore(now, text_);
    truncateTo(journalFd.get(), 0, path_, "its journal");
  } catch (const CoordinationError&) {
    throw CoordinationError(failure + "; putting it back failed too, so its journal " +
                            journalPathOf(path_).string() +
                            " keeps the change for the next user of the file to roll back");
  }
  throw CoordinationError(failure + unchanged);
}

bool CoordinationFile::stillAtPath() const {
  struct stat current {};
  return ::lstat(path_.c_str(), &current) == 0 &&
         static_cast<std::uint64_t>(current.st_dev) == device_ &&
         static_cast<std::uint64_t>(current.st_ino) == inode_;
}

}  // namespace flink::coordination
