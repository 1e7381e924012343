// The host's GPUs for the operator's commands (see HostGpuListing.h).
#include "commands/HostGpuListing.h"

#include <cstdlib>
#include <exception>

#include "Console.h"
#include "host/enumeration/KernelGpus.h"
#include "host/enumeration/NvidiaSmi.h"
#include "host/enumeration/NvmlEnumerator.h"
#include "host/enumeration/VisibleDevices.h"
#include "util/Notice.h"
#include "util/Strings.h"

namespace flink::cli {

std::vector<discovery::GpuDevice> nvmlDevicesOrNone() {
  try {
    return discovery::NvmlEnumerator().enumerate().devices;
  } catch (const std::exception&) {
    return {};
  }
}

std::vector<discovery::GpuDevice> nvmlOrKernelDevices() {
  try {
    return discovery::NvmlEnumerator().enumerate().devices;
  } catch (const discovery::DiscoveryError& e) {
    if (e.kind() == discovery::DiscoveryError::Kind::kNvmlVersionMismatch) {
      return discovery::readKernelGpus().devices();
    }
    return {};
  } catch (const std::exception&) {
    return {};
  }
}

HostLook nvmlLookOrNone() {
  HostLook look;
  try {
    discovery::Enumeration found = discovery::NvmlEnumerator().enumerate();
    look.coverage = discovery::coverageOf(found, true);
    look.devices = std::move(found.devices);
  } catch (const std::exception& e) {
    look.coverage.cannotTell = e.what();
  }
  return look;
}

HostLook lookAtHost() {
  HostLook look;
  try {
    discovery::HostGpus host = listHostGpus(true);
    look.coverage = discovery::coverageOf(host.found, true);
    look.devices = std::move(host.found.devices);
  } catch (const discovery::DiscoveryError& e) {
    look.coverage.cannotTell = e.what();
  }
  return look;
}

void addStaleDeclarations(const sharing::ParsedDeclarations& parsed, HostView& host) {
  if (!host.hostUnits || !host.coverage.whole()) return;
  for (const sharing::Declaration& declaration : parsed.declarations) {
    if (sharing::isStale(declaration, *host.hostUnits, host.coverage)) {
      host.stale.push_back(
          staleEntry(StaleEntry::Kind::kSharing, declaration.gpu, declaration.uuid));
    }
  }
}

discovery::HostGpus listHostGpus(bool mig, bool kernelListOnMismatch) {
  discovery::HostGpuOptions options;
  options.mig = mig;
  options.kernelListOnMismatch = kernelListOnMismatch;
  options.nvidiaSmi.timeout =
      discovery::parseNvidiaSmiTimeout(std::getenv("NVIDIA_SMI_TIMEOUT")).timeout;
  discovery::HostGpus host = discovery::enumerateHostGpus(options);
  for (const Notice& notice : host.found.notices) {
    if (notice.kind == Notice::Kind::kGpuLeftOut) {
      printWarning(notice.text);
    } else if (host.source == discovery::HostGpuSource::kKernel) {
      // Why the kernel's list is used, and what reading it found: said every time.
      if (notice.kind == Notice::Kind::kNote) {
        printNote(notice.text);
      } else {
        printWarning(notice.text);
      }
    }
  }
  return host;
}

std::vector<std::string> whatTheHostHas(const discovery::HostGpus& host, bool mig) {
  std::vector<std::string> listed;
  for (const discovery::GpuDevice& device : host.found.devices) {
    if (device.isMigInstance() == mig) listed.push_back(discovery::describeDevice(device));
  }
  const std::string source(discovery::sourceName(host.source));
  std::vector<std::string> lines{listed.empty()
                                     ? source + " lists no " + (mig ? "MIG instance" : "GPU")
                                     : source + " lists " + strings::join(listed, ", ")};
  for (const discovery::LeftOutGpu& gpu : host.found.leftOut) {
    lines.push_back("left out by " + source + ": " + gpu.describe());
  }
  return lines;
}

}  // namespace flink::cli
