// Finding the configuration folder, choosing the file in it, reading it, and the `-D` overrides.
// The two file formats are read in LegacyConfigurationParser.cpp and YamlConfigurationParser.cpp.
#include "flink/configuration/GlobalConfiguration.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <vector>

#include "flink/configuration/ConfigurationFileParsers.h"
#include "process/FileDescriptor.h"
#include "util/Strings.h"

namespace flink {
namespace {

namespace fs = std::filesystem;

/// "'conf'", or "'conf' (/abs/conf)" for a relative path, as Flink names folders in errors.
std::string describe(const fs::path& path) {
  std::string text = "'" + path.string() + "'";
  if (path.is_relative()) {
    std::error_code ignored;
    const fs::path absolute = fs::absolute(path, ignored);
    if (!absolute.empty()) text += " (" + absolute.string() + ")";
  }
  return text;
}

std::string environment(std::string_view name) {
  const char* value = std::getenv(std::string(name).c_str());
  return value == nullptr ? std::string() : std::string(value);
}

[[noreturn]] void cannotRead(const fs::path& path, int error) {
  const std::string message =
      "Cannot read the configuration file " + describe(path) + ": " + std::strerror(error);
  if (error == ENOENT || error == ENOTDIR) throw FileNotFoundException(message);
  throw FlinkException(message);
}

/// The whole file. Opened with O_CLOEXEC like every descriptor of this library.
std::string readWholeFile(const fs::path& path) {
  process::FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) cannotRead(path, errno);
  std::string text;
  char buffer[64 * 1024];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      cannotRead(path, errno);  // e.g. EISDIR: a folder named config.yaml
    }
    text.append(buffer, static_cast<std::size_t>(n));
  }
  return text;
}

/// Whether something is at `path`, a dangling link included: a broken config.yaml must be
/// reported, not passed over for flink-conf.yaml.
bool present(const fs::path& path) {
  std::error_code ignored;
  return fs::exists(fs::symlink_status(path, ignored));
}

/// "2.0" for {2, 0}.
std::string versionText(const std::pair<int, int>& version) {
  return std::to_string(version.first) + "." + std::to_string(version.second);
}

/// The leading "<major>.<minor>" of `text` ("1.19.1", "2.0-SNAPSHOT"), or nullopt.
std::optional<std::pair<int, int>> parseVersion(std::string_view text) {
  int major = 0;
  int minor = 0;
  const char* end = text.data() + text.size();
  auto [afterMajor, majorError] = std::from_chars(text.data(), end, major);
  if (majorError != std::errc() || afterMajor == end || *afterMajor != '.') return std::nullopt;
  auto [afterMinor, minorError] = std::from_chars(afterMajor + 1, end, minor);
  if (minorError != std::errc()) return std::nullopt;
  return std::make_pair(major, minor);
}

/// Which file to read when both are there, and why (for the warning).
struct Choice {
  bool standardYaml = true;
  std::string why;
};

Choice chooseBetweenBoth(const fs::path& configDir, ConfigurationFileChoice choice) {
  if (choice == ConfigurationFileChoice::kStandardYaml) return {true, "as asked for"};
  if (choice == ConfigurationFileChoice::kLegacy) return {false, "as asked for"};
  const std::string forced = environment(GlobalConfiguration::ENV_CONF_FILE);
  if (!forced.empty()) {
    return {forced == GlobalConfiguration::FLINK_CONF_FILENAME,
            "as $" + std::string(GlobalConfiguration::ENV_CONF_FILE) + " asks"};
  }
  // The distribution the folder belongs to: the folder's parent (…/flink-1.19.1/conf), else
  // $FLINK_HOME.
  std::vector<fs::path> homes{fs::absolute(configDir).lexically_normal().parent_path()};
  if (std::string home = environment(GlobalConfiguration::ENV_FLINK_HOME_DIR); !home.empty()) {
    homes.emplace_back(home);
  }
  for (const fs::path& home : homes) {
    if (auto found = GlobalConfiguration::flinkDistributionVersion(home)) {
      const auto& [version, jar] = *found;
      if (version.first >= 2) {
        return {true,
                "Flink " + versionText(version) + " (" + jar.string() + ") reads only config.yaml"};
      }
      return {false, "Flink " + versionText(version) + " (" + jar.string() +
                         ") reads flink-conf.yaml when it is there"};
    }
  }
  return {true,
          "no Flink distribution (lib/flink-dist-<version>.jar) was found beside the "
          "folder or at $FLINK_HOME to tell which Flink reads it: Flink 1.19 and 1.20 read "
          "flink-conf.yaml, Flink 2 config.yaml; set $" +
              std::string(GlobalConfiguration::ENV_CONF_FILE) + " to choose"};
}

}  // namespace

