#include "process/ProgramSearch.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <system_error>

#include "util/Strings.h"

namespace flink::process {

namespace fs = std::filesystem;

namespace {

/// What execvp would run: a regular file (after symlinks) we may execute.
bool isExecutableFile(const fs::path& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
         ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

ProgramLocation findProgram(std::string_view name, std::string_view searchPath,
                            const std::vector<fs::path>& folders) {
  std::vector<fs::path> candidates;
  for (std::string_view entry : strings::split(searchPath, ':')) {
    // An empty PATH entry means the working directory; process::run needs absolute paths.
    std::error_code error;
    fs::path folder = fs::absolute(entry.empty() ? fs::path(".") : fs::path(entry), error);
    if (error) continue;
    candidates.push_back(folder.lexically_normal());
  }
  for (const fs::path& folder : folders) candidates.push_back(folder.lexically_normal());

  ProgramLocation location;
  for (fs::path& folder : candidates) {
    std::string key = folder.string();
    while (key.size() > 1 && key.back() == '/') key.pop_back();
    folder = key;
    if (std::find(location.searched.begin(), location.searched.end(), folder) !=
        location.searched.end()) {
      continue;
    }
    location.searched.push_back(folder);
    if (isExecutableFile(folder / name)) {
      location.path = folder / name;
      return location;
    }
  }
  return location;
}

}  // namespace flink::process
