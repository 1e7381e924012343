// The simulated file system. See SimulatedFiles.h.
#include "SimulatedFiles.h"

#include <algorithm>
#include <stdexcept>

namespace flink::testing {

SimulatedFiles::SimulatedFiles(SimulatedHost& host, InodeNumbers numbers) : numbers_(numbers) {
  host.setFlocks([this] { return flocks(); });
}

std::optional<SimulatedFiles::Inode> SimulatedFiles::lookup(const std::string& path) const {
  const auto it = names_.find(path);
  if (it == names_.end()) return std::nullopt;
  return it->second;
}

SimulatedFiles::Inode SimulatedFiles::newInode() {
  Inode inode = nextInode_;
  if (numbers_ == InodeNumbers::kLowestFree) {
    inode = 1835008;
    while (inodes_.count(inode)) ++inode;
  } else {
    ++nextInode_;
  }
  inodes_.emplace(inode, InodeData{});
  return inode;
}

SimulatedFiles::Inode SimulatedFiles::create(const std::string& path) {
  if (names_.count(path)) throw std::logic_error("simulated files: " + path + " exists");
  const Inode inode = newInode();
  InodeData& data = inodes_[inode];
  data.links = 1;
  data.lastName = path;
  names_[path] = inode;
  return inode;
}

void SimulatedFiles::rename(const std::string& from, const std::string& to) {
  const auto source = names_.find(from);
  if (source == names_.end()) throw std::logic_error("simulated files: no " + from);
  const Inode moved = source->second;
  names_.erase(source);
  if (const auto target = names_.find(to); target != names_.end()) {
    const Inode replaced = target->second;
    if (replaced != moved) {
      --inodes_.at(replaced).links;
      names_.erase(target);
      freeIfUnused(replaced);
    }
  }
  names_[to] = moved;
  inodes_.at(moved).lastName = to;
}

void SimulatedFiles::unlink(const std::string& path) {
  const auto it = names_.find(path);
  if (it == names_.end()) return;
  const Inode inode = it->second;
  names_.erase(it);
  --inodes_.at(inode).links;
  freeIfUnused(inode);
}

std::vector<std::string> SimulatedFiles::list(const std::string& folder) const {
  std::vector<std::string> names;
  const std::string prefix = folder + "/";
  for (auto it = names_.lower_bound(prefix); it != names_.end() && it->first.starts_with(prefix);
       ++it) {
    const std::string name = it->first.substr(prefix.size());
    if (name.find('/') == std::string::npos) names.push_back(name);
  }
  return names;
}

void SimulatedFiles::freeIfUnused(Inode inode) {
  const InodeData& data = inodes_.at(inode);
  if (data.links <= 0 && data.openDescriptions <= 0) inodes_.erase(inode);
}

SimulatedFiles::Description SimulatedFiles::open(ProcessId process, Inode inode) {
  ++inodes_.at(inode).openDescriptions;
  descriptions_.push_back(DescriptionData{inode, 0});
  const Description description = descriptions_.size() - 1;
  share(process, description);
  return description;
}

void SimulatedFiles::share(ProcessId process, Description description) {
  ++descriptions_.at(description).count;
  descriptors_[process].push_back(description);
}

void SimulatedFiles::close(ProcessId process, Description description) {
  std::vector<Description>& held = descriptors_[process];
  const auto it = std::find(held.begin(), held.end(), description);
  if (it == held.end()) throw std::logic_error("simulated files: closing a descriptor not held");
  held.erase(it);
  if (--descriptions_.at(description).count == 0) release(description);
}

void SimulatedFiles::closeAll(ProcessId process) {
  // A process that exits waits for nothing any more.
  std::erase_if(waiters_, [&](const Waiter& waiter) { return waiter.waiter == process; });
  const auto it = descriptors_.find(process);
  if (it == descriptors_.end()) return;
  const std::vector<Description> held = std::move(it->second);
  descriptors_.erase(it);
  for (const Description description : held) {
    if (--descriptions_.at(description).count == 0) release(description);
  }
}

void SimulatedFiles::release(Description description) {
  const Inode inode = descriptions_.at(description).inode;
  InodeData& data = inodes_.at(inode);
  if (data.lockedBy == description) data.lockedBy.reset();
  std::erase_if(waiters_, [&](const Waiter& waiter) { return waiter.description == description; });
  --data.openDescriptions;
  freeIfUnused(inode);
}

const std::vector<SimulatedFiles::Description>& SimulatedFiles::descriptorsOf(
    ProcessId process) const {
  static const std::vector<Description> none;
  const auto it = descriptors_.find(process);
  return it == descriptors_.end() ? none : it->second;
}

bool SimulatedFiles::tryLock(Description description, ProcessId taker) {
  InodeData& data = inodes_.at(descriptions_.at(description).inode);
  if (data.lockedBy && *data.lockedBy != description) return false;
  if (!data.lockedBy) {
    data.lockedBy = description;
    data.taker = taker;
  }
  std::erase_if(waiters_, [&](const Waiter& waiter) {
    return waiter.description == description && waiter.waiter == taker;
  });
  return true;
}

void SimulatedFiles::wait(Description description, ProcessId waiter) {
  for (const Waiter& listed : waiters_) {
    if (listed.description == description && listed.waiter == waiter) return;
  }
  waiters_.push_back(Waiter{description, waiter});
}

bool SimulatedFiles::holdsLock(Description description) const {
  const InodeData& data = inodes_.at(descriptions_.at(description).inode);
  return data.lockedBy == description;
}

std::vector<SimulatedHost::Flock> SimulatedFiles::flocks() const {
  std::vector<SimulatedHost::Flock> locks;
  for (const auto& [inode, data] : inodes_) {
    if (data.lockedBy) locks.push_back(SimulatedHost::Flock{kDevice, inode, data.taker, false});
  }
  for (const Waiter& waiter : waiters_) {
    locks.push_back(SimulatedHost::Flock{kDevice, descriptions_.at(waiter.description).inode,
                                         waiter.waiter, true});
  }
  return locks;
}

std::optional<std::string> SimulatedFiles::linkOf(ProcessId process, Inode inode) const {
  for (const Description description : descriptorsOf(process)) {
    if (descriptions_.at(description).inode != inode) continue;
    const InodeData& data = inodes_.at(inode);
    return data.links > 0 ? data.lastName : data.lastName + " (deleted)";
  }
  return std::nullopt;
}

}  // namespace flink::testing
