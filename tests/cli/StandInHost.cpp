// Hosts for the stand-in NVML. See StandInHost.h.
#include "StandInHost.h"

#include <cstdio>
#include <fstream>

namespace flink::testing {

std::string standInUuid(unsigned index) {
  char uuid[48];
  std::snprintf(uuid, sizeof uuid, "GPU-%u0000000-0000-4000-8000-%012u", index % 10, index);
  return uuid;
}

void writeStandInHost(const std::filesystem::path& file, unsigned count,
                      const std::vector<std::string>& members) {
  std::string devices;
  for (unsigned i = 0; i < count; ++i) {
    if (!devices.empty()) devices += ",\n";
    const std::string own = i < members.size() && !members[i].empty() ? members[i] : kH200Members;
    devices += R"({"uuid": ")" + standInUuid(i) + R"(", "name": "NVIDIA H200", )" + own + "}";
  }
  std::ofstream(file, std::ios::trunc) << R"({"devices": [)" << devices << "]}";
}

}  // namespace flink::testing
