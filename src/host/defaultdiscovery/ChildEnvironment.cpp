// The environment of a process using GPUs granted to another. See ChildEnvironment.h.
#include "host/defaultdiscovery/ChildEnvironment.h"

#include <algorithm>
#include <string>

#include "host/enumeration/VisibleDevices.h"
#include "util/Strings.h"

namespace flink::defaultdiscovery {

EnvironmentChanges wholeGpuEnvironment() {
  EnvironmentChanges changes;
  changes.unset = {kShareMemoryVariable, kMpsPipeDirectoryVariable, kMpsThreadPercentageVariable,
                   kMpsMemoryLimitVariable};
  return changes;
}

std::optional<std::string> mpsPipeDirectoryOf(const std::vector<ShareGrant>& shares) {
  for (const ShareGrant& share : shares) {
    if (share.mpsPipeDirectory) return share.mpsPipeDirectory;
  }
  return std::nullopt;
}

EnvironmentChanges shareEnvironment(const std::vector<std::string>& gpus,
                                    const std::vector<ShareGrant>& shares) {
  EnvironmentChanges changes;
  std::vector<std::string> memory;
  std::vector<std::string> unknown;
  for (std::size_t i = 0; i < shares.size(); ++i) {
    if (shares[i].memoryMiB) {
      memory.push_back(std::to_string(*shares[i].memoryMiB));
    } else {
      unknown.push_back(i < gpus.size() ? gpus[i] : std::to_string(i));
    }
  }
  const std::optional<std::string> directory = mpsPipeDirectoryOf(shares);
  if (unknown.empty() && !memory.empty()) {
    changes.set.emplace_back(kShareMemoryVariable, strings::join(memory, ","));
  } else {
    changes.unset.emplace_back(kShareMemoryVariable);
    changes.notes.push_back(
        "the memory of a share of GPU(s) " + strings::join(unknown, ",") +
        " is unknown (the GPU's memory was not known when it was declared shared): " +
        kShareMemoryVariable + " is not set" +
        (directory ? std::string(", and ") + kMpsMemoryLimitVariable + " does not limit it"
                   : std::string()));
  }

  if (!directory) {
    for (const char* name :
         {kMpsPipeDirectoryVariable, kMpsThreadPercentageVariable, kMpsMemoryLimitVariable}) {
      changes.unset.emplace_back(name);
    }
    return changes;
  }
  changes.set.emplace_back(kMpsPipeDirectoryVariable, *directory);
  unsigned percentage = 100;
  std::vector<std::string> limits;
  for (std::size_t ordinal = 0; ordinal < shares.size(); ++ordinal) {
    const ShareGrant& share = shares[ordinal];
    percentage = std::min(percentage, share.activeThreadPercentage());
    if (share.memoryMiB) {
      limits.push_back(std::to_string(ordinal) + "=" + std::to_string(*share.memoryMiB) + "M");
    }
  }
  changes.set.emplace_back(kMpsThreadPercentageVariable, std::to_string(percentage));
  if (limits.empty()) {
    changes.unset.emplace_back(kMpsMemoryLimitVariable);
  } else {
    changes.set.emplace_back(kMpsMemoryLimitVariable, strings::join(limits, ","));
  }
  return changes;
}

EnvironmentChanges childEnvironment(const std::vector<std::string>& visible,
                                    const std::vector<std::string>& gpus,
                                    const std::vector<ShareGrant>& shares) {
  EnvironmentChanges changes =
      shares.empty() ? wholeGpuEnvironment() : shareEnvironment(gpus, shares);
  changes.set.insert(changes.set.begin(),
                     {discovery::kVisibleDevicesVariable, strings::join(visible, ",")});
  return changes;
}

std::string shellLines(const EnvironmentChanges& changes) {
  std::string lines;
  for (const auto& [name, value] : changes.set) {
    lines += "export " + name + '=' + strings::shellWord(value) + '\n';
  }
  for (const std::string& name : changes.unset) lines += "unset " + name + '\n';
  return lines;
}

}  // namespace flink::defaultdiscovery
