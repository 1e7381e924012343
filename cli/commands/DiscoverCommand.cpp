#include "commands/DiscoverCommand.h"

#include <charconv>
#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <system_error>

#include <nlohmann/json.hpp>

#include "Console.h"
#include "ExitCode.h"
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
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const auto& gpu : gpus) {
      nlohmann::ordered_json properties = nlohmann::ordered_json::object();
      for (const std::string& key : gpu->getKeys()) {
        properties[key] = gpu->getProperty(key).value_or("");
      }
      list.push_back(std::move(properties));
    }
    std::cout << nlohmann::ordered_json{{"gpu", std::move(list)}}.dump() << '\n';
    return;
  }
  for (const auto& gpu : gpus) std::cout << gpu->toString() << '\n';
}

}  // namespace

CLI::App* addDiscoverCommand(CLI::App& app, DiscoverOptions& options) {
  CLI::App* command = app.add_subcommand(
      "discover", "Find out which GPUs a worker on this host gets, as Flink's GPU driver does.");
  command->add_option("-n,--amount", options.amount, "How many GPUs to ask for (must be > 0)")
      ->capture_default_str();
  command->add_option("--discovery-script", options.discoveryScript,
                      "The discovery script (default: nvidia-gpu-discovery.sh installed beside "
                      "flink-gpu, else Flink's " +
                          *GPUDriverOptions::DISCOVERY_SCRIPT_PATH.defaultValue() + ")");
  command->add_option("--discovery-args", options.discoveryArgs,
                      "Arguments for the script, split on whitespace (default: the single "
                      "argument 'null', as Flink passes it)");
  command->add_option("--timeout", options.timeout,
                      "How long the script may run, e.g. '10 s', '500 ms', '1 min' (default 10 s)");
  command->add_option("--format", options.format, "Output format")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  return command;
}

int runDiscover(const DiscoverOptions& options) {
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
  if (options.discoveryArgs)
    config.set(GPUDriverOptions::DISCOVERY_SCRIPT_ARG, *options.discoveryArgs);
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
    if (usingDefaultScript && (reason.find("nvidia-smi was not found") != std::string_view::npos ||
                               reason.find("no NVIDIA GPU found") != std::string_view::npos)) {
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
