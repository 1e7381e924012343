#include "flink/externalresource/gpu/GPUDriverFactory.h"

namespace flink::externalresource::gpu {

std::unique_ptr<ExternalResourceDriver> GPUDriverFactory::createExternalResourceDriver(
    const Configuration& config) {
  return createGPUDriver(config);
}

std::unique_ptr<GPUDriver> GPUDriverFactory::createGPUDriver(const Configuration& config) {
  return std::unique_ptr<GPUDriver>(new GPUDriver(config));
}

}  // namespace flink::externalresource::gpu
