// Leases of GPUs by flock. See Leases.h.
#include "host/coordination/Leases.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

#include "host/enumeration/DeviceIdentifiers.h"
#include "host/enumeration/UnitIndex.h"
#include "host/liveness/OpenFiles.h"
#include "host/store/LockedFile.h"
#include "util/Strings.h"

namespace flink::coordination {
namespace {

namespace fs = std::filesystem;
using process::FileDescriptor;

[[noreturn]] void fail(store::StoreError::Cause cause, const fs::path& path,
                       const std::string& what, int error = 0) {
  std::string message = "lease " + path.string() + ": " + what;
  if (error != 0) message += ": " + std::string(std::strerror(error));
  throw store::StoreError(cause, message);
}

/// A name that is one path component of ours: letters, digits, '-', '.', '_'.
bool isSafeName(const std::string& name) {
  if (name.empty() || name == "." || name == ".." || name.size() > 200) return false;
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '.' || c == '_';
    if (!ok) return false;
  }
  return true;
}

/// A symlink (or something else) where a sibling should be: moved aside where this process may
/// (store::admitSibling: true, with a warning), else refused with its own stat.
bool moveAsideWhatIsThere(const std::string& what, const fs::path& path, SiblingKind kind,
                          const SiblingTrust& trust, std::vector<std::string>& warnings) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) {
    fail(store::StoreError::Cause::kRefused, path, "refusing to use it: it cannot be examined",
         errno);
  }
  return !store::admitSibling(what, path, info,
                              S_ISLNK(info.st_mode)          ? "it is a symbolic link"
                              : kind == SiblingKind::kFolder ? "it is not a folder"
                                                             : "it is not a regular file",
                              kind, trust, warnings);
}

/// The lease folder, opened without following a symlink and judged by `trust`; made (Siblings.h)
/// when `create`. Invalid when it is missing. One that fails the trust rules is moved aside where
/// this process may (`warnings`), and then missing.
FileDescriptor openFolder(const fs::path& folder, bool create, const SiblingTrust& trust,
                          std::vector<std::string>& warnings) {
  for (int attempt = 0; attempt < 4; ++attempt) {
    OpenedSibling opened = openSiblingAt(AT_FDCWD, folder, O_RDONLY | O_DIRECTORY);
    if (!opened.fd && opened.error == ENOENT && create) {
      const int error = createSiblingFolderAt(AT_FDCWD, folder, trust);
      if (error != 0 && error != EEXIST)
        fail(store::StoreError::causeOf(error), folder, "cannot create the lease folder", error);
      opened = openSiblingAt(AT_FDCWD, folder, O_RDONLY | O_DIRECTORY);
    }
    if (!opened.fd) {
      if (opened.error == ENOENT && !create) return {};
      if ((opened.error == ELOOP || opened.error == ENOTDIR) &&
          moveAsideWhatIsThere("lease folder", folder, SiblingKind::kFolder, trust, warnings)) {
        continue;
      }
      fail(store::StoreError::causeOf(opened.error), folder, "cannot open the lease folder",
           opened.error);
    }
    if (!store::admitSibling("lease folder", folder, opened.info, trust, SiblingKind::kFolder,
                             warnings)) {
      continue;  // moved aside
    }
    return std::move(opened.fd);
  }
  fail(store::StoreError::Cause::kInterfered, folder, "it kept being replaced while it was opened");
}

/// The lease file `name` of the open folder `dir`, checked; invalid with `error` set when it
/// cannot be opened (ENOENT: missing, or moved aside for failing the trust rules; EACCES: this
/// user may not open it).
OpenedSibling openLeaseFile(int dir, const fs::path& folder, const std::string& name,
                            const SiblingTrust& trust, std::vector<std::string>& warnings) {
  OpenedSibling opened = openSiblingAt(dir, name, O_RDONLY);
  if (!opened.fd) {
    if (opened.error == ELOOP &&
        moveAsideWhatIsThere("lease", folder / name, SiblingKind::kFile, trust, warnings)) {
      opened.error = ENOENT;
    }
    if (opened.error == ELOOP) {
      struct stat info {};
      (void)::lstat((folder / name).c_str(), &info);
      store::refuseSibling("lease", folder / name, info, "it is a symbolic link",
                           SiblingKind::kFile);
    }
    return opened;
  }
  if (!store::admitSibling("lease", folder / name, opened.info, trust, SiblingKind::kFile,
                           warnings)) {
    return OpenedSibling{{}, {}, ENOENT};
  }
  return opened;
}

