// Leases: GPUs held by a descriptor, which the kernel lets go when its process dies.
//
// A record says which process holds a GPU by its pid and start time, which is only as good as
// /proc: a pid of another pid namespace cannot be seen at all, and a record without a start time
// cannot tell a reused pid. A lease does not depend on either: it is an exclusive flock on a file
// of its own for the GPU, in a folder beside the coordination file (`<file>.leases/<name>`), held
// by a descriptor of the worker. Records of a lease say so (`lease=<name>`).
//
// A lease only adds liveness (see Coordination.h): a held lease keeps its record, and a GPU no
// record names, alive; a free one frees only what its pid cannot judge. A lease file is removed
// only by an allocator, under the coordination file's lock and while holding the lease itself,
// once no record names it.
//
// The folder and its files are siblings of the coordination file (Siblings.h): never followed
// through a symlink, used only when they pass the trust rules, and made with the coordination
// file's mode and group (the folder sticky where others may write it, setgid where its group
// may). A lease file is opened read-only: flock needs no more, so every user who may read it may
// hold it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "host/enumeration/UnitIndex.h"
#include "host/liveness/Liveness.h"
#include "host/liveness/OpenFiles.h"
#include "host/store/LockedFile.h"
#include "host/store/RecordFile.h"
#include "host/store/Siblings.h"
#include "host/store/StoreError.h"
#include "process/FileDescriptor.h"

namespace flink::coordination {

// The store's names the coordination layer uses (host/store/).
using store::createSiblingAt;
using store::createSiblingFolderAt;
using store::describeOwnership;
using store::FlockTable;
using store::kDefaultLockTimeout;
using store::kMaxCoordinationFileBytes;
using store::kMaxRepairableFileBytes;
using store::LockedFile;
using store::OpenedSibling;
using store::openSiblingAt;
using store::refuseSibling;
using store::SiblingKind;
using store::SiblingReaders;
using store::SiblingTrust;
using store::StoreError;

/// `<file>.leases`, the folder of a coordination file's leases.
std::filesystem::path leaseFolderOf(const std::filesystem::path& file);

/// The names of a unit's lease files. Every allocator of the host must see a unit held, whatever
/// it knows of it: NVML's answer, nvidia-smi's, or only the index a --gpus list gives. So a lease
/// is named by what every allocator can compute, and taken under each name its taker knows:
///   - the primary name, recorded in `lease=`: a whole NVIDIA GPU's PCI bus id where known
///     (`pci-00000000-3B-00.0`: NVML, nvidia-smi and sysfs all know it, and it is the same in
///     every container); else its UUID (`GPU-…`); else `index-<n>`. A MIG instance's UUID
///     (`MIG-…`; the older `MIG-GPU-<uuid>/<gi>/<ci>` with `.` for `/`). An AMD or Intel unit's
///     record name with `-` for `:` and `_` for `/` (`amd-00000000-05-00.3`).
///   - aliases, taken too: a GPU's UUID, the name of every version before the bus id, so that an
///     older allocator sees it held; and for a unit of an index, `index-<n>.mnt-<mount namespace>`,
///     the index in this mount namespace's numbering (which decides what /dev holds and so how
///     NVML numbers the GPUs), which an allocator of the same numbering that knows nothing but
///     the index sees (D4 of docs/coordination-file.md); where the taker cannot tell its mount
///     namespace (no /proc), `index-<n>.mnt-unknown.<primary>` (of a GPU with a bus id or UUID).
/// An allocator checks every lease file there is, whatever its name (unitsOfLeaseName).
struct LeaseNames {
  std::string primary;
  std::vector<std::string> aliases;

