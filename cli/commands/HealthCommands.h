// The operator's health commands: `drain` and `undrain` (take a GPU out of new allocations and
// put it back), `check` (a node health check for Slurm's HealthCheckProgram and NHC) and `watch`
// (NVML's Xid and ECC events, for a host's whole life). See src/host/health/.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "commands/CoordinationFileOption.h"
#include "commands/OutputFormat.h"
#include "host/health/Watch.h"

namespace flink::cli {

struct DrainOptions {
  std::string gpu;
  /// undrain --stale: every drain and verdict of a GPU this host does not have, instead of --gpu.
  bool stale = false;
  std::string reason;
  /// text: lines for a person; json: what changed (ChangeDocument.h).
  OutputFormat format = OutputFormat::kText;
  CoordinationFileOptions coordination;
};

struct CheckOptions {
  std::optional<std::int64_t> expect;
  CoordinationFileOptions coordination;
  OutputFormat format = OutputFormat::kText;
};

struct WatchCommandOptions {
  CoordinationFileOptions coordination;
  std::optional<std::string> ignoreXids;
  std::optional<std::string> criticalXids;
  health::Readmit readmit = health::Readmit::kDriver;
};

/// `drain --gpu ID [--reason TEXT]`: records the GPU drained (time, reason, uid) beside the
/// coordination file. Owners that hold it keep it. Only a GPU (or MIG instance) of this host, as
/// NVML, else nvidia-smi, lists it, by index or whole UUID; anything else, or a host whose GPUs
/// neither can list, is an error (exit 1). A GPU drained already keeps its first drain's time.
int runDrain(const DrainOptions& options);

/// `undrain --gpu ID [--reason TEXT]`: clears a drain and a verdict of watch alike, and records
/// who re-admitted the GPU, when and why. With --stale instead: removes every drain and verdict
/// of a GPU this host does not have (discovery::UnitIndex::presence), and records no
/// re-admission; refused (kDiscoveryFailed, nothing written) where the host's GPUs cannot tell.
int runUndrain(const DrainOptions& options);

/// `check [--expect N] [--format text|json]`: exit 0 when all is well, else 1 with one line per
/// problem (fewer GPUs than expected, NVML not usable, a lost, unhealthy or drained GPU, a
/// coordination file that cannot be used); notes (persistence mode off, records of dead owners)
/// do not change the exit code.
int runCheck(const CheckOptions& options);

/// `watch [--ignore-xids LIST | --critical-xids LIST] [--readmit driver|never]`: runs until
/// SIGTERM or SIGINT (exit 0).
int runWatch(const WatchCommandOptions& options);

}  // namespace flink::cli
