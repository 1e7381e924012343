// Which processes run on each GPU, as the driver tells it, and whether a record explains each one:
// the one rule (explain) that the discovery, `exec`, the in-process driver, `status` and `check`
// all ask. The coordination file says who should hold a GPU; NVML says who uses it. A GPU that a
// process no record explains uses (a job started by hand, another scheduler's, a worker that lost
// its record) is *busy*: handing it out would put two programs on one GPU.
//
// A process on a unit is explained when it is
//   - the owner of a record that names the unit (or the unit's GPU, or one of its MIG instances),
//     where that owner runs (liveness::ownerRuns) and its record is of this process's pid
//     namespace;
//   - a descendant of such an owner, by its parent chain in /proc;
//   - the MPS server (nvidia-cuda-mps-server) of a GPU declared shared with MPS (host/sharing/).
// NVML reports host pids (the driver's pid namespace): a process that does not see them (a
// container with a pid namespace of its own) cannot judge and says so once; nothing is then busy.
//
// Reading NVML (readUse) is apart from judging (judge), so that an allocator reads the processes
// before it takes the coordination file's lock and judges under it, with the records it read.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "host/coordination/Coordination.h"
#include "host/enumeration/GpuEnumerator.h"
#include "host/enumeration/UnitIndex.h"
#include "host/liveness/HostFacts.h"
#include "host/liveness/Liveness.h"
#include "util/Notice.h"

namespace flink::usage {

/// --foreign: what the allocators do with a GPU a process no record explains uses.
enum class ForeignMode {
  kSkip,    ///< in coordination mode, leave it out as a held GPU (the default); a warning in plain
            ///< mode, where every worker is handed the first GPUs
  kWarn,    ///< hand it out, with a warning
  kIgnore,  ///< do not look: NVML is not asked
};

/// "skip", "warn", "ignore"; nullopt for anything else.
std::optional<ForeignMode> parseForeignMode(std::string_view text);

/// The word parseForeignMode reads.
std::string_view foreignModeName(ForeignMode mode) noexcept;

/// The GPU memory in use, with no process listed, from which a unit gets a note (what the
/// driver and an idle context keep stays below it).
inline constexpr std::uint64_t kMemoryWithoutProcessNoteMiB = 256;

/// The name of NVIDIA's MPS server process, which runs on each GPU an MPS control daemon serves.
inline constexpr std::string_view kMpsServerName = "nvidia-cuda-mps-server";

/// One process NVML lists on a unit.
struct GpuProcess {
  /// In the host's pid namespace.
  pid_t pid = 0;
  /// The GPU memory it uses, in MiB; nullopt where the driver does not tell.
  std::optional<std::uint64_t> usedMiB;
  /// NVML's MPS list names it (nvmlDeviceGetMPSComputeRunningProcesses): a client of an MPS
  /// server on the unit.
  bool mpsClient = false;
};

/// What NVML says one unit is doing.
struct UnitUse {
  /// The unit: a whole GPU's index, a MIG instance's MIG-… UUID.
  std::string unit;
  /// Its processes (compute, graphics and MPS lists, each once; a MIG instance's own); nullopt
  /// where NVML does not tell (not supported, no permission): then nothing is judged of it.
  std::optional<std::vector<GpuProcess>> processes;
  /// nvmlDeviceGetMemoryInfo_v2's used (without what the driver reserves), in MiB.
  std::optional<std::uint64_t> memoryUsedMiB;
};

/// The processes and memory of each of `units` that `devices` holds (whole GPUs by index, MIG
/// instances by UUID), in one NVML session. Empty where NVML cannot be used; never throws.
std::vector<UnitUse> readUse(const std::vector<std::string>& units,
                             const std::vector<discovery::GpuDevice>& devices);

/// Why a process on a unit is there, as explain() finds it.
enum class Explanation {
  kRecordOwner,      ///< the running owner of a record of the unit
  kOwnerDescendant,  ///< a descendant of one
  kMpsServer,        ///< the MPS server of a GPU declared shared with MPS
  kUnexplained,      ///< none of these: the unit is busy
  kUnjudgeable,      ///< this process does not see the host's pids
};

/// The rule. `owners`: the owners of the records that name the unit (or its GPU, or one of its
/// MIG instances), as recorded; an owner counts where its record is of the reader's pid namespace
/// and it runs (with its recorded start time). `mpsShared`: the unit is a GPU declared shared
/// with MPS. Reads the process's parent chain (and, for the MPS server, its name) from `facts`.
Explanation explain(pid_t pid, std::span<const liveness::Owner> owners, bool mpsShared,
                    liveness::HostFacts& facts = liveness::HostFacts::system());

/// A process no record explains.
struct ForeignProcess {
  pid_t pid = 0;
  std::optional<std::uint64_t> usedMiB;
  /// Its name from /proc, where this process sees it.
  std::optional<std::string> name;
};

/// What is to be said of one unit.
struct UnitVerdict {
  std::string unit;
  /// The processes on it that no record explains, in NVML's order: the unit is busy.
  std::vector<ForeignProcess> foreign;
  /// Memory in use (at least kMemoryWithoutProcessNoteMiB) while NVML lists no process: a note,
  /// never a reason to leave the unit out.
  std::optional<std::uint64_t> memoryWithoutProcessMiB;

  bool busy() const noexcept { return !foreign.empty(); }
};

struct Judgement {
  /// The units with anything to say, in the order of the use read.
  std::vector<UnitVerdict> units;
  /// Units that processes use, which were not judged because this process does not see the
  /// host's pids.
  std::vector<std::string> unjudged;
  /// Units whose processes NVML did not tell (not supported, an error): nothing is known of
  /// them, neither busy nor free of foreign processes.
  std::vector<std::string> unread;

  /// The verdict of `unit`; nullptr when there is nothing to say of it.
  const UnitVerdict* find(std::string_view unit) const;
  /// The busy units, in order.
  std::vector<std::string> busyUnits() const;
};

/// explain() for every process of `use`, with the records of the coordination file as read
/// (`records`; none in plain mode), read by `index`, and the GPUs declared shared with MPS
/// (`mpsShared`, by index). Reads /proc only: what an allocator may do under the file's lock.
Judgement judge(const std::vector<UnitUse>& use, const std::vector<coordination::Record>& records,
                const discovery::UnitIndex& index, const std::unordered_set<std::string>& mpsShared,
                liveness::HostFacts& facts = liveness::HostFacts::system());

/// "process 4242 (python3, 8192 MiB)", or "process 4242 (8192 MiB)" without its name (`withName`
/// false or unknown).
std::string describeProcess(const ForeignProcess& process, bool withName = true);

/// "GPU 1 is used by process 4242 (8192 MiB), which no record names"; several processes:
/// "GPU 1 is used by processes 4242 (8192 MiB) and 4250, which no record names".
std::string describeBusy(const UnitVerdict& verdict);

/// "GPU 1 has 4096 MiB of memory in use, but NVML lists no process on it (…)".
std::string describeMemoryWithoutProcess(const UnitVerdict& verdict);

/// The one note of a judgement with units left unjudged; nullopt when there are none.
std::optional<Notice> unjudgedNote(const Judgement& judgement);

}  // namespace flink::usage
