// The GPU driver: runs a discovery script and turns its answer into GPUInfo objects.
//
// Mirrors org.apache.flink.externalresource.gpu.GPUDriver, with the differences that make it
// safe to embed: the script runs without a shell, its output is drained while it runs, a time-out
// ends every process it started, and only device identifiers are accepted as GPUs.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "flink/configuration/Configuration.h"
#include "flink/externalresource/ExternalResourceDriver.h"

namespace flink::externalresource::gpu {

class GPUDriver final : public ExternalResourceDriver {
 public:
  /// Runs `<script> <gpuAmount> <args…>` and returns the GPUs it printed, in its order, unique by
  /// index; fewer than asked are returned as printed (with a warning in the log). The output may
  /// also be Spark's JSON form, `{"name": "gpu", "addresses": ["0", "1"]}`. With `nvml.enabled`
  /// (the default) each GPUInfo also carries what NVML knows of the device it names.
  ///
  /// Safe to call from several threads at once; each call runs the script anew.
  ///
  /// @param gpuAmount how many GPUs to ask for; must be > 0.
  /// @throws std::invalid_argument if gpuAmount <= 0 (nothing is run).
  /// @throws TimeoutException if the script runs past the time-out (`discovery-script.timeout`,
  ///         10 s by default); the script and every process of its process group are killed.
  /// @throws FlinkException if the script cannot be started, exits non-zero, is killed by a
  ///         signal, or prints anything but device identifiers on its first line.
  ExternalResourceInfoSet retrieveResourceInfo(std::int64_t gpuAmount) override;

  /// Kills (SIGKILL) every discovery script that any GPUDriver of this process is running now,
  /// with its whole process group. Async-signal-safe: call it from a SIGTERM/SIGINT handler so
  /// that the worker's death does not leave scripts running (they are in process groups of their
  /// own, so a terminal's signals do not reach them). The interrupted calls then fail with
  /// FlinkException. Not in Flink, whose scripts outlive a killed TaskManager.
  static void killRunningDiscoveries() noexcept;

  /// The absolute path of the discovery script.
  const std::filesystem::path& discoveryScript() const noexcept { return script_; }
  /// The arguments passed after the amount.
  const std::vector<std::string>& discoveryArguments() const noexcept { return arguments_; }
  std::chrono::milliseconds timeout() const noexcept { return timeout_; }
  /// Whether GPUInfo properties are read through NVML (`nvml.enabled`).
  bool nvmlEnabled() const noexcept { return nvmlEnabled_; }

 private:
  friend class GPUDriverFactory;

  /// Validates the configuration, in Flink's order: blank path → IllegalConfigurationException;
  /// relative path resolved against $FLINK_HOME, else the working directory (for the default path
  /// only, then /opt/flink/plugins/external-resource-gpu/nvidia-gpu-discovery.sh); missing file →
  /// FileNotFoundException (with every absolute path looked at); not an executable regular file →
  /// FlinkException. A time-out that is not positive → IllegalConfigurationException.
  explicit GPUDriver(const Configuration& config);

  std::filesystem::path script_;
  std::vector<std::string> arguments_;
  std::chrono::milliseconds timeout_;
  bool nvmlEnabled_ = true;
};

}  // namespace flink::externalresource::gpu
