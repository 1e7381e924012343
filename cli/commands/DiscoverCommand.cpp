#include "commands/DiscoverCommand.h"

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "Console.h"
#include "ExitCode.h"
#include "commands/AmountOption.h"
#include "commands/CoordinationFileOption.h"
#include "flink/core/plugin/PluginManager.h"
#include "flink/externalresource/ExternalResourceOptions.h"
#include "flink/externalresource/ExternalResourceUtils.h"
#include "flink/externalresource/gpu/GPUDriverFactory.h"
#include "flink/externalresource/gpu/GPUDriverOptions.h"
#include "flink/externalresource/gpu/ScriptFailure.h"
#include "flink/util/Exceptions.h"
#include "flink/util/TimeUtils.h"
#include "host/defaultdiscovery/DefaultDiscovery.h"
#include "host/enumeration/GpuEnumerator.h"
#include "host/enumeration/UnitSelector.h"
#include "util/Strings.h"

namespace flink::cli {
namespace {

namespace fs = std::filesystem;
using externalresource::gpu::GPUDriverFactory;
using externalresource::gpu::GPUDriverOptions;

/// The discovery script flink-gpu uses when none is given: `vendor`'s installed beside it
/// (<prefix>/bin/flink-gpu → <prefix>/plugins/external-resource-gpu/), which is also where the
/// build tree keeps it; else the driver's default path for that vendor.
std::string defaultDiscoveryScript(const std::string& vendor) {
  const std::string relative = GPUDriverOptions::defaultDiscoveryScript(vendor);
  std::error_code error;
  const fs::path self = fs::read_symlink("/proc/self/exe", error);
  if (!error) {
    const fs::path besideUs = self.parent_path().parent_path() / relative;
    if (fs::exists(besideUs, error)) return besideUs.string();
  }
  return relative;
}

/// [{"index": "0", "uuid": "GPU-…", …}, …]: every key getKeys() lists, in its order, values as
/// text.
nlohmann::ordered_json infosToJson(const ExternalResourceInfoSet& infos) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const auto& info : infos) {
    nlohmann::ordered_json properties = nlohmann::ordered_json::object();
    for (const std::string& key : info->getKeys()) {
      properties[key] = info->getProperty(key).value_or("");
    }
    list.push_back(std::move(properties));
  }
  return list;
}

