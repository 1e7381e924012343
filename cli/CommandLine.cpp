// flink-gpu's command line (see CommandLine.h): CLI11's set-up of the global options and of
// every subcommand, and the usage errors, which name the known command or option nearest to an
// unknown one. The only translation unit that includes CLI/CLI.hpp.
#include "CommandLine.h"

#include <sys/types.h>

#include <algorithm>
#include <array>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "BuildInfo.h"
#include "ExitCode.h"
#include "flink/configuration/GlobalConfiguration.h"
#include "flink/externalresource/gpu/GPUDriverOptions.h"
#include "host/coordination/Coordination.h"
#include "host/coordination/CoordinationFile.h"
#include "host/enumeration/Vendor.h"
#include "host/health/HostHealth.h"
#include "host/health/Watch.h"
#include "host/placement/Placement.h"
#include "host/usage/GpuUse.h"
#include "util/Strings.h"

namespace flink::cli {
namespace {

using externalresource::gpu::GPUDriverOptions;

/// What is left to do once argv is parsed: copying into the option structs what only CLI11 knows
/// (whether an option was given at all).
using AfterParse = std::vector<std::function<void()>>;

/// The names each option of a fixed set of values takes (addChoiceOption, --config-file), for
/// the words of its usage errors ("expected text or json"). Filled as the options are set up, by
/// parseCommandLine's one run, which clears it first.
std::map<const CLI::Option*, std::vector<std::string>> choiceNames;

/// `option` takes one of `names`: CLI11 checks it, and a usage error lists them.
CLI::Option* withChoices(CLI::Option* option, std::vector<std::string> names) {
  choiceNames[option] = names;
  return option->check(CLI::IsMember(std::move(names)));
}

/// An option whose value is one of `choices`' names, stored as the value it names: the one place
/// an option's words are compared. Help shows the names (TEXT:{a,b}); anything else is a usage
/// error. The default shown is the caller's (default_str).
template <typename Value>
CLI::Option* addChoiceOption(CLI::App& command, const std::string& name, Value& value,
                             std::vector<std::pair<std::string, Value>> choices,
                             const std::string& description) {
  std::vector<std::string> names;
  for (const auto& choice : choices) names.push_back(choice.first);
  return withChoices(command.add_option_function<std::string>(
                         name,
                         [&value, choices = std::move(choices)](const std::string& text) {
                           for (const auto& [choiceName, choice] : choices) {
                             if (choiceName == text) value = choice;
                           }
                         },
                         description),
                     std::move(names));
}

/// `--format`, one of `formats` (text, json; prometheus for status).
void addFormatOption(CLI::App& command, OutputFormat& format, bool prometheus = false) {
  std::vector<std::pair<std::string, OutputFormat>> formats{{"text", OutputFormat::kText},
                                                            {"json", OutputFormat::kJson}};
  if (prometheus) formats.emplace_back("prometheus", OutputFormat::kPrometheus);
  addChoiceOption(command, "--format", format, std::move(formats), "Output format")
      ->default_str("text");
}

/// A process id as typed: decimal digits only, so that `010` is pid 10 (CLI11 would read it as
/// octal 8, and `0x10` as 16) and no sign, space, 0 or number past pid_t slips through; the
/// leading zeros go.
CLI::Validator processIdValidator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (!strings::isDigits(text)) return "not a process id";
        text.erase(0, std::min(text.find_first_not_of('0'), text.size() - 1));
        // Within pid_t: a larger number would be cut to another process's pid on the way.
        const bool fits =
            text.size() < 10 ||
            (text.size() == 10 && text <= std::to_string(std::numeric_limits<pid_t>::max()));
        return text == "0" || !fits ? "not a process id" : std::string();
      },
      "");
}

/// Adds `--config [DIR]`, `--config-file NAME` and `-D key=value` to `command`.
void addFlinkConfigurationOptions(CLI::App& command, FlinkConfigurationOptions& options,
                                  AfterParse& after) {
  const CLI::Option* config =
      command
          .add_option(
              "--config", options.configDir,
              "Read the Flink configuration folder DIR (config.yaml, else flink-conf.yaml), "
              "or its FILE; without either: $FLINK_CONF_DIR, else $FLINK_HOME/conf (FLINK_HOME, "
              "when unset, is the folder above flink-gpu's bin/)")
          ->expected(0, 1)
          ->type_name("[DIR|FILE]");
  after.push_back([config, &options] { options.configGiven = config->count() > 0; });
  withChoices(command.add_option(
                  "--config-file", options.configFile,
                  "When the folder holds both config.yaml and flink-conf.yaml, read this one "
                  "(default: $FLINK_GPU_CONF_FILE, else what the folder's Flink version reads: "
                  "1.19 and 1.20 flink-conf.yaml, 2.x config.yaml; else config.yaml)"),
              {std::string(GlobalConfiguration::FLINK_CONF_FILENAME),
               std::string(GlobalConfiguration::LEGACY_FLINK_CONF_FILENAME)})
      ->type_name("NAME");
  command
      .add_option("-D", options.dynamicProperties,
                  "Set a configuration key, overriding the file (Flink's -D), e.g. "
                  "-Dexternal-resource.gpu.amount=2; implies --config")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
}

/// Adds `--coordination-file PATH` to `command`, and with `configuration` --config, --config-file
/// and -D (the Flink configuration whose GPU resources name the file). Which file is used is
/// resolveCoordinationFile's (commands/CoordinationFileOption.h), once the command is known.
void addCoordinationFileOptions(CLI::App& command, CoordinationFileOptions& options,
                                AfterParse& after, bool configuration = true) {
  command
      .add_option("--coordination-file", options.option,
                  "The coordination file shared by the workers of this host (default: $" +
                      std::string(coordination::kCoordinationFileVariable) +
                      ", else the one the GPU resources of the Flink configuration name (" +
                      (configuration ? "--config, " : "") +
                      "$FLINK_CONF_DIR, $FLINK_HOME/conf), else " +
                      coordination::kDefaultCoordinationFile + ")")
      ->type_name("PATH");
  if (configuration) addFlinkConfigurationOptions(command, options.flinkConfig, after);
}

/// --vendor nvidia|amd|intel (discover, exec): anything else is a usage error.
CLI::Option* addVendorOption(CLI::App& command, std::optional<discovery::Vendor>& vendor,
                             const std::string& description) {
  std::vector<std::pair<std::string, std::optional<discovery::Vendor>>> vendors;
  for (const discovery::Vendor each :
       {discovery::Vendor::kNvidia, discovery::Vendor::kAmd, discovery::Vendor::kIntel}) {
    vendors.emplace_back(std::string(discovery::vendorName(each)), each);
  }
  return addChoiceOption(command, "--vendor", vendor, std::move(vendors), description)
      ->type_name("VENDOR");
}

