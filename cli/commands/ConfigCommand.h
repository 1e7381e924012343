// `flink-gpu config`: the external-resource configuration as a TaskManager would read it — each
// resource's amount, driver factory (and where it comes from), parameters, and what Kubernetes
// and YARN are asked for — and every problem in it, without running anything.
#pragma once

#include <string>

#include "commands/FlinkConfigurationOption.h"
#include "commands/OutputFormat.h"

namespace flink::cli {

struct ConfigOptions {
  FlinkConfigurationOptions flinkConfig;
  OutputFormat format = OutputFormat::kText;
};

/// Prints the resolved configuration on stdout, problems on stderr.
/// @returns kSuccess, or kUsageError when the configuration cannot be read or has errors
///          (what could be read is still printed).
int runConfig(const ConfigOptions& options);

}  // namespace flink::cli
