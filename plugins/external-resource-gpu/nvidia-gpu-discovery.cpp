// nvidia-gpu-discovery: the default discovery program of the GPU external-resource driver.
// Built three times: as nvidia-gpu-discovery, and with FLINK_GPU_VENDOR "amd" or "intel" as
// amd-gpu-discovery and intel-gpu-discovery, which take the same protocol and coordination file
// but find their units in sysfs (host/amd/, host/intel/; see the end of this comment).
//
// Flink's driver (and ours) runs nvidia-gpu-discovery.sh, which execs this program with the same
// arguments:
//
//     nvidia-gpu-discovery <amount> [--enable-coordination-mode] [--coordination-file PATH]
//                          [--gpus LIST] [--owner-pid PID] [--mig] [--placement topology|index]
//                          [--health skip|warn|ignore] [--share] [--share-placement pack|spread]
//     nvidia-gpu-discovery --help       (or -h, as the first argument only: the options)
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
// free GPUs are taken is the placement rule's (host/placement/Placement.h): the best-connected set
// where NVML tells the topology, the first free ones otherwise or with --placement index.
//
// An inherited CUDA_VISIBLE_DEVICES (the worker's scheduler's) limits the units to those it names,
// in its order, read as CUDA reads it (host/enumeration/VisibleDevices.h); the answer is then the
// mask's own entries for the units chosen, while coordination records keep the host's numbering.
// Unhealthy and drained GPUs are never handed out, in either mode (--health, see
// host/health/HostHealth.h).
//
// AMD and Intel (amd-gpu-discovery.sh, intel-gpu-discovery.sh): the units are those the vendor's
// runtime numbers in this process (ROCr's KFD order under ROCR_VISIBLE_DEVICES and the HIP
// masks; Level Zero's order, hierarchy, ZE_AFFINITY_MASK and ONEAPI_DEVICE_SELECTOR), printed
// as that runtime takes them, and recorded by vendor and PCI bus id. --gpus and --mig are
// NVIDIA's and refused; --health is ignored with a note; the first free units are taken.
//
// The work itself is the library's (host/defaultdiscovery/DefaultDiscovery.h), which GPUDriver also
// runs in-process; this program reads its arguments, prints, and gives back what it recorded
// when its answer cannot be written.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "host/coordination/Coordination.h"
#include "host/defaultdiscovery/DefaultDiscovery.h"
#include "host/defaultdiscovery/DiscoveryArguments.h"
#include "host/enumeration/GpuEnumerator.h"
#include "util/Notice.h"
#include "util/Strings.h"

#ifndef FLINK_GPU_PROGRAM_MARK
#error "FLINK_GPU_PROGRAM_MARK must be defined by the build"
#endif
#ifndef FLINK_GPU_VENDOR
#define FLINK_GPU_VENDOR "nvidia"
#endif