CLI::App* addDiscover(CLI::App& app, CommandLine& line, AfterParse& after) {
  DiscoverOptions& options = line.discover;
  CLI::App* command = app.add_subcommand(
      "discover", "Find out which GPUs a worker on this host gets, as Flink's GPU driver does.");
  // Each given one excludes --config and -D (runDiscover says so).
  std::vector<std::pair<SingleDriverOption, const CLI::Option*>> singleDriver;
  // Read as text, so that overflow and non-decimal forms get our own words
  // (commands/AmountOption.h); its type is still a number.
  singleDriver.emplace_back(
      SingleDriverOption::kAmount,
      command->add_option("-n,--amount", options.amount, "How many GPUs to ask for (must be > 0)")
          ->type_name("UINT")
          ->capture_default_str());
  singleDriver.emplace_back(
      SingleDriverOption::kDiscoveryScript,
      command
          ->add_option("--discovery-script", options.discoveryScript,
                       "The discovery script (default: nvidia-gpu-discovery.sh installed beside "
                       "flink-gpu, else Flink's default " +
                           *GPUDriverOptions::DISCOVERY_SCRIPT_PATH.defaultValue() +
                           " under $FLINK_HOME, else the working directory, else " +
                           GPUDriverOptions::DOCKER_DEFAULT_DISCOVERY_SCRIPT + ")")
          ->type_name("PATH"));
  singleDriver.emplace_back(
      SingleDriverOption::kVendor,
      addVendorOption(*command, options.vendor,
                      "Whose GPUs: nvidia (the default), amd or intel; runs that vendor's "
                      "default script, <vendor>-gpu-discovery.sh, from beside flink-gpu, and "
                      "reads that vendor's GPU properties; not with --discovery-script"));
  singleDriver.emplace_back(
      SingleDriverOption::kDiscoveryArgs,
      command->add_option("--discovery-args", options.discoveryArgs,
                          "Arguments for the script, split on whitespace (default: the single "
                          "argument 'null', as Flink passes it)"));
  singleDriver.emplace_back(
      SingleDriverOption::kTimeout,
      command
          ->add_option("--timeout", options.timeout,
                       "How long the script may run, e.g. '10 s', '500 ms', '1 min' (default 10 s)")
          ->type_name("DURATION"));
  singleDriver.emplace_back(
      SingleDriverOption::kMig,
      command->add_flag(
          "--mig", options.mig,
          "Pass --mig to the script: the default discovery then hands out MIG instances (by "
          "MIG-... UUID) instead of GPUs in MIG mode"));
  singleDriver.emplace_back(
      SingleDriverOption::kSelect,
      command
          ->add_option("--select", options.select,
                       "Pass --select EXPR to the script: the default discovery then hands out "
                       "only GPUs that match every term KEY OP VALUE of EXPR, e.g. "
                       "name~H100,memory.total>=40000 (keys: name, uuid, pci.bus_id, "
                       "memory.total, compute_capability, vendor, numa_node, mig)")
          ->type_name("EXPR"));
  after.push_back([singleDriver, &options] {
    for (const auto& [option, cliOption] : singleDriver) {
      if (cliOption->count() > 0) options.singleDriverOptionsGiven.push_back(option);
    }
  });
  addFormatOption(*command, options.format);
  command->add_flag("--strict", options.strict,
                    "With --config: when any resource cannot be started (bad amount, factory not "
                    "installed, driver cannot be made), run nothing; without it such a resource "
                    "is skipped, as a TaskManager skips it");
  addFlinkConfigurationOptions(*command, options.flinkConfig, after);
  return command;
}

CLI::App* addStatus(CLI::App& app, CommandLine& line, AfterParse& after) {
  StatusOptions& options = line.status;
  CLI::App* command =
      app.add_subcommand("status",
                         "Show which GPUs the coordination file records, for which processes, and "
                         "whether those are still running (with each GPU's name, PCI bus id and "
                         "memory when NVML can tell).");
  addCoordinationFileOptions(*command, options.coordination, after);
  addFormatOption(*command, options.format, /*prometheus=*/true);
  command
      ->add_option("--gpu", options.gpu,
                   "Only this GPU and its records: an index, a GPU-/MIG- UUID or a PCI bus id")
      ->type_name("GPU");
  std::vector<std::pair<std::string, std::optional<GpuState>>> states;
  for (const GpuState state : {GpuState::kFree, GpuState::kHeld, GpuState::kShared, GpuState::kBusy,
                               GpuState::kUnhealthy, GpuState::kDrained}) {
    states.emplace_back(std::string(gpuStateWord(state)), state);
  }
  addChoiceOption(*command, "--state", options.state, std::move(states),
                  "Only the GPUs in this state, and their records")
      ->type_name("STATE");
  command->add_flag("--no-headers", options.noHeaders, "Print the tables without their header");
  return command;
}

CLI::App* addRelease(CLI::App& app, CommandLine& line, AfterParse& after) {
  ReleaseOptions& options = line.release;
  CLI::App* command = app.add_subcommand(
      "release",
      "Free GPUs by hand: remove the records of one owner process (--owner), of one GPU (--gpu), "
      "of every owner that is gone (--gone) or of GPUs this host no longer has (--stale) from the "
      "coordination file, or the lines that are not records (--junk).");
  command->add_option("--owner", options.owner, "Release every GPU held by this process id")
      ->transform(processIdValidator())
      ->type_name("PID");
  command
      ->add_option("--gpu", options.gpu,
                   "Release this GPU (an index, a GPU-/MIG- UUID, or an AMD or Intel unit as "
                   "recorded, e.g. amd:00000000:05:00.3)")
      ->type_name("GPU");
  command->add_flag("--junk", options.junk,
                    "Remove the lines that are not records (also from a file grown past its "
                    "size limit)");
  command->add_flag("--gone", options.gone,
                    "Remove every record whose owner is known to be gone (never one that cannot "
                    "be judged from here)");
  command->add_flag("--stale", options.stale,
                    "Remove every record of a GPU this host no longer has (a board replaced, a "
                    "MIG layout changed), but those of an owner that runs");
  command->add_flag("--force", options.force,
                    "Also remove records whose owner is running (it may still use the GPU; "
                    "one whose lease is held stays held by the lease until what holds it ends)");
  addCoordinationFileOptions(*command, options.coordination, after);
  addFormatOption(*command, options.format);
  return command;
}

