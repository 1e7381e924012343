// `flink-gpu release`: removes records from the coordination file (coordination::release, under
// its lock), selected by owner pid or by GPU, whether or not their owner is still running — that
// is for the operator to judge; a warning says when it is.
#include "commands/ReleaseCommand.h"

#include <sys/types.h>

#include <functional>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "Console.h"
#include "ExitCode.h"
#include "commands/CoordinationFileOption.h"
#include "coordination/Coordination.h"
#include "discovery/GpuEnumerator.h"
#include "discovery/NvidiaSmi.h"  // DiscoveryError
#include "util/Strings.h"

namespace flink::cli {

CLI::App* addReleaseCommand(CLI::App& app, ReleaseOptions& options) {
  CLI::App* command = app.add_subcommand(
      "release",
      "Free GPUs by hand: remove the records of one owner process (--owner) or of "
      "one GPU (--gpu) from the coordination file, or the lines that are not records (--junk).");
  command->add_option("--owner", options.owner, "Release every GPU held by this process id");
  command->add_option("--gpu", options.gpu, "Release this GPU (an index, or a GPU-/MIG- UUID)");
  command->add_flag("--junk", options.junk,
                    "Remove the lines that are not records (also from a file grown past its "
                    "size limit)");
  addCoordinationFileOption(*command, options.coordinationFile);
  return command;
}

int runJunkRelease(const ReleaseOptions& options) {
  std::vector<coordination::JunkLine> removed;
  try {
    removed = coordination::releaseJunk(options.coordinationFile);
  } catch (const coordination::CoordinationError& e) {
    printError(e.what());
    return kDiscoveryFailed;
  }
  if (removed.empty()) {
    std::cout << "no line to remove: every line is a record (coordination file "
              << options.coordinationFile << ")\n";
    return kSuccess;
  }
  constexpr std::size_t kShown = 20;
  for (std::size_t i = 0; i < removed.size() && i < kShown; ++i) {
    std::cout << "removed line " << removed[i].lineNumber << ": '"
              << strings::quoteForMessage(removed[i].text) << "'\n";
  }
  if (removed.size() > kShown) std::cout << "... and " << removed.size() - kShown << " more\n";
  std::cout << "removed " << removed.size() << " line(s) that were not records\n";
  return kSuccess;
}

int runRelease(const ReleaseOptions& options) {
  const int chosen = (options.owner ? 1 : 0) + (options.gpu ? 1 : 0) + (options.junk ? 1 : 0);
  if (chosen != 1) {
    printError(chosen > 1 ? "give one of --owner, --gpu and --junk, not several"
                          : "nothing to release: give --owner PID, --gpu INDEX or --junk");
    return kUsageError;
  }
  if (options.junk) return runJunkRelease(options);

  std::function<bool(const coordination::Record&)> matches;
  std::string what;
  if (options.owner) {
    if (*options.owner <= 0 || *options.owner > std::numeric_limits<pid_t>::max()) {
      printError("invalid --owner " + std::to_string(*options.owner) +
                 ": expected a process id (a positive integer)");
      return kUsageError;
    }
    const auto pid = static_cast<pid_t>(*options.owner);
    matches = [pid](const coordination::Record& record) { return record.owner.pid == pid; };
    what = "no GPU is held by process " + std::to_string(pid);
  } else {
    std::vector<std::string> gpus;
    try {
      gpus = discovery::parseGpuList(*options.gpu);
    } catch (const discovery::DiscoveryError&) {
      gpus.clear();  // reported below, with this option's name
    }
    if (gpus.size() != 1) {
      printError("invalid --gpu '" + strings::quoteForMessage(*options.gpu) +
                 "': expected one GPU, an index (e.g. 0) or a GPU-/MIG- UUID");
      return kUsageError;
    }
    const std::string gpu = gpus.front();
    matches = [gpu](const coordination::Record& record) { return record.gpu == gpu; };
    what = "GPU " + gpu + " is not held";
  }

  std::vector<coordination::Record> released;
  try {
    released = coordination::release(options.coordinationFile, matches);
  } catch (const coordination::CoordinationError& e) {
    printError(e.what());
    return kDiscoveryFailed;
  }

  if (released.empty()) {
    std::cout << what << " (coordination file " << options.coordinationFile << ")\n";
    return kSuccess;
  }
  for (const coordination::Record& record : released) {
    std::cout << "released GPU " << record.gpu << " (owner pid " << record.owner.pid << ")\n";
  }
  for (const coordination::Record& record : released) {
    if (coordination::isRunning(record.owner)) {
      printWarning("process " + std::to_string(record.owner.pid) +
                   " is still running and may still be using GPU " + record.gpu);
    }
  }
  return kSuccess;
}

}  // namespace flink::cli
