// The owner of a process tree. See TreeOwner.h.
#include "host/coordination/TreeOwner.h"

#include <sys/stat.h>

#include <algorithm>

#include "host/coordination/Leases.h"

namespace flink::coordination {

std::vector<HeldLease> heldLeases(const std::filesystem::path& file) {
  std::vector<HeldLease> held;
  try {
    const LeaseFolder folder = LeaseFolder::open(file, SiblingTrust::ofPath(file));
    if (folder.empty()) return held;
    const std::optional<FlockTable> flocks = FlockTable::read();
    if (!flocks) return held;
    const std::filesystem::path directory = leaseFolderOf(file);
    std::vector<std::string> names(folder.names().begin(), folder.names().end());
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      struct stat status {};
      if (::lstat((directory / name).c_str(), &status) != 0 || !S_ISREG(status.st_mode)) continue;
      if (!flocks->held(status.st_dev, status.st_ino)) continue;
      held.push_back({name, flocks->holder(status.st_dev, status.st_ino).value_or(0)});
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
      if (owner.startTime && sameProcess(owner, chain[depth])) found.records.push_back(i);
    }
    for (const HeldLease& lease : leases) {
      if (lease.holder == chain[depth].pid) found.leases.push_back(lease.name);
    }
    if (!found.records.empty() || !found.leases.empty()) return found;
  }
  return std::nullopt;
}

}  // namespace flink::coordination
