// `flink-gpu status`: what the coordination file says — which GPU each process holds, and whether
// that process is still running (a record of a process that is gone is taken back by the next
// allocation).
#pragma once

#include <optional>
#include <string>

#include "commands/CoordinationFileOption.h"
#include "commands/OutputFormat.h"
#include "host/health/HostView.h"

namespace flink::cli {

struct StatusOptions {
  CoordinationFileOptions coordination;
  OutputFormat format = OutputFormat::kText;
  /// --gpu: only this GPU (any of its spellings) and its records.
  std::optional<std::string> gpu;
  /// --state: only the GPUs in this state, and their records.
  std::optional<GpuState> state;
  /// --no-headers: the tables without their header line.
  bool noHeaders = false;
};

/// Prints the records on stdout (table or JSON), junk lines as warnings. Each record also gets the
/// uuid, name, pci.bus_id and memory.total NVML knows of its GPU (text: a DEVICE column; JSON:
/// those keys), when NVML can be used; nvidia-smi is never run. Shares and the sharing
/// declarations beside the file show too (docs/command-line.md); declarations that cannot be
/// read are a warning, and the rest is shown as without them. @returns an ExitCode.
int runStatus(const StatusOptions& options);

}  // namespace flink::cli