CLI::App* addExec(CLI::App& app, CommandLine& line, AfterParse& after) {
  ExecOptions& options = line.exec;
  CLI::App* command = app.add_subcommand(
      "exec",
      "Run a command with GPUs of its own: allocate them in the coordination file, set "
      "CUDA_VISIBLE_DEVICES, and run the command, holding them until it ends.");
  // Read as text, as discover reads its own (commands/AmountOption.h).
  command->add_option("-n,--amount", options.amount, "How many GPUs to allocate (must be > 0)")
      ->type_name("UINT")
      ->required();
  addCoordinationFileOptions(*command, options.coordination, after, /*configuration=*/false);
  command
      ->add_option("--gpus", options.gpus,
                   "The GPUs of this host, comma or space separated (default: ask NVML, else "
                   "nvidia-smi)")
      ->type_name("LIST");
  command->add_flag("--mig", options.mig,
                    "Allocate MIG instances, by their MIG-... UUIDs, instead of the GPUs in MIG "
                    "mode they are carved from (GPUs not in MIG mode are still allocated "
                    "whole); not with --gpus");
  command
      ->add_option("--select", options.select,
                   "Allocate only GPUs (or MIG instances) that match every term KEY OP VALUE of "
                   "EXPR, comma-separated, e.g. name~H100,memory.total>=40000; keys: name, uuid, "
                   "pci.bus_id, memory.total (MiB), compute_capability, vendor, numa_node, mig "
                   "(yes/no); OP: = != ~ (contains, ignoring case) >= <= > <; not with --vendor "
                   "amd|intel")
      ->type_name("EXPR");
  addVendorOption(*command, options.vendor,
                  "Allocate AMD or Intel GPUs (from sysfs) and set ROCR_VISIBLE_DEVICES and "
                  "HIP_VISIBLE_DEVICES, or ZE_AFFINITY_MASK, instead of CUDA_VISIBLE_DEVICES "
                  "(default: nvidia, as without it); not with --gpus, --mig or --bind-cpus");
  const CLI::Option* visibleDevices =
      addChoiceOption(*command, "--visible-devices", options.visibleDevices,
                      {{"index", VisibleDevices::kIndex}, {"uuid", VisibleDevices::kUuid}},
                      "What CUDA_VISIBLE_DEVICES gets when none is inherited: index (NVML's, "
                      "which CUDA uses under CUDA_DEVICE_ORDER=PCI_BUS_ID, set unless already "
                      "set) or uuid (what an MPS share gets when this option is not given); "
                      "an inherited CUDA_VISIBLE_DEVICES limits the GPUs and its own entries "
                      "are passed on")
          ->default_str("index");
  after.push_back(
      [visibleDevices, &options] { options.visibleDevicesGiven = visibleDevices->count() > 0; });
  command->add_flag("--share", options.share,
                    "Take one share on each of N distinct GPUs declared shared (flink-gpu share) "
                    "instead of whole GPUs; sets FLINK_GPU_SHARE_MEMORY_MIB, and CUDA_MPS_* "
                    "behind an MPS control daemon, which must be running; not with --mig");
  // Read as text, so that a bad value gets our own words.
  command
      ->add_option("--share-placement", options.sharePlacement,
                   "With --share: pack (the GPUs already shared first, keeping whole GPUs free) "
                   "or spread (unshared GPUs first) (default: pack)")
      ->type_name("pack|spread");
  addChoiceOption(
      *command, "--placement", options.placement,
      {{"topology", placement::Policy::kTopology}, {"index", placement::Policy::kIndex}},
      "Which of the free GPUs to take: topology (the best-connected set, where "
      "NVML tells how they are connected) or index (the first free ones, as "
      "Flink does)")
      ->default_str("topology");
  command->add_flag("--bind-cpus", options.bindCpus,
                    "Run the command on the CPUs close to its GPUs (their NVML CPU affinity, "
                    "within the CPUs flink-gpu may use)");
  addChoiceOption(*command, "--health", options.health,
                  {{"skip", health::HealthMode::kSkip},
                   {"warn", health::HealthMode::kWarn},
                   {"ignore", health::HealthMode::kIgnore}},
                  "What to do with unhealthy or drained GPUs: skip them, warn and use them, "
                  "or ignore health")
      ->default_str("skip");
  addChoiceOption(*command, "--foreign", options.foreign,
                  {{"skip", usage::ForeignMode::kSkip},
                   {"warn", usage::ForeignMode::kWarn},
                   {"ignore", usage::ForeignMode::kIgnore}},
                  "What to do with GPUs that a process no record explains uses (NVML's process "
                  "lists): skip them, warn and use them, or do not look")
      ->default_str("skip");
  command
      ->add_option("command", options.command,
                   "The command to run and its arguments; everything from the first of them "
                   "on is the command's, options included (-- before it is optional)")
      ->type_name("ARG");
  // `flink-gpu exec -n 1 python -u train.py -v`: -u and -v are python's and train.py's.
  command->positionals_at_end();
  command->footer(
      "The command runs as flink-gpu's child, which holds the GPUs for it: they are recorded\n"
      "for flink-gpu's pid (the command's $PPID), stay taken while the command runs, and are\n"
      "free again once it ends; flink-gpu then exits with the command's status. If the command\n"
      "cannot be run, the GPUs are released and flink-gpu exits with 127 (not found) or 126\n"
      "(cannot be executed), as a shell does.\n");
  return command;
}

CLI::App* addConfig(CLI::App& app, CommandLine& line, AfterParse& after) {
  ConfigOptions& options = line.config;
  CLI::App* command = app.add_subcommand(
      "config",
      "Show the external resources of a Flink configuration as a TaskManager reads them "
      "(amounts, driver factories, parameters, Kubernetes/YARN keys); runs nothing.");
  addFlinkConfigurationOptions(*command, options.flinkConfig, after);
  addFormatOption(*command, options.format);
  return command;
}

CLI::App* addTopology(CLI::App& app, CommandLine& line, AfterParse&) {
  CLI::App* command = app.add_subcommand(
      "topology",
      "Show how this host's GPUs are connected (NVLink, PCIe, CPU and NUMA affinity), as NVML "
      "tells it: the matrix of nvidia-smi topo -m, which the placement rule chooses from.");
  addFormatOption(*command, line.topology.format);
  return command;
}

/// `--gpu GPU` (required but for undrain, which takes --stale instead) and `--reason TEXT` of
/// drain and undrain.
void addDrainOptions(CLI::App& command, DrainOptions& options, const std::string& reason,
                     AfterParse& after, bool required = true) {
  command.add_option("--gpu", options.gpu, "The GPU: an index, a GPU-/MIG- UUID, or a PCI bus id")
      ->type_name("GPU")
      ->required(required);
  command.add_option("--reason", options.reason, reason);
  addCoordinationFileOptions(command, options.coordination, after);
  addFormatOption(command, options.format);
}

CLI::App* addDrain(CLI::App& app, CommandLine& line, AfterParse& after) {
  CLI::App* command = app.add_subcommand(
      "drain",
      "Take a GPU out of new allocations (owners that hold it keep it), recording the time, the "
      "reason and who.");
  addDrainOptions(*command, line.drain, "Why, for status and check", after);
  return command;
}

CLI::App* addUndrain(CLI::App& app, CommandLine& line, AfterParse& after) {
  CLI::App* command = app.add_subcommand(
      "undrain",
      "Put a GPU back into allocations: clears a drain and a verdict of `flink-gpu watch` alike, "
      "recording the time, the reason and who.");
  addDrainOptions(*command, line.undrain, "Why, for the record", after, false);
  command->add_flag("--stale", line.undrain.stale,
                    "Instead of --gpu: remove every drain and verdict of a GPU this host no "
                    "longer has (a board replaced, a MIG layout changed)");
  return command;
}

CLI::App* addCheck(CLI::App& app, CommandLine& line, AfterParse& after) {
  CheckOptions& options = line.check;
  CLI::App* command = app.add_subcommand(
      "check",
      "A node health check (Slurm's HealthCheckProgram, NHC): exit 0 when all is well, else 1 "
      "with one line per problem.");
  command->add_option("--expect", options.expect, "The number of GPUs this host must have")
      ->type_name("UINT");
  addCoordinationFileOptions(*command, options.coordination, after);
  addFormatOption(*command, options.format);
  return command;
}