  /// primary, then the aliases.
  std::vector<std::string> all() const;
};

/// The names of unit `unit` of `index`'s lease, as `reader` names them (its mount namespace).
LeaseNames leaseNamesOf(const discovery::UnitIndex& index, discovery::UnitRef unit,
                        const liveness::Reader& reader);

/// The names of share `share` of a GPU whose lease is `gpu`: each with `.share-<share>`
/// (`pci-….share-1`). A GPU's whole lease and each of its shares' are distinct files, so that a
/// share holder never blocks another share, and a whole request sees every share's.
LeaseNames shareLeaseNamesOf(const LeaseNames& gpu, unsigned share);

/// The units of `index` that the lease file `name` holds (a share lease's: its GPU's), by the
/// index's record reading for every form above and the older ones: `GPU-…` and `MIG-…` (a prefix
/// names every GPU whose UUID begins so), `index-<n>` (as a record by index names it: in any
/// numbering), `index-<n>.mnt-<m>` (m an inode number or `unknown.<primary>`: where m is
/// `reader`'s mount namespace; and for a unit the index knows by its index alone, which cannot be
/// matched to the lease's other names, whatever m is), `pci-…`, the AMD and Intel forms. Empty
/// for a name of no unit of the index, or of no form above (a file moved aside).
std::vector<discovery::UnitRef> unitsOfLeaseName(const discovery::UnitIndex& index,
                                                 std::string_view name,
                                                 const liveness::Reader& reader);

/// Whether `name` is an index alias of any mount namespace's numbering, `index-<n>.mnt-<m>` (m an
/// inode number or `unknown.<primary>`), or a share's (`….share-<k>`): what leaseNamesOf writes for
/// a unit of an index, wherever it was taken. A plain `index-<n>` is not one, nor a file moved
/// aside.
bool isIndexAliasLeaseName(std::string_view name);

/// "amd" or "intel" for a lease of their units (their record name with `-` for `:`), else
/// "nvidia": the vendor of the unit a lease file holds, as device::vendorOfUnit for a record.
constexpr std::string_view vendorOfLeaseName(std::string_view name) noexcept {
  if (name.starts_with("amd-")) return "amd";
  if (name.starts_with("intel-")) return "intel";
  return "nvidia";
}

/// A share lease's name taken apart: the whole GPU's lease name and the share's index.
struct ShareLeaseName {
  std::string gpuLease;
  unsigned index = 0;
};

/// The parts of a share lease's name, or nullopt when `name` is not one.
std::optional<ShareLeaseName> parseShareLeaseName(std::string_view name);

/// Which file a lease was taken on (st_dev, st_ino): recorded beside its name, so that a lease
/// file removed or replaced while its lease is held frees nothing.
struct LeaseFile {
  std::uint64_t device = 0;
  std::uint64_t inode = 0;
  friend bool operator==(const LeaseFile&, const LeaseFile&) = default;
};

/// What a lease file says of its lease (host/liveness/Liveness.h).
using liveness::LeaseState;

/// Whether a lease of this state keeps its GPU from others: held, or not to be shown free.
constexpr bool leaseBlocks(LeaseState state) noexcept {
  return state == LeaseState::kHeld || state == LeaseState::kUnopenable;
}

/// A lease held by this process. Move-only; the lease ends when the object is destroyed (its
/// descriptor closed) or the process dies.
class Lease {
 public:
  Lease(std::string name, process::FileDescriptor fd, LeaseFile file)
      : name_(std::move(name)), fd_(std::move(fd)), file_(file) {}
  const std::string& name() const { return name_; }
  /// The file it is held on.
  const LeaseFile& file() const { return file_; }
  int descriptor() const { return fd_.get(); }
  /// Lets the descriptor survive execvp, so that the program exec'd holds the lease
  /// (`flink-gpu exec`). @throws store::StoreError when fcntl fails.
  void keepAcrossExec() const;

