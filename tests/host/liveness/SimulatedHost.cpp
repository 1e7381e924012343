// The simulated host. See SimulatedHost.h.
#include "SimulatedHost.h"

#include <sys/sysmacros.h>

#include <cstdio>
#include <stdexcept>
#include <string>

namespace flink::testing {

/// One process's view of the host, as liveness::SystemFacts reads a real one.
class SimulatedHost::Facts final : public liveness::HostFacts {
 public:
  Facts(SimulatedHost& host, ProcessId self) : host_(host), self_(self) {
    const Process& process = host_.processes_.at(self);
    reader_.pid = host_.pidOf(self);
    reader_.ownProc = process.spawn.proc == Proc::kOwn;
    if (process.spawn.proc != Proc::kNone) {
      reader_.pidNamespace = process.spawn.pidNamespace;
      reader_.mountNamespace = process.spawn.mountNamespace;
      reader_.bootId = host_.bootId_;
    }
    // What the reader takes away: its offset as /proc/self/timens_offsets says it, rounded down
    // to ticks by the library's own code.
    const std::int64_t offset = process.spawn.boottimeOffsetNs;
    const std::string offsets = "monotonic 0 0\nboottime " + std::to_string(offset / 1000000000) +
                                " " + std::to_string(offset % 1000000000) + "\n";
    offsetTicks_ = liveness::boottimeOffsetTicks(offsets, 1000000000 / kTickNs);
  }

  const liveness::Reader& reader() override { return reader_; }

  liveness::ProcessLook process(pid_t pid) override {
    const Process& self = host_.processes_.at(self_);
    const std::uint64_t ns = self.spawn.pidNamespace;
    const std::optional<ProcessId> found = host_.processOf(ns, pid);
    liveness::ProcessLook look;
    if (!found) return look;
    const Process& process = host_.processes_[*found];
    const bool seesProc =
        self.spawn.proc == Proc::kOwn || (self.spawn.proc == Proc::kForeign && *found == self_);
    if (!seesProc) {
      // kill(pid, 0) alone: the pid exists (a zombie too).
      look.state = liveness::ProcessLook::State::kHidden;
      return look;
    }
    look.state = process.zombie ? liveness::ProcessLook::State::kDead
                                : liveness::ProcessLook::State::kRunning;
    // As the kernel shows it in the reader's time namespace, less the reader's rounded offset.
    const std::int64_t shown = (process.startNs + self.spawn.boottimeOffsetNs) / kTickNs;
    look.startTime = static_cast<std::uint64_t>(shown - offsetTicks_);
    if (process.spawn.parent) look.parent = host_.pidIn(*process.spawn.parent, ns).value_or(0);
    return look;
  }

  std::optional<std::string> processName(pid_t pid) override {
    const Process& self = host_.processes_.at(self_);
    const std::optional<ProcessId> found = host_.processOf(self.spawn.pidNamespace, pid);
    if (!found || self.spawn.proc != Proc::kOwn) return std::nullopt;
    const std::string& name = host_.processes_[*found].spawn.name;
    if (name.empty()) return std::nullopt;
    return name;
  }

  std::optional<liveness::FlockTable> flocks() override {
    if (!host_.procNamespaceOf(self_)) return std::nullopt;
    return liveness::FlockTable::parse(host_.procLocksText(self_));
  }

