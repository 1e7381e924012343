// Whether an MPS control daemon is there for a pipe directory. A CUDA process that cannot reach
// the daemon of its CUDA_MPS_PIPE_DIRECTORY runs without MPS, so without the limits of its share:
// `exec` refuses to run a command then, and the default discovery warns.
//
// The daemon is looked at, never talked to: opening its socket would be a client connecting, and
// a FIFO's open would block until a reader came.
#pragma once

#include <optional>
#include <string>

namespace flink::sharing {

/// CUDA's pipe directory when CUDA_MPS_PIPE_DIRECTORY is not set. A daemon there serves every
/// CUDA process of the host that sets none, whole-GPU and time-sliced ones included.
inline constexpr const char* kDefaultMpsPipeDirectory = "/tmp/nvidia-mps";

/// Whether the MPS control daemon of `directory` is there: `<directory>/control`, its socket (a
/// FIFO is accepted too), is looked at with lstat and never opened. nullopt when it is; else the
/// cause for a person, one line naming the path and, where the socket is missing or something
/// else lies there, how to start the daemon (`CUDA_MPS_PIPE_DIRECTORY=DIR nvidia-cuda-mps-control
/// -d`).
std::optional<std::string> missingMpsDaemon(const std::string& directory);

}  // namespace flink::sharing
