#include "host/intel/IntelGpus.h"

#include "host/enumeration/GpuEnumerator.h"

namespace flink::intel {

discovery::VendorHost findIntelUnits(const discovery::VendorOptions&) {
  throw discovery::DiscoveryError("intel GPU discovery is not written yet");
}

}  // namespace flink::intel
