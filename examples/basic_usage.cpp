// The "Basic Usage" example of Flink's GPU driver, in C++: configure the discovery script, make a
// driver through GPUDriverFactory, ask it for two GPUs and print what it found.
//
//   basic_usage [<discovery script>]
//
// The script defaults to the path in Flink's documentation. It is run as
// `<script> 2 --device-type nvidia` and must print GPU indices such as `0,1`.
#include <cstdlib>
#include <exception>
#include <iostream>
#include <memory>
#include <string>

#include "flink/configuration/Configuration.h"
#include "flink/externalresource/ExternalResourceDriver.h"
#include "flink/externalresource/ExternalResourceInfoSet.h"
#include "flink/externalresource/gpu/GPUDriverFactory.h"
#include "flink/externalresource/gpu/GPUDriverOptions.h"

int main(int argc, char** argv) {
  using flink::Configuration;
  using flink::ExternalResourceDriver;
  using flink::ExternalResourceInfoSet;
  using flink::externalresource::gpu::GPUDriverFactory;
  using flink::externalresource::gpu::GPUDriverOptions;

  const std::string scriptPath = argc > 1 ? argv[1] : "/path/to/gpu-discovery-script.sh";

  try {
    Configuration config;
    config.set(GPUDriverOptions::DISCOVERY_SCRIPT_PATH, scriptPath);
    config.set(GPUDriverOptions::DISCOVERY_SCRIPT_ARG, "--device-type nvidia");

    GPUDriverFactory factory;
    // Construction already checks the script (it exists and is executable), so a bad path
    // throws here, not at the first discovery.
    std::unique_ptr<ExternalResourceDriver> driver = factory.createExternalResourceDriver(config);
    const ExternalResourceInfoSet gpuResources = driver->retrieveResourceInfo(2);

    for (const auto& gpu : gpuResources) {
      // Kept from the Java example to show how a property is read; a worker would hand the
      // index to CUDA_VISIBLE_DEVICES or similar.
      [[maybe_unused]] const std::string deviceIndex =
          gpu->getProperty("index").value_or("unknown");
      std::cout << "Available GPU: " << gpu->toString() << '\n';
    }
  } catch (const std::exception& e) {
    std::cerr << "basic_usage: " << e.what() << '\n';
    return EXIT_FAILURE;
  }
  return EXIT_SUCCESS;
}