CLI::App* addWatch(CLI::App& app, CommandLine& line, AfterParse& after) {
  WatchCommandOptions& options = line.watch;
  CLI::App* command = app.add_subcommand(
      "watch",
      "Watch NVML's critical Xid and double-bit ECC events on every GPU, for the host's whole "
      "life, and record each unhealthy GPU so that no allocator hands it out. Ends cleanly on "
      "SIGTERM or SIGINT.");
  addCoordinationFileOptions(*command, options.coordination, after);
  command
      ->add_option("--ignore-xids", options.ignoreXids,
                   "Xids that are not critical, replacing the default 13,31,43,45,68,109 "
                   "(errors applications cause)")
      ->type_name("LIST");
  command
      ->add_option("--critical-xids", options.criticalXids,
                   "Only these Xids are critical (all others are ignored)")
      ->type_name("LIST");
  addChoiceOption(*command, "--readmit", options.readmit,
                  {{"driver", health::Readmit::kDriver}, {"never", health::Readmit::kNever}},
                  "Whether a GPU this watch recorded unhealthy is handed out again once the "
                  "driver, having asked a recovery action since the verdict, asks none and the GPU "
                  "answers: driver, or never (every verdict stays until flink-gpu undrain)")
      ->default_str("driver");
  return command;
}

/// `--gpu ID|all` (required but for unshare, which takes --stale instead) of share and unshare.
void addShareGpuOption(CLI::App& command, std::string& gpu, bool required = true) {
  command.add_option("--gpu", gpu, "The GPU: an index, a GPU- UUID, or all (every whole GPU)")
      ->type_name("ID|all")
      ->required(required);
}

CLI::App* addShare(CLI::App& app, CommandLine& line, AfterParse& after) {
  ShareOptions& options = line.share;
  CLI::App* command = app.add_subcommand(
      "share",
      "Declare whole GPUs shared among several workers, time-sliced or behind an MPS control "
      "daemon (written beside the coordination file; exec --share and the default discovery's "
      "--share hand the shares out).");
  addShareGpuOption(*command, options.gpu);
  // Read as text, so that a bad value gets our own words.
  command
      ->add_option("--replicas", options.replicas,
                   "How many workers share each GPU, 2 to 48; each share gets memory.total / K "
                   "MiB")
      ->type_name("K");
  command
      ->add_option("--share-memory", options.shareMemory,
                   "The MiB of each share instead; K is memory.total / MIB")
      ->type_name("MIB");
  command
      ->add_option("--mps", options.mps,
                   "The CUDA_MPS_PIPE_DIRECTORY of the MPS control daemon the operator runs for "
                   "these GPUs (an absolute path); without it the GPUs are time-sliced")
      ->type_name("DIR");
  addCoordinationFileOptions(*command, options.coordination, after);
  addFormatOption(*command, options.format);
  return command;
}

CLI::App* addUnshare(CLI::App& app, CommandLine& line, AfterParse& after) {
  CLI::App* command = app.add_subcommand(
      "unshare", "Take a GPU's sharing declaration out (shares already held are never revoked).");
  addShareGpuOption(*command, line.unshare.gpu, false);
  command->add_flag("--stale", line.unshare.stale,
                    "Instead of --gpu: take out every declaration of a GPU this host no longer "
                    "has (a board replaced)");
  addCoordinationFileOptions(*command, line.unshare.coordination, after);
  addFormatOption(*command, line.unshare.format);
  return command;
}

struct Subcommand {
  std::string_view name;
  Command command;
  CLI::App* (*add)(CLI::App&, CommandLine&, AfterParse&);
};

CLI::App* addCompletion(CLI::App& app, CommandLine& line, AfterParse& after);  // at the end

CLI::App* addWhich(CLI::App& app, CommandLine& line, AfterParse& after) {
  WhichOptions& options = line.which;
  CLI::App* command = app.add_subcommand(
      "which",
      "Show the GPUs a process may use: those of the nearest process up its parent chain (itself, "
      "its parent, ...) that holds GPUs in the coordination file (a TaskManager, flink-gpu exec, "
      "a worker with the in-process driver), and that owner; --format env prints them as export "
      "lines for a child (eval \"$(flink-gpu which --format env)\").");
  command
      ->add_option("--pid", options.pid,
                   "Ask about this process (default: flink-gpu itself, "
                   "so the process that runs it)")
      ->transform(processIdValidator())
      ->type_name("PID");
  addCoordinationFileOptions(*command, options.coordination, after);
  addChoiceOption(
      *command, "--format", options.format,
      {{"text", OutputFormat::kText}, {"json", OutputFormat::kJson}, {"env", OutputFormat::kEnv}},
      "Output format: text, json, or env (export lines for a POSIX shell)")
      ->default_str("text");
  return command;
}

/// `flink-gpu help [COMMAND]`: the help of flink-gpu or of COMMAND, as `git help` gives it; not a
/// command of kSubcommands, since it runs nothing (parseHelpCommand).
constexpr std::string_view kHelpCommand = "help";

/// In the order --help lists them.
constexpr std::array kSubcommands{
    Subcommand{"discover", Command::kDiscover, addDiscover},
    Subcommand{"status", Command::kStatus, addStatus},
    Subcommand{"release", Command::kRelease, addRelease},
    Subcommand{"exec", Command::kExec, addExec},
    Subcommand{"config", Command::kConfig, addConfig},
    Subcommand{"topology", Command::kTopology, addTopology},
    Subcommand{"drain", Command::kDrain, addDrain},
    Subcommand{"undrain", Command::kUndrain, addUndrain},
    Subcommand{"check", Command::kCheck, addCheck},
    Subcommand{"watch", Command::kWatch, addWatch},
    Subcommand{"share", Command::kShare, addShare},
    Subcommand{"unshare", Command::kUnshare, addUnshare},
    Subcommand{"which", Command::kWhich, addWhich},
    Subcommand{"completion", Command::kCompletion, addCompletion},
};

/// The subcommand argv names: its first argument that is not a flag (the global ones, -v and -q,
/// take no value), before any `--`; nullopt when there is none.
std::optional<std::string_view> commandWord(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg.empty() || arg.front() == '-') continue;
    return arg;
  }
  return std::nullopt;
}

const Subcommand* findSubcommand(std::string_view name) {
  for (const Subcommand& subcommand : kSubcommands) {
    if (subcommand.name == name) return &subcommand;
  }
  return nullptr;
}

/// "; did you mean 'X'?" for the candidate nearest to `typed`, when it is near enough to be what
/// was meant: at most 2 edits, and at most a third of the typed length, leading dashes not
/// counted (`-amount` means `--amount`; a word of one or two letters means nothing else). The
/// first of equally near candidates wins. Empty when none is near enough.
std::string didYouMean(std::string_view typed, const std::vector<std::string>& candidates) {
  const auto bare = [](std::string_view name) {
    name.remove_prefix(std::min(name.find_first_not_of('-'), name.size()));
    return name;
  };
  const std::string_view word = bare(typed);
  const std::size_t limit = std::min<std::size_t>(2, word.size() / 3);
  const std::string* best = nullptr;
  std::size_t bestDistance = limit + 1;
  for (const std::string& candidate : candidates) {
    const std::size_t distance = strings::editDistance(word, bare(candidate), limit);
    if (distance < bestDistance) {
      best = &candidate;
      bestDistance = distance;
    }
  }
  return best == nullptr ? "" : "; did you mean '" + *best + "'?";
}

