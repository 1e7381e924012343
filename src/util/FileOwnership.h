// Who owns a file and what it is, in words for a message: "owner alice, group render, mode
// 0660", "a directory"; why a path could not be opened, when a folder on its way is to blame; and
// the one rule of a shared folder no other user may replace what this user makes in, applied to
// the folder and to every folder above it.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>

namespace flink::files {

/// The user's and the group's names in the user and group databases; nullopt where there is none
/// (a uid or gid without an entry, as in a container).
std::optional<std::string> lookupUserName(uid_t uid);
std::optional<std::string> lookupGroupName(gid_t gid);

/// The names, else "uid 1000" / "gid 44".
std::string userName(uid_t uid);
std::string groupName(gid_t gid);

/// The permission bits as four octal digits: "0660".
std::string modeText(mode_t mode);

/// "owner alice, group flink, mode 0644".
std::string describeOwnership(const struct stat& info);

/// What st_mode says a file is: "a regular file", "a directory", "a symbolic link", "a socket",
/// "a FIFO", "a character device", "a block device", else "a file of another kind".
std::string kindOf(mode_t mode);

/// Why someone other than this user and root could remove or replace what this user makes in the
/// folder of this stat (fstat of it, or lstat: a symlink is not followed), in words ("it is a
/// symbolic link, not a folder", "its owner bob is neither this user nor root", "others may write
/// it and it lacks the sticky bit, so they may rename what is made in it and put something else
/// in its place"); nullopt when no one could: a folder owned by this user or root, writable by
/// its group or others only when sticky (as /tmp, mode 1777). The one rule for a shared folder
/// this user makes its own private files or folders in.
std::optional<std::string> whyOthersMayReplaceIn(const struct stat& folder);

/// A folder opened by openFolderOthersMayNotReplace, or why it was not.
struct FolderOnPath {
  /// The folder's descriptor (O_RDONLY | O_DIRECTORY | O_CLOEXEC), which the caller owns and
  /// closes (a process::FileDescriptor takes it); -1 when it was not opened or was refused.
  int fd = -1;
  /// Why it was refused or could not be opened; nullopt when fd is the folder's. About a folder
  /// above it, it says which first ("/scratch on its path: anyone may write it …").
  std::optional<std::string> why;
  /// The folder `why` is about, the folder itself or one on its path; the folder when it is used.
  std::filesystem::path where;
  /// The fstat of `where`, when it was opened (`opened`): its ownership, for a message.
  struct stat info {};
  bool opened = false;
  /// The errno of the open that failed (ENOENT, EACCES; ELOOP or ENOTDIR for what is no folder,
  /// a symbolic link too); 0 when every folder was opened.
  int error = 0;
};

/// Opens the absolute `folder` from "/" down, one folder at a time (openat, O_NOFOLLOW: a symbolic
/// link anywhere on the path is refused, not followed), and judges each on its descriptor: every
/// folder above it by whyOthersMayReplaceIn, since whoever may rename one of them away may put a
/// path of theirs in its place, and the folder itself by `rule` (whyOthersMayReplaceIn, or a
/// stricter one). The first that fails is `where`, and opening stops there. What is judged is what
/// is returned: the caller uses the descriptor, never the path again.
FolderOnPath openFolderOthersMayNotReplace(
    const std::filesystem::path& folder,
    std::optional<std::string> (*rule)(const struct stat&) = whyOthersMayReplaceIn);

/// Why `path` could not be opened or created, `error` being the errno of that open: when a folder
/// on its way is to blame, that folder named ("the folder /nodir does not exist" for ENOENT where
/// the file's folder is missing; "/etc/passwd is not a folder: it is a regular file" for ENOTDIR),
/// so that a mistyped path reads as one; else strerror(error). The one wording of it for every
/// file the store opens or creates.
std::string whyCannotOpen(const std::filesystem::path& path, int error);

}  // namespace flink::files
