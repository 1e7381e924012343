// `flink-gpu status`: what the coordination file says — which GPU each process holds, and whether
// that process is still running (a record of a process that is gone is taken back by the next
// allocation).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace flink::cli {

struct StatusOptions {
  std::string coordinationFile;
  std::string format = "text";
};

/// Adds the `status` subcommand to `app`; its parsed values land in `options`.
CLI::App* addStatusCommand(CLI::App& app, StatusOptions& options);

/// Prints the records on stdout (table or JSON), junk lines as warnings. Each record also gets the
/// uuid, name, pci.bus_id and memory.total NVML knows of its GPU (text: a DEVICE column; JSON:
/// those keys), when NVML can be used; nvidia-smi is never run. @returns an ExitCode.
int runStatus(const StatusOptions& options);

}  // namespace flink::cli