/// Every name of every option of `command`: `-n`, `--amount`, ….
void addOptionNames(const CLI::App& command, std::vector<std::string>& names) {
  for (const CLI::Option* option : command.get_options()) {
    for (const std::string& name : option->get_snames()) names.push_back("-" + name);
    for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
  }
}

/// The first argument of argv, before any `--`, that looks like an option and that `app` or
/// `command` did not take, as typed up to any '=': "--amout" of `--amout 2` or `--amout=2`,
/// "-amount" of `-amount 2` (a long name after one dash), "-x" of `-x`.
std::optional<std::string> firstUnknownOption(int argc, char** argv, const CLI::App& app,
                                              const CLI::App* command) {
  std::vector<std::string> left = app.remaining();
  if (command != nullptr) {
    const std::vector<std::string> own = command->remaining();
    left.insert(left.end(), own.begin(), own.end());
  }
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg.front() != '-') continue;
    if (std::find(left.begin(), left.end(), arg) == left.end()) continue;
    return std::string(arg.substr(0, arg.find('=')));
  }
  return std::nullopt;
}

// ---- CLI11's parse errors in our words -------------------------------------------------------
// CLI11 says what went wrong in its own words ("--amount: 1 required UINT missing", "Could not
// convert: --expect = abc"); a person gets ours instead, naming the option as it was typed. The
// error's type tells what went wrong; which option it was about is found again from CLI11's state
// (what each option was given), never read from its message.

/// One place argv names `option`: as typed ("-n", "--amount"), and the value when the same
/// argument holds it ("--amount=2", "-n2").
struct TypedOption {
  std::string name;
  std::optional<std::string> value;
  int index = 0;
};

/// Where argv names `option`, before any `--`.
std::vector<TypedOption> occurrencesOf(int argc, char** argv, const CLI::Option& option) {
  std::vector<TypedOption> found;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg.starts_with("--")) {
      const std::size_t equals = arg.find('=');
      const std::string_view name = arg.substr(2, equals == arg.npos ? arg.npos : equals - 2);
      for (const std::string& known : option.get_lnames()) {
        if (name != known) continue;
        found.push_back(
            {"--" + known,
             equals == arg.npos ? std::nullopt : std::optional<std::string>(arg.substr(equals + 1)),
             i});
      }
    } else if (arg.size() >= 2 && arg.front() == '-') {
      for (const std::string& known : option.get_snames()) {
        if (arg.substr(1, known.size()) != known) continue;
        std::string_view rest = arg.substr(1 + known.size());
        if (rest.starts_with('=')) rest.remove_prefix(1);
        found.push_back(
            {"-" + known, rest.empty() ? std::nullopt : std::optional<std::string>(rest), i});
      }
    }
  }
  return found;
}

/// The name --help shows first for `option`: its long name, else its short one, else (a
/// positional argument) its own.
std::string displayName(const CLI::Option& option) {
  if (!option.get_lnames().empty()) return "--" + option.get_lnames().front();
  if (!option.get_snames().empty()) return "-" + option.get_snames().front();
  return option.get_name(/*positional=*/true);
}

/// `option` as the user typed it (the occurrence whose value is `value`, when one is given),
/// else as --help names it.
std::string typedName(int argc, char** argv, const CLI::Option& option,
                      const std::optional<std::string>& value = std::nullopt) {
  const std::vector<TypedOption> typed = occurrencesOf(argc, argv, option);
  for (const TypedOption& each : typed) {
    const std::optional<std::string> given =
        each.value ? each.value
                   : (each.index + 1 < argc ? std::optional<std::string>(argv[each.index + 1])
                                            : std::nullopt);
    if (value && given == value) return each.name;
  }
  return typed.empty() ? displayName(option) : typed.front().name;
}

/// "a or b", "a, b or c".
std::string orList(const std::vector<std::string>& words) {
  std::string text;
  for (std::size_t i = 0; i < words.size(); ++i) {
    if (i > 0) text += i + 1 == words.size() ? " or " : ", ";
    text += words[i];
  }
  return text;
}

/// What `option` takes, in words: its choices ("text or json"), else what a number of ours is,
/// else the type --help shows for it ("PATH", "DURATION").
std::string expectedValue(const CLI::Option& option) {
  if (const auto choices = choiceNames.find(&option); choices != choiceNames.end()) {
    return orList(choices->second);
  }
  const std::string type = option.get_type_name();
  if (type == "UINT") return "a whole number";
  if (type == "INT") return "a whole number";
  if (type == "PID") return "a process id";
  return type.empty() ? "a value" : type;
}

/// The options `app` and `command` know: the command's first, as --help lists them.
std::vector<CLI::Option*> knownOptions(CLI::App& app, CLI::App* command) {
  std::vector<CLI::Option*> options;
  if (command != nullptr) options = command->get_options();
  for (CLI::Option* option : app.get_options()) options.push_back(option);
  return options;
}

/// The option CLI11 refused the values of, and how: each option given is checked again (its
/// validators, the conversion to its type, how many times it may be given), as CLI11 checked it
/// when it failed. nullptr when none fails again.
template <typename Refusal>
CLI::Option* refusedOption(const std::vector<CLI::Option*>& options) {
  for (CLI::Option* option : options) {
    if (option->count() == 0) continue;
    try {
      option->run_callback();
    } catch (const Refusal&) {
      return option;
    } catch (const CLI::ParseError&) {
    }
  }
  return nullptr;
}

/// The first value of `option` that one of its validators refuses; else its first value.
std::string refusedValue(CLI::Option& option) {
  for (const std::string& result : option.results()) {
    for (int i = 0;; ++i) {
      CLI::Validator* validator = nullptr;
      try {
        validator = option.get_validator(i);
      } catch (const CLI::OptionNotFound&) {
        break;
      }
      std::string copy = result;
      if (!(*validator)(copy).empty()) return result;
    }
  }
  return option.results().empty() ? std::string() : option.results().front();
}

/// `invalid --format 'yaml': expected text or json`.
std::string describeInvalidValue(int argc, char** argv, CLI::Option& option) {
  const std::string value = refusedValue(option);
  const std::string name = typedName(argc, argv, option, value);
  const std::string invalid = "invalid " + name + " '" + strings::quoteForMessage(value) + "': ";
  // A flag given a value it cannot read as true or false (`--strict=maybe`).
  if (option.get_expected_max() == 0 || option.get_type_size_max() == 0) {
    return invalid + name + " takes no value";
  }
  return invalid + "expected " + expectedValue(option);
}

