// How the host's GPUs are connected, read through NVML: for each pair of whole GPUs their
// NVLinks and their closest common PCIe ancestor, for each GPU its NUMA node and CPU affinity.
//
// The NVML calls, per GPU: nvmlDeviceGetNvLinkState for link 0, 1, … until NVML answers that
// there is no such link (NVML_ERROR_INVALID_ARGUMENT; NVML_ERROR_NOT_SUPPORTED on link 0: no
// NVLink), and for each active one nvmlDeviceGetNvLinkRemoteDeviceType (a switch, on NVSwitch
// hosts, or a GPU) and nvmlDeviceGetNvLinkRemotePciInfo_v2, matched to a GPU by PCI domain, bus
// and device;
// nvmlDeviceGetCpuAffinityWithinScope (else nvmlDeviceGetCpuAffinity); nvmlDeviceGetNumaNodeId
// (else the lowest node of nvmlDeviceGetMemoryAffinity); nvmlDeviceGetGpuFabricInfoV, whether
// its NVLink fabric's bandwidth is degraded (GpuTopology::degradedBandwidth). Per pair:
// nvmlDeviceGetTopologyCommonAncestor.
//
// Nothing here fails: a call that fails, or a function the library lacks, leaves its relation
// unknown. A GPU that answers NVML_ERROR_GPU_IS_LOST to any of these queries (or to its PCI info,
// asked first) is lost: placement::GpuTopology::lost holds NVML's failure text, it is asked
// nothing more (a lost GPU's queries can take seconds: NVIDIA/k8s-device-plugin#2038), and its
// relations are left unknown. A pair's common ancestor answering GPU_IS_LOST does not say which
// GPU it means: each of the two is asked its PCI info again, and the one that answers so is
// lost.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "host/enumeration/GpuEnumerator.h"
#include "host/nvml/Nvml.h"
#include "host/placement/Topology.h"

namespace flink::discovery {

/// The topology of `gpus` (whole GPUs, each with its NVML handle), in that order; identifiers
/// from `identifiers` (same length).
placement::Topology readTopology(const std::vector<nvml::Device>& gpus,
                                 const std::vector<std::string>& identifiers);

/// Fills each device's numaNode and cpus in `enumeration` (a MIG instance gets its GPU's), and,
/// when `withTopology`, enumeration.topology for its whole GPUs. `gpus`: the whole GPUs listed,
/// by identifier (the decimal index), with their handles, in the enumeration's order.
void addTopology(const std::vector<std::pair<std::string, nvml::Device>>& gpus,
                 Enumeration& enumeration, bool withTopology);

/// The topology of the whole GPUs `indices` (NVML indices, as the enumeration names them), read
/// in an NVML session of its own, for callers that need it only once they know they have a
/// choice to make (the default discovery: a placement among more free GPUs than asked for). Held
/// around an outer session (nvml::holdSession), NVML is not initialised again. An index NVML
/// gives no handle for is left out; nullopt when NVML cannot be used at all.
std::optional<placement::Topology> readNvmlTopology(const std::vector<std::string>& indices);

}  // namespace flink::discovery
