// The options that point flink-gpu at a Flink configuration: `--config [DIR]` and `-D key=value`,
// shared by `discover` and `config`.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "flink/configuration/GlobalConfiguration.h"

namespace flink::cli {

struct FlinkConfigurationOptions {
  /// The folder after --config; empty: $FLINK_CONF_DIR, else $FLINK_HOME/conf.
  std::string configDir;
  /// --config-file: which file to read when the folder holds both; empty: decided as
  /// GlobalConfiguration::loadConfiguration decides it.
  std::string configFile;
  /// The -D values, "key=value" each, in order.
  std::vector<std::string> dynamicProperties;

  /// The --config option, to tell whether it was given without a folder.
  const CLI::Option* configOption = nullptr;

  /// Whether the command should read a Flink configuration at all: --config, --config-file or -D
  /// given.
  bool wanted() const {
    return (configOption != nullptr && configOption->count() > 0) || !dynamicProperties.empty() ||
           !configFile.empty();
  }
};

/// Adds `--config [DIR]`, `--config-file NAME` and `-D key=value` to `command`.
void addFlinkConfigurationOptions(CLI::App& command, FlinkConfigurationOptions& options);

/// Finds and reads the configuration the options name, printing what was skipped in it as
/// warnings. On failure prints the error and returns nullopt: every failure here is the
/// configuration's (exit code 2).
std::optional<LoadedConfiguration> loadFlinkConfiguration(const FlinkConfigurationOptions& options);

}  // namespace flink::cli
