// The decisions a writer of the coordination file makes against Flink's `sed -i`
// (docs/coordination-file.md, "Against Flink's script"), as functions of what the kernel tells and
// nothing else, so that LockedFile (which reads the real /proc) and the simulated host of the tests
// (tests/host/simulation/) decide alike:
//  - what `<file>.inode` says: the file our writers last saw;
//  - whether the file was replaced since, and which copies it replaced to watch then;
//  - whether a process still holds, or waits for, the lock of a copy the file replaced;
//  - whether the file was changed without its lock since it was read.
// Waiting, looking again and planning again are the caller's: LockedFile's loops, or the
// simulation's steps.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "host/liveness/HostFacts.h"
#include "host/liveness/OpenFiles.h"

namespace flink::store {

/// A file by its device and inode (st_dev, st_ino).
struct FileId {
  std::uint64_t device = 0;
  std::uint64_t inode = 0;
  friend bool operator==(const FileId&, const FileId&) = default;
};

/// `<file>.inode` holds one line of this size, written whole by one pwrite within a page.
inline constexpr std::size_t kInodeMemorySize = 64;

/// The line `<file>.inode` holds for `id`: "device=<n> inode=<n>", padded with spaces, then LF.
std::string formatInodeMemory(const FileId& id);

/// What a line of `<file>.inode` says; nullopt for anything else.
std::optional<FileId> parseInodeMemory(std::string_view text);

/// For a writer that holds the lock of the file `current`, and finds `remembered` in
/// `<file>.inode`: the inodes of copies the file replaced that are known (the remembered one, when
/// the file is another now, on the same device), to wait for even where no descriptor of theirs can
/// be looked at. Empty when the file is the one remembered; the writer still looks for copies in
/// use (replacedCopyInUse), since a script may lock a copy it opened before any of our writers
/// last looked (it stalled between open and flock) or a new file may have been given a remembered
/// inode number.
std::vector<std::uint64_t> replacedCopiesToWatch(const std::optional<FileId>& remembered,
                                                 const FileId& current);

/// For a flock that /proc/locks lists on inode `inode` of the file's device, with `holder` (0: one
/// this pid namespace cannot see, or gone): a descriptor of that inode as /proc/<pid>/fd shows it
/// (liveness::openFileOfLock on a real host).
using OpenFileProbe = std::function<liveness::OpenFileLook(pid_t holder, std::uint64_t inode)>;

/// One look of a writer that holds the lock of `file` (and is `self`, by its own pid) at the flocks
/// of the host (`locks`): the process (0: one this reader cannot name) that holds or waits for a
/// flock on a copy the file replaced, if any. A copy is an inode whose descriptor reads
/// `deletedLink` ("<file> (deleted)"; added to `copies` then), or, where no descriptor of it can be
/// looked at (another user's, or a process this reader cannot see), one of `copies` (the inode
/// remembered). A locked inode seen to be another file goes into `notCopies` and is not looked at
/// again: a process's descriptors of a replaced copy are all open already, none can open one now.
std::optional<pid_t> replacedCopyInUse(const liveness::FlockTable& locks, const FileId& file,
                                       pid_t self, const std::string& deletedLink,
                                       std::vector<std::uint64_t>& copies,
                                       std::unordered_set<std::uint64_t>& notCopies,
                                       const OpenFileProbe& openFileOfLock);

/// Whether the file was changed by someone who did not hold its lock since a writer read
/// `sizeRead` bytes of it under its lock: the path names another file now (`stillAtPath` false),
/// or its size is another (Flink's script appends after its own `sed -i`, holding the lock of the
/// file it replaced).
constexpr bool changedWithoutItsLock(bool stillAtPath, std::uint64_t size,
                                     std::uint64_t sizeRead) noexcept {
  return !stillAtPath || size != sizeRead;
}

}  // namespace flink::store
