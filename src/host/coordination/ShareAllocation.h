// Handing out shares of GPUs the operator declared shared (host/sharing/SharingDeclarations.h),
// through the same coordination file, lock and leases as whole GPUs (Coordination.h).
//
// A share is a record like a whole GPU's with one more field, `share=<index>/<count>`:
//
//   0 41532<TAB>8812345<TAB>uuid=GPU-…<TAB>share=1/4<TAB>pidns=4026531836[<TAB>lease=…]
//
// Flink's script reads any line of GPU 0 as GPU 0 taken, and so does every release of ours
// before sharing (`share=` was an unknown field, which holds the GPU): no version ever hands a
// shared GPU out whole. Leased shares hold `<GPU lease>.share-<index>` (Leases.h).
//
// The rules, for an amount of N:
//   - N shares on N distinct GPUs, never two of one GPU, never a GPU the requester already
//     holds (whole or shared): two shares of one GPU give no more compute.
//   - A GPU can give a share when it is declared, among the request's GPUs (the caller leaves
//     out the unhealthy, drained and masked ones), no running owner holds it whole (a record of
//     ours or of Flink's form, or a held whole lease), no running owner holds a unit related to
//     it (a MIG instance), the caller does not find it unusable with the records read
//     (ShareRequest::unusable: a process no record explains uses it), and fewer than its declared
//     K shares are live. Live shares are share
//     records that hold their GPU by the liveness rule and held share leases, whatever K they
//     were granted under. A share takes the lowest index no live share uses.
//   - The GPUs of one request share one group: all time-sliced, or all behind one MPS pipe
//     directory (a CUDA process has one CUDA_MPS_PIPE_DIRECTORY). Groups are tried in the order
//     of their best-ranked GPU; the first that can give N answers.
//   - kPack ranks first the GPUs with live shares, the most first (ties: the host's order), then
//     the fresh ones (no live share), of which `choose` (the placement rule) picks; kSpread the
//     fresh ones first, picked so, then those with the fewest live shares. A fresh-only group
//     ranks by its first GPU in the host's order.
//   - Gone owners' records (whole or share) of a GPU granted a share are taken back; records of
//     an earlier boot are dropped. Short of N, nothing is recorded.
#pragma once

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "host/coordination/Coordination.h"
#include "host/coordination/Leases.h"

