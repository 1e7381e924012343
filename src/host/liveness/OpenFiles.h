// Which process has a file open, by the file's device and inode, as /proc/<pid>/fd shows it: what
// a flock listed in /proc/locks is on, when the name it was taken through names another file now
// (Flink's `sed -i` replaced it, someone removed or replaced a lease file) or the inode number may
// have been given to a new file since (inode numbers are reused once a file is gone).
//
// /proc/locks names a lock's taker, which is not always who holds the lock now: flock(1) locks a
// descriptor its shell keeps and exits (Flink's `flock -x 200`), and the kernel then shows pid 0.
// Such a lock is found through any process that has the file open, which only a reader that sees
// every process of the host (the initial pid namespace, its /proc mounted) can look for in full.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace flink::liveness {

/// A descriptor of a file, found in a process's /proc/<pid>/fd.
struct OpenFile {
  pid_t pid = 0;
  /// What the descriptor's link reads: the file's path when it was opened, as renames since left
  /// it, with " (deleted)" appended once its last name is gone.
  std::string link;
};

/// What a look for a descriptor of a file found.
struct OpenFileLook {
  /// One descriptor of the file, where one was seen.
  std::optional<OpenFile> found;
  /// Nothing was seen, and every process that may have the file open was looked at: none has.
  bool none = false;
};

/// The link text of a descriptor whose file has no name left: "<path> (deleted)".
std::string deletedLinkOf(const std::string& path);

/// For a flock on the file (`device`, `inode`) that /proc/locks lists with `holder` (0: one this
/// pid namespace cannot see, or gone): a descriptor of the file in the holder, or, where the holder
/// is gone, in any process this one may look at.
OpenFileLook openFileOfLock(pid_t holder, std::uint64_t device, std::uint64_t inode);

/// A file, by device and inode (st_dev, st_ino).
struct FileKey {
  std::uint64_t device = 0;
  std::uint64_t inode = 0;
  friend bool operator==(const FileKey&, const FileKey&) = default;
};

/// The files this process holds a flock on through one of its own descriptors (inherited or
/// opened), as /proc/self/fdinfo tells it: what it holds even where /proc/locks leaves the lock
/// out (its taker is of another pid namespace: a container started by a worker that holds a
/// GPU). Empty where /proc/self cannot be read.
std::vector<FileKey> flocksHeldByThisProcess();

}  // namespace flink::liveness
