// The GPU driver: runs a discovery script and turns its answer into GPUInfo objects.
//
// Mirrors org.apache.flink.externalresource.gpu.GPUDriver, with the differences that make it
// safe to embed: the script runs without a shell, its output is drained while it runs, a time-out
// ends every process it started, and only device identifiers are accepted as GPUs.
//
// In-process default discovery (not in Flink): when the script is this project's own
// nvidia-gpu-discovery.sh, known by its content (and the program beside it), and
// `discovery-script.in-process` is true (the default), the driver does the script's work in the
// calling process: the same arguments are read, the same GPUs chosen, the same records written
// (owned by this process, the script's parent) and the same causes given for failures; no
// process is started but nvidia-smi, where NVML cannot be used. It runs on a thread of its own
// (`flink-gpu-run`), which waits a second for the process's next in-process discovery before it
// ends; a child of fork() never uses its parent's. Each GPU recorded in
// coordination mode is also leased (an flock the kernel drops when this process dies, see
// host/coordination/Leases.h) until the driver is destroyed, which gives the GPUs back. A Flink
// TaskManager keeps its drivers for its whole life, so its GPUs stay taken exactly as long as
// with the script. With `--share` among the arguments, each GPU handed out is a share of a GPU the
// operator declared shared: recorded, leased and given back as a whole GPU is, and its GPUInfo
// carries the share's properties (GPUInfo::PROPERTY_KEY_SHARE_INDEX and those after it), which a
// script run as a process cannot tell.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "flink/configuration/Configuration.h"
#include "flink/externalresource/ExternalResourceDriver.h"

namespace flink::externalresource::gpu {

class InProcessDiscovery;

class GPUDriver final : public ExternalResourceDriver {
 public:
  /// Gives back what in-process discoveries recorded for this driver (their records are removed
  /// from the coordination file, their leases dropped); a failure to do so is logged. Nothing
  /// for a script: its records follow Flink's rules (freed once their owner has ended). Waits up
  /// to a second for in-process runs given up on at their time-out, which give back what they
  /// record. As for any object, every call of retrieveResourceInfo must have returned first:
  /// destroying the driver under a running call is undefined behaviour.
  ~GPUDriver() override;
  GPUDriver(const GPUDriver&) = delete;
  GPUDriver& operator=(const GPUDriver&) = delete;

  /// Runs `<script> <gpuAmount> <args…>` and returns the GPUs it printed, in its order, unique by
  /// index; fewer than asked are returned as printed (with a warning in the log). The output may
  /// also be Spark's JSON form, `{"name": "gpu", "addresses": ["0", "1"]}`. With `nvml.enabled`
  /// (the default) each GPUInfo also carries what NVML knows of the device it names.
  ///
  /// Safe to call from several threads at once; each call runs the script anew. The driver must
  /// outlive every call.
  ///
  /// @param gpuAmount how many GPUs to ask for; must be > 0.
  /// @throws std::invalid_argument if gpuAmount <= 0 (nothing is run).
  /// In-process (see above) the answer is the one the script would print, and so are the
  /// failures: the FlinkException's message holds the cause the script would print first
  /// ("not enough free GPUs: 2 requested, 1 free"), then its details and notes.
  ///
  /// @throws TimeoutException if the script runs past the time-out (`discovery-script.timeout`,
  ///         10 s by default); the script and every process of its process group are killed.
  ///         In-process, the enumeration (NVML, nvidia-smi) and the wait for the coordination
  ///         file's lock are bounded by the same time-out; GPUs a discovery given up on records
  ///         after it are given back.
  /// @throws FlinkException if the script cannot be started, exits non-zero, is killed by a
  ///         signal, or prints anything but device identifiers on its first line; in-process,
  ///         when the script would exit non-zero.
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
  /// `vendor`: "nvidia", "amd" or "intel".
  const std::string& vendor() const noexcept { return vendor_; }
  /// Whether discoveries run in-process: the script is the default discovery and
  /// `discovery-script.in-process` is true.
  bool runsInProcess() const noexcept { return inProcessDiscovery_ != nullptr; }

 private:
  friend class GPUDriverFactory;

  /// Validates the configuration, in Flink's order: blank path → IllegalConfigurationException;
  /// relative path resolved against $FLINK_HOME, else the working directory (for the default path
  /// only, then /opt/flink/plugins/external-resource-gpu/nvidia-gpu-discovery.sh); missing file →
  /// FileNotFoundException (with every absolute path looked at); not an executable regular file →
  /// FlinkException. A time-out that is not positive → IllegalConfigurationException.
  explicit GPUDriver(const Configuration& config);

  using DescribedGpus =
      std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>>;

  /// The GPUInfo of each (identifier, properties), in order (GPUInfo's constructor is the
  /// driver's).
  static ExternalResourceInfoSet toInfoSet(DescribedGpus gpus);

  /// `gpus` with the `vendor` property first on each, where a default discovery answered.
  DescribedGpus withVendor(DescribedGpus gpus) const;

  /// retrieveResourceInfo's in-process way (see the top of this file).
  ExternalResourceInfoSet retrieveInProcess(std::int64_t gpuAmount);

  std::filesystem::path script_;
  /// `vendor`: "nvidia", "amd" or "intel".
  std::string vendor_ = "nvidia";
  /// The script is the vendor's default one: its file is named `<vendor>-gpu-discovery.sh`, or
  /// `<vendor>-gpu-discovery` (the program the script execs).
  bool defaultScript_ = false;
  std::vector<std::string> arguments_;
  std::chrono::milliseconds timeout_;
  bool nvmlEnabled_ = true;
  /// The in-process default discovery, with what its runs recorded and leased; null when the
  /// script is run.
  std::unique_ptr<InProcessDiscovery> inProcessDiscovery_;
};

}  // namespace flink::externalresource::gpu
