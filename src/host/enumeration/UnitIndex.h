// One identity per GPU: the units of this host (whole GPUs, MIG instances, AMD and Intel units),
// and every spelling that names one of them, in one index.
//
// A GPU is spelled many ways: the index the discovery prints ("0", "007"), its UUID in either case
// or a prefix of it ("GPU-8932f937"), its PCI bus id in lspci's or NVML's width, a MIG instance's
// UUID or the older MIG-GPU-<gpu uuid>/<gi>/<ci>, an AMD or Intel unit's record name
// (`amd:00000000:05:00.3`), Level Zero's `<card>.<tile>`. Records of the coordination file,
// leases, health records, sharing declarations, `--gpus`, the masks' UUID entries, `release
// --gpu` and `drain --gpu` all name units through this index, so that no two of them can disagree
// on which GPU a text names. Two readings:
//
//  - a record's (namedByRecord): what a worker wrote. A UUID decides over the index it was written
//    under (another container numbers GPUs from 0); a UUID prefix, which a worker without NVML may
//    have written, names every unit whose UUID begins so (fail closed: it holds each of them); a
//    record of a UUID this host does not know, under an index whose GPU here has another UUID, is
//    of a GPU this reader cannot see and names none.
//  - an entry's (entry): what a person or a scheduler gives (--gpus, --gpu, a mask's UUID entry).
//    It names exactly one unit or none: a prefix that several units share is ambiguous, and the
//    caller refuses it with the candidates.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "host/enumeration/GpuEnumerator.h"

namespace flink::discovery {

struct VendorHost;

/// One unit of the host.
struct Unit {
  /// What the host calls it, canonical: what the discovery hands out and records name ("0",
  /// "MIG-…", "amd:00000000:05:00.3"). Unique in an index.
  std::string id;
  /// Its own UUID, canonical (lower-case hex): a GPU's GPU-…, a MIG instance's MIG-…; a unit known
  /// only by a UUID prefix (--gpus without NVML) has that prefix.
  std::optional<std::string> uuid = {};
  /// The PCI bus id of its GPU, NVML's form (an 8-digit domain, upper-case hex).
  std::optional<std::string> pciBusId = {};
  /// A MIG instance: its GPU (a unit of the index) and its GPU and compute instance ids.
  std::optional<std::size_t> parent = {};
  std::optional<unsigned> gpuInstanceId = {};
  std::optional<unsigned> computeInstanceId = {};
  /// An AMD or Intel unit, named in records by its id only (its UUID is its runtime's).
  bool vendorUnit = false;
  /// Further spellings that name it exactly in an entry: an AMD or Intel unit's identifier as its
  /// runtime numbers it ("0", Level Zero's "1.0").
  std::vector<std::string> aliases = {};

  bool isMigInstance() const noexcept { return parent.has_value(); }
};

/// A unit, by its position in its index.
using UnitRef = std::size_t;

/// What an entry names.
struct EntryNaming {
  /// The unit, when exactly one.
  std::optional<UnitRef> unit;
  /// When several units' UUIDs begin with it (an ambiguous prefix): those, in the index's order.
  std::vector<UnitRef> ambiguous;
};

/// Whether what a record names (a coordination record, a drain, a verdict, a sharing declaration)
/// is a unit of this host: UnitIndex::presence, the one rule of state that outlived its GPU.
enum class Presence {
  kKnown,          ///< a unit this host has
  kNotOnThisHost,  ///< not among the host's GPUs or MIG instances: a board replaced, removed, a
                   ///< MIG layout changed
  kCannotTell,     ///< this look at the host cannot say (HostCoverage), or not an NVIDIA unit
};

/// "known", "not on this host", "cannot tell".
std::string_view presenceWord(Presence presence) noexcept;

/// How much of the host an index of devices is, for UnitIndex::presence: only the host's whole
/// list of GPUs, by NVML or nvidia-smi, nothing left out and nothing masked, can say that a GPU
/// is not here.
struct HostCoverage {
  /// Empty when the devices are the host's whole list; else why they may not be, for a person
  /// ("NVML cannot be used: …", "CUDA_VISIBLE_DEVICES masks this view of the host").
  std::string cannotTell = "this host's GPUs are not known";
  /// Whether MIG instances are listed (NVML; nvidia-smi only with -L): else no MIG record is
  /// judged.
  bool migListed = false;

  bool whole() const noexcept { return cannotTell.empty(); }
};

/// The coverage of `found`, this process's enumeration by NVML or nvidia-smi (`migListed` as
/// above): whole unless it left a GPU out (lost, denied: its UUID is unknown), a whole GPU has no
/// UUID, or this process's view is masked (CUDA_VISIBLE_DEVICES set; NVIDIA_VISIBLE_DEVICES set to
/// other than `all`, as a container runtime sets it for a container that sees some GPUs).
HostCoverage coverageOf(const Enumeration& found, bool migListed);

class UnitIndex {
 public:
  UnitIndex() = default;

  /// Every device of an enumeration: whole GPUs by index, MIG instances by UUID (each with its
  /// GPU as parent), in the enumeration's order. A UnitRef is then the device's position, also for
  /// units added later (their refs follow).
  static UnitIndex of(const std::vector<GpuDevice>& devices);

  /// The units of an AMD or Intel enumeration, by record name, with their identifiers as aliases.
  static UnitIndex of(const VendorHost& vendor);

  /// Units known by identifier alone (a --gpus list, tests): each of `ids` (and each unit named in
  /// `related`), with the whole GPU's UUID of `uuids` where given. A MIG UUID or GPU UUID id is its
  /// own UUID.
  static UnitIndex ofIdentifiers(
      const std::vector<std::string>& ids,
      const std::unordered_map<std::string, std::string>& uuids,
      const std::unordered_map<std::string, std::vector<std::string>>& related = {});

