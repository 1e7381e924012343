// NVML enumeration: one session, every GPU by index, the MIG instances of those with MIG on.
// See NvmlEnumerator.h for what is listed and what is thrown.
#include "nvml/NvmlEnumerator.h"

#include <cstdlib>
#include <memory>
#include <utility>
#include <vector>

#include "nvml/Nvml.h"
#include "nvml/NvmlTopology.h"

namespace flink::nvml {

using discovery::DiscoveryError;
using discovery::Enumeration;
using discovery::GpuDevice;
using discovery::MigPlacement;

namespace {

constexpr std::uint64_t kBytesPerMiB = 1024 * 1024;

/// Collects what one enumeration has to say besides the devices.
class Enumerating {
 public:
  explicit Enumerating(const NvmlLibrary& library) : library_(library) {}

  /// The value of `result`, or nullopt; a failure other than "not supported" (or a function
  /// this driver lacks) is also noted, naming `what` (e.g. "GPU 1").
  template <typename T>
  std::optional<T> property(const Result<T>& result, const std::string& what) {
    if (!result.ok() && result.code != Return::kNotSupported &&
        result.code != Return::kFunctionNotFound) {
      warn(what + ": " + library_.describeFailure(result.function, result.code));
    }
    return result.get();
  }

  void warn(const std::string& text) { warnings_.push_back("warning: NVML: " + text); }
  std::string describe(const char* function, Return code) const {
    return library_.describeFailure(function, code);
  }
  std::vector<std::string> takeWarnings() { return std::move(warnings_); }

