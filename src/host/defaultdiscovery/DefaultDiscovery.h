// The default discovery as a library: what nvidia-gpu-discovery does between reading its
// arguments and printing its answer, in two steps that the program, `flink-gpu exec` and the
// in-process GPUDriver share.
//
// 1. findHostUnits: the host's GPUs (a list given with --gpus, else NVML, else nvidia-smi), as
//    the units to hand out (MIG instances with --mig), less the unhealthy and drained ones
//    (host/health/HostHealth.h), each once, and under an inherited CUDA_VISIBLE_DEVICES only those
//    it allows, in its order (host/enumeration/VisibleDevices.h).
// 2. grantUnits: `amount` of them for an owner. In plain mode the first ones (or the
//    best-connected set, by the placement rule, where NVML tells the topology); in coordination
//    mode through the coordination file shared by the host's workers, optionally leased
//    (host/coordination/Leases.h), so that a GPU and the MIG instances carved from it are never
//    held by two running owners at once.
//
// Neither prints. What the program prints on stderr after its first line is collected in a
// Report; a run that cannot answer throws DiscoveryFailure, whose what() is that first line.
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "host/coordination/Coordination.h"
#include "host/coordination/ShareAllocation.h"
#include "host/defaultdiscovery/DiscoveryArguments.h"
#include "host/enumeration/GpuEnumerator.h"
#include "host/enumeration/HostGpus.h"
#include "host/enumeration/UnitIndex.h"
#include "host/enumeration/UnitSelector.h"
#include "host/enumeration/Vendor.h"
#include "host/enumeration/VisibleDevices.h"
#include "host/health/HostHealth.h"
#include "host/nvml/Nvml.h"
#include "host/placement/Placement.h"
#include "host/placement/Topology.h"
#include "host/usage/GpuUse.h"
#include "util/Notice.h"

namespace flink::defaultdiscovery {

/// What a run has to say besides its answer, in the order the program prints it after its first
/// stderr line: details about the cause (the enumeration's notices, who holds the GPUs), then
/// notes (arguments ignored, units left out, the coordination file's state, GPUs taken back).
/// Each is a Notice, one line when printed (Notice::line): its kind says what it is, so that
/// the in-process driver logs a GPU left out as an error without reading the line.
struct Report {
  std::vector<Notice> details;
  std::vector<Notice> notes;

  /// details, then notes.
  std::vector<Notice> notices() const;
};

/// A run that cannot answer. what() is the cause, the program's first stderr line; report()
/// holds the lines that follow it.
class DiscoveryFailure : public std::runtime_error {
 public:
  /// Which step failed, for callers that word or count failures differently (exec's exit codes).
  enum class Stage {
    kArguments,     ///< the command line (DiscoveryArguments)
    kEnumeration,   ///< no source could list the host's GPUs
    kHealth,        ///< the health records cannot be read (health::HealthRecordsUnreadable)
    kMask,          ///< CUDA_VISIBLE_DEVICES allows no unit of this host
    kShortfall,     ///< fewer units than asked for: on the host, allowed, or free
    kOwner,         ///< the owner to record is not running
    kCoordination,  ///< the coordination file cannot be locked, read or written
  };

  /// `kind`: at Stage::kEnumeration, why no source could list the GPUs (no driver, no GPU, …).
  DiscoveryFailure(Stage stage, const std::string& cause, Report report,
                   discovery::DiscoveryError::Kind kind = discovery::DiscoveryError::Kind::kFailed)
      : std::runtime_error(cause), stage_(stage), report_(std::move(report)), kind_(kind) {}

  Stage stage() const noexcept { return stage_; }
  const Report& report() const noexcept { return report_; }
  discovery::DiscoveryError::Kind kind() const noexcept { return kind_; }

