// Reading nvidia-gpu-discovery's command line. See DiscoveryArguments.h for what is accepted;
// the messages for the amount and unknown arguments are the bash script's.
#include "defaultdiscovery/DiscoveryArguments.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "coordination/Coordination.h"
#include "discovery/GpuEnumerator.h"
#include "placement/Placement.h"
#include "util/Strings.h"

namespace flink::defaultdiscovery {

using discovery::DiscoveryError;
using discovery::parseGpuList;
namespace {

bool isDigits(std::string_view text) noexcept {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

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

std::string inQuotes(std::string_view text) { return "'" + strings::quoteForMessage(text) + "'"; }

pid_t parseOwnerPid(std::string_view text) {
  const auto value = isDigits(text) ? parseDigits(text, std::numeric_limits<pid_t>::max())
                                    : std::optional<std::uint64_t>();
  if (!value || *value == 0) {
    throw DiscoveryError("invalid --owner-pid " + inQuotes(text) +
                         ": expected a process id (a positive integer)");
  }
  return static_cast<pid_t>(*value);
}

}  // namespace

DiscoveryArguments parseDiscoveryArguments(const std::vector<std::string>& args) {
  DiscoveryArguments parsed;
  parsed.coordinationFile = coordination::kDefaultCoordinationFile;

  const std::string amount = args.empty() ? std::string() : args.front();
  if (!isDigits(amount) || amount.find_first_not_of('0') == std::string::npos) {
    throw DiscoveryError("invalid amount " + inQuotes(amount) + ": expected a positive integer");
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
      parsed.coordinationFile = *path;
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
        throw DiscoveryError("invalid --placement " + inQuotes(policy.value_or("")) +
                             ": expected topology or index");
      }
      parsed.placement = *parsedPolicy;
    } else if (arg == "--health" || arg.starts_with("--health=")) {
      const std::optional<std::string> mode =
          arg == "--health" ? nextValue() : arg.substr(std::string_view("--health=").size());
      if (!mode || (*mode != "skip" && *mode != "warn" && *mode != "ignore")) {
        throw DiscoveryError("--health needs skip, warn or ignore" +
                             (mode ? ", not " + inQuotes(*mode) : std::string()));
      }
      parsed.health = *mode;
    } else if (arg == "null" || arg.empty()) {
      // What the drivers pass when no discovery-script.args are configured.
    } else {
      parsed.notes.push_back("note: ignoring unknown argument " + inQuotes(arg));
    }
  }
  return parsed;
}

}  // namespace flink::defaultdiscovery
