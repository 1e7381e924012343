#include "flink/externalresource/ExternalResourceOptions.h"

namespace flink {

std::string ExternalResourceOptions::keyWithResourceNameAndSuffix(std::string_view resourceName,
                                                                  std::string_view suffix) {
  std::string key(EXTERNAL_RESOURCE_PREFIX);
  key += '.';
  key += resourceName;
  key += '.';
  key += suffix;
  return key;
}

ConfigOption<std::int64_t> ExternalResourceOptions::getAmountConfigOptionForResource(
    std::string_view resourceName) {
  return ConfigOptions::key(
             keyWithResourceNameAndSuffix(resourceName, EXTERNAL_RESOURCE_AMOUNT_SUFFIX))
      .longType()
      .noDefaultValue();
}

ConfigOption<std::string> ExternalResourceOptions::getSystemConfigKeyConfigOptionForResource(
    std::string_view resourceName, std::string_view suffix) {
  return ConfigOptions::key(keyWithResourceNameAndSuffix(resourceName, suffix))
      .stringType()
      .noDefaultValue();
}

ConfigOption<std::string>
ExternalResourceOptions::getExternalResourceDriverFactoryConfigOptionForResource(
    std::string_view resourceName) {
  return ConfigOptions::key(
             keyWithResourceNameAndSuffix(resourceName, EXTERNAL_RESOURCE_DRIVER_FACTORY_SUFFIX))
      .stringType()
      .noDefaultValue();
}

std::string ExternalResourceOptions::getExternalResourceParamConfigPrefix(
    std::string_view resourceName) {
  return keyWithResourceNameAndSuffix(resourceName, EXTERNAL_RESOURCE_DRIVER_PARAM_SUFFIX);
}

}  // namespace flink
