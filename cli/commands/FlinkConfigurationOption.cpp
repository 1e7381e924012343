#include "commands/FlinkConfigurationOption.h"

#include <exception>

#include "Console.h"

namespace flink::cli {

void addFlinkConfigurationOptions(CLI::App& command, FlinkConfigurationOptions& options) {
  options.configOption =
      command
          .add_option(
              "--config", options.configDir,
              "Read the Flink configuration folder DIR (config.yaml, else flink-conf.yaml); "
              "without DIR: $FLINK_CONF_DIR, else $FLINK_HOME/conf")
          ->expected(0, 1)
          ->type_name("[DIR]");
  command
      .add_option("--config-file", options.configFile,
                  "When the folder holds both config.yaml and flink-conf.yaml, read this one "
                  "(default: $FLINK_GPU_CONF_FILE, else what the folder's Flink version reads: "
                  "1.19 and 1.20 flink-conf.yaml, 2.x config.yaml; else config.yaml)")
      ->check(CLI::IsMember({std::string(GlobalConfiguration::FLINK_CONF_FILENAME),
                             std::string(GlobalConfiguration::LEGACY_FLINK_CONF_FILENAME)}))
      ->type_name("NAME");
  command
      .add_option("-D", options.dynamicProperties,
                  "Set a configuration key, overriding the file (Flink's -D), e.g. "
                  "-Dexternal-resource.gpu.amount=2; implies --config")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
}

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

}  // namespace flink::cli
