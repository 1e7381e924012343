// `flink-gpu exec`: allocates GPUs through the coordination file with this process as their
// owner, puts them in CUDA_VISIBLE_DEVICES, and runs the command as its child (ExecChild.h), as
// flock(1) does: exec holds the records' leases itself and waits, so the GPUs stay taken exactly as
// long as the command runs, whatever the command does with its descriptors, its namespaces or its
// children. The command inherits the leases too, so that a process it leaves behind holding them
// keeps its GPUs. When it ends, exec gives back what it recorded and exits with its status. An exec
// run under an exec (`flink-gpu exec … -- flink-gpu exec …`) gets what that one took: one
// allocation per process tree. No record outlives a failed exec: they are given back before
// flink-gpu exits with 127/126, as a shell would.
// With --share the records and leases are shares' (host/coordination/ShareAllocation.h), and the
// environment is host/defaultdiscovery/ChildEnvironment.h's; an MPS share is refused, and given
// back, when its control daemon's socket is not there, since the command would otherwise use the
// GPU outside the daemon.
// The command also gets FLINK_GPU_ALLOCATION_FILE, what it was granted as JSON
// (host/defaultdiscovery/AllocationFile.h), removed once it has ended.
#include "commands/ExecCommand.h"

#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_set>
#include <utility>
#include <vector>

#include "Console.h"
#include "ExitCode.h"
#include "commands/AmountOption.h"
#include "commands/ExecChild.h"
#include "flink/externalresource/gpu/GpuProperties.h"
#include "host/coordination/Coordination.h"
#include "host/coordination/Leases.h"
#include "host/coordination/TreeOwner.h"
#include "host/defaultdiscovery/AllocationFile.h"
#include "host/defaultdiscovery/ChildEnvironment.h"
#include "host/defaultdiscovery/DefaultDiscovery.h"
#include "host/enumeration/DeviceIdentifiers.h"
#include "host/enumeration/GpuEnumerator.h"
#include "host/enumeration/UnitSelector.h"
#include "host/enumeration/Vendor.h"
#include "host/enumeration/VisibleDevices.h"
#include "host/health/HostHealth.h"
#include "host/liveness/HostFacts.h"
#include "host/placement/Placement.h"
#include "host/sharing/MpsDaemon.h"
#include "util/Notice.h"
#include "util/Strings.h"

