// Who owns a file, in words for a message: "owner alice, group render, mode 0660".
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

}  // namespace flink::files
