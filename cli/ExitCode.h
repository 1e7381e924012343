// flink-gpu's exit codes, one meaning each (documented in the README).
#pragma once

namespace flink::cli {

enum ExitCode : int {
  kSuccess = 0,
  /// Discovery failed: the script failed, timed out, or printed something that is not GPUs.
  kDiscoveryFailed = 1,
  /// Usage or configuration error: a bad option, a blank/missing/non-executable script,
  /// an amount <= 0.
  kUsageError = 2,
};

}  // namespace flink::cli