namespace flink::cli {
namespace {

using defaultdiscovery::EnvironmentChanges;
using defaultdiscovery::kAllocationFileVariable;
using defaultdiscovery::kShareMemoryVariable;
using defaultdiscovery::mpsPipeDirectoryOf;
using defaultdiscovery::shareEnvironment;
using defaultdiscovery::wholeGpuEnvironment;

/// An error whose first line is `cause` and whose further lines are `details`.
void printErrorWithDetails(const std::string& cause, const std::vector<Notice>& details) {
  std::string message = cause;
  for (const Notice& detail : details) message += '\n' + detail.line();
  printError(message);
}

/// What the default discovery said besides its answer (its notes, warnings, GPUs left out and
/// details), each as a flink-gpu warning: exec runs a command the user is waiting for, so all of
/// it is said at the default verbosity, in one form.
void printDiscoveryNotice(const Notice& notice) { printWarning(notice.text); }

using defaultdiscovery::HostUnits;

/// --vendor, nvidia when not given.
discovery::Vendor vendorOf(const ExecOptions& options) {
  return options.vendor.value_or(discovery::Vendor::kNvidia);
}

/// The variables an AMD or Intel command gets for `granted` (record names), from the vendor's
/// rules (VendorHost::environmentFor). nullopt after printing the error: a unit without a UUID
/// for --visible-devices uuid.
std::optional<std::vector<std::pair<std::string, std::string>>> vendorEnvironment(
    const ExecOptions& options, const HostUnits& host, const std::vector<std::string>& granted) {
  const discovery::VendorHost& vendorHost = *host.vendorHost;
  std::vector<const discovery::VendorUnit*> units;
  for (const std::string& gpu : granted) {
    const auto unit = std::find_if(
        vendorHost.units.begin(), vendorHost.units.end(),
        [&](const discovery::VendorUnit& candidate) { return candidate.recordName == gpu; });
    if (unit != vendorHost.units.end()) units.push_back(&*unit);
  }
  try {
    return vendorHost.environmentFor(units, options.visibleDevices == VisibleDevices::kUuid);
  } catch (const std::invalid_argument& e) {
    // The vendor's rule says what is missing; which option asked for it is ours to say.
    printError(std::string("--visible-devices uuid: ") + e.what());
    return std::nullopt;
  }
}

/// The host's units as the default discovery finds them (defaultdiscovery::findHostUnits):
/// --gpus, else NVML, else nvidia-smi; less the unhealthy and drained ones; under an inherited
/// CUDA_VISIBLE_DEVICES, those it allows. Returns nullopt after printing the error, with
/// `exitCode` set.
std::optional<HostUnits> hostGpus(const ExecOptions& options, int& exitCode) {
  if (const discovery::Vendor vendor = vendorOf(options); vendor != discovery::Vendor::kNvidia) {
    defaultdiscovery::Report report;
    try {
      HostUnits host = defaultdiscovery::findVendorUnits(
          vendor, defaultdiscovery::vendorOptions(report), report);
      for (const Notice& notice : report.notices()) printDiscoveryNotice(notice);
      return host;
    } catch (const defaultdiscovery::DiscoveryFailure& e) {
      printErrorWithDetails("cannot find the " + std::string(discovery::vendorName(vendor)) +
                                " GPUs of this host: " + e.what(),
                            e.report().details);
      for (const Notice& note : e.report().notes) printDiscoveryNotice(note);
      exitCode = kDiscoveryFailed;
      return std::nullopt;
    }
  }
  defaultdiscovery::HostUnitsOptions hostOptions;
  if (options.gpus) {
    try {
      hostOptions.listed = discovery::parseGpuList(*options.gpus);
    } catch (const discovery::DiscoveryError& e) {
      printError(e.what());
      exitCode = kUsageError;
      return std::nullopt;
    }
    if (hostOptions.listed->empty()) {
      printError("no GPU given: the list of --gpus is empty");
      exitCode = kUsageError;
      return std::nullopt;
    }
  }
  hostOptions.mig = options.mig;
  if (options.select) {
    try {
      hostOptions.select = discovery::UnitSelector::parse(*options.select);
    } catch (const discovery::SelectorError& e) {
      printError(e.what());
      exitCode = kUsageError;
      return std::nullopt;
    }
  }
  hostOptions.topology = options.placement == placement::Policy::kTopology;
  hostOptions.health = options.health;
  hostOptions.coordinationFile = options.coordination.path;
  defaultdiscovery::Report report;
  try {
    HostUnits host = defaultdiscovery::findHostUnits(hostOptions, report);
    for (const Notice& notice : report.notices()) printDiscoveryNotice(notice);
    return host;
  } catch (const defaultdiscovery::DiscoveryFailure& e) {
    const bool enumeration = e.stage() == defaultdiscovery::DiscoveryFailure::Stage::kEnumeration;
    printErrorWithDetails(
        (enumeration ? std::string("cannot find the GPUs of this host: ") : std::string()) +
            e.what(),
        e.report().details);
    for (const Notice& note : e.report().notes) printDiscoveryNotice(note);
    if (enumeration)
      printHint("on a host without NVIDIA tools, list its GPUs yourself: --gpus 0,1");
    // --gpus naming a GPU twice or ambiguously is the command line's fault.
    exitCode = e.stage() == defaultdiscovery::DiscoveryFailure::Stage::kArguments
                   ? kUsageError
                   : kDiscoveryFailed;
    return std::nullopt;
  }
}

/// What the command's CUDA_VISIBLE_DEVICES lists for the units granted: the inherited mask's own
/// entries; else with --visible-devices uuid each whole GPU's UUID (MIG units are UUIDs already);
/// else the units as the host numbers them. nullopt after printing the error, when a UUID is
/// unknown.
std::optional<std::vector<std::string>> visibleDevicesFor(const ExecOptions& options,
                                                          const HostUnits& host,
                                                          const std::vector<std::string>& granted) {
  if (host.masked || options.visibleDevices != VisibleDevices::kUuid)
    return host.answerFor(granted);
  std::vector<std::string> uuids;
  for (const std::string& gpu : granted) {
    if (gpu.starts_with("GPU-") || gpu.starts_with("MIG-")) {
      uuids.push_back(gpu);
      continue;
    }
    const auto device = std::find_if(
        host.devices.begin(), host.devices.end(),
        [&](const discovery::GpuDevice& d) { return !d.isMigInstance() && d.identifier == gpu; });
    if (device == host.devices.end() || !device->uuid) {
      printError("--visible-devices uuid: the UUID of GPU " + gpu + " is not known" +
                 (options.gpus ? std::string(" (--gpus lists it by index; list it by UUID)")
                               : std::string()));
      return std::nullopt;
    }
    uuids.push_back(*device->uuid);
  }
  return uuids;
}

/// NVIDIA's documented limitation: a CUDA process sees only one MIG instance, whatever
/// CUDA_VISIBLE_DEVICES lists.
void warnAboutSeveralMigInstances(const std::vector<std::string>& granted) {
  const auto instances = std::count_if(granted.begin(), granted.end(), [](const std::string& gpu) {
    return gpu.starts_with("MIG-");
  });
  if (instances > 1) {
    printWarning("CUDA_VISIBLE_DEVICES holds " + std::to_string(instances) +
                 " MIG instances, but CUDA enumerates only one MIG instance per process: a CUDA "
                 "program will use only the first");
  }
}

/// --bind-cpus: the CPUs the command should run on — the union of its GPUs' CPUs, within those
/// this process may use. Warns and returns nullopt when that is unknown or empty; throws
/// std::runtime_error with the reason when the affinity cannot be read or set.
std::optional<std::vector<unsigned>> cpusToBind(const std::vector<std::string>& granted,
                                                const std::vector<discovery::GpuDevice>& devices) {
  std::vector<unsigned> wanted;
  const externalresource::gpu::DeviceFinder finder(devices);
  for (const std::string& gpu : granted) {
    const discovery::GpuDevice* device = finder.find(gpu);
    if (device == nullptr || !device->cpus) {
      printWarning("--bind-cpus: the CPU affinity of GPU " + gpu +
                   " is unknown (NVML does not tell it); the command is not bound");
      return std::nullopt;
    }
    wanted.insert(wanted.end(), device->cpus->begin(), device->cpus->end());
  }
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());

  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
    throw std::runtime_error(std::string("sched_getaffinity failed: ") + std::strerror(errno));
  }
  std::vector<unsigned> cpus;
  for (unsigned cpu : wanted) {
    if (cpu < CPU_SETSIZE && CPU_ISSET(cpu, &allowed)) cpus.push_back(cpu);
  }
  if (cpus.empty()) {
    printWarning("--bind-cpus: none of the CPUs close to GPU(s) " + strings::join(granted, ",") +
                 " (" + placement::formatCpuList(wanted) +
                 ") may be used by this process; the command is not bound");
    return std::nullopt;
  }
  return cpus;
}

