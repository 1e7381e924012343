// The simulation of many allocators on one host. See Simulation.h.
//
// Layout of this file: the world (Simulation: the host, its files, the ground truth, the step log,
// the invariants), then what every allocator of ours does to the file (Writer: LockedFile's and
// changeFile's steps, with SimLeaseSpace, the lease folder), then the actors (exec, the discovery
// program, the in-process driver and its forked child, Flink's script).
#include "Simulation.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "SimulatedFiles.h"
#include "SimulatedHost.h"
#include "host/coordination/Coordination.h"
#include "host/coordination/Leases.h"
#include "host/coordination/RecordEdits.h"
#include "host/coordination/ShareAllocation.h"
#include "host/enumeration/UnitIndex.h"
#include "host/liveness/Liveness.h"
#include "host/store/Journal.h"
#include "host/store/ReplacedCopies.h"

namespace flink::testing {
namespace {

using coordination::Allocation;
using coordination::AllocationRequest;
using coordination::LeaseFile;
using coordination::LeaseState;
using coordination::LeaseTake;
using coordination::LineSpan;
using coordination::Owner;
using coordination::ParsedRecords;
using coordination::Record;
using coordination::ShareableGpu;
using coordination::ShareAllocation;
using coordination::ShareRequest;
using liveness::FlockTable;
using ProcessId = SimulatedHost::ProcessId;
using Description = SimulatedFiles::Description;
using Proc = SimulatedHost::Proc;

const std::string kFile = "/var/tmp/flink-gpu-coordination";
const std::string kLeaseFolder = kFile + ".leases";
const std::string kInodeMemory = kFile + ".inode";
constexpr std::size_t kGpus = 8;  // fewer than 10: Flink's `sed "/1 /d"` then deletes GPU 1's alone
constexpr std::int64_t kMs = 1'000'000;
/// store::kDefaultLockTimeout, in simulated time.
constexpr std::int64_t kLockTimeoutNs = 5000 * kMs;
/// The page of the file's layout and of LockedFile's writes.
constexpr std::size_t kPage = 4096;

/// How an allocator knows the host's GPUs (findHostUnits): NVML (index, UUID, PCI bus id), an
/// older version or nvidia-smi without the bus id (index and UUID), or a --gpus list (the index).
enum class Knowledge { kNvml, kUuid, kIndex };

std::string_view knowledgeName(Knowledge knowledge) {
  switch (knowledge) {
    case Knowledge::kNvml:
      return "nvml";
    case Knowledge::kUuid:
      return "uuid";
    case Knowledge::kIndex:
      return "index";
  }
  return "?";
}

/// Where a process lives: its pid namespace, what it sees of /proc, its time namespace.
struct Home {
  std::uint64_t pidNamespace = SimulatedHost::kHostNamespace;
  Proc proc = Proc::kOwn;
  std::int64_t boottimeOffsetNs = 0;
};

std::string describe(const Home& home) {
  std::string text = home.pidNamespace == SimulatedHost::kHostNamespace
                         ? "host ns"
                         : "ns " + std::to_string(home.pidNamespace);
  text += home.proc == Proc::kOwn       ? ""
          : home.proc == Proc::kForeign ? ", foreign /proc"
                                        : ", no /proc";
  if (home.boottimeOffsetNs != 0) text += ", timens " + std::to_string(home.boottimeOffsetNs);
  return text;
}

/// What a user was handed, and who uses it: the simulator's ground truth.
struct Grant {
  std::string who;
  /// Handed out by Flink's script.
  bool byScript = false;
  /// Handed out (a script's grant is tracked from its first record on, before it is handed out).
  bool handed = false;
  /// Given back, or cancelled: nobody uses it any more.
  bool ended = false;
  /// Its record was taken away by Flink's script, by the script's own rule (it judges by pid
  /// alone), or by another script's `sed -i`: what Flink's script does among its own kind and to
  /// leases is its own flaw (docs/coordination-file.md), not an invariant of ours.
  bool excused = false;
  std::vector<std::string> whole;
  std::vector<std::pair<std::string, unsigned>> shares;  // GPU, share index
  /// An operator released its record (`release --force`): only its lease holds the GPU now.
  bool released = false;
  /// Ours, as written; the script's `<gpu> <pid>`.
  std::vector<Record> records;
  std::vector<std::pair<std::string, pid_t>> scriptRecords;
  /// Parallel to records, then scriptRecords: whether it was in the file at the last look.
  std::vector<bool> present;
  std::vector<ProcessId> users;
};

/// What the step that just ran did to the file, so that a record lost in it can be blamed.
struct StepMark {
  enum class Kind { kOther, kOurWrite, kOperatorRelease, kScriptSed };
  Kind kind = Kind::kOther;
  /// kScriptSed: the GPU of `sed -i "/<gpu> /d"`, and the holder the script found gone.
  std::string gpu;
  std::optional<pid_t> judgedGone;
};

class Simulation;

/// A lease this process holds: its open file description and the file it is on.
struct HeldLease {
  Description description = 0;
  LeaseFile file;
};

/// The lease folder as one allocation sees it under the coordination file's lock: FolderLeaseSpace
/// and LeaseFolder (host/coordination/Leases.cpp) step for step, on the simulated files. Listed
/// once; states asked without a file read once; leases taken as tryAcquireLease takes them (create
/// when missing, flock LOCK_EX | LOCK_NB, the name checked to be still that file's).
class SimLeaseSpace final : public coordination::LeaseSpace {
 public:
  SimLeaseSpace(Simulation& sim, ProcessId self, std::map<std::string, HeldLease>& held);
  std::vector<std::string> names() override;
  LeaseState state(const std::string& name, const std::optional<LeaseFile>& file) override;
  LeaseTake take(const std::string& name) override;
  bool holds(const std::string& name) const override { return held_.count(name) > 0; }
  /// FolderLeaseSpace::removeFreeExcept.
  void removeFreeExcept(const std::unordered_set<std::string>& named);
  /// LeaseFolder::removeIfFree.
  void removeIfFree(const std::string& name);
  /// LeaseFolder::state.
  LeaseState folderState(const std::string& name, const std::optional<LeaseFile>& file);

 private:
  Simulation& sim_;
  ProcessId self_;
  std::map<std::string, HeldLease>& held_;
  std::set<std::string> listed_;
  std::map<std::string, LeaseState> states_;
  std::optional<std::optional<FlockTable>> flocks_;
};

class Actor {
 public:
  virtual ~Actor() = default;
  /// One step; false once the actor has nothing more to do.
  virtual bool step() = 0;
  /// The scheduler runs it again from this step of the simulation on.
  std::size_t sleepsUntil = 0;
  /// A process whose every step is a program run (Flink's script: grep, awk, ps, sed, flock, each
  /// a fork and exec), far slower than a step of ours (a system call or two): it waits a few steps
  /// after each of its own, so that one of ours can run whole between two of its steps.
  bool slow = false;
};

class Simulation {
 public:
  explicit Simulation(const SimulationOptions& options);
  SimulationResult run();

  // ---- for the actors ----
  std::mt19937_64 random;
  SimulatedHost host;
  SimulatedFiles files;
  StepMark mark;
  const SimulationOptions options;

  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(random) < p; }
  std::size_t below(std::size_t n) {
    return n == 0 ? 0 : std::uniform_int_distribution<std::size_t>(0, n - 1)(random);
  }
  template <typename T>
  const T& pick(const std::vector<T>& from) {
    return from[below(from.size())];
  }

  ProcessId spawn(const std::string& label, const Home& home,
                  std::optional<ProcessId> parent = std::nullopt);
  /// A child of `parent` that gets a copy of each of its descriptors (fork).
  ProcessId fork(const std::string& label, ProcessId parent);
  /// The process ends (exit): its descriptors close; a child of a process that waits for it
  /// stays a zombie until reaped.
  void exitProcess(ProcessId process);
  /// SIGKILL; its children with a parent-death signal go too.
  void kill(ProcessId process);
  /// A process that lives on after its part (an owner, a daemon, a forked child): ended at random.
  void passive(ProcessId process) { passive_.push_back(process); }
  /// A child that its parent reaps (exec's command): a zombie until then.
  void reapedByParent(ProcessId process) { reapedByParent_.insert(process); }
  void deathSignal(ProcessId process) { deathSignal_.insert(process); }
  /// A child in its parent's process group, killed with it (flock(1) in Flink's script).
  void inGroupOfParent(ProcessId process) {
    deathSignal_.insert(process);
    inGroupOfParent_.insert(process);
  }

  /// "exec#3(1012)": the label and the pid of the host's namespace.
  std::string name(ProcessId process) const;
  void note(const std::string& what);
  void count(const std::string& what, std::size_t n = 1) { counts_[what] += n; }

  std::size_t newGrant(Grant grant);
  Grant& grant(std::size_t id) { return grants_[id]; }
  /// Hands grant `id` out: checked from now on.
  void hand(std::size_t id);

  /// The host's GPUs as an allocator of `knowledge` knows them.
  std::shared_ptr<const discovery::UnitIndex> indexFor(Knowledge knowledge) const;
  std::unordered_map<std::string, std::string> uuidsFor(Knowledge knowledge) const;
  /// The GPUs an allocator may hand out: the host's, less the drained and lost ones (as
  /// findHostUnits leaves them out).
  const std::vector<std::string>& units() const { return units_; }
  const std::vector<ShareableGpu>& shareable() const { return shareable_; }
  /// A placement rule that picks at random (AllocationRequest::choose).
  std::function<std::vector<std::string>(const std::vector<std::string>&, std::size_t)> chooser();

  bool scripts() const { return scripts_; }
  std::size_t stepNumber() const { return step_; }
  /// Where a new allocator of ours lives; `leased`: one that leases what it takes.
  Home homeForAllocator(bool leased);

 private:
  void draw();
  void addActor();
  void killSomeone();
  void endSomeone();
  void stepSomeone();
  void check();
  void checkRecords();
  void checkUses();
  void fail(const std::string& why);
  bool anyUserRuns(const Grant& grant) const;
  bool excused(const Grant& a, const Grant& b) const;

