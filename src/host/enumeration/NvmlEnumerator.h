// How the default discovery can learn the host's GPUs without starting a process: through NVML,
// the library nvidia-smi itself is built on, loaded at run time (see host/nvml/Nvml.h).
//
// It lists what nvidia-smi would, and more of it: every GPU by index with its UUID, name, PCI bus
// id, memory and minor number, and after each GPU whose MIG mode is on, that GPU's MIG instances
// with their placement. When NVML cannot be used at all (no driver, a driver/library version
// mismatch) enumerate() throws a DiscoveryError whose what() starts "NVML is not usable: ", so
// that a caller can fall back to NvidiaSmiEnumerator and log the reason.
#pragma once

#include <optional>
#include <string>

#include "host/enumeration/GpuEnumerator.h"

namespace flink::discovery {

/// The message prefix of every DiscoveryError that means "NVML itself cannot be used" (as
/// opposed to "NVML works and there is no GPU").
inline constexpr const char* kNvmlNotUsablePrefix = "NVML is not usable: ";

/// Lists the host's GPUs through NVML. Each enumerate() is one NVML session: nvmlInit_v2, the
/// queries, nvmlShutdown (always, also when it throws). The library is loaded on the first call
/// and kept (NvmlLibrary::load). Thread-safe: NVML is, and nothing here is shared but the
/// library.
class NvmlEnumerator : public GpuEnumerator {
 public:
  /// `library`: what to dlopen; nullopt: $FLINK_GPU_NVML_LIBRARY, else libnvidia-ml.so.1.
  /// `withTopology`: also read how the GPUs are connected (Enumeration::topology; see
  /// NvmlTopology.h). Each GPU's NUMA node and CPU affinity are read either way.
  explicit NvmlEnumerator(std::optional<std::string> library = std::nullopt,
                          bool withTopology = false)
      : library_(std::move(library)), withTopology_(withTopology) {}

  /// Whole GPUs in NVML's index order (identifier: the decimal index; uuid "GPU-…"; name;
  /// pciBusId, NVML's busId "00000000:19:00.0"; memoryTotalMiB, bytes / 1048576 rounded down;
  /// minorNumber; migEnabled: the current MIG mode is enabled), each GPU with MIG on followed by
  /// its MIG instances in slot order (identifier and uuid "MIG-…"; name; memoryTotalMiB, the
  /// instance's; pciBusId, the parent's; mig: parent index, GPU and compute instance ids).
  /// Empty MIG slots (NOT_FOUND, INVALID_ARGUMENT) are skipped.
  ///
  /// A GPU is left out (Enumeration::leftOut, and a kGpuLeftOut notice "NVML: GPU 1 left out: …")
  /// when NVML gives no handle for it, or when one of its queries fails with GPU_IS_LOST,
  /// UNKNOWN or NO_PERMISSION; so is a MIG instance without a handle or UUID, or with such a
  /// failure. Except: a GPU in MIG mode answers NO_PERMISSION for its memory to a caller without
  /// privileges, as NVML does; its memory.total is then unknown, without a word. Any other failed
  /// property is nullopt, with a warning "NVML: …" unless it is "not supported".
  /// @throws DiscoveryError "NVML is not usable: …" (kind kNvmlVersionMismatch when the init
  /// fails with NVML_ERROR_LIB_RM_VERSION_MISMATCH, else kNvmlNotUsable) when the library cannot
  /// be loaded (with dlerror's text; "… is there but cannot be loaded" when the file exists), lacks
  /// a required function (named), or the init or nvmlDeviceGetCount_v2 fails (with
  /// nvmlErrorString's text and the code); "no NVIDIA GPU on this host: …" when NVML lists none
  /// (nvmlInitWithFlags(NVML_INIT_FLAG_NO_GPUS) lets a host with the driver and no GPU say so);
  /// "no usable NVIDIA GPU: …", naming each GPU and its error, when every GPU is left out.
  Enumeration enumerate() override;

 private:
  std::optional<std::string> library_;
  bool withTopology_ = false;
};

/// One try at NVML, for callers that do without it (or fall back to nvidia-smi) when it cannot
/// be used.
struct NvmlAttempt {
  /// What NVML listed; nullopt when it cannot be used.
  std::optional<Enumeration> found;
  /// Why it cannot ("NVML is not usable: …"), when `found` is nullopt.
  std::string problem;
  /// The library is simply not installed (a host without the driver), as opposed to present but
  /// failing (a driver/library version mismatch, a library that cannot be loaded: wrong
  /// architecture, missing dependency), which is worth a warning.
  bool libraryAbsent = false;
  /// The init failed with NVML_ERROR_LIB_RM_VERSION_MISMATCH: the driver was upgraded and the
  /// old kernel module is still loaded (DiscoveryError::Kind::kNvmlVersionMismatch).
  bool versionMismatch = false;
};

/// Loads NVML ($FLINK_GPU_NVML_LIBRARY, else libnvidia-ml.so.1) and enumerates through it.
/// @throws DiscoveryError when NVML works but lists no GPU: that is an answer, not a
///         reason to ask anything else.
/// `withTopology`: as NvmlEnumerator's.
NvmlAttempt attemptNvmlEnumeration(bool withTopology = false);

}  // namespace flink::discovery
