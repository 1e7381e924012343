// A program that uses the installed library, found through find_package(FlinkGpu): it makes a
// GPU driver for the discovery script named on its command line and prints the GPUs it gets.
//
//   consumer <discovery script> [<amount>]      (amount defaults to 1)
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>

#include "flink/configuration/Configuration.h"
#include "flink/externalresource/gpu/GPUDriverFactory.h"
#include "flink/externalresource/gpu/GPUDriverOptions.h"

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::cerr << "usage: consumer <discovery script> [<amount>]\n";
    return 2;
  }
  try {
    const std::int64_t amount = argc == 3 ? std::stoll(argv[2]) : 1;

    flink::Configuration config;
    config.set(flink::externalresource::gpu::GPUDriverOptions::DISCOVERY_SCRIPT_PATH,
               std::string(argv[1]));
    // The typed factory method, so that this also checks GPUDriver's header is usable.
    auto driver = flink::externalresource::gpu::GPUDriverFactory().createGPUDriver(config);
    for (const auto& gpu : driver->retrieveResourceInfo(amount)) {
      std::cout << gpu->toString() << '\n';
    }
  } catch (const std::exception& e) {
    std::cerr << "consumer: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
