// What the default discoveries of every vendor share: which vendor, where the host's sysfs and
// /dev trees are, and what a vendor's enumeration hands the allocator (VendorHost).
//
// NVIDIA's GPUs come from NVML or nvidia-smi (HostGpus.h). AMD's come from the KFD topology
// (host/amd/), Intel's from DRM (host/intel/): both read sysfs, which answers in a container
// without ROCm or oneAPI installed and is what the vendors' runtimes read themselves. Their units
// are recorded in the coordination file by vendor and PCI bus id (`amd:00000000:05:00.3`,
// `intel:00000000:5A:00.0/1`), the same in every container, beside NVIDIA's `<index>` records.
#pragma once

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "process/Subprocess.h"
#include "util/Notice.h"

namespace flink::discovery {

enum class Vendor { kNvidia, kAmd, kIntel };

/// "nvidia", "amd", "intel": the `vendor` property, `--vendor`'s value, the script's prefix.
std::string_view vendorName(Vendor vendor) noexcept;

/// The vendor `name` names, exactly as vendorName spells it; nullopt for anything else.
std::optional<Vendor> parseVendor(std::string_view name) noexcept;

/// The environment variables that move the trees the sysfs enumerations read (tests, a host
/// that mounts the host's sysfs elsewhere in a container).
inline constexpr const char* kSysfsRootVariable = "FLINK_GPU_SYSFS_ROOT";
inline constexpr const char* kDevRootVariable = "FLINK_GPU_DEV_ROOT";

/// Where sysfs and /dev are.
struct HostRoots {
  std::filesystem::path sysfs{"/sys"};
  std::filesystem::path dev{"/dev"};

  /// FLINK_GPU_SYSFS_ROOT and FLINK_GPU_DEV_ROOT where set and non-empty, else /sys and /dev.
  static HostRoots fromEnvironment();
};

/// Reads a small file whole (a sysfs attribute: at most 64 KiB are read). nullopt when it cannot
/// be opened or read; `error`, when given, then holds errno.
std::optional<std::string> readSmallFile(const std::filesystem::path& path, int* error = nullptr);

/// Opens `path` O_RDWR|O_CLOEXEC and closes it again at once, as the runtimes do at start-up with
/// a render node: 0 when that works, else errno (ENOENT absent, EPERM a device cgroup's denial,
/// EACCES the file's mode). A stat or access() would not see a cgroup's EPERM.
int probeOpen(const std::filesystem::path& path) noexcept;

/// A vendor tool (amd-smi, rocm-smi, xpu-smi), run as nvidia-smi is: found on PATH, never through
/// a shell, under a time limit, in the caller's process group.
struct ToolOptions {
  /// Where to look for the tool, PATH-style; nullopt: this process's PATH.
  std::optional<std::string> searchPath;
  /// The limit on each run: NVIDIA_SMI_TIMEOUT's, else 8 s (NvidiaSmi.h).
  std::chrono::milliseconds timeout{8000};
};

struct ToolRun {
  /// The tool's absolute path; nullopt when it is on none of the folders searched.
  std::optional<std::filesystem::path> path;
  /// Unset when the tool was not found.
  std::optional<process::ProcessResult> result;
  /// Set when it was found but could not be started (errno's words).
  std::optional<std::string> startError;
};

/// Looks `name` up on the search path and runs it with `args`.
ToolRun runTool(const std::string& name, const std::vector<std::string>& args,
                const ToolOptions& options);

/// The options every vendor's enumeration takes.
struct VendorOptions {
  HostRoots roots = HostRoots::fromEnvironment();
  ToolOptions tools;
  /// The environment the masks are read from (ROCR_VISIBLE_DEVICES, ZE_AFFINITY_MASK, …):
  /// returns nullptr for an unset variable. Default: this process's environment.
  std::function<const char*(const char*)> getenv = [](const char* name) {
    return std::getenv(name);
  };
  /// How a device node is tried (probeOpen): replaceable in tests, to give the errno a device
  /// cgroup (EPERM) or a file's mode (EACCES, which root never meets) would.
  std::function<int(const std::filesystem::path&)> probe = probeOpen;
};

/// GPUInfo's properties of a unit besides its index, `vendor` first, in the order shown.
using Properties = std::vector<std::pair<std::string, std::string>>;

/// One unit a vendor's enumeration can hand out: a whole GPU, an AMD compute partition, an Intel
/// tile or card.
struct VendorUnit {
  /// What the discovery prints and the worker's runtime takes: the innermost mask's own entry as
  /// it was spelled, else the runtime's index ("0", "3", Intel COMPOSITE's "1.0").
  std::string identifier;
  /// What the coordination file records: "amd:00000000:05:00.3", "intel:00000000:5A:00.0",
  /// "intel:00000000:5A:00.0/1" (a tile). Unique on the host, the same in every container.
  std::string recordName;
  /// GPUInfo's properties, `vendor` first; a property that is not known is absent.
  Properties properties;
  /// For messages: "GPU 0 (00000000:63:00.0)", "tile 1 of card 0 (00000000:5A:00.0)".
  std::string description;
};

/// What a vendor's enumeration found that a run may hand out.
struct VendorHost {
  Vendor vendor = Vendor::kNvidia;
  /// The units this process may be handed, in the order to hand them out (the masks' order).
  std::vector<VendorUnit> units;
  /// Units that share hardware, by record name, both ways (an Intel card and its tiles): never
  /// held by two running owners at once. coordination::RelatedUnits.
  std::unordered_map<std::string, std::vector<std::string>> related;
  /// What to say on stderr: notes for units this process cannot open (a container's render
  /// nodes); warnings for what an operator must hear of (a GPU without a render node, a tool used
  /// as a fallback, a mask read with a surprise, an order that depends on a variable); a GPU left
  /// out for any other failure to open one (kGpuLeftOut).
  std::vector<Notice> notices;
  /// The innermost mask in force, "ROCR_VISIBLE_DEVICES=0,1", for the message of a request for
  /// more units than it allows; nullopt without one.
  std::optional<std::string> mask;
  /// For `flink-gpu exec`: the variables to set for a command given `granted` (units of `units`,
  /// in the order granted), name and value, in the order to set them. `uuids`:
  /// `--visible-devices uuid`. @throws std::invalid_argument (a usage error) when `uuids` is
  /// asked for and a unit has no UUID of its own, or the vendor has no UUID form; what() says
  /// which unit and why, and leaves naming the option to the caller.
  std::function<std::vector<std::pair<std::string, std::string>>(
      const std::vector<const VendorUnit*>& granted, bool uuids)>
      environmentFor;
};

/// The value of `property` among `properties`; nullopt when absent.
std::optional<std::string> propertyOf(const Properties& properties, std::string_view property);

}  // namespace flink::discovery
