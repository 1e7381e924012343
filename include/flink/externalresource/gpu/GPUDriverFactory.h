// Makes GPU drivers. Flink's configurations name it
// `org.apache.flink.externalresource.gpu.GPUDriverFactory`.
#pragma once

#include <memory>

#include "flink/configuration/Configuration.h"
#include "flink/externalresource/ExternalResourceDriverFactory.h"
#include "flink/externalresource/gpu/GPUDriver.h"

namespace flink::externalresource::gpu {

class GPUDriverFactory final : public ExternalResourceDriverFactory {
 public:
  /// The factory's name in Flink configurations (`external-resource.<name>.driver-factory.class`).
  static constexpr const char* CLASS_NAME =
      "org.apache.flink.externalresource.gpu.GPUDriverFactory";

  /// @returns a GPUDriver for `config` (keys as in GPUDriverOptions).
  /// @throws IllegalConfigurationException, FileNotFoundException or FlinkException, as
  ///         GPUDriver's construction documents.
  std::unique_ptr<ExternalResourceDriver> createExternalResourceDriver(
      const Configuration& config) override;

  /// The same, typed.
  std::unique_ptr<GPUDriver> createGPUDriver(const Configuration& config);
};

}  // namespace flink::externalresource::gpu