bool isDenied(int error) { return error == EACCES || error == EPERM; }

/// Whether the file at `name` in `dir` is still the one `info` describes.
bool stillThere(int dir, const std::string& name, const struct stat& info) {
  struct stat current {};
  return ::fstatat(dir, name.c_str(), &current, AT_SYMLINK_NOFOLLOW) == 0 &&
         current.st_ino == info.st_ino && current.st_dev == info.st_dev;
}

}  // namespace

fs::path leaseFolderOf(const fs::path& file) {
  fs::path folder = file;
  folder += ".leases";
  return folder;
}

namespace {

/// `amd:00000000:05:00.3` → `amd-00000000-05-00.3`, `MIG-GPU-<uuid>/1/0` → `MIG-GPU-<uuid>.1.0`:
/// one path component.
std::string asFileName(std::string name, char colon, char slash) {
  std::replace(name.begin(), name.end(), ':', colon);
  std::replace(name.begin(), name.end(), '/', slash);
  return name;
}

constexpr std::string_view kBusPrefix = "pci-";
constexpr std::string_view kIndexPrefix = "index-";
constexpr std::string_view kMountMark = ".mnt-";
/// The mount namespace of an index alias taken where it could not be told (no /proc).
/// With the GPU's own lease name after it (`index-0.mnt-unknown.pci-…`): two such takers of
/// different GPUs that number theirs alike (sandboxes of different /dev) take different files.
constexpr std::string_view kUnknownMount = "unknown.";

bool isIndex(std::string_view id) { return strings::isDigits(id); }

/// The PCI bus id a lease name `pci-<domain>-<bus>-<device>.<function>` gives, in the index's
/// form (`pci-00000000-3B-00.0` → `00000000:3B:00.0`, discovery::canonicalPciBusId); nullopt for
/// any other name (one moved aside, `….untrusted-…`, too).
std::optional<std::string> busOfLeaseName(std::string_view name) {
  if (!name.starts_with(kBusPrefix)) return std::nullopt;
  std::string bus(name.substr(kBusPrefix.size()));
  const std::size_t first = bus.find('-');
  const std::size_t second = first == std::string::npos ? first : bus.find('-', first + 1);
  if (second == std::string::npos) return std::nullopt;
  bus[first] = ':';
  bus[second] = ':';
  return discovery::canonicalPciBusId(bus);
}

/// Whether a lease name is exactly a GPU's UUID (or a prefix of one): `GPU-….untrusted-…`, a file
/// moved aside, is not.
bool isUuidLeaseName(std::string_view name) {
  return device::isUuid(name) && device::isDeviceIdentifier(name);
}

/// Whether the mount namespace of an index alias is `unknown.` and a whole GPU's name, as
/// leaseNamesOf writes one where it cannot tell its mount namespace.
bool isUnknownMount(std::string_view mount) {
  if (!mount.starts_with(kUnknownMount)) return false;
  const std::string_view gpu = mount.substr(kUnknownMount.size());
  return busOfLeaseName(gpu) || (isUuidLeaseName(gpu) && !device::isMigUuid(gpu));
}

/// `index-<n>` or `index-<n>.mnt-<m>` taken apart.
struct IndexLeaseName {
  std::string_view index;
  /// The mount namespace: an inode number or `unknown.<primary>`; empty for a plain index.
  std::string_view mount;
};

/// The parts of an index lease name; nullopt for any other name, and for a mount namespace that
/// is neither an inode number nor `unknown.` and a whole GPU's name (a file moved aside,
/// `….untrusted-…`).
std::optional<IndexLeaseName> parseIndexLeaseName(std::string_view name) {
  if (!name.starts_with(kIndexPrefix)) return std::nullopt;
  IndexLeaseName parsed{name.substr(kIndexPrefix.size()), {}};
  if (const std::size_t mark = parsed.index.find(kMountMark); mark != std::string_view::npos) {
    parsed.mount = parsed.index.substr(mark + kMountMark.size());
    parsed.index = parsed.index.substr(0, mark);
    if (!isIndex(parsed.mount) && !isUnknownMount(parsed.mount)) return std::nullopt;
  }
  if (!isIndex(parsed.index)) return std::nullopt;
  return parsed;
}

}  // namespace

