// Files beside the coordination file: its journal, the health records and their journal, the
// lease folder and its files, the watch lock, and any such file a later feature adds.
//
// Each of them can change what the coordination file means (a journal is applied to it, a lease
// keeps a GPU, a health record takes one out), so each is someone else's input until checked.
// The rule: trust no one who could not write the coordination file itself. A sibling is used
// only when it is
//   - a regular file with one link (a folder, for the lease folder), reached without following
//     a symlink at its last component;
//   - owned by root, by the coordination file's owner, by this user, or by a user who may write
//     the coordination file (a member of its group when it is group-writable; anyone when it is
//     world-writable), or of the coordination file's group when that group may write it;
//   - writable by no one the coordination file keeps out: by its group only when it is the
//     coordination file's group and that group may write the file (or anyone may), by others
//     only when anyone may write the file;
//   - for a folder that its group or others may write: sticky, so that no writer removes or
//     replaces another's files.
// A sibling that fails is never read, applied or written: the caller fails with an error naming
// the file, its owner and mode, and the fix.
//
// Siblings are made with the coordination file's mode and group, whatever the umask (a folder
// searchable where readable, and setgid where group-writable, so that its files keep the group),
// so that every user who may write the coordination file may use what another user made beside
// it. Without a coordination file (health records written before any allocation) the rules are
// those of a file this user would make: this user's, with the umask's mode.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "process/FileDescriptor.h"

namespace flink::store {

/// What a sibling is, for the rules (a folder) and the messages ("lease folder").
enum class SiblingKind { kFile, kFolder };

/// Who may read a sibling that is made: as the coordination file's mode says, or only those who
/// may write it too. A file that only writers use (the health records, locked by their writers)
/// is then out of reach of a reader who would hold its lock to stall them.
enum class SiblingReaders { kAsTheFile, kWritersOnly };

/// Who may write the coordination file: what every file beside it is judged against.
class SiblingTrust {
 public:
  /// Judged against a coordination file of this owner, group and mode (from its fstat).
  static SiblingTrust of(const struct stat& coordinationFile);
  /// Judged against the coordination file at `file` (lstat, not followed); unanchored when it
  /// is missing or cannot be examined.
  static SiblingTrust ofPath(const std::filesystem::path& file);
  /// No coordination file yet: judged as a file this user would make (owner: this user; mode:
  /// 0666 less the umask; group: this user's).
  static SiblingTrust unanchored();

  uid_t owner() const noexcept { return owner_; }
  gid_t group() const noexcept { return group_; }
  /// The coordination file's permission bits.
  mode_t mode() const noexcept { return mode_; }
  bool anchored() const noexcept { return anchored_; }

  /// Whether `user` could write the coordination file itself: root, its owner, a member of its
  /// group when it is group-writable, anyone when it is world-writable. Reads the user's groups
  /// (getgrouplist) only when asked of a group member's file.
  bool mayWrite(uid_t user) const;
  /// Whether this process could write the coordination file: mayWrite for its effective user, with
  /// the groups the process has (getgroups: also those given at run time, which the name service
  /// does not list, as systemd's SupplementaryGroups= and a pod's supplementalGroups give them).
  bool thisProcessMayWrite() const;

  /// Why a sibling with this stat (reached without following a symlink) may not be trusted, in
  /// words for a person ("group staff may write it, but may not write the coordination file");
  /// nullopt when it may be.
  std::optional<std::string> distrust(const struct stat& sibling, SiblingKind kind) const;

