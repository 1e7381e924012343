// The kernel's own list of NVIDIA GPUs: /proc/driver/nvidia/gpus/<PCI bus id>/information, one
// folder per GPU the loaded kernel module drives.
//
// It is read when NVML and nvidia-smi cannot answer because the NVIDIA driver was upgraded
// without a reboot: the libraries are the new version, the kernel module still the old one, and
// nvmlInit fails with NVML_ERROR_LIB_RM_VERSION_MISMATCH (nvidia-smi with "Failed to initialize
// NVML: Driver/library version mismatch"). That is exactly when an operator runs `status` and
// `drain`, so those name the GPUs from here. CUDA fails the same way, so the default discovery
// hands none of them out. The list also says which GPUs the kernel excludes ("GPU Excluded:
// Yes", NVreg_ExcludedGpus): no source hands those out.
//
// An `information` file is lines of "<key>:<blanks><value>" (tabs and spaces), e.g.
//
//   Model:           NVIDIA H200
//   GPU UUID:        GPU-8932f937-d72c-4106-c12f-20bd9faed9f6
//   Bus Location:    0000:19:00.0
//   Device Minor:    0
//   GPU Excluded:    No
//
// among others (IRQ, Video BIOS, Bus Type, DMA Size, DMA Mask) that are not read. A reader takes
// keys it does not know, and lines without a colon, without a word: drivers add lines.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "host/enumeration/GpuEnumerator.h"

namespace flink::discovery {

/// Where the NVIDIA driver's /proc folder is, for tests and for a container that mounts the
/// host's elsewhere: it stands in for /proc/driver/nvidia alone (never for /proc/<pid>).
inline constexpr const char* kProcRootVariable = "FLINK_GPU_PROC_ROOT";

/// $FLINK_GPU_PROC_ROOT where set and non-empty, else /proc/driver/nvidia.
std::filesystem::path nvidiaProcRoot();

/// One GPU of the kernel's list.
struct KernelGpu {
  /// NVML's form (an 8-digit domain, upper-case hex: "00000000:19:00.0"), from "Bus Location",
  /// else from the folder's name.
  std::string pciBusId;
  /// "Model": "NVIDIA H200".
  std::optional<std::string> model;
  /// "GPU UUID", canonical ("GPU-…", lower-case hex); nullopt when absent or not a GPU UUID.
  std::optional<std::string> uuid;
  /// "Device Minor": the N of /dev/nvidiaN.
  std::optional<unsigned> minor;
  /// "GPU Excluded: Yes": the kernel module leaves it to no one (NVreg_ExcludedGpus).
  bool excluded = false;
  /// The file it was read from, for messages.
  std::filesystem::path file;

  /// "00000000:19:00.0 (GPU-…, NVIDIA H200)", of what is known.
  std::string describe() const;
};

struct KernelGpus {
  /// Whether <root>/gpus exists: the kernel module is loaded (or the tests' tree is there).
  bool present = false;
  /// By PCI bus id, ascending: NVML's default order (PCI bus order), excluded GPUs included.
  std::vector<KernelGpu> gpus;
  /// What was skipped or read with a surprise, each naming its file: "skipped …/information: …".
  std::vector<Notice> notices;

  /// The GPUs not excluded, in bus order: NVML's index i is the i-th of them (NVML lists no
  /// excluded GPU).
  std::vector<const KernelGpu*> listed() const;
  /// Those marked "GPU Excluded: Yes".
  std::vector<const KernelGpu*> excludedGpus() const;
  /// listed() as devices: identifier the index ("0", "1", …), uuid, name (the model), pciBusId,
  /// minorNumber. What UnitIndex::of takes, so that an index or a UUID names one of them exactly
  /// as it names NVML's GPUs.
  std::vector<GpuDevice> devices() const;
};

/// Parses one `information` file's text. `folderName` is its folder's (a PCI bus id), the bus id
/// when the file has no "Bus Location"; `file` is recorded for messages. Never throws.
/// @returns nullopt with `why` set when the entry must be skipped: no bus id (neither the file
///          nor the folder's name gives one), or none of the lines the driver writes.
std::optional<KernelGpu> parseKernelGpuInformation(std::string_view text,
                                                   std::string_view folderName,
                                                   const std::filesystem::path& file,
                                                   std::vector<Notice>& notices, std::string& why);

/// Reads <root>/gpus/*/information. Never throws: an entry that cannot be read or parsed is
/// skipped with a notice naming its file; two entries of one bus id or UUID keep the first.
KernelGpus readKernelGpus(const std::filesystem::path& root = nvidiaProcRoot());

/// What to do after a driver upgrade without a reboot, said wherever the mismatch is: "reboot,
/// or once nothing uses the GPUs reload the kernel module: rmmod … && modprobe nvidia".
std::string_view versionMismatchRemedy() noexcept;

/// "the kernel's driver knows 2 GPU(s): 0 00000000:19:00.0 (GPU-…, NVIDIA H200), 1 …" (with
/// the index each would have), and those it excludes; "the kernel's driver lists no GPU (…)"
/// when it knows none, or "<root>/gpus does not exist" when the module's folder is not there.
std::string describeKernelList(const KernelGpus& kernel,
                               const std::filesystem::path& root = nvidiaProcRoot());

/// The GPU of `kernel` marked excluded that `device` is (by UUID, else by PCI bus id: a MIG
/// instance carries its GPU's); nullptr when it is none.
const KernelGpu* excludedGpuOf(const GpuDevice& device, const KernelGpus& kernel);

}  // namespace flink::discovery
