// The coordination file of a flink-gpu command (see CoordinationFileOption.h).
#include "commands/CoordinationFileOption.h"

#include <cstdlib>
#include <exception>
#include <stdexcept>

#include "Console.h"
#include "flink/externalresource/ExternalResourceOptions.h"
#include "flink/externalresource/ExternalResourceUtils.h"
#include "flink/externalresource/gpu/GPUDriverFactory.h"
#include "flink/externalresource/gpu/GPUDriverOptions.h"
#include "host/coordination/CoordinationFile.h"
#include "host/defaultdiscovery/DiscoveryArguments.h"
#include "util/Strings.h"

namespace flink::cli {
namespace {

using externalresource::gpu::GPUDriverFactory;
using externalresource::gpu::GPUDriverOptions;

/// A configuration is read when the command line asks for one, or $FLINK_CONF_DIR names one;
/// never only because $FLINK_HOME/conf holds one (flink-gpu sets FLINK_HOME itself).
bool configurationWanted(const FlinkConfigurationOptions& options) {
  const char* confDir = std::getenv("FLINK_CONF_DIR");
  return options.wanted() || (confDir != nullptr && *confDir != '\0');
}

/// The one file the configuration's GPU resources name, or nullopt when none names one.
/// @throws std::invalid_argument when they name different files.
std::optional<coordination::ConfiguredCoordinationFile> fileOfTheConfiguration(
    const FlinkConfigurationOptions& options, const LoadedConfiguration& loaded) {
  const std::vector<NamedCoordinationFile> named = coordinationFilesOf(options, loaded);
  if (named.empty()) return std::nullopt;
  for (const NamedCoordinationFile& each : named) {
    if (each.path != named.front().path) {
      throw std::invalid_argument(
          "the Flink configuration names two coordination files: " + named.front().path.string() +
          " (resource '" + named.front().resource + "') and " + each.path.string() +
          " (resource '" + each.resource + "'); give --coordination-file to say which");
    }
  }
  return coordination::ConfiguredCoordinationFile{named.front().path, named.front().where};
}

}  // namespace

std::vector<NamedCoordinationFile> coordinationFilesOf(const FlinkConfigurationOptions& options,
                                                       const LoadedConfiguration& loaded) {
  std::vector<NamedCoordinationFile> named;
  const ExternalResources configured =
      ExternalResourceUtils::readExternalResources(loaded.configuration);
  for (const ExternalResourceSpec& resource : configured.resources) {
    if (resource.driverFactoryClass != std::string(GPUDriverFactory::CLASS_NAME)) continue;
    const std::optional<std::string> args =
        resource.driverConfiguration.getOptional(GPUDriverOptions::DISCOVERY_SCRIPT_ARG);
    if (!args) continue;
    std::vector<std::string> argv{"1"};
    for (std::string& arg : strings::splitWhitespace(*args)) argv.push_back(std::move(arg));
    std::optional<std::string> file;
    try {
      file = defaultdiscovery::parseDiscoveryArguments(argv).coordinationFileOption;
    } catch (const std::exception&) {
      continue;  // the worker's discovery fails on them too; discover --config says why
    }
    if (!file) continue;
    const std::string key =
        ExternalResourceOptions::getExternalResourceParamConfigPrefix(resource.name) +
        GPUDriverOptions::DISCOVERY_SCRIPT_ARG.key();
    const std::string source = sourceOfKey(options, loaded, key);
    named.push_back(
        {resource.name, *file, source.starts_with("-D ") ? source : key + " in " + source});
  }
  return named;
}

std::vector<NamedCoordinationFile> coordinationFilesOfTheHost(
    const FlinkConfigurationOptions& options) {
  try {
    return coordinationFilesOf(options, readFlinkConfiguration(options));
  } catch (const std::exception&) {
    return {};  // no configuration here, or one that cannot be read: nothing named
  }
}

bool resolveCoordinationFile(CoordinationFileOptions& options) {
  try {
    const coordination::CoordinationFileChoice choice = coordination::chooseCoordinationFile(
        options.option, [&]() -> std::optional<coordination::ConfiguredCoordinationFile> {
          if (!configurationWanted(options.flinkConfig)) return std::nullopt;
          LoadedConfiguration loaded;
          try {
            loaded = readFlinkConfiguration(options.flinkConfig);
          } catch (const std::exception& e) {
            // Asked for on the command line: an error. Named by $FLINK_CONF_DIR alone: said,
            // and the default taken.
            if (options.flinkConfig.wanted()) {
              throw std::invalid_argument(std::string("configuration error: ") + e.what());
            }
            printWarning(std::string("the Flink configuration of $FLINK_CONF_DIR is not used: ") +
                         e.what());
            return std::nullopt;
          }
          for (const std::string& warning : loaded.warnings) printWarning(warning);
          return fileOfTheConfiguration(options.flinkConfig, loaded);
        });
    options.path = choice.path.string();
    printInfo(choice.describe());
    return true;
  } catch (const std::invalid_argument& e) {
    printError(e.what());
    return false;
  }
}

}  // namespace flink::cli