 private:
  Stage stage_;
  Report report_;
  discovery::DiscoveryError::Kind kind_;
};

struct HostUnitsOptions {
  /// --gpus: the host's units as given, instead of NVML and nvidia-smi; no mask applies to them
  /// (the list is a custom script's own answer). Where NVML answers, each entry is known as the
  /// host's GPU it names (an index is NVML's index, a UUID or unique prefix that GPU's), so that a
  /// GPU named by index and by UUID is one GPU to every allocator; the answer spells it as listed.
  std::optional<std::vector<std::string>> listed;
  /// --mig: MIG instances (by MIG UUID) in place of the GPUs in MIG mode they are carved from.
  bool mig = false;
  /// --select: only the units it matches are candidates, for every step after (health, masks,
  /// placement, coordination, shares); the others are not looked at again, nor named. A note
  /// names the units a key was not known for.
  std::optional<discovery::UnitSelector> select;
  /// Read how the GPUs are connected, for placement::Policy::kTopology (when there is a choice
  /// to make: see HostUnits::topology).
  bool topology = true;
  /// --health: what becomes of unhealthy and drained units.
  health::HealthMode health = health::HealthMode::kSkip;
  /// The coordination file, beside which the health records lie.
  std::filesystem::path coordinationFile{coordination::kDefaultCoordinationFile};
  /// The most nvidia-smi may run, when it comes to that: its own limit ($NVIDIA_SMI_TIMEOUT,
  /// else 8 s) is cut to this.
  std::optional<std::chrono::milliseconds> timeLimit;
  /// The caller is the worker itself (the in-process driver), not a discovery program whose
  /// process group the driver ends: nvidia-smi then gets a process group of its own, so that a
  /// time-out ends what it started too.
  bool inProcess = false;
};

/// The units a run may hand out, and what it needs to know of the host to hand them out.
struct HostUnits {
  /// The units, by the host's identifiers (an index, a MIG UUID), unique, in the order to hand
  /// them out: the enumeration's, or an inherited mask's.
  std::vector<std::string> gpus;
  /// Every device enumerated, MIG instances included (the listed ones, with --gpus).
  std::vector<discovery::GpuDevice> devices;
  /// Where the devices come from.
  discovery::HostGpuSource source = discovery::HostGpuSource::kListed;
  /// An inherited CUDA_VISIBLE_DEVICES and the units it allows, with its entries for them.
  std::optional<discovery::VisibleDevicesMask> mask;
  std::optional<discovery::MaskedUnits> masked;
  /// --select as given, when the units were chosen by it: what a shortfall names, cut to a
  /// message's length (strings::quoteForMessage).
  std::optional<std::string> selectedBy;
  /// The selector matches MIG instances alone, and they are no units (no --mig): what a
  /// shortfall adds.
  bool selectsMigWithoutMig = false;
  /// With --gpus where NVML answers: the entry as listed, by the host identifier it names.
  std::unordered_map<std::string, std::string> listedAs;
  /// Units that share hardware (a GPU and its MIG instances, an Intel card and its tiles), and
  /// the `GPU-…` UUID of each whole NVIDIA GPU that has one: what the allocation is given.
  coordination::RelatedUnits related;
  std::unordered_map<std::string, std::string> uuids;
  /// Every device as a unit, with every spelling of it (host/enumeration/UnitIndex.h): how the
  /// coordination file's records, its leases, the health records and the sharing declarations are
  /// read.
  std::shared_ptr<const discovery::UnitIndex> index;
  /// For AMD and Intel (findVendorUnits): what their enumeration found. `gpus` then holds the
  /// units' record names ("amd:00000000:05:00.3"), and the answer their identifiers.
  std::optional<discovery::VendorHost> vendorHost;
  /// How the GPUs are connected, when NVML can tell: read on the first call only (its NVML
  /// queries grow with the square of the GPUs, and most discoveries have no choice to make), in
  /// the NVML session this HostUnits holds since the enumeration. nullopt without NVML, or when
  /// findHostUnits was not asked for the topology. Not thread-safe.
  const std::optional<placement::Topology>& topology() const;

  /// What a worker is told for the units `granted`: under a mask, the mask's own entries (CUDA
  /// reads them against the devices it may open); else the units themselves.
  std::vector<std::string> answerFor(const std::vector<std::string>& granted) const;

