#include "commands/ConfigCommand.h"

#include <iostream>

#include <nlohmann/json.hpp>

#include "Console.h"
#include "ExitCode.h"
#include "flink/core/plugin/PluginManager.h"
#include "flink/externalresource/ExternalResourceUtils.h"

namespace flink::cli {
namespace {

using nlohmann::ordered_json;

/// What the factory name resolves to: "built in", a plugin library, or nullopt.
struct ResolvedResource {
  const ExternalResourceSpec* spec;
  std::optional<std::string> factorySource;
};

/// A parameter's value as shown: hidden when its key looks like a secret, as Flink hides them.
std::string shown(const std::string& key, const std::string& value) {
  return GlobalConfiguration::isSensitive(key) ? std::string(GlobalConfiguration::HIDDEN_CONTENT)
                                               : value;
}

ordered_json optionalText(const std::optional<std::string>& value) {
  return value ? ordered_json(*value) : ordered_json(nullptr);
}

void printText(const LoadedConfiguration& loaded, const PluginManager& plugins,
               const std::vector<ResolvedResource>& resources) {
  std::cout << "configuration: " << loaded.file.string() << '\n'
            << "plugins: " << plugins.pluginsDirectory().string() << '\n'
            << "external resources: " << resources.size() << '\n';
  for (const ResolvedResource& resource : resources) {
    const ExternalResourceSpec& spec = *resource.spec;
    std::cout << '\n' << spec.name << '\n';
    std::cout << "  amount: " << (spec.amount ? std::to_string(*spec.amount) : "(not usable)")
              << '\n';
    std::cout << "  driver-factory.class: " << spec.driverFactoryClass.value_or("(not set)");
    if (spec.driverFactoryClass) {
      std::cout << " (" << resource.factorySource.value_or("not found") << ')';
    }
    std::cout << '\n';
    std::cout << "  kubernetes.config-key: " << spec.kubernetesConfigKey.value_or("(not set)")
              << '\n';
    std::cout << "  yarn.config-key: " << spec.yarnConfigKey.value_or("(not set)") << '\n';
    for (const auto& [key, value] : spec.driverConfiguration.toMap()) {
      std::cout << "  param." << key << ": " << shown(key, value) << '\n';
    }
  }
}

void printJson(const LoadedConfiguration& loaded, const PluginManager& plugins,
               const std::vector<ResolvedResource>& resources, const ExternalResources& read) {
  ordered_json list = ordered_json::array();
  for (const ResolvedResource& resource : resources) {
    const ExternalResourceSpec& spec = *resource.spec;
    ordered_json params = ordered_json::object();
    for (const auto& [key, value] : spec.driverConfiguration.toMap()) {
      params[key] = shown(key, value);
    }
    list.push_back({{"name", spec.name},
                    {"amount", spec.amount ? ordered_json(*spec.amount) : ordered_json(nullptr)},
                    {"driver-factory.class", optionalText(spec.driverFactoryClass)},
                    {"driver-factory.source", optionalText(resource.factorySource)},
                    {"kubernetes.config-key", optionalText(spec.kubernetesConfigKey)},
                    {"yarn.config-key", optionalText(spec.yarnConfigKey)},
                    {"param", std::move(params)}});
  }
  const ordered_json out = {{"format", kJsonFormat},
                            {"configuration", loaded.file.string()},
                            {"plugins", plugins.pluginsDirectory().string()},
                            {"external-resources", std::move(list)},
                            {"errors", read.errors},
                            {"warnings", read.warnings}};
  // Bytes that are not UTF-8 (a configuration value) become U+FFFD instead of failing the output.
  std::cout << out.dump(2, ' ', false, ordered_json::error_handler_t::replace) << '\n';
}

}  // namespace

int runConfig(const ConfigOptions& options) {
  const std::optional<LoadedConfiguration> loaded = loadFlinkConfiguration(options.flinkConfig);
  if (!loaded) return kUsageError;

  ExternalResources read = ExternalResourceUtils::readExternalResources(loaded->configuration);
  const std::unique_ptr<PluginManager> pluginManager = ExternalResourceUtils::createPluginManager();
  PluginManager& plugins = *pluginManager;
  std::vector<ResolvedResource> resources;
  for (const ExternalResourceSpec& spec : read.resources) {
    ResolvedResource resource{&spec, std::nullopt};
    if (spec.driverFactoryClass) {
      resource.factorySource = plugins.describeFactorySource(*spec.driverFactoryClass);
      // Making the driver checks its parameters (the script is there and executable, the
      // time-out is valid) without discovering anything: what `discover --config` would refuse,
      // this refuses too.
      try {
        ExternalResourceUtils::createExternalResourceDriver(spec, plugins);
      } catch (const std::exception& e) {
        read.errors.emplace_back(e.what());
      }
    }
    resources.push_back(resource);
  }
  for (const PluginManager::PluginInfo& plugin : plugins.plugins()) {
    if (plugin.problem) {
      read.warnings.push_back("plugin " + plugin.library.string() + " refused: " + *plugin.problem);
    }
  }

  if (options.format == OutputFormat::kJson) {
    printJson(*loaded, plugins, resources, read);
  } else {
    printText(*loaded, plugins, resources);
  }
  for (const std::string& warning : read.warnings) printWarning(warning);
  for (const std::string& error : read.errors) printError("configuration error: " + error);
  return read.errors.empty() ? kSuccess : kUsageError;
}

}  // namespace flink::cli
