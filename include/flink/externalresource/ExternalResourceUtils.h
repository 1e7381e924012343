// The TaskManager's start-up path for external resources: read which resources are configured,
// make each one's driver through its named factory, ask it for the configured amount.
//
// Mirrors org.apache.flink.runtime.externalresource.ExternalResourceUtils. As in Flink, the
// functions that build drivers and infos log a resource that cannot be had at WARN and carry on
// with the others. readExternalResources is the strict view underneath, for tools that must
// report every problem (flink-gpu discover --config, flink-gpu config).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flink/configuration/Configuration.h"
#include "flink/core/plugin/PluginManager.h"
#include "flink/externalresource/ExternalResourceDriver.h"
#include "flink/externalresource/ExternalResourceInfoProvider.h"

namespace flink {

/// One configured external resource, as read from `external-resource.<name>.*`.
struct ExternalResourceSpec {
  std::string name;
  /// `…amount`; nullopt when missing or invalid (readExternalResources says which).
  std::optional<std::int64_t> amount;
  /// Why `amount` is nullopt: the same text as its entry in ExternalResources::errors.
  std::optional<std::string> amountError;
  /// `…driver-factory.class`; nullopt when not set (the resource then has no driver, but
  /// Kubernetes or YARN may still be asked for it).
  std::optional<std::string> driverFactoryClass;
  /// The `…param.*` keys with that prefix removed: what the driver is made with.
  Configuration driverConfiguration;
  /// `…kubernetes.config-key`, e.g. "nvidia.com/gpu".
  std::optional<std::string> kubernetesConfigKey;
  /// `…yarn.config-key`, e.g. "yarn.io/gpu".
  std::optional<std::string> yarnConfigKey;
};

/// Every configured resource and every problem found, without making any driver.
struct ExternalResources {
  /// In the order of `external-resources`, each name once, blank names left out.
  std::vector<ExternalResourceSpec> resources;
  /// Values that make a resource unusable, each naming its key and value (an amount that is
  /// missing, not an integer, out of range, or not positive; an unparsable resource list).
  std::vector<std::string> errors;
  /// Things that are tolerated: a name listed twice or blank, a resource without a driver.
  std::vector<std::string> warnings;
};

class ExternalResourceUtils {
 public:
  /// The factories built into this library, which no plugin can replace: today the GPU
  /// driver's, org.apache.flink.externalresource.gpu.GPUDriverFactory.
  static std::vector<PluginManager::BuiltInFactory> builtInFactories();

  /// A PluginManager over `pluginsDirectory` that knows builtInFactories(): what
  /// Flink's PluginUtils.createPluginManagerFromRootFolder makes for a TaskManager.
  static std::unique_ptr<PluginManager> createPluginManager(
      std::filesystem::path pluginsDirectory = PluginManager::defaultPluginsDirectory());

  /// Reads the whole external-resource configuration. Never throws for bad values: they are in
  /// `errors`.
  static ExternalResources readExternalResources(const Configuration& config);

  /// The configured resource names, trimmed, each once, in order; `none` or empty: none.
  /// @throws IllegalConfigurationException when `external-resources` cannot be read as a list.
  static std::vector<std::string> getExternalResourceSet(const Configuration& config);

  /// Each resource with a valid amount → its amount; the others are logged at WARN and left out.
  /// @throws IllegalConfigurationException when `external-resources` cannot be read as a list.
  static std::map<std::string, std::int64_t> getExternalResourceAmountMap(
      const Configuration& config);

  /// Each resource (with a valid amount) that sets `external-resource.<name>.<suffix>` → that
  /// value: what to ask Kubernetes (KUBERNETES_CONFIG_KEY_SUFFIX) or YARN for.
  static std::map<std::string, std::string> getExternalResourceConfigurationKeys(
      const Configuration& config, std::string_view suffix);

  /// Makes the driver of one resource: its factory (through `plugins`), then the driver from its
  /// parameters.
  /// @throws FlinkException naming the resource: no factory configured, factory not found, or the
  ///         factory failed (its own exception's message is included).
  static std::unique_ptr<ExternalResourceDriver> createExternalResourceDriver(
      const ExternalResourceSpec& resource, PluginManager& plugins);

  /// The driver of every resource with a valid amount; a resource whose driver cannot be made
  /// is logged at WARN and left out.
  static std::map<std::string, std::unique_ptr<ExternalResourceDriver>>
  externalResourceDriversFromConfig(const Configuration& config, PluginManager& plugins);

  /// Asks each driver for its resource's amount; a driver that fails is logged at WARN and its
  /// resource gets no infos.
  static std::unique_ptr<StaticExternalResourceInfoProvider>
  createStaticExternalResourceInfoProvider(
      const std::map<std::string, std::int64_t>& externalResourceAmountMap,
      const std::map<std::string, std::unique_ptr<ExternalResourceDriver>>&
          externalResourceDrivers);

  /// The whole start-up path: amounts, drivers, infos (Flink's TaskManagerRunner calls it once).
  /// @throws IllegalConfigurationException when `external-resources` cannot be read as a list;
  ///         every other problem only costs its own resource its infos.
  static std::unique_ptr<StaticExternalResourceInfoProvider>
  createStaticExternalResourceInfoProviderFromConfig(const Configuration& config,
                                                     PluginManager& plugins);
};

}  // namespace flink