/// Sets this process's CPU affinity (the command inherits it).
/// @throws std::runtime_error naming the reason.
void bindTo(const std::vector<unsigned>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (unsigned cpu : cpus) CPU_SET(cpu, &set);
  if (::sched_setaffinity(0, sizeof set, &set) != 0) {
    throw std::runtime_error("sched_setaffinity to CPUs " + placement::formatCpuList(cpus) +
                             " failed: " + std::strerror(errno));
  }
}

/// Gives back exactly what `grant` recorded and drops its leases: the command will not run, or
/// has ended. `failure` begins the warning when the records cannot be given back.
void giveBackGrant(const ExecOptions& options, defaultdiscovery::Grant& grant,
                   std::string_view failure) {
  try {
    defaultdiscovery::giveBack(options.coordination.path, grant.records);
  } catch (const store::StoreError& e) {
    printWarning(std::string(failure) + e.what());
  }
  grant.leases.clear();
}

/// Gives back what was just recorded, after the command could not be started.
void releaseAfterFailedExec(const ExecOptions& options, defaultdiscovery::Grant& grant) {
  giveBackGrant(options, grant, "could not release the GPUs allocated for the command: ");
}

/// What a process tree already holds of `host`: the GPUs that the records of this process, or of
/// its nearest ancestor that has records of `host`'s GPUs, name (by pid and start time). What an
/// exec run under an exec inherits, since the outer one, its parent or an ancestor, owns them.
struct HeldByThisProcess {
  std::vector<std::string> gpus;
  /// Those of `gpus` held as a share.
  std::vector<std::string> shares;
  /// The process whose records name `gpus` (this one, or the ancestor); 0 when `gpus` is empty.
  pid_t owner = 0;
  /// Units of the host that owner holds but that this exec may not hand out (--select leaves
  /// them out, or their health, or a mask), in `host.index`'s spelling.
  std::vector<std::string> leftOut;
};

/// What the process tree this exec runs in already holds of its vendor's GPUs: what the nearest
/// process of its ancestry that has records of them, or holds leases of them, owns
/// (coordination::treeOwner), as `host` can hand it out, in `host`'s order; and what it holds
/// that `host` cannot hand out (leftOut). nullopt after printing the error.
std::optional<HeldByThisProcess> heldByThisProcessTree(const ExecOptions& options,
                                                       const HostUnits& host) {
  // The records as they are: treeOwner matches them to this process's ancestry itself.
  coordination::ParsedRecords read;
  try {
    read = coordination::readRecords(options.coordination.path);
  } catch (const store::StoreError& e) {
    printError(e.what());
    return std::nullopt;
  }
  // Another vendor's units are another allocation's: an AMD exec under a worker holding NVIDIA
  // GPUs allocates its own.
  const std::string_view vendor = discovery::vendorName(vendorOf(options));
  std::vector<coordination::Record>& records = read.records;
  records.erase(std::remove_if(records.begin(), records.end(),
                               [vendor](const coordination::Record& record) {
                                 return device::vendorOfUnit(record.gpu) != vendor;
                               }),
                records.end());
  std::vector<coordination::HeldLease> leases;
  for (coordination::HeldLease& lease : coordination::heldLeases(options.coordination.path)) {
    if (coordination::vendorOfLeaseName(lease.name) == vendor) leases.push_back(std::move(lease));
  }
  const std::optional<coordination::TreeOwner> owner =
      coordination::treeOwner(records, leases, ::getpid());
  if (!owner) return HeldByThisProcess{};
  std::unordered_set<std::string> own;
  std::unordered_set<std::string> ownShares;
  std::vector<std::string> unknown;  // what the owner holds that this host's index does not know
  for (const std::size_t i : owner->records) {
    const std::vector<std::string> units = coordination::unitsNamedBy(records[i], *host.index);
    if (units.empty()) unknown.push_back(records[i].gpu);
    for (const std::string& unit : units) {
      if (records[i].share) ownShares.insert(unit);
      own.insert(unit);
    }
  }
  for (const coordination::LeasedUnit& leased : coordination::unitsOfLeases(
           owner->leases, *host.index, liveness::HostFacts::system().reader())) {
    const std::string& unit = (*host.index)[leased.unit].id;
    if (leased.share) ownShares.insert(unit);
    own.insert(unit);
  }
  HeldByThisProcess held;
  for (const std::string& gpu : host.gpus) {
    if (!own.count(gpu)) continue;
    held.gpus.push_back(gpu);
    if (ownShares.count(gpu)) held.shares.push_back(gpu);
  }
  if (!held.gpus.empty()) held.owner = owner->owner.pid;
  for (const std::string& gpu : own) {
    if (std::find(held.gpus.begin(), held.gpus.end(), gpu) == held.gpus.end()) {
      held.leftOut.push_back(gpu);
    }
  }
  std::sort(held.leftOut.begin(), held.leftOut.end());
  held.leftOut.insert(held.leftOut.end(), unknown.begin(), unknown.end());
  if (held.gpus.empty() && !held.leftOut.empty()) held.owner = owner->owner.pid;
  return held;
}

