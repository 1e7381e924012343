// The operator's sharing declarations: `share` (declare whole GPUs shared among several workers,
// time-sliced or behind an MPS control daemon) and `unshare` (take a declaration out). They
// write `<coordination file>.sharing` (src/host/sharing/), never the coordination file. Shares
// are handed out by `--share` of the default discovery and of `exec`
// (host/coordination/ShareAllocation.h).
#pragma once

#include <optional>
#include <string>

#include "commands/CoordinationFileOption.h"
#include "commands/OutputFormat.h"

namespace flink::cli {

struct ShareOptions {
  /// An index, a GPU-… UUID or "all".
  std::string gpu;
  /// As typed, so that a bad value is quoted in our words.
  std::optional<std::string> replicas;
  std::optional<std::string> shareMemory;
  std::optional<std::string> mps;
  /// text: a line per GPU; json: what changed (ChangeDocument.h).
  OutputFormat format = OutputFormat::kText;
  CoordinationFileOptions coordination;
};

struct UnshareOptions {
  std::string gpu;
  /// --stale: every declaration of a GPU this host does not have, instead of --gpu.
  bool stale = false;
  OutputFormat format = OutputFormat::kText;
  CoordinationFileOptions coordination;
};

/// `share --gpu ID|all (--replicas K | --share-memory MIB) [--mps DIR]`: declares each GPU named
/// shared among K workers (2 to 48), each share getting memory.total / K MiB (rounded down), or
/// among memory.total / MIB workers of MIB each; `--mps DIR` (absolute) names the MPS control
/// daemon's pipe directory. Replaces an earlier declaration of the same GPU. Prints one line per
/// GPU declared. Usage errors (a bad value, neither or both of --replicas and --share-memory, a
/// relative --mps, a --gpu that is no index, GPU- UUID or all): kUsageError. A GPU the host does
/// not have, one in MIG mode, a --share-memory giving fewer than 2 or more than 48 shares or a GPU
/// whose memory is unknown, a host whose GPUs cannot be listed, a declarations file that cannot
/// be written: kDiscoveryFailed. On any error nothing is written. `all` is every whole GPU NVML
/// (else nvidia-smi) lists, GPUs in MIG mode skipped with a note.
int runShare(const ShareOptions& options);

/// `unshare --gpu ID|all`: takes the GPU's declaration out (every declaration with `all`).
/// Works for a GPU the host no longer has; NVML, where it answers, only turns a GPU-… UUID into
/// its index. Shares already held are never revoked. With --stale instead: takes out every
/// declaration of a GPU this host does not have (discovery::UnitIndex::presence); refused
/// (kDiscoveryFailed, nothing written) where the host's GPUs cannot tell.
int runUnshare(const UnshareOptions& options);

}  // namespace flink::cli
