// Finds external-resource driver factories by name: the built-in ones, then those of the
// shared-library plugins in the plugins folder.
//
// Mirrors the part of org.apache.flink.core.plugin.PluginManager (and PluginConfig) that the
// external-resource framework uses. See ExternalResourcePlugin.h for what a plugin exports.
#pragma once

#include <filesystem>
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

  /// The plugins folder, as Flink finds it: $FLINK_PLUGINS_DIR, else $FLINK_HOME/plugins, else
  /// /opt/flink/plugins. Not checked for existence.
  static std::filesystem::path defaultPluginsDirectory();

  /// The class names of the built-in factories (today the GPU driver's,
  /// org.apache.flink.externalresource.gpu.GPUDriverFactory).
  static std::vector<std::string> builtInFactories();

  explicit PluginManager(std::filesystem::path pluginsDirectory = defaultPluginsDirectory());
  PluginManager(const PluginManager&) = delete;
  PluginManager& operator=(const PluginManager&) = delete;

  const std::filesystem::path& pluginsDirectory() const noexcept { return pluginsDirectory_; }

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
  std::mutex mutex_;
  bool loaded_ = false;
  std::vector<PluginInfo> plugins_;
  std::vector<std::shared_ptr<LoadedFactory>> factories_;
};

}  // namespace flink