bool isIndexAliasLeaseName(std::string_view name) {
  const std::optional<ShareLeaseName> share = parseShareLeaseName(name);
  const std::optional<IndexLeaseName> parsed =
      parseIndexLeaseName(share ? std::string_view(share->gpuLease) : name);
  return parsed && !parsed->mount.empty();
}

std::vector<std::string> LeaseNames::all() const {
  std::vector<std::string> names{primary};
  names.insert(names.end(), aliases.begin(), aliases.end());
  return names;
}

LeaseNames leaseNamesOf(const discovery::UnitIndex& index, discovery::UnitRef ref,
                        const liveness::Reader& reader) {
  const discovery::Unit& unit = index[ref];
  LeaseNames names;
  if (unit.vendorUnit) {
    names.primary = asFileName(unit.id, '-', '_');
    return names;
  }
  if (unit.isMigInstance() || device::isMigUuid(unit.id)) {
    names.primary = asFileName(unit.id, ':', '.');
    // The older MIG form too, where the instance's place is known: an older allocator may name
    // it so.
    const std::optional<std::string> gpu = unit.parent ? index[*unit.parent].uuid : std::nullopt;
    if (!unit.id.starts_with("MIG-GPU-") && gpu && unit.gpuInstanceId && unit.computeInstanceId) {
      names.aliases.push_back("MIG-" + *gpu + "." + std::to_string(*unit.gpuInstanceId) + "." +
                              std::to_string(*unit.computeInstanceId));
    }
    return names;
  }
  if (unit.pciBusId) {
    names.primary = std::string(kBusPrefix) + asFileName(*unit.pciBusId, '-', '_');
    if (unit.uuid) names.aliases.push_back(*unit.uuid);
  } else if (unit.uuid) {
    names.primary = *unit.uuid;
  } else {
    names.primary = std::string(kIndexPrefix) + unit.id;
  }
  // The index in this mount namespace's numbering, for an allocator that knows the GPUs by index
  // alone; where the namespace cannot be told (no /proc), as of an unknown one.
  if (isIndex(unit.id) && reader.mountNamespace) {
    names.aliases.push_back(std::string(kIndexPrefix) + unit.id + std::string(kMountMark) +
                            std::to_string(*reader.mountNamespace));
  } else if (isIndex(unit.id) && (unit.pciBusId || unit.uuid)) {
    // The namespace cannot be told (no /proc): as of an unknown one, for an allocator that knows
    // the GPUs by index alone. (A GPU known by its index alone here has the plain `index-<n>`.)
    names.aliases.push_back(std::string(kIndexPrefix) + unit.id + std::string(kMountMark) +
                            std::string(kUnknownMount) + names.primary);
  }
  return names;
}

LeaseNames shareLeaseNamesOf(const LeaseNames& gpu, unsigned share) {
  const std::string suffix = ".share-" + std::to_string(share);
  LeaseNames names{gpu.primary + suffix, {}};
  for (const std::string& alias : gpu.aliases) names.aliases.push_back(alias + suffix);
  return names;
}

