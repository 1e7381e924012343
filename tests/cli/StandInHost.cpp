// Hosts for the stand-in NVML. See StandInHost.h.
#include "StandInHost.h"

#include <sched.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <system_error>

#include <gtest/gtest.h>

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

namespace flink::testing {

std::vector<unsigned> allowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<unsigned> cpus;
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (unsigned cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

BoundSocket::BoundSocket(const std::filesystem::path& path) : path_(path) {
  fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) {
    ADD_FAILURE() << "socket: " << std::strerror(errno);
    return;
  }
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const std::string text = path.string();
  if (text.size() >= sizeof address.sun_path) {
    ADD_FAILURE() << "socket path too long: " << text;
    return;
  }
  std::memcpy(address.sun_path, text.c_str(), text.size() + 1);
  if (::bind(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(fd_, 1) != 0) {
    ADD_FAILURE() << "bind/listen " << text << ": " << std::strerror(errno);
  }
}

BoundSocket::~BoundSocket() {
  if (fd_ >= 0) ::close(fd_);
  std::error_code ignored;
  std::filesystem::remove(path_, ignored);
}

}  // namespace flink::testing
