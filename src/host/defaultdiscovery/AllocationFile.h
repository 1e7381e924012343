// The allocation file: what `flink-gpu exec` gives its command in FLINK_GPU_ALLOCATION_FILE, so
// that a sidecar or a Python worker the command starts reads what it was granted (its GPUs as it
// sees them, their shares, the CPUs it was bound to) from one JSON document instead of parsing
// CUDA_VISIBLE_DEVICES and the share variables. The format is docs/command-line.md's (exec, "The
// allocation file").
//
// Two parts: what the file says (Allocation, allocationText, readAllocationFile), pure and
// tested alone; and where it lives (AllocationFile): a private folder of this user, made for one
// command, removed with everything in it once the command has ended. It is here and not in the
// CLI because it is part of handing a command its grant, as the default discovery hands a worker
// its answer: any program of this library that runs a command on a Grant would write the same
// file; and here the library's tests reach it.
//
// Who may be trusted: only this user. A folder is used only when it is a directory (not
// followed) owned by this user with mode 0700, and a file only when it is a regular file with one
// link, owned by this user, in such a folder; files are made with O_EXCL and O_NOFOLLOW, so that
// nothing another user put in the way is written through. The folder is made in a base that no
// other user may rename it out of, nor the base itself nor any folder above it
// (files::openFolderOthersMayNotReplace: each this user's or root's, sticky where others may write
// it, none a symbolic link), since the command finds the file by its path; and everything done in
// it afterwards (the file written, its entries and itself removed) is done through descriptors of
// the base and of the folder made, never by a path that someone could have pointed elsewhere in
// the meantime.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "process/FileDescriptor.h"

namespace flink::defaultdiscovery {

/// The "format" member: changed only when a reader that knows an earlier format would misread
/// the file; members may be added without changing it.
inline constexpr int kAllocationFileFormat = 1;

/// A unit's share (defaultdiscovery::ShareGrant), as the file tells it.
struct AllocatedShare {
  /// Its index and the declared number of shares (K) of its GPU.
  unsigned index = 0;
  unsigned count = 0;
  /// Each share's MiB, where the declaration knows the GPU's memory.
  std::optional<std::uint64_t> memoryMiB;
  /// Behind an MPS control daemon: its CUDA_MPS_PIPE_DIRECTORY and the command's
  /// CUDA_MPS_ACTIVE_THREAD_PERCENTAGE; both nullopt when time-sliced.
  std::optional<std::string> mpsPipeDirectory;
  std::optional<unsigned> mpsActiveThreadPercentage;

  friend bool operator==(const AllocatedShare&, const AllocatedShare&) = default;
};

/// One unit granted. A value that is not known is nullopt (null in the file), never made up.
struct AllocatedUnit {
  /// Its ordinal as the command sees it: its place ("0", "1", …) in the visible-devices variable
  /// the command got (CUDA_VISIBLE_DEVICES; ROCR_VISIBLE_DEVICES or ZE_AFFINITY_MASK).
  std::string index;
  std::optional<std::string> uuid;
  std::optional<std::string> pciBusId;
  std::optional<std::string> name;
  std::optional<std::uint64_t> memoryTotalMiB;
  /// For a share only.
  std::optional<AllocatedShare> share;

  friend bool operator==(const AllocatedUnit&, const AllocatedUnit&) = default;
};

/// What the file says.
struct Allocation {
  /// The process whose records hold the units (exec's pid; the enclosing exec's for a nested one).
  pid_t ownerPid = 0;
  /// In the order of the visible-devices variable.
  std::vector<AllocatedUnit> units;
  /// The CPUs the command was bound to (--bind-cpus), ascending; nullopt when it was not bound.
  std::optional<std::vector<unsigned>> cpus;

  friend bool operator==(const Allocation&, const Allocation&) = default;
};

/// The file's text: one JSON object, members in the documented order
/// ({"format": 1, "owner_pid", "units": [{"index", "uuid", "pci.bus_id", "name",
/// "memory.total", "share"?}], "cpus"}), indented by two spaces, ending with a newline. A unit's
/// "share" member is there only for a share.
std::string allocationText(const Allocation& allocation);

/// What the text of an allocation file says; nullopt when it is not an allocation file of format
/// 1 (not JSON, a member missing or of another type). Members it does not know are ignored.
std::optional<Allocation> parseAllocationText(std::string_view text);

/// Why `folder` is not private to this user, in words ("owner bob, mode 0755"); nullopt when it
/// is a directory (lstat: a symlink is not followed) owned by this process's effective user with
/// mode 0700.
std::optional<std::string> whyNotPrivateFolder(const std::filesystem::path& folder);

/// What the allocation file at `path` says, when this user may trust it: a regular file with one
/// link, owned by this user, in a private folder (whyNotPrivateFolder), and an allocation file
/// (parseAllocationText). nullopt otherwise, or when it cannot be read.
std::optional<Allocation> readAllocationFile(const std::filesystem::path& path);

/// A folder a private folder for an allocation file may be made in.
struct AllocationFolderBase {
  std::filesystem::path path;
  /// The variable that named it ("XDG_RUNTIME_DIR", "TMPDIR"), for a message; empty for /tmp.
  std::string variable;
  /// XDG_RUNTIME_DIR's rule: used only when private to this user (whyNotPrivateFolder). Else
  /// used only when no other user may replace what is made in it (files::whyOthersMayReplaceIn).
  /// Either way, every folder above it must pass files::whyOthersMayReplaceIn too.
  bool privateOnly = false;

