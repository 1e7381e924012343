// Handing out GPU shares. See ShareAllocation.h for the rules.
#include "host/coordination/ShareAllocation.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "host/coordination/RecordEdits.h"
#include "host/store/LockedFile.h"
#include "util/Strings.h"

namespace flink::coordination {
namespace {

namespace fs = std::filesystem;

/// What the records and leases say of one GPU of the request.
struct GpuState {
  std::optional<Record> heldWholeBy;    ///< a running owner's whole record
  bool wholeLeaseHeld = false;          ///< its whole lease is held (record or not)
  std::optional<Record> relatedHeldBy;  ///< a running owner's record of a related unit
  std::optional<Record> ownerHolds;     ///< the requester's own record of it
  std::vector<unsigned> live;           ///< live share indices, ascending, each once
  /// Live shares beyond `live`: two running owners whose records claim one index (a hand edit)
  /// are two shares, whatever the index says.
  std::size_t claimedTwice = 0;
  std::vector<std::string> owners;  ///< "<index> <owner>" of each live share record, once
  std::vector<std::size_t> gone;    ///< records of gone owners naming it

  /// How many shares are live: each index once, and each further owner claiming one again.
  std::size_t liveCount() const noexcept { return live.size() + claimedTwice; }
};

void addIndex(std::vector<unsigned>& indices, unsigned index) {
  const auto at = std::lower_bound(indices.begin(), indices.end(), index);
  if (at == indices.end() || *at != index) indices.insert(at, index);
}

/// The lowest share index below `count` that `live` does not use (live is ascending).
std::optional<unsigned> lowestFree(const std::vector<unsigned>& live, unsigned count) {
  unsigned candidate = 0;
  for (const unsigned used : live) {
    if (used > candidate) break;
    if (used == candidate) ++candidate;
  }
  if (candidate < count) return candidate;
  return std::nullopt;
}

}  // namespace

std::optional<SharePlacement> parseSharePlacement(std::string_view text) {
  if (text == "pack") return SharePlacement::kPack;
  if (text == "spread") return SharePlacement::kSpread;
  return std::nullopt;
}

std::string_view sharePlacementName(SharePlacement placement) {
  return placement == SharePlacement::kPack ? "pack" : "spread";
}

namespace {

/// The rule over the records and lease files, the leases this allocation could not take counted
/// live (`unobtainable`: (GPU, share index)), the GPUs ShareRequest::unusable named giving none.
/// Not final: its `records` are only those it adds, and `junk` and `reclaimed` are left to
/// planShareAllocation, which moves the records read in.
ShareAllocation planShares(const ParsedRecords& current, const ShareRequest& request,
                           const discovery::UnitIndex& index, const liveness::Reader& reader,
                           const LivenessProbe& isRunningProbe, LeaseSpace& space,
                           const std::vector<std::pair<std::string, unsigned>>& unobtainable,
                           const std::unordered_set<std::string>& unusable) {
  ShareAllocation allocation;

  std::unordered_map<std::string, std::size_t> position;  // in the host's order
  for (std::size_t i = 0; i < request.gpus.size(); ++i) position.emplace(request.gpus[i], i);
  std::vector<GpuState> states(request.gpus.size());

  // Each related unit (a GPU's MIG instance) with the GPUs of the request it belongs to.
  std::unordered_map<std::string, std::vector<std::size_t>> relatedTo;
  for (const auto& [unit, others] : request.related) {
    for (const std::string& other : others) {
      if (const auto it = position.find(unit); it != position.end()) {
        relatedTo[other].push_back(it->second);
      }
      if (const auto it = position.find(other); it != position.end()) {
        relatedTo[unit].push_back(it->second);
      }
    }
  }

  std::unordered_map<std::string, bool> running;
  const auto ownerRunning = [&](const Owner& owner) {
    const std::string key = std::to_string(owner.pid) + ' ' +
                            (owner.startTime ? std::to_string(*owner.startTime) : "-") + ' ' +
                            (owner.pidNamespace ? std::to_string(*owner.pidNamespace) : "-") + ' ' +
                            owner.bootId.value_or("-");
    auto [it, inserted] = running.try_emplace(key, false);
    if (inserted) it->second = isRunningProbe(owner);
    return it->second;
  };
  const LeaseProbe leaseOf = [&](const std::string& name, const std::optional<LeaseFile>& file) {
    return space.state(name, file);
  };

  std::vector<bool> dropped(current.records.size(), false);
  for (std::size_t i = 0; i < current.records.size(); ++i) {
    const Record& record = current.records[i];
    // Every GPU of the request the record names (a UUID prefix may name several), and the
    // related units: the host index's rule.
    std::vector<std::size_t> gpus;
    std::vector<std::size_t> viaRelated;
    for (const std::string& unit : unitsNamedBy(record, index)) {
      if (const auto at = position.find(unit); at != position.end()) gpus.push_back(at->second);
      if (const auto related = relatedTo.find(unit);
          related != relatedTo.end() && !position.count(unit)) {
        viaRelated.insert(viaRelated.end(), related->second.begin(), related->second.end());
      }
    }
    if (gpus.empty() && viaRelated.empty()) continue;
    const bool own = sameProcess(record.owner, request.owner);
    const Liveness liveness =
        own ? Liveness::kRunning : judge(record, ownerRunning, leaseOf, reader);
    if (holdsGpu(liveness)) {
      for (const std::size_t g : gpus) {
        GpuState& state = states[g];
        if (own && !state.ownerHolds) state.ownerHolds = record;
        if (record.share) {
          // The same owner's record written twice is one share; another owner's is another.
          const std::string claim = std::to_string(record.share->index) + ' ' +
                                    std::to_string(record.owner.pid) + ' ' +
                                    std::to_string(record.owner.startTime.value_or(0));
          if (std::find(state.owners.begin(), state.owners.end(), claim) == state.owners.end()) {
            const bool indexLive =
                std::binary_search(state.live.begin(), state.live.end(), record.share->index);
            state.owners.push_back(claim);
            if (indexLive) ++state.claimedTwice;
            addIndex(state.live, record.share->index);
          }
        } else if (!state.heldWholeBy) {
          state.heldWholeBy = record;
        }
      }
      for (const std::size_t g : viaRelated) {
        if (!states[g].relatedHeldBy) states[g].relatedHeldBy = record;
      }
    } else if (liveness == Liveness::kEarlierBoot) {
      dropped[i] = true;
    } else {
      for (const std::size_t g : gpus) states[g].gone.push_back(i);
    }
  }

  // Leases: a held whole lease holds the GPU whole; a held share lease is a live share, record
  // or not (Flink's `sed "/0 /d"` deletes GPU 10's line with GPU 0's; the lease stays). Lease
  // files of any name are read by the index (unitsOfLeaseName).
  for (const std::string& name : space.names()) {
    if (space.holds(name)) continue;  // this allocation's own, from an earlier attempt
    const std::optional<ShareLeaseName> share = parseShareLeaseName(name);
    const std::vector<discovery::UnitRef> units =
        unitsOfLeaseName(index, share ? std::string_view(share->gpuLease) : name, reader);
    std::vector<std::size_t> named;
    for (const discovery::UnitRef ref : units) {
      if (const auto at = position.find(index[ref].id); at != position.end()) {
        named.push_back(at->second);
      }
    }
    if (named.empty() || !leaseBlocks(leaseOf(name, std::nullopt))) continue;
    for (const std::size_t g : named) {
      if (share) {
        addIndex(states[g].live, share->index);
      } else {
        states[g].wholeLeaseHeld = true;
      }
    }
  }
  for (const auto& [gpu, share] : unobtainable) {
    if (const auto at = position.find(gpu); at != position.end())
      addIndex(states[at->second].live, share);
  }
  for (std::size_t g = 0; g < request.gpus.size(); ++g) {
    if (!states[g].live.empty()) allocation.liveShares.emplace(request.gpus[g], states[g].live);
  }

  // The candidates, by group.
  std::unordered_map<std::string, const ShareableGpu*> declared;
  for (const ShareableGpu& gpu : request.shareable) declared[gpu.gpu] = &gpu;
  struct Candidate {
    std::size_t position;
    unsigned slot;
  };
  std::map<std::string, std::vector<Candidate>> groups;  // by group, each in the host's order
  std::vector<UnsharedGpu> unshared;
  for (std::size_t g = 0; g < request.gpus.size(); ++g) {
    const std::string& gpu = request.gpus[g];
    const GpuState& state = states[g];
    const auto found = declared.find(gpu);
    UnsharedGpu why{gpu, UnsharedGpu::Reason::kNotDeclared};
    if (found == declared.end()) {
      why.reason = UnsharedGpu::Reason::kNotDeclared;
    } else if (state.ownerHolds) {
      why.reason = UnsharedGpu::Reason::kHeldByOwner;
      why.heldBy = state.ownerHolds;
    } else if (state.heldWholeBy || state.wholeLeaseHeld) {
      why.reason = UnsharedGpu::Reason::kHeldWhole;
      why.heldBy = state.heldWholeBy;
    } else if (state.relatedHeldBy) {
      why.reason = UnsharedGpu::Reason::kRelatedHeld;
      why.heldBy = state.relatedHeldBy;
    } else if (unusable.count(gpu)) {
      why.reason = UnsharedGpu::Reason::kUnusable;
    } else if (const std::optional<unsigned> slot = lowestFree(state.live, found->second->replicas);
               slot && state.liveCount() < found->second->replicas) {
      groups[found->second->group].push_back(Candidate{g, *slot});
      continue;
    } else {
      why.reason = UnsharedGpu::Reason::kNoFreeShare;
    }
    if (found != declared.end()) why.replicas = found->second->replicas;
    why.liveShares = state.liveCount();
    unshared.push_back(std::move(why));
  }

  // Each group's ranking: the GPUs with live shares (most first for pack, fewest for spread;
  // ties by the host's order) and the fresh ones.
  const auto liveOf = [&](const Candidate& c) { return states[c.position].liveCount(); };
  struct Ranked {
    std::string group;
    std::vector<Candidate> shared = {};                      // ranked
    std::vector<Candidate> fresh = {};                       // the host's order
    std::tuple<int, std::ptrdiff_t, std::size_t> best = {};  // the group's best GPU, lowest first
  };
  std::vector<Ranked> ranked;
  for (auto& [group, candidates] : groups) {
    Ranked r{group};
    for (const Candidate& c : candidates) (liveOf(c) > 0 ? r.shared : r.fresh).push_back(c);
    const bool pack = request.placement == SharePlacement::kPack;
    std::stable_sort(r.shared.begin(), r.shared.end(), [&](const Candidate& a, const Candidate& b) {
      return pack ? liveOf(a) > liveOf(b) : liveOf(a) < liveOf(b);
    });
    const auto sharedKey = [&](int tier) {
      const Candidate& c = r.shared.front();
      const auto live = static_cast<std::ptrdiff_t>(liveOf(c));
      return std::tuple<int, std::ptrdiff_t, std::size_t>{tier, pack ? -live : live, c.position};
    };
    const auto freshKey = [&](int tier) {
      return std::tuple<int, std::ptrdiff_t, std::size_t>{tier, 0, r.fresh.front().position};
    };
    if (pack) {
      r.best = r.shared.empty() ? freshKey(1) : sharedKey(0);
    } else {
      r.best = r.fresh.empty() ? sharedKey(1) : freshKey(0);
    }
    ranked.push_back(std::move(r));
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const Ranked& a, const Ranked& b) { return a.best < b.best; });

