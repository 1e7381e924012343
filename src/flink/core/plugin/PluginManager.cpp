// Plugin discovery and loading: one dlopen per plugin library, never closed.
#include "flink/core/plugin/PluginManager.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <system_error>

#include "flink/core/plugin/ExternalResourcePlugin.h"
#include "flink/util/Exceptions.h"
#include "util/DlError.h"
#include "util/Logging.h"
#include "util/Strings.h"

namespace flink {
namespace {

namespace fs = std::filesystem;

const logging::Logger& log() {
  static const logging::Logger logger("PluginManager");
  return logger;
}

/// Whether a file name is a shared library's: "libx.so", or versioned as "libx.so.1.2".
bool isSharedLibraryName(const std::string& name) {
  if (name.ends_with(".so")) return true;
  const std::size_t so = name.rfind(".so.");
  if (so == std::string::npos) return false;
  const std::string_view version = std::string_view(name).substr(so + 4);
  return !version.empty() && version.find_first_not_of("0123456789.") == std::string_view::npos &&
         version.front() != '.' && version.back() != '.';
}

/// The shared libraries of each sub-folder of `root`, sub-folders and files in name order.
std::vector<fs::path> pluginLibraries(const fs::path& root) {
  std::vector<fs::path> libraries;
  std::error_code error;
  std::vector<fs::path> folders;
  for (fs::directory_iterator it(root, error), end; !error && it != end; it.increment(error)) {
    if (it->is_directory(error)) folders.push_back(it->path());
  }
  std::sort(folders.begin(), folders.end());
  for (const fs::path& folder : folders) {
    std::vector<fs::path> files;
    std::error_code folderError;
    for (fs::directory_iterator it(folder, folderError), end; !folderError && it != end;
         it.increment(folderError)) {
      if (it->is_regular_file(folderError) && isSharedLibraryName(it->path().filename().string())) {
        files.push_back(it->path());
      }
    }
    std::sort(files.begin(), files.end());
    libraries.insert(libraries.end(), files.begin(), files.end());
  }
  return libraries;
}

std::string describeSearch(const fs::path& root) {
  std::error_code error;
  if (!fs::exists(root, error)) return "the plugins folder " + root.string() + " does not exist";
  if (!fs::is_directory(root, error)) {
    return "the plugins folder " + root.string() + " is not a folder";
  }
  return "no plugin in " + root.string() + " offers it";
}

}  // namespace

struct PluginManager::LoadedFactory {
  std::string className;
  fs::path library;
  FlinkExternalResourceFactoryEntry entry;
};

fs::path PluginManager::defaultPluginsDirectory() {
  if (const char* dir = std::getenv("FLINK_PLUGINS_DIR"); dir != nullptr && *dir != '\0') {
    return dir;
  }
  if (const char* home = std::getenv("FLINK_HOME"); home != nullptr && *home != '\0') {
    return fs::path(home) / "plugins";
  }
  // Flink's plugins folder (ConfigConstants.DEFAULT_FLINK_PLUGINS_DIRS, "plugins") under the
  // FLINK_HOME of its Docker image.
  return "/opt/flink/plugins";
}

PluginManager::PluginManager(fs::path pluginsDirectory, std::vector<BuiltInFactory> builtIns)
    : pluginsDirectory_(std::move(pluginsDirectory)), builtIns_(std::move(builtIns)) {}

std::vector<std::string> PluginManager::builtInFactories() const {
  std::vector<std::string> names;
  names.reserve(builtIns_.size());
  for (const BuiltInFactory& factory : builtIns_) names.push_back(factory.className);
  return names;
}

void PluginManager::loadPluginsLocked() {
  if (loaded_) return;
  loaded_ = true;
  for (const fs::path& library : pluginLibraries(pluginsDirectory_)) {
    PluginInfo info;
    info.library = library;
    auto refuse = [&](std::string why) {
      log().warn(std::string("Refusing the plugin ") + library.string() + ": " + why);
      info.problem = std::move(why);
      plugins_.push_back(info);
    };

    // RTLD_LOCAL: two plugins may define the same symbols without seeing each other's.
    // Each failure's error is taken (dl::takeError), so that the thread keeps no record of it.
    ::dlerror();
    void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const std::string why = dl::takeError();
      refuse("it cannot be loaded: " + (!why.empty() ? why : std::string("unknown error")));
      continue;
    }
    auto entryPoint = reinterpret_cast<FlinkExternalResourcePluginEntryPoint>(
        ::dlsym(handle, FLINK_EXTERNAL_RESOURCE_PLUGIN_ENTRY_POINT_NAME));
    if (entryPoint == nullptr) {
      static_cast<void>(dl::takeError());
      // A library the plugin itself needs, not a plugin: left loaded (it may be in use by now).
      log().debug(library.string() + " exports no " +
                  FLINK_EXTERNAL_RESOURCE_PLUGIN_ENTRY_POINT_NAME + "; not a plugin");
      continue;
    }
    const FlinkExternalResourcePlugin* plugin = nullptr;
    try {
      plugin = entryPoint();
    } catch (const std::exception& e) {
      refuse(std::string("its entry point failed: ") + e.what());
      continue;
    } catch (...) {
      refuse("its entry point failed with an unknown exception");
      continue;
    }
    if (plugin == nullptr) {
      refuse("its entry point returned no plugin description");
      continue;
    }
    if (plugin->abiVersion != FLINK_EXTERNAL_RESOURCE_PLUGIN_ABI_VERSION) {
      refuse("it was built for plugin ABI version " + std::to_string(plugin->abiVersion) +
             ", but this library has version " +
             std::to_string(FLINK_EXTERNAL_RESOURCE_PLUGIN_ABI_VERSION) +
             "; rebuild the plugin against this library's headers");
      continue;
    }
    const std::string cxxAbi = plugin->cxxAbi != nullptr ? plugin->cxxAbi : "";
    if (cxxAbi != FLINK_EXTERNAL_RESOURCE_PLUGIN_CXX_ABI) {
      refuse("it was built for the C++ ABI '" + cxxAbi + "', but this library uses '" +
             FLINK_EXTERNAL_RESOURCE_PLUGIN_CXX_ABI + "'");
      continue;
    }
    info.name = plugin->name != nullptr ? plugin->name : library.stem().string();
    std::vector<std::shared_ptr<LoadedFactory>> offered;
    for (std::size_t i = 0; i < plugin->factoryCount && plugin->factories != nullptr; ++i) {
      const FlinkExternalResourceFactoryEntry& entry = plugin->factories[i];
      if (entry.className == nullptr || *entry.className == '\0' || entry.create == nullptr) {
        log().warn(std::string("The plugin ") + library.string() +
                   " lists a factory without a name or create function (entry " +
                   std::to_string(i) + "); it is skipped.");
        continue;
      }
      info.factories.emplace_back(entry.className);
      offered.push_back(
          std::make_shared<LoadedFactory>(LoadedFactory{entry.className, library, entry}));
    }
    const std::vector<std::string> builtIn = builtInFactories();
    for (auto& factory : offered) {
      const auto sameName = [&](const std::shared_ptr<LoadedFactory>& other) {
        return other->className == factory->className;
      };
      if (std::find(builtIn.begin(), builtIn.end(), factory->className) != builtIn.end()) {
        log().warn(std::string("The plugin ") + library.string() + " offers " + factory->className +
                   ", which is built in; the built-in one is used.");
      } else if (auto it = std::find_if(factories_.begin(), factories_.end(), sameName);
                 it != factories_.end()) {
        log().warn(std::string("Both ") + (*it)->library.string() + " and " + library.string() +
                   " offer " + factory->className + "; the first is used.");
      } else {
        factories_.push_back(std::move(factory));
      }
    }
    log().info(std::string("Loaded the plugin ") + info.name + " from " + library.string() +
               ", offering: " + strings::join(info.factories, ", "));
    plugins_.push_back(std::move(info));
  }
}

