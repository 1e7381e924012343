// `flink-gpu discover`: what a worker does at start-up — make a GPUDriver through
// GPUDriverFactory and print the GPUs it gets; or, with --config, what a TaskManager does: make
// the driver of every external resource its Flink configuration lists and print what each gets.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "commands/FlinkConfigurationOption.h"
#include "commands/OutputFormat.h"
#include "host/enumeration/Vendor.h"

namespace flink::cli {

/// The options of the one-driver form, which --config and -D exclude: each says what a
/// configuration sets with a key of the resource instead.
enum class SingleDriverOption {
  kAmount,
  kDiscoveryScript,
  kVendor,
  kDiscoveryArgs,
  kTimeout,
  kMig,
  kSelect
};

struct DiscoverOptions {
  /// As typed: read by runDiscover, so that overflow and non-decimal forms are errors.
  std::string amount = "1";
  std::optional<std::string> discoveryScript;
  /// --vendor nvidia|amd|intel: that vendor's default script and GPU properties (the driver's
  /// `vendor`). A usage error with --discovery-script.
  std::optional<discovery::Vendor> vendor;
  std::optional<std::string> discoveryArgs;
  /// --mig: pass --mig to the script (the default discovery then hands out MIG instances).
  bool mig = false;
  /// --select EXPR: pass --select EXPR to the script (the default discovery then hands out only
  /// units that match); read here first, so that a bad one is a usage error.
  std::optional<std::string> select;
  std::optional<std::string> timeout;
  OutputFormat format = OutputFormat::kText;
  /// --strict (with --config): any resource that cannot be started stops everything, nothing
  /// runs. Without it a TaskManager's rule: such a resource is skipped, the others discovered.
  bool strict = false;
  /// --config/-D: discover every resource of a Flink configuration instead of one GPU driver.
  FlinkConfigurationOptions flinkConfig;
  /// The one-driver options given on the command line, in the order --help lists them.
  std::vector<SingleDriverOption> singleDriverOptionsGiven;
};

/// Runs the discovery; prints the GPUs on stdout and problems on stderr. @returns an ExitCode.
int runDiscover(const DiscoverOptions& options);

}  // namespace flink::cli
