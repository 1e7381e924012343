// `flink-gpu release`: an operator's way to free GPUs by hand — every record of one owner
// process, or the record of one GPU — when the coordination file holds GPUs that should not be
// held. Records of an owner known to run are refused without --force: removing them would hand a
// running worker's GPU to the next one.
#pragma once

#include <optional>
#include <string>

#include "commands/CoordinationFileOption.h"
#include "commands/OutputFormat.h"

namespace flink::cli {

struct ReleaseOptions {
  std::optional<long long> owner;
  std::optional<std::string> gpu;
  bool junk = false;
  /// --gone: every record whose owner is known to be gone.
  bool gone = false;
  /// --stale: every record of a GPU this host does not have (discovery::UnitIndex::presence),
  /// but those of an owner known to run.
  bool stale = false;
  /// Remove records whose owner is known to run, too.
  bool force = false;
  /// text: a line per record; json: what changed (ChangeDocument.h).
  OutputFormat format = OutputFormat::kText;
  CoordinationFileOptions coordination;
};

/// Removes the matching records; prints one line per record released, or that none matched.
/// @returns an ExitCode: kDiscoveryFailed when --owner names a process with no record (as kill(1)
///          fails for no such process: a mistyped pid must not pass for done), and when a record
///          of an owner known to run was refused (then nothing was removed); else success, also
///          for a --gpu that no record holds (the GPU is free, which is what was asked) and for
///          --gone and --junk with nothing to remove. --stale: kDiscoveryFailed when the host's
///          GPUs cannot tell which records are stale (nothing removed), or when a stale record
///          of an owner known to run was kept (the others are removed).
int runRelease(const ReleaseOptions& options);

}  // namespace flink::cli
