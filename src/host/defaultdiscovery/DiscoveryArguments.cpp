// Reading nvidia-gpu-discovery's command line. See DiscoveryArguments.h for what is accepted;
// the messages for the amount and unknown arguments are the bash script's.
#include "host/defaultdiscovery/DiscoveryArguments.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "host/coordination/Coordination.h"
#include "host/coordination/CoordinationFile.h"
#include "host/coordination/ShareAllocation.h"
#include "host/enumeration/GpuEnumerator.h"
#include "host/placement/Placement.h"
#include "util/Strings.h"

namespace flink::defaultdiscovery {

using discovery::DiscoveryError;
using discovery::parseGpuList;
namespace {

std::string_view withoutLeadingZeros(std::string_view digits) noexcept {
  const std::size_t first = digits.find_first_not_of('0');
  return first == std::string_view::npos ? digits.substr(digits.size() - 1) : digits.substr(first);
}

/// The value of digits, or nullopt when it does not fit in `limit`.
std::optional<std::uint64_t> parseDigits(std::string_view digits, std::uint64_t limit) {
  std::uint64_t value = 0;
  for (char c : digits) {
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (value > (limit - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  return value;
}

/// The options of the default discovery, without their leading "--".
constexpr std::string_view kKnownOptions[] = {
    "enable-coordination-mode",
    "enable-coordination",
    "coordination-file",
    "gpus",
    "owner-pid",
    "mig",
    "placement",
    "health",
    "foreign",
    "share",
    "share-placement",
    "select",
};

/// How far (in edits) an argument may be from a known option's name to be taken for a
/// misspelling of it, by the length of that name. Two edits are a small part of a long name
/// (`coordination-fle`, `owner_pid`), but one edit already turns `mig` into `min`, `mix` or
/// `big`, words that may well be another script's own arguments; so a name of three letters
/// is only matched up to case, one of four to seven letters (`gpus`, `health`) within one edit,
/// and longer names within two.
std::size_t allowedEdits(std::string_view name) noexcept {
  if (name.size() <= 3) return 0;
  if (name.size() <= 7) return 1;
  return 2;
}

/// When `arg` (an argument no option took) looks like a misspelt option of ours, the message
/// saying so: it starts with "--", and its name (before any '=') is, ignoring case, within
/// allowedEdits of a known option's, or is a flag's name given a value. nullopt for anything
/// else: an unknown argument, which a script may ignore (Flink's examples pass some).
std::optional<std::string> misspeltOption(std::string_view arg) {
  if (!arg.starts_with("--")) return std::nullopt;
  const std::size_t equals = arg.find('=');
  const std::string_view typed =
      arg.substr(2, equals == std::string_view::npos ? arg.npos : equals - 2);
  if (typed.empty()) return std::nullopt;
  const std::string name = strings::toLower(typed);
  const std::string_view* nearest = nullptr;
  std::size_t nearestEdits = 0;
  for (const std::string_view& option : kKnownOptions) {
    const std::size_t allowed = allowedEdits(option);
    const std::size_t edits = strings::editDistance(name, option, allowed);
    if (edits <= allowed && (nearest == nullptr || edits < nearestEdits)) {
      nearest = &option;
      nearestEdits = edits;
    }
  }
  if (nearest == nullptr) return std::nullopt;
  const std::string known = "'--" + std::string(*nearest) + "'";
  if (typed == *nearest) {
    // Only a flag gets here with its own name (the options that take a value took it above):
    // `--mig=yes`, which would leave MIG off.
    return "unknown option " + strings::inQuotes(arg) + ": " + known + " takes no value";
  }
  return "unknown option " + strings::inQuotes(arg) + ": did you mean " + known + "?";
}

/// The detail line of a misspelt option's error: what the default discovery knows.
std::string knownOptionsLine() {
  return "the default discovery's options: --enable-coordination-mode (or "
         "--enable-coordination), --coordination-file PATH, --gpus LIST, --owner-pid PID, --mig, "
         "--placement topology|index, --health skip|warn|ignore, --foreign skip|warn|ignore, "
         "--share, --share-placement pack|spread, --select EXPR; an argument that looks like none "
         "of them is ignored with a note";
}

pid_t parseOwnerPid(std::string_view text) {
  const auto value = strings::isDigits(text) ? parseDigits(text, std::numeric_limits<pid_t>::max())
                                             : std::optional<std::uint64_t>();
  if (!value || *value == 0) {
    throw DiscoveryError("invalid --owner-pid " + strings::inQuotes(text) +
                         ": expected a process id (a positive integer)");
  }
  return static_cast<pid_t>(*value);
}

}  // namespace

DiscoveryArguments parseDiscoveryArguments(const std::vector<std::string>& args) {
  DiscoveryArguments parsed;
  std::optional<std::string> coordinationFileOption;

  const std::string amount = args.empty() ? std::string() : args.front();
  if (!strings::isDigits(amount) || amount.find_first_not_of('0') == std::string::npos) {
    throw DiscoveryError("invalid amount " + strings::inQuotes(amount) +
                         ": expected a positive integer");
  }
  parsed.amountText = std::string(withoutLeadingZeros(amount));
  parsed.amount = parseDigits(parsed.amountText, std::numeric_limits<std::size_t>::max())
                      .value_or(std::numeric_limits<std::size_t>::max());

  // An option's value: the next argument, or nullopt when there is none.
  std::size_t i = 1;
  auto nextValue = [&]() -> std::optional<std::string> {
    if (i + 1 >= args.size()) return std::nullopt;
    return args[++i];
  };

  bool sharePlacementGiven = false;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--enable-coordination-mode" || arg == "--enable-coordination") {
      parsed.coordination = true;
    } else if (arg == "--mig") {
      parsed.mig = true;
    } else if (arg == "--coordination-file" || arg.starts_with("--coordination-file=")) {
      const std::optional<std::string> path =
          arg == "--coordination-file"
              ? nextValue()
              : arg.substr(std::string_view("--coordination-file=").size());
      if (!path || path->empty()) {
        // Never fall back to the host's shared file when another one was meant.
        throw DiscoveryError("--coordination-file needs a path");
      }
      coordinationFileOption = *path;
    } else if (arg == "--gpus" || arg.starts_with("--gpus=")) {
      const std::optional<std::string> list =
          arg == "--gpus" ? nextValue() : arg.substr(std::string_view("--gpus=").size());
      if (!list) throw DiscoveryError("--gpus needs a list of GPUs, e.g. --gpus 0,1");
      parsed.gpus = parseGpuList(*list);
      if (parsed.gpus->empty()) {
        throw DiscoveryError("no GPU given: the list of --gpus is empty");
      }
    } else if (arg == "--owner-pid" || arg.starts_with("--owner-pid=")) {
      const std::optional<std::string> pid =
          arg == "--owner-pid" ? nextValue() : arg.substr(std::string_view("--owner-pid=").size());
      if (!pid) throw DiscoveryError("--owner-pid needs a process id");
      parsed.ownerPid = parseOwnerPid(*pid);
    } else if (arg == "--placement" || arg.starts_with("--placement=")) {
      const std::optional<std::string> policy =
          arg == "--placement" ? nextValue() : arg.substr(std::string_view("--placement=").size());
      const std::optional<placement::Policy> parsedPolicy =
          policy ? placement::parsePolicy(*policy) : std::nullopt;
      if (!parsedPolicy) {
        throw DiscoveryError("invalid --placement " + strings::inQuotes(policy.value_or("")) +
                             ": expected topology or index");
      }
      parsed.placement = *parsedPolicy;
    } else if (arg == "--select" || arg.starts_with("--select=")) {
      const std::optional<std::string> text =
          arg == "--select" ? nextValue() : arg.substr(std::string_view("--select=").size());
      if (!text) {
        throw DiscoveryError("--select needs terms KEY OP VALUE, e.g. --select name~H100; " +
                             discovery::selectorKeysLine());
      }
      if (parsed.select) {
        // Every other option given twice keeps its last value, but two selectors most likely
        // meant both sets of terms; keeping one would hand out GPUs the other rules out.
        const std::string joined = parsed.select->text() + "," + *text;
        throw DiscoveryError("--select given twice, " + strings::inQuotes(parsed.select->text()) +
                             " and " + strings::inQuotes(*text) +
                             ": a selector's terms must all hold, so to ask for both join them "
                             "with a comma: --select " +
                             strings::quoteForMessage(joined));
      }
      try {
        parsed.select = discovery::UnitSelector::parse(*text);
      } catch (const discovery::SelectorError& e) {
        throw DiscoveryError(e.what());
      }
    } else if (arg == "--share") {
      parsed.share = true;
    } else if (arg == "--share-placement" || arg.starts_with("--share-placement=")) {
      const std::optional<std::string> value =
          arg == "--share-placement" ? nextValue()
                                     : arg.substr(std::string_view("--share-placement=").size());
      const std::optional<coordination::SharePlacement> placement =
          value ? coordination::parseSharePlacement(*value) : std::nullopt;
      if (!placement) {
        throw DiscoveryError("invalid --share-placement " + strings::inQuotes(value.value_or("")) +
                             ": expected pack or spread");
      }
      parsed.sharePlacement = *placement;
      sharePlacementGiven = true;
    } else if (arg == "--health" || arg.starts_with("--health=")) {
      const std::optional<std::string> mode =
          arg == "--health" ? nextValue() : arg.substr(std::string_view("--health=").size());
      const std::optional<health::HealthMode> health =
          mode ? health::parseHealthMode(*mode) : std::nullopt;
      if (!health) {
        throw DiscoveryError("--health needs skip, warn or ignore" +
                             (mode ? ", not " + strings::inQuotes(*mode) : std::string()));
      }
      parsed.health = *health;
    } else if (arg == "--foreign" || arg.starts_with("--foreign=")) {
      const std::optional<std::string> mode =
          arg == "--foreign" ? nextValue() : arg.substr(std::string_view("--foreign=").size());
      const std::optional<usage::ForeignMode> foreign =
          mode ? usage::parseForeignMode(*mode) : std::nullopt;
      if (!foreign) {
        throw DiscoveryError("--foreign needs skip, warn or ignore" +
                             (mode ? ", not " + strings::inQuotes(*mode) : std::string()));
      }
      parsed.foreign = *foreign;
    } else if (arg == "null" || arg.empty()) {
      // What the drivers pass when no discovery-script.args are configured.
    } else if (std::optional<std::string> misspelt = misspeltOption(arg)) {
      // A misspelt option of ours would be ignored, and the GPUs handed out as it did not ask
      // (without coordination, from the host's shared file): never that.
      throw DiscoveryError(*misspelt, {knownOptionsLine()});
    } else {
      parsed.notes.push_back(Notice::note("ignoring unknown argument " + strings::inQuotes(arg)));
    }
  }
  if (parsed.share && !parsed.coordination) {
    throw DiscoveryError(
        "--share needs coordination mode (--enable-coordination-mode): a share exists only as a "
        "record of the coordination file");
  }
  if (parsed.share && parsed.mig) {
    throw DiscoveryError("--share and --mig cannot be combined: MIG instances are not shared");
  }
  if (sharePlacementGiven && !parsed.share) {
    parsed.notes.push_back(
        Notice::note("ignoring --share-placement, which applies only with --share"));
  }
  parsed.coordinationFileOption = coordinationFileOption;
  try {
    parsed.coordinationFile = coordination::chooseCoordinationFile(coordinationFileOption);
  } catch (const std::invalid_argument& e) {
    // An empty $FLINK_GPU_COORDINATION_FILE; without coordination mode no file is used.
    if (parsed.coordination) throw DiscoveryError(e.what());
    parsed.coordinationFile.path = coordination::kDefaultCoordinationFile;
  }
  return parsed;
}

bool asksForUsage(const std::vector<std::string>& args) {
  return !args.empty() && (args.front() == "--help" || args.front() == "-h");
}

std::string discoveryUsage(std::string_view script, discovery::Vendor vendor) {
  const bool nvidia = vendor == discovery::Vendor::kNvidia;
  const std::string vendorName = vendor == discovery::Vendor::kAmd ? "AMD" : "Intel";
  // An option, and what it does: the text's first line, then one per further line.
  struct Option {
    std::string name;
    std::vector<std::string> lines;
  };
  std::vector<Option> options{
      {"AMOUNT", {"how many GPUs, a positive integer: always the first argument"}},
      {"--enable-coordination-mode",
       {"allocate them through the coordination file, for the worker that",
        "runs the script (also --enable-coordination)"}},
      {"--coordination-file PATH",
       {"the coordination file (default: $" + std::string(coordination::kCoordinationFileVariable) +
            ",",
        "else " + std::string(coordination::kDefaultCoordinationFile) + ")"}},
  };
  if (nvidia) {
    options.push_back(
        {"--gpus LIST",
         {"the host's GPUs, comma or space separated, instead of asking NVML", "or nvidia-smi"}});
  }
  options.push_back({"--owner-pid PID",
                     {"the process the GPUs are recorded for (default: the script's", "parent)"}});
  if (nvidia) {
    options.push_back(
        {"--mig",
         {"hand out MIG instances (by their MIG-... UUIDs) instead of the", "GPUs in MIG mode"}});
    options.push_back(
        {"--placement topology|index",
         {"which free GPUs: the best-connected set (the default), or the", "first free ones"}});
    options.push_back({"--health skip|warn|ignore",
                       {"unhealthy or drained GPUs: skip them (the default), warn and use",
                        "them, or ignore health"}});
    options.push_back({"--foreign skip|warn|ignore",
                       {"GPUs a process no record explains uses: skip them in",
                        "coordination mode (the default), warn and use them, or do not look"}});
    options.push_back({"--select EXPR",
                       {"only GPUs that match: KEY OP VALUE terms, comma-separated, all of",
                        "which must hold (name~H100,memory.total>=40000); keys: name, uuid,",
                        "pci.bus_id, memory.total, compute_capability, vendor, numa_node,",
                        "mig; OP one of = != ~ (contains) >= <= > <"}});
    options.push_back({"--share",
                       {"one share on each of AMOUNT GPUs declared shared (flink-gpu",
                        "share), instead of whole GPUs; needs coordination mode"}});
    options.push_back({"--share-placement pack|spread",
                       {"with --share: the GPUs already shared first (the default), or the",
                        "unshared ones first"}});
  } else {
    options.push_back({"--placement topology|index", {"read; the first free GPUs are taken"}});
    options.push_back({"--health skip|warn|ignore",
                       {"ignored, with a note: no health records for these GPUs yet"}});
    options.push_back({"--foreign skip|warn|ignore",
                       {"read; nothing is judged: no process lists for these GPUs yet"}});
  }
  options.push_back({"-h, --help", {"print this help (as the first argument only)"}});

  std::string text = "Usage: " + std::string(script) + " AMOUNT [OPTIONS]\n";
  text += nvidia ? "Prints AMOUNT of this host's GPUs on one line, their indices comma-separated "
                   "(Flink's\ndiscovery-script protocol), or exits 1 with the cause on the first "
                   "line of stderr.\n\n"
                 : "Prints AMOUNT of this host's " + vendorName +
                       " GPUs on one line, comma-separated, as the vendor's\nruntime numbers them "
                       "in this process, or exits 1 with the cause on the first line of\nstderr.\n"
                       "\n";
  constexpr std::size_t kColumn = 34;
  for (const Option& option : options) {
    std::string name = "  " + option.name;
    name.resize(std::max(kColumn, name.size() + 1), ' ');
    text += name + option.lines.front() + "\n";
    for (std::size_t i = 1; i < option.lines.size(); ++i) {
      text += std::string(kColumn, ' ') + option.lines[i] + "\n";
    }
  }
  text += "\n";
  if (!nvidia) text += "--gpus, --mig, --share and --select are NVIDIA's, and an error here.\n";
  text +=
      "Other arguments are ignored with a note (`null`, which Flink passes when no arguments "
      "are\nconfigured, silently); one that looks like a misspelt option is an error.\n";
  return text;
}

}  // namespace flink::defaultdiscovery
