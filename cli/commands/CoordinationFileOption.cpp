// The coordination file of a flink-gpu command (see CoordinationFileOption.h).
#include "commands/CoordinationFileOption.h"

#include <cstdlib>
#include <exception>
#include <filesystem>
#include <stdexcept>
#include <system_error>

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

/// Whether the configuration is asked for: on the command line, or by $FLINK_CONF_DIR. One that
/// cannot be read is then an error. Otherwise the one of $FLINK_HOME/conf is read when it is
/// there (a Flink that flink-gpu is installed in: /opt/flink/conf of the Debian package), and
/// one that cannot be read there is a warning.
bool configurationAskedFor(const FlinkConfigurationOptions& options) {
  const char* confDir = std::getenv("FLINK_CONF_DIR");
  return options.wanted() || (confDir != nullptr && *confDir != '\0');
}

/// Whether $FLINK_HOME/conf holds a Flink configuration file.
bool configurationInFlinkHome() {
  const char* home = std::getenv("FLINK_HOME");
  if (home == nullptr || *home == '\0') return false;
  return holdsFlinkConfiguration(std::filesystem::path(home) / "conf");
}

/// The configuration, as configurationAskedFor says; nullopt when there is none (or one not
/// asked for that cannot be read: warned about).
/// @throws std::invalid_argument for one asked for that cannot be read.
std::optional<LoadedConfiguration> hostConfiguration(const FlinkConfigurationOptions& options) {
  const bool asked = configurationAskedFor(options);
  if (!asked && !configurationInFlinkHome()) return std::nullopt;
  try {
    LoadedConfiguration loaded = readFlinkConfiguration(options);
    for (const std::string& warning : loaded.warnings) printWarning(warning);
    return loaded;
  } catch (const std::exception& e) {
    if (asked) throw std::invalid_argument(std::string("configuration error: ") + e.what());
    printWarning(std::string("the Flink configuration in $FLINK_HOME/conf is not used: ") +
                 e.what());
    return std::nullopt;
  }
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
    // A resource a TaskManager skips (a bad amount) discovers nothing.
    if (!resource.amount) continue;
    if (resource.driverFactoryClass != std::string(GPUDriverFactory::CLASS_NAME)) continue;
    const std::optional<std::string> args =
        resource.driverConfiguration.getOptional(GPUDriverOptions::DISCOVERY_SCRIPT_ARG);
    if (!args) continue;
    std::vector<std::string> argv{"1"};
    for (std::string& arg : strings::splitWhitespace(*args)) argv.push_back(std::move(arg));
    std::optional<std::string> file;
    try {
      const defaultdiscovery::DiscoveryArguments parsed =
          defaultdiscovery::parseDiscoveryArguments(argv);
      // Only a resource in coordination mode uses a file: one that names none uses Flink's
      // default (unless its TaskManager has $FLINK_GPU_COORDINATION_FILE, which cannot be known
      // from here).
      if (parsed.coordination) {
        file = parsed.coordinationFileOption.value_or(coordination::kDefaultCoordinationFile);
      }
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
    // Read once, when the rule gets to it or to compare it with the variable.
    bool read = false;
    std::optional<coordination::ConfiguredCoordinationFile> configured;
    const auto ofTheConfiguration =
        [&]() -> std::optional<coordination::ConfiguredCoordinationFile> {
      if (!read) {
        read = true;
        if (const std::optional<LoadedConfiguration> loaded =
                hostConfiguration(options.flinkConfig)) {
          configured = fileOfTheConfiguration(options.flinkConfig, *loaded);
        }
      }
      return configured;
    };
    coordination::CoordinationFileChoice choice =
        coordination::chooseCoordinationFile(options.option, ofTheConfiguration);
    if (choice.source == coordination::CoordinationFileSource::kConfiguration &&
        choice.path.is_relative()) {
      // Each TaskManager reads it from its own working directory: not one file.
      throw std::invalid_argument("the Flink configuration names the coordination file " +
                                  choice.path.string() + " (" + choice.where +
                                  "), a relative path, which each TaskManager reads from its "
                                  "own working directory: name an absolute path there");
    }
    // The operator's typed path means the file in the working directory.
    if (choice.path.is_relative()) choice.path = std::filesystem::absolute(choice.path);
    if (choice.source == coordination::CoordinationFileSource::kVariable) {
      if (const std::optional<coordination::ConfiguredCoordinationFile> other =
              ofTheConfiguration();
          other && other->path != choice.path) {
        printWarning("$" + std::string(coordination::kCoordinationFileVariable) + " names " +
                     choice.path.string() + ", but the Flink configuration's GPU resources name " +
                     other->path.string() + " (" + other->where +
                     "), which their discovery uses; using " + choice.path.string() +
                     " (give --coordination-file to say which)");
      }
    }
    std::error_code error;
    const std::filesystem::file_status status = std::filesystem::status(choice.path, error);
    if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
      throw std::invalid_argument("the coordination file " + choice.path.string() +
                                  " is not a regular file");
    }
    options.path = choice.path.string();
    printInfo(choice.describe());
    return true;
  } catch (const std::invalid_argument& e) {
    printError(e.what());
    return false;
  }
}

std::string describeFileWithoutRecords(const std::filesystem::path& file) {
  std::error_code error;
  if (std::filesystem::exists(std::filesystem::symlink_status(file, error))) {
    return " has no records";
  }
  const std::filesystem::path folder = file.parent_path();
  const bool folderMissing =
      !folder.empty() && !std::filesystem::exists(std::filesystem::status(folder, error));
  return folderMissing ? " does not exist, nor does its folder " + folder.string()
                       : std::string(" does not exist");
}

}  // namespace flink::cli