/// Checks the options of --share and --share-placement; nullopt when they are right, else the
/// usage error, printed. `placement` gets --share-placement's value.
std::optional<int> checkShareOptions(const ExecOptions& options,
                                     coordination::SharePlacement& placement) {
  if (options.sharePlacement) {
    const std::optional<coordination::SharePlacement> parsed =
        coordination::parseSharePlacement(*options.sharePlacement);
    if (!parsed) {
      printError("invalid --share-placement '" + strings::quoteForMessage(*options.sharePlacement) +
                 "': expected pack or spread");
      return kUsageError;
    }
    if (!options.share) {
      printError(
          "--share-placement applies only with --share: it says which GPUs' shares go first");
      return kUsageError;
    }
    placement = *parsed;
  }
  if (options.share && options.mig) {
    printError("--share cannot be used with --mig: MIG instances are not shared");
    return kUsageError;
  }
  return std::nullopt;
}

/// Sets and unsets what `changes` says. Returns the error for a person when a change fails.
std::optional<std::string> applyEnvironment(const EnvironmentChanges& changes) {
  for (const std::string& name : changes.unset) {
    if (::unsetenv(name.c_str()) != 0) {
      return "cannot unset " + name + ": " + std::strerror(errno);
    }
  }
  for (const auto& [name, value] : changes.set) {
    if (::setenv(name.c_str(), value.c_str(), 1) != 0) {
      return "cannot set " + name + ": " + std::strerror(errno);
    }
  }
  return std::nullopt;
}

/// What an exec --share's CUDA_VISIBLE_DEVICES lists for the GPUs `granted`: as for whole GPUs
/// (visibleDevicesFor), but without --visible-devices an MPS share gets its GPU's UUID, since an
/// MPS daemon started under a mask numbers the GPUs its own way, and a UUID names the same GPU
/// either way. An inherited mask's own entries still win. nullopt after printing the error.
std::optional<std::vector<std::string>> shareVisibleDevices(
    const ExecOptions& options, const HostUnits& host, const std::vector<std::string>& granted,
    const std::vector<defaultdiscovery::ShareGrant>& shares);

/// Gives back the shares `grant` recorded and drops its leases: the command will not run.
void giveBackShares(const ExecOptions& options, defaultdiscovery::Grant& grant) {
  giveBackGrant(options, grant, "could not give back the GPU shares allocated for the command: ");
}

/// What the allocation file says of `granted` (host identifiers, or AMD's and Intel's record
/// names), in the order of the command's visible-devices variable: each unit's place there, what
/// the host knows of it (nothing made up), its share (`shares`, parallel, for a share); `owner`,
/// whose records hold them; `cpus`, those --bind-cpus bound the command to.
defaultdiscovery::Allocation allocationOf(const HostUnits& host,
                                          const std::vector<std::string>& granted,
                                          const std::vector<defaultdiscovery::ShareGrant>& shares,
                                          pid_t owner,
                                          const std::optional<std::vector<unsigned>>& cpus);

/// Gives the command FLINK_GPU_ALLOCATION_FILE for `allocation`, and returns what removes the file
/// once the command has ended (empty when there is nothing of this exec's to remove). A nested exec
/// (`nested`, the GPUs an enclosing one's) keeps the enclosing file when it takes what that lists,
/// else writes its own into the enclosing file's folder, which the enclosing exec removes: it
/// becomes its command, and cannot remove anything afterwards. Where no file can be written, a
/// warning says so and the command runs without the variable: it is a convenience, and the
/// command's GPUs are its CUDA_VISIBLE_DEVICES all the same.
defaultdiscovery::AllocationFile provideAllocationFile(defaultdiscovery::Allocation allocation,
                                                       bool nested);

/// Removes what `file` removes once the command has ended, with a warning for what it leaves (a
/// folder replaced during the command).
void removeAllocationFile(defaultdiscovery::AllocationFile& file);

