// Configuration options of the GPU driver, with Flink's keys and defaults.
//
// Keys are relative to the resource: in a Flink configuration they are written
// `external-resource.<resource_name>.param.<key>`, and the driver sees them with that prefix
// removed.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "flink/configuration/ConfigOption.h"
#include "flink/configuration/ConfigOptions.h"

namespace flink::externalresource::gpu {

struct GPUDriverOptions {
  /// Flink's ConfigConstants.DEFAULT_FLINK_PLUGINS_DIRS: the plugins folder, relative to
  /// $FLINK_HOME.
  static constexpr const char* DEFAULT_FLINK_PLUGINS_DIR = "plugins";

  /// Where Flink's Docker image puts the default script (its FLINK_HOME is /opt/flink): the
  /// driver looks there when the relative default is not found (not in Flink).
  static constexpr const char* DOCKER_DEFAULT_DISCOVERY_SCRIPT =
      "/opt/flink/plugins/external-resource-gpu/nvidia-gpu-discovery.sh";

  /// `vendor`: whose GPUs these are, `nvidia` (the default), `amd` or `intel` (not in Flink).
  /// It picks the default script (`plugins/external-resource-gpu/<vendor>-gpu-discovery.sh`,
  /// when `discovery-script.path` is not set) and where GPUInfo's properties come from: NVML for
  /// NVIDIA, sysfs for AMD (the KFD topology) and Intel (DRM), read under the worker's own masks
  /// as its runtime reads them. Another value is an IllegalConfigurationException when the driver
  /// is made.
  inline static const ConfigOption<std::string> VENDOR =
      ConfigOptions::key("vendor").stringType().defaultValue("nvidia").withDescription(
          "Whose GPUs these are: nvidia, amd or intel. Picks the default discovery script "
          "and where the GPUs' properties are read from.");

  /// The default script of `vendor` ("nvidia", "amd", "intel"), relative to $FLINK_HOME.
  static std::string defaultDiscoveryScript(std::string_view vendor) {
    return std::string(DEFAULT_FLINK_PLUGINS_DIR) + "/external-resource-gpu/" +
           std::string(vendor) + "-gpu-discovery.sh";
  }

  /// `discovery-script.path`: the discovery script, absolute or relative to $FLINK_HOME (else to
  /// the working directory). Its default is the `vendor`'s script (defaultDiscoveryScript); for
  /// NVIDIA, as in Flink: the relative
  /// `plugins/external-resource-gpu/nvidia-gpu-discovery.sh`, i.e. the script in the plugins
  /// folder of the Flink installation at $FLINK_HOME. When the default is used and not found
  /// there, the driver tries DOCKER_DEFAULT_DISCOVERY_SCRIPT before it gives up.
  inline static const ConfigOption<std::string> DISCOVERY_SCRIPT_PATH =
      ConfigOptions::key("discovery-script.path")
          .stringType()
          .defaultValue(std::string(DEFAULT_FLINK_PLUGINS_DIR) +
                        "/external-resource-gpu/nvidia-gpu-discovery.sh")
          .withDescription(
              "The path of the discovery script. It can be an absolute path, or a path relative "
              "to FLINK_HOME when defined or the current directory otherwise.");

  /// `discovery-script.args`: arguments for the script, split on whitespace. No default: the
  /// script then gets the single argument "null", as Flink passes it.
  inline static const ConfigOption<std::string> DISCOVERY_SCRIPT_ARG =
      ConfigOptions::key("discovery-script.args")
          .stringType()
          .noDefaultValue()
          .withDescription("The arguments passed to the discovery script, split on whitespace.");

  /// `discovery-script.timeout`: how long the script may run (not in Flink, which fixes 10 s).
  /// A duration such as "10 s", "500 ms" or "1 min"; must be positive.
  inline static const ConfigOption<std::chrono::milliseconds> DISCOVERY_SCRIPT_TIMEOUT =
      ConfigOptions::key("discovery-script.timeout")
          .durationType()
          .defaultValue(std::chrono::seconds(10))
          .withDescription(
              "How long the discovery script may run before it and every process it started are "
              "killed.");

  /// `discovery-script.in-process`: when the script is this project's default discovery
  /// (recognised by its content, not its name: see GPUDriver), do its work in the worker's own
  /// process instead of running it (not in Flink). The answer, the coordination records, the
  /// errors and the time-out are the script's; no process is started but nvidia-smi where NVML
  /// cannot be used, and each GPU recorded is also leased for as long as the driver lives.
  /// `false` runs the script, as Flink does.
  inline static const ConfigOption<bool> DISCOVERY_SCRIPT_IN_PROCESS =
      ConfigOptions::key("discovery-script.in-process")
          .booleanType()
          .defaultValue(true)
          .withDescription(
              "Whether the default discovery script's work is done in the worker's process, "
              "without starting it (GPUs it records are then also leased for the driver's "
              "life). Other scripts are always run.");

  /// `nvml.enabled`: fill each GPUInfo's properties (UUID, name, PCI bus id, memory, minor
  /// number, MIG placement) from NVML, for the identifiers the script printed, whatever script
  /// it is (not in Flink, whose GPUInfo has the index only). Where NVML cannot be loaded, the
  /// infos carry the index only. `false` saves NVML's start-up (tens of ms on a GPU host).
  inline static const ConfigOption<bool> NVML_ENABLED =
      ConfigOptions::key("nvml.enabled")
          .booleanType()
          .defaultValue(true)
          .withDescription(
              "Whether to read the GPUs' properties (UUID, name, PCI bus id, memory, MIG) "
              "through NVML.");

  /// `placement`: which free GPUs the default discovery hands out (not in Flink): `topology`,
  /// the best-connected set where NVML tells the topology, or `index`, Flink's first free ones.
  /// No default: when it is not set the script is run as configured (the default discovery then
  /// uses `topology`); when it is, the driver appends `--placement <value>` to the script's
  /// arguments, so the script must accept that (the default discovery does). Another value is an
  /// IllegalConfigurationException when the driver is made.
  inline static const ConfigOption<std::string> PLACEMENT =
      ConfigOptions::key("placement")
          .stringType()
          .noDefaultValue()
          .withDescription(
              "How the default discovery picks among the free GPUs: topology (the best-connected "
              "set) or index (the first free ones, as Flink does). Passed to the discovery "
              "script as --placement <value>.");
};

}  // namespace flink::externalresource::gpu
