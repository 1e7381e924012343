// The configuration keys of external resources, with Flink's names and key layout.
//
// Mirrors org.apache.flink.configuration.ExternalResourceOptions. A Flink configuration lists
// its resources under `external-resources` and describes each one under
// `external-resource.<resource_name>.`:
//
//   external-resources: gpu
//   external-resource.gpu.amount: 2
//   external-resource.gpu.driver-factory.class:
//   org.apache.flink.externalresource.gpu.GPUDriverFactory
//   external-resource.gpu.param.discovery-script.args: --enable-coordination-mode
//   external-resource.gpu.kubernetes.config-key: nvidia.com/gpu
//   external-resource.gpu.yarn.config-key: yarn.io/gpu
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "flink/configuration/ConfigOption.h"
#include "flink/configuration/ConfigOptions.h"

namespace flink {

struct ExternalResourceOptions {
  /// The value of `external-resources` that means "no external resources" (Flink's NONE).
  static constexpr std::string_view NONE = "none";

  /// `external-resources`: the names of the resources, a list (`gpu;fpga` in flink-conf.yaml, a
  /// YAML list in config.yaml). Empty, or the single name `none`, means none.
  inline static const ConfigOption<std::vector<std::string>> EXTERNAL_RESOURCE_LIST =
      ConfigOptions::key("external-resources")
          .stringType()
          .asList()
          .defaultValues(std::vector<std::string>{})
          .withDescription("The names of all external resources, separated by ';'.");

  static constexpr std::string_view EXTERNAL_RESOURCE_PREFIX = "external-resource";
  /// `external-resource.<name>.amount`: how many units each TaskManager asks for; a positive
  /// integer.
  static constexpr std::string_view EXTERNAL_RESOURCE_AMOUNT_SUFFIX = "amount";
  /// `external-resource.<name>.driver-factory.class`: the name of the driver's factory.
  static constexpr std::string_view EXTERNAL_RESOURCE_DRIVER_FACTORY_SUFFIX =
      "driver-factory.class";
  /// `external-resource.<name>.param.<key>`: the driver's own options; the driver sees them with
  /// the whole prefix removed.
  static constexpr std::string_view EXTERNAL_RESOURCE_DRIVER_PARAM_SUFFIX = "param.";
  /// `external-resource.<name>.kubernetes.config-key`: what Flink asks Kubernetes for
  /// (e.g. `nvidia.com/gpu`).
  static constexpr std::string_view KUBERNETES_CONFIG_KEY_SUFFIX = "kubernetes.config-key";
  /// `external-resource.<name>.yarn.config-key`: what Flink asks YARN for (e.g. `yarn.io/gpu`).
  static constexpr std::string_view YARN_CONFIG_KEY_SUFFIX = "yarn.config-key";

  /// `external-resource.<resourceName>.<suffix>`.
  static std::string keyWithResourceNameAndSuffix(std::string_view resourceName,
                                                  std::string_view suffix);

  /// `external-resource.<resourceName>.amount`, a long without default.
  static ConfigOption<std::int64_t> getAmountConfigOptionForResource(std::string_view resourceName);

  /// `external-resource.<resourceName>.<suffix>` for KUBERNETES_CONFIG_KEY_SUFFIX or
  /// YARN_CONFIG_KEY_SUFFIX, a string without default.
  static ConfigOption<std::string> getSystemConfigKeyConfigOptionForResource(
      std::string_view resourceName, std::string_view suffix);

  /// `external-resource.<resourceName>.driver-factory.class`, a string without default.
  static ConfigOption<std::string> getExternalResourceDriverFactoryConfigOptionForResource(
      std::string_view resourceName);

  /// `external-resource.<resourceName>.param.`: the prefix the driver's options are found under.
  static std::string getExternalResourceParamConfigPrefix(std::string_view resourceName);
};

}  // namespace flink
