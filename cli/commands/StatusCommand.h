// `flink-gpu status`: what the coordination file says — which GPU each process holds, and whether
// that process is still running (a record of a process that is gone is taken back by the next
// allocation).
#pragma once

#include <string>

#include "commands/CoordinationFileOption.h"
#include "commands/OutputFormat.h"

namespace flink::cli {

struct StatusOptions {
  CoordinationFileOptions coordination;
  OutputFormat format = OutputFormat::kText;
};

/// Prints the records on stdout (table or JSON), junk lines as warnings. Each record also gets the
/// uuid, name, pci.bus_id and memory.total NVML knows of its GPU (text: a DEVICE column; JSON:
/// those keys), when NVML can be used; nvidia-smi is never run. Shares and the sharing
/// declarations beside the file show too (docs/command-line.md); declarations that cannot be
/// read are a warning, and the rest is shown as without them. @returns an ExitCode.
int runStatus(const StatusOptions& options);

}  // namespace flink::cli
