// What a TaskManager does with its external resources at start-up, in C++: read the Flink
// configuration folder, make the driver of every resource it lists through the named factory
// (built in, or from a plugin), ask each for its amount, and hand the infos to tasks through an
// ExternalResourceInfoProvider.
//
//   task_manager_startup <configuration folder> [<resource name>...]
//
// Prints each named resource's infos (default: every configured resource) with their properties.
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "flink/configuration/GlobalConfiguration.h"
#include "flink/core/plugin/PluginManager.h"
#include "flink/externalresource/ExternalResourceUtils.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: task_manager_startup <configuration folder> [<resource name>...]\n";
    return 2;
  }
  try {
    const flink::LoadedConfiguration loaded =
        flink::GlobalConfiguration::loadConfiguration(argv[1]);
    // $FLINK_PLUGINS_DIR, else $FLINK_HOME/plugins, ...; with the library's built-in factories.
    const auto plugins = flink::ExternalResourceUtils::createPluginManager();
    const auto provider =
        flink::ExternalResourceUtils::createStaticExternalResourceInfoProviderFromConfig(
            loaded.configuration, *plugins);

    std::vector<std::string> names(argv + 2, argv + argc);
    if (names.empty())
      names = flink::ExternalResourceUtils::getExternalResourceSet(loaded.configuration);
    for (const std::string& name : names) {
      // What a task's RuntimeContext#getExternalResourceInfos(name) returns.
      for (const auto& info : provider->getExternalResourceInfos(name)) {
        std::cout << name << ": " << info->toString();
        for (const std::string& key : info->getKeys()) {
          std::cout << ' ' << key << '=' << info->getProperty(key).value_or("");
        }
        std::cout << '\n';
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "task_manager_startup: " << e.what() << '\n';
    return 1;
  }
}
