// The owner of a process tree. See TreeOwner.h.
#include "host/coordination/TreeOwner.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "host/coordination/Leases.h"
#include "host/liveness/OpenFiles.h"

namespace flink::coordination {

std::vector<HeldLease> heldLeases(const std::filesystem::path& file) {
  std::vector<HeldLease> held;
  // A pid of /proc/locks or of /proc/<pid>/fd names a process of this pid namespace only where
  // /proc is this namespace's own; this process's own descriptors tell of it anywhere.
  const bool ownProc = liveness::HostFacts::system().reader().ownProc;
  try {
    const LeaseFolder folder = LeaseFolder::open(file, SiblingTrust::ofPath(file));
    if (folder.empty()) return held;
    const std::optional<FlockTable> flocks = ownProc ? FlockTable::read() : std::nullopt;
    const std::vector<liveness::FileKey> ownLocks = liveness::flocksHeldByThisProcess();
    const std::filesystem::path directory = leaseFolderOf(file);
    std::vector<std::string> names(folder.names().begin(), folder.names().end());
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      struct stat status {};
      if (::lstat((directory / name).c_str(), &status) != 0 || !S_ISREG(status.st_mode)) continue;
      const liveness::FileKey key{static_cast<std::uint64_t>(status.st_dev),
                                  static_cast<std::uint64_t>(status.st_ino)};
      if (flocks && flocks->held(key.device, key.inode)) {
        // /proc/locks names the lock's taker, which may be gone (its pid another process's now)
        // while a child it passed the descriptor to holds the lock: the holder is a process that
        // has the file open now.
        const liveness::OpenFileLook look = liveness::openFileOfLock(
            flocks->holder(key.device, key.inode).value_or(0), key.device, key.inode);
        if (look.found) {
          held.push_back({name, look.found->pid});
          continue;
        }
      }
      // Not listed (its taker is of another pid namespace: this process runs in a container a
      // worker started), or its holder not seen: this process's own lock, where it holds it.
      if (std::find(ownLocks.begin(), ownLocks.end(), key) != ownLocks.end()) {
        held.push_back({name, ::getpid()});
      } else if (flocks && flocks->held(key.device, key.inode)) {
        held.push_back({name, 0});
      }
    }
  } catch (const StoreError&) {
    // A folder that fails the trust rules holds no lease anyone may rely on.
    held.clear();
  }
  return held;
}

std::optional<TreeOwner> treeOwner(const std::vector<Record>& records,
                                   const std::vector<HeldLease>& leases, pid_t pid,
                                   liveness::HostFacts& facts) {
  const std::vector<Owner> chain = liveness::ancestry(pid, facts);
  for (std::size_t depth = 0; depth < chain.size(); ++depth) {
    TreeOwner found{chain[depth], depth, {}, {}};
    for (std::size_t i = 0; i < records.size(); ++i) {
      const Owner& owner = records[i].owner;
      if (owner.startTime && chain[depth].startTime && sameProcess(owner, chain[depth])) {
        found.records.push_back(i);
      }
    }
    for (const HeldLease& lease : leases) {
      if (lease.holder == chain[depth].pid) found.leases.push_back(lease.name);
    }
    if (!found.records.empty() || !found.leases.empty()) return found;
  }
  return std::nullopt;
}

std::vector<LeasedUnit> unitsOfLeases(const std::vector<std::string>& names,
                                      const discovery::UnitIndex& index,
                                      const liveness::Reader& reader) {
  std::vector<LeasedUnit> units;
  for (const std::string& name : names) {
    const std::optional<ShareLeaseName> share = parseShareLeaseName(name);
    for (const discovery::UnitRef unit :
         unitsOfLeaseName(index, share ? std::string_view(share->gpuLease) : name, reader)) {
      const LeasedUnit leased{unit, share ? std::optional<unsigned>(share->index) : std::nullopt};
      const bool seen = std::any_of(units.begin(), units.end(),
                                    [&](const LeasedUnit& other) { return other.unit == unit; });
      if (!seen) units.push_back(leased);
    }
  }
  return units;
}

}  // namespace flink::coordination
