// nvml-vs-nvidia-smi: on a host with NVIDIA GPUs, checks that the two sources of the default
// discovery agree, and how long each takes. Run by scripts/gpu-machine-check.sh; the CPU-only
// test (tests/host/enumeration/nvml_vs_nvidia_smi_test.sh) runs it against stand-ins.
//
//   nvml-vs-nvidia-smi [--nvidia-smi PATH] [--runs N]
//
// 1. NvmlEnumerator (libnvidia-ml.so.1, or $FLINK_GPU_NVML_LIBRARY) lists GPUs and MIG instances.
// 2. NvidiaSmiEnumerator (nvidia-smi found as the discovery finds it, or --nvidia-smi), with MIG:
//    `nvidia-smi --query-gpu=index,uuid,name,pci.bus_id,memory.total ...` and `nvidia-smi -L`,
//    each run stopped (SIGKILL) after NVIDIA_SMI_TIMEOUT seconds (default 8), as the discovery
//    stops it, so that a hung nvidia-smi never outlives this program.
// 3. They must agree on: the number of GPUs, their indices, each GPU's UUID, each GPU's PCI bus
//    id (case-insensitively: both print NVML's "00000000:19:00.0"), and the set of MIG UUIDs.
//    Names and memory sizes that differ are shown as notes, not counted as disagreement.
// 4. Timing: the median of N (default 10) whole NVML enumerations (init, queries, shutdown)
//    against the median of N NvidiaSmiEnumerator runs without MIG (one nvidia-smi process
//    each), and their ratio.
//
// Exit status: 0 when they agree, 1 when they disagree (each difference on a line of its own),
// 2 when either source fails or the command line is wrong.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "host/enumeration/NvidiaSmi.h"
#include "host/enumeration/NvmlEnumerator.h"
#include "host/nvml/Nvml.h"
#include "util/Notice.h"
#include "util/Strings.h"

