// Intel GPUs as Level Zero numbers them in this process: the DRM cards of vendor 0x8086 whose
// render node opens, in compute-runtime's order (ZE_ENABLE_PCI_ID_DEVICE_ORDER), as tiles or cards
// (ZE_FLAT_DEVICE_HIERARCHY), under ZE_AFFINITY_MASK and then ONEAPI_DEVICE_SELECTOR. xpu-smi only
// where sysfs has no DRM folder, and only under COMPOSITE (xpu-smi counts cards, FLAT counts
// tiles). Cards left out are notes of VendorHost::notices; the rest are warnings.
// The rules: docs/amd-and-intel.md.
#pragma once

#include "host/enumeration/Vendor.h"

namespace flink::intel {

/// The Intel devices this process may be handed, in Level Zero's order under the hierarchy and
/// masks in force.
/// @throws discovery::DiscoveryError naming the cause ("no Intel GPU", a mask the discovery does
///         not read, every card left out, a broken tool, xpu-smi's cards under FLAT or a
///         mask naming tiles of them).
discovery::VendorHost findIntelUnits(const discovery::VendorOptions& options);

}  // namespace flink::intel