/// Runs the command and returns exec's exit status: the command's (128 + N when signal N ended
/// it), or 127/126 when it cannot be run, after giving `grant` back. `nested`: the GPUs are an
/// enclosing exec's, which holds them and waits (`grant` is empty): this process becomes the
/// command (execvp), and returns only when that fails. Else the command runs as this process's
/// child (ExecChild.h), and what `grant` recorded goes back when it ends. `visible`: the units, for
/// the message.
int runCommand(const ExecOptions& options, defaultdiscovery::Grant& grant,
               const std::string& visible, bool nested);

}  // namespace

int runExec(const ExecOptions& options) {
  const std::optional<std::int64_t> parsedAmount = parseAmountOption(options.amount);
  if (!parsedAmount) return kUsageError;
  if (options.command.empty()) {
    printError("no command to run: give it after --, e.g. flink-gpu exec --amount 1 -- nvidia-smi");
    return kUsageError;
  }
  if (options.mig && options.gpus) {
    printError(
        "--mig cannot be used with --gpus: the GPUs listed are handed out as they are; "
        "list MIG instances there by their MIG-... UUIDs instead");
    return kUsageError;
  }
  coordination::SharePlacement sharePlacement = coordination::SharePlacement::kPack;
  if (const std::optional<int> usage = checkShareOptions(options, sharePlacement)) return *usage;

  const discovery::Vendor vendor = vendorOf(options);
  if (vendor != discovery::Vendor::kNvidia) {
    const std::string name(discovery::vendorName(vendor));
    for (const auto& [given, option] :
         {std::pair{options.gpus.has_value(), "--gpus"}, std::pair{options.mig, "--mig"},
          std::pair{options.bindCpus, "--bind-cpus"}, std::pair{options.share, "--share"},
          std::pair{options.select.has_value(), "--select"}}) {
      if (given) {
        printError(std::string(option) + " is for NVIDIA GPUs; it cannot be used with --vendor " +
                   name);
        return kUsageError;
      }
    }
  }

  int exitCode = kSuccess;
  std::optional<HostUnits> host = hostGpus(options, exitCode);
  if (!host) return exitCode;
  const auto amount = static_cast<std::size_t>(*parsedAmount);

  const coordination::Owner owner = coordination::Owner::of(::getpid());
  // `flink-gpu exec … -- flink-gpu exec …`: the inner one, the outer one's command, gets what the
  // outer one took and holds for it, one allocation per process tree.
  const std::optional<HeldByThisProcess> inherited = heldByThisProcessTree(options, *host);
  if (!inherited) return kDiscoveryFailed;
  const bool nested = !inherited->gpus.empty();
  if (!nested && !inherited->leftOut.empty()) {
    // The tree's one allocation is of other GPUs than this exec may hand out: a second one would
    // give the tree more GPUs than its owner was granted, unseen by it.
    std::vector<std::string> narrowing;
    if (options.select) {
      narrowing.push_back("--select " + strings::quoteForMessage(*options.select));
    }
    if (options.gpus) narrowing.push_back("--gpus " + strings::quoteForMessage(*options.gpus));
    if (options.mig) {
      narrowing.push_back("--mig");
    } else if (std::any_of(inherited->leftOut.begin(), inherited->leftOut.end(),
                           [](const std::string& unit) { return unit.starts_with("MIG-"); })) {
      narrowing.push_back("MIG instances are units only with --mig");
    }
    narrowing.push_back("a mask, or their health");
    printError("this process already holds GPU(s) " + strings::join(inherited->leftOut, ",") +
               " from process " + std::to_string(inherited->owner) +
               ", which started it, and gets no other: one allocation per process tree; this "
               "exec cannot hand those out (" +
               strings::join(narrowing, ", ") + ")");
    return kDiscoveryFailed;
  }
  std::vector<std::string> granted;
  // Its leases live while the command runs, here and in the command, which inherits their
  // descriptors.
  defaultdiscovery::Grant grant;
  if (!inherited->shares.empty()) {
    // The share's environment is the outer exec's, already in this one's: a second exec could
    // only repeat or spoil it.
    printError("this process already holds a share of GPU(s) " +
               strings::join(inherited->shares, ",") + " from process " +
               std::to_string(inherited->owner) +
               ", which started it, and gets nothing more: one allocation per process tree; run "
               "the command without this flink-gpu exec (its environment already names the "
               "share)");
    return kDiscoveryFailed;
  }
  if (!inherited->gpus.empty()) {
    if (options.share) {
      printError("this process already holds GPU(s) " + strings::join(inherited->gpus, ",") +
                 " whole from process " + std::to_string(inherited->owner) +
                 ", which started it, and gets no share besides: one allocation per process "
                 "tree");
      return kDiscoveryFailed;
    }
    if (inherited->gpus.size() < amount) {
      printError("this process already holds GPU(s) " + strings::join(inherited->gpus, ",") +
                 " from process " + std::to_string(inherited->owner) +
                 ", which started it, and gets no more: one allocation per process tree (" +
                 std::to_string(amount) + " requested)");
      return kDiscoveryFailed;
    }
    granted.assign(inherited->gpus.begin(),
                   inherited->gpus.begin() + static_cast<std::ptrdiff_t>(amount));
  } else {
    // The default discovery's step, recorded for this process and leased. The command holds the
    // leases' descriptors too, so the GPUs stay held while any process it started holds them,
    // even once this one is gone.
    defaultdiscovery::GrantRequest request;
    request.amount = amount;
    request.amountText = std::to_string(amount);
    request.coordination = true;
    request.coordinationFile = options.coordination.path;
    request.owner = owner;
    request.lease = true;
    request.placement = options.placement;
    request.noteReclaimed = verbosity() >= Verbosity::kVerbose;
    request.oneKind = options.mig;
    request.share = options.share;
    request.sharePlacement = sharePlacement;
    request.warnWithoutMpsDaemon = false;  // exec refuses to run the command then, below
    request.foreign = options.foreign;
    defaultdiscovery::Report report;
    try {
      grant = defaultdiscovery::grantUnits(*host, request, report);
    } catch (const defaultdiscovery::DiscoveryFailure& e) {
      printErrorWithDetails(e.what(), e.report().details);
      for (const Notice& note : e.report().notes) printDiscoveryNotice(note);
      return kDiscoveryFailed;
    }
    for (const Notice& notice : report.notices()) printDiscoveryNotice(notice);
    if (const std::optional<std::string> directory = mpsPipeDirectoryOf(grant.shares)) {
      if (const std::optional<std::string> missing = sharing::missingMpsDaemon(*directory)) {
        giveBackShares(options, grant);
        printError(*missing + "\nthe share(s) of GPU(s) " + strings::join(grant.granted, ",") +
                   " are given back; the command was not run");
        return kDiscoveryFailed;
      }
    }
    for (const coordination::Lease& lease : grant.leases) lease.keepAcrossExec();
    granted = grant.granted;
  }

  if (host->vendorHost) {
    const auto environment = vendorEnvironment(options, *host, granted);
    if (!environment) {
      releaseAfterFailedExec(options, grant);
      return kUsageError;
    }
    // A whole unit's command holds no share, whatever the parent held.
    ::unsetenv(kShareMemoryVariable);
    std::string said;
    for (const auto& [name, value] : *environment) {
      if (::setenv(name.c_str(), value.c_str(), 1) != 0) {
        const int error = errno;
        releaseAfterFailedExec(options, grant);
        printError("cannot set " + name + ": " + std::strerror(error));
        return kDiscoveryFailed;
      }
      said += (said.empty() ? "" : " ") + name + '=' + value;
    }
    if (verbosity() >= Verbosity::kVerbose) {
      std::cerr << "flink-gpu: " << said << " for process " << owner.pid << '\n';
    }
    defaultdiscovery::AllocationFile allocationFile = provideAllocationFile(
        allocationOf(*host, granted, {}, nested ? inherited->owner : owner.pid, std::nullopt),
        nested);
    const int status =
        runCommand(options, grant, strings::join(host->answerFor(granted), ","), nested);
    removeAllocationFile(allocationFile);
    return status;
  }

  warnAboutSeveralMigInstances(granted);
  std::optional<std::vector<unsigned>> boundTo;
  if (options.bindCpus) {
    try {
      if (const std::optional<std::vector<unsigned>> cpus = cpusToBind(granted, host->devices)) {
        bindTo(*cpus);
        boundTo = cpus;
        if (verbosity() >= Verbosity::kVerbose) {
          std::cerr << "flink-gpu: bound to CPUs " << placement::formatCpuList(*cpus) << '\n';
        }
      }
    } catch (const std::runtime_error& e) {
      releaseAfterFailedExec(options, grant);
      printError(std::string("--bind-cpus: cannot bind the command to its GPUs' CPUs: ") +
                 e.what() + "\nGPU(s) " + strings::join(granted, ",") + " released again");
      return kDiscoveryFailed;
    }
  }
  const bool shared = !grant.shares.empty();
  const std::optional<std::vector<std::string>> entries =
      shared ? shareVisibleDevices(options, *host, granted, grant.shares)
             : visibleDevicesFor(options, *host, granted);
  if (!entries) {
    releaseAfterFailedExec(options, grant);
    return kUsageError;
  }
  const std::string visible = strings::join(*entries, ",");
  EnvironmentChanges changes =
      shared ? shareEnvironment(granted, grant.shares) : wholeGpuEnvironment();
  changes.set.insert(changes.set.begin(), {discovery::kVisibleDevicesVariable, visible});
  // So that an index selects the GPU NVML and nvidia-smi call by it (CUDA's own default is
  // fastest first); a value already set is the user's choice, and stays.
  if (std::getenv(discovery::kDeviceOrderVariable) == nullptr) {
    changes.set.insert(changes.set.begin() + 1, {discovery::kDeviceOrderVariable, "PCI_BUS_ID"});
  }
  if (const std::optional<std::string> failed = applyEnvironment(changes)) {
    releaseAfterFailedExec(options, grant);
    printError(*failed);
    return kDiscoveryFailed;
  }
  for (const std::string& note : changes.notes) printNote(note);
  if (verbosity() >= Verbosity::kVerbose) {
    if (shared) {
      std::string said;
      for (const auto& [name, value] : changes.set) {
        if (name != discovery::kDeviceOrderVariable) said += ' ' + name + '=' + value;
      }
      std::vector<std::string> slots;
      for (std::size_t i = 0; i < granted.size(); ++i) {
        slots.push_back(coordination::formatShareSlot(grant.shares[i].slot) + " of GPU " +
                        granted[i]);
      }
      std::cerr << "flink-gpu:" << said << " for process " << owner.pid << " (share "
                << strings::join(slots, ", ") << ")\n";
    } else {
      std::cerr << "flink-gpu: CUDA_VISIBLE_DEVICES=" << visible << " for process " << owner.pid
                << '\n';
    }
  }
  defaultdiscovery::AllocationFile allocationFile = provideAllocationFile(
      allocationOf(*host, granted, grant.shares, nested ? inherited->owner : owner.pid, boundTo),
      nested);
  const int status = runCommand(options, grant, visible, nested);
  removeAllocationFile(allocationFile);
  return status;
}