/// `json` as compact text. Bytes that are not UTF-8 (a configuration value, a script's output)
/// become U+FFFD instead of failing the whole output.
std::string jsonText(const nlohmann::ordered_json& json) {
  return json.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

void printGpus(const ExternalResourceInfoSet& gpus, OutputFormat format) {
  if (format == OutputFormat::kJson) {
    std::cout << jsonText({{"format", kJsonFormat}, {"gpu", infosToJson(gpus)}}) << '\n';
    return;
  }
  for (const auto& gpu : gpus) std::cout << gpu->toString() << '\n';
}

/// How much of a failed script's stream its first line shows (of the stream's first line), and
/// the details after it (of the whole stream).
constexpr std::size_t kShownInSummary = 200;
constexpr std::size_t kShownInDetails = 2000;

/// What a failed script printed on one stream, for discoveryFailure: `summary` for the first
/// line ("; its stdout: '0'", its first line only, "(and 2 more lines below)" when there is
/// more), `details` the whole stream when there is more ("stderr:", then its lines); both empty
/// when it printed nothing.
struct StreamOfFailure {
  std::string summary;
  std::string details;
};

StreamOfFailure streamOfFailure(std::string_view name, const process::CapturedOutput& captured) {
  std::vector<std::string_view> lines;
  for (const std::string_view line : strings::split(captured.data, '\n')) {
    if (!strings::isBlank(line)) lines.push_back(strings::trim(line));
  }
  if (lines.empty() && captured.discardedBytes == 0) return {};
  StreamOfFailure stream;
  const std::string_view first = lines.empty() ? std::string_view() : lines.front();
  stream.summary =
      "; its " + std::string(name) + ": '" + strings::quoteForMessage(first, kShownInSummary) + "'";
  const bool more =
      lines.size() > 1 || first.size() > kShownInSummary || captured.discardedBytes > 0;
  if (!more) return stream;
  stream.summary += lines.size() > 1 ? " (and " + std::to_string(lines.size() - 1) + " more line" +
                                           (lines.size() > 2 ? "s" : "") + " below)"
                                     : " (more below)";
  stream.details = std::string(name) + ":";
  std::size_t shown = 0;
  std::size_t hidden = captured.discardedBytes;
  for (const std::string_view line : lines) {
    if (shown >= kShownInDetails) {
      hidden += line.size() + 1;
      continue;
    }
    const std::string_view part = line.substr(0, kShownInDetails - shown);
    hidden += line.size() - part.size();
    shown += part.size() + 1;
    stream.details += "\n" + strings::quoteForMessage(part, std::string::npos);
  }
  if (hidden > 0) stream.details += "\n... (" + std::to_string(hidden) + " more bytes)";
  return stream;
}

/// Why the discovery of `e` failed, as flink-gpu prints it. A script that exited non-zero or was
/// killed: one line that says how it ended, then what it printed, each stream labelled, so that
/// the exit code is never read as part of the output (the first line of each stream; the whole of
/// a stream that printed more follows on the next lines). Anything else as the driver words it.
std::string discoveryFailure(const std::exception& e) {
  try {
    std::rethrow_if_nested(e);
  } catch (const externalresource::gpu::ScriptFailure& failure) {
    const StreamOfFailure out = streamOfFailure("stdout", failure.stdoutOutput());
    const StreamOfFailure err = streamOfFailure("stderr", failure.stderrOutput());
    std::string text = failure.what();
    text += out.summary.empty() && err.summary.empty() ? " and printed nothing"
                                                       : out.summary + err.summary;
    for (const std::string* details : {&out.details, &err.details}) {
      if (!details->empty()) text += "\n" + *details;
    }
    return text;
  } catch (...) {
  }
  return e.what();
}

/// --timeout checked as the driver reads discovery-script.timeout, so that its error names the
/// option typed rather than the configuration key it becomes. Prints the error; false when bad.
bool timeoutOptionIsValid(const std::string& text) {
  const std::string invalid = "invalid --timeout '" + strings::quoteForMessage(text) + "': ";
  try {
    if (parseDuration(text).count() > 0) return true;
    printError(invalid + "the time-out must be positive");
  } catch (const InvalidDurationException& e) {
    printError(invalid + e.reason());
  }
  return false;
}

/// The option as --help names it.
std::string_view optionName(SingleDriverOption option) {
  switch (option) {
    case SingleDriverOption::kAmount:
      return "--amount";
    case SingleDriverOption::kDiscoveryScript:
      return "--discovery-script";
    case SingleDriverOption::kVendor:
      return "--vendor";
    case SingleDriverOption::kDiscoveryArgs:
      return "--discovery-args";
    case SingleDriverOption::kTimeout:
      return "--timeout";
    case SingleDriverOption::kMig:
      return "--mig";
    case SingleDriverOption::kSelect:
      return "--select";
  }
  return "";
}

/// "set external-resource.<name>.amount": how a configuration says what `option` says.
std::string whatTheConfigurationSets(SingleDriverOption option) {
  const std::string param = ExternalResourceOptions::getExternalResourceParamConfigPrefix("<name>");
  switch (option) {
    case SingleDriverOption::kAmount:
      return "set " + ExternalResourceOptions::getAmountConfigOptionForResource("<name>").key();
    case SingleDriverOption::kDiscoveryScript:
      return "set " + param + GPUDriverOptions::DISCOVERY_SCRIPT_PATH.key();
    case SingleDriverOption::kVendor:
      return "set " + param + GPUDriverOptions::VENDOR.key();
    case SingleDriverOption::kDiscoveryArgs:
      return "set " + param + GPUDriverOptions::DISCOVERY_SCRIPT_ARG.key();
    case SingleDriverOption::kTimeout:
      return "set " + param + GPUDriverOptions::DISCOVERY_SCRIPT_TIMEOUT.key();
    case SingleDriverOption::kMig:
      return "add --mig to " + param + GPUDriverOptions::DISCOVERY_SCRIPT_ARG.key();
    case SingleDriverOption::kSelect:
      return "add --select EXPR to " + param + GPUDriverOptions::DISCOVERY_SCRIPT_ARG.key();
  }
  return "";
}

/// The --config form: every resource of the configuration, as a TaskManager starts them.
/// A configuration that cannot be read as a whole (the file, a -D, the resource list) runs
/// nothing (exit 2). A resource that cannot be started (a bad amount, a factory that is not
/// installed, a driver that cannot be made) is skipped with one error line, as a TaskManager
/// skips it, and the others are discovered; the exit code is then 2. With --strict every such
/// problem is reported first and nothing runs. A failing discovery costs only its own resource
/// (exit 1 at the end, unless a resource was skipped).
/// GPU resources whose workers would coordinate through different files (or a relative one,
/// a file per working directory) may each hand out the same GPU: said before they run.
void warnAboutTheirCoordinationFiles(const DiscoverOptions& options,
                                     const LoadedConfiguration& loaded) {
  const std::vector<NamedCoordinationFile> named = coordinationFilesOf(options.flinkConfig, loaded);
  for (const NamedCoordinationFile& each : named) {
    if (each.path.is_relative()) {
      printWarning("the GPU resource '" + each.resource + "' coordinates through " +
                   each.path.string() + " (" + each.where +
                   "), a relative path, which each TaskManager reads from its own working "
                   "directory: name an absolute path");
    }
    if (each.path != named.front().path) {
      printWarning("the GPU resources '" + named.front().resource + "' and '" + each.resource +
                   "' coordinate through two files, " + named.front().path.string() + " and " +
                   each.path.string() + ": each may hand out the same GPU; name one file in both");
    }
  }
}

int runDiscoverConfigured(const DiscoverOptions& options, const LoadedConfiguration& loaded) {
  warnAboutTheirCoordinationFiles(options, loaded);
  const ExternalResources configured =
      ExternalResourceUtils::readExternalResources(loaded.configuration);
  for (const std::string& warning : configured.warnings) printWarning(warning);
  // A message names where the value it is about comes from: the file, or a -D over it.
  const auto sourceOf = [&](std::string_view key) {
    return sourceOfKey(options.flinkConfig, loaded, key);
  };
  const auto amountKey = [](const std::string& resource) {
    return ExternalResourceOptions::getAmountConfigOptionForResource(resource).key();
  };
  const std::string listKey = ExternalResourceOptions::EXTERNAL_RESOURCE_LIST.key();
  // Amount errors come with their resource; errors without any resource are the list's.
  const bool listUnreadable = configured.resources.empty() && !configured.errors.empty();
  if (options.strict || listUnreadable) {
    if (listUnreadable) {
      for (const std::string& error : configured.errors) {
        printError("configuration error in " + sourceOf(listKey) + ": " + error);
      }
    }
    for (const ExternalResourceSpec& resource : configured.resources) {
      if (resource.amountError) {
        printError("configuration error in " + sourceOf(amountKey(resource.name)) + ": " +
                   *resource.amountError);
      }
    }
    if (!configured.errors.empty()) return kUsageError;
  }
  if (configured.resources.empty()) {
    printWarning("no external resources are configured in " + sourceOf(listKey) + " ('" + listKey +
                 "' is not set, empty or 'none')");
  }

  // Every driver first: with --strict a configuration that cannot be started is reported
  // whole, and runs nothing.
  const std::unique_ptr<PluginManager> pluginManager = ExternalResourceUtils::createPluginManager();
  PluginManager& plugins = *pluginManager;
  std::vector<std::unique_ptr<ExternalResourceDriver>> drivers;
  std::vector<bool> skipped(configured.resources.size(), false);
  bool anySkipped = false;
  for (std::size_t i = 0; i < configured.resources.size(); ++i) {
    const ExternalResourceSpec& resource = configured.resources[i];
    drivers.emplace_back();
    if (!resource.amount) {
      // Only without --strict: with it, a bad amount has already ended the command above.
      printError("the external resource '" + resource.name +
                 "' is skipped: configuration error in " + sourceOf(amountKey(resource.name)) +
                 ": " + resource.amountError.value_or("bad amount"));
      skipped[i] = anySkipped = true;
      continue;
    }
    if (!resource.driverFactoryClass) continue;  // warned about above: no infos, like Flink
    try {
      drivers.back() = ExternalResourceUtils::createExternalResourceDriver(resource, plugins);
    } catch (const std::exception& e) {
      printError(options.strict ? std::string("configuration error: ") + e.what()
                                : "the external resource '" + resource.name +
                                      "' is skipped: configuration error: " + e.what());
      skipped[i] = anySkipped = true;
    }
  }
  if (options.strict && anySkipped) return kUsageError;

  int code = kSuccess;
  // {"format":1,"resources":{"<name>":[…],…}}: a resource may be named anything, "format" too.
  nlohmann::ordered_json json = nlohmann::ordered_json::object();
  for (std::size_t i = 0; i < configured.resources.size(); ++i) {
    if (skipped[i]) continue;  // left out, as a TaskManager leaves it out
    const ExternalResourceSpec& resource = configured.resources[i];
    ExternalResourceInfoSet infos;
    if (drivers[i]) {
      HeldLibraryWarnings warnings;
      try {
        infos = drivers[i]->retrieveResourceInfo(*resource.amount);
      } catch (const std::exception& e) {
        warnings.print(e.what());
        printError("discovery of the external resource '" + resource.name +
                   "' failed: " + discoveryFailure(e));
        code = kDiscoveryFailed;
        continue;  // left out: an empty list would read as "no devices"
      }
      if (infos.size() < static_cast<std::uint64_t>(*resource.amount)) {
        printWarning("asked for " + std::to_string(*resource.amount) + " of '" + resource.name +
                     "', got " + std::to_string(infos.size()));
      }
    }
    if (options.format == OutputFormat::kJson) {
      json[resource.name] = infosToJson(infos);
    } else {
      for (const auto& info : infos) std::cout << resource.name << ": " << info->toString() << '\n';
    }
  }
  if (options.format == OutputFormat::kJson) {
    std::cout << jsonText({{"format", kJsonFormat}, {"resources", std::move(json)}}) << '\n';
  }
  // A resource the configuration could not start is the bigger problem: the user must fix it.
  return anySkipped ? kUsageError : code;
}

/// The configuration of this host's Flink ($FLINK_CONF_DIR, else $FLINK_HOME/conf) when it lists
/// external resources, and which variable led to it. No
/// configuration there, or one without resources: nullopt. One that cannot be read: a warning,
/// and nullopt (the one-script discovery still runs).
std::optional<std::pair<LoadedConfiguration, std::string>> hostConfigurationWithResources() {
  const char* confDir = std::getenv("FLINK_CONF_DIR");
  const std::string via =
      (confDir != nullptr && *confDir != '\0') ? "$FLINK_CONF_DIR" : "$FLINK_HOME/conf";
  fs::path dir;
  try {
    dir = GlobalConfiguration::resolveConfigurationDirectory(std::nullopt);
  } catch (const IllegalConfigurationException&) {
    return std::nullopt;  // neither variable is set
  }
  if (!holdsFlinkConfiguration(dir)) return std::nullopt;
  try {
    LoadedConfiguration loaded = GlobalConfiguration::loadConfiguration(dir);
    const ExternalResources read =
        ExternalResourceUtils::readExternalResources(loaded.configuration);
    if (read.resources.empty() && read.errors.empty()) return std::nullopt;  // none listed
    return std::make_pair(std::move(loaded), via);
  } catch (const std::exception& e) {
    printWarning("the Flink configuration in " + dir.string() + " (" + via +
                 ") is not used: " + e.what());
    return std::nullopt;
  }
}

/// Why the default discovery failed, when it ran in-process: the driver nests its
/// DiscoveryFailure in the exception it throws. Nullopt for a script run as a program.
std::optional<discovery::DiscoveryError::Kind> defaultDiscoveryFailureKind(
    const std::exception& e) {
  try {
    std::rethrow_if_nested(e);
  } catch (const defaultdiscovery::DiscoveryFailure& failure) {
    return failure.kind();
  } catch (...) {
  }
  return std::nullopt;
}

}  // namespace

