// An inherited CUDA_VISIBLE_DEVICES, read as CUDA reads it, and the GPUs it lets a worker have.
//
// Schedulers (Slurm, Kubernetes device plugins, Ray) hand a worker its GPUs by setting
// CUDA_VISIBLE_DEVICES. The default discovery and `flink-gpu exec` inherit it, and must hand out
// only what it allows, or work lands on GPUs that belong to someone else. The rules are CUDA's:
//
// - unset: every device; set but empty (after spaces), or Slurm's `NoDevFiles`: none;
// - otherwise a comma list; spaces around an entry are ignored; each entry is a decimal index, a
//   full `GPU-…`/`MIG-…` UUID, a unique prefix of one (`GPU-8932f937`; a prefix that several
//   UUIDs share names none of them, and is reported as ambiguous), or the pre-R470 MIG form
//   `MIG-GPU-<gpu uuid>/<gpu instance id>/<compute instance id>`. UUIDs compare case-insensitively;
// - the list ends at the first entry that names no device (`0,2,-1,1` is `0,2`);
// - an entry that names a device already named counts once;
// - an index counts the whole GPUs the process can open (those an enumeration lists: a lost GPU,
//   or one a cgroup denies, is not among them) in CUDA's order: PCI bus order with
//   CUDA_DEVICE_ORDER=PCI_BUS_ID, else fastest first, which is PCI bus order too on a host of one
//   GPU model. On a host of several models without PCI_BUS_ID an index is ambiguous, and a warning
//   says so (PCI bus order is used).
//
// Records of the coordination file keep naming GPUs as the host numbers them (NVML's index, a MIG
// UUID); the mask's own entries are what a worker is told, as the scheduler named them.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "host/enumeration/GpuEnumerator.h"
#include "util/Notice.h"

namespace flink::discovery {

inline constexpr const char* kVisibleDevicesVariable = "CUDA_VISIBLE_DEVICES";
inline constexpr const char* kDeviceOrderVariable = "CUDA_DEVICE_ORDER";
/// Slurm's value for a job without GPUs.
inline constexpr const char* kNoDevFiles = "NoDevFiles";

/// A CUDA_VISIBLE_DEVICES value, split.
struct VisibleDevicesMask {
  /// The value as it was set, for messages.
  std::string value;
  /// The entries, spaces around them removed, in order, up to the end of the value (the entry
  /// that names no device is found only against the devices: see resolveVisibleDevices). Empty
  /// when the value hides every device.
  std::vector<std::string> entries;

  bool hidesEveryDevice() const noexcept { return entries.empty(); }
  /// "CUDA_VISIBLE_DEVICES=0,1", for messages.
  std::string describe() const;
};

/// Splits a CUDA_VISIBLE_DEVICES value; nullptr (unset) gives nullopt: every device is visible.
std::optional<VisibleDevicesMask> parseVisibleDevices(const char* value);

/// parseVisibleDevices of this process's CUDA_VISIBLE_DEVICES.
std::optional<VisibleDevicesMask> inheritedVisibleDevices();

/// Whether CUDA_DEVICE_ORDER=PCI_BUS_ID is set in this process's environment.
bool inheritedPciBusOrder();

/// The whole GPUs of `devices` in CUDA's index order (see above): by PCI bus id when every one
/// has one, else in the order listed (NVML's and nvidia-smi's index order is PCI bus order).
/// Pointers into `devices`.
std::vector<const GpuDevice*> cudaIndexOrder(const std::vector<GpuDevice>& devices);

/// What one entry names, as CUDA reads it.
struct EntryMatch {
  /// The device: an index among cudaIndexOrder, a whole or MIG UUID, a prefix that only one UUID
  /// has, or MIG-GPU-<uuid>/<gi>/<ci> (the MIG instance of that GPU with those ids); nullptr
  /// when the entry names none. Into the devices given.
  const GpuDevice* device = nullptr;
  /// When the entry names none because it is a UUID prefix that several devices share (for the
  /// MIG-GPU- form, several GPUs): those devices, in the order listed. CUDA takes none of them,
  /// and stops there as at any entry that names no device.
  std::vector<const GpuDevice*> ambiguous;
};

/// The device one entry names, by the rules above (`entry` is trimmed).
EntryMatch matchVisibleDeviceEntry(std::string_view entry, const std::vector<GpuDevice>& devices);

/// matchVisibleDeviceEntry's device, or nullptr.
const GpuDevice* resolveVisibleDeviceEntry(std::string_view entry,
                                           const std::vector<GpuDevice>& devices);

/// "GPU 0 (GPU-8932f937-…)", or "MIG instance MIG-… of GPU 2": a device named by its index and
/// UUID, for messages.
std::string describeDevice(const GpuDevice& device);

/// "ambiguous: it could mean GPU 0 (GPU-…) or GPU 1 (GPU-…)", of EntryMatch::ambiguous.
std::string describeAmbiguity(const std::vector<const GpuDevice*>& candidates);

/// One entry of the mask and the device it names.
struct VisibleDevice {
  /// The mask's own spelling (trimmed).
  std::string entry;
  /// Into the devices given to resolveVisibleDevices.
  const GpuDevice* device = nullptr;
};

/// The entry at which CUDA stops reading a mask: the first that names no device.
struct MaskStop {
  /// Its position among VisibleDevicesMask::entries.
  std::size_t entry = 0;
  /// The devices it could mean, when it is an ambiguous UUID prefix (EntryMatch::ambiguous).
  std::vector<const GpuDevice*> ambiguous;
};

/// What the mask makes visible of `devices`.
struct MaskResolution {
  /// In the mask's order, each device once.
  std::vector<VisibleDevice> visible;
  /// Where CUDA stopped, when an entry names no device.
  std::optional<MaskStop> stop;
  /// Warnings: an entry CUDA stops at (and those it ignores after it; an ambiguous prefix says
  /// which devices it could mean), an entry given twice, index entries on a host of several GPU
  /// models without CUDA_DEVICE_ORDER=PCI_BUS_ID.
  std::vector<Notice> warnings;
};

/// Resolves every entry of `mask` against `devices` (an enumeration's, MIG instances included),
/// by the rules above. `pciBusOrder`: CUDA_DEVICE_ORDER=PCI_BUS_ID is set. Nothing is thrown.
MaskResolution resolveVisibleDevices(const VisibleDevicesMask& mask,
                                     const std::vector<GpuDevice>& devices, bool pciBusOrder);

/// The units a worker may be handed under a mask, each as the host numbers it and as the mask
/// calls it.
struct MaskedUnits {
  /// Unit identifiers as the enumeration gives them (a whole GPU's NVML index, a MIG UUID), in
  /// the mask's order: what coordination records name.
  std::vector<std::string> hostIdentifiers;
  /// The mask's entry for each, at the same position: what the worker is told.
  std::vector<std::string> entries;
  /// resolveVisibleDevices' warnings, then one per entry that names a device which is not a unit
  /// (a MIG instance without --mig, a GPU in MIG mode with it).
  std::vector<Notice> warnings;

  /// The mask's entry for a unit of hostIdentifiers; the identifier itself when it is none.
  std::string entryOf(const std::string& hostIdentifier) const;
};

/// The allocatable units (see allocatableUnits) that `mask` lets a worker have.
/// @throws DiscoveryError naming the variable and its value when the mask hides every device,
///         or names no unit of this host.
MaskedUnits unitsUnderMask(const VisibleDevicesMask& mask, const std::vector<GpuDevice>& devices,
                           bool mig, bool pciBusOrder);

}  // namespace flink::discovery