namespace {

/// Tells the in-process driver that this file is the program its library was built with
/// (host/defaultdiscovery/DefaultScript.h), without running it: a section of its own, which
/// stripping keeps, holding the mark with its NUL.
[[gnu::used, gnu::section(".flink_gpu_program")]] const char kProgramMark[] =
    FLINK_GPU_PROGRAM_MARK;

namespace coordination = flink::coordination;
namespace store = flink::store;
namespace defaultdiscovery = flink::defaultdiscovery;
namespace discovery = flink::discovery;
using defaultdiscovery::Report;

constexpr const char* kProgramName = FLINK_GPU_VENDOR "-gpu-discovery";
/// The script that runs this program, as Flink's configurations name it.
constexpr const char* kScriptName = FLINK_GPU_VENDOR "-gpu-discovery.sh";
const discovery::Vendor kVendor = discovery::parseVendor(FLINK_GPU_VENDOR).value();

/// What goes to stderr after the first line (or after the answer, on success): details about
/// the cause first, then notes about the command line and the coordination file, so that the
/// first stderr line always names the cause of a failure.
void printReport(const Report& report) {
  std::string text;
  for (const flink::Notice& notice : report.notices()) text += notice.line() + '\n';
  std::fputs(text.c_str(), stderr);
}

int fail(const std::string& cause, const Report& report) {
  std::fputs((cause + '\n').c_str(), stderr);
  printReport(report);
  return 1;
}

/// Whether standard output was open when we started (see main): when it was not, nothing we
/// print reaches anyone, and descriptor 1 holds /dev/null so that no file we open lands there.
bool stdoutWasOpen = true;

/// Writes `text` to standard output; returns 0, or the errno of why it could not be written whole.
int writeText(const std::string& text) {
  if (!stdoutWasOpen) return EBADF;
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(STDOUT_FILENO, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;
    done += static_cast<std::size_t>(n);
  }
  return 0;
}

/// Writes the answer line; returns 0, or the errno of why it could not be written whole.
int writeAnswer(const std::vector<std::string>& gpus) {
  return writeText(flink::strings::join(gpus, ",") + '\n');
}

int cannotWriteAnswer(int error, const Report& report) {
  // The driver would read no GPUs and take that for an answer.
  printReport(report);
  std::fprintf(stderr, "%s: cannot write the answer: %s\n", kProgramName,
               error == EBADF ? "standard output is closed" : std::strerror(error));
  return 1;
}

int discover(const std::vector<std::string>& argv) {
  const defaultdiscovery::DiscoveryArguments args = defaultdiscovery::parseDiscoveryArguments(argv);
  Report report;
  report.notes = args.notes;
  // By default the owner is our parent: the worker that started the discovery (the wrapper
  // script execs us), as Flink's script records its $PPID.
  const coordination::Owner owner = coordination::Owner::of(args.ownerPid.value_or(::getppid()));
  try {
    const defaultdiscovery::HostUnits host =
        kVendor == discovery::Vendor::kNvidia
            ? defaultdiscovery::findHostUnits(defaultdiscovery::hostUnitsOptionsFor(args), report)
            : defaultdiscovery::findVendorUnits(
                  kVendor, defaultdiscovery::vendorOptionsFor(args, kVendor, report), report);
    // Nothing would reach the worker: record nothing for it.
    if (args.coordination && !stdoutWasOpen && coordination::isRunning(owner)) {
      return cannotWriteAnswer(EBADF, report);
    }
    const defaultdiscovery::Grant grant =
        defaultdiscovery::grantUnits(host, defaultdiscovery::grantRequestFor(args, owner), report);
    if (const int error = writeAnswer(grant.answer)) {
      // The worker never learns which GPUs it got: give them back, or they stay held for its
      // whole life.
      try {
        if (grant.recorded) defaultdiscovery::giveBack(args.coordinationFile.path, grant.records);
      } catch (const store::StoreError& e) {
        report.notes.push_back(
            flink::Notice::detail(std::string("could not give the GPUs back: ") + e.what()));
      }
      return cannotWriteAnswer(error, report);
    }
    printReport(report);
    return 0;
  } catch (const defaultdiscovery::DiscoveryFailure& e) {
    return fail(e.what(), e.report());
  }
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
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (flink::defaultdiscovery::asksForUsage(args)) {
    // As any answer: one that cannot be written is no success.
    if (const int error = writeText(defaultdiscovery::discoveryUsage(kScriptName, kVendor))) {
      std::fprintf(stderr, "%s: cannot write the help: %s\n", kProgramName, std::strerror(error));
      return 1;
    }
    return 0;
  }
  try {
    return discover(args);
  } catch (const flink::discovery::DiscoveryError& e) {
    // A bad command line: nothing was looked at yet, so the trailer is the error's own.
    std::string text = std::string(e.what()) + '\n';
    for (const std::string& line : e.details()) text += line + '\n';
    std::fputs(text.c_str(), stderr);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: unexpected error: %s\n", kProgramName, e.what());
    return 1;
  }
}
