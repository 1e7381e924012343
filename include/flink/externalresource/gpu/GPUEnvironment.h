// The environment a worker's child process needs to use the GPUs the driver granted the worker:
// a sidecar, a Python worker, any program an in-process C++ worker starts. The same variables
// `flink-gpu exec` gives its command and `flink-gpu which --format env` prints, so that a child
// never has to guess its GPUs from a mask it inherited.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "flink/externalresource/ExternalResourceInfoSet.h"

namespace flink::externalresource::gpu {

/// What to change in a child's environment.
struct GPUEnvironment {
  /// NAME, value, in order: CUDA_VISIBLE_DEVICES first.
  std::vector<std::pair<std::string, std::string>> set;
  /// Names to remove: variables of another kind of grant (a share's, an MPS daemon's) that the
  /// child must not inherit.
  std::vector<std::string> unset;
};

/// The environment for a child that is to use exactly `gpus` (GPUInfo, as retrieveResourceInfo
/// returned them, in their order):
///   - CUDA_VISIBLE_DEVICES: each GPU's UUID (its `uuid` property), so that no mask or device order
///     the child inherits changes which GPU an entry means; its index where the UUID is unknown;
///   - for shares (the `share.*` properties, all of `gpus` shares): FLINK_GPU_SHARE_MEMORY_MIB,
///     and behind an MPS daemon CUDA_MPS_PIPE_DIRECTORY, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE and
///     CUDA_MPS_PINNED_DEVICE_MEM_LIMIT, as `flink-gpu exec --share` sets them; otherwise those are
///     in `unset`.
/// An empty set gives CUDA_VISIBLE_DEVICES empty: a child that must use no GPU.
/// @throws std::invalid_argument for an info that is not a GPUInfo.
GPUEnvironment environmentFor(const ExternalResourceInfoSet& gpus);

}  // namespace flink::externalresource::gpu
