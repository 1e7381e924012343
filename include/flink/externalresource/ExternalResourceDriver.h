// A driver discovers the external resources (GPUs, FPGAs, ...) a worker may use.
//
// Mirrors org.apache.flink.api.common.externalresource.ExternalResourceDriver.
#pragma once

#include <cstdint>

#include "flink/externalresource/ExternalResourceInfoSet.h"

namespace flink {

class ExternalResourceDriver {
 public:
  virtual ~ExternalResourceDriver() = default;

  /// Discovers up to `amount` resources for this worker.
  /// @throws std::invalid_argument if amount <= 0; other errors are driver specific (see the
  ///         implementation's documentation).
  virtual ExternalResourceInfoSet retrieveResourceInfo(std::int64_t amount) = 0;
};

}  // namespace flink