  friend bool operator==(const AllocationFolderBase&, const AllocationFolderBase&) = default;
};

/// The folders a private folder for an allocation file may be made in, in the order to try them:
/// `xdgRuntimeDir` ($XDG_RUNTIME_DIR) when set and absolute (privateOnly); `tmpDir` ($TMPDIR)
/// when set and absolute; /tmp. A null or empty value is not set. Whether each may be used is
/// judged when the folder is made (AllocationFile::inNewFolder), on descriptors of it and of the
/// folders above it.
std::vector<AllocationFolderBase> allocationFolderBases(const char* xdgRuntimeDir,
                                                        const char* tmpDir);

/// An allocation file written for a command, removed (with its folder, when it made one) by the
/// destructor: once the command has ended, or when it is not run. Move-only; an empty one
/// (default-constructed, moved from) removes nothing. Not thread-safe.
class AllocationFile {
 public:
  AllocationFile() = default;
  AllocationFile(AllocationFile&& other) noexcept;
  AllocationFile& operator=(AllocationFile&& other) noexcept;
  AllocationFile(const AllocationFile&) = delete;
  AllocationFile& operator=(const AllocationFile&) = delete;
  ~AllocationFile();

  /// Makes a private folder "flink-gpu-exec.XXXXXX" (as mkdtemp, then mode 0700 whatever the
  /// umask) in the first of `bases` that may be used and takes one, and writes `text` into
  /// "allocation.json" in it, mode 0600, complete and closed when this returns. A base is opened
  /// from / down, one folder at a time, without following a symlink, and it and every folder
  /// above it judged on those descriptors (AllocationFolderBase,
  /// files::openFolderOthersMayNotReplace); one named by $TMPDIR that fails is passed over with a
  /// line in `warnings` saying why, naming the folder above it when that one failed (a
  /// runtime folder that is not private is passed over silently: one of another user, after su,
  /// is ordinary). The destructor removes the folder and everything in it: the files of exec's
  /// nested in this one's command too.
  /// @throws std::runtime_error naming the folders tried and why each failed.
  static AllocationFile inNewFolder(const std::vector<AllocationFolderBase>& bases,
                                    std::string_view text, std::vector<std::string>& warnings);

  /// Writes `text` into a new file "allocation-XXXXXX.json" (mode 0600) in the folder of
  /// `enclosing`, an enclosing exec's allocation file, which must be private to this user
  /// (whyNotPrivateFolder). The destructor removes this file only; the enclosing exec removes
  /// the folder, with whatever is left in it, once its own command has ended.
  /// @throws std::runtime_error naming the folder and why.
  static AllocationFile besideEnclosing(const std::filesystem::path& enclosing,
                                        std::string_view text);

  /// The file; empty for an empty one.
  const std::filesystem::path& path() const noexcept { return file_; }

  /// Removes now what the destructor would remove, and empties this. Never throws: what cannot
  /// be removed stays. The folder's entries are removed through its descriptor, and the folder
  /// itself only when what its name in the base holds is still the folder made: when something
  /// else is there (the folder was moved away and another put in its place), that is left
  /// alone, and so is the folder made, wherever it is now, emptied. @returns warnings (one line
  /// each) for what could not be removed or was left.
  std::vector<std::string> remove() noexcept;

 private:
  std::filesystem::path file_;
  /// The folder made for it, removed with it; empty when the folder is an enclosing exec's.
  std::filesystem::path folder_;
  /// The base the folder was made in (invalid when nested), and the folder that holds the file:
  /// the one made, or the enclosing exec's.
  process::FileDescriptor base_;
  process::FileDescriptor folderFd_;
  /// The folder's name in base_, or, when nested, the file's name in folderFd_.
  std::string name_;
};

}  // namespace flink::defaultdiscovery
