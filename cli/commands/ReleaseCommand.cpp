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
#include "discovery/DiscoveryArguments.h"
#include "discovery/NvidiaSmi.h"  // DiscoveryError
#include "util/Strings.h"

namespace flink::cli {

CLI::App* addReleaseCommand(CLI::App& app, ReleaseOptions& options) {
  CLI::App* command = app.add_subcommand(
      "release",
      "Free GPUs by hand: remove the records of one owner process (--owner) or of "
      "one GPU (--gpu) from the coordination file.");
  command->add_option("--owner", options.owner, "Release every GPU held by this process id");
  command->add_option("--gpu", options.gpu, "Release this GPU (an index, or a GPU-/MIG- UUID)");
  addCoordinationFileOption(*command, options.coordinationFile);
  return command;
}

int runRelease(const ReleaseOptions& options) {
  if (options.owner.has_value() == options.gpu.has_value()) {
    printError(options.owner ? "give either --owner or --gpu, not both"
                             : "nothing to release: give --owner PID or --gpu INDEX");
    return kUsageError;
  }

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
