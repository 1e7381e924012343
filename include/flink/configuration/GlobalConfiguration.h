// Loading a Flink configuration folder into a Configuration, as a Flink process does at start-up.
//
// Mirrors org.apache.flink.configuration.GlobalConfiguration: the folder comes from the command
// line, else $FLINK_CONF_DIR, else $FLINK_HOME/conf; it holds config.yaml (standard YAML, Flink
// 1.19 and later) or the legacy flink-conf.yaml (Flink's own "key: value" lines); dynamic
// properties (`-D key=value`) are applied on top. The YAML library stays out of this header.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flink/configuration/Configuration.h"

namespace flink {

/// What GlobalConfiguration::loadConfiguration read.
struct LoadedConfiguration {
  /// The file's values, with the dynamic properties applied on top.
  Configuration configuration;
  /// The file that was read: <dir>/config.yaml or <dir>/flink-conf.yaml.
  std::filesystem::path file;
  /// Things skipped or ignored, one line each, for the caller to show: lines of a legacy file
  /// that are not "key: value" ("<file>:<line>: <why>, line skipped"), keys set twice in it, and
  /// a flink-conf.yaml ignored beside a config.yaml. Values never appear in them.
  std::vector<std::string> warnings;
};

class GlobalConfiguration {
 public:
  /// The standard-YAML configuration file (Flink's FLINK_CONF_FILENAME since 1.19).
  static constexpr std::string_view FLINK_CONF_FILENAME = "config.yaml";
  /// The legacy configuration file (Flink's LEGACY_FLINK_CONF_FILENAME).
  static constexpr std::string_view LEGACY_FLINK_CONF_FILENAME = "flink-conf.yaml";
  /// The environment variables consulted, in this order (Flink's ConfigConstants names).
  static constexpr std::string_view ENV_FLINK_CONF_DIR = "FLINK_CONF_DIR";
  static constexpr std::string_view ENV_FLINK_HOME_DIR = "FLINK_HOME";

  /// What tools print instead of a sensitive value (Flink's HIDDEN_CONTENT).
  static constexpr std::string_view HIDDEN_CONTENT = "******";

  /// Whether the value of `key` must not be shown: its name, in any case, contains "password",
  /// "secret", "token", "apikey", "api-key", "auth-params", "service-key", "basic-auth",
  /// "jaas.config", "http-headers" or "fs.azure.account.key" (Flink's isSensitive).
  static bool isSensitive(std::string_view key);

  /// The configuration folder: `explicitDir` if given, else $FLINK_CONF_DIR, else
  /// $FLINK_HOME/conf, as Flink's launch scripts choose it (an empty variable counts as unset).
  /// Whether the folder exists is left to loadConfiguration.
  /// @throws IllegalConfigurationException when `explicitDir` is an empty path, or when none of
  ///         the three is given; the message names all three.
  static std::filesystem::path resolveConfigurationDirectory(
      const std::optional<std::filesystem::path>& explicitDir);

  /// Reads <configDir>/config.yaml if it is there, else <configDir>/flink-conf.yaml, and applies
  /// `dynamicProperties` on top (they win over the file, as Flink's `-D` does).
  ///
  /// config.yaml is read as standard YAML: nested maps become dotted keys, scalars keep their
  /// text as written, a list of scalars becomes list text ("gpu;fpga", see
  /// detail::formatConfigValue). flink-conf.yaml is read line by line as Flink reads it, not as
  /// YAML: "key: value", '#' starts a comment anywhere, bad lines are skipped with a warning.
  /// When both files are there, config.yaml is read and a warning says flink-conf.yaml was
  /// ignored (Flink 2 no longer reads flink-conf.yaml at all).
  ///
  /// @throws FileNotFoundException if `configDir` does not exist or is not a folder, or holds
  ///         neither file (the message names the folder and both file names), or the file
  ///         vanishes before it is read.
  /// @throws FlinkException if the file cannot be read (the message names it and the OS error).
  /// @throws IllegalConfigurationException if config.yaml is not valid YAML, its root is not a
  ///         map, or it holds a null value, a list of maps or of lists, or a key twice (after
  ///         flattening); the message starts "<file>:<line>:" ("<file>:<line>:<column>:" for
  ///         YAML syntax errors) and names the key.
  static LoadedConfiguration loadConfiguration(const std::filesystem::path& configDir,
                                               const Configuration& dynamicProperties = {});
};

/// Reads dynamic properties, the values of `-D` options: each "key=value", split at the first
/// '=', the key trimmed and the value taken as it is (it may be empty, or hold '='). Applied in
/// order, so a later one for the same key wins. Mirrors Flink's `-D` handling (DynamicProperties
/// of the CLI frontend and the cluster entry points), except that a bare "key" without '=' is an
/// error here rather than "key=true".
/// @throws IllegalConfigurationException quoting the first bad argument: no '=', or an empty key.
Configuration parseDynamicProperties(const std::vector<std::string>& definitions);

}  // namespace flink
