// The locked, journaled coordination file. See LockedFile.h for the contract.
#include "host/store/LockedFile.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <thread>
#include <unordered_set>

#include "host/liveness/OpenFiles.h"
#include "host/store/Journal.h"
#include "host/store/LockWait.h"
#include "host/store/ReplacedCopies.h"
#include "util/FileOwnership.h"
#include "util/Strings.h"

namespace flink::store {
namespace {

namespace fs = std::filesystem;
using process::FileDescriptor;

std::string errorText(int error) { return std::strerror(error); }

/// "owner alice, group flink, mode 0644" of `path`, or "" when it cannot be told.
std::string ownership(const fs::path& path) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) return "";
  return describeOwnership(info);
}

/// A file this user may not open, lock or create: say whose it is and how workers of several
/// users share it. `subject` is "coordination file /x" or "health records /x.health".
[[noreturn]] void failAccess(const std::string& subject, const fs::path& file,
                             const fs::path& culprit, const std::string& what, int error) {
  std::string message = subject + ": " + what;
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
  throw StoreError(StoreError::Cause::kAccessDenied, message);
}

bool isAccessError(int error) { return error == EACCES || error == EPERM || error == EROFS; }

/// The pid that holds a flock on (device, inode), from /proc/locks, if one does.
std::optional<pid_t> lockHolder(std::uint64_t device, std::uint64_t inode) {
  const std::optional<FlockTable> table = FlockTable::read();
  return table ? table->holder(device, inode) : std::nullopt;
}

/// "process 1234", or "this process (pid 1234): another thread of it holds the lock …".
std::string describeHolder(std::optional<pid_t> holder) {
  if (!holder) return "another process";
  if (*holder == ::getpid()) {
    return "this process itself (pid " + std::to_string(*holder) +
           ": another of its threads, such as an in-process discovery given up on at an earlier "
           "time-out, holds it)";
  }
  return "process " + std::to_string(*holder);
}

/// Opens `path` without following a symlink; creates it (mode 0666 less the umask) only when
/// it is missing. O_CREAT is not given for a file that exists: with fs.protected_regular, the
/// kernel refuses O_CREAT on another user's file in a sticky folder such as /var/tmp even when
/// its mode lets us write it.
int openNoFollow(const fs::path& path, int accessFlags, bool create) {
  const int flags = accessFlags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK;
  while (true) {
    const int fd = ::open(path.c_str(), flags);
    if (fd >= 0 || errno != ENOENT || !create) return fd;
    const int created = ::open(path.c_str(), flags | O_CREAT | O_EXCL, 0666);
    if (created >= 0 || errno != EEXIST) return created;
  }
}

/// Like openNoFollow for a file beside the coordination file: made with its mode and group.
int openSiblingNoFollow(const fs::path& path, int accessFlags, bool create,
                        const SiblingTrust& trust, SiblingReaders readers) {
  while (true) {
    OpenedSibling opened = openSiblingAt(AT_FDCWD, path, accessFlags);
    if (opened.fd || opened.error != ENOENT || !create) {
      errno = opened.error;
      return opened.fd.release();
    }
    FileDescriptor created = createSiblingAt(AT_FDCWD, path, accessFlags, trust, readers);
    if (created || errno != EEXIST) return created.release();
  }
}

std::string readAll(int fd, std::uint64_t size, const std::string& subject, const char* what) {
  std::string text(static_cast<std::size_t>(size), '\0');
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::pread(fd, text.data() + done, text.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      throw StoreError(StoreError::Cause::kIo,
                       subject + ": cannot read " + what + ": " + errorText(errno));
    }
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  text.resize(done);
  return text;
}