 private:
  SimulatedHost& host_;
  ProcessId self_;
  liveness::Reader reader_;
  std::int64_t offsetTicks_ = 0;
};

SimulatedHost::SimulatedHost(std::string bootId) : bootId_(std::move(bootId)) {}

std::uint64_t SimulatedHost::newPidNamespace(std::uint64_t parent) {
  const std::uint64_t ns = nextNs_++;
  parentNs_[ns] = parent;
  return ns;
}

std::optional<std::uint64_t> SimulatedHost::parentNamespace(std::uint64_t ns) const {
  const auto it = parentNs_.find(ns);
  if (it == parentNs_.end()) return std::nullopt;
  return it->second;
}

void SimulatedHost::setPidRange(std::uint64_t ns, pid_t first, pid_t last,
                                std::int64_t reuseAfterNs) {
  ranges_[ns] = PidRange{first, last, reuseAfterNs};
  nextPid_[ns] = first;
}

std::vector<std::uint64_t> SimulatedHost::ancestry(std::uint64_t ns) const {
  std::vector<std::uint64_t> chain{ns};
  for (auto it = parentNs_.find(ns); it != parentNs_.end(); it = parentNs_.find(it->second)) {
    chain.push_back(it->second);
  }
  return chain;
}

pid_t SimulatedHost::nextPidIn(std::uint64_t ns) {
  const auto range = ranges_.find(ns);
  pid_t& next = nextPid_.try_emplace(ns, ns == kHostNamespace ? 1000 : 1).first->second;
  const std::unordered_map<pid_t, ProcessId>& used = inUse_[ns];
  if (range == ranges_.end()) {
    // A pid still in use is skipped, as the kernel skips it.
    while (used.count(next)) ++next;
    return next++;
  }
  const PidRange& pids = range->second;
  const std::unordered_map<pid_t, std::int64_t>& started = lastStart_[ns];
  for (pid_t tried = pids.first; tried <= pids.last; ++tried) {
    if (next < pids.first || next > pids.last) next = pids.first;
    const pid_t candidate = next++;
    if (used.count(candidate)) continue;
    const auto last = started.find(candidate);
    if (last != started.end() && now_ - last->second < pids.reuseAfterNs) continue;
    return candidate;
  }
  throw std::runtime_error("simulated host: no free pid in pid namespace " + std::to_string(ns));
}

SimulatedHost::ProcessId SimulatedHost::spawn(const Spawn& spawn) {
  Process process;
  process.spawn = spawn;
  process.startNs = now_;
  const ProcessId id = processes_.size();
  for (const std::uint64_t ns : ancestry(spawn.pidNamespace)) {
    const pid_t pid = nextPidIn(ns);
    process.pids[ns] = pid;
    inUse_[ns][pid] = id;
    lastStart_[ns][pid] = now_;
  }
  processes_.push_back(std::move(process));
  now_ += 1000;  // a microsecond: no two processes start at once
  return id;
}

void SimulatedHost::reap(ProcessId process) {
  Process& p = processes_.at(process);
  if (!p.alive) return;
  p.alive = false;
  p.zombie = false;
  for (const auto& [ns, pid] : p.pids) {
    auto& used = inUse_[ns];
    const auto it = used.find(pid);
    if (it != used.end() && it->second == process) used.erase(it);
  }
}

void SimulatedHost::exit(ProcessId process) { reap(process); }

void SimulatedHost::becomeZombie(ProcessId process) {
  if (processes_.at(process).alive) processes_[process].zombie = true;
}

bool SimulatedHost::alive(ProcessId process) const {
  const Process& p = processes_.at(process);
  return p.alive && !p.zombie;
}

std::optional<pid_t> SimulatedHost::pidIn(ProcessId process, std::uint64_t ns) const {
  const Process& p = processes_.at(process);
  if (!p.alive) return std::nullopt;
  return pidOnceIn(process, ns);
}

std::optional<pid_t> SimulatedHost::pidOnceIn(ProcessId process, std::uint64_t ns) const {
  const Process& p = processes_.at(process);
  const auto it = p.pids.find(ns);
  if (it == p.pids.end()) return std::nullopt;
  return it->second;
}

pid_t SimulatedHost::pidOf(ProcessId process) const {
  return processes_.at(process).pids.at(processes_[process].spawn.pidNamespace);
}

std::optional<SimulatedHost::ProcessId> SimulatedHost::processOf(std::uint64_t ns,
                                                                 pid_t pid) const {
  const auto used = inUse_.find(ns);
  if (used == inUse_.end()) return std::nullopt;
  const auto it = used->second.find(pid);
  if (it == used->second.end()) return std::nullopt;
  return it->second;
}

std::optional<std::uint64_t> SimulatedHost::procNamespaceOf(ProcessId reader) const {
  const Spawn& spawn = processes_.at(reader).spawn;
  switch (spawn.proc) {
    case Proc::kOwn:
      return spawn.pidNamespace;
    case Proc::kForeign:
      return parentNamespace(spawn.pidNamespace).value_or(spawn.pidNamespace);
    case Proc::kNone:
      break;
  }
  return std::nullopt;
}

std::string SimulatedHost::procLocksText(ProcessId reader) const {
  const std::optional<std::uint64_t> ns = procNamespaceOf(reader);
  if (!ns || !flocks_) return "";
  std::string text;
  int line = 0;
  for (const Flock& lock : flocks_()) {
    // The kernel keeps the taker's pid of the host's namespace (fl_pid), and translates it for the
    // namespace of the /proc read (locks_translate_pid): the host's shows it even when the taker
    // has exited (or the pid is another process's now); another shows the process that has that
    // pid now, where it sees it, and leaves the lock out otherwise.
    const std::optional<pid_t> hostPid = pidOnceIn(lock.taker, kHostNamespace);
    if (!hostPid) continue;
    std::optional<pid_t> shown = hostPid;
    if (*ns != kHostNamespace) {
      const std::optional<ProcessId> now = processOf(kHostNamespace, *hostPid);
      shown = now ? pidIn(*now, *ns) : std::nullopt;
      if (!shown) continue;
    }
    char buffer[160];
    std::snprintf(buffer, sizeof buffer, "%d: %sFLOCK  ADVISORY  WRITE %d %02x:%02x:%llu 0 EOF\n",
                  ++line, lock.waiting ? "-> " : "", static_cast<int>(*shown),
                  ::major(static_cast<dev_t>(lock.device)),
                  ::minor(static_cast<dev_t>(lock.device)),
                  static_cast<unsigned long long>(lock.inode));
    text += buffer;
  }
  return text;
}

std::unique_ptr<liveness::HostFacts> SimulatedHost::factsOf(ProcessId reader) {
  if (reader >= processes_.size()) throw std::out_of_range("no such simulated process");
  return std::make_unique<Facts>(*this, reader);
}

}  // namespace flink::testing
