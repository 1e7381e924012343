// nvidia-gpu-discovery: the default discovery program of the GPU external-resource driver.
//
// Flink's driver (and ours) runs nvidia-gpu-discovery.sh, which execs this program with the same
// arguments:
//
//     nvidia-gpu-discovery <amount> [--enable-coordination-mode] [--coordination-file PATH]
//                          [--gpus LIST] [--owner-pid PID] [--mig] [--placement topology|index]
//                          [--health skip|warn|ignore]
//
// It answers by the discovery-script protocol: one line of comma-separated GPU indices on stdout
// and exit 0, or exit 1 with the cause on the first stderr line (details and notes follow).
// The host's GPUs come from NVML, else nvidia-smi, or from --gpus (custom scripts, through
// gpu-discovery-common.sh). With --mig the units are MIG instances, printed as their MIG UUIDs,
// beside the GPUs that are not in MIG mode; a GPU in MIG mode is never handed out whole. In plain
// mode the first <amount> are printed. In coordination mode they are allocated through the
// coordination file shared by the workers of the host, for the process that owns them: --owner-pid,
// by default our parent — the worker that started the discovery, since the wrapper script execs us
// (Flink's script records its $PPID the same way). A GPU and the MIG instances carved from it are
// never held by two running owners at once, whichever of them each owner asked for. Which of the
// free GPUs are taken is the placement rule's (placement/Placement.h): the best-connected set
// where NVML tells the topology, the first free ones otherwise or with --placement index.
//
// An inherited CUDA_VISIBLE_DEVICES (the worker's scheduler's) limits the units to those it names,
// in its order, read as CUDA reads it (discovery/VisibleDevices.h); the answer is then the mask's
// own entries for the units chosen, while coordination records keep the host's numbering.
// Unhealthy and drained GPUs are never handed out, in either mode (--health, see
// health/HostHealth.h).
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "coordination/Coordination.h"
#include "defaultdiscovery/DiscoveryArguments.h"
#include "discovery/HostGpus.h"
#include "discovery/NvidiaSmi.h"
#include "discovery/VisibleDevices.h"
#include "health/HostHealth.h"
#include "nvml/Nvml.h"
#include "placement/Placement.h"
#include "util/Strings.h"

namespace {

using flink::defaultdiscovery::DiscoveryArguments;
using flink::discovery::DiscoveryError;
namespace coordination = flink::coordination;

/// What goes to stderr after the first line (or after the answer, on success): details about
/// the cause first, then notes about the command line and the coordination file, so that the
/// first stderr line always names the cause of a failure.
struct Trailer {
  std::vector<std::string> details;
  std::vector<std::string> notes;

  void print() const {
    std::string text;
    for (const auto* lines : {&details, &notes}) {
      for (const std::string& line : *lines) text += line + '\n';
    }
    std::fputs(text.c_str(), stderr);
  }
};

int fail(const std::string& cause, const Trailer& trailer) {
  std::fputs((cause + '\n').c_str(), stderr);
  trailer.print();
  return 1;
}

/// Whether standard output was open when we started (see main): when it was not, nothing we
/// print reaches anyone, and descriptor 1 holds /dev/null so that no file we open lands there.
bool stdoutWasOpen = true;

/// Writes the answer line; returns 0, or the errno of why it could not be written whole.
int writeAnswer(const std::vector<std::string>& gpus) {
  if (!stdoutWasOpen) return EBADF;
  const std::string line = flink::strings::join(gpus, ",") + '\n';
  std::size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(STDOUT_FILENO, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;
    done += static_cast<std::size_t>(n);
  }
  return 0;
}

int cannotWriteAnswer(int error, const Trailer& trailer) {
  // The driver would read no GPUs and take that for an answer.
  trailer.print();
  std::fprintf(stderr, "nvidia-gpu-discovery: cannot write the answer: %s\n",
               error == EBADF ? "standard output is closed" : std::strerror(error));
  return 1;
}

int answer(const std::vector<std::string>& gpus, const Trailer& trailer) {
  if (const int error = writeAnswer(gpus)) return cannotWriteAnswer(error, trailer);
  trailer.print();
  return 0;
}

/// The same GPU twice would be handed out twice; nvidia-smi never does it, a --gpus list may.
std::vector<std::string> withoutDuplicates(const std::vector<std::string>& gpus, Trailer& trailer) {
  std::vector<std::string> unique;
  std::unordered_set<std::string> seen;
  for (const std::string& gpu : gpus) {
    if (seen.insert(gpu).second) {
      unique.push_back(gpu);
    } else {
      trailer.notes.push_back("note: GPU " + gpu + " is listed more than once; counted once");
    }
  }
  return unique;
}

/// An inherited CUDA_VISIBLE_DEVICES: the units it allows, as the host numbers them and as the
/// mask names them. Without one, every unit, named as the host numbers it.
struct Candidates {
  std::vector<std::string> gpus;
  std::optional<flink::discovery::MaskedUnits> masked;

