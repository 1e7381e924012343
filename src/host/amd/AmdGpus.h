// AMD GPUs, from the KFD topology in sysfs (written by the helper that owns host/amd/).
#pragma once

#include "host/enumeration/Vendor.h"

namespace flink::amd {

/// The AMD units this process may be handed, in ROCr's order under the masks in force.
/// @throws discovery::DiscoveryError naming the cause (no /dev/kfd, a malformed properties file,
///         no AMD GPU, every unit left out, a mask that hides every unit, a broken tool).
discovery::VendorHost findAmdUnits(const discovery::VendorOptions& options);

}  // namespace flink::amd
