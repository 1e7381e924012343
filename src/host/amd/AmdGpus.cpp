#include "host/amd/AmdGpus.h"

#include "host/enumeration/GpuEnumerator.h"

namespace flink::amd {

discovery::VendorHost findAmdUnits(const discovery::VendorOptions&) {
  throw discovery::DiscoveryError("amd GPU discovery is not written yet");
}

}  // namespace flink::amd
