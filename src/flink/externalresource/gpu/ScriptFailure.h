// How a discovery script that ran as a program failed, as values: nested (std::throw_with_nested)
// in the FlinkException that GPUDriver::retrieveResourceInfo throws when the script exits
// non-zero or is killed by a signal. That exception's message is the driver's, as its tests and
// logs know it; a caller that words its own (flink-gpu prints one line: how it ended, then what it
// printed on each stream) reads this instead of taking the message apart.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <utility>

#include "process/Subprocess.h"

namespace flink::externalresource::gpu {

class ScriptFailure : public std::runtime_error {
 public:
  ScriptFailure(std::filesystem::path script, process::ProcessResult result)
      : std::runtime_error("the discovery script " + script.string() + " " +
                           result.outcome.toString()),
        script_(std::move(script)),
        result_(std::move(result)) {}

  /// The script, absolute.
  const std::filesystem::path& script() const noexcept { return script_; }
  /// Exited with a code other than 0, or killed by a signal.
  const process::ProcessOutcome& outcome() const noexcept { return result_.outcome; }
  /// What it printed, as captured (bounded: the rest counted in discardedBytes).
  const process::CapturedOutput& stdoutOutput() const noexcept { return result_.stdoutOutput; }
  const process::CapturedOutput& stderrOutput() const noexcept { return result_.stderrOutput; }

 private:
  std::filesystem::path script_;
  process::ProcessResult result_;
};

}  // namespace flink::externalresource::gpu
