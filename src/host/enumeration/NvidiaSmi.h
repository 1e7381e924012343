// How the default discovery learns which NVIDIA GPUs a host has: through nvidia-smi.
//
// The rules are those of the earlier bash nvidia-gpu-discovery.sh, so that its users see the same
// results and messages, extended to read each GPU's properties:
// `nvidia-smi --query-gpu=index,uuid,name,pci.bus_id,memory.total --format=csv,noheader,nounits`
// is run (found on PATH, then in the folders drivers usually install it into); each output line
// whose first comma-separated field is a non-negative decimal integer is a GPU; any other
// non-blank line (an error, a warning) is never a GPU and is passed on as `nvidia-smi: <line>`.
// Indices printed together with a non-zero exit code are used, with a warning (nvidia-smi exits
// 14 when an infoROM is corrupted but still lists every GPU). No index at all is an error naming
// the cause.
//
// With MIG asked for, `nvidia-smi -L` is run as well, and the MIG instances it lists are added
// after their GPUs (see applyNvidiaSmiMigListing).
//
// Enumeration sits behind GpuEnumerator so that other sources (NVML, an explicit list) can take
// nvidia-smi's place without the allocation logic knowing.
#pragma once

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "host/enumeration/GpuEnumerator.h"
#include "process/ProgramSearch.h"
#include "process/Subprocess.h"

namespace flink::discovery {

/// Shorter than the driver's own 10 s, so that a hanging nvidia-smi is reported by us, with its
/// output, rather than the whole discovery being killed without a word.
inline constexpr std::chrono::seconds kDefaultNvidiaSmiTimeout{8};

/// The folders NVIDIA drivers and container toolkits put nvidia-smi into, looked at after PATH
/// (a worker started by a service manager often has a PATH without them).
const std::vector<std::filesystem::path>& defaultNvidiaSmiFolders();

/// A time-out read from the environment, with a note when the value had to be ignored.
struct TimeoutSetting {
  std::chrono::seconds timeout = kDefaultNvidiaSmiTimeout;
  std::optional<Notice> note;
};

/// Reads NVIDIA_SMI_TIMEOUT's value (nullptr: unset): whole seconds, 1 to 99999. Anything else
/// gives the default and a note saying so, as the bash script did.
TimeoutSetting parseNvidiaSmiTimeout(const char* value);

/// Where nvidia-smi is, and every folder looked in to find out (for the "not found" message).
using NvidiaSmiLocation = process::ProgramLocation;

/// process::findProgram for nvidia-smi: the folders of `searchPath` (a PATH value), then
/// `folders`.
NvidiaSmiLocation findNvidiaSmi(std::string_view searchPath,
                                const std::vector<std::filesystem::path>& folders);

/// Turns one run of the GPU query into GPUs or an error, by the rules above. `output` is what it
/// printed (stdout, then stderr); `timeout` is only used in messages.
///
/// A GPU line is `<index>, <uuid>, <name>, <pci.bus_id>, <memory.total>`: the index is made
/// canonical ("01" → "1") and becomes the identifier; the uuid is field 2, the PCI bus id the
/// second-to-last field and memory.total (MiB, digits; a " MiB" unit is tolerated) the last,
/// and the fields between are the name, joined again with "," (a product name may contain a
/// comma). nvidia-smi's "no value" answers (`[N/A]`, `N/A`, `[Not Supported]`, `[Unknown Error]`,
/// `[Insufficient Permissions]`, `[GPU is lost]`, any other `[...]`) and empty fields leave the
/// property nullopt. A line that is only an index (older tools, stand-ins) is a GPU without
/// properties. A property that is there but malformed (memory not a number, a uuid that is no
/// `GPU-` UUID, a line of 2 to 4 fields) is left nullopt too, with a warning naming the GPU and
/// the field.
///
/// The notices are: how nvidia-smi ended (when it matters), then each GPU it left out (kind
/// kGpuLeftOut), then the warnings about properties, then every line that was not a GPU, as the
/// detail `nvidia-smi: <line>`.
/// @throws DiscoveryError when no line is a GPU.
Enumeration interpretNvidiaSmiOutput(std::string_view output,
                                     const process::ProcessOutcome& outcome,
                                     std::chrono::milliseconds timeout);

/// Adds the MIG instances that `nvidia-smi -L` printed (`listOutput`) to `enumeration`, which
/// holds the GPUs of the query. The listing looks like
///
///     GPU 0: NVIDIA H200 (UUID: GPU-5b8a0f2c-...)
///       MIG 1g.18gb     Device  0: (UUID: MIG-a1b2c3d4-...)
///       MIG 1g.18gb     Device  1: (UUID: MIG-...)
///     GPU 1: NVIDIA H200 (UUID: GPU-...)
///
/// (drivers before R470 print `MIG-GPU-<uuid>/<gi>/<ci>` as the MIG UUID; both are accepted).
/// A GPU line is matched to a GPU of `enumeration` by its UUID, else by its index. Each MIG line
/// becomes a GpuDevice placed after its parent and the parent's instances already there:
/// identifier = uuid = the MIG UUID, name = "<parent name> MIG <profile>" (NVML's form; nullopt
/// when neither the query nor the listing named the parent), pciBusId = the parent's,
/// mig = {parent index, nullopt, nullopt} (the listing has no instance ids), memory unknown.
/// The parent gets migEnabled = true. A GPU with MIG mode on but no instance is listed like one
/// with MIG off, so it stays migEnabled = false: NVML is needed to tell them apart.
///
/// Nothing is thrown. A MIG instance already in `enumeration` is not added twice. Notices go to
/// enumeration.notices: warnings for MIG lines whose GPU is unknown or missing from the query,
/// and every other line that is neither a GPU nor a MIG line, as the detail
/// `nvidia-smi -L: <line>`.
/// @return the number of MIG instances added.
std::size_t applyNvidiaSmiMigListing(Enumeration& enumeration, std::string_view listOutput);

struct NvidiaSmiOptions {
  /// Where to look first, PATH-style; nullopt: the PATH of this process.
  std::optional<std::string> searchPath;
  /// Where to look next.
  std::vector<std::filesystem::path> folders = defaultNvidiaSmiFolders();
  /// Used instead of searching, when set (tests, or a caller that knows).
  std::optional<std::filesystem::path> executable;
  /// For the GPU query and, with `mig`, `nvidia-smi -L` together: -L gets what the query left.
  std::chrono::milliseconds timeout = kDefaultNvidiaSmiTimeout;
  /// Also run `nvidia-smi -L` and list the MIG instances (see applyNvidiaSmiMigListing).
  bool mig = false;
  /// Run nvidia-smi in a process group of its own, ended whole at the time-out (and reached by
  /// process::signalAllRunning): for a caller that is itself the worker (the in-process driver).
  /// False (the discovery program's way): in the caller's group, so that when the driver ends
  /// the discovery's group, nvidia-smi and what it started go with it.
  bool ownProcessGroup = false;
};

/// Runs nvidia-smi (never through a shell) and reads its GPU list, and with MIG its listing.
class NvidiaSmiEnumerator : public GpuEnumerator {
 public:
  explicit NvidiaSmiEnumerator(NvidiaSmiOptions options = {}) : options_(std::move(options)) {}
  /// @throws DiscoveryError: nvidia-smi not found, not startable, failing, hanging, no GPU.
  /// A failing, hanging or unstartable `nvidia-smi -L` is not an error: the GPUs are returned
  /// with a warning, without (some of) their MIG instances.
  Enumeration enumerate() override;

 private:
  NvidiaSmiOptions options_;
};

}  // namespace flink::discovery
