// `flink-gpu release`: an operator's way to free GPUs by hand — every record of one owner
// process, or the record of one GPU — when the coordination file holds GPUs that should not be
// held.
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

namespace flink::cli {

struct ReleaseOptions {
  std::optional<long long> owner;
  std::optional<std::string> gpu;
  bool junk = false;
  std::string coordinationFile;
};

/// Adds the `release` subcommand to `app`; its parsed values land in `options`.
CLI::App* addReleaseCommand(CLI::App& app, ReleaseOptions& options);

/// Removes the matching records; prints one line per record released, or that none matched.
/// @returns an ExitCode (success whether or not anything matched).
int runRelease(const ReleaseOptions& options);

}  // namespace flink::cli
