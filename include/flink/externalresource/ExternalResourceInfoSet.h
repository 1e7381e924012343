// The immutable result of ExternalResourceDriver::retrieveResourceInfo.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "flink/externalresource/ExternalResourceInfo.h"

namespace flink {

/// A read-only, insertion-ordered collection of resource infos, unique as the driver that made it
/// defines uniqueness (GPUs: by index). Mirrors the unmodifiable Set Flink's drivers return; it
/// iterates in the order the resources were discovered. Copies share the same immutable elements.
class ExternalResourceInfoSet {
 public:
  using value_type = std::shared_ptr<const ExternalResourceInfo>;
  using const_iterator = std::vector<value_type>::const_iterator;

  ExternalResourceInfoSet() = default;
  explicit ExternalResourceInfoSet(std::vector<value_type> infos) : infos_(std::move(infos)) {}

  const_iterator begin() const noexcept { return infos_.begin(); }
  const_iterator end() const noexcept { return infos_.end(); }
  std::size_t size() const noexcept { return infos_.size(); }
  bool empty() const noexcept { return infos_.empty(); }
  const value_type& operator[](std::size_t position) const { return infos_.at(position); }

 private:
  std::vector<value_type> infos_;
};

}  // namespace flink