std::unique_ptr<ExternalResourceDriverFactory> PluginManager::createExternalResourceDriverFactory(
    std::string_view className) {
  for (const BuiltInFactory& builtIn : builtIns_) {
    if (builtIn.className == className) return builtIn.create();
  }
  std::shared_ptr<LoadedFactory> found;
  std::string searched;
  {
    std::lock_guard lock(mutex_);
    loadPluginsLocked();
    for (const auto& factory : factories_) {
      if (factory->className == className) found = factory;
    }
    if (!found) {
      searched = describeSearch(pluginsDirectory_);
      std::vector<std::string> offered = builtInFactories();
      for (const auto& factory : factories_) offered.push_back(factory->className);
      searched += "; factories found: " + strings::join(offered, ", ");
      for (const PluginInfo& plugin : plugins_) {
        if (plugin.problem) {
          searched += "; refused " + plugin.library.string() + ": " + *plugin.problem;
        }
      }
    }
  }
  if (!found) {
    throw FlinkException("Could not find the external resource driver factory '" +
                         std::string(className) + "': it is not built in, and " + searched + ".");
  }

  ExternalResourceDriverFactory* factory = nullptr;
  try {
    factory = found->entry.create();
  } catch (const std::exception& e) {
    throw FlinkException("The plugin " + found->library.string() + " could not make the factory " +
                         found->className + ": " + e.what());
  } catch (...) {
    throw FlinkException("The plugin " + found->library.string() + " could not make the factory " +
                         found->className + ": an unknown exception was thrown");
  }
  if (factory == nullptr) {
    throw FlinkException("The plugin " + found->library.string() + " returned no factory for " +
                         found->className + ".");
  }
  return std::unique_ptr<ExternalResourceDriverFactory>(factory);
}

std::optional<std::string> PluginManager::describeFactorySource(std::string_view className) {
  const std::vector<std::string> builtIn = builtInFactories();
  if (std::find(builtIn.begin(), builtIn.end(), className) != builtIn.end()) return "built in";
  std::lock_guard lock(mutex_);
  loadPluginsLocked();
  for (const auto& factory : factories_) {
    if (factory->className == className) return factory->library.string();
  }
  return std::nullopt;
}

std::vector<PluginManager::PluginInfo> PluginManager::plugins() {
  std::lock_guard lock(mutex_);
  loadPluginsLocked();
  return plugins_;
}

}  // namespace flink