/// A missing value (`--amount` as the last argument), else an option given more often than it
/// may be.
std::string describeArgumentMismatch(int argc, char** argv,
                                     const std::vector<CLI::Option*>& options,
                                     const std::string& commandName) {
  // CLI11 takes the next argument as the value whatever it is: only the last one can lack it.
  const int last = argc - 1;
  for (CLI::Option* option : options) {
    if (option->get_expected_min() == 0 && option->get_type_size_min() == 0) continue;
    for (const TypedOption& typed : occurrencesOf(argc, argv, *option)) {
      if (typed.index == last && !typed.value) {
        return typed.name + " needs a value (" + expectedValue(*option) + ")";
      }
    }
  }
  if (CLI::Option* option = refusedOption<CLI::ArgumentMismatch>(options)) {
    const std::vector<TypedOption> typed = occurrencesOf(argc, argv, *option);
    return (typed.empty() ? displayName(*option) : typed.front().name) + " is given " +
           std::to_string(std::max<std::size_t>(typed.size(), 2)) + " times; " + commandName +
           " takes it once";
  }
  return "cannot read the command line";
}

/// A required option that was not given: `drain needs --gpu GPU`, `share needs --format (text or
/// json)`; a required argument: `completion needs its shell (bash or zsh)`.
std::string describeMissingOption(const std::vector<CLI::Option*>& options,
                                  const std::string& commandName) {
  for (const CLI::Option* option : options) {
    if (!option->get_required() || option->count() > 0) continue;
    const std::string name = (option->get_positional() ? "its " : "") + displayName(*option);
    if (choiceNames.contains(option)) {
      return commandName + " needs " + name + " (" + expectedValue(*option) + ")";
    }
    const std::string type = option->get_type_name();
    return commandName + " needs " + name + (type.empty() ? "" : " " + type);
  }
  return "cannot read the command line";
}

/// Arguments no option took: `unexpected argument 'extra': status takes only options`.
std::string describeExtras(int argc, char** argv, const CLI::App& app, const CLI::App* command) {
  std::vector<std::string> left = app.remaining();
  if (command != nullptr) {
    const std::vector<std::string> own = command->remaining();
    left.insert(left.end(), own.begin(), own.end());
  }
  std::vector<std::string> shown;
  for (const std::string& extra : left) {
    std::string typed = extra;
    // `-q=3` is left over as "-=3": name the argument it came from.
    if (std::find(argv + 1, argv + argc, extra) == argv + argc) {
      for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        if (arg.size() > 2 && arg[0] == '-' && arg[1] != '-' && extra.starts_with('-') &&
            arg.substr(2) == std::string_view(extra).substr(1)) {
          typed = arg;
        }
      }
    }
    shown.push_back(strings::inQuotes(typed));
  }
  if (shown.empty()) return "cannot read the command line";
  std::string what =
      std::string(shown.size() == 1 ? "unexpected argument " : "unexpected arguments ") +
      strings::join(shown, ", ");
  const bool takesArguments =
      command != nullptr &&
      !command->get_options([](const CLI::Option* option) { return option->get_positional(); })
           .empty();
  if (command != nullptr && !takesArguments) {
    what += ": " + command->get_name() + " takes only options";
  }
  return what;
}

/// Two options that exclude or need each other (Option::excludes, Option::needs).
std::string describeCombination(int argc, char** argv, const std::vector<CLI::Option*>& options,
                                bool excludes) {
  for (const CLI::Option* option : options) {
    if (option->count() == 0) continue;
    for (const CLI::Option* other : excludes ? option->get_excludes() : option->get_needs()) {
      if (excludes != (other->count() > 0)) continue;
      const std::string first = typedName(argc, argv, *option);
      const std::string second = typedName(argc, argv, *other);
      return excludes ? first + " cannot be combined with " + second
                      : first + " needs " + second + " too";
    }
  }
  return "cannot read the command line";
}

/// The commands `help` names, for a missing command and the nearest to an unknown one.
std::vector<std::string> commandNames() {
  std::vector<std::string> names;
  for (const Subcommand& subcommand : kSubcommands) names.emplace_back(subcommand.name);
  names.emplace_back(kHelpCommand);
  return names;
}

/// "unknown command 'dicsover'; did you mean 'discover'?"
std::string unknownCommand(std::string_view word) {
  return "unknown command '" + strings::quoteForMessage(word) + "'" +
         didYouMean(word, commandNames());
}

/// `error`, a parse error of CLI11 other than an unknown command or option, in our words.
std::string describeParseError(int argc, char** argv, CLI::App& app, CLI::App* command,
                               const CLI::ParseError& error) {
  const std::vector<CLI::Option*> options = knownOptions(app, command);
  const std::string commandName = command != nullptr ? command->get_name() : "flink-gpu";
  if (dynamic_cast<const CLI::RequiredError*>(&error) != nullptr) {
    if (app.get_subcommands().empty()) {
      return "no command given; the commands are " + orList(commandNames());
    }
    return describeMissingOption(options, commandName);
  }
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&error) != nullptr) {
    return describeArgumentMismatch(argc, argv, options, commandName);
  }
  if (dynamic_cast<const CLI::ValidationError*>(&error) != nullptr) {
    if (CLI::Option* option = refusedOption<CLI::ValidationError>(options)) {
      return describeInvalidValue(argc, argv, *option);
    }
  }
  if (dynamic_cast<const CLI::ConversionError*>(&error) != nullptr) {
    if (CLI::Option* option = refusedOption<CLI::ConversionError>(options)) {
      return describeInvalidValue(argc, argv, *option);
    }
  }
  if (dynamic_cast<const CLI::ExtrasError*>(&error) != nullptr) {
    return describeExtras(argc, argv, app, command);
  }
  if (dynamic_cast<const CLI::ExcludesError*>(&error) != nullptr) {
    return describeCombination(argc, argv, options, /*excludes=*/true);
  }
  if (dynamic_cast<const CLI::RequiresError*>(&error) != nullptr) {
    return describeCombination(argc, argv, options, /*excludes=*/false);
  }
  // What flink-gpu never sets up (configuration files, positional sets): not for a person.
  return "cannot read the command line";
}

/// The usage error of `error`, as two lines: what is wrong, standing alone (an unknown command
/// or option named, with the nearest known one), then where the help for it is.
void printUsageError(int argc, char** argv, CLI::App& app,
                     const std::optional<std::string_view>& word, const Subcommand* requested,
                     CLI::App* command, const CLI::ParseError& error) {
  std::string what;
  if (word && requested == nullptr) {
    what = unknownCommand(*word);
  } else if (const std::optional<std::string> unknown =
                 firstUnknownOption(argc, argv, app, command)) {
    std::vector<std::string> names;
    if (command != nullptr) addOptionNames(*command, names);
    addOptionNames(app, names);
    what =
        "unknown option '" + strings::quoteForMessage(*unknown) + "'" + didYouMean(*unknown, names);
  } else {
    what = describeParseError(argc, argv, app, command, error);
  }
  const std::string help =
      requested == nullptr
          ? std::string(word ? "Run 'flink-gpu --help' for the commands."
                             : "Run 'flink-gpu --help' for usage.")
          : "Run 'flink-gpu " + std::string(requested->name) + " --help' for its options.";
  std::cerr << "flink-gpu: error: " << what << '\n' << help << '\n';
}

