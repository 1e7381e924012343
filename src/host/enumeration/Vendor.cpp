#include "host/enumeration/Vendor.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <system_error>

#include "process/FileDescriptor.h"
#include "process/ProgramSearch.h"
#include "util/Strings.h"

namespace flink::discovery {

namespace fs = std::filesystem;

std::string_view vendorName(Vendor vendor) noexcept {
  switch (vendor) {
    case Vendor::kNvidia:
      return "nvidia";
    case Vendor::kAmd:
      return "amd";
    case Vendor::kIntel:
      return "intel";
  }
  return "nvidia";
}

std::optional<Vendor> parseVendor(std::string_view name) noexcept {
  for (const Vendor vendor : {Vendor::kNvidia, Vendor::kAmd, Vendor::kIntel}) {
    if (name == vendorName(vendor)) return vendor;
  }
  return std::nullopt;
}

HostRoots HostRoots::fromEnvironment() {
  HostRoots roots;
  if (const char* sysfs = std::getenv(kSysfsRootVariable); sysfs != nullptr && *sysfs != '\0') {
    roots.sysfs = sysfs;
  }
  if (const char* dev = std::getenv(kDevRootVariable); dev != nullptr && *dev != '\0') {
    roots.dev = dev;
  }
  return roots;
}

std::optional<std::string> readSmallFile(const fs::path& path, int* error) {
  process::FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd) {
    if (error != nullptr) *error = errno;
    return std::nullopt;
  }
  std::string text;
  char buffer[4096];
  constexpr std::size_t kLimit = 64 * 1024;
  while (text.size() < kLimit) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (error != nullptr) *error = errno;
      return std::nullopt;
    }
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
  }
  return text;
}

int probeOpen(const fs::path& path) noexcept {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return errno;
  ::close(fd);
  return 0;
}

ToolRun runTool(const std::string& name, const std::vector<std::string>& args,
                const ToolOptions& options) {
  std::string searchPath;
  if (options.searchPath) {
    searchPath = *options.searchPath;
  } else if (const char* path = std::getenv("PATH")) {
    searchPath = path;
  }
  ToolRun run;
  run.path = process::findProgram(name, searchPath).path;
  if (!run.path) return run;
  std::vector<std::string> argv{run.path->string()};
  argv.insert(argv.end(), args.begin(), args.end());
  process::RunOptions runOptions;
  runOptions.timeout = options.timeout;
  // In our process group, as nvidia-smi: when the driver ends the discovery's group, the tool
  // goes with it.
  runOptions.newProcessGroup = false;
  try {
    run.result = process::run(argv, runOptions);
  } catch (const std::exception& e) {
    run.startError = e.what();
  }
  return run;
}

std::optional<std::string> propertyOf(const Properties& properties, std::string_view property) {
  for (const auto& [key, value] : properties) {
    if (key == property) return value;
  }
  return std::nullopt;
}

}  // namespace flink::discovery
