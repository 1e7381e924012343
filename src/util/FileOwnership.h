// Who owns a file and what it is, in words for a message: "owner alice, group render, mode
// 0660", "a directory".
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

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

}  // namespace flink::files
