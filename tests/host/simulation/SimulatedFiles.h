// A file system in memory, for the simulation of many allocators on one host: names (paths) that
// link inodes, the inodes' bytes, open file descriptions shared by the processes that hold a
// descriptor of them (across fork), and flock(2) as the kernel does it: a lock belongs to an open
// file description, is let go when the last descriptor of it closes (its last holder exits), and a
// blocked flock() is listed as a waiter until it gets the lock. The kernel's facts, nothing of our
// rules: those are the product's own functions, which the simulation calls.
//
// One device. Inode numbers are given as tmpfs gives them (always a new one), or as ext4 does (the
// lowest free one: a file's number comes back soon after the file is gone).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "SimulatedHost.h"

namespace flink::testing {

class SimulatedFiles {
 public:
  using ProcessId = SimulatedHost::ProcessId;
  using Inode = std::uint64_t;
  /// An open file description, by its place in the table.
  using Description = std::size_t;

  /// The device of every file (st_dev): 8:1, as /proc/locks writes it "08:01".
  static constexpr std::uint64_t kDevice = (8u << 8) | 1u;

  enum class InodeNumbers {
    kIncreasing,  ///< tmpfs: a new number for every file
    kLowestFree,  ///< ext4: the lowest number no file has, so freed numbers come back
  };

  /// Tells `host` where its flocks are (SimulatedHost::setFlocks); lives no longer than `host`.
  SimulatedFiles(SimulatedHost& host, InodeNumbers numbers);
  SimulatedFiles(const SimulatedFiles&) = delete;
  SimulatedFiles& operator=(const SimulatedFiles&) = delete;
  InodeNumbers numbers() const { return numbers_; }

  // ---- names ----
  /// The inode `path` names, if any.
  std::optional<Inode> lookup(const std::string& path) const;
  /// A new empty file at `path` (open(O_CREAT | O_EXCL)); `path` must not name one.
  Inode create(const std::string& path);
  /// rename(2): `from`'s inode gets the name `to`; the inode `to` named loses its name.
  void rename(const std::string& from, const std::string& to);
  /// unlink(2).
  void unlink(const std::string& path);
  /// The names in folder `folder` (those of `folder` + "/" + name, name without '/').
  std::vector<std::string> list(const std::string& folder) const;

  // ---- contents ----
  const std::string& contents(Inode inode) const { return inodes_.at(inode).contents; }
  std::string& contents(Inode inode) { return inodes_.at(inode).contents; }

  // ---- descriptions and descriptors ----
  /// A new open file description of `inode`, with one descriptor of it in `process`.
  Description open(ProcessId process, Inode inode);
  /// Another descriptor of `description` in `process` (dup, or a child's copy at fork).
  void share(ProcessId process, Description description);
  /// Closes one descriptor of `description` in `process`.
  void close(ProcessId process, Description description);
  /// Closes every descriptor of `process` (it exited).
  void closeAll(ProcessId process);
  /// The descriptions `process` holds a descriptor of (each once per descriptor).
  const std::vector<Description>& descriptorsOf(ProcessId process) const;
  Inode inodeOf(Description description) const { return descriptions_.at(description).inode; }
  /// Whether any process still holds a descriptor of it.
  bool isOpen(Description description) const { return descriptions_.at(description).count > 0; }

  // ---- flock ----
  /// flock(LOCK_EX | LOCK_NB) through `description`, called by `taker`: whether the description
  /// holds the lock now (it may hold it already). A blocked waiter of the same process stops
  /// waiting when it gets it.
  bool tryLock(Description description, ProcessId taker);
  /// A flock(LOCK_EX) that blocks: `waiter` is listed as waiting through `description` until it
  /// gets the lock (tryLock) or exits.
  void wait(Description description, ProcessId waiter);
  /// Whether `description` holds the lock of its inode.
  bool holdsLock(Description description) const;
  /// Every flock held or waited for, for the host's /proc/locks.
  std::vector<SimulatedHost::Flock> flocks() const;

  /// What /proc/<pid>/fd of `process` shows for a descriptor of `inode`, if it holds one: the
  /// file's name, or its last name and " (deleted)" once it has none.
  std::optional<std::string> linkOf(ProcessId process, Inode inode) const;

 private:
  struct InodeData {
    std::string contents;
    std::string lastName;
    int links = 0;
    int openDescriptions = 0;
    std::optional<Description> lockedBy;
    ProcessId taker = 0;
  };
  struct DescriptionData {
    Inode inode = 0;
    int count = 0;  // descriptors of it, in every process
  };
  struct Waiter {
    Description description = 0;
    ProcessId waiter = 0;
  };

  Inode newInode();
  void release(Description description);  // its last descriptor closed
  void freeIfUnused(Inode inode);

  InodeNumbers numbers_;
  Inode nextInode_ = 1835008;
  std::map<std::string, Inode> names_;
  std::map<Inode, InodeData> inodes_;
  std::vector<DescriptionData> descriptions_;
  std::unordered_map<ProcessId, std::vector<Description>> descriptors_;
  std::vector<Waiter> waiters_;
};

}  // namespace flink::testing
