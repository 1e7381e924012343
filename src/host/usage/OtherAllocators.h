// Other GPU allocators of this host: where one runs beside the coordination file (a Kubernetes
// device plugin or DRA driver for NVIDIA GPUs, a Slurm node daemon with a gpu gres), the file is
// not the whole truth of which GPU is in use, and GPUs it hands out show as processes no record
// explains (GpuUse.h). `check` names each one.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "host/liveness/HostFacts.h"

namespace flink::usage {

/// The variable that moves "/" for otherAllocators (a container that mounts the host's root
/// elsewhere, the tests' stand-in trees), as FLINK_GPU_SYSFS_ROOT moves /sys.
inline constexpr const char* kHostRootVariable = "FLINK_GPU_HOST_ROOT";

/// $FLINK_GPU_HOST_ROOT where set and non-empty, else "/".
std::filesystem::path hostRoot();

/// One line for each other GPU allocator found under `root`:
///   - a kubelet device-plugin socket for NVIDIA: var/lib/kubelet/device-plugins/nvidia*.sock;
///   - NVIDIA's DRA kubelet plugin: the folder var/lib/kubelet/plugins/gpu.nvidia.com;
///   - a running slurmd (`facts`: a process of that name) whose configuration
///     (etc/slurm/gres.conf or slurm.conf, or etc/slurm-llnl/'s) has a gpu gres (`Name=gpu` in
///     gres.conf, `gpu` in slurm.conf's GresTypes or a node's Gres=).
/// Never throws: what cannot be read is not found.
std::vector<std::string> otherAllocators(
    const std::filesystem::path& root, liveness::HostFacts& facts = liveness::HostFacts::system());

}  // namespace flink::usage