std::optional<std::pair<std::pair<int, int>, fs::path>>
GlobalConfiguration::flinkDistributionVersion(const fs::path& flinkHome) {
  std::error_code error;
  fs::directory_iterator entries(flinkHome / "lib", error);
  if (error) return std::nullopt;
  std::vector<fs::path> jars;
  for (const fs::directory_entry& entry : entries) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("flink-dist") && name.ends_with(".jar")) jars.push_back(entry.path());
  }
  std::sort(jars.begin(), jars.end());  // the same answer whatever the directory order
  for (const fs::path& jar : jars) {
    // flink-dist[_<scala version>]-<version>.jar
    const std::string name = jar.filename().string();
    std::string_view rest = name;
    rest.remove_prefix(std::string_view("flink-dist").size());
    rest.remove_suffix(std::string_view(".jar").size());
    if (rest.starts_with("_")) {
      const std::size_t dash = rest.find('-');
      if (dash == std::string_view::npos) continue;
      rest.remove_prefix(dash);
    }
    if (!rest.starts_with("-")) continue;
    if (auto version = parseVersion(rest.substr(1))) return std::make_pair(*version, jar);
  }
  return std::nullopt;
}

fs::path GlobalConfiguration::resolveConfigurationDirectory(
    const std::optional<fs::path>& explicitDir) {
  if (explicitDir) {
    if (explicitDir->empty()) {
      throw IllegalConfigurationException("The configuration folder given is an empty path.");
    }
    return *explicitDir;
  }
  if (std::string confDir = environment(ENV_FLINK_CONF_DIR); !confDir.empty()) return confDir;
  if (std::string home = environment(ENV_FLINK_HOME_DIR); !home.empty()) {
    return fs::path(home) / "conf";
  }
  throw IllegalConfigurationException(
      "No configuration folder: none was given, and neither $" + std::string(ENV_FLINK_CONF_DIR) +
      " nor $" + std::string(ENV_FLINK_HOME_DIR) + " is set (the folder would be $" +
      std::string(ENV_FLINK_HOME_DIR) + "/conf).");
}

