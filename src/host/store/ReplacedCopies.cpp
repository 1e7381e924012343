// The writers' decisions against Flink's `sed -i`. See ReplacedCopies.h.
#include "host/store/ReplacedCopies.h"

#include <algorithm>
#include <cstdio>

namespace flink::store {

std::string formatInodeMemory(const FileId& id) {
  std::string line = "device=" + std::to_string(id.device) + " inode=" + std::to_string(id.inode);
  line.resize(kInodeMemorySize - 1, ' ');
  line += '\n';
  return line;
}

std::optional<FileId> parseInodeMemory(std::string_view text) {
  char line[kInodeMemorySize + 1] = {};
  text.copy(line, std::min(text.size(), kInodeMemorySize));
  unsigned long long device = 0;
  unsigned long long inode = 0;
  if (std::sscanf(line, "device=%llu inode=%llu", &device, &inode) != 2) return std::nullopt;
  return FileId{device, inode};
}

std::vector<std::uint64_t> replacedCopiesToWatch(const std::optional<FileId>& remembered,
                                                 const FileId& current) {
  std::vector<std::uint64_t> copies;
  if (remembered && *remembered != current && remembered->device == current.device) {
    copies.push_back(remembered->inode);
  }
  return copies;
}

std::optional<pid_t> replacedCopyInUse(const liveness::FlockTable& locks, const FileId& file,
                                       pid_t self, const std::string& deletedLink,
                                       std::vector<std::uint64_t>& copies,
                                       std::unordered_set<std::uint64_t>& notCopies,
                                       const OpenFileProbe& openFileOfLock) {
  for (const liveness::FlockTable::Lock& lock : locks.onDevice(file.device)) {
    if (lock.inode == file.inode || lock.holder == self) continue;
    if (notCopies.count(lock.inode)) continue;
    const bool known = std::find(copies.begin(), copies.end(), lock.inode) != copies.end();
    // What the descriptors of the locked inode say, where this reader may look: an inode
    // remembered may since be another file's, which its link then shows.
    const liveness::OpenFileLook look = openFileOfLock(lock.holder, lock.inode);
    if (look.found && look.found->link == deletedLink) {
      if (!known) copies.push_back(lock.inode);
      return look.found->pid;
    }
    if (look.found || look.none) {
      notCopies.insert(lock.inode);
      continue;
    }
    // Not to be looked at (another user's, or unseen): a remembered copy is waited for.
    if (known) return lock.holder > 0 ? lock.holder : 0;
  }
  return std::nullopt;
}

}  // namespace flink::store