int runDiscover(const DiscoverOptions& options) {
  if (options.flinkConfig.wanted()) {
    if (!options.singleDriverOptionsGiven.empty()) {
      const SingleDriverOption option = options.singleDriverOptionsGiven.front();
      printError(std::string(optionName(option)) +
                 " cannot be combined with --config or -D: the configuration says how each "
                 "resource is discovered (" +
                 whatTheConfigurationSets(option) + " there, or with -D)");
      return kUsageError;
    }
    const std::optional<LoadedConfiguration> loaded = loadFlinkConfiguration(options.flinkConfig);
    if (!loaded) return kUsageError;
    return runDiscoverConfigured(options, *loaded);
  }
  // Only plain discover looks: with a script's options the configuration is not the question.
  if (auto host = options.singleDriverOptionsGiven.empty() ? hostConfigurationWithResources()
                                                           : std::nullopt) {
    // $FLINK_CONF_DIR asks for the configuration as --config does; one that is merely there
    // ($FLINK_HOME/conf, which flink-gpu may have set itself) changes nothing, and is said.
    if (host->second == "$FLINK_CONF_DIR") {
      for (const std::string& warning : host->first.warnings) printWarning(warning);
      printNote("discovering the external resources of the Flink configuration " +
                host->first.file.string() + " ($FLINK_CONF_DIR), as --config does; give " +
                "--discovery-script to run one script instead");
      return runDiscoverConfigured(options, host->first);
    }
    printNote("the Flink configuration " + host->first.file.string() + " (" + host->second +
              ") lists external resources and is not used: give --config to discover them as "
              "a TaskManager does");
  }
  if (options.strict) {
    printError("--strict applies to --config only");
    return kUsageError;
  }
  if (options.vendor && options.discoveryScript) {
    printError(
        "--vendor cannot be combined with --discovery-script: --vendor runs that vendor's "
        "default script (give the script alone, or --vendor alone)");
    return kUsageError;
  }
  // Checked before the script is even looked at, as the driver does.
  const std::optional<std::int64_t> parsedAmount = parseAmountOption(options.amount);
  if (!parsedAmount) return kUsageError;
  const std::int64_t amount = *parsedAmount;
  Configuration config;
  const bool usingDefaultScript = !options.discoveryScript.has_value();
  const discovery::Vendor vendor = options.vendor.value_or(discovery::Vendor::kNvidia);
  const std::string vendorText(discovery::vendorName(vendor));
  config.set(GPUDriverOptions::VENDOR, vendorText);
  config.set(GPUDriverOptions::DISCOVERY_SCRIPT_PATH,
             usingDefaultScript ? defaultDiscoveryScript(vendorText) : *options.discoveryScript);
  if (options.select) {
    // The script gets it among arguments split on whitespace, as Flink splits them.
    if (std::any_of(options.select->begin(), options.select->end(), strings::isSpace)) {
      printError("--select " + strings::shellWord(strings::quoteForMessage(*options.select)) +
                 ": a selector holds no space, as the script's arguments are split on spaces; "
                 "match a part of the name instead (name~L4)");
      return kUsageError;
    }
    try {
      (void)discovery::UnitSelector::parse(*options.select);
    } catch (const discovery::SelectorError& e) {
      printError(e.what());
      return kUsageError;
    }
  }
  if (options.discoveryArgs || options.mig || options.select) {
    std::string args = options.discoveryArgs.value_or("");
    if (options.mig) args += args.empty() ? "--mig" : " --mig";
    if (options.select) args += (args.empty() ? "--select " : " --select ") + *options.select;
    config.set(GPUDriverOptions::DISCOVERY_SCRIPT_ARG, args);
  }
  if (options.timeout) {
    if (!timeoutOptionIsValid(*options.timeout)) return kUsageError;
    config.setString(GPUDriverOptions::DISCOVERY_SCRIPT_TIMEOUT.key(), *options.timeout);
  }

  std::unique_ptr<ExternalResourceDriver> driver;
  try {
    driver = GPUDriverFactory().createExternalResourceDriver(config);
  } catch (const std::exception& e) {
    // Construction only checks the configuration: IllegalConfigurationException (blank path,
    // bad time-out), FileNotFoundException, FlinkException (not an executable file).
    printError(std::string("configuration error: ") + e.what());
    return kUsageError;
  }

  ExternalResourceInfoSet gpus;
  HeldLibraryWarnings warnings;
  try {
    gpus = driver->retrieveResourceInfo(amount);
  } catch (const std::invalid_argument& e) {
    warnings.print(e.what());
    printError(std::string("invalid --amount: ") + e.what());
    return kUsageError;
  } catch (const TimeoutException& e) {
    warnings.print(e.what());
    printError(std::string("discovery timed out: ") + e.what());
    return kDiscoveryFailed;
  } catch (const FlinkException& e) {
    warnings.print(e.what());
    printError("discovery failed: " + discoveryFailure(e));
    using Kind = discovery::DiscoveryError::Kind;
    const std::optional<Kind> kind = defaultDiscoveryFailureKind(e);
    if (usingDefaultScript && vendor == discovery::Vendor::kNvidia &&
        (kind == Kind::kNoDriver || kind == Kind::kNoGpu)) {
      printHint(
          "to try flink-gpu without NVIDIA GPUs, give it a discovery script of your own: "
          "flink-gpu discover --discovery-script ./my-gpus.sh --amount 2 (the script gets the "
          "amount as its first argument and prints indices such as 0,1)");
    }
    return kDiscoveryFailed;
  }
  warnings.print();

  if (gpus.size() < static_cast<std::uint64_t>(amount)) {
    printWarning("asked for " + std::to_string(amount) + " GPU(s), got " +
                 std::to_string(gpus.size()));
  }
  printGpus(gpus, options.format);
  return kSuccess;
}

}  // namespace flink::cli