 private:
  SiblingTrust(bool anchored, uid_t owner, gid_t group, mode_t mode)
      : anchored_(anchored), owner_(owner), group_(group), mode_(mode) {}
  bool anchored_;
  uid_t owner_;
  gid_t group_;
  mode_t mode_;
};

/// "owner alice, group flink, mode 0644".
std::string describeOwnership(const struct stat& info);

/// Whether this process may move a sibling at `path` aside: root, or the coordination file's owner
/// when the folder is not sticky (and it may write it). Nobody else: in a sticky folder such as
/// /var/tmp only a file's owner or root may rename it.
bool mayMoveAside(const std::filesystem::path& path, const SiblingTrust& trust);

/// A sibling that fails the trust rules (`why`), planted by someone else, must never stop every
/// allocation of the host: where this process may (mayMoveAside), it is renamed to
/// `<path>.untrusted-<seconds>-<pid>` and kept for the operator to read, and the caller goes on as
/// if it were not there (making it anew where it makes it); a warning naming both paths is added
/// to `warnings`, and false returned. Where this process may not, it throws as refuseSibling.
/// True when `info` passes the rules. `info` is the stat of what is at `path` (a symlink's own).
bool admitSibling(const std::string& what, const std::filesystem::path& path,
                  const struct stat& info, const SiblingTrust& trust, SiblingKind kind,
                  std::vector<std::string>& warnings);

/// admitSibling for something that is no sibling at all (a symbolic link, a folder where a file
/// belongs): `why` says what.
bool admitSibling(const std::string& what, const std::filesystem::path& path,
                  const struct stat& info, const std::string& why, SiblingKind kind,
                  const SiblingTrust& trust, std::vector<std::string>& warnings);

/// The name a sibling at `path` is moved aside to: `<asideOf>.untrusted-<seconds>-<pid>`, where
/// `asideOf` is `path` itself, or for a file inside a folder of siblings (a lease) a path outside
/// that folder, so that nothing reads it there again.
std::filesystem::path asidePathOf(const std::filesystem::path& asideOf);
/// Whether `path` is one asidePathOf made (a file moved aside, maybe renamed since by nobody).
bool wasMovedAside(std::string_view path);

/// The error for a sibling that fails the rules: "<what> <path>: refusing to use it: <why>
/// (owner …, group …, mode …); remove it (`rm …`) …". Thrown as StoreError.
[[noreturn]] void refuseSibling(const std::string& what, const std::filesystem::path& path,
                                const struct stat& info, const std::string& why, SiblingKind kind);

/// An existing sibling opened without following a symlink at its last component.
struct OpenedSibling {
  process::FileDescriptor fd;
  struct stat info {};
  /// errno of the open or fstat when `fd` is invalid (ENOENT: there is none).
  int error = 0;
};

/// Opens the existing file `name` relative to the folder `dirfd` (AT_FDCWD: a path), never
/// creating it (with fs.protected_regular the kernel refuses O_CREAT on another user's file in a
/// sticky folder), with `flags` plus O_NOFOLLOW, O_NONBLOCK and O_CLOEXEC, and reads its stat.
OpenedSibling openSiblingAt(int dirfd, const std::filesystem::path& name, int flags);

/// Makes the file `name` relative to `dirfd` with O_CREAT | O_EXCL (and `flags`), then gives it
/// the coordination file's mode and group (the group only where this user may; the group's
/// bits are dropped where it may not). Invalid, with errno set, when it cannot be made (EEXIST
/// when it exists).
process::FileDescriptor createSiblingAt(int dirfd, const std::filesystem::path& name, int flags,
                                        const SiblingTrust& trust,
                                        SiblingReaders readers = SiblingReaders::kAsTheFile);

/// The sibling file `path`, opened with `flags` (openSiblingAt) where it passes the trust rules.
/// One that fails them, or that is no regular file (a symbolic link, a FIFO, a folder), is moved
/// aside where this process may (admitSibling: a line in `warnings`) and counts as missing then;
/// where it may not, admitSibling's error is thrown. A missing one is made when `create`
/// (createSiblingAt with `readers`), else returned with error ENOENT. A regular file that passes
/// the rules but that this process may not open is returned with the open's error.
/// @throws StoreError as refuseSibling, or naming the file when it cannot be made.
OpenedSibling openAdmittedSibling(const std::string& what, const std::filesystem::path& path,
                                  int flags, const SiblingTrust& trust,
                                  std::vector<std::string>& warnings, bool create,
                                  SiblingReaders readers = SiblingReaders::kAsTheFile);

/// Makes the folder `name` relative to `dirfd` with the coordination file's mode made
/// searchable, sticky where its group or others may write it, setgid where its group may, and the
/// coordination file's group. Returns 0, or the errno of why it could not be made (EEXIST).
int createSiblingFolderAt(int dirfd, const std::filesystem::path& name, const SiblingTrust& trust);

}  // namespace flink::store