  /// What the worker is told for the host units `granted`: the mask's own entries under a mask.
  std::vector<std::string> answerFor(const std::vector<std::string>& granted) const {
    if (!masked) return granted;
    std::vector<std::string> entries;
    for (const std::string& gpu : granted) entries.push_back(masked->entryOf(gpu));
    return entries;
  }
};

/// The placement rule's chooser, for the host's units; empty when GPUs go by index.
using Chooser =
    std::function<std::vector<std::string>(const std::vector<std::string>&, std::size_t)>;

int allocate(const DiscoveryArguments& args, const Candidates& candidates,
             coordination::RelatedUnits related, std::unordered_map<std::string, std::string> uuids,
             const Chooser& choose, Trailer& trailer) {
  const std::vector<std::string>& gpus = candidates.gpus;
  const pid_t ownerPid = args.ownerPid.value_or(::getppid());
  const coordination::Owner owner = coordination::Owner::of(ownerPid);
  if (!coordination::isRunning(owner)) {
    // Its records would be taken back by the very next allocation.
    return fail("the owner process " + std::to_string(ownerPid) +
                    " is not running: GPUs recorded for it would not stay reserved",
                trailer);
  }

  // Nothing would reach the worker: record nothing for it.
  if (!stdoutWasOpen) return cannotWriteAnswer(EBADF, trailer);

  coordination::AllocationRequest request{gpus, args.amount, owner, std::move(related),
                                          std::move(uuids)};
  request.choose = choose;
  const coordination::Allocation allocation =
      coordination::allocate(args.coordinationFile, request);

  const std::string file = args.coordinationFile.string();
  for (const std::string& note : allocation.notes) {
    trailer.notes.push_back("note: coordination file " + file + ": " + note);
  }
  for (const std::string& line : coordination::describeJunk(allocation.junk, file)) {
    trailer.notes.push_back("note: " + line);
  }
  for (const coordination::Record& record : allocation.reclaimed) {
    trailer.notes.push_back("note: took back GPU " + record.gpu + " from process " +
                            std::to_string(record.owner.pid) + ", which is no longer running");
  }

  if (!allocation.satisfied) {
    // Free for this owner: every GPU of the host that no other running owner holds.
    std::unordered_set<std::string> hostGpus(gpus.begin(), gpus.end());
    std::unordered_set<std::string> heldGpus;
    std::vector<std::string> held;
    for (const auto* records : {&allocation.heldByRequester, &allocation.heldByOthers}) {
      for (const coordination::Record& record : *records) {
        if (!hostGpus.count(record.gpu)) continue;
        heldGpus.insert(record.gpu);
        held.push_back(
            "GPU " + record.gpu + " is held by process " + std::to_string(record.owner.pid) +
            (records == &allocation.heldByRequester ? " (this owner, from an earlier request)"
                                                    : ""));
      }
    }
    // Not held, but a GPU whose MIG instance is held, or an instance whose GPU is held whole.
    for (const coordination::BlockedUnit& blocked : allocation.blocked) {
      heldGpus.insert(blocked.gpu);
      held.push_back(coordination::describe(blocked));
    }
    const std::size_t free = gpus.size() - heldGpus.size();
    trailer.details.insert(trailer.details.begin(), held.begin(), held.end());
    trailer.details.insert(trailer.details.begin(), "coordination file: " + file);
    return fail("not enough free GPUs: " + args.amountText + " requested, " + std::to_string(free) +
                    " free",
                trailer);
  }
  if (const int error = writeAnswer(candidates.answerFor(allocation.granted))) {
    // The worker never learns which GPUs it got: give them back, or they stay held for its
    // whole life.
    try {
      const std::unordered_set<std::string> granted(allocation.granted.begin(),
                                                    allocation.granted.end());
      coordination::release(args.coordinationFile, [&](const coordination::Record& record) {
        return record.owner == owner && granted.count(record.gpu) > 0;
      });
    } catch (const coordination::CoordinationError& e) {
      trailer.notes.push_back(std::string("could not give the GPUs back: ") + e.what());
    }
    return cannotWriteAnswer(error, trailer);
  }
  trailer.print();
  return 0;
}

int discover(const std::vector<std::string>& argv) {
  Trailer trailer;
  const DiscoveryArguments args = flink::defaultdiscovery::parseDiscoveryArguments(argv);
  trailer.notes = args.notes;

  flink::discovery::HostGpuOptions options;
  options.listed = args.gpus;
  options.mig = args.mig;
  options.topology = args.placement == flink::placement::Policy::kTopology;
  if (!args.gpus) {
    const flink::discovery::TimeoutSetting timeout =
        flink::discovery::parseNvidiaSmiTimeout(std::getenv("NVIDIA_SMI_TIMEOUT"));
    if (timeout.note) trailer.notes.push_back(*timeout.note);
    options.nvidiaSmi.timeout = timeout.timeout;
  }

  // One initialisation of NVML for the enumeration and the health probe (see holdSession).
  const std::unique_ptr<flink::nvml::NvmlSession> heldNvml =
      args.gpus ? nullptr : flink::nvml::holdSession();
  flink::discovery::HostGpus host;
  try {
    host = flink::discovery::enumerateHostGpus(options);
  } catch (const DiscoveryError& e) {
    trailer.details = e.details();
    return fail(e.what(), trailer);
  }
  trailer.details = host.found.warnings;
  // With --mig, a GPU in MIG mode is handed out as its instances (by MIG UUID), never whole.
  std::vector<flink::discovery::GpuDevice> units =
      flink::discovery::allocatableUnits(host.found.devices, args.mig);
  // Unhealthy and drained GPUs are never handed out (--health, see health/HostHealth.h).
  flink::health::FilteredUnits healthy = flink::health::filterUnhealthy(
      units, host.found.devices, host.source == "NVML",
      *flink::health::parseHealthMode(args.health), args.coordinationFile);
  units = std::move(healthy.units);
  trailer.notes.insert(trailer.notes.end(), healthy.lines.begin(), healthy.lines.end());
  if (args.mig) {
    for (const std::string& gpu : flink::discovery::migGpusWithoutInstances(host.found.devices)) {
      trailer.notes.push_back("note: GPU " + gpu +
                              " is in MIG mode but has no MIG instances, so it offers none "
                              "(create them with nvidia-smi mig -cgi <profiles> -C)");
    }
  }
  Candidates candidates;
  candidates.gpus = withoutDuplicates(flink::discovery::identifiersOf(units), trailer);

  // The worker's own CUDA_VISIBLE_DEVICES (from its scheduler) limits what it may have; a list
  // given with --gpus is the script's own answer and is taken as it is.
  const std::optional<flink::discovery::VisibleDevicesMask> mask =
      args.gpus ? std::nullopt : flink::discovery::inheritedVisibleDevices();
  if (mask) {
    try {
      candidates.masked = flink::discovery::unitsUnderMask(
          *mask, host.found.devices, args.mig, flink::discovery::inheritedPciBusOrder());
    } catch (const DiscoveryError& e) {
      trailer.details.insert(trailer.details.begin(), e.details().begin(), e.details().end());
      return fail(e.what(), trailer);
    }
    trailer.details.insert(trailer.details.end(), candidates.masked->warnings.begin(),
                           candidates.masked->warnings.end());
    candidates.gpus = candidates.masked->hostIdentifiers;
  }
  const std::vector<std::string>& gpus = candidates.gpus;

  if (gpus.size() < args.amount) {
    if (mask) {
      return fail("only " + std::to_string(gpus.size()) + " GPU(s) allowed by " + mask->describe() +
                      ", " + args.amountText + " requested (allowed: " +
                      flink::strings::join(candidates.masked->entries, ",") + ")",
                  trailer);
    }
    return fail("only " + std::to_string(gpus.size()) + " GPU(s) found, " + args.amountText +
                    " requested (found: " + flink::strings::join(gpus, ",") + ")",
                trailer);
  }
  Chooser choose;
  if (host.found.topology && host.found.topology->anythingKnown()) {
    choose = [&topology = *host.found.topology](const std::vector<std::string>& free,
                                                std::size_t amount) {
      return flink::placement::choose(topology, free, amount);
    };
  }
  if (args.coordination) {
    try {
      // Whatever the units, a GPU and its MIG instances are never held by two owners at once.
      return allocate(args, candidates, flink::discovery::relatedUnits(host.found.devices),
                      flink::discovery::uuidsByIdentifier(host.found.devices), choose, trailer);
    } catch (const coordination::CoordinationError& e) {
      return fail(e.what(), trailer);
    }
  }
  if (choose) {
    if (std::vector<std::string> chosen = choose(gpus, args.amount); !chosen.empty()) {
      return answer(candidates.answerFor(chosen), trailer);
    }
  }
  return answer(
      candidates.answerFor({gpus.begin(), gpus.begin() + static_cast<std::ptrdiff_t>(args.amount)}),
      trailer);
}

}  // namespace

int main(int argc, char** argv) {
  // A reader that went away is an error of the write (EPIPE), not a death by SIGPIPE that would
  // leave GPUs recorded for a worker that never learns of them.
  ::signal(SIGPIPE, SIG_IGN);
  // A closed descriptor 0, 1 or 2 is taken by /dev/null, so that no file opened later (the
  // coordination file) becomes our standard output or error and receives what we print.
  stdoutWasOpen = ::fcntl(STDOUT_FILENO, F_GETFD) >= 0;
  for (int fd = STDIN_FILENO; fd <= STDERR_FILENO; ++fd) {
    if (::fcntl(fd, F_GETFD) >= 0) continue;
    const int opened = ::open("/dev/null", O_RDWR);
    if (opened > STDERR_FILENO) ::close(opened);
  }
  try {
    return discover(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const DiscoveryError& e) {
    // A bad command line: nothing was looked at yet, so the trailer is the error's own.
    std::string text = std::string(e.what()) + '\n';
    for (const std::string& line : e.details()) text += line + '\n';
    std::fputs(text.c_str(), stderr);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nvidia-gpu-discovery: unexpected error: %s\n", e.what());
    return 1;
  }
}
