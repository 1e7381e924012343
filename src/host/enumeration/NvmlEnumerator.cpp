// NVML enumeration: one session, every GPU by index, the MIG instances of those with MIG on.
// See NvmlEnumerator.h for what is listed and what is thrown.
#include "host/enumeration/NvmlEnumerator.h"

#include <cstdlib>
#include <memory>
#include <utility>
#include <vector>

#include "host/enumeration/NvmlTopology.h"
#include "host/nvml/Nvml.h"
#include "host/nvml/NvmlDeviceState.h"
#include "util/Strings.h"

namespace flink::discovery {

using nvml::Device;
using nvml::kDefaultLibraryName;
using nvml::kLibraryEnvironmentVariable;
using nvml::Memory;
using nvml::MigMode;
using nvml::NvmlError;
using nvml::NvmlLibrary;
using nvml::NvmlSession;
using nvml::PciInfo;
using nvml::Result;
using nvml::Return;

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

  void warn(const std::string& text) { notices_.push_back(Notice::warning("NVML: " + text)); }
  /// `gpu` ("GPU 1", "GPU 0 MIG slot 2") is left out because of `error`.
  void leaveOut(const std::string& gpu, const std::string& error) {
    notices_.push_back(Notice::gpuLeftOut("NVML: " + gpu + " left out: " + error));
    leftOut_.push_back({gpu, error});
  }
  std::string describe(const char* function, Return code) const {
    return library_.describeFailure(function, code);
  }
  const NvmlLibrary& library() const noexcept { return library_; }
  std::vector<Notice> takeNotices() { return std::move(notices_); }
  std::vector<LeftOutGpu> takeLeftOut() { return std::move(leftOut_); }

 private:
  const NvmlLibrary& library_;
  std::vector<Notice> notices_;
  std::vector<LeftOutGpu> leftOut_;
};

/// Whether a failed query means the GPU itself cannot be used, not one property unknown: it is
/// lost (Xid 79, "fallen off the bus"), the driver failed on it, or this process may not open it
/// (a cgroup that denies the device: nvmlDeviceGetCount_v2 still counts it).
bool makesGpuUnusable(Return code) noexcept {
  return code == Return::kGpuIsLost || code == Return::kUnknown || code == Return::kNoPermission;
}

/// The first of `results` whose failure makes the GPU unusable, as "<function> failed: …";
/// nullopt when none does.
template <typename... Results>
std::optional<std::string> unusableBecause(const NvmlLibrary& library, const Results&... results) {
  std::optional<std::string> reason;
  const auto check = [&](const auto& result) {
    if (!reason && makesGpuUnusable(result.code)) {
      reason = library.describeFailure(result.function, result.code);
    }
  };
  (check(results), ...);
  return reason;
}

std::optional<std::uint64_t> toMiB(const std::optional<Memory>& memory) {
  if (!memory) return std::nullopt;
  return memory->totalBytes / kBytesPerMiB;
}

