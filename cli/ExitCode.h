// flink-gpu's exit codes, one meaning each (documented in docs/command-line.md).
#pragma once

namespace flink::cli {

enum ExitCode : int {
  kSuccess = 0,
  /// The GPUs could not be had: discovery failed (the script failed, timed out, or printed
  /// something that is not GPUs), enumeration or coordination failed, or not enough GPUs are
  /// free.
  kDiscoveryFailed = 1,
  /// Usage or configuration error: a bad option, a blank/missing/non-executable script,
  /// an amount <= 0.
  kUsageError = 2,
  /// `exec`: the command was found but could not be executed (as a shell reports it).
  kCommandNotExecutable = 126,
  /// `exec`: the command was not found (as a shell reports it).
  kCommandNotFound = 127,
};

}  // namespace flink::cli
