// Finds external-resource driver factories by name: the built-in ones its caller gives it, then
// those of the shared-library plugins in the plugins folder.
//
// Mirrors the part of org.apache.flink.core.plugin.PluginManager (and PluginConfig) that the
// external-resource framework uses; like Flink's, it knows no factory of its own. The library's
// built-in factories are ExternalResourceUtils's (ExternalResourceUtils::createPluginManager).
// See ExternalResourcePlugin.h for what a plugin exports.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flink/externalresource/ExternalResourceDriverFactory.h"

namespace flink {

class PluginManager {
 public:
  /// One plugin library that was looked at.
  struct PluginInfo {
    /// The name the plugin gives itself (empty when it was refused before saying).
    std::string name;
    std::filesystem::path library;
    /// The factory class names it offers.
    std::vector<std::string> factories;
    /// Why it was refused (cannot be loaded, wrong ABI version, …); nullopt when loaded.
    std::optional<std::string> problem;
  };

  /// A factory compiled into the program: its class name, and how to make one.
  struct BuiltInFactory {
    std::string className;
    std::function<std::unique_ptr<ExternalResourceDriverFactory>()> create;
  };

  /// The plugins folder, as Flink finds it: $FLINK_PLUGINS_DIR, else $FLINK_HOME/plugins, else
  /// /opt/flink/plugins. Not checked for existence.
  static std::filesystem::path defaultPluginsDirectory();

  /// `builtIns` are found before any plugin, and a plugin offering one of their class names is
  /// refused for it (with a WARN). Nothing is loaded until a factory is asked for.
  PluginManager(std::filesystem::path pluginsDirectory, std::vector<BuiltInFactory> builtIns);
  PluginManager(const PluginManager&) = delete;
  PluginManager& operator=(const PluginManager&) = delete;

  const std::filesystem::path& pluginsDirectory() const noexcept { return pluginsDirectory_; }

  /// The class names of the built-in factories, in the order they were given.
  std::vector<std::string> builtInFactories() const;

  /// Makes a new factory of the given class name: a built-in one, else one from the first plugin
  /// (plugin folders in name order) that offers it. Plugins are loaded on the first call that
  /// needs them and stay loaded for the life of the process, since the drivers they make run
  /// their code. Thread-safe.
  /// @throws FlinkException when no built-in factory and no plugin has that name (the message
  ///         names it, the folder looked in, the factories found there and the plugins refused,
  ///         with why), or when the plugin's create function fails or returns null.
  std::unique_ptr<ExternalResourceDriverFactory> createExternalResourceDriverFactory(
      std::string_view className);

  /// Where a factory would come from: "built in", or the plugin library's path; nullopt when no
  /// built-in factory and no plugin offers it. Loads the plugins if needed.
  std::optional<std::string> describeFactorySource(std::string_view className);

  /// Every plugin library looked at, loaded or refused. Loads the plugins if needed.
  std::vector<PluginInfo> plugins();

 private:
  struct LoadedFactory;
  void loadPluginsLocked();

  std::filesystem::path pluginsDirectory_;
  std::vector<BuiltInFactory> builtIns_;
  std::mutex mutex_;
  bool loaded_ = false;
  std::vector<PluginInfo> plugins_;
  std::vector<std::shared_ptr<LoadedFactory>> factories_;
};

}  // namespace flink
