// `flink-gpu exec`: runs a command with GPUs of its own — allocates them in the coordination file
// for this process, sets CUDA_VISIBLE_DEVICES, and becomes the command (execvp), so that the
// command's pid is the owner of the records: the GPUs are held while it runs and free once it ends.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace flink::cli {

struct ExecOptions {
  std::int64_t amount = 0;
  std::string coordinationFile;
  /// --gpus: the host's GPUs, instead of asking NVML or nvidia-smi.
  std::optional<std::string> gpus;
  /// --mig: allocate MIG instances (their MIG-… UUIDs go into CUDA_VISIBLE_DEVICES) instead of
  /// the GPUs in MIG mode they are carved from. A usage error with --gpus.
  bool mig = false;
  /// --health skip|warn|ignore: what to do with unhealthy GPUs (health/HostHealth.h).
  std::string health = "skip";
  /// The command and its arguments.
  std::vector<std::string> command;
};

/// Adds the `exec` subcommand to `app`; its parsed values land in `options`.
CLI::App* addExecCommand(CLI::App& app, ExecOptions& options);

/// Allocates the GPUs and execs the command; returns only when that cannot be done.
/// @returns an ExitCode, or 127 (command not found) / 126 (cannot be executed) as shells do.
int runExec(const ExecOptions& options);

}  // namespace flink::cli