  /// Set by findHostUnits: the NVML session kept from the enumeration (so that reading the
  /// topology later initialises nothing again), and whether the topology may be read.
  std::shared_ptr<nvml::NvmlSession> nvmlSession;
  bool topologyWanted = false;
  mutable std::optional<std::optional<placement::Topology>> topologyRead;
};

/// Step 1 for AMD or Intel GPUs (host/amd/, host/intel/): the units their enumeration allows
/// this process, under the vendor's masks, recorded by record name. No health, MIG or topology
/// applies to them. `vendor` is kAmd or kIntel.
/// @throws DiscoveryFailure (kEnumeration) with the enumeration's cause and details.
HostUnits findVendorUnits(discovery::Vendor vendor, const discovery::VendorOptions& options,
                          Report& report);

/// Step 1. Holds one NVML session across the enumeration and the health probe. Takes no lock
/// that another process could hold for long: the health records are read without waiting.
/// @throws DiscoveryFailure (kEnumeration, kHealth, kMask) with the cause and its details;
///         `report` then holds nothing that the failure's report does not.
HostUnits findHostUnits(const HostUnitsOptions& options, Report& report);

struct GrantRequest {
  /// How many units, and how messages show that number (the amount as given: "2").
  std::size_t amount = 0;
  std::string amountText;
  /// Coordination mode: record the units for `owner` in `coordinationFile`.
  bool coordination = false;
  std::filesystem::path coordinationFile{coordination::kDefaultCoordinationFile};
  coordination::Owner owner;
  /// Also lease each unit recorded (the in-process driver does; the program does not, as it ends
  /// before the worker uses its GPUs).
  bool lease = false;
  /// placement::Policy::kIndex: the first free units, as Flink's script takes them.
  placement::Policy placement = placement::Policy::kTopology;
  /// How long to wait for the coordination file's lock.
  std::chrono::milliseconds lockTimeout = store::kDefaultLockTimeout;
  /// Note each record of a gone owner taken back (the note "took back GPU …"); exec does so only
  /// when verbose.
  bool noteReclaimed = true;
  /// In coordination mode, whole GPUs and MIG instances never together, for a single CUDA process
  /// (exec), which sees only the instance when given both: where the units hold both, the MIG
  /// instances are tried first, then the whole GPUs. A worker that hands each task one unit may
  /// mix them.
  bool oneKind = false;
  /// --share: one share on each of `amount` distinct GPUs the operator declared shared (the
  /// declarations beside the coordination file, host/sharing/), instead of whole GPUs; needs
  /// `coordination`. See host/coordination/ShareAllocation.h for which GPUs give shares.
  bool share = false;
  coordination::SharePlacement sharePlacement = coordination::SharePlacement::kPack;
  /// --foreign: what becomes of a unit a process no record explains uses (host/usage/GpuUse.h).
  /// Asked of NVML only where the units came from it; in plain mode a warning at most. Shares are
  /// judged alike.
  usage::ForeignMode foreign = usage::ForeignMode::kSkip;
  /// With `share`: warn (a warning of the report) when an MPS share's control daemon is not there
  /// (host/sharing/MpsDaemon.h). A caller that refuses to go on then says so itself.
  bool warnWithoutMpsDaemon = true;
};

/// A share granted (GrantRequest::share), as its declaration says.
struct ShareGrant {
  /// Its index and the declared number of shares (K) of its GPU.
  coordination::ShareSlot slot;
  /// The MiB of each share, where the declaration says (the GPU's memory.total / K).
  std::optional<std::uint64_t> memoryMiB;
  /// The MPS control daemon's CUDA_MPS_PIPE_DIRECTORY, for an MPS share; nullopt: time-sliced.
  std::optional<std::string> mpsPipeDirectory;
  /// The GPU's GPU-… UUID, where known (what CUDA_VISIBLE_DEVICES names under MPS).
  std::optional<std::string> uuid;

