// The kernel's list of NVIDIA GPUs (see KernelGpus.h).
#include "host/enumeration/KernelGpus.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <set>
#include <system_error>

#include "host/enumeration/DeviceIdentifiers.h"
#include "host/enumeration/UnitIndex.h"
#include "host/enumeration/Vendor.h"
#include "util/Strings.h"

namespace flink::discovery {

namespace fs = std::filesystem;

namespace {

/// Blanks around a key or a value: the driver pads with tabs and spaces.

/// A GPU UUID as NVML writes them: GPU- and 32 hex digits in 8-4-4-4-12 groups.
bool isGpuUuid(std::string_view text) {
  if (!text.starts_with("GPU-") || text.size() != 40) return false;
  for (std::size_t i = 4; i < text.size(); ++i) {
    const char c = text[i];
    const bool dash = i == 12 || i == 17 || i == 22 || i == 27;
    if (dash ? c != '-' : !std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

}  // namespace

fs::path nvidiaProcRoot() {
  if (const char* root = std::getenv(kProcRootVariable); root != nullptr && *root != '\0') {
    return root;
  }
  return "/proc/driver/nvidia";
}

std::string KernelGpu::describe() const {
  std::vector<std::string> parts;
  if (uuid) parts.push_back(*uuid);
  if (model) parts.push_back(strings::quoteForMessage(*model));
  return pciBusId + (parts.empty() ? "" : " (" + strings::join(parts, ", ") + ")");
}

std::vector<const KernelGpu*> KernelGpus::listed() const {
  std::vector<const KernelGpu*> out;
  for (const KernelGpu& gpu : gpus) {
    if (!gpu.excluded) out.push_back(&gpu);
  }
  return out;
}

std::vector<const KernelGpu*> KernelGpus::excludedGpus() const {
  std::vector<const KernelGpu*> out;
  for (const KernelGpu& gpu : gpus) {
    if (gpu.excluded) out.push_back(&gpu);
  }
  return out;
}

std::vector<GpuDevice> KernelGpus::devices() const {
  std::vector<GpuDevice> out;
  for (const KernelGpu* gpu : listed()) {
    GpuDevice device;
    device.identifier = std::to_string(out.size());
    device.uuid = gpu->uuid;
    device.name = gpu->model;
    device.pciBusId = gpu->pciBusId;
    device.minorNumber = gpu->minor;
    out.push_back(std::move(device));
  }
  return out;
}

std::optional<KernelGpu> parseKernelGpuInformation(std::string_view text,
                                                   std::string_view folderName,
                                                   const fs::path& file,
                                                   std::vector<Notice>& notices, std::string& why) {
  KernelGpu gpu;
  gpu.file = file;
  bool known = false;  // a line the driver writes was seen
  std::optional<std::string> busLocation;
  const std::string where = file.string();
  for (std::string_view line : strings::split(text, '\n')) {
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view key = strings::trim(line.substr(0, colon));
    const std::string_view value = strings::trim(line.substr(colon + 1));
    if (key == "Model") {
      known = true;
      if (!value.empty()) gpu.model = std::string(value);
    } else if (key == "GPU UUID") {
      known = true;
      const std::string canonical = device::canonicalDeviceIdentifier(value);
      if (isGpuUuid(canonical)) {
        gpu.uuid = canonical;
      } else {
        notices.push_back(Notice::note(where + ": 'GPU UUID' is " + strings::inQuotes(value) +
                                       ", not a GPU UUID: the GPU is known by its bus id only"));
      }
    } else if (key == "Bus Location") {
      known = true;
      busLocation = canonicalPciBusId(value);
      if (!busLocation) {
        notices.push_back(Notice::note(where + ": 'Bus Location' is " + strings::inQuotes(value) +
                                       ", not a PCI bus id: the folder's name is taken"));
      }
    } else if (key == "Device Minor") {
      known = true;
      gpu.minor = strings::parseUnsigned(value);
      if (!gpu.minor) {
        notices.push_back(Notice::note(where + ": 'Device Minor' is " + strings::inQuotes(value) +
                                       ", not a number: the minor is not known"));
      }
    } else if (key == "GPU Excluded") {
      known = true;
      if (value == "Yes") {
        gpu.excluded = true;
      } else if (value != "No") {
        notices.push_back(Notice::note(where + ": 'GPU Excluded' is " + strings::inQuotes(value) +
                                       ", neither Yes nor No: read as No"));
      }
    }
  }
  if (!known) {
    why = "none of the lines the NVIDIA driver writes there (Model, GPU UUID, Bus Location)";
    return std::nullopt;
  }
  const std::optional<std::string> fromFolder = canonicalPciBusId(folderName);
  if (busLocation) {
    if (fromFolder && *fromFolder != *busLocation) {
      notices.push_back(Notice::note(where + ": 'Bus Location' " + *busLocation +
                                     " is not its folder's name: the file's is taken"));
    }
    gpu.pciBusId = *busLocation;
  } else if (fromFolder) {
    gpu.pciBusId = *fromFolder;
  } else {
    why = "no PCI bus id: neither a 'Bus Location' line nor a folder named by one";
    return std::nullopt;
  }
  return gpu;
}

KernelGpus readKernelGpus(const fs::path& root) {
  KernelGpus kernel;
  const fs::path folder = root / "gpus";
  std::error_code error;
  if (!fs::is_directory(folder, error)) return kernel;
  kernel.present = true;
  std::vector<fs::path> entries;
  for (fs::directory_iterator it(folder, error), end; !error && it != end; it.increment(error)) {
    entries.push_back(it->path());
  }
  if (error) {
    kernel.notices.push_back(Notice::warning("cannot list " + folder.string() + ": " +
                                             error.message() + ": the kernel's list is partial"));
  }
  std::sort(entries.begin(), entries.end());
  for (const fs::path& entry : entries) {
    const fs::path file = entry / "information";
    int readError = 0;
    const std::optional<std::string> text = readSmallFile(file, &readError);
    if (!text) {
      kernel.notices.push_back(
          Notice::warning("skipped " + file.string() + ": " + std::strerror(readError)));
      continue;
    }
    std::string why;
    std::optional<KernelGpu> gpu =
        parseKernelGpuInformation(*text, entry.filename().string(), file, kernel.notices, why);
    if (!gpu) {
      kernel.notices.push_back(Notice::warning("skipped " + file.string() + ": " + why));
      continue;
    }
    kernel.gpus.push_back(std::move(*gpu));
  }
  std::stable_sort(kernel.gpus.begin(), kernel.gpus.end(),
                   [](const KernelGpu& a, const KernelGpu& b) { return a.pciBusId < b.pciBusId; });
  // One entry per bus id and per UUID: a second is not another GPU.
  std::set<std::string> buses;
  std::set<std::string> uuids;
  std::vector<KernelGpu> kept;
  for (KernelGpu& gpu : kernel.gpus) {
    const bool busTwice = !buses.insert(gpu.pciBusId).second;
    const bool uuidTwice = gpu.uuid && !uuids.insert(*gpu.uuid).second;
    if (busTwice || uuidTwice) {
      kernel.notices.push_back(Notice::warning(
          "skipped " + gpu.file.string() + ": its " +
          (busTwice ? "bus id " + gpu.pciBusId : "UUID " + *gpu.uuid) + " is another entry's"));
      continue;
    }
    kept.push_back(std::move(gpu));
  }
  kernel.gpus = std::move(kept);
  return kernel;
}

std::string_view versionMismatchRemedy() noexcept {
  return "reboot, or once nothing uses the GPUs reload the kernel module: rmmod nvidia_uvm "
         "nvidia_drm nvidia_modeset nvidia && modprobe nvidia";
}

std::string describeKernelList(const KernelGpus& kernel, const fs::path& root) {
  const fs::path folder = root / "gpus";
  if (!kernel.present) return folder.string() + " does not exist: the kernel's list is not known";
  std::vector<std::string> listed;
  for (const KernelGpu* gpu : kernel.listed()) {
    listed.push_back(std::to_string(listed.size()) + " " + gpu->describe());
  }
  std::string text = listed.empty() ? "the kernel's driver lists no GPU (" + folder.string() + ")"
                                    : "the kernel's driver knows " + std::to_string(listed.size()) +
                                          " GPU(s): " + strings::join(listed, ", ");
  std::vector<std::string> excluded;
  for (const KernelGpu* gpu : kernel.excludedGpus()) excluded.push_back(gpu->describe());
  if (!excluded.empty()) text += "; it excludes " + strings::join(excluded, ", ");
  return text;
}

const KernelGpu* excludedGpuOf(const GpuDevice& device, const KernelGpus& kernel) {
  const std::optional<std::string> bus =
      device.pciBusId ? canonicalPciBusId(*device.pciBusId) : std::nullopt;
  const std::optional<std::string> uuid =
      device.uuid && device.uuid->starts_with("GPU-")
          ? std::optional(device::canonicalDeviceIdentifier(*device.uuid))
          : std::nullopt;
  for (const KernelGpu& gpu : kernel.gpus) {
    if (!gpu.excluded) continue;
    if ((uuid && gpu.uuid && *uuid == *gpu.uuid) || (bus && *bus == gpu.pciBusId)) return &gpu;
  }
  return nullptr;
}

}  // namespace flink::discovery