/// Whether this process may write the file by its mode alone (as its owner, a member of its
/// group, or anyone), not only by privilege (root's CAP_DAC_OVERRIDE). Root's own files count as
/// its own.
bool mayWriteByMode(const struct stat& info) {
  const uid_t user = ::geteuid();
  if (info.st_uid == user || info.st_uid == 0) return true;
  if (info.st_mode & S_IWOTH) return true;
  if (!(info.st_mode & S_IWGRP)) return false;
  if (info.st_gid == ::getegid()) return true;
  const int count = ::getgroups(0, nullptr);
  if (count <= 0) return false;
  std::vector<gid_t> groups(static_cast<std::size_t>(count));
  const int got = ::getgroups(count, groups.data());
  return got > 0 &&
         std::find(groups.begin(), groups.begin() + got, info.st_gid) != groups.begin() + got;
}

}  // namespace

std::optional<std::string> refusalOf(const fs::path& file, const struct stat& opened, bool write) {
  if (write && !mayWriteByMode(opened)) {
    // Root may write any file; one that another user made where anyone may create files (a
    // sticky /var/tmp), before any worker did, is that user's to rewrite under our records.
    return "refusing to use it: it is another user's (" + describeOwnership(opened) +
           "), and this user may write it only by privilege, not by its mode: whoever made it "
           "could change every record; remove it, or give the workers a group that may write it "
           "(`chgrp GROUP " +
           file.string() + " && chmod g+rw " + file.string() + "`)";
  }
  if (!S_ISREG(opened.st_mode)) return "refusing to use it: it is not a regular file";
  if (opened.st_nlink > 1) {
    return "refusing to use it: it has " + std::to_string(opened.st_nlink) +
           " hard links, so writing it would change another file";
  }
  return std::nullopt;
}