// ---- help: `flink-gpu help`, and what each command's help ends with ---------------------------

/// What FLINK_HOME is when it is unset: told where flink-gpu reads it (the top-level help,
/// discover, config).
constexpr std::string_view kFlinkHomeParagraph =
    "When FLINK_HOME is not set, flink-gpu sets it to the folder above its own bin/, as Flink's\n"
    "bin/config.sh does: $FLINK_HOME/conf, $FLINK_HOME/plugins and the relative\n"
    "discovery-script paths of a configuration are then found there.\n";

/// The end of a command's help: command lines that work as shown (a test runs each).
struct CommandHelp {
  std::string_view command;
  /// One command line a line, each indented by two spaces.
  std::string_view examples;
  /// Whether the command reads FLINK_HOME (kFlinkHomeParagraph).
  bool readsFlinkHome = false;
};

constexpr std::array kCommandHelp{
    CommandHelp{"discover",
                "  flink-gpu discover --amount 2\n"
                "  flink-gpu discover --discovery-script ./my-gpus.sh --amount 2 --format json\n"
                "  flink-gpu discover --config\n",
                true},
    CommandHelp{"status",
                "  flink-gpu status\n"
                "  flink-gpu status --format json\n"
                "  flink-gpu status --format prometheus\n"},
    CommandHelp{"release",
                "  flink-gpu release --gone\n"
                "  flink-gpu release --owner 4242\n"
                "  flink-gpu release --gpu 3 --force\n"},
    CommandHelp{"exec",
                "  flink-gpu exec --amount 2 -- python train.py\n"
                "  flink-gpu exec -n 1 --bind-cpus -- nvidia-smi\n"
                "  flink-gpu exec -n 1 --share -- python serve.py\n"},
    CommandHelp{"config",
                "  flink-gpu config\n"
                "  flink-gpu config --format json\n"
                "  flink-gpu config -Dexternal-resource.gpu.amount=2\n",
                true},
    CommandHelp{"topology",
                "  flink-gpu topology\n"
                "  flink-gpu topology --format json\n"},
    CommandHelp{"drain",
                "  flink-gpu drain --gpu 3 --reason 'fan failure, ticket 1234'\n"
                "  flink-gpu drain --gpu 0000:3b:00.0\n"},
    CommandHelp{"undrain",
                "  flink-gpu undrain --gpu 3 --reason 'fan replaced'\n"
                "  flink-gpu undrain --gpu 0000:3b:00.0\n"
                "  flink-gpu undrain --stale\n"},
    CommandHelp{"check",
                "  flink-gpu check\n"
                "  flink-gpu check --expect 8 --format json\n"},
    CommandHelp{"watch",
                "  flink-gpu watch\n"
                "  flink-gpu watch --ignore-xids 13,31,43\n"
                "  flink-gpu watch --readmit never\n"},
    CommandHelp{"share",
                "  flink-gpu share --gpu 0 --replicas 4\n"
                "  flink-gpu share --gpu all --share-memory 40000\n"
                "  flink-gpu share --gpu 1 --replicas 3 --mps /run/nvidia-mps-1\n"},
    CommandHelp{"unshare",
                "  flink-gpu unshare --gpu 0\n"
                "  flink-gpu unshare --gpu all\n"
                "  flink-gpu unshare --stale\n"},
    CommandHelp{"which",
                "  flink-gpu which\n"
                "  flink-gpu which --format json\n"
                "  flink-gpu which --pid 1 --format env\n"},
    // The completion command of its own branch: its help ends so once both are merged.
    CommandHelp{"completion",
                "  flink-gpu completion bash\n"
                "  flink-gpu completion zsh\n"},
};

/// Ends the help of `command` (a subcommand of kSubcommands) with what it says of FLINK_HOME,
/// where it reads it, and its examples, after the footer of its own.
void endHelpWithExamples(CLI::App& command) {
  for (const CommandHelp& help : kCommandHelp) {
    if (help.command != command.get_name()) continue;
    std::string footer = command.get_footer();
    if (help.readsFlinkHome) {
      footer += (footer.empty() ? "" : "\n") + std::string(kFlinkHomeParagraph);
    }
    footer +=
        (footer.empty() ? "" : "\n") + std::string("Examples:\n") + std::string(help.examples);
    command.footer(footer);
  }
}

/// `flink-gpu [options] help [COMMAND] [...]`: parsed as `flink-gpu [options] [COMMAND] --help`;
/// `help help` is the top-level help, which tells of `help`. A COMMAND that is none is a usage
/// error naming the nearest.
std::optional<int> parseHelpCommand(int argc, char** argv, CommandLine& line) {
  std::vector<char*> args(argv, argv + argc);
  // Where commandWord found its word: the string_view it returns is a view of that argument.
  const auto wordAt = [&args]() -> std::optional<std::vector<char*>::iterator> {
    const std::optional<std::string_view> word =
        commandWord(static_cast<int>(args.size()), args.data());
    if (!word) return std::nullopt;
    return std::find(args.begin() + 1, args.end(), word->data());
  };
  // `help`, then COMMAND too when it is `help` again.
  for (int round = 0; round < 2; ++round) {
    const auto at = wordAt();
    if (!at || *at == args.end() || std::string_view(**at) != kHelpCommand) break;
    args.erase(*at);
  }
  const auto topic = wordAt();
  if (topic && *topic != args.end() && findSubcommand(**topic) == nullptr) {
    std::cerr << "flink-gpu: error: " << unknownCommand(**topic)
              << "\nRun 'flink-gpu --help' for the commands.\n";
    return kUsageError;
  }
  // Right after COMMAND (or flink-gpu): never after a `--`, where it would be an argument.
  static char helpOption[] = "--help";
  args.insert(topic && *topic != args.end() ? *topic + 1 : args.begin() + 1, helpOption);
  return parseCommandLine(static_cast<int>(args.size()), args.data(), line);
}

}  // namespace