  // Of the fresh GPUs, `wanted` picked by the placement rule.
  const auto pickFresh = [&](const std::vector<Candidate>& fresh, std::size_t wanted) {
    std::vector<Candidate> picked;
    if (wanted == 0) return picked;
    if (request.choose && wanted < fresh.size()) {
      std::vector<std::string> names;
      std::unordered_map<std::string, const Candidate*> byName;
      for (const Candidate& c : fresh) {
        names.push_back(request.gpus[c.position]);
        byName.emplace(names.back(), &c);
      }
      std::vector<std::string> chosen;
      try {
        chosen = request.choose(names, wanted);
      } catch (...) {
        chosen.clear();
      }
      std::unordered_set<std::string> seen;
      for (const std::string& name : chosen) {
        const auto it = byName.find(name);
        if (it == byName.end() || !seen.insert(name).second) break;
        picked.push_back(*it->second);
      }
      if (picked.size() == wanted) return picked;
      picked.clear();
    }
    picked.assign(fresh.begin(),
                  fresh.begin() + static_cast<std::ptrdiff_t>(std::min(wanted, fresh.size())));
    return picked;
  };

  std::vector<Candidate> chosen;
  for (const Ranked& r : ranked) {
    const std::size_t size = r.shared.size() + r.fresh.size();
    allocation.freeGpus = std::max(allocation.freeGpus, size);
    if (size < request.amount || !chosen.empty()) continue;
    const std::size_t n = request.amount;
    if (request.placement == SharePlacement::kPack) {
      const std::size_t fromShared = std::min(n, r.shared.size());
      chosen.assign(r.shared.begin(), r.shared.begin() + static_cast<std::ptrdiff_t>(fromShared));
      const std::vector<Candidate> fresh = pickFresh(r.fresh, n - fromShared);
      chosen.insert(chosen.end(), fresh.begin(), fresh.end());
    } else {
      chosen = pickFresh(r.fresh, std::min(n, r.fresh.size()));
      const std::size_t fromShared = n - chosen.size();
      chosen.insert(chosen.end(), r.shared.begin(),
                    r.shared.begin() + static_cast<std::ptrdiff_t>(fromShared));
    }
  }
  allocation.satisfied = request.amount > 0 && chosen.size() == request.amount;
  if (!allocation.satisfied) {
    chosen.clear();
    for (const Ranked& r : ranked) {
      for (const auto* list : {&r.shared, &r.fresh}) {
        for (const Candidate& c : *list) {
          UnsharedGpu why{request.gpus[c.position], UnsharedGpu::Reason::kFreeButShort};
          why.liveShares = liveOf(c);
          why.replicas = declared[why.gpu]->replicas;
          unshared.push_back(std::move(why));
        }
      }
    }
    std::sort(unshared.begin(), unshared.end(), [&](const UnsharedGpu& a, const UnsharedGpu& b) {
      return position[a.gpu] < position[b.gpu];
    });
    allocation.unshared = std::move(unshared);
  }
  std::sort(chosen.begin(), chosen.end(),
            [](const Candidate& a, const Candidate& b) { return a.position < b.position; });
  for (const Candidate& c : chosen) {
    for (const std::size_t i : states[c.position].gone) dropped[i] = true;
  }
  // Only what it adds: planShareAllocation moves the records read in (detail::keepRecords).
  for (std::size_t i = 0; i < current.records.size(); ++i) {
    if (dropped[i]) allocation.reclaimedIndices.push_back(i);
  }
  for (const Candidate& c : chosen) {
    const std::string& gpu = request.gpus[c.position];
    const ShareSlot slot{c.slot, declared[gpu]->replicas};
    Record record{gpu, request.owner};
    if (const auto uuid = request.uuids.find(gpu);
        uuid != request.uuids.end() && uuid->second != gpu) {
      record.uuid = uuid->second;
    }
    record.share = slot;
    allocation.granted.push_back(GrantedShare{gpu, slot});
    allocation.records.push_back(std::move(record));
  }
  return allocation;
}

}  // namespace

