// `flink-gpu topology`: one NVML session with the topology read (host/enumeration/NvmlTopology.h),
// printed as nvidia-smi's matrix or as JSON. NVML only: nvidia-smi's own matrix is not parsed (its
// format changes between drivers), so a host without NVML gets an error naming why.
#include "commands/TopologyCommand.h"

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "Console.h"
#include "ExitCode.h"
#include "flink/externalresource/gpu/GpuProperties.h"
#include "host/enumeration/GpuEnumerator.h"
#include "host/enumeration/NvmlEnumerator.h"
#include "host/placement/Placement.h"
#include "host/placement/Topology.h"
#include "util/Notice.h"

namespace flink::cli {
namespace {

using placement::Topology;

std::string padded(const std::string& text, std::size_t width) {
  return text.size() >= width ? text + ' ' : text + std::string(width - text.size(), ' ');
}

std::string cpusCell(const placement::GpuTopology& gpu) {
  return gpu.cpus ? placement::formatCpuList(*gpu.cpus) : "N/A";
}

std::string numaCell(const placement::GpuTopology& gpu) {
  return gpu.numaNode ? std::to_string(*gpu.numaNode) : "N/A";
}

void printText(const Topology& topology) {
  const std::size_t n = topology.size();
  std::vector<std::string> names;
  std::size_t width = 6;
  for (const placement::GpuTopology& gpu : topology.gpus()) {
    names.push_back("GPU" + gpu.identifier);
    width = std::max(width, names.back().size() + 2);
  }
  std::size_t cpuWidth = std::string("CPU Affinity").size() + 2;
  for (const placement::GpuTopology& gpu : topology.gpus()) {
    cpuWidth = std::max(cpuWidth, cpusCell(gpu).size() + 2);
  }
  std::string text = padded("", width);
  for (const std::string& name : names) text += padded(name, width);
  text += padded("CPU Affinity", cpuWidth) + "NUMA Affinity\n";
  for (std::size_t i = 0; i < n; ++i) {
    text += padded(names[i], width);
    for (std::size_t j = 0; j < n; ++j) {
      text +=
          padded(i == j ? std::string("X") : placement::relationName(topology.link(i, j)), width);
    }
    text += padded(cpusCell(topology.gpus()[i]), cpuWidth) + numaCell(topology.gpus()[i]) + '\n';
  }
  text +=
      "\nLegend:\n"
      "  X    = the GPU itself\n"
      "  NV#  = # NVLinks between the two (on NVSwitch hosts: each GPU's links into the fabric)\n"
      "  PIX  = PCIe through at most one PCIe switch\n"
      "  PXB  = PCIe through several PCIe switches, no host bridge\n"
      "  PHB  = PCIe through a PCIe host bridge (the CPU)\n"
      "  NODE = PCIe and the links between host bridges within one NUMA node\n"
      "  SYS  = PCIe and the interconnect between NUMA nodes (QPI/UPI, Infinity Fabric)\n"
      "  N/A  = unknown: NVML did not tell (the query failed or is not supported)\n";
  if (topology.nvswitch) text += "\nNVSwitch host: every pair of GPUs shares the NVLink fabric.\n";
  std::cout << text;
}

void printJson(const Topology& topology, const std::vector<discovery::GpuDevice>& devices) {
  // Members in the order they are set, as every other JSON of flink-gpu.
  using json = nlohmann::ordered_json;
  json gpus = json::array();
  const externalresource::gpu::DeviceFinder finder(devices);
  for (const placement::GpuTopology& gpu : topology.gpus()) {
    json entry = {{"index", gpu.identifier}};
    const discovery::GpuDevice* device = finder.find(gpu.identifier);
    entry["uuid"] = device && device->uuid ? json(*device->uuid) : json(nullptr);
    entry["pci.bus_id"] = device && device->pciBusId ? json(*device->pciBusId) : json(nullptr);
    entry["numa_node"] = gpu.numaNode ? json(*gpu.numaNode) : json(nullptr);
    entry["cpu_affinity"] = gpu.cpus ? json(placement::formatCpuList(*gpu.cpus)) : json(nullptr);
    // A count NVML did not tell is null, never 0 (as nvlinks below).
    entry["nvswitch_links"] = gpu.switchLinks ? json(*gpu.switchLinks) : json(nullptr);
    gpus.push_back(std::move(entry));
  }
  json pairs = json::array();
  for (std::size_t i = 0; i < topology.size(); ++i) {
    for (std::size_t j = i + 1; j < topology.size(); ++j) {
      const placement::PairLink& link = topology.link(i, j);
      pairs.push_back({
          {"gpus", {topology.gpus()[i].identifier, topology.gpus()[j].identifier}},
          {"relation", placement::relationName(link)},
          {"nvlinks", link.nvlinkKnown ? json(link.nvlinks) : json(nullptr)},
          {"pcie", link.pcie ? json(std::string(placement::jsonName(*link.pcie))) : json(nullptr)},
          {"score", placement::pairScore(link)},
      });
    }
  }
  const json document = {{"format", kJsonFormat},
                         {"source", "NVML"},
                         {"nvswitch", topology.nvswitch},
                         {"gpus", std::move(gpus)},
                         {"pairs", std::move(pairs)}};
  std::cout << document.dump(-1, ' ', false, json::error_handler_t::replace) << '\n';
}

}  // namespace

int runTopology(const TopologyOptions& options) {
  discovery::Enumeration found;
  try {
    found = discovery::NvmlEnumerator(std::nullopt, /*withTopology=*/true).enumerate();
  } catch (const discovery::DiscoveryError& e) {
    std::string message = std::string("cannot read the GPU topology: ") + e.what();
    for (const std::string& line : e.details()) message += '\n' + line;
    printError(message);
    return kDiscoveryFailed;
  }
  if (verbosity() >= Verbosity::kVerbose) {
    for (const Notice& notice : found.notices) std::cerr << "flink-gpu: " << notice.line() << '\n';
  }
  const Topology topology = found.topology ? *found.topology : Topology();
  if (options.format == OutputFormat::kJson) {
    printJson(topology, found.devices);
  } else {
    printText(topology);
  }
  return kSuccess;
}

}  // namespace flink::cli