  bool scripts_ = false;
  bool sandboxes_ = false;
  std::vector<std::uint64_t> sandboxNamespaces_;
  std::vector<std::string> ids_;
  std::unordered_map<std::string, std::string> uuidOf_;
  std::unordered_map<std::string, std::string> busOf_;
  std::set<std::string> excluded_;
  std::vector<std::string> units_;
  std::vector<ShareableGpu> shareable_;
  std::vector<std::uint64_t> namespaces_;
  std::vector<std::int64_t> timeOffsets_;
  std::map<Knowledge, std::shared_ptr<const discovery::UnitIndex>> indices_;

  std::vector<std::unique_ptr<Actor>> actors_;
  std::size_t actorsMade_ = 0;
  std::vector<std::string> labels_;  // by ProcessId
  std::vector<ProcessId> passive_;
  std::set<ProcessId> reapedByParent_;
  std::set<ProcessId> deathSignal_;
  std::set<ProcessId> inGroupOfParent_;
  std::vector<Grant> grants_;
  std::vector<std::string> log_;
  std::map<std::string, std::size_t> counts_;
  std::size_t step_ = 0;
  bool failed_ = false;
  std::string failure_;
  std::string world_;
  // checkRecords' last parse of the file, and the text it parsed.
  std::string checkedText_;
  std::optional<ParsedRecords> checkedParse_;
};

// ---- what an allocator of ours does to the file -------------------------------------------

/// One change of the coordination file by a process of ours, step by step as the real code makes
/// it: detail::changeFile's attempts around LockedFile::open (open the path, flock LOCK_EX polled,
/// check that the path still names the file locked, compare `<file>.inode` and wait while a copy
/// the file replaced is held or waited for), the change (read, plan, LockedFile::replace with its
/// check of a change made without the lock, writes as planWrites cuts them), and
/// LockedFile::settled. The change is one of allocate(), allocateShares() and release().
class Writer {
 public:
  enum class Kind { kWhole, kShare, kRelease };
  enum class Outcome { kRunning, kDone, kFailed };

  Writer(Simulation& sim, ProcessId self, Kind kind) : sim_(sim), self_(self), kind_(kind) {}
  ~Writer() { closeAll(); }
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  AllocationRequest whole;
  ShareRequest share;
  std::vector<Record> release;
  /// An operator's `release --force` (releaseChecked), not an allocator giving back its own.
  bool byOperator = false;

  /// One step; kDone once the change is made (or was refused: not satisfied), kFailed when it threw
  /// StoreError (the leases taken are let go).
  Outcome step();

  Allocation allocation;
  ShareAllocation shares;
  /// On kDone of an allocation: the leases of what was granted, held by this process.
  std::vector<Description> leases;
  std::string why;

 private:
  enum class State {
    kOpen,
    kLock,
    kCheckPath,
    kRemembered,
    kWaitCopies,
    kRead,
    kPlan,
    kWrite,
    kAfterWrite,
    kSettle
  };
  Outcome open();
  Outcome lock();
  Outcome checkPath();
  Outcome remembered();
  Outcome waitCopies();
  Outcome read();
  Outcome plan();
  Outcome write();
  Outcome afterWrite();
  Outcome settle();
  Outcome nextAttempt(const std::string& reason);
  Outcome reopen(const std::string& reason);
  Outcome done();
  Outcome failed(const std::string& why);
  std::optional<pid_t> look();
  bool stillAtPath() const;
  void unlock();
  void closeAll();
  void note(const std::string& what);