std::vector<discovery::UnitRef> unitsOfLeaseName(const discovery::UnitIndex& index,
                                                 std::string_view name,
                                                 const liveness::Reader& reader) {
  const auto one = [](std::optional<discovery::UnitRef> ref) {
    return ref ? std::vector<discovery::UnitRef>{*ref} : std::vector<discovery::UnitRef>{};
  };
  const auto nvidia = [&](std::optional<discovery::UnitRef> ref) {
    return ref && !index[*ref].vendorUnit ? ref : std::nullopt;
  };
  if (name.starts_with(kBusPrefix)) {
    const std::optional<std::string> bus = busOfLeaseName(name);
    return bus ? one(nvidia(index.byPciBusId(*bus))) : std::vector<discovery::UnitRef>{};
  }
  if (name.starts_with(kIndexPrefix)) {
    // A mount namespace is an inode number, or `unknown.` and the GPU's name; anything else (a
    // file moved aside, `….untrusted-…`) names no GPU.
    const std::optional<IndexLeaseName> parsed = parseIndexLeaseName(name);
    if (!parsed) return {};
    const std::optional<discovery::UnitRef> ref = nvidia(index.find(parsed->index));
    // A plain index names that GPU in any numbering, as a record by index does (an allocator that
    // knew nothing but the index took it).
    if (!ref || parsed->mount.empty()) return one(ref);
    // An index of a mount namespace's numbering came with the GPU's bus id or UUID, which name
    // it exactly where they are known: another namespace numbers the GPUs its own way, so its
    // index names another GPU here, or this one under those names. A unit known here by its
    // index alone (a --gpus list) cannot be matched to those names: the index names it, whatever
    // the numbering, and so where either side could not tell its namespace (fail closed, as a
    // record by index does).
    const discovery::Unit& unit = index[*ref];
    if (!unit.uuid && !unit.pciBusId) return one(ref);
    if (!isIndex(parsed->mount) || !reader.mountNamespace ||
        parsed->mount != std::to_string(*reader.mountNamespace)) {
      return {};
    }
    return one(ref);
  }
  if (vendorOfLeaseName(name) != "nvidia") {
    // amd-00000000-05-00.3 → amd:00000000:05:00.3; intel-…-5A-00.0_1 → intel:…:5A:00.0/1
    std::string record(name);
    std::size_t at = 0;
    for (int colons = 0; colons < 3; ++colons) {
      const std::size_t dash = record.find('-', at);
      if (dash == std::string::npos) return {};
      record[dash] = ':';
      at = dash + 1;
    }
    std::replace(record.begin(), record.end(), '_', '/');
    return one(index.find(record));
  }
  if (name.starts_with("MIG-GPU-")) {
    // MIG-GPU-<uuid>.<gi>.<ci>
    std::string record(name);
    const std::size_t last = record.rfind('.');
    if (last == std::string::npos || last == 0) return {};
    const std::size_t before = record.rfind('.', last - 1);
    if (before == std::string::npos) return {};
    record[last] = '/';
    record[before] = '/';
    return index.namedByRecord(record);
  }
  // Exactly a UUID or a prefix of one: `GPU-….untrusted-…`, a file moved aside, names none.
  if (isUuidLeaseName(name)) return index.namedByRecord(name);
  return {};
}

std::optional<ShareLeaseName> parseShareLeaseName(std::string_view name) {
  constexpr std::string_view kMark = ".share-";
  const std::size_t at = name.rfind(kMark);
  if (at == std::string_view::npos || at == 0) return std::nullopt;
  const std::string_view digits = name.substr(at + kMark.size());
  unsigned index = 0;
  if (digits.empty() || digits.size() > 4 || (digits.size() > 1 && digits.front() == '0')) {
    return std::nullopt;
  }
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return ShareLeaseName{std::string(name.substr(0, at)), index};
}

void Lease::keepAcrossExec() const {
  const int flags = ::fcntl(fd_.get(), F_GETFD);
  if (flags < 0 || ::fcntl(fd_.get(), F_SETFD, flags & ~FD_CLOEXEC) != 0) {
    throw store::StoreError(
        store::StoreError::Cause::kIo,
        "lease " + name_ + ": cannot keep it across exec: " + std::strerror(errno));
  }
}

