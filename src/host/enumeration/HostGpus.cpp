#include "host/enumeration/HostGpus.h"

#include "host/enumeration/KernelGpus.h"
#include "host/enumeration/NvmlEnumerator.h"

namespace flink::discovery {

std::string_view sourceName(HostGpuSource source) noexcept {
  switch (source) {
    case HostGpuSource::kListed:
      return "--gpus";
    case HostGpuSource::kNvml:
      return "NVML";
    case HostGpuSource::kNvidiaSmi:
      return "nvidia-smi";
    case HostGpuSource::kVendor:
      return "the AMD or Intel discovery";
    case HostGpuSource::kKernel:
      return "the kernel's driver";
  }
  return "?";
}

HostGpus enumerateHostGpus(const HostGpuOptions& options) {
  if (options.listed)
    return {StaticEnumerator(*options.listed).enumerate(), HostGpuSource::kListed};

  discovery::NvmlAttempt attempt = discovery::attemptNvmlEnumeration(options.topology);
  if (attempt.found) return {std::move(*attempt.found), HostGpuSource::kNvml};
  const bool nvmlAbsent = attempt.libraryAbsent;

  NvidiaSmiOptions smi = options.nvidiaSmi;
  smi.mig = options.mig;
  const Notice note = Notice::note(attempt.problem + "; nvidia-smi was asked instead");
  try {
    HostGpus gpus{NvidiaSmiEnumerator(smi).enumerate(), HostGpuSource::kNvidiaSmi};
    if (!nvmlAbsent) gpus.found.notices.insert(gpus.found.notices.begin(), note);
    return gpus;
  } catch (const DiscoveryError& e) {
    if (nvmlAbsent) {
      // No driver library at all: nvidia-smi's own failure ("not found") is the message.
      std::vector<std::string> details = e.details();
      details.push_back(note.line());
      throw DiscoveryError(e.what(), std::move(details), e.kind());
    }
    // The driver is there but NVML fails (a version mismatch, a lost GPU): that is the cause to
    // lead with; nvidia-smi, built on NVML, usually fails for the same reason.
    std::vector<std::string> details{"nvidia-smi, asked instead, failed too: " +
                                     std::string(e.what())};
    details.insert(details.end(), e.details().begin(), e.details().end());
    if (!attempt.versionMismatch) {
      throw DiscoveryError(attempt.problem, std::move(details),
                           DiscoveryError::Kind::kNvmlNotUsable);
    }
    // An upgrade without a reboot: the kernel still knows the GPUs, and says which.
    const KernelGpus kernel = readKernelGpus();
    if (options.kernelListOnMismatch && !kernel.listed().empty()) {
      HostGpus gpus{{}, HostGpuSource::kKernel};
      gpus.found.devices = kernel.devices();
      gpus.found.notices.push_back(Notice::warning(
          attempt.problem + ": the GPUs are the kernel's driver's, in PCI bus order (" +
          (nvidiaProcRoot() / "gpus").string() + "); " + std::string(versionMismatchRemedy())));
      gpus.found.notices.insert(gpus.found.notices.end(), kernel.notices.begin(),
                                kernel.notices.end());
      return gpus;
    }
    details.insert(details.begin(), describeKernelList(kernel));
    for (const Notice& notice : kernel.notices) details.push_back(notice.line());
    throw DiscoveryError(attempt.problem +
                             ": the driver was upgraded and its old kernel module is still "
                             "loaded; CUDA fails the same way, so no GPU is handed out: " +
                             std::string(versionMismatchRemedy()),
                         std::move(details), DiscoveryError::Kind::kNvmlVersionMismatch);
  }
}

}  // namespace flink::discovery
