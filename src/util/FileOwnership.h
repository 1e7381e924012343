// Who owns a file and what it is, in words for a message: "owner alice, group render, mode
// 0660", "a directory"; and why a path could not be opened, when a folder on its way is to blame.
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

/// Why `path` could not be opened or created, `error` being the errno of that open: when a folder
/// on its way is to blame, that folder named ("the folder /nodir does not exist" for ENOENT where
/// the file's folder is missing; "/etc/passwd is not a folder: it is a regular file" for ENOTDIR),
/// so that a mistyped path reads as one; else strerror(error). The one wording of it for every
/// file the store opens or creates.
std::string whyCannotOpen(const std::filesystem::path& path, int error);

}  // namespace flink::files
