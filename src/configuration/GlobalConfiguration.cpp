// Finding the configuration folder, choosing the file in it, reading it, and the `-D` overrides.
// The two file formats are read in LegacyConfigurationParser.cpp and YamlConfigurationParser.cpp.
#include "flink/configuration/GlobalConfiguration.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <system_error>

#include "configuration/ConfigurationFileParsers.h"
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

}  // namespace

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
                                                           const Configuration& dynamicProperties) {
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
  if (present(standardFile)) {
    if (present(legacyFile)) {
      loaded.warnings.push_back("Both " + standardFile.string() + " and " + legacyFile.string() +
                                " are present; " + std::string(FLINK_CONF_FILENAME) + " read, " +
                                std::string(LEGACY_FLINK_CONF_FILENAME) + " ignored");
    }
    loaded.file = standardFile;
    loaded.configuration =
        parseStandardYamlConfiguration(readWholeFile(standardFile), standardFile.string());
  } else if (present(legacyFile)) {
    loaded.file = legacyFile;
    loaded.configuration =
        parseLegacyConfiguration(readWholeFile(legacyFile), legacyFile.string(), loaded.warnings);
  } else {
    throw FileNotFoundException("The configuration folder " + describe(configDir) +
                                " holds neither " + std::string(FLINK_CONF_FILENAME) + " nor " +
                                std::string(LEGACY_FLINK_CONF_FILENAME) + ".");
  }

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
