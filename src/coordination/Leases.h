// Leases: GPUs held by a descriptor, which the kernel lets go when its process dies.
//
// A record says which process holds a GPU by its pid, which is only as good as /proc: a pid is
// reused, and one of another pid namespace cannot be seen at all. A lease does not depend on
// either: it is an exclusive flock on a file of its own for the GPU, in a folder beside the
// coordination file (`<file>.leases/<name>`), held by a descriptor of the worker. While the
// lock is held the GPU is held; once it is free (its holder died, however), any allocator takes
// the GPU back at once, whatever the record's pid says. Records of a lease say so
// (`lease=<name>`); records without one keep the pid rule.
//
// The folder and its files are opened without following symlinks, created with the coordination
// file's mode, and a free lease file is removed by whoever finds it free, while it holds both
// the lease and the coordination file's lock.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "coordination/CoordinationError.h"
#include "process/FileDescriptor.h"

namespace flink::coordination {

/// `<file>.leases`, the folder of a coordination file's leases.
std::filesystem::path leaseFolderOf(const std::filesystem::path& file);

/// The name of a unit's lease: its UUID (`GPU-…`, `MIG-…`) where known, so that every worker
/// means the same GPU whatever its numbering; else `index-<identifier>`.
std::string leaseNameOf(const std::string& unit,
                        const std::unordered_map<std::string, std::string>& uuids);

/// A lease held by this process. Move-only; the lease ends when the object is destroyed (its
/// descriptor closed) or the process dies.
class Lease {
 public:
  Lease(std::string name, process::FileDescriptor fd)
      : name_(std::move(name)), fd_(std::move(fd)) {}
  const std::string& name() const { return name_; }
  int descriptor() const { return fd_.get(); }
  /// Lets the descriptor survive execvp, so that the program exec'd holds the lease
  /// (`flink-gpu exec`). @throws CoordinationError when fcntl fails.
  void keepAcrossExec() const;

 private:
  std::string name_;
  process::FileDescriptor fd_;
};

/// Takes the lease `name` of coordination file `file`, creating the folder and the lease file
/// when missing, with `mode` (the coordination file's permission bits).
/// @throws CoordinationError when another process holds it, or it cannot be created or locked
///         (the message names the path and the cause).
Lease acquireLease(const std::filesystem::path& file, const std::string& name, mode_t mode);

/// The lease folder of a coordination file, opened and listed once: an allocation asks about
/// every GPU of the host, and only a lease file that exists can be held, so only those are
/// opened. Take it under the coordination file's exclusive lock, under which no allocator of
/// ours creates lease files (acquireLease runs under it): the listing then stays true.
class LeaseFolder {
 public:
  /// Opens and lists the folder of `file`; a missing folder holds no lease.
  /// @throws CoordinationError when the folder is not a folder or cannot be read.
  static LeaseFolder open(const std::filesystem::path& file);

  /// Whether the folder has no lease file.
  bool empty() const noexcept { return names_.empty(); }
  /// As leaseHeld, without listing again.
  bool held(const std::string& name, bool removeWhenFree);

 private:
  LeaseFolder() = default;
  process::FileDescriptor dir_;
  std::unordered_set<std::string> names_;
};

/// Whether some process holds the lease `name`. A lease file that nobody holds is removed when
/// `removeWhenFree` (call it only under the coordination file's exclusive lock). A lease whose
/// file cannot be opened is taken as held: it cannot be shown free.
bool leaseHeld(const std::filesystem::path& file, const std::string& name, bool removeWhenFree);

}  // namespace flink::coordination
