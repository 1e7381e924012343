// The simulated host. See SimulatedHost.h.
#include "SimulatedHost.h"

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

  std::optional<liveness::FlockTable> flocks() override { return liveness::FlockTable(); }

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

std::vector<std::uint64_t> SimulatedHost::ancestry(std::uint64_t ns) const {
  std::vector<std::uint64_t> chain{ns};
  for (auto it = parentNs_.find(ns); it != parentNs_.end(); it = parentNs_.find(it->second)) {
    chain.push_back(it->second);
  }
  return chain;
}

SimulatedHost::ProcessId SimulatedHost::spawn(const Spawn& spawn) {
  Process process;
  process.spawn = spawn;
  process.startNs = now_;
  for (const std::uint64_t ns : ancestry(spawn.pidNamespace)) {
    pid_t& next = nextPid_.try_emplace(ns, ns == kHostNamespace ? 1000 : 1).first->second;
    // A pid still in use is skipped, as the kernel skips it.
    while (processOf(ns, next)) ++next;
    process.pids[ns] = next++;
  }
  processes_.push_back(std::move(process));
  now_ += 1000;  // a microsecond: no two processes start at once
  return processes_.size() - 1;
}

void SimulatedHost::exit(ProcessId process) {
  processes_.at(process).alive = false;
  processes_[process].zombie = false;
}

void SimulatedHost::becomeZombie(ProcessId process) { processes_.at(process).zombie = true; }

bool SimulatedHost::alive(ProcessId process) const {
  const Process& p = processes_.at(process);
  return p.alive && !p.zombie;
}

std::optional<pid_t> SimulatedHost::pidIn(ProcessId process, std::uint64_t ns) const {
  const Process& p = processes_.at(process);
  if (!p.alive) return std::nullopt;
  const auto it = p.pids.find(ns);
  if (it == p.pids.end()) return std::nullopt;
  return it->second;
}

pid_t SimulatedHost::pidOf(ProcessId process) const {
  return processes_.at(process).pids.at(processes_[process].spawn.pidNamespace);
}

std::optional<SimulatedHost::ProcessId> SimulatedHost::processOf(std::uint64_t ns,
                                                                 pid_t pid) const {
  for (ProcessId id = 0; id < processes_.size(); ++id) {
    if (pidIn(id, ns) == pid) return id;
  }
  return std::nullopt;
}

std::unique_ptr<liveness::HostFacts> SimulatedHost::factsOf(ProcessId reader) {
  if (reader >= processes_.size()) throw std::out_of_range("no such simulated process");
  return std::make_unique<Facts>(*this, reader);
}

}  // namespace flink::testing
