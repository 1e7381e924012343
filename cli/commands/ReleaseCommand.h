// `flink-gpu release`: an operator's way to free GPUs by hand — every record of one owner
// process, or the record of one GPU — when the coordination file holds GPUs that should not be
// held. Records of an owner known to run are refused without --force: removing them would hand a
// running worker's GPU to the next one.
#pragma once

#include <optional>
#include <string>

namespace flink::cli {

struct ReleaseOptions {
  std::optional<long long> owner;
  std::optional<std::string> gpu;
  bool junk = false;
  /// Remove records whose owner is known to run, too.
  bool force = false;
  std::string coordinationFile;
};

/// Removes the matching records; prints one line per record released, or that none matched.
/// @returns an ExitCode: success whether or not anything matched; kDiscoveryFailed when a record
///          of an owner known to run was refused (then nothing was removed).
int runRelease(const ReleaseOptions& options);

}  // namespace flink::cli
