// `flink-gpu which`: the GPUs a process may use, and whose they are. A worker's GPUs are recorded
// for the worker; the process that uses them is often its child (a sidecar, a Python worker, the
// command `exec` runs). `which` walks from a process up its parent chain to the nearest process
// that owns records of the coordination file or holds its leases (host/coordination/TreeOwner.h)
// and prints that owner and its GPUs: as text, as JSON, or as `export` lines a shell evaluates
// (`eval "$(flink-gpu which --format env)"`) to give a child exactly those GPUs by UUID.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "commands/CoordinationFileOption.h"
#include "commands/OutputFormat.h"

namespace flink::cli {

struct WhichOptions {
  /// --pid: the process asked about; the parent of flink-gpu when not given (the script or
  /// worker that runs it asks for itself).
  std::optional<std::int64_t> pid;
  OutputFormat format = OutputFormat::kText;
  CoordinationFileOptions coordination;
};

/// Prints the owner and its GPUs on stdout. @returns kSuccess; kDiscoveryFailed when no process of
/// the chain owns anything (one line says so), the process does not run, or the file cannot be
/// read; kUsageError for a --pid that is not a process id.
int runWhich(const WhichOptions& options);

}  // namespace flink::cli