namespace {

/// Refuses a lease name that is not one path component of ours, before anything is opened.
void refuseUnsafeName(const fs::path& folder, const std::string& name) {
  if (!isSafeName(name))
    fail(store::StoreError::Cause::kRefused, folder / name,
         "refusing a lease name that is not a plain file name");
}

/// tryAcquireLease's work in the lease folder `folder`, open as `dir` (checked by `trust`), its
/// warnings so far in `attempt`, for a name refuseUnsafeName let through.
LeaseAttempt acquireIn(int dir, const fs::path& folder, const std::string& name,
                       const SiblingTrust& trust, LeaseAttempt attempt) {
  const fs::path path = folder / name;
  for (int tries = 0; tries < 16; ++tries) {
    OpenedSibling opened = openLeaseFile(dir, folder, name, trust, attempt.warnings);
    if (!opened.fd && opened.error == ENOENT) {
      FileDescriptor created = createSiblingAt(dir, name, O_RDONLY, trust);
      if (!created) {
        if (errno == EEXIST) continue;  // made by someone else meanwhile: open that one
        if (isDenied(errno)) {
          attempt.failure = LeaseAttempt::Failure::kDenied;
          attempt.why = "this user may not create it: " + std::string(std::strerror(errno));
          return attempt;
        }
        fail(store::StoreError::causeOf(errno), path, "cannot create it", errno);
      }
      opened.fd = std::move(created);
      if (::fstat(opened.fd.get(), &opened.info) != 0)
        fail(store::StoreError::Cause::kIo, path, "cannot stat it", errno);
    }
    if (!opened.fd) {
      if (isDenied(opened.error)) {
        attempt.failure = LeaseAttempt::Failure::kDenied;
        attempt.why = "this user may not open it (" + describeOwnership([&] {
                        struct stat info {};
                        (void)::fstatat(dir, name.c_str(), &info, AT_SYMLINK_NOFOLLOW);
                        return info;
                      }()) +
                      ")";
        return attempt;
      }
      fail(store::StoreError::causeOf(opened.error), path, "cannot open it", opened.error);
    }
    while (::flock(opened.fd.get(), LOCK_EX | LOCK_NB) != 0) {
      if (errno == EINTR) continue;
      if (errno == EWOULDBLOCK) {
        attempt.failure = LeaseAttempt::Failure::kHeld;
        attempt.why = "it is held by another running process";
        return attempt;
      }
      fail(store::StoreError::causeOf(errno), path, "cannot lock it", errno);
    }
    // Whoever found it free before us may have removed it: then lock the file now there.
    if (stillThere(dir, name, opened.info)) {
      const LeaseFile held{static_cast<std::uint64_t>(opened.info.st_dev),
                           static_cast<std::uint64_t>(opened.info.st_ino)};
      attempt.lease.emplace(name, std::move(opened.fd), held);
      return attempt;
    }
  }
  fail(store::StoreError::Cause::kInterfered, path, "it kept being removed while it was taken");
}

}  // namespace

LeaseAttempt tryAcquireLease(const fs::path& file, const std::string& name,
                             const SiblingTrust& trust) {
  const fs::path folder = leaseFolderOf(file);
  refuseUnsafeName(folder, name);
  LeaseAttempt attempt;
  const FileDescriptor dir = openFolder(folder, /*create=*/true, trust, attempt.warnings);
  return acquireIn(dir.get(), folder, name, trust, std::move(attempt));
}

Lease acquireLease(const fs::path& file, const std::string& name) {
  LeaseAttempt attempt = tryAcquireLease(file, name, SiblingTrust::ofPath(file));
  if (!attempt.lease) {
    fail(attempt.failure == LeaseAttempt::Failure::kDenied ? store::StoreError::Cause::kAccessDenied
                                                           : store::StoreError::Cause::kLocked,
         leaseFolderOf(file) / name, attempt.why);
  }
  return std::move(*attempt.lease);
}

LeaseFolder LeaseFolder::open(const fs::path& file, const SiblingTrust& trust) {
  LeaseFolder folder;
  folder.path_ = leaseFolderOf(file);
  folder.trust_ = trust;
  folder.dir_ = openFolder(folder.path_, /*create=*/false, trust, folder.warnings_);
  if (!folder.dir_) return folder;  // no folder: no lease is held
  // fdopendir takes the descriptor it is given: list through a duplicate, keep ours for openat.
  const int listed = ::fcntl(folder.dir_.get(), F_DUPFD_CLOEXEC, 0);
  if (listed < 0)
    fail(store::StoreError::causeOf(errno), folder.path_, "cannot list the lease folder", errno);
  DIR* entries = ::fdopendir(listed);
  if (entries == nullptr) {
    const int error = errno;
    ::close(listed);
    fail(store::StoreError::causeOf(error), folder.path_, "cannot list the lease folder", error);
  }
  while (const dirent* entry = ::readdir(entries)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") folder.names_.insert(name);
  }
  ::closedir(entries);
  return folder;
}

