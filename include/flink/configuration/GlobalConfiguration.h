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
#include <utility>
#include <vector>

#include "flink/configuration/Configuration.h"

namespace flink {

/// What GlobalConfiguration::loadConfiguration read.
struct LoadedConfiguration {
  /// The file's values, with the dynamic properties applied on top.
  Configuration configuration;
  /// The file that was read: <dir>/config.yaml or <dir>/flink-conf.yaml.
  std::filesystem::path file;
  /// Whether `file` is config.yaml, read as standard YAML; false for the legacy flink-conf.yaml.
  /// `configuration` follows the same rules (Configuration::isStandardYaml).
  bool standardYaml = true;
  /// Things skipped or ignored, one line each, for the caller to show: lines of a legacy file
  /// that are not "key: value" ("<file>:<line>: <why>, line skipped"), keys set twice in it, and
  /// which of config.yaml and flink-conf.yaml was read when both are there, and why. Values never
  /// appear in them.
  std::vector<std::string> warnings;
};

/// Which file loadConfiguration reads from a folder that holds both config.yaml and
/// flink-conf.yaml.
enum class ConfigurationFileChoice {
  /// $FLINK_GPU_CONF_FILE if set, else what the Flink distribution of the folder reads, else
  /// config.yaml.
  kAuto,
  /// config.yaml, as Flink 2 reads it.
  kStandardYaml,
  /// flink-conf.yaml, as Flink 1.19 and 1.20 read it when it is there.
  kLegacy,
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
  /// Not Flink's: names the file to read when both are there, `config.yaml` or `flink-conf.yaml`.
  static constexpr std::string_view ENV_CONF_FILE = "FLINK_GPU_CONF_FILE";

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

  /// The version (major, minor) of the Flink distribution at `flinkHome`, read from the name of
  /// its lib/flink-dist*-<version>.jar (`flink-dist-1.19.1.jar`, `flink-dist_2.12-1.14.6.jar`,
  /// `flink-dist-2.0.0.jar`), with that jar's path; nullopt when there is no such jar. Never
  /// throws.
  static std::optional<std::pair<std::pair<int, int>, std::filesystem::path>>
  flinkDistributionVersion(const std::filesystem::path& flinkHome);

  /// Reads the configuration file of <configDir> and applies `dynamicProperties` on top (they win
  /// over the file, as Flink's `-D` does). The file is whichever of config.yaml and
  /// flink-conf.yaml is there. When both are, Flink's own rule for its version decides: Flink 1.19
  /// and 1.20 read flink-conf.yaml (their migration path), Flink 2 reads only config.yaml. So:
  /// `choice` if not kAuto; else $FLINK_GPU_CONF_FILE (`config.yaml` or `flink-conf.yaml`); else
  /// the version of the distribution the folder belongs to (<configDir>/.., else $FLINK_HOME; see
  /// flinkDistributionVersion); else config.yaml. A warning names the file read, the one ignored
  /// and why.
  ///
  /// config.yaml is read as standard YAML: nested maps become dotted keys, values become the text
  /// Flink makes of them (YAML 1.1: `0x10` is "16", `yes` "true"; a list its flow form
  /// "[gpu, fpga]"), and the configuration reads list options as YAML first
  /// (Configuration::isStandardYaml). flink-conf.yaml is read line by line as Flink reads it, not
  /// as YAML: "key: value", '#' starts a comment anywhere, bad lines are skipped with a warning.
  ///
  /// @throws FileNotFoundException if `configDir` does not exist or is not a folder, or holds
  ///         neither file (the message names the folder and both file names), or not the one
  ///         `choice` or $FLINK_GPU_CONF_FILE asks for, or the file vanishes before it is read.
  /// @throws FlinkException if the file cannot be read (the message names it and the OS error).
  /// @throws IllegalConfigurationException if config.yaml is not valid YAML, its root is not a
  ///         map, or it holds a null value, a list of maps or of lists, or a key twice (after
  ///         flattening); the message starts "<file>:<line>:" ("<file>:<line>:<column>:" for
  ///         YAML syntax errors) and names the key.
  /// @throws IllegalConfigurationException also for a $FLINK_GPU_CONF_FILE that names neither file.
  static LoadedConfiguration loadConfiguration(
      const std::filesystem::path& configDir, const Configuration& dynamicProperties = {},
      ConfigurationFileChoice choice = ConfigurationFileChoice::kAuto);
};

/// Reads dynamic properties, the values of `-D` options: each "key=value", split at the first
/// '=', the key trimmed and the value taken as it is (it may be empty, or hold '='). Applied in
/// order, so a later one for the same key wins. Mirrors Flink's `-D` handling (DynamicProperties
/// of the CLI frontend and the cluster entry points), except that a bare "key" without '=' is an
/// error here rather than "key=true".
/// @throws IllegalConfigurationException quoting the first bad argument: no '=', or an empty key.
Configuration parseDynamicProperties(const std::vector<std::string>& definitions);

}  // namespace flink
