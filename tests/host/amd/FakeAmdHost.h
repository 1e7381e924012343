// A stand-in AMD host for the tests: a sysfs tree with the KFD topology and the PCI devices'
// attributes, a /dev tree with kfd and render nodes as plain files, a folder for stand-in tools,
// and an environment of its own, all in a temporary folder. options() hands them to
// findAmdUnits.
#pragma once

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "TestSupport.h"
#include "host/enumeration/Vendor.h"

namespace flink::amd::testing {

namespace fs = std::filesystem;

/// One KFD GPU node as the test wants it written.
struct FakeGpu {
  unsigned node = 0;
  std::uint64_t locationId = 0;
  std::uint64_t renderMinor = 0;
  std::uint64_t uniqueId = 0;
  std::optional<std::uint64_t> domain = 0;
  std::uint64_t deviceId = 29711;  // 0x740f, MI210
  std::uint64_t localMemSize = 0;
  /// mem_banks/0/properties, unless memBanks is false: heap_type, size_in_bytes.
  bool memBanks = true;
  unsigned heapType = 1;
  std::uint64_t bankBytes = 68702699520ULL;
  /// Whether to create <dev>/dri/renderD<minor>.
  bool renderNode = true;
};

/// A GPU node at `locationId` with render node `renderMinor`, the rest as FakeGpu's defaults.
inline FakeGpu gpuAt(unsigned node, std::uint64_t locationId, std::uint64_t renderMinor) {
  FakeGpu gpu;
  gpu.node = node;
  gpu.locationId = locationId;
  gpu.renderMinor = renderMinor;
  return gpu;
}

class FakeAmdHost {
 public:
  FakeAmdHost() : dir_("flink-gpu-amd") {
    fs::create_directories(nodes());
    fs::create_directories(dev() / "dri");
    fs::create_directories(bin());
    touch(dev() / "kfd");
  }

  fs::path sysfs() const { return dir_.path() / "sys"; }
  fs::path dev() const { return dir_.path() / "dev"; }
  fs::path bin() const { return dir_.path() / "bin"; }
  fs::path nodes() const { return sysfs() / "class/kfd/kfd/topology/nodes"; }
  fs::path render(std::uint64_t minor) const {
    return dev() / "dri" / ("renderD" + std::to_string(minor));
  }
  fs::path root() const { return dir_.path(); }

  static void write(const fs::path& file, const std::string& text) {
    fs::create_directories(file.parent_path());
    std::ofstream(file) << text;
  }
  static void touch(const fs::path& file) { write(file, ""); }

  /// A CPU node, as the kernel writes one (simd_count 0, location_id 0, drm_render_minor 0).
  void cpu(unsigned node) {
    write(nodes() / std::to_string(node) / "properties",
          "cpu_cores_count 64\nsimd_count 0\nmem_banks_count 1\ncaches_count 0\n"
          "io_links_count 5\nvendor_id 0\ndevice_id 0\nlocation_id 0\ndomain 0\n"
          "drm_render_minor 0\nhive_id 0\nmax_engine_clk_ccompute 2450\n");
  }

  /// The properties text the kernel writes for `gpu` (a subset of its lines, in its order).
  static std::string propertiesOf(const FakeGpu& gpu) {
    std::string text =
        "cpu_cores_count 0\nsimd_count 416\nmem_banks_count " +
        std::string(gpu.memBanks ? "1" : "0") +
        "\ncaches_count 217\nio_links_count 4\np2p_links_count 5\nmax_waves_per_simd 8\n"
        "gfx_target_version 90010\nvendor_id 4098\ndevice_id " +
        std::to_string(gpu.deviceId) + "\nlocation_id " + std::to_string(gpu.locationId) + "\n";
    if (gpu.domain) text += "domain " + std::to_string(*gpu.domain) + "\n";
    text += "drm_render_minor " + std::to_string(gpu.renderMinor) +
            "\nhive_id 12609507387757274807\nnum_sdma_engines 2\nlocal_mem_size " +
            std::to_string(gpu.localMemSize) + "\nfw_version 92\n";
    if (gpu.uniqueId != 0) text += "unique_id " + std::to_string(gpu.uniqueId) + "\n";
    text += "num_xcc 1\nmax_engine_clk_ccompute 2450\n";
    return text;
  }