LoadedConfiguration GlobalConfiguration::loadConfiguration(const fs::path& configDir,
                                                           const Configuration& dynamicProperties,
                                                           ConfigurationFileChoice choice) {
  if (choice == ConfigurationFileChoice::kAuto) {
    const std::string forced = environment(ENV_CONF_FILE);
    if (!forced.empty() && forced != FLINK_CONF_FILENAME && forced != LEGACY_FLINK_CONF_FILENAME) {
      throw IllegalConfigurationException("$" + std::string(ENV_CONF_FILE) + " is '" +
                                          strings::quoteForMessage(forced) + "'; it must be " +
                                          std::string(FLINK_CONF_FILENAME) + " or " +
                                          std::string(LEGACY_FLINK_CONF_FILENAME) + ".");
    }
  }
  std::error_code error;
  const fs::file_status status = fs::status(configDir, error);
  if (!fs::exists(status)) {
    throw FileNotFoundException(
        "The configuration folder " + describe(configDir) + " does not exist; it should hold " +
        std::string(FLINK_CONF_FILENAME) + " or " + std::string(LEGACY_FLINK_CONF_FILENAME) + ".");
  }
  if (!fs::is_directory(status)) {
    throw FileNotFoundException(
        "The configuration folder " + describe(configDir) + " is not a folder; it should hold " +
        std::string(FLINK_CONF_FILENAME) + " or " + std::string(LEGACY_FLINK_CONF_FILENAME) + ".");
  }

  LoadedConfiguration loaded;
  const fs::path standardFile = configDir / FLINK_CONF_FILENAME;
  const fs::path legacyFile = configDir / LEGACY_FLINK_CONF_FILENAME;
  const bool standardPresent = present(standardFile);
  const bool legacyPresent = present(legacyFile);
  if (!standardPresent && !legacyPresent) {
    throw FileNotFoundException("The configuration folder " + describe(configDir) +
                                " holds neither " + std::string(FLINK_CONF_FILENAME) + " nor " +
                                std::string(LEGACY_FLINK_CONF_FILENAME) + ".");
  }
  bool standard = standardPresent;
  if (standardPresent && legacyPresent) {
    const Choice chosen = chooseBetweenBoth(configDir, choice);
    standard = chosen.standardYaml;
    const fs::path& read = standard ? standardFile : legacyFile;
    const fs::path& ignored = standard ? legacyFile : standardFile;
    loaded.warnings.push_back("Both " + standardFile.string() + " and " + legacyFile.string() +
                              " are present; " + read.filename().string() + " read, " +
                              ignored.filename().string() + " ignored: " + chosen.why);
  } else {
    // One file: it is read, unless another was asked for by name.
    const std::string forced = environment(ENV_CONF_FILE);
    const bool wantStandard =
        choice == ConfigurationFileChoice::kStandardYaml ||
        (choice == ConfigurationFileChoice::kAuto && forced == FLINK_CONF_FILENAME);
    const bool wantLegacy =
        choice == ConfigurationFileChoice::kLegacy ||
        (choice == ConfigurationFileChoice::kAuto && forced == LEGACY_FLINK_CONF_FILENAME);
    if ((wantStandard && !standardPresent) || (wantLegacy && !legacyPresent)) {
      const fs::path& wanted = wantStandard ? standardFile : legacyFile;
      throw FileNotFoundException(
          "The configuration file " + describe(wanted) + " was asked for" +
          (choice == ConfigurationFileChoice::kAuto ? " by $" + std::string(ENV_CONF_FILE) : "") +
          ", but the folder holds only " +
          (standardPresent ? standardFile : legacyFile).filename().string() + ".");
    }
  }
  loaded.standardYaml = standard;
  if (standard) {
    loaded.file = standardFile;
    loaded.configuration =
        parseStandardYamlConfiguration(readWholeFile(standardFile), standardFile.string());
  } else {
    loaded.file = legacyFile;
    loaded.configuration =
        parseLegacyConfiguration(readWholeFile(legacyFile), legacyFile.string(), loaded.warnings);
  }
  // How list options are read from now on, -D values included (Flink's isStandardYaml).
  loaded.configuration.setStandardYaml(standard);

  for (const auto& [key, value] : dynamicProperties.toMap()) {
    loaded.configuration.setString(key, value);
  }
  return loaded;
}

Configuration parseDynamicProperties(const std::vector<std::string>& definitions) {
  Configuration properties;
  for (const std::string& definition : definitions) {
    const std::size_t equals = definition.find('=');
    if (equals == std::string::npos) {
      throw IllegalConfigurationException("Invalid dynamic property '" +
                                          strings::quoteForMessage(definition) +
                                          "': expected key=value.");
    }
    const std::string_view key = strings::trim(std::string_view(definition).substr(0, equals));
    if (key.empty()) {
      throw IllegalConfigurationException("Invalid dynamic property '" +
                                          strings::quoteForMessage(definition) +
                                          "': the key before '=' is empty.");
    }
    properties.setString(std::string(key), definition.substr(equals + 1));
  }
  return properties;
}

bool GlobalConfiguration::isSensitive(std::string_view key) {
  static constexpr std::string_view kSensitive[] = {"password",
                                                    "secret",
                                                    "token",
                                                    "apikey",
                                                    "api-key",
                                                    "auth-params",
                                                    "service-key",
                                                    "basic-auth",
                                                    "jaas.config",
                                                    "http-headers",
                                                    "fs.azure.account.key"};
  const std::string lower = strings::toLower(key);
  for (std::string_view fragment : kSensitive) {
    if (lower.find(fragment) != std::string::npos) return true;
  }
  return false;
}

}  // namespace flink
