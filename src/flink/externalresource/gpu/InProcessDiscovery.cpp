#include "flink/externalresource/gpu/InProcessDiscovery.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
#include <utility>

#include "flink/util/Exceptions.h"
#include "flink/util/TimeUtils.h"
#include "host/coordination/Coordination.h"
#include "host/defaultdiscovery/DiscoveryArguments.h"
#include "host/store/LockedFile.h"
#include "util/Logging.h"
#include "util/Strings.h"

namespace flink::externalresource::gpu {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using defaultdiscovery::DiscoveryFailure;

namespace {

const logging::Logger& runLog() {
  static const logging::Logger logger("GPUDriver");
  return logger;
}

/// A run given up on at the time-out, told through `ended` when it has ended (and given back
/// what it recorded).
struct AbandonedRun {
  std::mutex mutex;
  std::condition_variable ended;
  bool over = false;
};

/// What one run found and took.
struct RunAnswer {
  std::vector<std::string> answer;
  std::vector<discovery::GpuDevice> devices;
  std::shared_ptr<const discovery::UnitIndex> index;
  discovery::HostGpuSource source = discovery::HostGpuSource::kListed;
  defaultdiscovery::Report report;
  /// Coordination mode: what was recorded, for whom, and its leases.
  bool recorded = false;
  /// The records are this process's (no --owner-pid naming another): leased, and given back
  /// with the driver. Records for another owner follow its pid, as the script's do.
  bool ownRecords = false;
  fs::path coordinationFile;
  coordination::Owner owner;
  std::vector<std::string> granted;
  /// The records written for `granted`: what is given back.
  std::vector<coordination::Record> records;
  std::vector<coordination::Lease> leases;
  /// With --share: the share of each GPU of `granted`.
  std::vector<defaultdiscovery::ShareGrant> shares;
};

/// What is left until `deadline`, rounded up: a wait given it inside the run never ends before
/// the driver's own, so a run that ran out of time is always told as a time-out.
std::chrono::milliseconds remainingUntil(Clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

/// What a run is doing, for the message of a time-out.
enum class Stage { kStarting, kFindingGpus, kAllocating };

/// The default discovery's work for `args`, as nvidia-gpu-discovery does it, for this process
/// (the script's parent) unless the arguments name an owner; `stage` follows where it is.
/// @throws DiscoveryFailure as the program would fail.
RunAnswer discoverOnce(const defaultdiscovery::DiscoveryArguments& args, Clock::time_point deadline,
                       std::atomic<Stage>& stage, fs::path& coordinationFile) {
  RunAnswer result;
  result.report.notes = args.notes;
  result.owner = coordination::Owner::of(args.ownerPid.value_or(::getpid()));

  stage = Stage::kFindingGpus;
  defaultdiscovery::HostUnitsOptions hostOptions = defaultdiscovery::hostUnitsOptionsFor(args);
  hostOptions.timeLimit = remainingUntil(deadline);
  hostOptions.inProcess = true;
  defaultdiscovery::HostUnits host = defaultdiscovery::findHostUnits(hostOptions, result.report);

  // Written before the stage says so: the caller reads it once it sees kAllocating.
  coordinationFile = args.coordinationFile.path;
  stage = Stage::kAllocating;
  defaultdiscovery::GrantRequest request = defaultdiscovery::grantRequestFor(args, result.owner);
  result.ownRecords = args.coordination && (!args.ownerPid || *args.ownerPid == ::getpid());
  request.lease = result.ownRecords;
  request.lockTimeout = std::min(store::kDefaultLockTimeout, remainingUntil(deadline));
  defaultdiscovery::Grant grant = defaultdiscovery::grantUnits(host, request, result.report);

  result.answer = std::move(grant.answer);
  result.devices = std::move(host.devices);
  result.index = std::move(host.index);
  result.source = host.source;
  result.recorded = grant.recorded;
  result.coordinationFile = args.coordinationFile.path;
  result.granted = std::move(grant.granted);
  result.records = std::move(grant.records);
  result.leases = std::move(grant.leases);
  result.shares = std::move(grant.shares);
  return result;
}

/// Gives back what a run recorded; logs instead of throwing.
void giveBackQuietly(const fs::path& file, const std::vector<coordination::Record>& records,
                     const std::vector<std::string>& granted) noexcept {
  try {
    defaultdiscovery::giveBack(file, records);
  } catch (const std::exception& e) {
    runLog().warn("Could not give back GPU(s) " + strings::join(granted, ",") +
                  " in the coordination file " + file.string() + ": " + e.what());
  }
}

/// One run on a thread of its own. Shared by the caller and the thread; the one that finishes
/// last owns what is left: a run given up on gives back what it recorded itself.
struct Run {
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  bool abandoned = false;
  /// Set with `abandoned`: the driver's record of the run, told when it ends.
  std::shared_ptr<AbandonedRun> ending;
  std::optional<RunAnswer> answer;
  std::exception_ptr error;
  /// Where the run is, for the caller's message at the time-out.
  std::atomic<Stage> stage{Stage::kStarting};
  /// The coordination file, set before `stage` becomes kAllocating.
  fs::path coordinationFile;
};

/// How long a thread that has done a run waits for the next one before it ends.
constexpr std::chrono::seconds kRunThreadLinger{1};

/// A run for runOnAThread: it calls `finishing` just before it tells its caller that it is done,
/// unless it was given up on.
using RunJob = std::function<void(const std::function<void()>& finishing)>;

/// The thread of this process that waits for a run, if one does (see runOnAThread).
struct WaitingThread {
  explicit WaitingThread(WaitingThread* inherited) : parent(inherited) {}
  /// The one of the process this one was forked from: kept for leak checkers, never used.
  WaitingThread* const parent;
  std::mutex mutex;
  std::condition_variable wake;
  /// A thread waits for a run, or has claimed the place and is about to (see serveRuns).
  bool waiting = false;
  /// The run handed to it.
  RunJob job;
};

/// This process's, made at the first run; never freed (a thread may still wait on it as the
/// process exits).
std::atomic<WaitingThread*> gWaitingThread{nullptr};
/// The one a child of fork() inherited and forgot (forgetAtFork): kept reachable for leak
/// checkers. Written only in a child before it runs anything else, read when one is made.
WaitingThread* gForgotten = nullptr;

/// pthread_atfork's child handler: the parent's waiting thread is not in the child, and the
/// parent's mutex may have been held at the fork: the child never uses them. (Not told by a pid:
/// a child that forks again may be given, once its parent is gone, the parent's pid.)
void forgetAtFork() noexcept {
  if (WaitingThread* inherited = gWaitingThread.load(std::memory_order_relaxed)) {
    gForgotten = inherited;
  }
  gWaitingThread.store(nullptr, std::memory_order_relaxed);
}

/// Registered as the library loads, not at the first run: a fork during a first-time
/// initialisation would leave its child waiting on the initialisation's guard.
const bool kForgottenAtFork = ::pthread_atfork(nullptr, nullptr, forgetAtFork) == 0;

/// This process's waiting thread, or null where a child of fork() could not be told apart (the
/// handler could not be registered): then each run has a thread of its own.
WaitingThread* waitingThreadOfThisProcess() {
  if (!kForgottenAtFork) return nullptr;
  WaitingThread* found = gWaitingThread.load(std::memory_order_acquire);
  while (found == nullptr) {
    auto* made = new WaitingThread(gForgotten);  // NOLINT(cppcoreguidelines-owning-memory)
    if (gWaitingThread.compare_exchange_strong(found, made, std::memory_order_acq_rel)) {
      return made;
    }
    delete made;  // NOLINT(cppcoreguidelines-owning-memory): another thread made it first
  }
  return found;
}

/// Does `job`, then waits up to kRunThreadLinger for the next one unless another thread waits
/// already, and so on.
void serveRuns(WaitingThread* self, RunJob job) {
  // For top -H, ps -L and gdb; a name that does not fit (it does) would only leave the old one.
  (void)::pthread_setname_np(::pthread_self(), "flink-gpu-run");
  for (;;) {
    // The place of the waiting thread is claimed before the caller hears that the run is done: a
    // caller that asks again at once finds it (the job is taken once the thread waits).
    bool claimed = false;
    job([&] {
      if (self == nullptr) return;
      const std::lock_guard<std::mutex> lock(self->mutex);
      if (!self->waiting) claimed = self->waiting = true;
    });
    job = nullptr;
    if (!claimed) return;
    std::unique_lock<std::mutex> lock(self->mutex);
    const bool handed =
        self->wake.wait_for(lock, kRunThreadLinger, [&] { return static_cast<bool>(self->job); });
    self->waiting = false;
    if (!handed) return;
    job = std::move(self->job);
    self->job = nullptr;
  }
}

/// Does `job` on a thread other than the caller's: the one that waits for a run, if one does,
/// else a new one. A thread started and ended for each run cost more here than the rest of a
/// discovery's set-up (the clone; on its end, its stack's pages given back with a TLB
/// shoot-down; in the next run, each page of stack touched faulted in again: 70 us for an empty
/// thread, 270 us for one that touches 64 KiB of stack on this project's VM); a thread that has
/// done a run waits a second for the next, of any driver of this process. The job must not
/// throw.
/// @throws std::system_error when no thread can be started.
void runOnAThread(RunJob job) {
  WaitingThread* waiting = waitingThreadOfThisProcess();
  if (waiting != nullptr) {
    const std::lock_guard<std::mutex> lock(waiting->mutex);
    if (waiting->waiting && !waiting->job) {
      waiting->job = std::move(job);
      waiting->wake.notify_one();
      return;
    }
  }
  std::thread(serveRuns, waiting, std::move(job)).detach();
}

/// The program's failure `e`, as the FlinkException (out of time, the TimeoutException) the
/// driver throws, with `e` nested for callers that act on its stage or kind.
[[noreturn]] void fail(const fs::path& script, const DiscoveryFailure& e,
                       Clock::time_point deadline) {
  std::string message =
      "The GPU discovery script " + script.string() + " (run in-process) failed: " + e.what();
  for (const Notice& notice : e.report().notices()) message += "\n" + notice.line();
  const bool outOfTime = (e.stage() == DiscoveryFailure::Stage::kEnumeration ||
                          e.stage() == DiscoveryFailure::Stage::kCoordination) &&
                         Clock::now() >= deadline;
  runLog().warn(message);
  try {
    throw e;
  } catch (const DiscoveryFailure&) {
    if (outOfTime) std::throw_with_nested(TimeoutException(message));
    std::throw_with_nested(FlinkException(message));
  }
}

}  // namespace

/// What the runs recorded and leased: given back with the object.
struct InProcessDiscovery::Holdings {
  struct Held {
    /// The process that allocated them: only it gives them back (see ~InProcessDiscovery).
    pid_t allocatedBy = 0;
    fs::path coordinationFile;
    coordination::Owner owner;
    std::vector<std::string> granted;
    std::vector<coordination::Record> records;
    std::vector<coordination::Lease> leases;
  };
  std::mutex mutex;
  std::vector<Held> held;
  /// Runs given up on at the time-out.
  std::vector<std::shared_ptr<AbandonedRun>> abandoned;
};

InProcessDiscovery::InProcessDiscovery(fs::path script, const std::vector<std::string>& arguments,
                                       std::chrono::milliseconds timeout)
    : script_(std::move(script)),
      timeout_(timeout),
      createdBy_(::getpid()),
      holdings_(std::make_unique<Holdings>()) {
  // The amount is the call's: any valid one stands in for it here.
  std::vector<std::string> argv{"1"};
  argv.insert(argv.end(), arguments.begin(), arguments.end());
  try {
    arguments_ = defaultdiscovery::parseDiscoveryArguments(argv);
  } catch (const discovery::DiscoveryError& e) {
    defaultdiscovery::Report report;
    for (const std::string& line : e.details()) report.details.push_back(Notice::detail(line));
    argumentsFailure_.emplace(DiscoveryFailure::Stage::kArguments, e.what(), std::move(report));
  }
}

InProcessDiscovery::~InProcessDiscovery() {
  if (::getpid() != createdBy_) {
    // A copy in a child of fork(): what it holds is its parent's, which still runs on these GPUs.
    // It gives nothing back, rewrites nothing, and closes no lease (closing the child's copy of a
    // descriptor would not unlock it, but the parent's records would be gone). Another thread of
    // the parent may have held the mutex at the fork, never to unlock it here: the child takes it
    // only if it is free, to give back what it allocated itself, and otherwise leaves everything.
    std::unique_lock<std::mutex> lock(holdings_->mutex, std::try_to_lock);
    if (lock.owns_lock()) {
      for (Holdings::Held& held : holdings_->held) {
        if (held.allocatedBy == ::getpid()) {
          giveBackQuietly(held.coordinationFile, held.records, held.granted);
          held.leases.clear();
        }
      }
      lock.unlock();
    }
    // The parent's leases stay open in the child until it exits or execs (they are close-on-exec):
    // closing them here would release nothing of the parent's, so they are left, as the mutex is.
    (void)holdings_.release();  // NOLINT: deliberately left to the child's end
    return;
  }
  const std::lock_guard<std::mutex> lock(holdings_->mutex);
  // A run given up on gives back what it recorded when it ends: give it a moment to, so that a
  // worker shutting down leaves nothing behind. One stuck in NVML is left to the process's end.
  const Clock::time_point patience = Clock::now() + std::chrono::seconds(1);
  for (const std::shared_ptr<AbandonedRun>& run : holdings_->abandoned) {
    std::unique_lock<std::mutex> ending(run->mutex);
    run->ended.wait_until(ending, patience, [&] { return run->over; });
  }
  for (const Holdings::Held& held : holdings_->held) {
    giveBackQuietly(held.coordinationFile, held.records, held.granted);
  }
  // The leases go with holdings_, after the records: no allocator sees a record whose lease was
  // dropped while it is still being removed.
}

InProcessDiscovery::Answer InProcessDiscovery::discover(std::int64_t amount) {
  const Clock::time_point deadline = Clock::now() + timeout_;
  if (argumentsFailure_) fail(script_, *argumentsFailure_, deadline);

  defaultdiscovery::DiscoveryArguments args = *arguments_;
  args.amount = static_cast<std::size_t>(amount);
  args.amountText = std::to_string(amount);

  auto run = std::make_shared<Run>();
  try {
    runOnAThread([run, args = std::move(args), deadline](const std::function<void()>& finishing) {
      std::optional<RunAnswer> answer;
      std::exception_ptr error;
      try {
        answer = discoverOnce(args, deadline, run->stage, run->coordinationFile);
      } catch (...) {
        error = std::current_exception();
      }
      const std::lock_guard<std::mutex> lock(run->mutex);
      if (run->abandoned) {
        // The caller has thrown TimeoutException: nobody will use these GPUs.
        if (answer && answer->recorded) {
          giveBackQuietly(answer->coordinationFile, answer->records, answer->granted);
        }
        answer.reset();  // its leases go now
        const std::lock_guard<std::mutex> over(run->ending->mutex);
        run->ending->over = true;
        run->ending->ended.notify_all();
        return;
      }
      finishing();
      run->answer = std::move(answer);
      run->error = error;
      run->done = true;
      run->finished.notify_all();
    });
  } catch (const std::system_error& e) {
    throw FlinkException("Could not run the GPU discovery in-process: cannot start a thread: " +
                         std::string(e.what()));
  }

  std::unique_lock<std::mutex> lock(run->mutex);
  if (!run->finished.wait_until(lock, deadline, [&] { return run->done; })) {
    run->abandoned = true;
    run->ending = std::make_shared<AbandonedRun>();
    {
      const std::lock_guard<std::mutex> held(holdings_->mutex);
      holdings_->abandoned.push_back(run->ending);
    }
    const Stage stage = run->stage;
    std::string doing = stage == Stage::kFindingGpus
                            ? "finding the host's GPUs (NVML, else nvidia-smi)"
                            : "starting";
    if (stage == Stage::kAllocating) {
      // Who holds the lock, as the kernel tells it (the file's contents say nothing of it).
      const std::optional<pid_t> holder = store::flockHolder(run->coordinationFile);
      doing = "allocating through the coordination file " + run->coordinationFile.string() + ", ";
      if (!holder) {
        doing += "whose lock it was waiting for or had just let go";
      } else if (*holder == ::getpid()) {
        doing +=
            "whose lock this process itself holds: an in-process discovery of this process "
            "given up on at an earlier time-out, or one running on another thread, still has it";
      } else {
        doing += "whose lock process " + std::to_string(*holder) + " holds";
      }
    }
    const std::string message = "The GPU discovery script " + script_.string() +
                                " (run in-process) did not finish within " +
                                formatDuration(timeout_) + " (it was " + doing +
                                "); GPUs it records after this are given back.";
    runLog().warn(message);
    throw TimeoutException(message);
  }
  const std::exception_ptr error = run->error;
  std::optional<RunAnswer> answer = std::move(run->answer);
  lock.unlock();

  if (error) {
    try {
      std::rethrow_exception(error);
    } catch (const DiscoveryFailure& e) {
      fail(script_, e, deadline);
    } catch (const std::exception& e) {
      const std::string message = "The GPU discovery script " + script_.string() +
                                  " (run in-process) failed: unexpected error: " + e.what();
      runLog().warn(message);
      throw FlinkException(message);
    }
  }

  if (answer->recorded && answer->ownRecords) {
    const std::lock_guard<std::mutex> held(holdings_->mutex);
    holdings_->held.push_back({::getpid(), std::move(answer->coordinationFile), answer->owner,
                               answer->granted, std::move(answer->records),
                               std::move(answer->leases)});
  }
  return {std::move(answer->answer), std::move(answer->devices),
          std::move(answer->index),  answer->source,
          answer->report.notices(),  std::move(answer->shares)};
}

}  // namespace flink::externalresource::gpu