namespace {

namespace fs = std::filesystem;
using flink::discovery::DiscoveryError;
using flink::discovery::Enumeration;
using flink::discovery::GpuDevice;
using Clock = std::chrono::steady_clock;

constexpr int kUsage = 2;
constexpr int kFailed = 2;
constexpr int kDisagree = 1;

struct Options {
  std::optional<fs::path> nvidiaSmi;
  int runs = 10;
};

void print(const std::string& line) { std::printf("%s\n", line.c_str()); }

std::string orUnknown(const std::optional<std::string>& value) { return value.value_or("?"); }

template <typename Number>
std::string orUnknown(const std::optional<Number>& value) {
  return value ? std::to_string(*value) : "?";
}

/// Prints what a source listed, one device a line.
void show(const std::string& source, const Enumeration& listed) {
  std::size_t gpus = 0;
  for (const GpuDevice& device : listed.devices) gpus += device.isMigInstance() ? 0 : 1;
  print(source + ": " + std::to_string(gpus) + " GPU(s), " +
        std::to_string(listed.devices.size() - gpus) + " MIG instance(s)");
  for (const GpuDevice& device : listed.devices) {
    if (device.isMigInstance()) {
      print("    MIG " + device.identifier + "  " + orUnknown(device.name) + "  " +
            orUnknown(device.memoryTotalMiB) + " MiB  GPU instance " +
            orUnknown(device.mig->gpuInstanceId) + ", compute instance " +
            orUnknown(device.mig->computeInstanceId));
    } else {
      print("  GPU " + device.identifier + "  " + orUnknown(device.uuid) + "  " +
            orUnknown(device.pciBusId) + "  " + orUnknown(device.name) + "  " +
            orUnknown(device.memoryTotalMiB) + " MiB  /dev/nvidia" + orUnknown(device.minorNumber) +
            "  MIG " + (device.migEnabled ? "on" : "off"));
    }
  }
  for (const flink::Notice& notice : listed.notices) print("  " + notice.line());
}

std::vector<const GpuDevice*> wholeGpus(const Enumeration& listed) {
  std::vector<const GpuDevice*> gpus;
  for (const GpuDevice& device : listed.devices) {
    if (!device.isMigInstance()) gpus.push_back(&device);
  }
  return gpus;
}

std::vector<std::string> migUuids(const Enumeration& listed) {
  std::vector<std::string> uuids;
  for (const GpuDevice& device : listed.devices) {
    if (device.isMigInstance()) uuids.push_back(device.identifier);
  }
  return uuids;
}

std::vector<std::string> identifiers(const std::vector<const GpuDevice*>& devices) {
  std::vector<std::string> ids;
  for (const GpuDevice* device : devices) ids.push_back(device->identifier);
  return ids;
}

/// Every way `nvml` and `smi` disagree (count, indices, UUIDs, bus ids, MIG UUIDs), one line
/// each; differences in name and memory go to `notes`.
std::vector<std::string> compare(const Enumeration& nvml, const Enumeration& smi,
                                 std::vector<std::string>& notes) {
  std::vector<std::string> differences;
  const std::vector<const GpuDevice*> nvmlGpus = wholeGpus(nvml);
  const std::vector<const GpuDevice*> smiGpus = wholeGpus(smi);
  if (nvmlGpus.size() != smiGpus.size()) {
    differences.push_back("GPU count: NVML " + std::to_string(nvmlGpus.size()) + ", nvidia-smi " +
                          std::to_string(smiGpus.size()));
  }
  if (identifiers(nvmlGpus) != identifiers(smiGpus)) {
    differences.push_back("GPU indices: NVML [" + flink::strings::join(identifiers(nvmlGpus), ",") +
                          "], nvidia-smi [" + flink::strings::join(identifiers(smiGpus), ",") +
                          "]");
  }
  for (const GpuDevice* smiGpu : smiGpus) {
    const auto found = std::find_if(nvmlGpus.begin(), nvmlGpus.end(), [&](const GpuDevice* gpu) {
      return gpu->identifier == smiGpu->identifier;
    });
    if (found == nvmlGpus.end()) continue;  // already reported with the indices
    const GpuDevice& gpu = **found;
    const std::string what = "GPU " + gpu.identifier;
    if (!gpu.uuid || gpu.uuid != smiGpu->uuid) {
      differences.push_back(what + " UUID: NVML " + orUnknown(gpu.uuid) + ", nvidia-smi " +
                            orUnknown(smiGpu->uuid));
    }
    if (!gpu.pciBusId || !smiGpu->pciBusId ||
        flink::strings::toLower(*gpu.pciBusId) != flink::strings::toLower(*smiGpu->pciBusId)) {
      differences.push_back(what + " PCI bus id: NVML " + orUnknown(gpu.pciBusId) +
                            ", nvidia-smi " + orUnknown(smiGpu->pciBusId));
    }
    if (gpu.name != smiGpu->name) {
      notes.push_back(what + " name: NVML " + orUnknown(gpu.name) + ", nvidia-smi " +
                      orUnknown(smiGpu->name));
    }
    if (gpu.memoryTotalMiB != smiGpu->memoryTotalMiB) {
      notes.push_back(what + " memory: NVML " + orUnknown(gpu.memoryTotalMiB) +
                      " MiB, nvidia-smi " + orUnknown(smiGpu->memoryTotalMiB) + " MiB");
    }
  }
  std::vector<std::string> nvmlMig = migUuids(nvml);
  std::vector<std::string> smiMig = migUuids(smi);
  if (nvmlMig != smiMig) {
    std::vector<std::string> sortedNvml = nvmlMig;
    std::vector<std::string> sortedSmi = smiMig;
    std::sort(sortedNvml.begin(), sortedNvml.end());
    std::sort(sortedSmi.begin(), sortedSmi.end());
    if (sortedNvml == sortedSmi) {
      notes.push_back("the same MIG UUIDs, in another order (nvidia-smi -L: " +
                      flink::strings::join(smiMig, ",") + ")");
    } else {
      differences.push_back("MIG UUIDs: NVML [" + flink::strings::join(nvmlMig, ",") +
                            "], nvidia-smi -L [" + flink::strings::join(smiMig, ",") + "]");
    }
  }
  return differences;
}

double milliseconds(Clock::duration duration) {
  return std::chrono::duration<double, std::milli>(duration).count();
}

/// The median time of `runs` calls of `body`, in milliseconds.
template <typename Body>
double medianMs(int runs, Body body) {
  std::vector<double> times;
  for (int i = 0; i < runs; ++i) {
    const Clock::time_point start = Clock::now();
    body();
    times.push_back(milliseconds(Clock::now() - start));
  }
  std::sort(times.begin(), times.end());
  const std::size_t middle = times.size() / 2;
  return times.size() % 2 == 1 ? times[middle] : (times[middle - 1] + times[middle]) / 2;
}

std::optional<Options> parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--nvidia-smi" && i + 1 < argc) {
      options.nvidiaSmi = fs::absolute(argv[++i]);
    } else if (arg == "--runs" && i + 1 < argc) {
      options.runs = std::atoi(argv[++i]);
      if (options.runs < 1 || options.runs > 1000) return std::nullopt;
    } else {
      return std::nullopt;
    }
  }
  return options;
}

