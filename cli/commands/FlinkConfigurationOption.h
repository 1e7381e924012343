// The options that point flink-gpu at a Flink configuration: `--config [DIR|FILE]`,
// `--config-file NAME` and `-D key=value`, shared by `discover`, `config` and the commands of the
// coordination file (CoordinationFileOption.h).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flink/configuration/GlobalConfiguration.h"

namespace flink::cli {

struct FlinkConfigurationOptions {
  /// The folder after --config, or its config.yaml or flink-conf.yaml; empty: $FLINK_CONF_DIR,
  /// else $FLINK_HOME/conf.
  std::string configDir;
  /// --config-file: which file to read when the folder holds both; empty: decided as
  /// GlobalConfiguration::loadConfiguration decides it.
  std::string configFile;
  /// The -D values, "key=value" each, in order.
  std::vector<std::string> dynamicProperties;

  /// Whether --config was given, with or without a folder.
  bool configGiven = false;

  /// Whether the command should read a Flink configuration at all: --config, --config-file or -D
  /// given.
  bool wanted() const { return configGiven || !dynamicProperties.empty() || !configFile.empty(); }
};

/// Whether the folder `dir` holds config.yaml or flink-conf.yaml (a link counts: Flink reads it).
bool holdsFlinkConfiguration(const std::filesystem::path& dir);

/// Finds and reads the configuration the options name. Prints nothing: its warnings are in the
/// result.
/// @throws std::exception (IllegalConfigurationException, std::invalid_argument, …) naming why it
///         cannot be read.
LoadedConfiguration readFlinkConfiguration(const FlinkConfigurationOptions& options);

/// Finds and reads the configuration the options name, printing what was skipped in it as
/// warnings. On failure prints the error and returns nullopt: every failure here is the
/// configuration's (exit code 2).
std::optional<LoadedConfiguration> loadFlinkConfiguration(const FlinkConfigurationOptions& options);

/// Where the value of `key` in `loaded` comes from, as a message says it after "in": "-D
/// <key>=<value>" when a -D of `options` sets it (the last such -D, which wins), else the file
/// read, also when neither sets it (the file is where it is missing). A sensitive key's value is
/// hidden, as `config` hides it.
std::string sourceOfKey(const FlinkConfigurationOptions& options, const LoadedConfiguration& loaded,
                        std::string_view key);

}  // namespace flink::cli