  void gpu(const FakeGpu& spec) {
    const fs::path folder = nodes() / std::to_string(spec.node);
    write(folder / "properties", propertiesOf(spec));
    if (spec.memBanks) {
      write(folder / "mem_banks/0/properties",
            "heap_type " + std::to_string(spec.heapType) + "\nsize_in_bytes " +
                std::to_string(spec.bankBytes) + "\nflags 0\nwidth 4096\nmem_clk_max 1600\n");
    }
    if (spec.renderNode && spec.renderMinor != 0) touch(render(spec.renderMinor));
  }

  /// <sysfs>/bus/pci/devices/<name>: the GPU's real PCI function.
  void pciDevice(const std::string& name, const std::string& product, const std::string& numa,
                 const std::string& cpulist, const std::optional<std::string>& partition = {}) {
    const fs::path folder = sysfs() / "bus/pci/devices" / name;
    write(folder / "product_name", product + "\n");
    write(folder / "numa_node", numa + "\n");
    write(folder / "local_cpulist", cpulist + "\n");
    if (partition) write(folder / "current_compute_partition", *partition + "\n");
  }

  /// The 8× MI210 host of ROCm/k8s-device-plugin's testdata/topo-mi210-xgmi-pcie: CPU nodes 0
  /// and 1, GPU nodes 2 to 9 at buses 63, 43, 03, 26, e3, c3, 83, a3 (KFD order is neither PCI
  /// order nor anything sorted), render nodes 128 to 135, the unique_ids of that host.
  static constexpr std::uint64_t kMi210Location[8] = {25344, 17152, 768,   9728,
                                                      58112, 49920, 33536, 41728};
  static constexpr std::uint64_t kMi210UniqueId[8] = {
      1801979520617338022ULL,  5847760019078012339ULL,  10645161697164847644ULL,
      4847253685048710349ULL,  12585367064092601175ULL, 11779194899033552202ULL,
      17888023871577450191ULL, 14073402507705256557ULL};
  void mi210Host() {
    cpu(0);
    cpu(1);
    for (unsigned i = 0; i < 8; ++i) {
      FakeGpu g;
      g.node = 2 + i;
      g.locationId = kMi210Location[i];
      g.renderMinor = 128 + i;
      g.uniqueId = kMi210UniqueId[i];
      gpu(g);
    }
    pciDevice("0000:63:00.0", "AMD Instinct MI210", "0", "0-63");
  }

  /// An MI300X in CPX mode: 8 partitions at bus 05, unique_id shared, 24 GiB each.
  /// `interim`: the partition number in location_id bits 28–31 instead of the function bits.
  void mi300xCpxHost(bool interim) {
    cpu(0);
    cpu(1);
    for (unsigned p = 0; p < 8; ++p) {
      FakeGpu g;
      g.node = 2 + p;
      g.locationId = interim ? ((std::uint64_t{p} << 28) | 0x0500) : (0x0500 | p);
      g.renderMinor = 128 + p;
      g.uniqueId = 0x4b3c2d1e0f102030ULL;
      g.deviceId = 0x74a1;
      g.bankBytes = 24ULL << 30;
      gpu(g);
    }
    pciDevice("0000:05:00.0", "AMD Instinct MI300X", "0", "0-47,96-143", "cpx");
  }

  void setenv(const std::string& name, const std::string& value) { environment_[name] = value; }
  void denyWith(const fs::path& path, int error) { errors_[path.string()] = error; }

  /// Copies tests/fixtures/amd/<name> into bin().
  void installTool(const std::string& name) {
    fs::copy_file(fs::path(AMD_FIXTURES) / name, bin() / name,
                  fs::copy_options::overwrite_existing);
  }
  void tool(const std::string& name, const std::string& body) {
    flink::testing::writeScript(bin() / name, "#!/bin/sh\n" + body);
  }

  discovery::VendorOptions options() const {
    discovery::VendorOptions result;
    result.roots.sysfs = sysfs();
    result.roots.dev = dev();
    result.tools.searchPath = bin().string();
    result.tools.timeout = std::chrono::milliseconds(10000);
    const auto* environment = &environment_;
    result.getenv = [environment](const char* name) -> const char* {
      const auto found = environment->find(name);
      return found == environment->end() ? nullptr : found->second.c_str();
    };
    const auto* errors = &errors_;
    result.probe = [errors](const fs::path& path) {
      const auto found = errors->find(path.string());
      return found == errors->end() ? discovery::probeOpen(path) : found->second;
    };
    return result;
  }

 private:
  flink::testing::TempDir dir_;
  std::map<std::string, std::string> environment_;
  std::map<std::string, int> errors_;
};

}  // namespace flink::amd::testing