int check(const Options& options) {
  // 1. NVML. The first enumeration also loads the library.
  flink::discovery::NvmlEnumerator nvmlEnumerator;
  const Clock::time_point coldStart = Clock::now();
  const Enumeration nvml = nvmlEnumerator.enumerate();
  const double coldMs = milliseconds(Clock::now() - coldStart);
  show("NVML (" + flink::nvml::NvmlLibrary::load()->file() + ")", nvml);

  // 2. nvidia-smi, found as the discovery finds it, with its MIG listing.
  flink::discovery::NvidiaSmiOptions smiOptions;
  if (options.nvidiaSmi) {
    smiOptions.executable = *options.nvidiaSmi;
  } else {
    const char* path = std::getenv("PATH");
    const flink::discovery::NvidiaSmiLocation location = flink::discovery::findNvidiaSmi(
        path != nullptr ? path : "", flink::discovery::defaultNvidiaSmiFolders());
    if (!location.path) throw std::runtime_error("nvidia-smi was not found");
    smiOptions.executable = *location.path;
  }
  const flink::discovery::TimeoutSetting limit =
      flink::discovery::parseNvidiaSmiTimeout(std::getenv("NVIDIA_SMI_TIMEOUT"));
  if (limit.note) print(limit.note->line());
  smiOptions.timeout = limit.timeout;
  smiOptions.mig = true;
  const Enumeration smi = flink::discovery::NvidiaSmiEnumerator(smiOptions).enumerate();
  show("nvidia-smi (" + smiOptions.executable->string() + ")", smi);

  // 3. Agreement.
  std::vector<std::string> notes;
  const std::vector<std::string> differences = compare(nvml, smi, notes);
  for (const std::string& note : notes) print("note: " + note);

  // 4. Timing: a whole NVML enumeration against one nvidia-smi run (the query, no -L). A run
  // that fails throws.
  smiOptions.mig = false;
  flink::discovery::NvidiaSmiEnumerator smiEnumerator(smiOptions);
  const double nvmlMs = medianMs(options.runs, [&] { nvmlEnumerator.enumerate(); });
  const double smiMs = medianMs(options.runs, [&] { smiEnumerator.enumerate(); });
  char timing[320];
  std::snprintf(timing, sizeof timing,
                "timing (median of %d): NVML enumeration %.3f ms (the first, with dlopen: "
                "%.3f ms), one nvidia-smi run %.3f ms; NVML / nvidia-smi = %.3f",
                options.runs, nvmlMs, coldMs, smiMs, smiMs > 0 ? nvmlMs / smiMs : 0.0);
  print(timing);

  if (!differences.empty()) {
    print("DISAGREE: NVML and nvidia-smi differ:");
    for (const std::string& difference : differences) print("  " + difference);
    return kDisagree;
  }
  print("AGREE: GPU count, indices, UUIDs, PCI bus ids and MIG UUIDs");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Line by line, so that an error on stderr comes after what was printed before it.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const std::optional<Options> options = parse(argc, argv);
  if (!options) {
    std::fprintf(stderr, "usage: nvml-vs-nvidia-smi [--nvidia-smi PATH] [--runs N (1-1000)]\n");
    return kUsage;
  }
  try {
    return check(*options);
  } catch (const DiscoveryError& e) {
    std::fprintf(stderr, "nvml-vs-nvidia-smi: error: %s\n", e.what());
    for (const std::string& detail : e.details()) std::fprintf(stderr, "  %s\n", detail.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nvml-vs-nvidia-smi: error: %s\n", e.what());
  }
  return kFailed;
}