 private:
  const NvmlLibrary& library_;
  std::vector<std::string> warnings_;
};

std::optional<std::uint64_t> toMiB(const std::optional<Memory>& memory) {
  if (!memory) return std::nullopt;
  return memory->totalBytes / kBytesPerMiB;
}

/// The MIG instances of `gpu` (index `parentIndex`), appended to `devices` in slot order.
void listMigInstances(const Device& gpu, unsigned parentIndex, const GpuDevice& parent,
                      Enumerating& context, std::vector<GpuDevice>& devices) {
  const std::string what = "GPU " + std::to_string(parentIndex);
  const Result<unsigned> slots = gpu.maxMigDeviceCount();
  if (!slots.ok()) {
    context.warn(what + " has MIG mode on, but its MIG instances cannot be listed: " +
                 context.describe(slots.function, slots.code));
    return;
  }
  for (unsigned slot = 0; slot < slots.value; ++slot) {
    const Result<Device> mig = gpu.migDeviceByIndex(slot);
    if (mig.code == Return::kNotFound) continue;  // an empty slot
    const std::string where = what + " MIG slot " + std::to_string(slot);
    if (!mig.ok()) {
      context.warn(where + " left out: " + context.describe(mig.function, mig.code));
      continue;
    }
    const Result<std::string> uuid = mig.value.uuid();
    if (!uuid.ok() || uuid.value.empty()) {
      // Its UUID is its identifier: without one it cannot be handed out.
      context.warn(where + " left out: " +
                   (uuid.ok() ? std::string("nvmlDeviceGetUUID gave an empty UUID")
                              : context.describe(uuid.function, uuid.code)));
      continue;
    }
    GpuDevice device;
    device.identifier = uuid.value;
    device.uuid = uuid.value;
    const std::string instance = what + " MIG instance " + uuid.value;
    device.name = context.property(mig.value.name(), instance);
    device.memoryTotalMiB = toMiB(context.property(mig.value.memoryInfo(), instance));
    device.pciBusId = parent.pciBusId;
    MigPlacement placement;
    placement.parentIndex = parentIndex;
    placement.gpuInstanceId = context.property(mig.value.gpuInstanceId(), instance);
    placement.computeInstanceId = context.property(mig.value.computeInstanceId(), instance);
    device.mig = placement;
    devices.push_back(std::move(device));
  }
}

}  // namespace

Enumeration NvmlEnumerator::enumerate() {
  std::shared_ptr<const NvmlLibrary> library;
  std::unique_ptr<NvmlSession> session;
  try {
    library = library_ ? NvmlLibrary::load(*library_) : NvmlLibrary::load();
    session = std::make_unique<NvmlSession>(library);
  } catch (const NvmlError& e) {
    std::vector<std::string> details;
    if (library) {
      details.push_back("NVML library: " + library->file());
    } else if (e.code() == Return::kLibraryNotFound) {
      const char* chosen = std::getenv(kLibraryEnvironmentVariable);
      if (library_) {
        details.push_back("the NVML library to load was given as " + *library_);
      } else if (chosen != nullptr && *chosen != '\0') {
        details.push_back("the NVML library to load was named by $" +
                          std::string(kLibraryEnvironmentVariable) + ": " + chosen);
      } else {
        details.push_back(std::string(kDefaultLibraryName) +
                          " comes with the NVIDIA driver; it was looked for through the dynamic "
                          "loader's search path ($LD_LIBRARY_PATH, /etc/ld.so.cache)");
      }
    }
    throw DiscoveryError(kNvmlNotUsablePrefix + std::string(e.what()), std::move(details));
  }
  // From here on the session is open: every way out, a throw included, shuts NVML down.

  const Result<unsigned> count = session->deviceCount();
  if (!count.ok()) {
    throw DiscoveryError(
        kNvmlNotUsablePrefix + library->describeFailure(count.function, count.code),
        {"NVML library: " + library->file()});
  }
  if (count.value == 0) {
    throw DiscoveryError("no NVIDIA GPU found: NVML lists no GPU",
                         {"NVML library: " + library->file()});
  }

  Enumerating context(*library);
  Enumeration result;
  std::string firstHandleFailure;
  std::vector<std::pair<std::string, Device>> topologyHandles;  // topology: the GPUs listed
  for (unsigned index = 0; index < count.value; ++index) {
    const std::string what = "GPU " + std::to_string(index);
    const Result<Device> gpu = session->deviceByIndex(index);
    if (!gpu.ok()) {
      // As nvidia-smi does with a GPU it cannot open (one that is lost, say): the others are
      // listed, this one is not.
      const std::string failure = library->describeFailure(gpu.function, gpu.code);
      if (firstHandleFailure.empty()) firstHandleFailure = failure;
      context.warn(what + " left out: " + failure);
      continue;
    }
    GpuDevice device;
    device.identifier = std::to_string(index);
    device.uuid = context.property(gpu.value.uuid(), what);
    device.name = context.property(gpu.value.name(), what);
    if (const std::optional<PciInfo> pci = context.property(gpu.value.pciInfo(), what)) {
      if (!pci->busId.empty()) device.pciBusId = pci->busId;
    }
    device.memoryTotalMiB = toMiB(context.property(gpu.value.memoryInfo(), what));
    device.minorNumber = context.property(gpu.value.minorNumber(), what);
    const std::optional<MigMode> mig = context.property(gpu.value.migMode(), what);
    device.migEnabled = mig && mig->enabled();
    result.devices.push_back(device);
    topologyHandles.emplace_back(device.identifier, gpu.value);  // topology
    if (device.migEnabled) listMigInstances(gpu.value, index, device, context, result.devices);
  }
  result.warnings = context.takeWarnings();
  // ---- topology: NUMA nodes and CPU affinity, and the pairs' relations when asked ----
  addTopology(topologyHandles, result, withTopology_);
  // ---- end of topology ----
  if (result.devices.empty()) {
    std::vector<std::string> details = std::move(result.warnings);
    details.push_back("NVML library: " + library->file());
    throw DiscoveryError("no NVIDIA GPU found: NVML lists " + std::to_string(count.value) +
                             " GPU(s) but gives a handle for none: " + firstHandleFailure,
                         std::move(details));
  }
  return result;
}

NvmlAttempt attemptNvmlEnumeration(bool withTopology) {
  NvmlAttempt attempt;
  try {
    NvmlLibrary::load();
  } catch (const NvmlError& e) {
    attempt.libraryAbsent = e.code() == Return::kLibraryNotFound;
    attempt.problem = std::string(kNvmlNotUsablePrefix) + e.what();
    return attempt;
  }
  try {
    attempt.found = NvmlEnumerator(std::nullopt, withTopology).enumerate();
  } catch (const discovery::DiscoveryError& e) {
    if (!std::string_view(e.what()).starts_with(kNvmlNotUsablePrefix)) throw;
    attempt.problem = e.what();
  }
  return attempt;
}

}  // namespace flink::nvml
