// `flink-gpu exec`: allocates GPUs through the coordination file with this process as their
// owner, puts them in CUDA_VISIBLE_DEVICES, and execvp's the command in this same process. exec
// keeps the pid and the start time that the records name, so the command inherits the GPUs: they
// stay taken exactly as long as it runs, whatever it does with its descriptors, and also while a
// process it started holds their leases. An exec of the same process (`flink-gpu exec … --
// flink-gpu exec …`) gets what the first one took: one allocation per process. No record
// outlives a failed exec: they are released before flink-gpu exits with 127/126, as a shell would.
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
#include <unordered_map>
#include <utility>
#include <vector>

#include "Console.h"
#include "ExitCode.h"
#include "commands/AmountOption.h"
#include "commands/CoordinationFileOption.h"
#include "coordination/Coordination.h"
#include "defaultdiscovery/DefaultDiscovery.h"
#include "discovery/GpuEnumerator.h"
#include "discovery/VisibleDevices.h"
#include "externalresource/gpu/GpuProperties.h"
#include "health/HostHealth.h"
#include "placement/Placement.h"
#include "util/Strings.h"

namespace flink::cli {
namespace {

/// An error whose first line is `cause` and whose further lines are `details`.
void printErrorWithDetails(const std::string& cause, const std::vector<std::string>& details) {
  std::string message = cause;
  for (const std::string& line : details) message += '\n' + line;
  printError(message);
}

/// "warning: x" / "note: x" lines from the discovery layer, as flink-gpu warnings.
void printDiscoveryNote(std::string_view line) {
  for (std::string_view prefix : {"warning: ", "note: "}) {
    if (line.starts_with(prefix)) line.remove_prefix(prefix.size());
  }
  printWarning(line);
}

using defaultdiscovery::HostUnits;

/// The host's units as the default discovery finds them (defaultdiscovery::findHostUnits):
/// --gpus, else NVML, else nvidia-smi; less the unhealthy and drained ones; under an inherited
/// CUDA_VISIBLE_DEVICES, those it allows. Returns nullopt after printing the error, with
/// `exitCode` set.
std::optional<HostUnits> hostGpus(const ExecOptions& options, int& exitCode) {
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
  hostOptions.topology = options.placement == "topology";
  hostOptions.health = *health::parseHealthMode(options.health);
  hostOptions.coordinationFile = options.coordinationFile;
  defaultdiscovery::Report report;
  try {
    HostUnits host = defaultdiscovery::findHostUnits(hostOptions, report);
    for (const std::string& line : report.lines()) printDiscoveryNote(line);
    return host;
  } catch (const defaultdiscovery::DiscoveryFailure& e) {
    const bool enumeration = e.stage() == defaultdiscovery::DiscoveryFailure::Stage::kEnumeration;
    printErrorWithDetails(
        (enumeration ? std::string("cannot find the GPUs of this host: ") : std::string()) +
            e.what(),
        e.report().details);
    for (const std::string& note : e.report().notes) printDiscoveryNote(note);
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
  if (host.masked || options.visibleDevices != "uuid") return host.answerFor(granted);
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

/// Why `amount` GPUs could not be had: how many are free, and who holds the others or a unit
/// related to them (a GPU's MIG instance, an instance's GPU).
void printShortfall(const ExecOptions& options, std::size_t amount, const HostUnits& host,
                    const coordination::Allocation& allocation) {
  const std::vector<std::string>& gpus = host.gpus;
  const std::unordered_map<std::string, std::string> uuids =
      discovery::uuidsByIdentifier(host.devices);
  std::size_t free = 0;
  std::size_t busy = 0;
  std::vector<std::string> details;
  for (const std::string& gpu : gpus) {
    const auto known = uuids.find(gpu);
    const std::optional<std::string> uuid =
        known == uuids.end() ? std::nullopt : std::optional<std::string>(known->second);
    bool held = false;
    for (const auto* records : {&allocation.heldByRequester, &allocation.heldByOthers}) {
      for (const coordination::Record& record : *records) {
        // By UUID where both say one: a container's record by its own index.
        if (!coordination::recordNames(record, gpu, uuid)) continue;
        held = true;
        details.push_back("GPU " + gpu + " is held by process " + std::to_string(record.owner.pid) +
                          (records == &allocation.heldByRequester ? " (this process)" : ""));
      }
    }
    if (!held && std::find(allocation.heldByLeaseOnly.begin(), allocation.heldByLeaseOnly.end(),
                           gpu) != allocation.heldByLeaseOnly.end()) {
      held = true;
      details.push_back("GPU " + gpu + " is held by a lease of another process, without a record");
    }
    bool blocked = false;
    for (const coordination::BlockedUnit& unit : allocation.blocked) {
      if (unit.gpu != gpu) continue;
      blocked = true;
      details.push_back(coordination::describe(unit));
    }
    for (const auto& [unit, related] : allocation.blockedByLeaseOnly) {
      if (unit != gpu || blocked) continue;
      blocked = true;
      details.push_back(coordination::describeBlockedByLease(unit, related));
    }
    if (blocked) ++busy;
    if (!held && !blocked) ++free;
  }
  details.insert(details.begin(), "coordination file: " + options.coordinationFile);
  std::string cause = "not enough free GPUs: " + std::to_string(amount) + " requested, " +
                      std::to_string(free) + " free, " + std::to_string(gpus.size() - free - busy) +
                      " held";
  if (busy > 0) cause += ", " + std::to_string(busy) + " busy because a related unit is held";
  if (options.mig) cause += " (with --mig, whole GPUs and MIG instances are never mixed)";
  printErrorWithDetails(cause, details);
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
  for (const std::string& gpu : granted) {
    const discovery::GpuDevice* device = externalresource::gpu::findDevice(devices, gpu);
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

/// Sets this process's CPU affinity (the command inherits it across execvp).
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

/// Takes back what was just recorded for `owner`, after the command could not be started.
void releaseAfterFailedExec(const std::string& file, const coordination::Owner& owner) {
  try {
    coordination::release(
        file, [&owner](const coordination::Record& record) { return record.owner == owner; });
  } catch (const coordination::CoordinationError& e) {
    printWarning(std::string("could not release the GPUs allocated for the command: ") + e.what());
  }
}

/// The units of `host` this process already holds (its records, by pid and start time): what an
/// exec run by an exec of the same process inherits. nullopt after printing the error.
std::optional<std::vector<std::string>> heldByThisProcess(const ExecOptions& options,
                                                          const HostUnits& host,
                                                          const coordination::Owner& owner) {
  coordination::Status status;
  try {
    status = coordination::readStatus(options.coordinationFile);
  } catch (const coordination::CoordinationError& e) {
    printError(e.what());
    return std::nullopt;
  }
  std::vector<std::string> held;
  for (const std::string& gpu : host.gpus) {
    for (const coordination::RecordStatus& entry : status.records) {
      if (entry.record.gpu == gpu && coordination::sameProcess(entry.record.owner, owner) &&
          entry.record.owner.startTime) {
        held.push_back(gpu);
        break;
      }
    }
  }
  return held;
}

/// Allocates `amount` units for `owner`, leased. With --mig, whole GPUs and MIG instances never
/// go together (a CUDA process given both sees only the instance): the MIG instances are tried
/// first, then the whole GPUs.
coordination::Allocation allocateForExec(const ExecOptions& options, const HostUnits& host,
                                         const coordination::Owner& owner, std::size_t amount) {
  // Leased as well: the command holds the leases' descriptors, so the GPUs stay held while any
  // process it started holds them, even once its own pid is gone.
  coordination::AllocationRequest request{host.gpus, amount, owner,
                                          discovery::relatedUnits(host.devices),
                                          discovery::uuidsByIdentifier(host.devices)};
  request.lease = true;
  // Read before the lock is taken: nothing slow under it. A GPU it finds lost is left out.
  if (const std::optional<placement::Topology>& topology = host.topology();
      topology && topology->anythingKnown()) {
    request.choose = [&topology = *topology](const std::vector<std::string>& free,
                                             std::size_t wanted) {
      return placement::choose(topology, free, wanted);
    };
  }
  defaultdiscovery::Report report;
  request.gpus = defaultdiscovery::unitsNotLost(host, report);
  for (const std::string& line : report.lines()) printDiscoveryNote(line);
  if (!options.mig) return coordination::allocate(options.coordinationFile, request);
  std::vector<std::string> instances;
  std::vector<std::string> whole;
  for (const std::string& gpu : request.gpus) {
    (gpu.starts_with("MIG-") ? instances : whole).push_back(gpu);
  }
  if (instances.empty() || whole.empty()) {
    return coordination::allocate(options.coordinationFile, request);
  }
  coordination::Allocation allocation;
  std::vector<coordination::BlockedUnit> blocked;
  std::vector<std::pair<std::string, std::string>> blockedByLease;
  for (std::vector<std::string>* kind : {&instances, &whole}) {
    request.gpus = *kind;
    allocation = coordination::allocate(options.coordinationFile, request);
    if (allocation.satisfied) return allocation;
    blocked.insert(blocked.end(), allocation.blocked.begin(), allocation.blocked.end());
    blockedByLease.insert(blockedByLease.end(), allocation.blockedByLeaseOnly.begin(),
                          allocation.blockedByLeaseOnly.end());
  }
  // What blocks the units of both kinds, for the shortfall's words.
  allocation.blocked = std::move(blocked);
  allocation.blockedByLeaseOnly = std::move(blockedByLease);
  return allocation;
}

}  // namespace

CLI::App* addExecCommand(CLI::App& app, ExecOptions& options) {
  CLI::App* command = app.add_subcommand(
      "exec",
      "Run a command with GPUs of its own: allocate them in the coordination file, set "
      "CUDA_VISIBLE_DEVICES, and exec the command.");
  command->add_option("-n,--amount", options.amount, "How many GPUs to allocate (must be > 0)")
      ->required();
  addCoordinationFileOption(*command, options.coordinationFile);
  command->add_option("--gpus", options.gpus,
                      "The GPUs of this host, comma or space separated (default: ask NVML, else "
                      "nvidia-smi)");
  command->add_flag("--mig", options.mig,
                    "Allocate MIG instances, by their MIG-... UUIDs, instead of the GPUs in MIG "
                    "mode they are carved from (GPUs not in MIG mode are still allocated "
                    "whole); not with --gpus");
  command
      ->add_option("--visible-devices", options.visibleDevices,
                   "What CUDA_VISIBLE_DEVICES gets when none is inherited: index (NVML's, "
                   "which CUDA uses under CUDA_DEVICE_ORDER=PCI_BUS_ID, set unless already "
                   "set) or uuid; an inherited CUDA_VISIBLE_DEVICES limits the GPUs and its "
                   "own entries are passed on")
      ->check(CLI::IsMember({"index", "uuid"}))
      ->capture_default_str();
  command
      ->add_option("--placement", options.placement,
                   "Which of the free GPUs to take: topology (the best-connected set, where "
                   "NVML tells how they are connected) or index (the first free ones, as "
                   "Flink does)")
      ->check(CLI::IsMember({"topology", "index"}))
      ->default_str("topology");
  command->add_flag("--bind-cpus", options.bindCpus,
                    "Run the command on the CPUs close to its GPUs (their NVML CPU affinity, "
                    "within the CPUs flink-gpu may use)");
  command
      ->add_option("--health", options.health,
                   "What to do with unhealthy or drained GPUs: skip them, warn and use them, "
                   "or ignore health")
      ->check(CLI::IsMember({"skip", "warn", "ignore"}))
      ->capture_default_str();
  command->add_option("command", options.command,
                      "The command to run and its arguments; everything from the first of them "
                      "on is the command's, options included (-- before it is optional)");
  // `flink-gpu exec -n 1 python -u train.py -v`: -u and -v are python's and train.py's.
  command->positionals_at_end();
  command->footer(
      "The command replaces flink-gpu in the same process (same pid), so it inherits the GPUs:\n"
      "they are recorded for that pid, stay taken while the command runs, and are free again\n"
      "once it ends. If the command cannot be run, the GPUs are released and flink-gpu exits\n"
      "with 127 (not found) or 126 (cannot be executed), as a shell does.\n");
  return command;
}

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

  int exitCode = kSuccess;
  std::optional<HostUnits> host = hostGpus(options, exitCode);
  if (!host) return exitCode;
  const std::vector<std::string>& gpus = host->gpus;
  const auto amount = static_cast<std::size_t>(*parsedAmount);
  if (gpus.size() < amount) {
    if (host->masked) {
      printError("only " + std::to_string(gpus.size()) + " GPU(s) allowed by " +
                 host->mask->describe() + ", " + std::to_string(amount) +
                 " requested (allowed: " + strings::join(host->masked->entries, ",") + ")");
    } else {
      printError("only " + std::to_string(gpus.size()) + " GPU(s) on this host, " +
                 std::to_string(amount) + " requested (GPUs: " + strings::join(gpus, ",") + ")");
    }
    return kDiscoveryFailed;
  }

  const coordination::Owner owner = coordination::Owner::of(::getpid());
  // `flink-gpu exec … -- flink-gpu exec …` runs in one process: the inner one gets what the
  // outer one took (their leases came with the process), one allocation per process.
  std::optional<std::vector<std::string>> inherited = heldByThisProcess(options, *host, owner);
  if (!inherited) return kDiscoveryFailed;
  coordination::Allocation allocation;
  if (!inherited->empty()) {
    if (inherited->size() < amount) {
      printError("this process already holds GPU(s) " + strings::join(*inherited, ",") +
                 " from the flink-gpu exec that started it, and gets no more: one allocation "
                 "per process (" +
                 std::to_string(amount) + " requested)");
      return kDiscoveryFailed;
    }
    allocation.granted.assign(inherited->begin(),
                              inherited->begin() + static_cast<std::ptrdiff_t>(amount));
    allocation.satisfied = true;
  } else {
    try {
      allocation = allocateForExec(options, *host, owner, amount);
      for (const coordination::Lease& lease : allocation.leases) lease.keepAcrossExec();
    } catch (const coordination::CoordinationError& e) {
      printError(e.what());
      return kDiscoveryFailed;
    }
    for (const std::string& line :
         coordination::describeJunk(allocation.junk, options.coordinationFile)) {
      printWarning(line);
    }
    for (const std::string& note : allocation.notes) {
      printWarning("coordination file " + options.coordinationFile + ": " + note);
    }
    if (verbosity() >= Verbosity::kVerbose) {
      for (const coordination::Record& record : allocation.reclaimed) {
        std::cerr << "flink-gpu: took back GPU " << record.gpu << " from process "
                  << record.owner.pid << ", which is no longer running\n";
      }
    }
    if (!allocation.satisfied) {
      printShortfall(options, amount, *host, allocation);
      return kDiscoveryFailed;
    }
  }

  warnAboutSeveralMigInstances(allocation.granted);
  if (options.bindCpus) {
    try {
      if (const std::optional<std::vector<unsigned>> cpus =
              cpusToBind(allocation.granted, host->devices)) {
        bindTo(*cpus);
        if (verbosity() >= Verbosity::kVerbose) {
          std::cerr << "flink-gpu: bound to CPUs " << placement::formatCpuList(*cpus) << '\n';
        }
      }
    } catch (const std::runtime_error& e) {
      releaseAfterFailedExec(options.coordinationFile, owner);
      printError(std::string("--bind-cpus: cannot bind the command to its GPUs' CPUs: ") +
                 e.what() + "\nGPU(s) " + strings::join(allocation.granted, ",") +
                 " released again");
      return kDiscoveryFailed;
    }
  }
  const std::optional<std::vector<std::string>> entries =
      visibleDevicesFor(options, *host, allocation.granted);
  if (!entries) {
    releaseAfterFailedExec(options.coordinationFile, owner);
    return kUsageError;
  }
  const std::string visible = strings::join(*entries, ",");
  // So that an index selects the GPU NVML and nvidia-smi call by it (CUDA's own default is
  // fastest first); a value already set is the user's choice, and stays.
  const bool orderSet = std::getenv(discovery::kDeviceOrderVariable) != nullptr;
  if (::setenv(discovery::kVisibleDevicesVariable, visible.c_str(), 1) != 0 ||
      (!orderSet && ::setenv(discovery::kDeviceOrderVariable, "PCI_BUS_ID", 0) != 0)) {
    const int error = errno;
    releaseAfterFailedExec(options.coordinationFile, owner);
    printError(std::string("cannot set CUDA_VISIBLE_DEVICES: ") + std::strerror(error));
    return kDiscoveryFailed;
  }
  if (verbosity() >= Verbosity::kVerbose) {
    std::cerr << "flink-gpu: CUDA_VISIBLE_DEVICES=" << visible << " for process " << owner.pid
              << '\n';
  }

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

  const int error = errno;
  releaseAfterFailedExec(options.coordinationFile, owner);
  const std::string& name = options.command.front();
  const bool notFound = error == ENOENT;
  const std::string why = notFound && name.find('/') == std::string::npos
                              ? std::string("command not found")
                              : std::string(std::strerror(error));
  printError("cannot run '" + strings::quoteForMessage(name) + "': " + why + "\nGPU(s) " + visible +
             " released again");
  return notFound ? kCommandNotFound : kCommandNotExecutable;
}

}  // namespace flink::cli
