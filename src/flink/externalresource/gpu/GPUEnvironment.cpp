// The environment of a worker's child: GPUInfo's properties turned into the grant that
// host/defaultdiscovery/ChildEnvironment.h's one rule reads. See GPUEnvironment.h.
#include "flink/externalresource/gpu/GPUEnvironment.h"

#include <optional>
#include <stdexcept>

#include "flink/externalresource/gpu/GPUInfo.h"
#include "host/defaultdiscovery/ChildEnvironment.h"
#include "util/Strings.h"

namespace flink::externalresource::gpu {
namespace {

std::optional<unsigned> unsignedProperty(const GPUInfo& info, std::string_view key) {
  const std::optional<std::string> text = info.getProperty(key);
  return text ? strings::parseUnsigned(*text) : std::nullopt;
}

/// The share `info` is, from its share keys; nullopt for a whole GPU.
std::optional<defaultdiscovery::ShareGrant> shareOf(const GPUInfo& info) {
  const std::optional<unsigned> index = unsignedProperty(info, GPUInfo::PROPERTY_KEY_SHARE_INDEX);
  const std::optional<unsigned> count = unsignedProperty(info, GPUInfo::PROPERTY_KEY_SHARE_COUNT);
  if (!index || !count) return std::nullopt;
  defaultdiscovery::ShareGrant share;
  share.slot = {*index, *count};
  if (const std::optional<unsigned> memory =
          unsignedProperty(info, GPUInfo::PROPERTY_KEY_SHARE_MEMORY)) {
    share.memoryMiB = *memory;
  }
  share.mpsPipeDirectory = info.getProperty(GPUInfo::PROPERTY_KEY_MPS_PIPE_DIRECTORY);
  share.uuid = info.getProperty(GPUInfo::PROPERTY_KEY_UUID);
  return share;
}

}  // namespace

GPUEnvironment environmentFor(const ExternalResourceInfoSet& gpus) {
  std::vector<std::string> visible;
  std::vector<std::string> names;
  std::vector<defaultdiscovery::ShareGrant> shares;
  for (const ExternalResourceInfoSet::value_type& info : gpus) {
    const auto* gpu = dynamic_cast<const GPUInfo*>(info.get());
    if (gpu == nullptr) {
      throw std::invalid_argument(
          "environmentFor takes the GPUInfos of a GPU driver; got " +
          (info ? "'" + info->toString() + "'" : std::string("a null info")));
    }
    visible.push_back(gpu->getProperty(GPUInfo::PROPERTY_KEY_UUID).value_or(gpu->index()));
    names.push_back(gpu->index());
    if (const std::optional<defaultdiscovery::ShareGrant> share = shareOf(*gpu)) {
      shares.push_back(*share);
    }
  }
  // One grant's GPUs are all whole or all shares; a mix (two resources' GPUs together) gets the
  // whole-GPU variables, a share's limits being for its own worker to apply.
  if (shares.size() != visible.size()) shares.clear();
  defaultdiscovery::EnvironmentChanges changes =
      defaultdiscovery::childEnvironment(visible, names, shares);
  return GPUEnvironment{std::move(changes.set), std::move(changes.unset)};
}

}  // namespace flink::externalresource::gpu
