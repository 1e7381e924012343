// The liveness rule as a table. See Liveness.h, and docs/coordination-file.md for the table in
// words; tests/host/liveness/LivenessTest.cpp checks the two say the same, row for row.
#include "host/liveness/Liveness.h"

#include <array>

namespace flink::liveness {
namespace {

constexpr unsigned bit(Boot value) { return static_cast<unsigned>(value); }
constexpr unsigned bit(Namespace value) { return static_cast<unsigned>(value); }
constexpr unsigned bit(Start value) { return static_cast<unsigned>(value); }
constexpr unsigned bit(Pid value) { return static_cast<unsigned>(value); }
constexpr unsigned bit(Lease value) { return static_cast<unsigned>(value); }

template <typename... Values>
constexpr unsigned any(Values... values) {
  return (bit(values) | ...);
}

using enum Liveness;
constexpr unsigned kThisBoot = any(Boot::kSame, Boot::kUnknown);
constexpr unsigned kSameNs = bit(Namespace::kSame);
constexpr unsigned kNotOurNs = any(Namespace::kOther, Namespace::kUnknown);
constexpr unsigned kEveryNs = any(Namespace::kSame, Namespace::kOther, Namespace::kUnknown);
constexpr unsigned kBothStarts = any(Start::kRecorded, Start::kNone);
constexpr unsigned kBothPids = any(Pid::kRuns, Pid::kGone);

// The decision table. The first row that matches decides; a fact is read only when a row tried so
// far needs it, so the pid is asked only of a record of the reader's own namespace, and the lease
// only where the pid does not decide. docs/coordination-file.md shows these rows in this order.
constexpr std::array kTable{
    // 1. A record of an earlier boot is gone: services started at boot in the same order get the
    //    same pids and start times again.
    Rule{bit(Boot::kOther), kAny, kAny, kAny, kAny, kEarlierBoot},
    // 2. Its owner runs, with the recorded start time: whatever its lease says.
    Rule{kThisBoot, kSameNs, bit(Start::kRecorded), bit(Pid::kRuns), kAny, kRunning},
    // 3-7. Its pid runs, but no start time says it is still the same process: the lease, where
    //      there is one, decides; without one (Flink's records), the pid alone.
    Rule{kThisBoot, kSameNs, bit(Start::kNone), bit(Pid::kRuns), bit(Lease::kNone), kRunning},
    Rule{kThisBoot, kSameNs, bit(Start::kNone), bit(Pid::kRuns), bit(Lease::kHeld), kLeaseHeld},
    Rule{kThisBoot, kSameNs, bit(Start::kNone), bit(Pid::kRuns), bit(Lease::kFree), kGone},
    Rule{kThisBoot, kSameNs, bit(Start::kNone), bit(Pid::kRuns), bit(Lease::kMissing),
         kLeaseMissing},
    Rule{kThisBoot, kSameNs, bit(Start::kNone), bit(Pid::kRuns), bit(Lease::kUnopenable),
         kLeaseUnopenable},
    // 8. Its owner is gone (or its pid is another process's now), and it has no lease.
    Rule{kThisBoot, kSameNs, kBothStarts, bit(Pid::kGone), bit(Lease::kNone), kGone},
    // 9-12. The owner gone, or its pid not to be judged from here: the lease decides. Held: what
    //       the owner started holds it. Free: nobody does. Missing or unopenable: fail closed.
    Rule{kThisBoot, kEveryNs, kBothStarts, kBothPids, bit(Lease::kHeld), kLeaseHeld},
    Rule{kThisBoot, kEveryNs, kBothStarts, kBothPids, bit(Lease::kFree), kGone},
    Rule{kThisBoot, kEveryNs, kBothStarts, kBothPids, bit(Lease::kMissing), kLeaseMissing},
    Rule{kThisBoot, kEveryNs, kBothStarts, kBothPids, bit(Lease::kUnopenable), kLeaseUnopenable},
    // 13. Neither its pid nor a lease can judge it: held until `release`, a worker that can judge
    //     it, or a reboot.
    Rule{kThisBoot, kNotOurNs, kBothStarts, kBothPids, bit(Lease::kNone), kUnjudgeable},
};

/// Every value of each fact.
constexpr unsigned kEveryBoot = any(Boot::kSame, Boot::kOther, Boot::kUnknown);
constexpr unsigned kEveryLease =
    any(Lease::kNone, Lease::kHeld, Lease::kFree, Lease::kMissing, Lease::kUnopenable);

/// Whether `mask` holds the fact `get` returns; `get` is not called for a row that takes every
/// value of the fact (`every`).
template <typename Get>
bool holds(unsigned mask, unsigned every, Get&& get) {
  return (mask & every) == every || (mask & bit(get())) != 0;
}

Lease leaseFact(LeaseState state) noexcept {
  switch (state) {
    case LeaseState::kHeld:
      return Lease::kHeld;
    case LeaseState::kFree:
      return Lease::kFree;
    case LeaseState::kMissing:
      return Lease::kMissing;
    case LeaseState::kUnopenable:
      return Lease::kUnopenable;
  }
  return Lease::kMissing;
}

Boot bootOf(const Owner& owner, const Reader& reader) noexcept {
  if (!owner.bootId || !reader.bootId) return Boot::kUnknown;
  return *owner.bootId == *reader.bootId ? Boot::kSame : Boot::kOther;
}

}  // namespace

std::span<const Rule> rules() noexcept { return kTable; }

bool holdsGpu(Liveness liveness) noexcept { return liveness != kGone && liveness != kEarlierBoot; }

bool knownToRun(Liveness liveness) noexcept {
  return liveness == kRunning || liveness == kLeaseHeld;
}

bool cannotJudge(Liveness liveness) noexcept {
  return liveness == kUnjudgeable || liveness == kLeaseMissing || liveness == kLeaseUnopenable;
}

std::string_view livenessName(Liveness liveness) noexcept {
  switch (liveness) {
    case kRunning:
      return "running";
    case kLeaseHeld:
      return "lease held";
    case kUnjudgeable:
      return "cannot be judged";
    case kLeaseMissing:
      return "lease file missing";
    case kLeaseUnopenable:
      return "lease unopenable";
    case kGone:
      return "gone";
    case kEarlierBoot:
      return "earlier boot";
  }
  return "gone";
}

std::size_t ruleFor(const Facts& facts) noexcept {
  for (std::size_t i = 0; i < kTable.size(); ++i) {
    const Rule& rule = kTable[i];
    if ((rule.boot & bit(facts.boot)) && (rule.ns & bit(facts.ns)) &&
        (rule.start & bit(facts.start)) && (rule.pid & bit(facts.pid)) &&
        (rule.lease & bit(facts.lease))) {
      return i;
    }
  }
  // The table is total (LivenessTest checks every combination): never reached.
  return kTable.size() - 1;
}

Liveness decide(const Facts& facts) noexcept { return kTable[ruleFor(facts)].verdict; }

Namespace namespaceOf(const Owner& owner, const Reader& reader) noexcept {
  // Without /proc of its own namespace a reader cannot tell which process a pid names.
  if (!reader.ownProc) return Namespace::kUnknown;
  // A record that names no namespace (Flink's, our oldest) is taken as the reader's own: its
  // writer ran beside the reader, as Flink's script does (docs/coordination-file.md).
  if (!owner.pidNamespace) return Namespace::kSame;
  if (*owner.pidNamespace == kUnknownPidNamespace || !reader.pidNamespace) {
    return Namespace::kUnknown;
  }
  return *owner.pidNamespace == *reader.pidNamespace ? Namespace::kSame : Namespace::kOther;
}

Liveness judge(const Holder& holder, const Reader& reader, const OwnerProbe& runs,
               const LeaseStateProbe& lease, std::size_t* ruleIndex) {
  const Owner& owner = holder.owner;
  std::optional<Namespace> ns;
  std::optional<Pid> pid;
  std::optional<Lease> leased;
  const auto boot = [&] { return bootOf(owner, reader); };
  const auto nsFact = [&] {
    if (!ns) ns = namespaceOf(owner, reader);
    return *ns;
  };
  const auto start = [&] { return owner.startTime ? Start::kRecorded : Start::kNone; };
  const auto pidFact = [&] {
    if (!pid) pid = owner.pid > 0 && runs && runs(owner) ? Pid::kRuns : Pid::kGone;
    return *pid;
  };
  const auto leaseFactOf = [&] {
    if (!leased) {
      leased = !holder.leased ? Lease::kNone : lease ? leaseFact(lease()) : Lease::kMissing;
    }
    return *leased;
  };
  for (std::size_t i = 0; i < kTable.size(); ++i) {
    const Rule& rule = kTable[i];
    if (holds(rule.boot, kEveryBoot, boot) && holds(rule.ns, kEveryNs, nsFact) &&
        holds(rule.start, kBothStarts, start) && holds(rule.pid, kBothPids, pidFact) &&
        holds(rule.lease, kEveryLease, leaseFactOf)) {
      if (ruleIndex != nullptr) *ruleIndex = i;
      return rule.verdict;
    }
  }
  if (ruleIndex != nullptr) *ruleIndex = kTable.size() - 1;
  return kTable.back().verdict;
}

bool ownerRuns(const Owner& owner, HostFacts& facts) {
  if (owner.pid <= 0) return false;
  const ProcessLook look = facts.process(owner.pid);
  if (!look.alive()) return false;
  // A process hidden from this user has no start time to compare: it runs (fail closed).
  return !owner.startTime || !look.startTime || sameStartTime(*owner.startTime, *look.startTime);
}

bool ofEarlierBoot(const Owner& owner, const Reader& reader) {
  return bootOf(owner, reader) == Boot::kOther;
}

bool inOtherPidNamespace(const Owner& owner, const Reader& reader) {
  return owner.pidNamespace && reader.pidNamespace && *owner.pidNamespace != *reader.pidNamespace;
}

bool isRunning(const Owner& owner) { return countsAsRunning(owner, HostFacts::system()); }

bool countsAsRunning(const Owner& owner, HostFacts& facts) {
  if (owner.pid <= 0 || ofEarlierBoot(owner, facts.reader())) return false;
  if (namespaceOf(owner, facts.reader()) != Namespace::kSame) return true;  // cannot be judged
  return ownerRuns(owner, facts);
}

bool sameProcess(const Owner& a, const Owner& b) {
  if (a.pid != b.pid) return false;
  if (a.startTime && b.startTime && !sameStartTime(*a.startTime, *b.startTime)) return false;
  if (a.bootId && b.bootId && *a.bootId != *b.bootId) return false;
  return !(a.pidNamespace && b.pidNamespace && *a.pidNamespace != *b.pidNamespace);
}

std::vector<Owner> ancestry(pid_t pid, HostFacts& facts) {
  std::vector<Owner> chain;
  if (pid <= 0) return chain;
  const Reader& reader = facts.reader();
  const auto ownerOf = [&](pid_t at, const ProcessLook& look) {
    return Owner{at, look.startTime, reader.pidNamespace.value_or(kUnknownPidNamespace),
                 reader.bootId};
  };
  ProcessLook look = facts.process(pid);
  chain.push_back(ownerOf(pid, look));
  while (chain.size() <= kMaxAncestors) {
    if (chain.back().pid == 1 || !look.alive() || !look.parent || *look.parent <= 0) break;
    const pid_t parent = *look.parent;
    look = facts.process(parent);
    if (!look.alive() || !look.startTime) break;
    chain.push_back(ownerOf(parent, look));
  }
  return chain;
}

Owner Owner::of(pid_t pid, HostFacts& facts) {
  const Reader& reader = facts.reader();
  return Owner{pid, facts.process(pid).startTime,
               reader.pidNamespace.value_or(kUnknownPidNamespace), reader.bootId};
}

std::optional<std::uint64_t> currentPidNamespace() {
  return HostFacts::system().reader().pidNamespace;
}

std::optional<std::string> currentBootId() { return HostFacts::system().reader().bootId; }

}  // namespace flink::liveness