namespace {

std::optional<std::vector<std::string>> shareVisibleDevices(
    const ExecOptions& options, const HostUnits& host, const std::vector<std::string>& granted,
    const std::vector<defaultdiscovery::ShareGrant>& shares) {
  if (host.masked || options.visibleDevicesGiven || !mpsPipeDirectoryOf(shares)) {
    return visibleDevicesFor(options, host, granted);
  }
  std::vector<std::string> entries = host.answerFor(granted);
  for (std::size_t i = 0; i < entries.size() && i < shares.size(); ++i) {
    if (shares[i].uuid) {
      entries[i] = *shares[i].uuid;
    } else {
      printWarning("the UUID of GPU " + granted[i] +
                   " is not known: CUDA_VISIBLE_DEVICES names it by index, which is another GPU "
                   "to an MPS daemon started under a mask of its own");
    }
  }
  return entries;
}

defaultdiscovery::Allocation allocationOf(const HostUnits& host,
                                          const std::vector<std::string>& granted,
                                          const std::vector<defaultdiscovery::ShareGrant>& shares,
                                          pid_t owner,
                                          const std::optional<std::vector<unsigned>>& cpus) {
  defaultdiscovery::Allocation allocation;
  allocation.ownerPid = owner;
  allocation.cpus = cpus;
  // An NVIDIA host's index is of its devices (findHostUnits); a vendor host's is of its units.
  const externalresource::gpu::DeviceFinder finder(host.devices,
                                                   host.vendorHost ? nullptr : host.index);
  for (std::size_t i = 0; i < granted.size(); ++i) {
    defaultdiscovery::AllocatedUnit unit;
    // Exec lists the units in the variable in the order granted: the place is the ordinal the
    // command's runtime gives the unit, whatever the entries are (a mask's own, UUIDs).
    unit.index = std::to_string(i);
    if (host.vendorHost) {
      const std::vector<discovery::VendorUnit>& units = host.vendorHost->units;
      const auto found =
          std::find_if(units.begin(), units.end(), [&](const discovery::VendorUnit& candidate) {
            return candidate.recordName == granted[i];
          });
      if (found != units.end()) {
        unit.uuid = discovery::propertyOf(found->properties, "uuid");
        unit.pciBusId = discovery::propertyOf(found->properties, "pci.bus_id");
        unit.name = discovery::propertyOf(found->properties, "name");
        if (const auto memory = discovery::propertyOf(found->properties, "memory.total")) {
          unit.memoryTotalMiB = strings::parseUnsigned(*memory);
        }
      }
    } else if (const discovery::GpuDevice* device = finder.find(granted[i])) {
      unit.uuid = device->uuid;
      unit.pciBusId = device->pciBusId;
      unit.name = device->name;
      unit.memoryTotalMiB = device->memoryTotalMiB;
    }
    if (i < shares.size()) {
      const defaultdiscovery::ShareGrant& share = shares[i];
      unit.share = defaultdiscovery::AllocatedShare{
          .index = share.slot.index,
          .count = share.slot.count,
          .memoryMiB = share.memoryMiB,
          .mpsPipeDirectory = share.mpsPipeDirectory,
          .mpsActiveThreadPercentage = share.mpsPipeDirectory
                                           ? std::optional<unsigned>(share.activeThreadPercentage())
                                           : std::nullopt};
    }
    allocation.units.push_back(std::move(unit));
  }
  return allocation;
}

defaultdiscovery::AllocationFile provideAllocationFile(defaultdiscovery::Allocation allocation,
                                                       bool nested) {
  defaultdiscovery::AllocationFile file;
  std::string problem;
  // The bases passed over (an unsafe $TMPDIR), said whether another one took the folder or not.
  std::vector<std::string> passedOver;
  try {
    if (!nested) {
      file = defaultdiscovery::AllocationFile::inNewFolder(
          defaultdiscovery::allocationFolderBases(std::getenv("XDG_RUNTIME_DIR"),
                                                  std::getenv("TMPDIR")),
          defaultdiscovery::allocationText(allocation), passedOver);
    } else {
      const char* inherited = std::getenv(kAllocationFileVariable);
      const std::optional<defaultdiscovery::Allocation> enclosing =
          inherited == nullptr ? std::nullopt : defaultdiscovery::readAllocationFile(inherited);
      if (!enclosing || enclosing->ownerPid != allocation.ownerPid) {
        problem = std::string("the process holding the GPUs (") +
                  std::to_string(allocation.ownerPid) + ") gave this one no allocation file";
      } else {
        // Bound by the enclosing exec, the command runs on its CPUs unless bound again here.
        if (!allocation.cpus) allocation.cpus = enclosing->cpus;
        if (*enclosing == allocation) return file;  // the variable stays as it is
        file = defaultdiscovery::AllocationFile::besideEnclosing(
            inherited, defaultdiscovery::allocationText(allocation));
      }
    }
  } catch (const std::runtime_error& e) {
    problem = e.what();
  }
  for (const std::string& warning : passedOver) printWarning(warning);
  if (problem.empty() && ::setenv(kAllocationFileVariable, file.path().c_str(), 1) != 0) {
    problem = std::string("cannot set ") + kAllocationFileVariable + ": " + std::strerror(errno);
  }
  if (!problem.empty()) {
    file.remove();
    // Never a stale one: the command reads no other exec's file.
    ::unsetenv(kAllocationFileVariable);
    printWarning(std::string(kAllocationFileVariable) + " is not set for the command: " + problem);
  }
  return file;
}

void removeAllocationFile(defaultdiscovery::AllocationFile& file) {
  for (const std::string& warning : file.remove()) printWarning(warning);
}

/// What exec does after its command could not be run (`error`: the errno of execvp, or of fork):
/// gives `grant` back, says why, and returns 127 (not found) or 126, as a shell does.
int cannotRun(const ExecOptions& options, defaultdiscovery::Grant& grant, int error,
              const std::string& visible) {
  releaseAfterFailedExec(options, grant);
  const std::string& name = options.command.front();
  const bool notFound = error == ENOENT;
  const std::string why = notFound && name.find('/') == std::string::npos
                              ? std::string("command not found")
                              : std::string(std::strerror(error));
  printError("cannot run '" + strings::quoteForMessage(name) + "': " + why + "\nGPU(s) " + visible +
             " released again");
  return notFound ? kCommandNotFound : kCommandNotExecutable;
}

/// After the command has ended: exec's leases go, and what it recorded goes back, except a record
/// whose lease is still held. Only a process the command left behind can hold it now, having
/// inherited it (a daemon it started), and that process may use the GPU: its record stays, as the
/// command's own stayed when exec became the command, held by the lease while that process runs
/// (and fail closed, should the lease file be removed meanwhile; docs/coordination-file.md). One
/// whose lease cannot be shown free (its file gone, or not to be opened) stays too, judged by the
/// same rule.
void giveBackAfterCommand(const ExecOptions& options, defaultdiscovery::Grant& grant) {
  grant.leases.clear();
  std::vector<coordination::Record> free;
  try {
    coordination::LeaseFolder folder = coordination::LeaseFolder::open(
        options.coordination.path, coordination::SiblingTrust::ofPath(options.coordination.path));
    for (const coordination::Record& record : grant.records) {
      if (!record.lease ||
          folder.state(*record.lease, record.leaseFile) == coordination::LeaseState::kFree) {
        free.push_back(record);
      }
    }
  } catch (const store::StoreError& e) {
    // Left as they are: the next allocation judges them, as it judges any exec's that was killed.
    printWarning(std::string("could not give back the GPUs allocated for the command: ") +
                 e.what());
    return;
  }
  grant.records = std::move(free);
  giveBackGrant(options, grant, "could not give back the GPUs allocated for the command: ");
}

int runCommand(const ExecOptions& options, defaultdiscovery::Grant& grant,
               const std::string& visible, bool nested) {
  if (nested) {
    std::vector<char*> argv;
    argv.reserve(options.command.size() + 1);
    for (const std::string& arg : options.command) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    // Nothing buffered here may be lost to the exec, or printed twice by the command.
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
    ::signal(SIGPIPE, SIG_DFL);  // flink-gpu ignores it; an ignored signal survives execvp
    ::execvp(argv[0], argv.data());
    return cannotRun(options, grant, errno, visible);
  }
  StartedCommand started;
  try {
    started = startCommand(options.command);
  } catch (const std::system_error& e) {  // the error pipe: out of descriptors
    return cannotRun(options, grant, e.code().value(), visible);
  }
  if (started.pid < 0) return cannotRun(options, grant, started.error, visible);
  int status = kDiscoveryFailed;
  try {
    status = waitForCommand(started.pid);
  } catch (const std::system_error& e) {
    printError(std::string("cannot wait for the command: ") + e.what());
  }
  giveBackAfterCommand(options, grant);
  return status;
}

}  // namespace

}  // namespace flink::cli
