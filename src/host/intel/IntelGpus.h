// Intel GPUs, from DRM in sysfs (written by the helper that owns host/intel/).
#pragma once

#include "host/enumeration/Vendor.h"

namespace flink::intel {

/// The Intel devices this process may be handed, in Level Zero's order under the hierarchy and
/// masks in force.
/// @throws discovery::DiscoveryError naming the cause ("no Intel GPU", a mask the discovery does
///         not read, every card left out, a broken tool).
discovery::VendorHost findIntelUnits(const discovery::VendorOptions& options);

}  // namespace flink::intel