/// The MIG instances of `gpu` (index `parentIndex`), appended to `devices` in slot order.
void listMigInstances(const Device& gpu, unsigned parentIndex,
                      const std::optional<std::string>& parentPciBusId,
                      const std::optional<ComputeCapability>& parentComputeCapability,
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
    // An empty slot: NVML_ERROR_NOT_FOUND, and from some drivers NVML_ERROR_INVALID_ARGUMENT for
    // a slot past the instances that exist.
    if (mig.code == Return::kNotFound || mig.code == Return::kInvalidArgument) continue;
    const std::string where = what + " MIG slot " + std::to_string(slot);
    if (!mig.ok()) {
      context.leaveOut(where, context.describe(mig.function, mig.code));
      continue;
    }
    const Result<std::string> uuid = mig.value.uuid();
    if (!uuid.ok() || uuid.value.empty()) {
      // Its UUID is its identifier: without one it cannot be handed out.
      context.leaveOut(where, uuid.ok() ? std::string("nvmlDeviceGetUUID gave an empty UUID")
                                        : context.describe(uuid.function, uuid.code));
      continue;
    }
    const Result<std::string> name = mig.value.name();
    const Result<Memory> memory = mig.value.memoryInfo();
    const Result<unsigned> gpuInstance = mig.value.gpuInstanceId();
    const Result<unsigned> computeInstance = mig.value.computeInstanceId();
    if (const std::optional<std::string> unusable =
            unusableBecause(context.library(), name, memory, gpuInstance, computeInstance)) {
      context.leaveOut(where + " (" + uuid.value + ")", *unusable);
      continue;
    }
    GpuDevice device;
    device.identifier = uuid.value;
    device.uuid = uuid.value;
    const std::string instance = what + " MIG instance " + uuid.value;
    device.name = context.property(name, instance);
    device.memoryTotalMiB = toMiB(context.property(memory, instance));
    device.pciBusId = parentPciBusId;
    device.computeCapability = parentComputeCapability;
    MigPlacement placement;
    placement.parentIndex = parentIndex;
    placement.gpuInstanceId = context.property(gpuInstance, instance);
    placement.computeInstanceId = context.property(computeInstance, instance);
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
    } else if (e.code() == Return::kLibraryNotFound && e.libraryPresent()) {
      details.push_back(
          "the NVML library is installed but cannot be loaded: built for another architecture, "
          "or a library it needs is missing (ldd shows which), or not a shared library at all");
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
    throw DiscoveryError(kNvmlNotUsablePrefix + std::string(e.what()), std::move(details),
                         e.code() == Return::kLibRmVersionMismatch
                             ? DiscoveryError::Kind::kNvmlVersionMismatch
                             : DiscoveryError::Kind::kNvmlNotUsable);
  }
  // From here on the session is open: every way out, a throw included, shuts NVML down.

  const Result<unsigned> count = session->deviceCount();
  if (!count.ok()) {
    throw DiscoveryError(
        kNvmlNotUsablePrefix + library->describeFailure(count.function, count.code),
        {"NVML library: " + library->file()}, DiscoveryError::Kind::kNvmlNotUsable);
  }
  if (count.value == 0) {
    // nvmlInitWithFlags(NVML_INIT_FLAG_NO_GPUS) succeeded on a host whose driver sees no GPU.
    throw DiscoveryError(
        "no NVIDIA GPU on this host: the NVIDIA driver is installed, but NVML "
        "lists no GPU",
        {"NVML library: " + library->file()}, DiscoveryError::Kind::kNoGpu);
  }

  Enumerating context(*library);
  const nvml::DeviceStateApi deviceState(*library);
  Enumeration result;
  result.devices.reserve(count.value);
  std::vector<std::pair<std::string, Device>> topologyHandles;  // topology: the GPUs listed
  topologyHandles.reserve(count.value);
  for (unsigned index = 0; index < count.value; ++index) {
    const std::string what = "GPU " + std::to_string(index);
    const Result<Device> gpu = session->deviceByIndex(index);
    if (!gpu.ok()) {
      // As nvidia-smi does with a GPU it cannot open (one that is lost, or that a cgroup denies):
      // the others are listed, this one is not.
      context.leaveOut(what, library->describeFailure(gpu.function, gpu.code));
      continue;
    }
    const Result<std::string> uuid = gpu.value.uuid();
    const Result<std::string> name = gpu.value.name();
    const Result<PciInfo> pci = gpu.value.pciInfo();
    const Result<MigMode> migMode = gpu.value.migMode();
    Result<Memory> memory = gpu.value.memoryInfo();
    const Result<unsigned> minor = gpu.value.minorNumber();
    const bool migEnabled = migMode.ok() && migMode.value.enabled();
    if (migEnabled && memory.code == Return::kNoPermission) {
      // In MIG mode NVML gives the whole GPU's memory to privileged callers only; the instances
      // keep theirs. For anyone else the parent's memory is simply unknown.
      memory.code = Return::kNotSupported;
    }
    if (const std::optional<std::string> unusable =
            unusableBecause(*library, uuid, name, pci, migMode, memory, minor)) {
      context.leaveOut(
          pci.ok() && !pci.value.busId.empty() ? what + " (" + pci.value.busId + ")" : what,
          *unusable);
      continue;
    }
    GpuDevice device;
    device.identifier = std::to_string(index);
    device.uuid = context.property(uuid, what);
    device.name = context.property(name, what);
    if (const std::optional<PciInfo> info = context.property(pci, what)) {
      if (!info->busId.empty()) device.pciBusId = info->busId;
    }
    device.memoryTotalMiB = toMiB(context.property(memory, what));
    device.minorNumber = context.property(minor, what);
    device.migEnabled = context.property(migMode, what).has_value() && migEnabled;
    // Not among the queries that make a GPU unusable: a selector's key, nothing discovery needs.
    if (const std::optional<nvml::CudaComputeCapability> capability =
            context.property(gpu.value.cudaComputeCapability(), what);
        capability && capability->major >= 0 && capability->minor >= 0) {
      device.computeCapability = ComputeCapability{static_cast<unsigned>(capability->major),
                                                   static_cast<unsigned>(capability->minor)};
    }
    // The fabric's clique and cluster, once registered (a GPU without a fabric has neither).
    const Result<nvml::FabricInfo> fabric = deviceState.fabricInfo(gpu.value);
    if (fabric.ok() && fabric.value.state == static_cast<unsigned>(nvml::FabricState::kCompleted) &&
        fabric.value.status == Return::kSuccess) {
      device.fabricCliqueId = fabric.value.cliqueId;
      device.fabricClusterUuid = fabric.value.clusterUuidText();
    }
    topologyHandles.emplace_back(device.identifier, gpu.value);  // topology
    const bool listInstances = device.migEnabled;
    result.devices.push_back(std::move(device));
    if (listInstances) {
      // A copy: listing the instances appends to result.devices, which may move the parent.
      const GpuDevice parent = result.devices.back();
      const std::size_t first = result.devices.size();
      listMigInstances(gpu.value, index, parent.pciBusId, parent.computeCapability, context,
                       result.devices);
      for (std::size_t at = first; at < result.devices.size(); ++at) {
        result.devices[at].fabricCliqueId = parent.fabricCliqueId;
        result.devices[at].fabricClusterUuid = parent.fabricClusterUuid;
      }
    }
  }
  result.notices = context.takeNotices();
  result.leftOut = context.takeLeftOut();
  // ---- topology: NUMA nodes and CPU affinity, and the pairs' relations when asked ----
  addTopology(topologyHandles, result, withTopology_);
  // ---- end of topology ----
  if (result.devices.empty()) {
    // Every GPU is left out: name each, with its error.
    std::vector<std::string> each;
    for (const LeftOutGpu& gpu : result.leftOut) each.push_back(gpu.describe());
    std::vector<std::string> details = linesOf(result.notices);
    details.push_back("NVML library: " + library->file());
    throw DiscoveryError("no usable NVIDIA GPU: NVML lists " + std::to_string(count.value) +
                             " GPU(s), and every one is left out: " + strings::join(each, "; "),
                         std::move(details), DiscoveryError::Kind::kNoUsableGpu);
  }
  return result;
}

NvmlAttempt attemptNvmlEnumeration(bool withTopology) {
  NvmlAttempt attempt;
  try {
    NvmlLibrary::load();
  } catch (const NvmlError& e) {
    attempt.libraryAbsent = e.code() == Return::kLibraryNotFound && !e.libraryPresent();
    attempt.problem = std::string(kNvmlNotUsablePrefix) + e.what();
    return attempt;
  }
  try {
    attempt.found = NvmlEnumerator(std::nullopt, withTopology).enumerate();
  } catch (const DiscoveryError& e) {
    if (e.kind() != DiscoveryError::Kind::kNvmlNotUsable &&
        e.kind() != DiscoveryError::Kind::kNvmlVersionMismatch) {
      throw;
    }
    attempt.problem = e.what();
    attempt.versionMismatch = e.kind() == DiscoveryError::Kind::kNvmlVersionMismatch;
  }
  return attempt;
}

}  // namespace flink::discovery
