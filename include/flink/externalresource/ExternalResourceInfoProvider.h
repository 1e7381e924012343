// What a task asks for its external resources: the infos each configured resource's driver
// returned when the TaskManager started.
//
// Mirrors org.apache.flink.runtime.externalresource.ExternalResourceInfoProvider and
// StaticExternalResourceInfoProvider.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "flink/externalresource/ExternalResourceInfoSet.h"

namespace flink {

class ExternalResourceInfoProvider {
 public:
  virtual ~ExternalResourceInfoProvider() = default;

  /// The infos of the resource named `resourceName` (as in `external-resources`). Empty when no
  /// such resource is configured, or when its driver could not be made or its discovery failed.
  virtual ExternalResourceInfoSet getExternalResourceInfos(std::string_view resourceName) const = 0;
};

/// Infos fixed at construction. Immutable, so safe to share between threads.
class StaticExternalResourceInfoProvider final : public ExternalResourceInfoProvider {
 public:
  using InfoMap = std::map<std::string, ExternalResourceInfoSet, std::less<>>;

  explicit StaticExternalResourceInfoProvider(InfoMap externalResources)
      : externalResources_(std::move(externalResources)) {}

  ExternalResourceInfoSet getExternalResourceInfos(std::string_view resourceName) const override {
    const auto it = externalResources_.find(resourceName);
    return it == externalResources_.end() ? ExternalResourceInfoSet() : it->second;
  }

  /// Every resource that got infos, by name.
  const InfoMap& getExternalResources() const noexcept { return externalResources_; }

 private:
  InfoMap externalResources_;
};

}  // namespace flink