ShareAllocation planShareAllocation(ParsedRecords current, const ShareRequest& request,
                                    const LivenessProbe& isRunningProbe, LeaseSpace& space) {
  const std::shared_ptr<const discovery::UnitIndex> index =
      request.index
          ? request.index
          : std::make_shared<const discovery::UnitIndex>(
                discovery::UnitIndex::ofIdentifiers(request.gpus, request.uuids, request.related));
  const liveness::Reader& reader = liveness::HostFacts::readerOr(request.reader);
  std::vector<std::pair<std::string, unsigned>> unobtainable;
  std::vector<std::string> notes;
  // Asked once, with the records as read: a later round differs only in the leases it could take.
  std::unordered_set<std::string> unusable;
  if (request.unusable) {
    for (std::string& gpu : request.unusable(current.records)) unusable.insert(std::move(gpu));
  }
  ShareAllocation allocation;
  for (std::size_t round = 0;; ++round) {
    allocation =
        planShares(current, request, *index, reader, isRunningProbe, space, unobtainable, unusable);
    if (!request.lease || allocation.granted.empty()) break;
    bool replan = false;
    std::vector<std::string> taken;
    const auto added =
        allocation.records.end() - static_cast<std::ptrdiff_t>(allocation.granted.size());
    for (auto record = added; record != allocation.records.end(); ++record) {
      const std::optional<discovery::UnitRef> ref = index->find(record->gpu);
      if (!ref) continue;  // every GPU granted is one of the index's
      const LeaseNames names =
          shareLeaseNamesOf(leaseNamesOf(*index, *ref, reader), record->share->index);
      const LeaseTake take = takeEveryName(space, names, taken);
      if (take.file) {
        record->lease = names.primary;
        record->leaseFile = take.file;
        continue;
      }
      // Held by another process (its record gone), or not ours to take: that share is live, and
      // the next round takes another.
      unobtainable.emplace_back(record->gpu, record->share->index);
      if (take.failure == LeaseAttempt::Failure::kDenied) {
        notes.push_back("share " + formatShareSlot(*record->share) + " of GPU " + record->gpu +
                        " is passed over: one of its leases (" + strings::join(names.all(), ", ") +
                        ") cannot be taken: " + take.why);
      }
      replan = true;
    }
    if (!replan) {
      allocation.leasesTaken = std::move(taken);
      break;
    }
    // Each round finds at least one more share live: it ends. Never past the bound: nothing then.
    if (round > request.gpus.size() * kMaxShareCount) {
      ShareRequest none = request;
      none.gpus.clear();
      allocation =
          planShares(current, none, *index, reader, isRunningProbe, space, unobtainable, unusable);
      break;
    }
  }
  detail::keepRecords(allocation.records, std::move(current.records), allocation.reclaimedIndices,
                      allocation.reclaimed);
  allocation.junk = std::move(current.junk);
  allocation.notes = std::move(notes);
  return allocation;
}

ShareAllocation planShareAllocation(ParsedRecords current, const ShareRequest& request,
                                    const LivenessProbe& isRunning, const LeaseProbe& lease,
                                    const std::unordered_set<std::string>& leaseNames) {
  ProbeLeaseSpace space(lease, std::vector<std::string>(leaseNames.begin(), leaseNames.end()));
  return planShareAllocation(std::move(current), request, isRunning, space);
}

ShareAllocation allocateShares(const fs::path& file, const ShareRequest& request,
                               std::chrono::milliseconds lockTimeout) {
  return detail::allocateInFile<ShareAllocation>(
      file, lockTimeout,
      [&request](ParsedRecords&& parsed, LeaseSpace& space) {
        return planShareAllocation(std::move(parsed), request, isRunning, space);
      },
      [](const LockedFile& opened, const ShareAllocation& allocation, FolderLeaseSpace& space) {
        detail::removeFreeLeases(opened, allocation.records, allocation.leasesTaken, space);
      });
}

}  // namespace flink::coordination