 private:
  std::string name_;
  process::FileDescriptor fd_;
  LeaseFile file_;
};

/// The outcome of trying to take a lease.
struct LeaseAttempt {
  enum class Failure {
    kNone,    ///< `lease` holds it
    kHeld,    ///< another process holds it
    kDenied,  ///< this user may not open its file: the GPU is passed over, never fatal
  };
  std::optional<Lease> lease;
  Failure failure = Failure::kNone;
  /// Why, for a person, when it failed.
  std::string why;
  /// What an operator must hear of: a lease folder or file that failed the trust rules, moved
  /// aside (store::admitSibling).
  std::vector<std::string> warnings = {};
};

/// Tries to take the lease `name` of coordination file `file`, creating the folder and the lease
/// file when missing (with `trust`'s mode and group). Call it under the coordination file's
/// exclusive lock.
/// @throws store::StoreError for a folder or file that fails the trust rules, a name that is not
///         a plain file name, or an error other than the two failures above.
LeaseAttempt tryAcquireLease(const std::filesystem::path& file, const std::string& name,
                             const SiblingTrust& trust);

/// As tryAcquireLease, judged against the coordination file at `file`; every failure throws.
/// @throws store::StoreError naming the path and the cause.
Lease acquireLease(const std::filesystem::path& file, const std::string& name);

/// The lease folder of a coordination file, opened and listed once: an allocation asks about
/// every GPU of the host, and only a lease file that exists can be held, so only those are
/// opened. Take it under the coordination file's lock, under which no allocator of ours creates
/// lease files (tryAcquireLease runs under the exclusive one): the listing then stays true.
class LeaseFolder {
 public:
  /// Opens and lists the folder of `file`, judged by `trust`; a missing folder holds no lease.
  /// @throws store::StoreError when the folder fails the trust rules or cannot be read.
  static LeaseFolder open(const std::filesystem::path& file, const SiblingTrust& trust);

  /// Whether the folder has no lease file.
  bool empty() const noexcept { return names_.empty(); }
  /// The names of the lease files listed.
  const std::unordered_set<std::string>& names() const noexcept { return names_; }
  /// The state of the lease `name`, taken on `file` where the record says. A name that is not a
  /// plain file name, or a file this user may not open, is kUnopenable (it cannot be shown free).
  /// When the file at the name is not `file` (removed, replaced), it is held where /proc/locks
  /// lists a lock on `file` (FlockTable), else missing: never free, since /proc/locks may leave its
  /// holder out.
  /// @throws store::StoreError for a lease file that fails the trust rules.
  LeaseState state(const std::string& name, const std::optional<LeaseFile>& file = std::nullopt);
  /// Whether state(name) found a lease file this user may not open (kUnopenable).
  bool denied(const std::string& name) const { return denied_.count(name) > 0; }
  /// The folder or lease files that failed the trust rules and were moved aside, one line each.
  const std::vector<std::string>& warnings() const noexcept { return warnings_; }
  /// tryAcquireLease of the lease `name` of coordination file `file` (this folder's), with the
  /// trust given to open(), through the folder as opened there; where it was missing, as
  /// tryAcquireLease (which makes it) does.
  LeaseAttempt tryAcquire(const std::filesystem::path& file, const std::string& name);
  /// Removes the lease file `name` if nobody holds it (taking it for the moment of the removal)
  /// and it passes the trust rules; one that fails them is left as it is, neither moved aside nor
  /// reported, and no error is thrown (it runs after an allocation's change was written). Call
  /// it only under the coordination file's exclusive lock, for a lease no record names.
  void removeIfFree(const std::string& name);

