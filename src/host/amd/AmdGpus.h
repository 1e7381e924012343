// AMD GPUs as ROCm numbers them in this process: the KFD topology's GPU nodes (whole GPUs and
// compute partitions) whose render node opens, in KFD node order, under ROCR_VISIBLE_DEVICES and
// then HIP's mask (HIP_VISIBLE_DEVICES, else CUDA_VISIBLE_DEVICES). amd-smi, else rocm-smi, only
// where sysfs has no KFD topology. The rules: docs/amd-and-intel.md.
#pragma once

#include "host/enumeration/Vendor.h"

namespace flink::amd {

/// The AMD units this process may be handed, in ROCr's order under the masks in force. Its
/// notices hold a note for each unit whose render node is absent (ENOENT) or denied by a device
/// cgroup (EPERM), a GPU left out (kGpuLeftOut) for each unit whose render node fails to open for
/// another reason, and warnings for a unit without a render node (drm_render_minor 0), a mask
/// entry read with a surprise or ending its list, and a tool used as a fallback.
/// @throws discovery::DiscoveryError naming the cause (no /dev/kfd, a malformed properties file,
///         no AMD GPU, every unit left out, a mask that hides every unit, a broken tool).
discovery::VendorHost findAmdUnits(const discovery::VendorOptions& options);

}  // namespace flink::amd