bool LeaseFolder::isHeldLeaseFile(const liveness::OpenFileLook& look) const {
  // Unseen (another user's process, or one outside this pid namespace): held, as far as anyone
  // here can tell.
  if (!look.found) return !look.none;
  // The lease file, removed (its link reads "(deleted)") or moved aside (store::admitSibling)
  // while held: still within the coordination file's folder. A file elsewhere that has its old
  // inode number now (numbers are reused once a file is gone) is another's lock.
  const std::string& link = look.found->link;
  std::error_code error;
  const std::string folder =
      fs::absolute(path_, error).lexically_normal().parent_path().string() + "/";
  return link.starts_with(folder) && (link.ends_with(" (deleted)") || store::wasMovedAside(link));
}

LeaseState LeaseFolder::state(const std::string& name, const std::optional<LeaseFile>& file) {
  if (!isSafeName(name)) return LeaseState::kUnopenable;  // no lease of ours: cannot be shown free
  // The file the lease was taken on no longer has the name: whoever holds it still holds it.
  const auto unnamed = [&] {
    if (!file) return LeaseState::kMissing;
    if (!flocks_) flocks_.emplace(FlockTable::read());
    if (!*flocks_) return LeaseState::kMissing;
    const std::optional<pid_t> holder = (*flocks_)->holder(file->device, file->inode);
    if (!holder) return LeaseState::kMissing;
    return isHeldLeaseFile(liveness::openFileOfLock(*holder, file->device, file->inode))
               ? LeaseState::kHeld
               : LeaseState::kMissing;
  };
  if (!dir_ || !names_.count(name)) return unnamed();
  const OpenedSibling opened = openLeaseFile(dir_.get(), path_, name, *trust_, warnings_);
  if (!opened.fd) {
    if (opened.error == ENOENT) return unnamed();
    // This user may not open it: it cannot be shown free.
    if (isDenied(opened.error)) {
      denied_.insert(name);
      return LeaseState::kUnopenable;
    }
    fail(store::StoreError::causeOf(opened.error), path_ / name, "cannot open it", opened.error);
  }
  if (file && (static_cast<std::uint64_t>(opened.info.st_dev) != file->device ||
               static_cast<std::uint64_t>(opened.info.st_ino) != file->inode)) {
    return unnamed();  // another file now has the name
  }
  while (::flock(opened.fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    return LeaseState::kHeld;  // EWOULDBLOCK: held (by this process too, through another fd)
  }
  // A probe: the lock goes before the descriptor closes, so that a child forked meanwhile keeps
  // none (the lease would look held until it exits).
  const process::FlockGuard probe(opened.fd.get());
  return LeaseState::kFree;
}

LeaseAttempt LeaseFolder::tryAcquire(const fs::path& file, const std::string& name) {
  // Opened by open() under the same lock, with the same trust: not opened and checked again.
  if (!dir_) return tryAcquireLease(file, name, *trust_);
  refuseUnsafeName(path_, name);
  return acquireIn(dir_.get(), path_, name, *trust_, {});
}

void LeaseFolder::removeIfFree(const std::string& name) {
  if (!isSafeName(name) || !dir_ || !names_.count(name)) return;
  // Not openLeaseFile: what fails the trust rules (a symbolic link, a hard link, a file of a
  // user who may not write the coordination file) stays as it is, opened only to be looked at
  // (never through a link, never locked). This runs after the change was written: it may neither
  // fail the allocation nor move a file aside unheard (its warnings would come too late to be
  // told); an allocation that asks of that file judges it.
  const OpenedSibling opened = openSiblingAt(dir_.get(), name, O_RDONLY);
  if (!opened.fd || trust_->distrust(opened.info, SiblingKind::kFile)) return;
  if (::flock(opened.fd.get(), LOCK_EX | LOCK_NB) != 0) return;
  const process::FlockGuard removing(opened.fd.get());
  // Held by us now: nobody takes it before it is gone (takers hold the coordination file's lock).
  if (stillThere(dir_.get(), name, opened.info) && ::unlinkat(dir_.get(), name.c_str(), 0) == 0) {
    names_.erase(name);
  }
}

LeaseState leaseState(const fs::path& file, const std::string& name) {
  return LeaseFolder::open(file, SiblingTrust::ofPath(file)).state(name);
}

}  // namespace flink::coordination

