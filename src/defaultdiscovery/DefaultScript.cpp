#include "defaultdiscovery/DefaultScript.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <system_error>

#include "process/FileDescriptor.h"

namespace flink::defaultdiscovery {
namespace {

namespace fs = std::filesystem;

/// Whether `path` is a regular file this process may execute.
bool isExecutableFile(const fs::path& path) noexcept {
  struct stat status {};
  return ::stat(path.c_str(), &status) == 0 && S_ISREG(status.st_mode) &&
         ::access(path.c_str(), X_OK) == 0;
}

/// Whether the file at `path` holds exactly `expected`.
bool holdsExactly(const fs::path& path, std::string_view expected) noexcept {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return false;
  const process::FileDescriptor file(fd);
  struct stat status {};
  if (::fstat(file.get(), &status) != 0 || !S_ISREG(status.st_mode) ||
      static_cast<std::uint64_t>(status.st_size) != expected.size()) {
    return false;
  }
  // One byte more than expected: a file that grew since fstat is not ours either.
  std::string content(expected.size() + 1, '\0');
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::read(file.get(), content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  return done == expected.size() && std::string_view(content.data(), done) == expected;
}

}  // namespace

bool isDefaultDiscoveryScript(const fs::path& script) noexcept {
  try {
    if (!holdsExactly(script, defaultScriptText())) return false;
    // Where the script looks for its program: beside $0, else beside the file $0 links to.
    if (isExecutableFile(script.parent_path() / kDefaultProgramName)) return true;
    std::error_code error;
    const fs::path real = fs::canonical(script, error);
    return !error && isExecutableFile(real.parent_path() / kDefaultProgramName);
  } catch (...) {  // std::bad_alloc from a path or the buffer
    return false;
  }
}

}  // namespace flink::defaultdiscovery