namespace {

/// A stat of a regular file of this owner, group and mode.
struct stat fileStat(uid_t owner, gid_t group, mode_t mode) {
  struct stat info {};
  info.st_uid = owner;
  info.st_gid = group;
  info.st_mode = S_IFREG | mode;
  return info;
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

std::optional<pid_t> flockHolder(const fs::path& file) {
  struct stat info {};
  if (::lstat(file.c_str(), &info) != 0) return std::nullopt;
  return lockHolder(info.st_dev, info.st_ino);
}

void LockedFile::fail(StoreError::Cause cause, const std::string& what, int error) const {
  std::string message = what_ + " " + path_.string() + ": " + what;
  if (error != 0) message += ": " + errorText(error);
  throw StoreError(cause, message);
}

LockedFile LockedFile::open(const fs::path& file, Access access,
                            std::chrono::milliseconds lockTimeout, std::uint64_t maxBytes) {
  // The coordination file is the anchor of its own journal: trust_ is set from it once it is
  // open (until then it trusts nothing but root's files).
  return openWith(LockedFile(file, access, "coordination file", SiblingTrust::of(fileStat(0, 0, 0)),
                             /*sibling=*/false),
                  lockTimeout, maxBytes);
}

LockedFile LockedFile::openSibling(const fs::path& file, const std::string& what,
                                   const SiblingTrust& trust, Access access,
                                   std::chrono::milliseconds lockTimeout, std::uint64_t maxBytes,
                                   SiblingReaders readers) {
  LockedFile opened(file, access, what, trust, /*sibling=*/true);
  opened.readers_ = readers;
  return openWith(std::move(opened), lockTimeout, maxBytes);
}

LockedFile LockedFile::openWith(LockedFile result, std::chrono::milliseconds lockTimeout,
                                std::uint64_t maxBytes) {
  const fs::path file = result.path_;
  const std::string subject = result.what_ + " " + file.string();
  const bool write = result.writes();
  const int lockType = write ? LOCK_EX : LOCK_SH;
  const auto deadline = std::chrono::steady_clock::now() + lockTimeout;
  result.maxBytes_ = maxBytes;
  int replacements = 0;
  while (true) {
    FileDescriptor fd(result.sibling_ ? openSiblingNoFollow(file, write ? O_RDWR : O_RDONLY, write,
                                                            result.trust_, result.readers_)
                                      : openNoFollow(file, write ? O_RDWR : O_RDONLY, write));
    if (!fd) {
      const int error = errno;
      if (error == ENOENT && !write) return result;
      struct stat there {};
      if (result.sibling_ && (error == ELOOP || error == EISDIR) &&
          ::lstat(file.c_str(), &there) == 0 &&
          !admitSibling(result.what_, file, there,
                        error == ELOOP ? "it is a symbolic link" : "it is a directory",
                        SiblingKind::kFile, result.trust_, result.warnings_)) {
        continue;  // moved aside: made anew, or missing
      }
      if (error == ELOOP)
        result.fail(StoreError::Cause::kRefused, "refusing to use it: it is a symbolic link");
      if (error == EISDIR)
        result.fail(StoreError::Cause::kRefused, "refusing to use it: it is a directory");
      if (isAccessError(error)) {
        std::error_code ignored;
        const bool exists = fs::exists(fs::symlink_status(file, ignored));
        failAccess(subject, file, exists ? file : file.parent_path(),
                   exists ? (write ? "cannot open it for writing" : "cannot open it")
                          : "cannot create it in",
                   error);
      }
      result.fail(
          StoreError::Cause::kIo,
          std::string(write && error == ENOENT ? "cannot create it: " : "cannot open it: ") +
              files::whyCannotOpen(file, error));
    }
    struct stat opened {};
    if (::fstat(fd.get(), &opened) != 0)
      result.fail(StoreError::Cause::kIo, "cannot stat it", errno);
    if (result.sibling_) {
      if (!admitSibling(result.what_, file, opened, result.trust_, SiblingKind::kFile,
                        result.warnings_)) {
        continue;  // moved aside: made anew, or missing
      }
    } else if (std::optional<std::string> refusal = refusalOf(file, opened, write)) {
      result.fail(StoreError::Cause::kRefused, *refusal);
    }

    if (result.access_ == Access::kSnapshot) {
      result.fd_ = std::move(fd);
      result.readWithoutLock(opened);
      return result;
    }

    LockWait wait(file, [&opened] { return lockHolder(opened.st_dev, opened.st_ino); });
    while (result.access_ != Access::kWriteUnlocked && ::flock(fd.get(), lockType | LOCK_NB) != 0) {
      if (errno == EINTR) continue;
      if (errno == ENOLCK || isAccessError(errno)) {
        failAccess(subject, file, file, "cannot lock it", errno);
      }
      if (errno != EWOULDBLOCK) result.fail(StoreError::Cause::kIo, "cannot lock it", errno);
      if (std::chrono::steady_clock::now() >= deadline) {
        result.fail(StoreError::Cause::kLocked,
                    "still locked by " + describeHolder(lockHolder(opened.st_dev, opened.st_ino)) +
                        " after " + std::to_string(lockTimeout.count()) + " ms");
      }
      wait.stillWaiting();
      wait.pause(deadline);
    }
    wait.acquired();
    // Until the descriptor is handed to `result`, every way out (starting again on a replaced
    // file, a refusal) lets the lock go before the close.
    process::FlockGuard unlock(fd.get());

    // Someone may have replaced the file (Flink's script edits it with `sed -i`) between our open
    // and our lock: then we hold the lock of a file nobody else will look at. Keep that lock (a
    // Flink script that opened the old file waits on it) and start again on the file now there.
    struct stat current {};
    if (::lstat(file.c_str(), &current) == 0 && current.st_dev == opened.st_dev &&
        current.st_ino == opened.st_ino) {
      // A file replaced since our writers last saw it (Flink's `sed -i`) may still be written by
      // the script that replaced it, which holds the lock of the file it replaced, not this one's:
      // wait for it, then look again (see waitForReplacedCopies).
      if (write && !result.sibling_ &&
          !waitForReplacedCopies(file, opened, deadline, lockTimeout, result)) {
        if (++replacements > 64)
          result.fail(StoreError::Cause::kInterfered,
                      "it kept being replaced while waiting for its lock");
        continue;  // fd closes, and with it our lock of the replaced file
      }
      // The size must be read under the lock: the previous holder may have just grown it.
      struct stat locked {};
      if (::fstat(fd.get(), &locked) != 0)
        result.fail(StoreError::Cause::kIo, "cannot stat it", errno);
      if (static_cast<std::uint64_t>(locked.st_size) > maxBytes) {
        result.fail(StoreError::Cause::kRefused,
                    "refusing to use it: " + std::to_string(locked.st_size) +
                        " bytes is more than a " + result.what_ + " holds (" +
                        std::to_string(maxBytes) + ")" +
                        (result.sibling_ ? std::string()
                                         : std::string("; `flink-gpu release --junk` removes the "
                                                       "lines that are not records, and `release "
                                                       "--gone` the records of gone owners")));
      }
      result.fd_ = std::move(fd);
      unlock.release();  // ~LockedFile lets it go
      result.device_ = locked.st_dev;
      result.inode_ = locked.st_ino;
      result.mode_ = locked.st_mode & 0666;
      result.group_ = locked.st_gid;
      if (!result.sibling_) result.trust_ = SiblingTrust::of(locked);
      result.text_ =
          readAll(result.fd_.get(), static_cast<std::uint64_t>(locked.st_size), subject, "it");
      JournalRead journal = result.readJournal();
      result.recover(journal);
      if (write) {
        result.journal_ = std::move(journal.fd);
        result.journalDevice_ = journal.device;
        result.journalInode_ = journal.inode;
      }
      return result;
    }
    // The lock of the replaced file is let go (fd closes): a Flink script that waited on it then
    // holds it and may write to the file now there, which waitForReplacedCopies waits for. Kept,
    // it would make another allocator of ours wait on this one while this one waits on it.
    if (std::chrono::steady_clock::now() >= deadline || ++replacements > 64) {
      result.fail(StoreError::Cause::kInterfered,
                  "it kept being replaced while waiting for its lock");
    }
  }
}

namespace {

/// `<file>.inode`, opened with `flags` where it is there and passes the trust rules. One that
/// someone else planted (or a link, or a folder) is never believed, since it would make writers
/// wait for the wrong copy or none: openAdmittedSibling moves it aside where this process may,
/// and it counts as missing then, or refuses it with the error that names the fix.
OpenedSibling openInodeMemory(const fs::path& file, const SiblingTrust& trust, int flags,
                              std::vector<std::string>& warnings) {
  return openAdmittedSibling("coordination file " + file.string() + ": its inode memory",
                             inodeMemoryPathOf(file), flags, trust, warnings, /*create=*/false);
}

/// What `<file>.inode` says (openInodeMemory).
std::optional<FileId> rememberedInode(const fs::path& file, const SiblingTrust& trust,
                                      std::vector<std::string>& warnings) {
  const OpenedSibling opened = openInodeMemory(file, trust, O_RDONLY, warnings);
  if (!opened.fd) return std::nullopt;
  char line[kInodeMemorySize] = {};
  const ssize_t size = ::pread(opened.fd.get(), line, kInodeMemorySize, 0);
  if (size <= 0) return std::nullopt;
  return parseInodeMemory(std::string_view(line, static_cast<std::size_t>(size)));
}

/// Writes `id` to `<file>.inode`, making it where there is none; one this user may not write is
/// left as it is: the memory only adds a copy to wait for where descriptors cannot be looked at.
void rememberInode(const fs::path& file, const SiblingTrust& trust, const FileId& id,
                   std::vector<std::string>& warnings) {
  OpenedSibling opened = openInodeMemory(file, trust, O_RDWR, warnings);
  FileDescriptor fd = std::move(opened.fd);
  if (!fd && opened.error == ENOENT) {
    fd = createSiblingAt(AT_FDCWD, inodeMemoryPathOf(file), O_RDWR, trust);
  }
  if (!fd) return;
  const std::string line = formatInodeMemory(id);
  (void)!::pwrite(fd.get(), line.data(), line.size(), 0);
}

}  // namespace

fs::path inodeMemoryPathOf(const fs::path& file) {
  fs::path path = file;
  path += ".inode";
  return path;
}

std::optional<pid_t> LockedFile::replacedCopyInUse(std::unordered_set<std::uint64_t>& notCopies) {
  const std::optional<FlockTable> table = FlockTable::read();
  if (!table) return std::nullopt;  // no /proc/locks: nothing to tell
  std::error_code error;
  const std::string deleted =
      liveness::deletedLinkOf(fs::absolute(path_, error).lexically_normal().string());
  return store::replacedCopyInUse(*table, FileId{device_, inode_}, ::getpid(), deleted,
                                  replacedCopies_, notCopies,
                                  [this](pid_t holder, std::uint64_t inode) {
                                    return liveness::openFileOfLock(holder, device_, inode);
                                  });
}

bool LockedFile::waitWhileReplacedCopiesInUse(std::chrono::steady_clock::time_point deadline,
                                              std::chrono::milliseconds lockTimeout) {
  std::unordered_set<std::uint64_t> notCopies;
  bool waited = false;
  while (const std::optional<pid_t> pid = replacedCopyInUse(notCopies)) {
    waited = true;
    if (std::chrono::steady_clock::now() >= deadline) {
      fail(
          StoreError::Cause::kInterfered,
          "it was replaced (Flink's `sed -i`?) by a program that does not hold its lock: " +
              describeHolder(*pid > 0 ? pid : std::nullopt) +
              " still holds (or waits for) the lock of the file it replaced, and may write to this "
              "one, after " +
              std::to_string(lockTimeout.count()) + " ms");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  // Its writes are done; it may have replaced the file again meanwhile.
  return !waited || stillAtPath();
}

bool LockedFile::waitForReplacedCopies(const fs::path& file, const struct stat& locked,
                                       std::chrono::steady_clock::time_point deadline,
                                       std::chrono::milliseconds lockTimeout, LockedFile& result) {
  result.device_ = static_cast<std::uint64_t>(locked.st_dev);
  result.inode_ = static_cast<std::uint64_t>(locked.st_ino);
  result.replacedCopies_.clear();
  const FileId current{result.device_, result.inode_};
  const SiblingTrust trust = SiblingTrust::of(locked);
  const std::optional<FileId> remembered = rememberedInode(file, trust, result.warnings_);
  // Looked for every time, replaced since our writers last saw it or not: a script may lock a copy
  // it opened before the last of them looked (it stalled between open and flock), and a new file
  // may have got the number of the one remembered (ext4 gives freed inode numbers again).
  result.watchReplaced_ = true;
  result.replacedCopies_ = replacedCopiesToWatch(remembered, current);
  if (!result.waitWhileReplacedCopiesInUse(deadline, lockTimeout)) return false;
  if (remembered != current) rememberInode(file, trust, current, result.warnings_);
  return true;
}

bool LockedFile::settled(std::chrono::milliseconds lockTimeout) {
  if (!watchReplaced_) return true;
  // A Flink script that took the lock of a replaced copy while we changed this one (it was
  // blocked, or about to lock, when we looked) may have read the file before our change and
  // renamed its copy over it after: look again, and plan again where the file is another now.
  return waitWhileReplacedCopiesInUse(std::chrono::steady_clock::now() + lockTimeout, lockTimeout);
}

void LockedFile::readWithoutLock(const struct stat& opened) {
  const std::string subject = what_ + " " + path_.string();
  device_ = opened.st_dev;
  inode_ = opened.st_ino;
  mode_ = opened.st_mode & 0666;
  group_ = opened.st_gid;
  if (!sibling_) trust_ = SiblingTrust::of(opened);
  const auto readText = [&] {
    struct stat now {};
    if (::fstat(fd_.get(), &now) != 0) fail(StoreError::Cause::kIo, "cannot stat it", errno);
    if (static_cast<std::uint64_t>(now.st_size) > maxBytes_) {
      fail(StoreError::Cause::kRefused, "refusing to use it: " + std::to_string(now.st_size) +
                                            " bytes is more than a " + what_ + " holds (" +
                                            std::to_string(maxBytes_) + ")");
    }
    return readAll(fd_.get(), static_cast<std::uint64_t>(now.st_size), subject, "it");
  };
  // No lock at all (anyone who may read a file may hold its lock for ever): the journal and the
  // file read twice. A writer changes the journal before and after the file, so two rounds that
  // agree saw no change in between, and a sealed journal among them is rolled back.
  for (int attempt = 0; attempt < 200; ++attempt) {
    JournalRead first = readJournal();
    std::string text = readText();
    JournalRead second = readJournal();
    if (first.bytes == second.bytes && text == readText()) {
      text_ = std::move(text);
      recover(second);
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  fail(StoreError::Cause::kInterfered,
       "it kept changing while it was read without waiting for its lock");
}

FileDescriptor LockedFile::openJournal(bool create) {
  const fs::path journal = journalPathOf(path_);
  const std::string subject = what_ + " " + path_.string();
  const std::string what = subject + ": its journal";
  const bool write = writes();
  // A journal that someone else planted is moved aside where this process may (admitSibling):
  // then it is missing, and made anew where a change needs one.
  for (int attempt = 0; attempt < 8; ++attempt) {
    FileDescriptor fd(
        openSiblingNoFollow(journal, write ? O_RDWR : O_RDONLY, create, trust_, readers_));
    if (!fd) {
      const int error = errno;
      if (error == ENOENT) return fd;
      struct stat there {};
      if (error == ELOOP && ::lstat(journal.c_str(), &there) == 0 &&
          !admitSibling(what, journal, there, "it is a symbolic link", SiblingKind::kFile, trust_,
                        warnings_)) {
        continue;
      }
      if (error == ELOOP) {
        fail(StoreError::Cause::kRefused,
             "refusing to use its journal " + journal.string() + ": it is a symbolic link");
      }
      if (isAccessError(error)) {
        std::error_code ignored;
        if (fs::exists(fs::symlink_status(journal, ignored))) {
          failAccess(subject, path_, journal, "cannot open its journal", error);
        }
        failAccess(subject, path_, journal.parent_path(), "cannot create its journal in", error);
      }
      fail(StoreError::Cause::kIo, "cannot open its journal " + journal.string(), error);
    }
    struct stat info {};
    if (::fstat(fd.get(), &info) != 0)
      fail(StoreError::Cause::kIo, "cannot stat its journal " + journal.string(), errno);
    if (!admitSibling(what, journal, info, trust_, SiblingKind::kFile, warnings_)) continue;
    return fd;
  }
  fail(StoreError::Cause::kInterfered,
       "its journal " + journal.string() + " kept being replaced while it was opened");
}

LockedFile::JournalRead LockedFile::readJournal() {
  JournalRead read;
  read.fd = openJournal(/*create=*/false);
  if (!read.fd) return read;
  struct stat info {};
  if (::fstat(read.fd.get(), &info) != 0)
    fail(StoreError::Cause::kIo, "cannot stat its journal", errno);
  read.device = static_cast<std::uint64_t>(info.st_dev);
  read.inode = static_cast<std::uint64_t>(info.st_ino);
  // Old and new bytes of a file of at most maxBytes, and the headers.
  if (static_cast<std::uint64_t>(info.st_size) > 2 * maxBytes_ + (1 << 20)) {
    fail(StoreError::Cause::kRefused,
         "refusing to use its journal " + journalPathOf(path_).string() + ": " +
             std::to_string(info.st_size) + " bytes is more than a journal of it holds");
  }
  read.bytes = readAll(read.fd.get(), static_cast<std::uint64_t>(info.st_size),
                       what_ + " " + path_.string(), "its journal");
  return read;
}

FileDescriptor LockedFile::keptJournal() {
  FileDescriptor fd = std::move(journal_);
  if (!fd) return fd;
  // Replaced or removed since open() (by someone who does not hold the file's lock): that one is
  // opened, and checked, anew.
  struct stat there {};
  if (::lstat(journalPathOf(path_).c_str(), &there) != 0 ||
      static_cast<std::uint64_t>(there.st_dev) != journalDevice_ ||
      static_cast<std::uint64_t>(there.st_ino) != journalInode_) {
    return {};
  }
  return fd;
}

void LockedFile::recover(const JournalRead& journal) {
  if (!journal.bytes || journal.bytes->empty()) return;
  const std::optional<Journal> pending = decodeJournal(*journal.bytes);
  const std::optional<std::string> unfit =
      pending ? whyNotApplicable(*pending, maxBytes_) : std::nullopt;

  std::string note;
  std::optional<std::string> before;
  if (!pending) {
    // Its writer died before it sealed it, and so before it touched the file (or the journal
    // was damaged since: then the file may hold a change cut short, which cannot be undone).
    note =
        "discarded a journal that is not whole (a writer died while writing it, or it was "
        "damaged)";
  } else if (unfit) {
    // Sealed, but no writer of ours wrote it for this file: applying it could write anywhere.
    note = "discarded a journal that is not whole: " + *unfit + "; it was not applied";
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

  if (!writes()) {
    // Readers only look: the next writer puts the file back.
    if (before) {
      text_ = std::move(*before);
      note =
          "a change that its writer did not finish (it was killed) is shown rolled back; the "
          "next writer puts the file back";
    }
    if (!note.empty()) notes_.push_back(note);
    return;
  }
  if (before) {
    restore(text_, *before);
    text_ = std::move(*before);
  }
  while (::ftruncate(journal.fd.get(), 0) != 0) {
    if (errno != EINTR) fail(StoreError::Cause::kIo, "cannot truncate its journal", errno);
  }
  if (!note.empty()) notes_.push_back(note);
}

void LockedFile::writeAll(int fd, std::string_view bytes, std::uint64_t offset, const char* what) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n =
        ::pwrite(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(StoreError::Cause::kIo, std::string("cannot write ") + what, errno);
    done += static_cast<std::size_t>(n);
  }
}

namespace {

void truncateTo(int fd, std::uint64_t size, const std::function<void(int)>& onError) {
  while (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
    if (errno != EINTR) onError(errno);
  }
}

}  // namespace

void LockedFile::restore(const std::string& current, const std::string& target) {
  // Shrink first, so that no write lands past the end and leaves a gap of zeros; then put back
  // each page that differs. Every step leaves bytes of one side or the other of the change, so a
  // restore cut short is completed by the next opener like the change itself.
  std::string_view now = current;
  if (now.size() > target.size()) {
    truncateTo(fd_.get(), target.size(),
               [this](int error) { fail(StoreError::Cause::kIo, "cannot truncate it", error); });
    now = now.substr(0, target.size());
  }
  for (const WriteSpan& write : planWriteSpans(now, target, pageSize())) {
    writeAll(fd_.get(), writtenBytes(target, write), write.offset, "it");
  }
}

bool LockedFile::changedUnderLock() const {
  // Flink's script keeps writing after its own `sed -i` replaced the file, under the lock of the
  // file it replaced: appends we did not see would be overwritten.
  struct stat info {};
  const std::uint64_t size = ::fstat(fd_.get(), &info) == 0
                                 ? static_cast<std::uint64_t>(info.st_size)
                                 : static_cast<std::uint64_t>(text_.size());
  return changedWithoutItsLock(stillAtPath(), size, text_.size());
}

void LockedFile::replace(std::string text) {
  if (!writes()) fail(StoreError::Cause::kIo, "internal error: replace() on a file opened to read");
  if (text == text_) return;
  if (text.size() > maxBytes_ && text.size() > text_.size()) {
    fail(StoreError::Cause::kRefused,
         "refusing to grow it to " + std::to_string(text.size()) + " bytes, past the most a " +
             what_ + " holds (" + std::to_string(maxBytes_) + ")" +
             (sibling_ ? std::string()
                       : std::string("; `flink-gpu release --junk` removes the lines that are not "
                                     "records, and `release --gone` the records of gone owners")) +
             "; the file is unchanged");
  }
  if (changedUnderLock()) {
    interfered_ = true;
    return;
  }
  // The writes as spans of the two texts, and the journal written as it is encoded: a change of
  // a large file (release --junk reads up to kMaxRepairableFileBytes) holds no third copy of it.
  const std::vector<WriteSpan> writes = planWriteSpans(text_, text, pageSize());
  const std::string unchanged = "; the file is unchanged";
  const auto failJournal = [this](int error) {
    fail(StoreError::Cause::kIo, "cannot truncate its journal", error);
  };

  FileDescriptor journalFd = keptJournal();
  if (!journalFd) journalFd = openJournal(/*create=*/true);
  try {
    std::string buffer;
    std::uint64_t written = 0;
    const auto flush = [&] {
      writeAll(journalFd.get(), buffer, written, "its journal");
      written += buffer.size();
      buffer.clear();
    };
    constexpr std::size_t kBuffer = 1 << 16;
    const std::function<void(std::string_view)> sink = [&](std::string_view bytes) {
      if (buffer.size() + bytes.size() > kBuffer) flush();
      if (bytes.size() > kBuffer) {
        writeAll(journalFd.get(), bytes, written, "its journal");
        written += bytes.size();
      } else {
        buffer += bytes;
      }
    };
    encodeJournalTo(device_, inode_, text_, text, writes, sink);
    flush();
  } catch (const StoreError& e) {
    (void)::ftruncate(journalFd.get(), 0);
    throw StoreError(e.cause(), e.what() + unchanged);
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
      fail(StoreError::Cause::kIo, "cannot make room for " +
                                       std::to_string(text.size() - text_.size()) +
                                       " more bytes: " + errorText(error) + unchanged);
    }
  }

  std::string failure;
  StoreError::Cause failureCause = StoreError::Cause::kIo;
  try {
    for (const WriteSpan& write : writes) {
      writeAll(fd_.get(), writtenBytes(text, write), write.offset, "it");
    }
    // Past the new end, the writes left '\n' (see planWrites); cut it off.
    if (text.size() < text_.size()) {
      truncateTo(fd_.get(), text.size(),
                 [this](int error) { fail(StoreError::Cause::kIo, "cannot truncate it", error); });
    }
    truncateTo(journalFd.get(), 0, failJournal);
    text_ = std::move(text);
    return;
  } catch (const StoreError& e) {
    failure = e.what();
    failureCause = e.cause();
  }

  // Put the old bytes back (they fit: the space was theirs), from what the file holds now.
  try {
    struct stat info {};
    if (::fstat(fd_.get(), &info) != 0) fail(StoreError::Cause::kIo, "cannot stat it", errno);
    const std::string now = readAll(fd_.get(), static_cast<std::uint64_t>(info.st_size),
                                    what_ + " " + path_.string(), "it");
    restore(now, text_);
    truncateTo(journalFd.get(), 0, failJournal);
  } catch (const StoreError&) {
    throw StoreError(failureCause,
                     failure + "; putting it back failed too, so its journal " +
                         journalPathOf(path_).string() +
                         " keeps the change for the next user of the file to roll back");
  }
  throw StoreError(failureCause, failure + unchanged);
}

LockedFile::~LockedFile() {
  // Runs before fd_ closes (members are destroyed after the body).
  const process::FlockGuard unlock(fd_.get());
}

bool LockedFile::stillAtPath() const {
  struct stat current {};
  return ::lstat(path_.c_str(), &current) == 0 &&
         static_cast<std::uint64_t>(current.st_dev) == device_ &&
         static_cast<std::uint64_t>(current.st_ino) == inode_;
}

}  // namespace flink::store