namespace flink::coordination {

LeaseTake takeEveryName(LeaseSpace& space, const LeaseNames& names,
                        std::vector<std::string>& taken) {
  LeaseTake primary;
  for (const std::string& name : names.all()) {
    LeaseTake take = space.take(name);
    if (!take.file) return take;
    taken.push_back(name);
    if (name == names.primary) primary = std::move(take);
  }
  return primary;
}

FolderLeaseSpace::FolderLeaseSpace(const fs::path& file, const SiblingTrust& trust,
                                   std::unordered_map<std::string, Lease>& held)
    : file_(file), trust_(trust), folder_(LeaseFolder::open(file, trust)), held_(held) {}

std::vector<std::string> FolderLeaseSpace::names() {
  std::vector<std::string> names(folder_.names().begin(), folder_.names().end());
  for (const auto& [name, lease] : held_) {
    if (!folder_.names().count(name)) names.push_back(name);
  }
  std::sort(names.begin(), names.end());  // the same order whatever the hash table's
  return names;
}

LeaseState FolderLeaseSpace::state(const std::string& name, const std::optional<LeaseFile>& file) {
  if (const auto it = held_.find(name); it != held_.end()) {
    if (!file || *file == it->second.file()) return LeaseState::kHeld;
    return folder_.state(name, file);
  }
  if (file) return folder_.state(name, file);
  // Under the exclusive lock no allocator takes leases, so only a holder's death can change one
  // meanwhile (which frees, never takes): asked once.
  auto [it, inserted] = states_.try_emplace(name, LeaseState::kMissing);
  if (inserted) it->second = folder_.state(name);
  return it->second;
}

std::vector<std::string> FolderLeaseSpace::warnings() const {
  std::vector<std::string> all = folder_.warnings();
  all.insert(all.end(), warnings_.begin(), warnings_.end());
  return all;
}

LeaseTake FolderLeaseSpace::take(const std::string& name) {
  if (const auto it = held_.find(name); it != held_.end()) return {it->second.file(), {}, {}};
  LeaseAttempt attempt = folder_.tryAcquire(file_, name);
  warnings_.insert(warnings_.end(), attempt.warnings.begin(), attempt.warnings.end());
  if (!attempt.lease) return {std::nullopt, attempt.failure, attempt.why};
  const LeaseFile taken = attempt.lease->file();
  held_.emplace(name, std::move(*attempt.lease));
  return {taken, {}, {}};
}

void FolderLeaseSpace::removeFreeExcept(const std::unordered_set<std::string>& named) {
  for (const auto& [name, state] : states_) {
    if (state == LeaseState::kFree && !named.count(name) && !held_.count(name)) {
      folder_.removeIfFree(name);
    }
  }
  // The index aliases this allocation did not ask of: another mount namespace's numbering (a
  // container's, a sandbox's without /proc), which name no GPU to an allocator that knows the
  // GPUs' bus ids and UUIDs. Each namespace that took a GPU leaves one a GPU, and the allocators
  // of that numbering may never come back: removed here when free (removeIfFree takes the lease
  // for the moment of the removal; one held stays, and so does one that fails the trust rules).
  std::vector<std::string> aliases;
  for (const std::string& name : folder_.names()) {
    if (!states_.count(name) && !named.count(name) && !held_.count(name) &&
        isIndexAliasLeaseName(name)) {
      aliases.push_back(name);
    }
  }
  for (const std::string& name : aliases) folder_.removeIfFree(name);
}

}  // namespace flink::coordination
