// The environment of a command holding GPU shares, and the MPS control daemon's socket check
// (see ExecShare.h). The daemon is looked at, never talked to: opening its socket would be a
// client connecting, and a FIFO's open would block until a reader came.
#include "commands/ExecShare.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "util/Strings.h"

namespace flink::cli {
namespace {

/// What lstat found at a path, in words, for the error that refuses it.
std::string fileKind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "a file of another kind";
}

}  // namespace

EnvironmentChanges wholeGpuEnvironment() {
  EnvironmentChanges changes;
  changes.unset = {kShareMemoryVariable, kMpsPipeDirectoryVariable, kMpsThreadPercentageVariable,
                   kMpsMemoryLimitVariable};
  return changes;
}

std::optional<std::string> mpsPipeDirectoryOf(
    const std::vector<defaultdiscovery::ShareGrant>& shares) {
  for (const defaultdiscovery::ShareGrant& share : shares) {
    if (share.mpsPipeDirectory) return share.mpsPipeDirectory;
  }
  return std::nullopt;
}

EnvironmentChanges shareEnvironment(const std::vector<std::string>& gpus,
                                    const std::vector<defaultdiscovery::ShareGrant>& shares) {
  EnvironmentChanges changes;
  std::vector<std::string> memory;
  std::vector<std::string> unknown;
  for (std::size_t i = 0; i < shares.size(); ++i) {
    if (shares[i].memoryMiB) {
      memory.push_back(std::to_string(*shares[i].memoryMiB));
    } else {
      unknown.push_back(i < gpus.size() ? gpus[i] : std::to_string(i));
    }
  }
  const std::optional<std::string> directory = mpsPipeDirectoryOf(shares);
  if (unknown.empty() && !memory.empty()) {
    changes.set.emplace_back(kShareMemoryVariable, strings::join(memory, ","));
  } else {
    changes.unset.emplace_back(kShareMemoryVariable);
    changes.notes.push_back(
        "the memory of a share of GPU(s) " + strings::join(unknown, ",") +
        " is unknown (the GPU's memory was not known when it was declared shared): " +
        kShareMemoryVariable + " is not set" +
        (directory ? std::string(", and ") + kMpsMemoryLimitVariable + " does not limit it"
                   : std::string()));
  }

  if (!directory) {
    for (const char* name :
         {kMpsPipeDirectoryVariable, kMpsThreadPercentageVariable, kMpsMemoryLimitVariable}) {
      changes.unset.emplace_back(name);
    }
    return changes;
  }
  changes.set.emplace_back(kMpsPipeDirectoryVariable, *directory);
  unsigned percentage = 100;
  std::vector<std::string> limits;
  for (std::size_t ordinal = 0; ordinal < shares.size(); ++ordinal) {
    const defaultdiscovery::ShareGrant& share = shares[ordinal];
    percentage = std::min(percentage, share.activeThreadPercentage());
    if (share.memoryMiB) {
      limits.push_back(std::to_string(ordinal) + "=" + std::to_string(*share.memoryMiB) + "M");
    }
  }
  changes.set.emplace_back(kMpsThreadPercentageVariable, std::to_string(percentage));
  if (limits.empty()) {
    changes.unset.emplace_back(kMpsMemoryLimitVariable);
  } else {
    changes.set.emplace_back(kMpsMemoryLimitVariable, strings::join(limits, ","));
  }
  return changes;
}

std::optional<std::string> missingMpsDaemon(const std::string& directory) {
  const std::string control = (directory.ends_with('/') ? directory : directory + "/") + "control";
  const std::string start = "start it with CUDA_MPS_PIPE_DIRECTORY=" + shellWord(directory) +
                            " nvidia-cuda-mps-control -d";
  struct stat status {};
  if (::lstat(control.c_str(), &status) != 0) {
    const int error = errno;
    if (error == ENOENT || error == ENOTDIR) {
      return "no MPS control daemon runs for " + directory + " (" + control +
             " does not exist): " + start;
    }
    return "cannot look for the MPS control daemon of " + directory + ": " + control + ": " +
           std::strerror(error);
  }
  if (S_ISSOCK(status.st_mode) || S_ISFIFO(status.st_mode)) return std::nullopt;
  return "no MPS control daemon runs for " + directory + " (" + control + " is " +
         fileKind(status.st_mode) + ", not the daemon's socket): " + start;
}

std::string shellWord(std::string_view text) {
  const bool plain = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("_/.,:@%+=-").find(c) != std::string_view::npos;
  });
  if (plain) return std::string(text);
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

}  // namespace flink::cli
