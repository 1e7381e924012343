// The command line of the nvidia-gpu-discovery program, read by hand and tolerantly.
//
// The program is run by Flink's Java driver and by ours with whatever `discovery-script.args` a
// deployment configured for Flink's own script, so it must accept Flink's arguments
// (`<amount> [--enable-coordination-mode] [--coordination-file PATH]`) and must not fail on
// arguments it does not know (Flink's examples pass `--device-type nvidia`): those are reported
// as notes and ignored, and the `null` the drivers pass when no arguments are configured is
// ignored silently. Only the amount, the values of our own options (--gpus, --owner-pid, ...),
// and arguments that look like a misspelling of one of our options (`--coordination-fle`,
// `--MIG`, `--mig=yes`: see parseDiscoveryArguments) are errors, since a mistake there would
// hand out the wrong GPUs, or hand them out without coordination.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "host/coordination/CoordinationFile.h"
#include "host/coordination/ShareAllocation.h"
#include "host/enumeration/UnitSelector.h"
#include "host/enumeration/Vendor.h"
#include "host/health/HostHealth.h"
#include "host/placement/Placement.h"
#include "host/usage/GpuUse.h"
#include "util/Notice.h"

namespace flink::defaultdiscovery {

struct DiscoveryArguments {
  /// The amount as messages show it: digits without leading zeros ("007" → "7").
  std::string amountText;
  /// The amount, or SIZE_MAX when it is too large to hold (certainly more GPUs than a host has).
  std::size_t amount = 0;
  bool coordination = false;
  /// The coordination file: --coordination-file, else $FLINK_GPU_COORDINATION_FILE, else Flink's
  /// default (host/coordination/CoordinationFile.h), and where it was named.
  coordination::CoordinationFileChoice coordinationFile;
  /// --coordination-file as given: what a Flink configuration's discovery-script.args name.
  std::optional<std::string> coordinationFileOption;
  /// --gpus: the host's GPUs, instead of asking nvidia-smi.
  std::optional<std::vector<std::string>> gpus;
  /// --owner-pid: the process the GPUs are recorded for.
  std::optional<pid_t> ownerPid;
  /// --mig: hand out MIG instances (and whole GPUs whose MIG mode is off) instead of whole GPUs;
  /// see allocatableUnits.
  bool mig = false;
  /// --placement topology|index: which free GPUs to take (host/placement/Placement.h). Topology
  /// where NVML tells it, else (and with --gpus, or MIG instances) by index.
  placement::Policy placement = placement::Policy::kTopology;
  /// --health skip|warn|ignore: what to do with unhealthy GPUs (see host/health/HostHealth.h).
  health::HealthMode health = health::HealthMode::kSkip;
  /// --foreign skip|warn|ignore: what to do with GPUs a process no record explains uses (see
  /// host/usage/GpuUse.h).
  usage::ForeignMode foreign = usage::ForeignMode::kSkip;
  /// --select EXPR: only the units that match are candidates (host/enumeration/UnitSelector.h).
  std::optional<discovery::UnitSelector> select;
  /// --share: one share on each of `amount` distinct GPUs the operator declared shared
  /// (host/coordination/ShareAllocation.h), instead of whole GPUs. Needs coordination mode; not
  /// with --mig.
  bool share = false;
  /// --share-placement pack|spread: which GPUs' shares go first.
  coordination::SharePlacement sharePlacement = coordination::SharePlacement::kPack;
  /// Notes about arguments that were ignored.
  std::vector<Notice> notes;
};

/// Reads the arguments after the program name.
///
/// An argument no option takes is a misspelt option, and an error, when it starts with "--" and
/// its name (before any '='), compared without regard to case, is within a few edits (optimal
/// string alignment: insertions, deletions, substitutions, swaps of neighbours) of a known
/// option's name: none for names of up to three letters (`mig`: one edit reaches `min`, `mix`),
/// one for names of up to seven (`gpus`, `health`), two for longer ones. A flag given a value
/// (`--mig=yes`) is one too. Any other unknown argument is a note.
/// @throws DiscoveryError for a missing or invalid amount, for bad values of our options (a
///         --select that cannot be read: its SelectorError's message), for --select given
///         twice (other options given twice keep the last), for
///         --share without coordination mode or with --mig, and for
///         a misspelt option ("unknown option '--coordination-fle': did you mean
///         '--coordination-file'?", with the known options as a detail).
DiscoveryArguments parseDiscoveryArguments(const std::vector<std::string>& args);

/// Whether `args` (after the program name) ask for the usage: `--help` or `-h` as the first
/// argument, and only there. Flink's drivers always pass the amount first, so an option there is
/// never a discovery's argument.
bool asksForUsage(const std::vector<std::string>& args);

/// The usage of `script` (nvidia-gpu-discovery.sh, amd-gpu-discovery.sh, ...): the amount and
/// every option parseDiscoveryArguments reads, for `vendor`'s discovery (AMD's and Intel's refuse
/// NVIDIA's --gpus, --mig and --share).
std::string discoveryUsage(std::string_view script, discovery::Vendor vendor);

}  // namespace flink::defaultdiscovery
