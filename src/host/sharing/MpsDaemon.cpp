// Whether an MPS control daemon is there. See MpsDaemon.h.
#include "host/sharing/MpsDaemon.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "util/FileOwnership.h"
#include "util/Strings.h"

namespace flink::sharing {

std::optional<std::string> missingMpsDaemon(const std::string& directory) {
  const std::string control = (directory.ends_with('/') ? directory : directory + "/") + "control";
  const std::string start =
      "start it with CUDA_MPS_PIPE_DIRECTORY=" + strings::shellWord(directory) +
      " nvidia-cuda-mps-control -d";
  struct stat status {};
  if (::lstat(control.c_str(), &status) != 0) {
    const int error = errno;
    if (error == ENOENT || error == ENOTDIR) {
      return "no MPS control daemon runs for " +
             strings::quoteForMessage(directory, std::string::npos) + " (" +
             strings::quoteForMessage(control, std::string::npos) + " does not exist): " + start;
    }
    return "cannot look for the MPS control daemon of " +
           strings::quoteForMessage(directory, std::string::npos) + ": " +
           strings::quoteForMessage(control, std::string::npos) + ": " + std::strerror(error);
  }
  if (S_ISSOCK(status.st_mode) || S_ISFIFO(status.st_mode)) return std::nullopt;
  return "no MPS control daemon runs for " +
         strings::quoteForMessage(directory, std::string::npos) + " (" +
         strings::quoteForMessage(control, std::string::npos) + " is " +
         files::kindOf(status.st_mode) + ", not the daemon's socket): " + start;
}

}  // namespace flink::sharing
