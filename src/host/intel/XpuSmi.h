// xpu-smi as the fallback of the Intel discovery: `xpu-smi discovery -j`, run only when sysfs has
// no DRM folder to read (a container without /sys/class/drm).
//
// Its answer is one JSON object, `{"device_list": [{"device_id": 0, "device_name": "Intel(R) Data
// Center GPU Max 1550", "pci_bdf_address": "0000:4d:00.0", "pci_device_id": "0xbd5", "uuid": …,
// "vendor_name": …, …}]}`: one entry per card (xpu-smi counts cards, not tiles), in xpu-smi's
// order. Its entries say nothing of tiles (intel/xpumanager's getDeviceList writes device_id,
// device_type, uuid, device_name, pci_device_id, pci_bdf_address, vendor_name, drm_device and
// device_function_type), so the discovery takes its cards, in Level Zero's order with their names,
// only under ZE_FLAT_DEVICE_HIERARCHY=COMPOSITE, where Level Zero numbers cards too.
#pragma once

#include <string_view>
#include <vector>

#include "host/intel/DrmCards.h"

namespace flink::intel {

/// The cards of an `xpu-smi discovery -j` answer, in the order listed; each says one tile (the
/// answer does not tell how many it has: never a figure to number tiles by), no render node and
/// no memory figure.
/// @throws discovery::DiscoveryError naming xpu-smi and quoting `output` when it is not that JSON
///         (not JSON, no device_list array, an entry without a PCI bus id of the kernel's form).
std::vector<IntelCard> parseXpuSmiDiscovery(std::string_view output);

}  // namespace flink::intel
