// Reading the Flink configuration that --config, --config-file and -D name (see
// FlinkConfigurationOption.h); the options themselves are set up in CommandLine.cpp.
#include "commands/FlinkConfigurationOption.h"

#include <exception>
#include <filesystem>
#include <stdexcept>
#include <system_error>

#include "Console.h"
#include "util/Strings.h"

namespace flink::cli {

bool holdsFlinkConfiguration(const std::filesystem::path& dir) {
  std::error_code error;
  return std::filesystem::exists(std::filesystem::symlink_status(
             dir / GlobalConfiguration::FLINK_CONF_FILENAME, error)) ||
         std::filesystem::exists(std::filesystem::symlink_status(
             dir / GlobalConfiguration::LEGACY_FLINK_CONF_FILENAME, error));
}

LoadedConfiguration readFlinkConfiguration(const FlinkConfigurationOptions& options) {
  {
    const Configuration dynamic = parseDynamicProperties(options.dynamicProperties);
    std::optional<std::filesystem::path> explicitDir =
        options.configDir.empty() ? std::nullopt
                                  : std::optional<std::filesystem::path>(options.configDir);
    std::string fileName = options.configFile;
    // --config FILE: its folder, and that file of it.
    std::error_code error;
    if (explicitDir && std::filesystem::is_regular_file(*explicitDir, error)) {
      const std::string named = explicitDir->filename().string();
      if (named != GlobalConfiguration::FLINK_CONF_FILENAME &&
          named != GlobalConfiguration::LEGACY_FLINK_CONF_FILENAME) {
        throw std::invalid_argument(
            "--config " + strings::quoteForMessage(explicitDir->string()) +
            " is a file Flink does not read: give its folder, or the folder's " +
            std::string(GlobalConfiguration::FLINK_CONF_FILENAME) + " or " +
            std::string(GlobalConfiguration::LEGACY_FLINK_CONF_FILENAME));
      }
      if (!fileName.empty() && fileName != named) {
        throw std::invalid_argument("--config names " + named + " and --config-file " + fileName +
                                    ": give one of them");
      }
      fileName = named;
      explicitDir =
          explicitDir->has_parent_path() ? explicitDir->parent_path() : std::filesystem::path(".");
    }
    const std::filesystem::path dir =
        GlobalConfiguration::resolveConfigurationDirectory(explicitDir);
    const ConfigurationFileChoice choice = fileName.empty() ? ConfigurationFileChoice::kAuto
                                           : fileName == GlobalConfiguration::FLINK_CONF_FILENAME
                                               ? ConfigurationFileChoice::kStandardYaml
                                               : ConfigurationFileChoice::kLegacy;
    return GlobalConfiguration::loadConfiguration(dir, dynamic, choice);
  }
}

std::optional<LoadedConfiguration> loadFlinkConfiguration(
    const FlinkConfigurationOptions& options) {
  try {
    LoadedConfiguration loaded = readFlinkConfiguration(options);
    for (const std::string& warning : loaded.warnings) printWarning(warning);
    return loaded;
  } catch (const std::exception& e) {
    printError(std::string("configuration error: ") + e.what());
    return std::nullopt;
  }
}

std::string sourceOfKey(const FlinkConfigurationOptions& options, const LoadedConfiguration& loaded,
                        std::string_view key) {
  std::optional<std::string> dynamicValue;
  try {
    dynamicValue = parseDynamicProperties(options.dynamicProperties).getString(std::string(key));
  } catch (const std::exception&) {
    // Not reached: loadFlinkConfiguration has read them already, or refused them.
  }
  if (!dynamicValue) return loaded.file.string();
  const std::string shown = GlobalConfiguration::isSensitive(key)
                                ? std::string(GlobalConfiguration::HIDDEN_CONTENT)
                                : strings::quoteForMessage(*dynamicValue);
  return "-D " + std::string(key) + "=" + shown;
}

}  // namespace flink::cli