  Simulation& sim_;
  ProcessId self_;
  Kind kind_;
  State state_ = State::kOpen;
  int attempt_ = 0;
  bool again_ = false;
  int replacements_ = 0;
  std::int64_t deadline_ = 0;
  std::optional<Description> opened_;
  std::uint64_t inode_ = 0;
  bool watch_ = false;
  bool replaced_ = false;  // the file is not the one <file>.inode remembers
  std::vector<std::uint64_t> copies_;
  std::unordered_set<std::uint64_t> notCopies_;
  bool waited_ = false;
  std::string text_;
  std::string newText_;
  bool interfered_ = false;
  std::vector<Record> writtenBefore_;
  std::map<std::string, HeldLease> held_;
  std::optional<SimLeaseSpace> space_;
  std::unordered_set<std::string> named_;
};

void Writer::note(const std::string& what) { sim_.note(sim_.name(self_) + ": " + what); }

Writer::Outcome Writer::step() {
  switch (state_) {
    case State::kOpen:
      return open();
    case State::kLock:
      return lock();
    case State::kCheckPath:
      return checkPath();
    case State::kRemembered:
      return remembered();
    case State::kWaitCopies:
      return waitCopies();
    case State::kRead:
      return read();
    case State::kPlan:
      return plan();
    case State::kWrite:
      return write();
    case State::kAfterWrite:
      return afterWrite();
    case State::kSettle:
      return settle();
  }
  return Outcome::kRunning;
}

bool Writer::stillAtPath() const { return sim_.files.lookup(kFile) == inode_; }

void Writer::unlock() {
  // A process that died closed its descriptors as it went.
  if (opened_ && sim_.host.alive(self_)) sim_.files.close(self_, *opened_);
  opened_.reset();
}

void Writer::closeAll() {
  unlock();
  for (const auto& [name, lease] : held_) {
    if (sim_.host.alive(self_)) sim_.files.close(self_, lease.description);
  }
  held_.clear();
  for (const Description lease : leases) {
    if (sim_.host.alive(self_)) sim_.files.close(self_, lease);
  }
  leases.clear();
}

Writer::Outcome Writer::open() {
  // LockedFile::openWith: the deadline holds for the whole open, replacements included.
  if (replacements_ == 0) deadline_ = sim_.host.now() + kLockTimeoutNs;
  std::optional<SimulatedFiles::Inode> inode = sim_.files.lookup(kFile);
  if (!inode) inode = sim_.files.create(kFile);  // O_CREAT | O_EXCL, as openNoFollow
  opened_ = sim_.files.open(self_, *inode);
  inode_ = *inode;
  note("opens the file (inode " + std::to_string(*inode) + ")");
  state_ = State::kLock;
  return Outcome::kRunning;
}

Writer::Outcome Writer::lock() {
  // flock(LOCK_EX | LOCK_NB), polled: never listed as a waiter.
  if (!sim_.files.tryLock(*opened_, self_)) {
    if (sim_.host.now() >= deadline_) return failed("still locked after the time-out");
    note("finds it locked");
    sim_.count("our lock polls");
    return Outcome::kRunning;
  }
  note("locks inode " + std::to_string(inode_));
  state_ = State::kCheckPath;
  return Outcome::kRunning;
}

Writer::Outcome Writer::reopen(const std::string& reason) {
  unlock();
  if (++replacements_ > 64) return failed("it kept being replaced while waiting for its lock");
  note(reason + ": opens it again");
  sim_.count("reopened");
  state_ = State::kOpen;
  return Outcome::kRunning;
}

Writer::Outcome Writer::checkPath() {
  if (!stillAtPath()) return reopen("finds the path names another file now");
  state_ = State::kRemembered;
  return Outcome::kRunning;
}

Writer::Outcome Writer::remembered() {
  // waitForReplacedCopies: <file>.inode against the file locked.
  std::optional<store::FileId> memory;
  if (const std::optional<SimulatedFiles::Inode> inode = sim_.files.lookup(kInodeMemory)) {
    memory = store::parseInodeMemory(sim_.files.contents(*inode));
  }
  copies_ = store::replacedCopiesToWatch(memory, store::FileId{SimulatedFiles::kDevice, inode_});
  replaced_ = memory != store::FileId{SimulatedFiles::kDevice, inode_};
  watch_ = true;
  notCopies_.clear();
  waited_ = false;
  state_ = State::kWaitCopies;
  if (!replaced_) {
    note("finds it as our writers last saw it: looks for copies in use");
    return Outcome::kRunning;
  }
  note("finds it replaced since our writers last saw it (remembered " +
       (memory ? std::to_string(memory->inode) : std::string("nothing")) +
       "): looks for copies in use");
  sim_.count("found replaced");
  return Outcome::kRunning;
}

std::optional<pid_t> Writer::look() {
  const std::unique_ptr<liveness::HostFacts> facts = sim_.host.factsOf(self_);
  const std::optional<FlockTable> table = facts->flocks();
  if (!table) return std::nullopt;  // no /proc/locks: nothing to tell
  const std::optional<std::uint64_t> procNamespace = sim_.host.procNamespaceOf(self_);
  // liveness::openFileOfLock as this reader's /proc answers it: the holder's descriptors, else
  // every process's it shows; "none" only where it shows every process of the host.
  const auto openFileOfLock = [&](pid_t holder, std::uint64_t inode) {
    liveness::OpenFileLook look;
    if (!procNamespace) return look;
    const auto lookAt = [&](ProcessId process) {
      if (!sim_.host.alive(process)) return false;
      const std::optional<std::string> link = sim_.files.linkOf(process, inode);
      if (!link) return false;
      look.found = liveness::OpenFile{*sim_.host.pidIn(process, *procNamespace), *link};
      return true;
    };
    if (holder > 0) {
      const std::optional<ProcessId> process = sim_.host.processOf(*procNamespace, holder);
      if (process && lookAt(*process)) return look;
    }
    for (ProcessId process = 0; process < sim_.host.processCount(); ++process) {
      if (process == self_ || !sim_.host.pidIn(process, *procNamespace)) continue;
      if (lookAt(process)) return look;
    }
    look.none = *procNamespace == SimulatedHost::kHostNamespace &&
                sim_.host.spawnOf(self_).proc == SimulatedHost::Proc::kOwn;
    return look;
  };
  return store::replacedCopyInUse(*table, store::FileId{SimulatedFiles::kDevice, inode_},
                                  facts->reader().pid, liveness::deletedLinkOf(kFile), copies_,
                                  notCopies_, openFileOfLock);
}

Writer::Outcome Writer::waitCopies() {
  if (const std::optional<pid_t> holder = look()) {
    waited_ = true;
    if (sim_.host.now() >= deadline_) return failed("a replaced copy stayed in use");
    note("waits: pid " + std::to_string(*holder) + " holds or waits for a replaced copy's lock");
    sim_.count("waits for replaced copies");
    return Outcome::kRunning;
  }
  // Its writes are done; it may have replaced the file again meanwhile.
  if (waited_ && !stillAtPath()) return reopen("after the wait, the path names another file");
  // rememberInode: <file>.inode rewritten in place, where the file is not the one remembered.
  if (!replaced_) {
    state_ = State::kRead;
    return Outcome::kRunning;
  }
  std::optional<SimulatedFiles::Inode> memory = sim_.files.lookup(kInodeMemory);
  if (!memory) memory = sim_.files.create(kInodeMemory);
  sim_.files.contents(*memory) =
      store::formatInodeMemory(store::FileId{SimulatedFiles::kDevice, inode_});
  note("remembers inode " + std::to_string(inode_));
  state_ = State::kRead;
  return Outcome::kRunning;
}

Writer::Outcome Writer::read() {
  // The journal is not simulated: a change here is one step, which no kill cuts in two.
  text_ = sim_.files.contents(inode_);
  note("reads " + std::to_string(text_.size()) + " bytes");
  state_ = State::kPlan;
  return Outcome::kRunning;
}

Writer::Outcome Writer::plan() {
  ParsedRecords parsed = coordination::parseRecords(text_);
  std::vector<LineSpan> blank;
  const std::unique_ptr<liveness::HostFacts> facts = sim_.host.factsOf(self_);
  // coordination::isRunning, as this process's facts tell.
  const coordination::LivenessProbe running = [&](const Owner& owner) {
    return liveness::countsAsRunning(owner, *facts);
  };
  const auto earlier = [&](const Record& record) {
    return std::find(writtenBefore_.begin(), writtenBefore_.end(), record) != writtenBefore_.end();
  };
  space_.reset();
  named_.clear();
  std::vector<Record> added;
  std::string what;
  if (kind_ == Kind::kRelease) {
    for (std::size_t i = 0; i < parsed.records.size(); ++i) {
      if (std::find(release.begin(), release.end(), parsed.records[i]) == release.end()) continue;
      blank.push_back(parsed.recordSpans[i]);
    }
    what = "plans to give back " + std::to_string(blank.size()) + " record(s)";
    newText_ = blank.empty() ? text_ : coordination::detail::editRecords(text_, blank, {});
    state_ = State::kWrite;
    note(what);
    return Outcome::kRunning;
  }
  if (again_) coordination::detail::dropEarlierAttempt(parsed, earlier, blank);
  space_.emplace(sim_, self_, held_);
  std::vector<std::size_t> reclaimed;
  if (kind_ == Kind::kWhole) {
    allocation = coordination::planAllocation(parsed, whole, running, *space_);
    added.assign(allocation.records.end() - static_cast<std::ptrdiff_t>(allocation.granted.size()),
                 allocation.records.end());
    reclaimed = allocation.reclaimedIndices;
    named_ = coordination::detail::namedLeases(allocation.records, allocation.leasesTaken);
    what = allocation.satisfied ? "plans GPU(s) " : "finds too few free GPUs";
    for (const std::string& gpu : allocation.granted) what += gpu + " ";
  } else {
    shares = coordination::planShareAllocation(parsed, share, running, *space_);
    added.assign(shares.records.end() - static_cast<std::ptrdiff_t>(shares.granted.size()),
                 shares.records.end());
    reclaimed = shares.reclaimedIndices;
    named_ = coordination::detail::namedLeases(shares.records, shares.leasesTaken);
    what = shares.satisfied ? "plans share(s) " : "finds too few free shares";
    for (const coordination::GrantedShare& granted : shares.granted) {
      what += granted.gpu + "/" + std::to_string(granted.slot.index) + " ";
    }
  }
  what += "(takes back " + std::to_string(reclaimed.size());
  for (const std::size_t i : reclaimed) {
    blank.push_back(parsed.recordSpans[i]);
    const Record& record = parsed.records[i];
    what += (i == reclaimed.front() ? ": " : ", ") + record.gpu + " of " +
            std::to_string(record.owner.pid);
  }
  what += ")";
  writtenBefore_.insert(writtenBefore_.end(), added.begin(), added.end());
  newText_ = coordination::detail::editRecords(text_, blank, added);
  note(what);
  state_ = State::kWrite;
  return Outcome::kRunning;
}

Writer::Outcome Writer::write() {
  // LockedFile::replace: a no-op for the same text; nothing written when someone changed the file
  // without its lock since it was read (changedUnderLock); else the page-contained writes, then the
  // truncate.
  interfered_ = false;
  if (newText_ != text_) {
    const std::string& now = sim_.files.contents(inode_);
    if (store::changedWithoutItsLock(stillAtPath(), now.size(), text_.size())) {
      interfered_ = true;
      note("finds the file changed without its lock: writes nothing");
      sim_.count("interfered");
    } else {
      std::string& bytes = sim_.files.contents(inode_);
      for (const store::JournalWrite& write : store::planWrites(text_, newText_, kPage)) {
        const std::size_t offset = static_cast<std::size_t>(write.offset);
        if (bytes.size() < offset + write.after.size()) bytes.resize(offset + write.after.size());
        bytes.replace(offset, write.after.size(), write.after);
      }
      if (newText_.size() < text_.size()) bytes.resize(newText_.size());
      text_ = newText_;
      sim_.mark.kind = byOperator ? StepMark::Kind::kOperatorRelease : StepMark::Kind::kOurWrite;
      note("writes inode " + std::to_string(inode_));
    }
  }
  // allocate() and allocateShares(): free lease files no record names go, under the lock, once
  // the change is written (detail::removeFreeLeases).
  if (kind_ != Kind::kRelease && !interfered_ && stillAtPath() && space_) {
    space_->removeFreeExcept(named_);
  }
  state_ = State::kAfterWrite;
  return Outcome::kRunning;
}

Writer::Outcome Writer::afterWrite() {
  // changeFile: `if (!opened.interfered() && opened.settled(lockTimeout)) return result;`
  if (interfered_ || !stillAtPath()) return nextAttempt("its change was interfered with");
  if (!watch_) return done();
  notCopies_.clear();
  waited_ = false;
  deadline_ = sim_.host.now() + kLockTimeoutNs;
  state_ = State::kSettle;
  return settle();
}

Writer::Outcome Writer::settle() {
  if (const std::optional<pid_t> holder = look()) {
    waited_ = true;
    if (sim_.host.now() >= deadline_)
      return failed("a replaced copy stayed in use after the change");
    note("waits after its change: pid " + std::to_string(*holder) +
         " holds or waits for a replaced copy's lock");
    sim_.count("waits after a change");
    return Outcome::kRunning;
  }
  if (waited_ && !stillAtPath()) return nextAttempt("the file was replaced after its change");
  return done();
}

Writer::Outcome Writer::nextAttempt(const std::string& reason) {
  unlock();
  if (attempt_ >= 8) {
    return failed("it kept being changed by a program that does not hold its lock");
  }
  ++attempt_;
  again_ = true;
  replacements_ = 0;
  watch_ = false;
  space_.reset();
  note(reason + ": plans again (attempt " + std::to_string(attempt_ + 1) + ")");
  sim_.count("planned again");
  state_ = State::kOpen;
  return Outcome::kRunning;
}

Writer::Outcome Writer::done() {
  unlock();  // LockedFile's descriptor closes as changeFile returns
  space_.reset();
  const std::vector<std::string>& taken =
      kind_ == Kind::kWhole ? allocation.leasesTaken : shares.leasesTaken;
  // What was granted keeps its leases; the others taken in earlier attempts go with `held`.
  for (auto& [name, lease] : held_) {
    if (kind_ != Kind::kRelease && std::find(taken.begin(), taken.end(), name) != taken.end()) {
      leases.push_back(lease.description);
    } else {
      sim_.files.close(self_, lease.description);
    }
  }
  held_.clear();
  note("is done");
  return Outcome::kDone;
}

Writer::Outcome Writer::failed(const std::string& reason) {
  why = reason;
  note("fails: " + reason);
  sim_.count("failed with a store error");
  closeAll();
  space_.reset();
  return Outcome::kFailed;
}

// ---- the lease folder ------------------------------------------------------------------------

SimLeaseSpace::SimLeaseSpace(Simulation& sim, ProcessId self,
                             std::map<std::string, HeldLease>& held)
    : sim_(sim), self_(self), held_(held) {
  for (std::string& name : sim_.files.list(kLeaseFolder)) listed_.insert(std::move(name));
}

std::vector<std::string> SimLeaseSpace::names() {
  std::vector<std::string> names(listed_.begin(), listed_.end());
  for (const auto& [name, lease] : held_) {
    if (!listed_.count(name)) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

LeaseState SimLeaseSpace::folderState(const std::string& name,
                                      const std::optional<LeaseFile>& file) {
  const auto unnamed = [&] {
    if (!file) return LeaseState::kMissing;
    if (!flocks_) flocks_.emplace(sim_.host.factsOf(self_)->flocks());
    return *flocks_ && (*flocks_)->held(file->device, file->inode) ? LeaseState::kHeld
                                                                   : LeaseState::kMissing;
  };
  if (!listed_.count(name)) return unnamed();
  const std::optional<SimulatedFiles::Inode> inode = sim_.files.lookup(kLeaseFolder + "/" + name);
  if (!inode) return unnamed();
  if (file && (file->device != SimulatedFiles::kDevice || file->inode != *inode)) return unnamed();
  const Description probe = sim_.files.open(self_, *inode);
  const bool free = sim_.files.tryLock(probe, self_);
  sim_.files.close(self_, probe);  // the lock goes with the descriptor
  return free ? LeaseState::kFree : LeaseState::kHeld;
}

LeaseState SimLeaseSpace::state(const std::string& name, const std::optional<LeaseFile>& file) {
  if (const auto it = held_.find(name); it != held_.end()) {
    if (!file || *file == it->second.file) return LeaseState::kHeld;
    return folderState(name, file);
  }
  if (file) return folderState(name, file);
  auto [it, inserted] = states_.try_emplace(name, LeaseState::kMissing);
  if (inserted) it->second = folderState(name, std::nullopt);
  return it->second;
}

LeaseTake SimLeaseSpace::take(const std::string& name) {
  if (const auto it = held_.find(name); it != held_.end()) return {it->second.file, {}, {}};
  const std::string path = kLeaseFolder + "/" + name;
  for (int tries = 0; tries < 16; ++tries) {
    std::optional<SimulatedFiles::Inode> inode = sim_.files.lookup(path);
    if (!inode) inode = sim_.files.create(path);
    const Description description = sim_.files.open(self_, *inode);
    if (!sim_.files.tryLock(description, self_)) {
      sim_.files.close(self_, description);
      return {std::nullopt, coordination::LeaseAttempt::Failure::kHeld,
              "it is held by another running process"};
    }
    if (sim_.files.lookup(path) == inode) {
      const LeaseFile file{SimulatedFiles::kDevice, *inode};
      held_.emplace(name, HeldLease{description, file});
      return {file, {}, {}};
    }
    sim_.files.close(self_, description);
  }
  throw std::logic_error("simulated lease " + name + " kept being removed");
}

void SimLeaseSpace::removeIfFree(const std::string& name) {
  // LeaseFolder::removeIfFree: taken for the moment of the removal.
  if (!listed_.count(name)) return;
  const std::string path = kLeaseFolder + "/" + name;
  const std::optional<SimulatedFiles::Inode> inode = sim_.files.lookup(path);
  if (!inode) return;
  const Description description = sim_.files.open(self_, *inode);
  if (sim_.files.tryLock(description, self_) && sim_.files.lookup(path) == inode) {
    sim_.files.unlink(path);
    listed_.erase(name);
    sim_.note(sim_.name(self_) + ": removes the free lease file " + name);
  }
  sim_.files.close(self_, description);
}

void SimLeaseSpace::removeFreeExcept(const std::unordered_set<std::string>& named) {
  for (const auto& [name, state] : states_) {
    if (state != LeaseState::kFree || named.count(name) || held_.count(name)) continue;
    removeIfFree(name);
  }
  // The index aliases not asked of, of any mount namespace.
  std::vector<std::string> aliases;
  for (const std::string& name : listed_) {
    if (!states_.count(name) && !named.count(name) && !held_.count(name) &&
        coordination::isIndexAliasLeaseName(name)) {
      aliases.push_back(name);
    }
  }
  for (const std::string& name : aliases) removeIfFree(name);
}

// ---- the actors --------------------------------------------------------------------------

/// What every allocator of ours shares: its process, how it knows the GPUs, its requests.
class Allocator : public Actor {
 protected:
  Allocator(Simulation& sim, std::string label) : sim_(sim), label_(std::move(label)) {
    knowledge_ = sim_.chance(0.7)   ? Knowledge::kNvml
                 : sim_.chance(0.5) ? Knowledge::kUuid
                                    : Knowledge::kIndex;
    if (knowledge_ == Knowledge::kIndex && !sim_.scripts() &&
        !sim_.options.indexOnlyBesideReadersWithoutProc) {
      knowledge_ = Knowledge::kUuid;
    }
  }

  /// A writer of an allocation for `owner`, by `self`: whole GPUs or shares, leased or not.
  std::unique_ptr<Writer> allocationWriter(ProcessId self, const Owner& owner, bool shared,
                                           bool lease) {
    const std::unique_ptr<liveness::HostFacts> facts = sim_.host.factsOf(self);
    std::unique_ptr<Writer> writer =
        std::make_unique<Writer>(sim_, self, shared ? Writer::Kind::kShare : Writer::Kind::kWhole);
    const std::size_t most = shared ? std::min<std::size_t>(2, sim_.shareable().size()) : 3;
    const std::size_t amount = 1 + sim_.below(std::max<std::size_t>(most, 1));
    if (shared) {
      ShareRequest& request = writer->share;
      request.gpus = sim_.units();
      request.shareable = sim_.shareable();
      request.amount = amount;
      request.owner = owner;
      request.index = sim_.indexFor(knowledge_);
      request.uuids = sim_.uuidsFor(knowledge_);
      request.lease = lease;
      request.reader = facts->reader();
      request.placement = sim_.chance(0.5) ? coordination::SharePlacement::kPack
                                           : coordination::SharePlacement::kSpread;
      request.choose = sim_.chooser();
    } else {
      AllocationRequest& request = writer->whole;
      request.gpus = sim_.units();
      request.amount = amount;
      request.owner = owner;
      request.index = sim_.indexFor(knowledge_);
      request.uuids = sim_.uuidsFor(knowledge_);
      request.lease = lease;
      request.reader = facts->reader();
      request.choose = sim_.chooser();
    }
    sim_.note(sim_.name(self) + ": asks for " + std::to_string(amount) +
              (shared ? " share(s)" : " GPU(s)") + (lease ? ", leased" : "") + " for pid " +
              std::to_string(owner.pid) + " (" + std::string(knowledgeName(knowledge_)) + ")");
    return writer;
  }

  /// The grant a finished allocation writer made, for `users`; nullopt when it was not satisfied.
  std::optional<std::size_t> grantOf(const Writer& writer, bool shared, std::string who,
                                     std::vector<ProcessId> users) {
    Grant grant;
    grant.who = std::move(who);
    grant.users = std::move(users);
    if (shared) {
      if (!writer.shares.satisfied) return std::nullopt;
      for (const coordination::GrantedShare& granted : writer.shares.granted) {
        grant.shares.emplace_back(granted.gpu, granted.slot.index);
      }
      grant.records.assign(
          writer.shares.records.end() - static_cast<std::ptrdiff_t>(writer.shares.granted.size()),
          writer.shares.records.end());
    } else {
      if (!writer.allocation.satisfied) return std::nullopt;
      grant.whole = writer.allocation.granted;
      grant.records.assign(writer.allocation.records.end() -
                               static_cast<std::ptrdiff_t>(writer.allocation.granted.size()),
                           writer.allocation.records.end());
    }
    const std::size_t id = sim_.newGrant(std::move(grant));
    sim_.hand(id);
    return id;
  }

  Simulation& sim_;
  std::string label_;
  Knowledge knowledge_ = Knowledge::kNvml;
};

/// The discovery program (nvidia-gpu-discovery in coordination mode), run by a TaskManager that
/// lives on: records GPUs for its owner, without leases, and exits. The owner never gives them back
/// (Flink's driver does not); its death frees them, for the next allocation to take back.
class ProgramActor final : public Allocator {
 public:
  ProgramActor(Simulation& sim, std::string label) : Allocator(sim, std::move(label)) {
    const Home home = sim_.homeForAllocator(/*leased=*/false);
    owner_ = sim_.spawn(label_ + ".tm", home);
    self_ = sim_.spawn(label_, home, owner_);
    sim_.passive(owner_);
    shared_ = !sim_.shareable().empty() && sim_.chance(0.3);
    sim_.note(sim_.name(self_) + ": the discovery program starts for " + sim_.name(owner_) + " (" +
              describe(home) + ")");
  }

  bool step() override {
    if (!sim_.host.alive(self_)) {
      writer_.reset();
      return false;
    }
    if (!writer_) {
      const std::unique_ptr<liveness::HostFacts> facts = sim_.host.factsOf(self_);
      const std::optional<pid_t> pid =
          sim_.host.pidIn(owner_, sim_.host.spawnOf(self_).pidNamespace);
      const Owner owner = Owner::of(pid.value_or(0), *facts);
      // grantRecorded: an owner that does not run gets nothing recorded.
      if (!pid || !liveness::countsAsRunning(owner, *facts)) {
        sim_.note(sim_.name(self_) + ": its owner is not running: fails");
        sim_.exitProcess(self_);
        return false;
      }
      writer_ = allocationWriter(self_, owner, shared_, /*lease=*/false);
      return true;
    }
    const Writer::Outcome outcome = writer_->step();
    if (outcome == Writer::Outcome::kRunning) return true;
    if (outcome == Writer::Outcome::kDone) {
      if (grantOf(*writer_, shared_, label_, {owner_})) {
        sim_.count(shared_ ? "program share grants" : "program grants");
      }
    }
    writer_.reset();
    sim_.exitProcess(self_);
    return false;
  }

 private:
  ProcessId owner_ = 0;
  ProcessId self_ = 0;
  bool shared_ = false;
  std::unique_ptr<Writer> writer_;
};

/// `flink-gpu exec` (cli/commands/ExecCommand.cpp): records GPUs (or shares) for its own pid and
/// leases them, starts its command as its child (which inherits the leases' descriptors and has the
/// parent-death signal SIGKILL), waits for it, then lets its leases go and gives back what it
/// recorded, except records whose lease a process the command left behind still holds.
class ExecActor final : public Allocator {
 public:
  ExecActor(Simulation& sim, std::string label) : Allocator(sim, std::move(label)) {
    home_ = sim_.homeForAllocator(/*leased=*/true);
    self_ = sim_.spawn(label_, home_);
    shared_ = !sim_.shareable().empty() && sim_.chance(0.3);
    closesDescriptors_ = sim_.chance(0.3);
    ownNamespace_ = home_.proc == Proc::kOwn && sim_.chance(0.3);
    daemon_ = sim_.chance(0.25);
    sim_.note(sim_.name(self_) + ": exec starts (" + describe(home_) + ")" +
              (closesDescriptors_ ? ", its command closes its descriptors" : "") +
              (ownNamespace_ ? ", its command in a pid namespace of its own" : "") +
              (daemon_ ? ", its command leaves a daemon" : ""));
  }

  bool step() override {
    if (!sim_.host.alive(self_)) {
      writer_.reset();
      return false;
    }
    switch (state_) {
      case State::kAllocate:
        return allocate();
      case State::kCommand:
        return command();
      case State::kRelease:
        return giveBack();
    }
    return false;
  }

 private:
  enum class State { kAllocate, kCommand, kRelease };

  bool allocate() {
    if (!writer_) {
      const std::unique_ptr<liveness::HostFacts> facts = sim_.host.factsOf(self_);
      writer_ = allocationWriter(self_, Owner::of(facts->reader().pid, *facts), shared_, true);
      return true;
    }
    const Writer::Outcome outcome = writer_->step();
    if (outcome == Writer::Outcome::kRunning) return true;
    if (outcome == Writer::Outcome::kFailed) return finish("fails");
    grant_ = grantOf(*writer_, shared_, label_, {self_});
    if (!grant_) return finish("gets too few GPUs: exits 1");
    sim_.count(shared_ ? "exec share grants" : "exec grants");
    records_ = sim_.grant(*grant_).records;
    leases_ = writer_->leases;
    writer_->leases.clear();
    writer_.reset();
    // startCommand: the command is exec's child; the leases survive its execvp.
    Home home = home_;
    if (ownNamespace_) home.pidNamespace = sim_.host.newPidNamespace(home_.pidNamespace);
    command_ = sim_.spawn(label_ + ".cmd", home, self_);
    sim_.deathSignal(*command_);
    sim_.reapedByParent(*command_);
    for (const Description lease : leases_) sim_.files.share(*command_, lease);
    sim_.grant(*grant_).users.push_back(*command_);
    sim_.note(sim_.name(self_) + ": starts its command " + sim_.name(*command_) + " with " +
              std::to_string(leases_.size()) + " lease descriptor(s)");
    state_ = State::kCommand;
    return true;
  }

  /// The command runs (exec waits): it may close its inherited descriptors, leave a daemon, end.
  bool command() {
    const ProcessId command = *command_;
    if (sim_.host.alive(command)) {
      if (closesDescriptors_ && !closed_ && sim_.chance(0.3)) {
        closed_ = true;
        for (const Description lease : leases_) sim_.files.close(command, lease);
        sim_.note(sim_.name(command) + ": closes its inherited descriptors");
        return true;
      }
      if (daemon_ && !daemonStarted_ && sim_.chance(0.3)) {
        daemonStarted_ = true;
        const ProcessId daemon = sim_.fork(label_ + ".daemon", command);
        sim_.passive(daemon);
        // A process the command leaves behind holding the leases uses the GPU.
        if (!closed_ && !leases_.empty()) sim_.grant(*grant_).users.push_back(daemon);
        sim_.note(sim_.name(command) + ": starts a daemon " + sim_.name(daemon) +
                  (closed_ ? " without the leases" : " holding the leases"));
        return true;
      }
      if (sim_.chance(0.25)) {
        sim_.note(sim_.name(command) + ": ends");
        sim_.exitProcess(command);
        return true;
      }
      sim_.note(sim_.name(command) + ": runs");
      return true;
    }
    // waitForCommand: it ended (a zombie, reaped now). giveBackAfterCommand: the leases go, and
    // what was recorded goes back unless a process the command left behind holds its lease.
    sim_.host.exit(command);
    Grant& grant = sim_.grant(*grant_);
    std::erase_if(grant.users, [&](ProcessId user) { return user == self_ || user == command; });
    if (grant.users.empty()) grant.ended = true;
    for (const Description lease : leases_) sim_.files.close(self_, lease);
    leases_.clear();
    std::map<std::string, HeldLease> none;
    SimLeaseSpace folder(sim_, self_, none);
    std::vector<Record> free;
    for (const Record& record : records_) {
      if (!record.lease ||
          folder.folderState(*record.lease, record.leaseFile) == LeaseState::kFree) {
        free.push_back(record);
      }
    }
    sim_.note(sim_.name(self_) + ": its command ended; gives back " + std::to_string(free.size()) +
              " of " + std::to_string(records_.size()) + " record(s)");
    if (free.empty()) return finish("exits");
    writer_ = std::make_unique<Writer>(sim_, self_, Writer::Kind::kRelease);
    writer_->release = std::move(free);
    state_ = State::kRelease;
    return true;
  }

  bool giveBack() {
    const Writer::Outcome outcome = writer_->step();
    if (outcome == Writer::Outcome::kRunning) return true;
    writer_.reset();
    return finish("exits");
  }

  bool finish(const std::string& how) {
    sim_.note(sim_.name(self_) + ": " + how);
    writer_.reset();
    sim_.exitProcess(self_);
    return false;
  }

  Home home_;
  ProcessId self_ = 0;
  bool shared_ = false;
  bool closesDescriptors_ = false;
  bool ownNamespace_ = false;
  bool daemon_ = false;
  bool closed_ = false;
  bool daemonStarted_ = false;
  State state_ = State::kAllocate;
  std::unique_ptr<Writer> writer_;
  std::optional<std::size_t> grant_;
  std::vector<Record> records_;
  std::vector<Description> leases_;
  std::optional<ProcessId> command_;
};

/// A child of fork() of a worker that runs the in-process driver: its copy of the driver is
/// destroyed (~InProcessDiscovery in a child): it gives back what the child allocated itself
/// (nothing) and leaves the parent's records and leases as they are; then it runs a while, holding
/// copies of every descriptor of its parent, and exits.
class ForkedChildActor final : public Actor {
 public:
  /// `parentRecords`: what the parent's driver held at the fork, which the child's copy holds too.
  ForkedChildActor(Simulation& sim, ProcessId self, std::vector<Record> parentRecords)
      : sim_(sim), self_(self), parentRecords_(std::move(parentRecords)) {}

  bool step() override {
    if (!sim_.host.alive(self_)) return false;
    if (!destroyed_) {
      destroyed_ = true;
      if (sim_.chance(0.5)) {
        // fork and exec: every descriptor of the driver is close-on-exec, and no destructor runs.
        const std::vector<Description> descriptors = sim_.files.descriptorsOf(self_);
        for (const Description description : descriptors) sim_.files.close(self_, description);
        sim_.note(sim_.name(self_) + ": execs another program");
        return true;
      }
      // ~InProcessDiscovery where getpid() != createdBy_: only what the child allocated itself
      // (nothing) goes back; the parent's records and leases are left as they are.
      sim_.note(sim_.name(self_) +
                ": its copy of the driver is destroyed: gives back none of the " +
                std::to_string(parentRecords_.size()) + " record(s) of its parent");
      return true;
    }
    if (sim_.chance(0.3)) {
      sim_.note(sim_.name(self_) + ": exits");
      sim_.exitProcess(self_);
      return false;
    }
    sim_.note(sim_.name(self_) + ": runs");
    return true;
  }

 private:
  Simulation& sim_;
  ProcessId self_;
  std::vector<Record> parentRecords_;
  bool destroyed_ = false;
};

/// A worker that runs the in-process driver
/// (src/flink/externalresource/gpu/InProcessDiscovery.cpp): a long-lived process that asks once or
/// twice, leasing what it records for itself; it may fork; when it ends, the driver gives back
/// every record and then lets the leases go.
class WorkerActor final : public Allocator {
 public:
  WorkerActor(Simulation& sim, std::string label, std::vector<std::unique_ptr<Actor>>& actors)
      : Allocator(sim, std::move(label)), actors_(actors) {
    const Home home = sim_.homeForAllocator(/*leased=*/true);
    self_ = sim_.spawn(label_, home);
    calls_ = 1 + sim_.below(2);
    sim_.note(sim_.name(self_) + ": a worker with the in-process driver starts (" + describe(home) +
              ")");
  }

  bool step() override {
    if (!sim_.host.alive(self_)) {
      writer_.reset();
      return false;
    }
    // Another thread of the worker may fork at any time, an allocation under way or not; most
    // often once it holds GPUs (a worker that starts the processes of its tasks).
    if (!forked_ && sim_.chance(held_.empty() ? 0.02 : 0.15)) {
      forked_ = true;
      const ProcessId child = sim_.fork(label_ + ".child", self_);
      std::vector<Record> records;
      for (const Held& held : held_) {
        records.insert(records.end(), held.records.begin(), held.records.end());
      }
      actors_.push_back(std::make_unique<ForkedChildActor>(sim_, child, std::move(records)));
      sim_.note(sim_.name(self_) + ": forks " + sim_.name(child));
      return true;
    }
    if (ending_) return giveBack();
    if (writer_) return allocating();
    if (calls_ > 0) {
      --calls_;
      shared_ = !sim_.shareable().empty() && sim_.chance(0.3);
      const std::unique_ptr<liveness::HostFacts> facts = sim_.host.factsOf(self_);
      writer_ = allocationWriter(self_, Owner::of(facts->reader().pid, *facts), shared_, true);
      return true;
    }
    if (!sim_.chance(0.04)) {
      sim_.note(sim_.name(self_) + ": works on its GPUs");
      return true;
    }
    // ~InProcessDiscovery: nobody uses the GPUs from here on.
    ending_ = true;
    for (const Held& held : held_) {
      sim_.grant(held.grant).ended = true;
    }
    sim_.note(sim_.name(self_) + ": its driver is destroyed: gives back what it holds");
    return giveBack();
  }

 private:
  struct Held {
    std::size_t grant = 0;
    std::vector<Record> records;
    std::vector<Description> leases;
  };

  bool allocating() {
    const Writer::Outcome outcome = writer_->step();
    if (outcome == Writer::Outcome::kRunning) return true;
    if (outcome == Writer::Outcome::kDone) {
      if (const std::optional<std::size_t> grant = grantOf(*writer_, shared_, label_, {self_})) {
        sim_.count(shared_ ? "in-process share grants" : "in-process grants");
        held_.push_back(Held{*grant, sim_.grant(*grant).records, writer_->leases});
        writer_->leases.clear();
      }
    }
    writer_.reset();
    return true;
  }

  /// The driver's destructor: each run's records given back (giveBackQuietly), then the leases.
  bool giveBack() {
    if (writer_) {
      const Writer::Outcome outcome = writer_->step();
      if (outcome == Writer::Outcome::kRunning) return true;
      writer_.reset();
    }
    if (next_ < held_.size()) {
      writer_ = std::make_unique<Writer>(sim_, self_, Writer::Kind::kRelease);
      writer_->release = held_[next_++].records;
      return true;
    }
    for (const Held& held : held_) {
      for (const Description lease : held.leases) sim_.files.close(self_, lease);
    }
    held_.clear();
    sim_.note(sim_.name(self_) + ": exits");
    sim_.exitProcess(self_);
    return false;
  }

  std::vector<std::unique_ptr<Actor>>& actors_;
  ProcessId self_ = 0;
  std::size_t calls_ = 0;
  bool shared_ = false;
  bool forked_ = false;
  bool ending_ = false;
  std::size_t next_ = 0;
  std::unique_ptr<Writer> writer_;
  std::vector<Held> held_;
};

/// Flink's own script, step by step as tests/fixtures/flink-script/flink-coordination-pattern.sh
/// does it: `( flock -x 200; … ) 200<> "$file"` opens the path once and locks through flock(1), a
/// child that exits once it has the lock; each `grep` reads the path anew; `ps -p` judges a pid of
/// the host's namespace alone; `sed -i "/<gpu> /d"` reads the path, writes a new inode and renames
/// it over the path (the script keeps the lock of the inode it opened); `echo … >> "$file"` appends
/// to the inode the path names then, without its lock.
class ScriptActor final : public Actor {
 public:
  ScriptActor(Simulation& sim, std::string label) : sim_(sim), label_(std::move(label)) {
    const Home home;  // Flink's script and its TaskManager: the host's pid namespace
    owner_ = sim_.spawn(label_ + ".tm", home);
    self_ = sim_.spawn(label_, home, owner_);
    sim_.passive(owner_);
    amount_ = 1 + sim_.below(2);
    slow = true;
    sim_.note(sim_.name(self_) + ": Flink's script starts for " + sim_.name(owner_) + ", " +
              std::to_string(amount_) + " GPU(s)");
  }

  bool step() override {
    if (!sim_.host.alive(self_)) return cancel();
    switch (state_) {
      case State::kOpen: {
        std::optional<SimulatedFiles::Inode> inode = sim_.files.lookup(kFile);
        if (!inode) inode = sim_.files.create(kFile);
        fd200_ = sim_.files.open(self_, *inode);
        note("opens fd 200 on inode " + std::to_string(*inode));
        state_ = State::kLock;
        if (!sim_.options.scriptsStallBeforeFlock) return lock();
        // Left aside by the scheduler between its open and its flock: a late flocker.
        if (sim_.chance(0.5)) sleepsUntil = sim_.stepNumber() + 30 + sim_.below(150);
        return true;
      }
      case State::kLock:
        return lock();
      case State::kScan:
        return scan();
      case State::kReclaim:
        return reclaim();
      case State::kSedRename:
        return sedRename();
      case State::kAppend:
        return append();
    }
    return false;
  }

 private:
  enum class State { kOpen, kLock, kScan, kReclaim, kSedRename, kAppend };

  void note(const std::string& what) { sim_.note(sim_.name(self_) + ": " + what); }

  /// The lines of the file the path names now.
  std::vector<std::string> linesAtPath() const {
    std::vector<std::string> lines;
    const std::optional<SimulatedFiles::Inode> inode = sim_.files.lookup(kFile);
    if (!inode) return lines;
    const std::string& text = sim_.files.contents(*inode);
    std::size_t start = 0;
    while (start < text.size()) {
      std::size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      lines.push_back(text.substr(start, end - start));
      start = end + 1;
    }
    return lines;
  }

  bool lock() {
    if (!flock_) {
      // `flock -x 200`: flock(1) inherits descriptor 200 and calls flock(2) itself.
      flock_ = sim_.spawn(label_ + ".flock", Home{}, self_);
      sim_.inGroupOfParent(*flock_);
      sim_.files.share(*flock_, fd200_);
    }
    const ProcessId taker = sim_.options.scriptLockTakenByFlockProgram ? *flock_ : self_;
    if (!sim_.files.tryLock(fd200_, taker)) {
      sim_.files.wait(fd200_, taker);
      note("waits in flock for inode " + std::to_string(sim_.files.inodeOf(fd200_)));
      sim_.count("script lock waits");
      return true;
    }
    sim_.exitProcess(*flock_);  // flock(1) exits; the shell's descriptor keeps the lock
    flock_.reset();
    note("has the lock of inode " + std::to_string(sim_.files.inodeOf(fd200_)));
    state_ = State::kScan;
    return true;
  }

  /// `grep -c "^$gpu " "$file"` for the next GPU.
  bool scan() {
    if (taken_.size() == amount_ || next_ >= sim_.units().size()) {
      next_ = 0;
      state_ = State::kReclaim;
      return reclaim();
    }
    const std::string gpu = sim_.units()[next_++];
    bool recorded = false;
    for (const std::string& line : linesAtPath())
      recorded = recorded || line.starts_with(gpu + " ");
    (recorded ? recorded_ : taken_).push_back(gpu);
    note("greps GPU " + gpu + (recorded ? ": recorded" : ": free"));
    return true;
  }

  /// `holder=$(grep "^$gpu " | awk '{print $2}')`, `[ -n $holder ] && [ "$(ps -p $holder | grep
  /// -c $holder)" -eq 0 ]`, then `sed -i "/$gpu /d"`'s read and write of its new file.
  bool reclaim() {
    if (taken_.size() == amount_ || next_ >= recorded_.size()) {
      if (taken_.size() < amount_) {
        note("could not get enough GPU resources: exits 1");
        return finish(false);
      }
      next_ = 0;
      state_ = State::kAppend;
      return true;
    }
    const std::string gpu = recorded_[next_++];
    std::vector<std::string> holders;
    for (const std::string& line : linesAtPath()) {
      if (!line.starts_with(gpu + " ")) continue;
      const std::size_t start = line.find_first_not_of(" \t", gpu.size());
      if (start == std::string::npos) continue;
      holders.push_back(line.substr(start, line.find_first_of(" \t", start) - start));
    }
    // Unquoted: several holders make `[ -n a b ]` fail (the GPU stays taken); none makes `[ -n ]`
    // true and `ps -p` list nothing (it is taken back).
    bool gone = false;
    judged_.reset();
    if (holders.size() == 1) {
      const pid_t pid = static_cast<pid_t>(std::stol(holders.front()));
      gone = !sim_.host.processOf(SimulatedHost::kHostNamespace, pid);
      judged_ = pid;
    } else {
      gone = holders.empty();
    }
    if (!gone) {
      note("finds GPU " + gpu + "'s holder running");
      return true;
    }
    // sed -i: reads the path, writes the lines without "<gpu> " to a new file beside it.
    std::string kept;
    for (const std::string& line : linesAtPath()) {
      if (line.find(gpu + " ") == std::string::npos) kept += line + "\n";
    }
    temporary_ = kFile + ".sed." + label_ + "." + std::to_string(++temporaries_);
    const SimulatedFiles::Inode inode = sim_.files.create(temporary_);
    sim_.files.contents(inode) = kept;
    sedGpu_ = gpu;
    note("finds GPU " + gpu + "'s holder gone; sed -i writes inode " + std::to_string(inode));
    state_ = State::kSedRename;
    return true;
  }

  bool sedRename() {
    sim_.files.rename(temporary_, kFile);
    sim_.mark.kind = StepMark::Kind::kScriptSed;
    sim_.mark.gpu = sedGpu_;
    sim_.mark.judgedGone = judged_;
    taken_.push_back(sedGpu_);
    note("sed renames its new file over the path: GPU " + sedGpu_ + " taken back");
    sim_.count("script reclaims");
    state_ = State::kReclaim;
    return true;
  }

  /// `echo "$gpu $owner" >> "$file"`, one GPU a step.
  bool append() {
    if (next_ >= taken_.size()) return finish(true);
    const std::string gpu = taken_[next_++];
    std::optional<SimulatedFiles::Inode> inode = sim_.files.lookup(kFile);
    if (!inode) inode = sim_.files.create(kFile);
    const pid_t owner = sim_.host.pidOf(owner_);
    sim_.files.contents(*inode) += gpu + " " + std::to_string(owner) + "\n";
    if (!grant_) {
      Grant grant;
      grant.who = label_;
      grant.byScript = true;
      grant.users = {owner_};
      grant_ = sim_.newGrant(std::move(grant));
    }
    Grant& grant = sim_.grant(*grant_);
    grant.whole.push_back(gpu);
    grant.scriptRecords.emplace_back(gpu, owner);
    grant.present.push_back(true);
    note("appends '" + gpu + " " + std::to_string(owner) + "' to inode " + std::to_string(*inode));
    return true;
  }

  bool finish(bool handed) {
    sim_.exitProcess(self_);  // the subshell exits: descriptor 200 closes, and the lock goes
    if (grant_) {
      if (handed) {
        sim_.hand(*grant_);
        sim_.count("script grants");
      } else {
        sim_.grant(*grant_).ended = true;
      }
    }
    return false;
  }

  bool cancel() {
    if (flock_ && sim_.host.exists(*flock_)) sim_.kill(*flock_);
    if (grant_) sim_.grant(*grant_).ended = true;  // its TaskManager is told it failed
    return false;
  }

  Simulation& sim_;
  std::string label_;
  ProcessId owner_ = 0;
  ProcessId self_ = 0;
  std::optional<ProcessId> flock_;
  Description fd200_ = 0;
  std::size_t amount_ = 1;
  State state_ = State::kOpen;
  std::vector<std::string> taken_;
  std::vector<std::string> recorded_;
  std::size_t next_ = 0;
  std::string temporary_;
  std::size_t temporaries_ = 0;
  std::string sedGpu_;
  std::optional<pid_t> judged_;
  std::optional<std::size_t> grant_;
};

/// An operator's `flink-gpu release --force` of a record that a lease holds too (releaseChecked
/// with force, for a GPU or an owner that `status` showed): the record goes, and its lease alone
/// keeps the GPU held while the lease's holder runs (docs/coordination-file.md, "Leases").
class OperatorActor final : public Actor {
 public:
  OperatorActor(Simulation& sim, std::string label) : sim_(sim) {
    self_ = sim_.spawn(label, Home{});
  }

  bool step() override {
    if (!sim_.host.alive(self_)) return false;
    if (!writer_) {
      // What `status` showed it.
      std::vector<Record> leased;
      if (const std::optional<SimulatedFiles::Inode> inode = sim_.files.lookup(kFile)) {
        for (Record& record : coordination::parseRecords(sim_.files.contents(*inode)).records) {
          if (record.lease) leased.push_back(std::move(record));
        }
      }
      if (leased.empty()) {
        sim_.note(sim_.name(self_) + ": finds no leased record to release");
        sim_.exitProcess(self_);
        return false;
      }
      const Record& record = sim_.pick(leased);
      sim_.note(sim_.name(self_) + ": release --force of GPU " + record.gpu + " of process " +
                std::to_string(record.owner.pid));
      writer_ = std::make_unique<Writer>(sim_, self_, Writer::Kind::kRelease);
      writer_->release = {record};
      writer_->byOperator = true;
      return true;
    }
    if (writer_->step() == Writer::Outcome::kRunning) return true;
    writer_.reset();
    sim_.exitProcess(self_);
    return false;
  }

 private:
  Simulation& sim_;
  ProcessId self_ = 0;
  std::unique_ptr<Writer> writer_;
};

// ---- the world ------------------------------------------------------------------------------

Simulation::Simulation(const SimulationOptions& opts)
    : random(opts.seed),
      files(host, opts.inodeNumbersComeBack ? SimulatedFiles::InodeNumbers::kLowestFree
                                            : SimulatedFiles::InodeNumbers::kIncreasing),
      options(opts) {
  draw();
}

void Simulation::draw() {
  switch (options.worlds) {
    case SimulationWorlds::kWithScripts:
      scripts_ = true;
      break;
    case SimulationWorlds::kInContainers:
      break;
    case SimulationWorlds::kSandboxesBesideScripts:
      scripts_ = true;
      sandboxes_ = true;
      break;
    case SimulationWorlds::kAll:
      scripts_ = options.seed % 3 != 0;
      sandboxes_ = options.seed % 3 == 2;
      break;
  }
  // Small pid ranges, so that pids come back (never within a few ticks of the last start).
  host.setPidRange(SimulatedHost::kHostNamespace, 300, 420, 3 * SimulatedHost::kTickNs);
  for (int i = 0; i < 2; ++i) {
    const std::uint64_t ns = host.newPidNamespace();
    host.setPidRange(ns, 1, 60, 3 * SimulatedHost::kTickNs);
    namespaces_.push_back(ns);
    const std::uint64_t sandbox = host.newPidNamespace();
    host.setPidRange(sandbox, 1, 60, 3 * SimulatedHost::kTickNs);
    sandboxNamespaces_.push_back(sandbox);
  }
  timeOffsets_ = {0, 0, 3'700'001, 12'345'678'901};

  std::vector<discovery::GpuDevice> nvml;
  std::vector<discovery::GpuDevice> uuidOnly;
  for (std::size_t i = 0; i < kGpus; ++i) {
    const std::string id = std::to_string(i);
    char uuid[64];
    std::snprintf(uuid, sizeof uuid, "GPU-5c3e%04zx-aaaa-bbbb-cccc-%012zx", i * 17 + 3, i + 1);
    char bus[32];
    std::snprintf(bus, sizeof bus, "00000000:%02zX:00.0", 0x1B + 0x20 * i);
    ids_.push_back(id);
    uuidOf_[id] = uuid;
    busOf_[id] = bus;
    discovery::GpuDevice device;
    device.identifier = id;
    device.uuid = std::string(uuid);
    uuidOnly.push_back(device);
    device.pciBusId = std::string(bus);
    nvml.push_back(device);
  }
  indices_[Knowledge::kNvml] =
      std::make_shared<const discovery::UnitIndex>(discovery::UnitIndex::of(nvml));
  indices_[Knowledge::kUuid] =
      std::make_shared<const discovery::UnitIndex>(discovery::UnitIndex::of(uuidOnly));
  indices_[Knowledge::kIndex] =
      std::make_shared<const discovery::UnitIndex>(discovery::UnitIndex::ofIdentifiers(ids_, {}));

  // A GPU or two drained or lost: no allocator's request has them.
  const std::size_t excluded = below(3);
  while (excluded_.size() < excluded) excluded_.insert(pick(ids_));
  for (const std::string& id : ids_) {
    if (!excluded_.count(id)) units_.push_back(id);
  }
  // A GPU or two declared shared, K ways.
  const std::size_t shared = below(3);
  std::set<std::string> declared;
  while (declared.size() < shared) declared.insert(pick(units_));
  for (const std::string& id : units_) {
    if (declared.count(id))
      shareable_.push_back(ShareableGpu{id, 2 + static_cast<unsigned>(below(2)), ""});
  }

  // What an earlier boot and Flink's own dead workers left in the file.
  const SimulatedFiles::Inode file = files.create(kFile);
  std::string text;
  if (chance(0.5)) {
    text += pick(ids_) + " 977\t12345\tboot=00000000-0000-4000-8000-000000000000\n";
  }
  if (chance(0.5)) text += pick(ids_) + " 411\n";
  files.contents(file) = text;

  world_ = std::string(scripts_ ? "Flink's scripts beside ours" : "allocators in containers") +
           "; inode numbers " +
           (files.numbers() == SimulatedFiles::InodeNumbers::kLowestFree ? "lowest free"
                                                                         : "increasing") +
           "; drained or lost:";
  for (const std::string& id : excluded_) world_ += " " + id;
  if (excluded_.empty()) world_ += " none";
  world_ += "; shared:";
  for (const ShareableGpu& gpu : shareable_) {
    world_ += " " + gpu.gpu + "x" + std::to_string(gpu.replicas);
  }
  if (shareable_.empty()) world_ += " none";
  if (scripts_) {
    world_ += std::string("; the script's lock taken by ") +
              (options.scriptLockTakenByFlockProgram ? "flock(1)" : "its shell") +
              (options.scriptsStallBeforeFlock ? "; scripts stall before flock" : "");
  }
}

Home Simulation::homeForAllocator(bool leased) {
  Home home;
  home.boottimeOffsetNs = pick(timeOffsets_);
  if (sandboxes_ && leased && chance(0.5)) {
    home.pidNamespace = pick(sandboxNamespaces_);
    home.proc = Proc::kForeign;
    return home;
  }
  // Flink's script judges every pid in the host's namespace: workers in containers must not share
  // its file (docs/coordination-file.md, "Containers").
  if (scripts_) return home;
  const std::size_t where = below(10);
  if (where < 4) return home;
  if (where < 7) {
    home.pidNamespace = pick(namespaces_);
  } else if (where < 8) {
    home.pidNamespace = host.newPidNamespace();
    home.proc = Proc::kForeign;  // `unshare -p --fork` without --mount-proc
  } else {
    home.pidNamespace = chance(0.5) ? SimulatedHost::kHostNamespace : pick(namespaces_);
    home.proc = Proc::kNone;  // bwrap without --proc
  }
  return home;
}

std::shared_ptr<const discovery::UnitIndex> Simulation::indexFor(Knowledge knowledge) const {
  return indices_.at(knowledge);
}

std::unordered_map<std::string, std::string> Simulation::uuidsFor(Knowledge knowledge) const {
  if (knowledge == Knowledge::kIndex) return {};
  return uuidOf_;
}

std::function<std::vector<std::string>(const std::vector<std::string>&, std::size_t)>
Simulation::chooser() {
  return [this](const std::vector<std::string>& free, std::size_t amount) {
    std::vector<std::string> chosen = free;
    std::shuffle(chosen.begin(), chosen.end(), random);
    chosen.resize(std::min(amount, chosen.size()));
    return chosen;
  };
}

ProcessId Simulation::spawn(const std::string& label, const Home& home,
                            std::optional<ProcessId> parent) {
  SimulatedHost::Spawn spawn;
  spawn.parent = parent;
  spawn.pidNamespace = home.pidNamespace;
  spawn.proc = home.proc;
  spawn.boottimeOffsetNs = home.boottimeOffsetNs;
  const ProcessId process = host.spawn(spawn);
  if (labels_.size() <= process) labels_.resize(process + 1);
  labels_[process] = label;
  return process;
}

ProcessId Simulation::fork(const std::string& label, ProcessId parent) {
  const SimulatedHost::Spawn& of = host.spawnOf(parent);
  const ProcessId child = spawn(label, Home{of.pidNamespace, of.proc, of.boottimeOffsetNs}, parent);
  const std::vector<Description> descriptors = files.descriptorsOf(parent);
  for (const Description description : descriptors) files.share(child, description);
  return child;
}

void Simulation::exitProcess(ProcessId process) {
  if (!host.alive(process)) return;
  files.closeAll(process);
  const std::optional<ProcessId> parent = host.spawnOf(process).parent;
  if (reapedByParent_.count(process) && parent && host.alive(*parent)) {
    host.becomeZombie(process);
  } else {
    host.exit(process);
  }
  for (ProcessId child = 0; child < host.processCount(); ++child) {
    if (host.spawnOf(child).parent != process || !host.exists(child)) continue;
    if (!host.alive(child)) {
      host.exit(child);  // a zombie child goes to init, which reaps it
    } else if (deathSignal_.count(child)) {
      note(name(child) + ": killed by its parent-death signal");
      kill(child);
    }
  }
}

void Simulation::kill(ProcessId process) {
  count("kills");
  exitProcess(process);
}

std::string Simulation::name(ProcessId process) const {
  const std::optional<pid_t> pid = host.pidOnceIn(process, SimulatedHost::kHostNamespace);
  std::string text = labels_.at(process) + "(" + std::to_string(pid.value_or(0));
  const std::uint64_t ns = host.spawnOf(process).pidNamespace;
  if (ns != SimulatedHost::kHostNamespace) text += "/" + std::to_string(host.pidOf(process));
  return text + ")";
}

void Simulation::note(const std::string& what) {
  char when[48];
  std::snprintf(when, sizeof when, "%5zu %9.3fs ", step_, static_cast<double>(host.now()) / 1e9);
  log_.push_back(when + what);
}

std::size_t Simulation::newGrant(Grant grant) {
  grant.present.resize(grant.records.size() + grant.scriptRecords.size(), true);
  grants_.push_back(std::move(grant));
  return grants_.size() - 1;
}

void Simulation::hand(std::size_t id) {
  Grant& grant = grants_[id];
  grant.handed = true;
  for (const std::string& gpu : grant.whole) {
    if (excluded_.count(gpu))
      fail("(c) " + grant.who + " was handed GPU " + gpu + ", drained or lost");
  }
  for (const auto& [gpu, index] : grant.shares) {
    if (excluded_.count(gpu)) {
      fail("(c) " + grant.who + " was handed a share of GPU " + gpu + ", drained or lost");
    }
  }
  std::string what = grant.who + " is handed";
  for (const std::string& gpu : grant.whole) what += " " + gpu;
  for (const auto& [gpu, index] : grant.shares) what += " " + gpu + "/" + std::to_string(index);
  note(what);
}

bool Simulation::anyUserRuns(const Grant& grant) const {
  return std::any_of(grant.users.begin(), grant.users.end(),
                     [&](ProcessId user) { return host.alive(user); });
}

void Simulation::fail(const std::string& why) {
  if (failed_) return;
  failed_ = true;
  failure_ = "step " + std::to_string(step_) + ": " + why;
  note("FAILED: " + why);
}

void Simulation::addActor() {
  const std::string number = "#" + std::to_string(++actorsMade_);
  const std::size_t kind = below(20);
  if (kind < 6) {
    actors_.push_back(std::make_unique<ExecActor>(*this, "exec" + number));
  } else if (kind < 10) {
    actors_.push_back(std::make_unique<ProgramActor>(*this, "program" + number));
  } else if (kind < 14) {
    actors_.push_back(std::make_unique<WorkerActor>(*this, "worker" + number, actors_));
  } else if (kind < 16) {
    actors_.push_back(std::make_unique<OperatorActor>(*this, "operator" + number));
  } else if (scripts_) {
    actors_.push_back(std::make_unique<ScriptActor>(*this, "script" + number));
  } else {
    actors_.push_back(std::make_unique<ExecActor>(*this, "exec" + number));
  }
}

void Simulation::killSomeone() {
  std::vector<ProcessId> running;
  for (ProcessId process = 0; process < host.processCount(); ++process) {
    if (host.alive(process)) running.push_back(process);
  }
  if (running.empty()) return;
  ProcessId victim = pick(running);
  if (inGroupOfParent_.count(victim)) victim = host.spawnOf(victim).parent.value_or(victim);
  note(name(victim) + ": SIGKILL");
  kill(victim);
}

void Simulation::endSomeone() {
  std::erase_if(passive_, [&](ProcessId process) { return !host.alive(process); });
  if (passive_.empty()) return;
  const ProcessId process = pick(passive_);
  note(name(process) + ": exits");
  exitProcess(process);
}

void Simulation::stepSomeone() {
  // A process the scheduler leaves aside for a long while (a loaded host, a stopped process) makes
  // the interleavings that a fair scheduler gives only by rare chance.
  std::vector<std::size_t> awake;
  for (std::size_t i = 0; i < actors_.size(); ++i) {
    if (actors_[i]->sleepsUntil <= step_) awake.push_back(i);
  }
  if (awake.empty()) return;
  const std::size_t i = pick(awake);
  Actor& actor = *actors_[i];
  if (!actor.step()) {
    actors_.erase(actors_.begin() + static_cast<std::ptrdiff_t>(i));
  } else if (chance(0.02)) {
    actor.sleepsUntil = step_ + 20 + below(300);
  } else if (actor.slow) {
    actor.sleepsUntil = step_ + 1 + below(12);
  }
}

/// (b): each record of a running user is in the file at the path.
void Simulation::checkRecords() {
  static const std::string kNoFile;
  const std::optional<SimulatedFiles::Inode> inode = files.lookup(kFile);
  const std::string& text = inode ? files.contents(*inode) : kNoFile;
  // The file changes at few of the steps: its records are parsed again only when its text did.
  if (!checkedParse_ || text != checkedText_) {
    checkedParse_ = coordination::parseRecords(text);
    checkedText_ = text;
  }
  const ParsedRecords& parsed = *checkedParse_;
  for (Grant& grant : grants_) {
    if (grant.ended || grant.excused || grant.released || !anyUserRuns(grant)) continue;
    const std::size_t ours = grant.records.size();
    for (std::size_t i = 0; i < grant.present.size(); ++i) {
      bool present = false;
      std::string gpu;
      pid_t pid = 0;
      if (i < ours) {
        const Record& record = grant.records[i];
        gpu = record.gpu;
        pid = record.owner.pid;
        present =
            std::find(parsed.records.begin(), parsed.records.end(), record) != parsed.records.end();
      } else {
        std::tie(gpu, pid) = grant.scriptRecords[i - ours];
        for (const Record& record : parsed.records) {
          present = present || (record.gpu == gpu && record.owner.pid == pid &&
                                !record.owner.startTime && record.extra.empty());
        }
      }
      if (present || !grant.present[i]) {
        grant.present[i] = present;
        continue;
      }
      grant.present[i] = false;
      const std::string what = "record '" + gpu + " " + std::to_string(pid) + "' of " + grant.who;
      if (mark.kind == StepMark::Kind::kOperatorRelease) {
        grant.released = true;  // its lease alone holds the GPU from now on
        note(what + " released by an operator");
        count("records released by an operator");
        continue;
      }
      if (mark.kind == StepMark::Kind::kScriptSed) {
        // Flink's rule: it deletes the lines of a GPU whose one holder `ps -p` does not find.
        const bool byItsRule = gpu == mark.gpu && mark.judgedGone == pid;
        if (byItsRule || grant.byScript) {
          grant.excused = true;
          note(what + (byItsRule ? " taken back by Flink's script, which judges by pid alone"
                                 : " lost to another script's sed -i (Flink's own flaw)"));
          count("records taken by Flink's own rules");
          continue;
        }
        fail("(b) " + what +
             ", whose user runs, was lost when Flink's sed -i renamed a copy over "
             "the path");
      } else if (mark.kind == StepMark::Kind::kOurWrite) {
        fail("(b) " + what + ", whose user runs, was removed by a writer of ours");
      } else {
        fail("(b) " + what + ", whose user runs, is no longer in the file");
      }
    }
  }
}

bool Simulation::excused(const Grant& a, const Grant& b) const {
  // Flink's scripts among themselves; a script that takes what only a lease holds, which it cannot
  // see (the record taken by its own rule, or released by an operator); a script's grant whose
  // record another script lost: docs/coordination-file.md, "What remains possible" and
  // "Containers". Between two of ours, nothing.
  if (!a.byScript && !b.byScript) return false;
  return (a.byScript && b.byScript) || a.excused || b.excused || a.released || b.released;
}

/// (a): no GPU used by two running users.
void Simulation::checkUses() {
  struct Use {
    std::size_t grant;
    bool whole;
    unsigned index;
  };
  std::map<std::string, std::vector<Use>> uses;
  for (std::size_t id = 0; id < grants_.size(); ++id) {
    const Grant& grant = grants_[id];
    if (!grant.handed || grant.ended || !anyUserRuns(grant)) continue;
    for (const std::string& gpu : grant.whole) uses[gpu].push_back(Use{id, true, 0});
    for (const auto& [gpu, index] : grant.shares) uses[gpu].push_back(Use{id, false, index});
  }
  for (const auto& [gpu, list] : uses) {
    unsigned replicas = 0;
    for (const ShareableGpu& shared : shareable_) {
      if (shared.gpu == gpu) replicas = shared.replicas;
    }
    for (std::size_t i = 0; i < list.size(); ++i) {
      const Use& one = list[i];
      if (!one.whole && one.index >= replicas) {
        fail("(a) " + grants_[one.grant].who + " holds share " + std::to_string(one.index) +
             " of GPU " + gpu + ", which has " + std::to_string(replicas));
        return;
      }
      for (std::size_t j = i + 1; j < list.size(); ++j) {
        const Use& other = list[j];
        const bool clash = one.whole || other.whole || one.index == other.index;
        if (!clash || excused(grants_[one.grant], grants_[other.grant])) continue;
        fail("(a) GPU " + gpu + " is used by " + grants_[one.grant].who +
             (one.whole ? " whole" : " (share " + std::to_string(one.index) + ")") + " and by " +
             grants_[other.grant].who +
             (other.whole ? " whole" : " (share " + std::to_string(other.index) + ")"));
        return;
      }
    }
  }
}

void Simulation::check() {
  checkRecords();
  checkUses();
}

SimulationResult Simulation::run() {
  note("world: " + world_);
  for (step_ = 1; step_ <= options.steps && !failed_; ++step_) {
    host.advance(static_cast<std::int64_t>(below(2 * kMs + 1)));
    mark = StepMark{};
    const double roll = std::uniform_real_distribution<double>(0, 1)(random);
    if (actors_.size() < 8 && roll < (actors_.size() < 3 ? 0.3 : 0.06)) {
      addActor();
    } else if (roll < 0.09) {
      killSomeone();
    } else if (roll < 0.11) {
      endSomeone();
    } else {
      stepSomeone();
    }
    check();
  }
  SimulationResult result;
  result.ok = !failed_;
  result.failure = failure_;
  result.world = world_;
  result.steps = std::move(log_);
  result.counts = counts_;
  return result;
}

}  // namespace

SimulationResult simulate(const SimulationOptions& options) {
  Simulation simulation(options);
  return simulation.run();
}

}  // namespace flink::testing
