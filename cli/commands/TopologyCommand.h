// `flink-gpu topology`: how the host's GPUs are connected, as NVML tells it — the matrix
// `nvidia-smi topo -m` prints (NV<n>, PIX, PXB, PHB, NODE, SYS, with CPU and NUMA affinity
// columns), or the same as JSON — and so what the placement rule chooses from.
#pragma once

#include <string>

#include "commands/OutputFormat.h"

namespace flink::cli {

struct TopologyOptions {
  OutputFormat format = OutputFormat::kText;
};

/// Prints the topology on stdout. @returns kSuccess, or kDiscoveryFailed when NVML cannot be used
/// or lists no GPU (the reason on stderr). A relation NVML does not tell is shown as unknown.
int runTopology(const TopologyOptions& options);

}  // namespace flink::cli