std::optional<int> parseCommandLine(int argc, char** argv, CommandLine& line) {
  if (commandWord(argc, argv) == kHelpCommand) return parseHelpCommand(argc, argv, line);
  choiceNames.clear();
  CLI::App app(
      "flink-gpu: which GPUs a worker on this host gets, as Flink's GPU driver finds them; the "
      "external resources of a Flink configuration (discover --config, config); and the host's "
      "GPU coordination file (status, release, exec); how the GPUs are connected (topology); GPU "
      "health for operators (drain, undrain, check, watch); GPU sharing (share, unshare); the GPUs "
      "a process may use (which)",
      "flink-gpu");
  app.set_version_flag("--version", std::string("flink-gpu ") + buildVersion());
  app.require_subcommand(1);
  // Let -v/-q come after the subcommand too (`flink-gpu discover -q`).
  app.fallthrough();
  app.add_flag("-v,--verbose", line.verboseCount, "Show the library's log (info; twice for debug)");
  app.add_flag("-q,--quiet", line.quiet, "Print only the result and one line per error");

  // Only the requested command is set up: building every command's options is start-up work
  // (allocations, first touches of memory) that every run would pay. All are for --help, and
  // when the word is no command of ours (the help, the error's suggestion).
  const std::optional<std::string_view> word = commandWord(argc, argv);
  const Subcommand* requested = word ? findSubcommand(*word) : nullptr;
  AfterParse after;
  CLI::App* requestedApp = nullptr;
  for (const Subcommand& subcommand : kSubcommands) {
    if (requested != nullptr && requested != &subcommand) continue;
    CLI::App* added = subcommand.add(app, line, after);
    endHelpWithExamples(*added);
    if (requested == &subcommand) requestedApp = added;
  }
  // Set after the subcommands, which would otherwise take it as theirs. `help` is told here
  // rather than listed among the subcommands, which are the commands that do something (the
  // package's description names each).
  app.footer(
      "Run 'flink-gpu help COMMAND' (or 'flink-gpu COMMAND --help') for a command's "
      "options and examples.\n\n" +
      std::string(kFlinkHomeParagraph));

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    printUsageError(argc, argv, app, word, requested, requestedApp, e);
    return kUsageError;
  }
  for (const std::function<void()>& step : after) step();
  for (const CLI::App* parsed : app.get_subcommands()) {
    if (const Subcommand* subcommand = findSubcommand(parsed->get_name())) {
      line.command = subcommand->command;
      return std::nullopt;
    }
  }
  return kUsageError;  // not reached: a subcommand is required
}

}  // namespace flink::cli

namespace flink::cli {

CoordinationFileOptions* coordinationFileOptionsOf(CommandLine& line) {
  switch (line.command) {
    case Command::kStatus:
      return &line.status.coordination;
    case Command::kRelease:
      return &line.release.coordination;
    case Command::kExec:
      return &line.exec.coordination;
    case Command::kDrain:
      return &line.drain.coordination;
    case Command::kUndrain:
      return &line.undrain.coordination;
    case Command::kCheck:
      return &line.check.coordination;
    case Command::kWatch:
      return &line.watch.coordination;
    case Command::kShare:
      return &line.share.coordination;
    case Command::kUnshare:
      return &line.unshare.coordination;
    case Command::kWhich:
      return &line.which.coordination;
    case Command::kDiscover:
    case Command::kConfig:
    case Command::kTopology:
    case Command::kCompletion:
      return nullptr;
  }
  return nullptr;
}

}  // namespace flink::cli

// ---- completion: the command line described for the shells ---------------------------------
// `flink-gpu completion bash|zsh` prints scripts made from the same set-up as the parser's
// (commands/CompletionCommand.h), so that they offer exactly what it accepts.

namespace flink::cli {
namespace {

/// The choices a validator of `option` names: CLI11 describes an IsMember check as "{a,b,c}" after
/// the type ("TEXT:{text,json}"). An option read as text that names its values in its type
/// instead, each a lower-case word ("pack|spread"), has those; "ID|all" names a placeholder too,
/// and has none.
std::vector<std::string> choicesOf(const CLI::Option& option, const std::string& type) {
  std::vector<std::string> choices;
  const std::string full = option.get_type_name();
  const std::size_t open = full.find(":{");
  if (open != std::string::npos && full.back() == '}') {
    std::string_view list(full);
    list = list.substr(open + 2, list.size() - open - 3);
    while (!list.empty()) {
      const std::size_t comma = list.find(',');
      choices.emplace_back(list.substr(0, comma));
      if (comma == std::string_view::npos) break;
      list.remove_prefix(comma + 1);
    }
    return choices;
  }
  if (type.find('|') == std::string::npos) return {};
  std::string_view rest(type);
  while (true) {
    const std::string_view word = rest.substr(0, rest.find('|'));
    if (word.empty() || !std::all_of(word.begin(), word.end(),
                                     [](char c) { return (c >= 'a' && c <= 'z') || c == '-'; })) {
      return {};
    }
    choices.emplace_back(word);
    if (word.size() == rest.size()) return choices;
    rest.remove_prefix(word.size() + 1);
  }
}

CompletionOption describeOption(const CLI::App& command, const CLI::Option& option) {
  CompletionOption described;
  for (const std::string& name : option.get_snames()) described.names.push_back("-" + name);
  for (const std::string& name : option.get_lnames()) described.names.push_back("--" + name);
  described.description = option.get_description();
  if (option.get_expected_max() == 0) return described;  // a flag
  const std::string full = option.get_type_name();
  // The type as --help shows it before any validator's description: "UINT", "PATH", "[DIR]".
  std::string type = full.substr(0, full.find(":{"));
  // A positional argument's own name says more than CLI11's "TEXT": "shell".
  described.valueName = described.names.empty() && type == "TEXT" ? option.get_name() : type;
  described.valueOptional = option.get_expected_min() == 0;
  if (type.size() > 2 && type.front() == '[' && type.back() == ']')
    type = type.substr(1, type.size() - 2);
  described.choices = choicesOf(option, type);
  if (!described.choices.empty()) {
    described.value = ValueKind::kChoice;
  } else if (described.names.empty() && command.get_positionals_at_end() &&
             option.get_items_expected_max() > 1) {
    described.value = ValueKind::kCommandLine;
  } else if (type == "PATH") {
    described.value = ValueKind::kFile;
  } else if (type == "DIR") {
    described.value = ValueKind::kDirectory;
  } else {
    described.value = ValueKind::kOther;
  }
  return described;
}

/// `command`'s options and positionals.
void describeOptions(const CLI::App& command, std::vector<CompletionOption>& options,
                     std::vector<CompletionOption>* positionals) {
  for (const CLI::Option* option : command.get_options()) {
    CompletionOption described = describeOption(command, *option);
    if (!described.names.empty()) {
      options.push_back(std::move(described));
    } else if (positionals != nullptr) {
      positionals->push_back(std::move(described));
    }
  }
}

/// The whole command line: the global options of `app` (parsed, with the one subcommand it set
/// up), and every subcommand as parseCommandLine sets each up, in a CLI::App of its own.
CompletionModel describeCommandLine(const CLI::App& app) {
  CompletionModel model;
  describeOptions(app, model.globalOptions, nullptr);
  CLI::App all;
  CommandLine scratch;
  AfterParse ignored;
  for (const Subcommand& subcommand : kSubcommands) {
    const CLI::App* added = subcommand.add(all, scratch, ignored);
    CompletionSubcommand described;
    described.name = subcommand.name;
    described.description = added->get_description();
    describeOptions(*added, described.options, &described.positionals);
    model.subcommands.push_back(std::move(described));
  }
  return model;
}

CLI::App* addCompletion(CLI::App& app, CommandLine& line, AfterParse& after) {
  CLI::App* command = app.add_subcommand(
      "completion",
      "Print a completion script for bash (for /usr/share/bash-completion/completions/flink-gpu, "
      "or to source) or zsh (_flink-gpu, for a folder of $fpath).");
  addChoiceOption(*command, "shell", line.completion.shell,
                  {{"bash", CompletionShell::kBash}, {"zsh", CompletionShell::kZsh}},
                  "The shell: bash or zsh")
      ->required();
  after.push_back([&app, &line] { line.completion.model = describeCommandLine(app); });
  return command;
}

}  // namespace
}  // namespace flink::cli
