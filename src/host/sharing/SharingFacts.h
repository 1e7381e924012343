// What the driver says of a whole GPU that matters to sharing, beside the operator's
// declarations: its compute mode, and signs that an MPS control daemon serves it. `check` notes a
// GPU not declared shared that shows either (sharingNotes), so that a set-up left behind does not
// sit there unseen:
//
//  - EXCLUSIVE_PROCESS compute mode (what an MPS set-up asks for): one CUDA process at a time, so
//    a worker that starts a second one fails ("all CUDA-capable devices are busy or
//    unavailable");
//  - an MPS control daemon serving it: NVML lists MPS clients on it
//    (nvmlDeviceGetMPSComputeRunningProcesses), or its process list holds the MPS server
//    (usage::kMpsServerName). Its workers would share one server and its faults.
//
// Nothing here asks NVML: the facts come from what the caller already read (the health probe's
// compute mode, usage::readUse's processes), so that check opens no NVML session of its own for
// them. Which GPUs are declared is the caller's, through declarationsOf (SharingDeclarations.h).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "host/liveness/HostFacts.h"
#include "host/usage/GpuUse.h"

namespace flink::sharing {

/// What NVML lists on a GPU that says an MPS control daemon serves it.
struct MpsSigns {
  /// The MPS clients NVML lists on it (its MPS list), ascending, each once; the server left out.
  std::vector<pid_t> clients;
  /// The MPS server NVML lists on it, where this process can tell it by name: it sees the host's
  /// pids (liveness::seesHostPids). Elsewhere only the clients count.
  std::optional<pid_t> server;

  bool any() const noexcept { return !clients.empty() || server.has_value(); }
};

/// The signs in `use`, the processes NVML listed on one whole GPU (usage::readUse). Reads the
/// names of its processes from `facts` (/proc) only where it sees the host's pids.
MpsSigns mpsSignsOf(const usage::UnitUse& use,
                    liveness::HostFacts& facts = liveness::HostFacts::system());

/// One whole GPU as NVML sees it, for sharingNotes.
struct GpuSharingFacts {
  /// Its index ("0"), and its GPU-… UUID where known.
  std::string gpu;
  std::optional<std::string> uuid;
  /// nvmlDeviceGetComputeMode says EXCLUSIVE_PROCESS (false where it does not tell).
  bool exclusiveProcess = false;
  MpsSigns mps;
};

/// What a sharing note is about.
enum class SharingNoteKind {
  kComputeMode,  ///< EXCLUSIVE_PROCESS without a declaration
  kMps,          ///< an MPS control daemon serves it without a declaration
};

/// "compute_mode", "mps": check's `kind` (and `cause`).
std::string_view sharingNoteWord(SharingNoteKind kind);

struct SharingNote {
  SharingNoteKind kind = SharingNoteKind::kComputeMode;
  /// The GPU's index.
  std::string gpu;
  /// One line, without the "note: " prefix.
  std::string text;
};

/// The notes of `gpu`, a GPU that no declaration names (the caller leaves out the declared
/// ones): one for EXCLUSIVE_PROCESS, one for an MPS daemon; none when it shows neither.
std::vector<SharingNote> undeclaredSharingNotes(const GpuSharingFacts& gpu);

}  // namespace flink::sharing
