// Reading the Flink configuration that --config, --config-file and -D name (see
// FlinkConfigurationOption.h); the options themselves are set up in CommandLine.cpp.
#include "commands/FlinkConfigurationOption.h"

#include <exception>

#include "Console.h"
#include "util/Strings.h"

namespace flink::cli {

std::optional<LoadedConfiguration> loadFlinkConfiguration(
    const FlinkConfigurationOptions& options) {
  try {
    const Configuration dynamic = parseDynamicProperties(options.dynamicProperties);
    const std::optional<std::filesystem::path> explicitDir =
        options.configDir.empty() ? std::nullopt
                                  : std::optional<std::filesystem::path>(options.configDir);
    const std::filesystem::path dir =
        GlobalConfiguration::resolveConfigurationDirectory(explicitDir);
    const ConfigurationFileChoice choice =
        options.configFile.empty() ? ConfigurationFileChoice::kAuto
        : options.configFile == GlobalConfiguration::FLINK_CONF_FILENAME
            ? ConfigurationFileChoice::kStandardYaml
            : ConfigurationFileChoice::kLegacy;
    LoadedConfiguration loaded = GlobalConfiguration::loadConfiguration(dir, dynamic, choice);
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