 private:
  /// Whether a flock on the file a lease was taken on, now unnamed, is the lease's still (`look`:
  /// the file's descriptors, liveness::openFileOfLock).
  bool isHeldLeaseFile(const liveness::OpenFileLook& look) const;
  LeaseFolder() = default;
  std::filesystem::path path_;
  std::optional<SiblingTrust> trust_;  // set by open()
  process::FileDescriptor dir_;
  std::unordered_set<std::string> names_;
  std::unordered_set<std::string> denied_;
  std::vector<std::string> warnings_;
  /// /proc/locks, read at the first lease whose file has lost its name (nullopt inside: unread).
  std::optional<std::optional<FlockTable>> flocks_;
};

/// What taking a lease for an allocation gave.
struct LeaseTake {
  /// The file it is held on, when it was had.
  std::optional<LeaseFile> file;
  LeaseAttempt::Failure failure = LeaseAttempt::Failure::kNone;
  /// Why, for a person, when it failed.
  std::string why;
};

/// What the allocation rule asks of the leases of one coordination file, under its exclusive
/// lock: the seam between the rule (Coordination.h's planAllocation, ShareAllocation.h) and the
/// lease folder, so that the rule's tests and the simulated host reach every lease decision.
class LeaseSpace {
 public:
  virtual ~LeaseSpace() = default;
  /// The names of the lease files there are, and of those this allocation took.
  virtual std::vector<std::string> names() = 0;
  /// The state of lease `name`, taken on `file` where a record says; a lease this allocation took
  /// is held.
  virtual LeaseState state(const std::string& name, const std::optional<LeaseFile>& file) = 0;
  /// Takes lease `name` for this allocation; one taken already is taken again (its file).
  virtual LeaseTake take(const std::string& name) = 0;
  /// Whether this allocation took lease `name` (in this attempt or an earlier one).
  virtual bool holds(const std::string& name) const = 0;
};

/// Takes every name of `names` through `space` (a unit is leased under each name it has, so that
/// every allocator sees it held), adding each one taken to `taken`: the take of the primary name,
/// or the first that failed.
LeaseTake takeEveryName(LeaseSpace& space, const LeaseNames& names,
                        std::vector<std::string>& taken);

/// The lease folder of coordination file `file` as a LeaseSpace: states read once each, leases
/// taken with tryAcquireLease into `held` (kept by the caller across the attempts of one
/// allocation, and moved out for what it grants).
class FolderLeaseSpace final : public LeaseSpace {
 public:
  /// @throws store::StoreError as LeaseFolder::open.
  FolderLeaseSpace(const std::filesystem::path& file, const SiblingTrust& trust,
                   std::unordered_map<std::string, Lease>& held);
  std::vector<std::string> names() override;
  LeaseState state(const std::string& name, const std::optional<LeaseFile>& file) override;
  LeaseTake take(const std::string& name) override;
  bool holds(const std::string& name) const override { return held_.count(name) > 0; }
  /// What an operator must hear of: lease folders or files moved aside for failing the trust
  /// rules, one line each.
  std::vector<std::string> warnings() const;
  /// Removes the free lease files that no name of `named` is and this allocation does not hold
  /// (a GPU given back by a driver or ended by exec leaves its file until then): those whose
  /// state it asked, and every index alias (isIndexAliasLeaseName), of whichever mount namespace.
  /// Call it after a change was written, under the coordination file's exclusive lock.
  void removeFreeExcept(const std::unordered_set<std::string>& named);

 private:
  std::filesystem::path file_;
  SiblingTrust trust_;
  LeaseFolder folder_;
  std::unordered_map<std::string, Lease>& held_;
  std::unordered_map<std::string, LeaseState> states_;  // names asked without a file
  std::vector<std::string> warnings_;                   // of the leases taken
};

/// A LeaseSpace that only answers states, from `probe` (tests; a read-only look), of the lease
/// files `names`; none can be taken.
class ProbeLeaseSpace final : public LeaseSpace {
 public:
  explicit ProbeLeaseSpace(
      std::function<LeaseState(const std::string&, const std::optional<LeaseFile>&)> probe,
      std::vector<std::string> names = {})
      : probe_(std::move(probe)), names_(std::move(names)) {}
  std::vector<std::string> names() override { return names_; }
  LeaseState state(const std::string& name, const std::optional<LeaseFile>& file) override {
    return probe_ ? probe_(name, file) : LeaseState::kMissing;
  }
  LeaseTake take(const std::string&) override {
    return {std::nullopt, LeaseAttempt::Failure::kDenied, "no lease can be taken here"};
  }
  bool holds(const std::string&) const override { return false; }

 private:
  std::function<LeaseState(const std::string&, const std::optional<LeaseFile>&)> probe_;
  std::vector<std::string> names_;
};

/// The state of the lease `name` of coordination file `file`, judged against it.
/// @throws store::StoreError as LeaseFolder does.
LeaseState leaseState(const std::filesystem::path& file, const std::string& name);

}  // namespace flink::coordination
