// findVendorUnits: the AMD and Intel enumerations as units for grantUnits.
#include <cstdlib>
#include <string>
#include <utility>

#include "host/amd/AmdGpus.h"
#include "host/defaultdiscovery/DefaultDiscovery.h"
#include "host/enumeration/NvidiaSmi.h"
#include "host/intel/IntelGpus.h"

namespace flink::defaultdiscovery {

discovery::VendorOptions vendorOptionsFor(const DiscoveryArguments& args, discovery::Vendor vendor,
                                          Report& report) {
  const std::string program = std::string(discovery::vendorName(vendor)) + "-gpu-discovery";
  if (args.gpus) {
    throw discovery::DiscoveryError(
        "--gpus is an option of nvidia-gpu-discovery, not of " + program + ": the " +
        std::string(discovery::vendorName(vendor)) + " discovery reads the host's GPUs from sysfs");
  }
  if (args.mig) {
    throw discovery::DiscoveryError(
        "--mig is NVIDIA's (MIG instances); " + program + " hands out whole GPUs" +
        (vendor == discovery::Vendor::kAmd ? " and the compute partitions the GPUs are set to"
                                           : " or tiles, as ZE_FLAT_DEVICE_HIERARCHY says"));
  }
  if (args.share) {
    throw discovery::DiscoveryError("--share is not for " + program +
                                    " yet: only NVIDIA GPUs are shared (flink-gpu share)");
  }
  if (args.select) {
    throw discovery::DiscoveryError("--select is not for " + program +
                                    " yet: only NVIDIA GPUs are chosen by what they are");
  }
  if (args.health != health::HealthMode::kSkip) {
    report.notes.push_back(Notice::note("ignoring --health " +
                                        std::string(health::healthModeName(args.health)) + ": " +
                                        program + " keeps no health records yet"));
  }
  return vendorOptions(report);
}

discovery::VendorOptions vendorOptions(Report& report) {
  discovery::VendorOptions options;
  const discovery::TimeoutSetting timeout =
      discovery::parseNvidiaSmiTimeout(std::getenv("NVIDIA_SMI_TIMEOUT"));
  if (timeout.note) report.notes.push_back(*timeout.note);
  options.tools.timeout = timeout.timeout;
  return options;
}

HostUnits findVendorUnits(discovery::Vendor vendor, const discovery::VendorOptions& options,
                          Report& report) {
  discovery::VendorHost found;
  try {
    found = vendor == discovery::Vendor::kAmd ? amd::findAmdUnits(options)
                                              : intel::findIntelUnits(options);
  } catch (const discovery::DiscoveryError& e) {
    for (const std::string& line : e.details()) report.details.push_back(Notice::detail(line));
    throw DiscoveryFailure(DiscoveryFailure::Stage::kEnumeration, e.what(), std::move(report),
                           e.kind());
  }
  // What was left out, and why, is said at every verbosity, as for NVIDIA's lost GPUs.
  report.details.insert(report.details.end(), found.notices.begin(), found.notices.end());
  HostUnits host;
  host.source = discovery::HostGpuSource::kVendor;
  for (const discovery::VendorUnit& unit : found.units) host.gpus.push_back(unit.recordName);
  host.related = found.related;
  host.index = std::make_shared<const discovery::UnitIndex>(discovery::UnitIndex::of(found));
  host.vendorHost = std::move(found);
  return host;
}

}  // namespace flink::defaultdiscovery
