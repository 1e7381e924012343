// Makes an ExternalResourceDriver from the resource's own configuration.
//
// Mirrors org.apache.flink.api.common.externalresource.ExternalResourceDriverFactory. The
// configuration a factory sees holds the keys of `external-resource.<name>.param.` with that
// prefix removed.
#pragma once

#include <memory>

#include "flink/configuration/Configuration.h"
#include "flink/externalresource/ExternalResourceDriver.h"

namespace flink {

class ExternalResourceDriverFactory {
 public:
  virtual ~ExternalResourceDriverFactory() = default;

  /// @throws whatever the driver's construction throws when the configuration is invalid.
  virtual std::unique_ptr<ExternalResourceDriver> createExternalResourceDriver(
      const Configuration& config) = 0;
};

}  // namespace flink