  /// Adds a unit, or returns the one of that id (canonical) that is there already.
  UnitRef add(Unit unit);

  const Unit& operator[](UnitRef ref) const { return units_[ref]; }
  std::size_t size() const noexcept { return units_.size(); }
  bool empty() const noexcept { return units_.empty(); }

  /// The unit whose id is `id`, in any spelling of that id ("01" is "1").
  std::optional<UnitRef> find(std::string_view id) const;

  /// What a record names, from its `gpu` field and the whole GPU's UUID written beside it (a
  /// coordination record's `uuid=`, a health or sharing line's `uuid=`): the record reading above.
  /// Ascending; empty when it names no unit of this index.
  std::vector<UnitRef> namedByRecord(std::string_view gpu,
                                     const std::optional<std::string>& gpuUuid = {}) const;

  /// What an entry names: an id or alias; a whole or MIG UUID, or a prefix only one unit's UUID
  /// begins with; MIG-GPU-<gpu uuid>/<gi>/<ci>; a PCI bus id (its whole GPU). Indices are the
  /// host's (NVML's), not CUDA's order: a mask's index entries are the mask's own business.
  EntryNaming entry(std::string_view text) const;

  /// The unit of a whole GPU of this PCI bus id (any width, any case).
  std::optional<UnitRef> byPciBusId(std::string_view busId) const;

  /// The unit of this own UUID, exactly (canonical compare).
  std::optional<UnitRef> byUuid(std::string_view uuid) const;

  /// The whole GPU's UUID of `ref`: its own for a GPU, its parent's for a MIG instance.
  std::optional<std::string> gpuUuidOf(UnitRef ref) const;

  /// Whether a record of `gpu` (with the whole GPU's UUID `gpuUuid` written beside it) names a
  /// unit of this host, this index being the host's enumeration (`of(devices)`, nothing added)
  /// as far as `coverage` says: the one rule of which state outlived its GPU. When the coverage
  /// is not whole, and for AMD and Intel record names, kCannotTell. Else:
  ///  - an index without a UUID: known when the host has a GPU of that index, else not here;
  ///  - an index with a UUID, or a GPU-… UUID (or a prefix of one): known when a GPU of the host
  ///    has that UUID (the record's index may be a container's), else not here, also where the
  ///    host's GPU of that index has another UUID (a board replaced);
  ///  - a MIG-… UUID, or MIG-GPU-<uuid>/<gi>/<ci>: known when the host has that instance, else
  ///    not here (a MIG layout changed); kCannotTell where MIG instances are not listed.
  Presence presence(std::string_view gpu, const std::optional<std::string>& gpuUuid,
                    const HostCoverage& coverage) const;

 private:
  /// Units whose UUID (of the kind `uuid` is: GPU- or MIG-) begins with `uuid`, or is a prefix of
  /// it; ascending. Through uuidsInOrder_, not a pass over every unit: a reader of many records
  /// of GPUs this host does not have adds a unit for each (HostView), and asks this of each.
  std::vector<UnitRef> byUuidPrefix(std::string_view uuid) const;
  /// MIG-GPU-<gpu uuid>/<gi>/<ci> (canonical): the instance.
  std::optional<UnitRef> byOldMigName(std::string_view name) const;
  /// Appends `unit` whatever its id (the first of an id keeps the id's lookups).
  UnitRef push(Unit unit);

  std::vector<Unit> units_;
  std::unordered_map<std::string, UnitRef> byId_;
  std::unordered_map<std::string, UnitRef> byAlias_;
  std::unordered_map<std::string, UnitRef> byBus_;
  /// Every unit's UUID, in order (the units of one UUID in the order added: the first is the one
  /// byUuid finds), and the lengths the UUIDs have: the units a UUID prefix names are a range of
  /// it, and those whose UUID is a prefix of a longer one are found by its prefixes of those
  /// lengths.
  std::multimap<std::string, UnitRef, std::less<>> uuidsInOrder_;
  std::set<std::size_t> uuidLengths_;
  /// MIG instances by (their GPU, GPU instance id, compute instance id): the first of each.
  std::map<std::tuple<UnitRef, unsigned, unsigned>, UnitRef> instances_;
};

/// One unit, `unitId` (of UUID `unitUuid`), to ask of records whether they name it:
/// UnitIndex::namedByRecord over an index of that unit alone, made once for all the records a
/// caller asks of (watch's verdict against every health record, drain's against its file).
class OneUnit {
 public:
  OneUnit(std::string_view unitId, const std::optional<std::string>& unitUuid);

  /// Whether a record of `recordGpu` (with the whole GPU's `recordUuid`) names it.
  bool namedBy(std::string_view recordGpu, const std::optional<std::string>& recordUuid) const;

 private:
  UnitIndex index_;
};

/// Whether a record of `recordGpu` (with the whole GPU's `recordUuid`) names the one unit
/// `unitId` (of UUID `unitUuid`): OneUnit's rule, for a caller that asks of one record.
bool namesUnit(std::string_view recordGpu, const std::optional<std::string>& recordUuid,
               std::string_view unitId, const std::optional<std::string>& unitUuid);

/// A PCI bus id in NVML's form (an 8-digit domain, upper-case hex: "00000000:3B:00.0") from any
/// width and case ("0000:3b:00.0"); nullopt for text that is no bus id.
std::optional<std::string> canonicalPciBusId(std::string_view busId);

/// The one GPU a command's `--gpu` gives, in the spelling the index looks up: a PCI bus id
/// (canonicalPciBusId), else one device identifier (parseGpuList's canonical form); nullopt for
/// anything else (none, several, junk), for the caller to say with its option's name.
std::optional<std::string> parseOneGpu(std::string_view text);

}  // namespace flink::discovery