  /// The share of the GPU's threads an MPS client of it gets, in percent: 100 / K rounded down
  /// (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE; what `exec` sets and the driver's
  /// mps.active_thread_percentage says).
  unsigned activeThreadPercentage() const noexcept { return 100 / std::max(slot.count, 1u); }
};

struct Grant {
  /// The units granted, by the host's identifiers: what the records name.
  std::vector<std::string> granted;
  /// What the worker is told (HostUnits::answerFor).
  std::vector<std::string> answer;
  /// Whether `granted` were recorded in the coordination file (coordination mode).
  bool recorded = false;
  /// With GrantRequest::lease, the leases of `granted`: the units stay held while these live.
  std::vector<coordination::Lease> leases;
  /// With GrantRequest::share, the share of each GPU of `granted`, in its order.
  std::vector<ShareGrant> shares;
  /// The records written for `granted`, as written: what giveBack removes.
  std::vector<coordination::Record> records;
};

/// `host.gpus` less the units of GPUs that answered NVML_ERROR_GPU_IS_LOST to a topology query,
/// where the topology was read (HostUnits::topology): a GPU lost to any query is never handed
/// out. One note each in `report`.
std::vector<std::string> unitsNotLost(const HostUnits& host, Report& report);

/// Step 2, for the program, the in-process driver and `flink-gpu exec` alike. Under the
/// coordination file's lock there is only the read, the liveness checks and the write: the
/// topology a placement needs is read before the lock is taken (GrantRequest::oneKind: see
/// there). A shortfall's cause counts the
/// units free, held and busy (a related unit held; or a process no record explains uses it,
/// asked of NVML before the lock and judged under it with the records read): "not enough free
/// GPUs: 2 requested, 1 free, 1 held", "…, 1 busy: GPU 1 is used by process 4242 (8192 MiB),
/// which no record names".
/// With GrantRequest::share, shares of declared GPUs instead, judged by the same rule of use (a
/// GPU a process no share holder explains uses gives none under --foreign skip); a shortfall:
/// "not enough free GPU shares: 2 requested, 1 free", each GPU's reason among the details ("busy:
/// GPU 1 is used by process 4242 (8192 MiB), which no record names"); no GPU of the host
/// declared: "no GPU of this host is declared shared (flink-gpu share)").
/// @throws DiscoveryFailure kShortfall when fewer than `amount` units are there, allowed or free
///         (the details name each holder); kOwner when coordination is asked for an owner that
///         is not running (its records would be taken back by the next allocation);
///         kCoordination for a store::StoreError (its message is the cause; with `share`, sharing
///         declarations that cannot be read too); kArguments for `share` without coordination or
///         on AMD or Intel GPUs. Nothing is recorded then.
Grant grantUnits(const HostUnits& host, const GrantRequest& request, Report& report);

/// Gives back what a grant recorded (Grant::records, nothing in plain mode): after the worker
/// could not be told, or when an in-process driver goes. Only those lines, exactly as written, are
/// removed. Its leases are left to the caller.
/// @throws store::StoreError
void giveBack(const std::filesystem::path& coordinationFile,
              const std::vector<coordination::Record>& records,
              std::chrono::milliseconds lockTimeout = store::kDefaultLockTimeout);

/// The options of step 1 for the program's arguments.
HostUnitsOptions hostUnitsOptionsFor(const DiscoveryArguments& args);

/// The options of findVendorUnits for the program's arguments (amd-gpu-discovery,
/// intel-gpu-discovery): the sysfs and /dev roots of the environment, and NVIDIA_SMI_TIMEOUT's
/// limit for the vendor tools. --health, which AMD and Intel GPUs do not have yet, is noted as
/// ignored in `report`.
/// @throws discovery::DiscoveryError for --gpus and --mig, which are NVIDIA's.
discovery::VendorOptions vendorOptionsFor(const DiscoveryArguments& args, discovery::Vendor vendor,
                                          Report& report);

/// The options of findVendorUnits for this process: the sysfs and /dev roots of the
/// environment, and NVIDIA_SMI_TIMEOUT's limit for the vendor tools (a note in `report` when its
/// value is ignored). What vendorOptionsFor gives once the arguments are checked; for callers
/// without the program's arguments (`flink-gpu exec --vendor`).
discovery::VendorOptions vendorOptions(Report& report);

/// The request of step 2 for the program's arguments, for `owner`.
GrantRequest grantRequestFor(const DiscoveryArguments& args, const coordination::Owner& owner);

}  // namespace flink::defaultdiscovery
