#include "flink/externalresource/ExternalResourceUtils.h"

#include <algorithm>
#include <exception>
#include <variant>

#include "flink/externalresource/ExternalResourceOptions.h"
#include "flink/externalresource/gpu/GPUDriverFactory.h"
#include "flink/util/Exceptions.h"
#include "util/Logging.h"
#include "util/Strings.h"

namespace flink {
namespace {

using Options = ExternalResourceOptions;

const logging::Logger& resourceLog() {
  static const logging::Logger logger("ExternalResourceUtils");
  return logger;
}

/// The amount of `name`, or the message saying why there is none (naming key and value).
std::variant<std::int64_t, std::string> readAmount(const Configuration& config,
                                                   const std::string& name) {
  const ConfigOption<std::int64_t> option = Options::getAmountConfigOptionForResource(name);
  const std::optional<std::string> text = config.getString(option.key());
  if (!text) {
    return "The amount of the external resource '" + name + "' is not configured: set '" +
           option.key() + "' to a positive integer.";
  }
  const std::string invalid = "Invalid value '" + strings::quoteForMessage(*text) +
                              "' for configuration key '" + option.key() + "': ";
  std::int64_t amount = 0;
  try {
    amount = detail::parseConfigValue<std::int64_t>(option.key(), *text);
  } catch (const IllegalConfigurationException&) {
    return invalid + "the amount must be a positive integer below 2^63.";
  }
  if (amount <= 0) return invalid + "the amount must be positive.";
  return amount;
}

std::optional<std::string> readNonBlank(const Configuration& config, const std::string& key) {
  std::optional<std::string> value = config.getString(key);
  if (value && strings::isBlank(*value)) return std::nullopt;
  if (value) return std::string(strings::trim(*value));
  return value;
}

/// The resource names of `external-resources`, by Flink's rules: `none` alone means none; names
/// are trimmed, blank ones dropped, repeated ones kept once (in first-seen order).
struct ListedNames {
  std::vector<std::string> names;
  bool blankSeen = false;
  std::vector<std::string> repeated;
};

/// @throws IllegalConfigurationException when the list cannot be read.
ListedNames listNames(const Configuration& config) {
  const std::vector<std::string> listed = config.get(Options::EXTERNAL_RESOURCE_LIST);
  ListedNames result;
  if (listed.size() == 1 && strings::toLower(strings::trim(listed.front())) == Options::NONE) {
    return result;
  }
  for (const std::string& entry : listed) {
    std::string name(strings::trim(entry));
    if (name.empty()) {
      result.blankSeen = true;
    } else if (std::find(result.names.begin(), result.names.end(), name) != result.names.end()) {
      result.repeated.push_back(std::move(name));
    } else {
      result.names.push_back(std::move(name));
    }
  }
  return result;
}

/// The driver of every usable resource of `read`; one that cannot be made is logged and left out.
std::map<std::string, std::unique_ptr<ExternalResourceDriver>> driversOf(
    const ExternalResources& read, PluginManager& plugins) {
  std::map<std::string, std::unique_ptr<ExternalResourceDriver>> drivers;
  for (const ExternalResourceSpec& resource : read.resources) {
    if (!resource.amount || !resource.driverFactoryClass) continue;
    try {
      drivers.emplace(resource.name,
                      ExternalResourceUtils::createExternalResourceDriver(resource, plugins));
    } catch (const std::exception& e) {
      resourceLog().warn(std::string("The external resource '") + resource.name +
                         "' gets no infos: " + e.what());
    }
  }
  return drivers;
}

void logProblems(const ExternalResources& read) {
  for (const std::string& error : read.errors) resourceLog().warn(error);
  for (const std::string& warning : read.warnings) resourceLog().warn(warning);
}

}  // namespace

std::vector<std::string> ExternalResourceUtils::getExternalResourceSet(
    const Configuration& config) {
  return listNames(config).names;
}

std::vector<PluginManager::BuiltInFactory> ExternalResourceUtils::builtInFactories() {
  return {{externalresource::gpu::GPUDriverFactory::CLASS_NAME,
           [] { return std::make_unique<externalresource::gpu::GPUDriverFactory>(); }}};
}

std::unique_ptr<PluginManager> ExternalResourceUtils::createPluginManager(
    std::filesystem::path pluginsDirectory) {
  return std::make_unique<PluginManager>(std::move(pluginsDirectory), builtInFactories());
}

ExternalResources ExternalResourceUtils::readExternalResources(const Configuration& config) {
  ExternalResources read;
  ListedNames listed;
  try {
    listed = listNames(config);
  } catch (const IllegalConfigurationException& e) {
    read.errors.emplace_back(e.what());
    return read;
  }
  const std::string listKey = Options::EXTERNAL_RESOURCE_LIST.key();
  if (listed.blankSeen) {
    read.warnings.push_back("'" + listKey + "' holds a blank resource name ('" +
                            strings::quoteForMessage(*config.getString(listKey)) +
                            "'); it is ignored.");
  }
  for (const std::string& name : listed.repeated) {
    read.warnings.push_back("'" + listKey + "' lists the resource '" + name +
                            "' more than once; it is configured once.");
  }

  for (const std::string& name : listed.names) {
    ExternalResourceSpec resource;
    resource.name = name;
    std::variant<std::int64_t, std::string> amount = readAmount(config, name);
    if (auto* value = std::get_if<std::int64_t>(&amount)) {
      resource.amount = *value;
    } else {
      resource.amountError = std::get<std::string>(amount);
      read.errors.push_back(std::move(std::get<std::string>(amount)));
    }
    const std::string factoryKey =
        Options::getExternalResourceDriverFactoryConfigOptionForResource(name).key();
    resource.driverFactoryClass = readNonBlank(config, factoryKey);
    if (!resource.driverFactoryClass) {
      read.warnings.push_back("The external resource '" + name + "' has no driver ('" + factoryKey +
                              "' is not set): it gets no infos.");
    }
    resource.driverConfiguration =
        config.withPrefixRemoved(Options::getExternalResourceParamConfigPrefix(name));
    resource.kubernetesConfigKey = readNonBlank(
        config, Options::keyWithResourceNameAndSuffix(name, Options::KUBERNETES_CONFIG_KEY_SUFFIX));
    resource.yarnConfigKey = readNonBlank(
        config, Options::keyWithResourceNameAndSuffix(name, Options::YARN_CONFIG_KEY_SUFFIX));
    read.resources.push_back(std::move(resource));
  }
  return read;
}

std::map<std::string, std::int64_t> ExternalResourceUtils::getExternalResourceAmountMap(
    const Configuration& config) {
  std::map<std::string, std::int64_t> amounts;
  for (const std::string& name : getExternalResourceSet(config)) {
    std::variant<std::int64_t, std::string> amount = readAmount(config, name);
    if (auto* value = std::get_if<std::int64_t>(&amount)) {
      amounts.emplace(name, *value);
    } else {
      resourceLog().warn(std::string("The external resource '") + name +
                         "' is ignored: " + std::get<std::string>(amount));
    }
  }
  return amounts;
}

std::map<std::string, std::string> ExternalResourceUtils::getExternalResourceConfigurationKeys(
    const Configuration& config, std::string_view suffix) {
  std::map<std::string, std::string> keys;
  for (const auto& [name, amount] : getExternalResourceAmountMap(config)) {
    const std::string key = Options::keyWithResourceNameAndSuffix(name, suffix);
    if (std::optional<std::string> value = readNonBlank(config, key)) {
      keys.emplace(name, std::move(*value));
    } else {
      resourceLog().warn(std::string("The external resource '") + name + "' does not set '" + key +
                         "'.");
    }
  }
  return keys;
}

std::unique_ptr<ExternalResourceDriver> ExternalResourceUtils::createExternalResourceDriver(
    const ExternalResourceSpec& resource, PluginManager& plugins) {
  if (!resource.driverFactoryClass) {
    throw FlinkException(
        "The external resource '" + resource.name + "' has no driver: '" +
        Options::getExternalResourceDriverFactoryConfigOptionForResource(resource.name).key() +
        "' is not set.");
  }
  try {
    std::unique_ptr<ExternalResourceDriverFactory> factory =
        plugins.createExternalResourceDriverFactory(*resource.driverFactoryClass);
    std::unique_ptr<ExternalResourceDriver> driver =
        factory->createExternalResourceDriver(resource.driverConfiguration);
    if (!driver) throw FlinkException("the factory returned no driver");
    return driver;
  } catch (const IllegalConfigurationException& e) {
    // The driver names its keys as it sees them, without the resource's prefix.
    throw FlinkException("Could not make the driver of the external resource '" + resource.name +
                         "' (" + *resource.driverFactoryClass + "): " + e.what() +
                         " (the driver's keys are relative to '" +
                         Options::getExternalResourceParamConfigPrefix(resource.name) + "')");
  } catch (const std::exception& e) {
    throw FlinkException("Could not make the driver of the external resource '" + resource.name +
                         "' (" + *resource.driverFactoryClass + "): " + e.what());
  }
}

std::map<std::string, std::unique_ptr<ExternalResourceDriver>>
ExternalResourceUtils::externalResourceDriversFromConfig(const Configuration& config,
                                                         PluginManager& plugins) {
  const ExternalResources read = readExternalResources(config);
  logProblems(read);
  return driversOf(read, plugins);
}

std::unique_ptr<StaticExternalResourceInfoProvider>
ExternalResourceUtils::createStaticExternalResourceInfoProvider(
    const std::map<std::string, std::int64_t>& externalResourceAmountMap,
    const std::map<std::string, std::unique_ptr<ExternalResourceDriver>>& externalResourceDrivers) {
  StaticExternalResourceInfoProvider::InfoMap infos;
  for (const auto& [name, driver] : externalResourceDrivers) {
    const auto amount = externalResourceAmountMap.find(name);
    if (amount == externalResourceAmountMap.end()) {
      resourceLog().warn(std::string("The amount of the external resource '") + name +
                         "' is not configured; it gets no infos.");
      continue;
    }
    try {
      infos.emplace(name, driver->retrieveResourceInfo(amount->second));
    } catch (const std::exception& e) {
      resourceLog().warn(
          std::string("Failed to retrieve the information of the external resource '") + name +
          "': " + e.what());
    }
  }
  return std::make_unique<StaticExternalResourceInfoProvider>(std::move(infos));
}

std::unique_ptr<StaticExternalResourceInfoProvider>
ExternalResourceUtils::createStaticExternalResourceInfoProviderFromConfig(
    const Configuration& config, PluginManager& plugins) {
  // An unreadable list fails the start-up, as in Flink (this throws); everything else is read
  // once, so that each problem is logged once.
  listNames(config);
  const ExternalResources read = readExternalResources(config);
  logProblems(read);
  std::map<std::string, std::int64_t> amounts;
  for (const ExternalResourceSpec& resource : read.resources) {
    if (resource.amount) amounts.emplace(resource.name, *resource.amount);
  }
  return createStaticExternalResourceInfoProvider(amounts, driversOf(read, plugins));
}

}  // namespace flink
