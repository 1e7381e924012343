// The environment of a process that is to use GPUs granted to another: what `flink-gpu exec` adds
// to its command's environment for whole GPUs and for the shares it holds (ShareGrant), what
// `flink-gpu which --format env` prints for a worker's child, and what the library gives an
// in-process worker's child (flink/externalresource/gpu/GPUEnvironment.h). The rules are
// docs/command-line.md's (exec, "Shares"). exec chooses its own CUDA_VISIBLE_DEVICES entries
// (ExecCommand.cpp, which knows the host and the options); the daemon check is
// host/sharing/MpsDaemon.h's.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "host/defaultdiscovery/DefaultDiscovery.h"

namespace flink::defaultdiscovery {

/// The MiB of each share, comma-separated in CUDA_VISIBLE_DEVICES order: what a framework reads
/// to cap its memory pool (a time-sliced share has no other limit).
inline constexpr const char* kShareMemoryVariable = "FLINK_GPU_SHARE_MEMORY_MIB";

/// The path of the allocation file (host/defaultdiscovery/AllocationFile.h) that exec writes for
/// its command: what it was granted, as JSON. Always set or unset by exec, never inherited as it
/// was, so that no command reads a stale one.
inline constexpr const char* kAllocationFileVariable = "FLINK_GPU_ALLOCATION_FILE";

/// The variables of CUDA's MPS client that exec sets for an MPS share and takes out of every
/// other NVIDIA command's environment, so that none joins a daemon it was not given.
/// CUDA_MPS_LOG_DIRECTORY is the daemon's, and never touched.
inline constexpr const char* kMpsPipeDirectoryVariable = "CUDA_MPS_PIPE_DIRECTORY";
inline constexpr const char* kMpsThreadPercentageVariable = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE";
inline constexpr const char* kMpsMemoryLimitVariable = "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT";

/// Changes to make to the environment.
struct EnvironmentChanges {
  /// NAME, value; in the order to set them (and to show them with --verbose).
  std::vector<std::pair<std::string, std::string>> set;
  std::vector<std::string> unset;
  /// What a person should know (a variable left out, and why), one line each, without a prefix.
  std::vector<std::string> notes;
};

/// For a whole-GPU command: none of the variables above, whatever the parent had.
EnvironmentChanges wholeGpuEnvironment();

/// For the shares `shares` of the GPUs `gpus` (parallel, in CUDA_VISIBLE_DEVICES order; the GPUs
/// as the host names them, for the notes), all of one group (all time-sliced, or all behind one MPS
/// pipe directory, as the allocator grants them):
///  - FLINK_GPU_SHARE_MEMORY_MIB: each share's MiB ("35942,71885"); unset, with a note, when the
///    memory of any share is unknown;
///  - under MPS: CUDA_MPS_PIPE_DIRECTORY, the directory; CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, 100 / K
///    rounded down, the smallest of the GPUs'; CUDA_MPS_PINNED_DEVICE_MEM_LIMIT, "<ordinal>=<MiB>M"
///    for each share whose memory is known, the ordinal being its place in CUDA_VISIBLE_DEVICES
///    (unset when none is known);
///  - time-sliced: the three CUDA_MPS_* variables unset.
EnvironmentChanges shareEnvironment(const std::vector<std::string>& gpus,
                                    const std::vector<ShareGrant>& shares);

/// The whole environment of a child that is to use the units `visible` (in the order it is to
/// number them; UUIDs, so that no mask or device order it inherits changes their meaning): whole,
/// or, with `shares` (parallel to `visible`), those shares of them. CUDA_VISIBLE_DEVICES first,
/// then wholeGpuEnvironment's or shareEnvironment's changes (`gpus`: the units as the notes name
/// them).
EnvironmentChanges childEnvironment(const std::vector<std::string>& visible,
                                    const std::vector<std::string>& gpus,
                                    const std::vector<ShareGrant>& shares);

/// The changes as lines a POSIX shell evaluates: `export NAME=value` (the value one shell word,
/// strings::shellWord) for each set, in order, then `unset NAME` for each unset.
std::string shellLines(const EnvironmentChanges& changes);

/// The MPS pipe directory of `shares` (the first that has one), or nullopt when time-sliced.
std::optional<std::string> mpsPipeDirectoryOf(const std::vector<ShareGrant>& shares);

}  // namespace flink::defaultdiscovery
