// The entry point of an external-resource plugin: a shared library that offers driver factories.
//
// Flink finds factories in plugin jars through Java's ServiceLoader. Our plugins are shared
// libraries, one sub-folder per plugin in the plugins folder, as Flink lays them out:
//
//   $FLINK_PLUGINS_DIR/
//     fpga/libfpga-driver.so
//     external-resource-gpu/...        (our own scripts; folders without a plugin are skipped)
//
// A plugin exports one C function, FLINK_EXTERNAL_RESOURCE_PLUGIN_ENTRY_POINT, that returns a
// description of the plugin: the plugin ABI version it was built for, the C++ ABI of its
// compiler, and the factories it offers, each by the class name a configuration names in
// `external-resource.<name>.driver-factory.class`. A plugin built for another ABI version, or with
// another C++ ABI, is refused before anything else in it is touched.
//
// Factories and the drivers they make are C++ objects handed across the library boundary, so a
// plugin must be built against these headers with a compatible compiler and standard library;
// FLINK_EXTERNAL_RESOURCE_PLUGIN_ABI_VERSION changes whenever the classes the plugin implements
// (ExternalResourceDriverFactory, ExternalResourceDriver, ExternalResourceInfo, Configuration)
// change in a way that breaks that.
//
// A minimal plugin (see examples/plugin/ for a whole one):
//
//   flink::ExternalResourceDriverFactory* createFpgaFactory() { return new FpgaDriverFactory(); }
//   const FlinkExternalResourceFactoryEntry kFactories[] = {
//       {"com.example.FpgaDriverFactory", &createFpgaFactory}};
//   const FlinkExternalResourcePlugin kPlugin = {FLINK_EXTERNAL_RESOURCE_PLUGIN_ABI_VERSION,
//                                                FLINK_EXTERNAL_RESOURCE_PLUGIN_CXX_ABI,
//                                                "fpga", 1, kFactories};
//   extern "C" const FlinkExternalResourcePlugin* FLINK_EXTERNAL_RESOURCE_PLUGIN_ENTRY_POINT() {
//     return &kPlugin;
//   }
#pragma once

#include <cstddef>
#include <cstdint>

#include "flink/externalresource/ExternalResourceDriverFactory.h"

/// The ABI version this header describes. Version 1: the layout below and the classes of
/// flink/externalresource/ and flink/configuration/ as of flink-gpu 0.2. Version 2: Configuration
/// carries its reading rules (standard YAML or legacy).
#define FLINK_EXTERNAL_RESOURCE_PLUGIN_ABI_VERSION 2u

#define FLINK_EXTERNAL_RESOURCE_PLUGIN_STRINGIFY2(x) #x
#define FLINK_EXTERNAL_RESOURCE_PLUGIN_STRINGIFY(x) FLINK_EXTERNAL_RESOURCE_PLUGIN_STRINGIFY2(x)
/// The C++ ABI the plugin was compiled for: the standard library and its string ABI. Two
/// sides with different texts cannot share std::string or exceptions safely.
#if defined(_LIBCPP_VERSION)
#define FLINK_EXTERNAL_RESOURCE_PLUGIN_CXX_ABI \
  "libc++ abi " FLINK_EXTERNAL_RESOURCE_PLUGIN_STRINGIFY(_LIBCPP_ABI_VERSION)
#elif defined(__GLIBCXX__)
#define FLINK_EXTERNAL_RESOURCE_PLUGIN_CXX_ABI \
  "libstdc++ cxx11-abi=" FLINK_EXTERNAL_RESOURCE_PLUGIN_STRINGIFY(_GLIBCXX_USE_CXX11_ABI)
#else
#define FLINK_EXTERNAL_RESOURCE_PLUGIN_CXX_ABI "unknown"
#endif

/// The name of the function every plugin exports.
#define FLINK_EXTERNAL_RESOURCE_PLUGIN_ENTRY_POINT flink_external_resource_plugin
#define FLINK_EXTERNAL_RESOURCE_PLUGIN_ENTRY_POINT_NAME "flink_external_resource_plugin"

extern "C" {

/// One factory a plugin offers.
struct FlinkExternalResourceFactoryEntry {
  /// The name configurations use, e.g. "com.example.FpgaDriverFactory". Must be non-empty.
  const char* className;
  /// Makes a new factory; the caller owns it (deletes it through the virtual destructor). May
  /// throw; the error is reported for this factory only.
  flink::ExternalResourceDriverFactory* (*create)();
};

/// What the entry point returns. Must stay valid while the library is loaded (plugins are never
/// unloaded). abiVersion is first so that it can be read whatever the rest looks like.
struct FlinkExternalResourcePlugin {
  std::uint32_t abiVersion;  ///< FLINK_EXTERNAL_RESOURCE_PLUGIN_ABI_VERSION
  const char* cxxAbi;        ///< FLINK_EXTERNAL_RESOURCE_PLUGIN_CXX_ABI
  const char* name;          ///< for messages, e.g. "fpga"
  std::size_t factoryCount;
  const FlinkExternalResourceFactoryEntry* factories;
};

using FlinkExternalResourcePluginEntryPoint = const FlinkExternalResourcePlugin* (*)();

}  // extern "C"
