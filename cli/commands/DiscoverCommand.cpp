#include "commands/DiscoverCommand.h"

#include <charconv>
#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <system_error>

#include <nlohmann/json.hpp>

#include "Console.h"
#include "ExitCode.h"
#include "ResourceOutput.h"
#include "flink/core/plugin/PluginManager.h"
#include "flink/externalresource/ExternalResourceUtils.h"
#include "flink/externalresource/gpu/GPUDriverFactory.h"
#include "flink/externalresource/gpu/GPUDriverOptions.h"
#include "flink/util/Exceptions.h"

namespace flink::cli {
namespace {

namespace fs = std::filesystem;
using externalresource::gpu::GPUDriverFactory;
using externalresource::gpu::GPUDriverOptions;

/// The discovery script flink-gpu uses when none is given: the one installed beside it
/// (<prefix>/bin/flink-gpu → <prefix>/plugins/external-resource-gpu/), which is also where the
/// build tree keeps it; else Flink's default path.
std::string defaultDiscoveryScript() {
  std::error_code error;
  const fs::path self = fs::read_symlink("/proc/self/exe", error);
  if (!error) {
    const fs::path besideUs =
        self.parent_path().parent_path() / "plugins/external-resource-gpu/nvidia-gpu-discovery.sh";
    if (fs::exists(besideUs, error)) return besideUs.string();
  }
  return *GPUDriverOptions::DISCOVERY_SCRIPT_PATH.defaultValue();
}

void printGpus(const ExternalResourceInfoSet& gpus, const std::string& format) {
  if (format == "json") {
    std::cout << jsonText({{"gpu", infosToJson(gpus)}}) << '\n';
    return;
  }
  for (const auto& gpu : gpus) std::cout << gpu->toString() << '\n';
}

/// The --config form: every resource of the configuration, as a TaskManager starts them. Every
/// configuration problem is reported before anything runs (exit 2); then every resource is
/// discovered, a failure costing only its own resource (exit 1 at the end).
int runDiscoverConfigured(const DiscoverOptions& options) {
  for (const CLI::Option* option : options.singleDriverOptions) {
    if (option->count() > 0) {
      printError(option->get_name() +
                 " cannot be combined with --config or -D: the configuration says how each "
                 "resource is discovered (set external-resource.<name>.param.* there, or with -D)");
      return kUsageError;
    }
  }
  const std::optional<LoadedConfiguration> loaded = loadFlinkConfiguration(options.flinkConfig);
  if (!loaded) return kUsageError;

  const ExternalResources configured =
      ExternalResourceUtils::readExternalResources(loaded->configuration);
  for (const std::string& warning : configured.warnings) printWarning(warning);
  for (const std::string& error : configured.errors) {
    printError("configuration error in " + loaded->file.string() + ": " + error);
  }
  if (!configured.errors.empty()) return kUsageError;
  if (configured.resources.empty()) {
    printWarning("no external resources are configured in " + loaded->file.string() +
                 " ('external-resources' is not set, empty or 'none')");
  }

  // Every driver first: a configuration that cannot be started is reported whole, and runs
  // nothing.
  PluginManager plugins;
  std::vector<std::unique_ptr<ExternalResourceDriver>> drivers;
  bool driversMade = true;
  for (const ExternalResourceSpec& resource : configured.resources) {
    drivers.emplace_back();
    if (!resource.driverFactoryClass) continue;  // warned about above: no infos, like Flink
    try {
      drivers.back() = ExternalResourceUtils::createExternalResourceDriver(resource, plugins);
    } catch (const std::exception& e) {
      printError(std::string("configuration error: ") + e.what());
      driversMade = false;
    }
  }
  if (!driversMade) return kUsageError;

  int code = kSuccess;
  nlohmann::ordered_json json = nlohmann::ordered_json::object();
  for (std::size_t i = 0; i < configured.resources.size(); ++i) {
    const ExternalResourceSpec& resource = configured.resources[i];
    ExternalResourceInfoSet infos;
    if (drivers[i]) {
      try {
        infos = drivers[i]->retrieveResourceInfo(*resource.amount);
      } catch (const std::exception& e) {
        printError("discovery of the external resource '" + resource.name +
                   "' failed: " + e.what());
        code = kDiscoveryFailed;
        continue;  // left out: an empty list would read as "no devices"
      }
      if (infos.size() < static_cast<std::uint64_t>(*resource.amount)) {
        printWarning("asked for " + std::to_string(*resource.amount) + " of '" + resource.name +
                     "', got " + std::to_string(infos.size()));
      }
    }
    if (options.format == "json") {
      json[resource.name] = infosToJson(infos);
    } else {
      for (const auto& info : infos) std::cout << resource.name << ": " << info->toString() << '\n';
    }
  }
  if (options.format == "json") std::cout << jsonText(json) << '\n';
  return code;
}

}  // namespace

CLI::App* addDiscoverCommand(CLI::App& app, DiscoverOptions& options) {
  CLI::App* command = app.add_subcommand(
      "discover", "Find out which GPUs a worker on this host gets, as Flink's GPU driver does.");
  options.singleDriverOptions.push_back(
      command->add_option("-n,--amount", options.amount, "How many GPUs to ask for (must be > 0)")
          ->capture_default_str());
  options.singleDriverOptions.push_back(
      command->add_option("--discovery-script", options.discoveryScript,
                          "The discovery script (default: nvidia-gpu-discovery.sh installed beside "
                          "flink-gpu, else Flink's " +
                              *GPUDriverOptions::DISCOVERY_SCRIPT_PATH.defaultValue() + ")"));
  options.singleDriverOptions.push_back(
      command->add_option("--discovery-args", options.discoveryArgs,
                          "Arguments for the script, split on whitespace (default: the single "
                          "argument 'null', as Flink passes it)"));
  options.singleDriverOptions.push_back(command->add_option(
      "--timeout", options.timeout,
      "How long the script may run, e.g. '10 s', '500 ms', '1 min' (default 10 s)"));
  options.singleDriverOptions.push_back(command->add_flag(
      "--mig", options.mig,
      "Pass --mig to the script: the default discovery then hands out MIG instances (by MIG-... "
      "UUID) instead of GPUs in MIG mode"));
  command->add_option("--format", options.format, "Output format")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  addFlinkConfigurationOptions(*command, options.flinkConfig);
  return command;
}

int runDiscover(const DiscoverOptions& options) {
  if (options.flinkConfig.wanted()) return runDiscoverConfigured(options);
  // Checked before the script is even looked at, as the driver does.
  std::int64_t amount = 0;
  const std::string& text = options.amount;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), amount);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || amount <= 0) {
    printError("invalid --amount " + text + ": the amount of GPUs must be a positive integer" +
               (ec == std::errc::result_out_of_range ? " below 2^63" : ""));
    return kUsageError;
  }
  Configuration config;
  const bool usingDefaultScript = !options.discoveryScript.has_value();
  config.set(GPUDriverOptions::DISCOVERY_SCRIPT_PATH,
             usingDefaultScript ? defaultDiscoveryScript() : *options.discoveryScript);
  if (options.discoveryArgs || options.mig) {
    std::string args = options.discoveryArgs.value_or("");
    if (options.mig) args += args.empty() ? "--mig" : " --mig";
    config.set(GPUDriverOptions::DISCOVERY_SCRIPT_ARG, args);
  }
  if (options.timeout)
    config.setString(GPUDriverOptions::DISCOVERY_SCRIPT_TIMEOUT.key(), *options.timeout);

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
  try {
    gpus = driver->retrieveResourceInfo(amount);
  } catch (const std::invalid_argument& e) {
    printError(std::string("invalid --amount: ") + e.what());
    return kUsageError;
  } catch (const TimeoutException& e) {
    printError(std::string("discovery timed out: ") + e.what());
    return kDiscoveryFailed;
  } catch (const FlinkException& e) {
    printError(std::string("discovery failed: ") + e.what());
    const std::string_view reason = e.what();
    if (usingDefaultScript &&
        (reason.find("nvidia-smi was not found") != std::string_view::npos ||
         reason.find("no NVIDIA GPU found") != std::string_view::npos ||
         reason.find("no NVIDIA GPU on this host") != std::string_view::npos)) {
      printHint(
          "to try flink-gpu without NVIDIA GPUs, give it a discovery script of your own: "
          "flink-gpu discover --discovery-script ./my-gpus.sh --amount 2 (the script gets the "
          "amount as its first argument and prints indices such as 0,1)");
    }
    return kDiscoveryFailed;
  }

  if (gpus.size() < static_cast<std::uint64_t>(amount)) {
    printWarning("asked for " + std::to_string(amount) + " GPU(s), got " +
                 std::to_string(gpus.size()));
  }
  printGpus(gpus, options.format);
  return kSuccess;
}

}  // namespace flink::cli