namespace flink::coordination {

/// How a share request ranks the GPUs that can give a share.
enum class SharePlacement {
  kPack,    ///< the GPUs already shared first, the most shared first: whole GPUs stay free
  kSpread,  ///< fresh GPUs first, then the least shared: noisy neighbours kept apart
};

/// "pack" or "spread"; nullopt for anything else.
std::optional<SharePlacement> parseSharePlacement(std::string_view text);
std::string_view sharePlacementName(SharePlacement placement);

/// A GPU that may give shares, as its declaration says.
struct ShareableGpu {
  /// The whole GPU's identifier, as in ShareRequest::gpus.
  std::string gpu;
  /// The declared number of shares (K).
  unsigned replicas = 2;
  /// Which GPUs may go together in one request: "" for time-sliced ones, the MPS pipe directory
  /// for those behind an MPS control daemon.
  std::string group;
};

struct ShareRequest {
  /// The whole GPUs that may give a share, in the host's order (healthy, allowed by a mask).
  std::vector<std::string> gpus;
  /// The declared ones among them; a GPU of `gpus` not here gives no share.
  std::vector<ShareableGpu> shareable;
  /// How many distinct GPUs to take a share of.
  std::size_t amount = 0;
  Owner owner;
  /// As AllocationRequest::related: a GPU is not shared while a related unit (its MIG
  /// instance) is held.
  RelatedUnits related = {};
  /// As AllocationRequest::index.
  std::shared_ptr<const discovery::UnitIndex> index = {};
  /// As AllocationRequest::uuids; new records carry the UUID, leases are named by it.
  std::unordered_map<std::string, std::string> uuids = {};
  /// Hold each share with a lease too (exec and the in-process driver).
  bool lease = false;
  /// As AllocationRequest::reader.
  std::optional<liveness::Reader> reader = {};
  SharePlacement placement = SharePlacement::kPack;
  /// As AllocationRequest::choose, asked to pick among fresh GPUs only: (the fresh GPUs of one
  /// group in `gpus` order, how many) → that many of them. Unset or a wrong answer: the first.
  std::function<std::vector<std::string>(const std::vector<std::string>&, std::size_t)> choose = {};
  /// As AllocationRequest::unusable: GPUs the records leave able to give a share that are not to
  /// give one (host/usage/: a GPU a process no record explains uses), decided with the records
  /// read under the file's lock. Called once per plan, under the lock: nothing slow (no NVML)
  /// belongs in it.
  std::function<std::vector<std::string>(const std::vector<Record>& records)> unusable = {};
};

/// A share granted.
struct GrantedShare {
  std::string gpu;
  ShareSlot slot;
  friend bool operator==(const GrantedShare&, const GrantedShare&) = default;
};

/// Why a GPU of ShareRequest::gpus gave no share.
struct UnsharedGpu {
  enum class Reason {
    kNotDeclared,   ///< not in ShareRequest::shareable
    kHeldWhole,     ///< a running owner holds it whole (`heldBy`), or a whole lease does
    kRelatedHeld,   ///< a running owner holds a unit related to it (`heldBy`)
    kHeldByOwner,   ///< the requester holds it already, whole or a share (`heldBy`)
    kUnusable,      ///< ShareRequest::unusable named it (a process no record explains uses it)
    kNoFreeShare,   ///< all of its shares are live
    kFreeButShort,  ///< it could give one, but its group had too few such GPUs
  };
  std::string gpu;
  Reason reason = Reason::kNotDeclared;
  std::optional<Record> heldBy = {};
  /// Its live shares, and the declared K where declared.
  std::size_t liveShares = 0;
  unsigned replicas = 0;
};

struct ShareAllocation {
  /// The shares newly recorded for the owner, in `gpus` order; empty unless `satisfied`.
  std::vector<GrantedShare> granted;
  bool satisfied = false;
  /// How many distinct GPUs of the best group could give a share.
  std::size_t freeGpus = 0;
  /// The GPUs of `gpus` that gave no share, and why (only when not satisfied).
  std::vector<UnsharedGpu> unshared;
  /// The live shares of each GPU of `gpus` before this allocation, by GPU (indices, ascending).
  std::unordered_map<std::string, std::vector<unsigned>> liveShares;
  /// As in Allocation.
  std::vector<Record> reclaimed;
  std::vector<std::size_t> reclaimedIndices;
  std::vector<JunkLine> junk;
  std::vector<Record> records;
  std::vector<std::string> notes;
  /// As in Allocation.
  std::vector<std::string> warnings;
  /// With ShareRequest::lease, the leases of `granted`, in its order.
  std::vector<Lease> leases;
  /// The names of those leases, as the plan took them through its LeaseSpace.
  std::vector<std::string> leasesTaken;
};

/// The rule above, its lease policy included, with every fact it reads given: `isRunning` is asked
/// once per distinct owner, each lease's state once; lease files of any name are read by the host's
/// index (unitsOfLeaseName); with `lease`, each share granted is leased under each of its GPU's
/// names with `.share-<index>`, and a share whose lease cannot be had is passed over (that share
/// counted live) and the plan made again. The records of `current` are moved into the result
/// (`records` and `reclaimed`), as planAllocation does.
ShareAllocation planShareAllocation(ParsedRecords current, const ShareRequest& request,
                                    const LivenessProbe& isRunning, LeaseSpace& leases);

/// planShareAllocation with lease states from `lease` and the lease files `leaseNames`
/// (ProbeLeaseSpace): none can be taken.
ShareAllocation planShareAllocation(ParsedRecords current, const ShareRequest& request,
                                    const LivenessProbe& isRunning, const LeaseProbe& lease,
                                    const std::unordered_set<std::string>& leaseNames = {});

/// Locks the file (creating it if needed), plans, takes the leases (a share whose lease cannot
/// be had is passed over and the plan made again), writes the result, unlocks. Whole or not at
/// all, as allocate().
/// @throws store::StoreError; the file is then unchanged and no lease is held.
ShareAllocation allocateShares(const std::filesystem::path& file, const ShareRequest& request,
                               std::chrono::milliseconds lockTimeout = kDefaultLockTimeout);

}  // namespace flink::coordination
