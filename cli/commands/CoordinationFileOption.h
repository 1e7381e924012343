// The `--coordination-file` option that status, release and exec share.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "coordination/Coordination.h"

namespace flink::cli {

/// Adds `--coordination-file PATH` to `command`, defaulting `file` to Flink's
/// /var/tmp/flink-gpu-coordination.
inline void addCoordinationFileOption(CLI::App& command, std::string& file) {
  file = coordination::kDefaultCoordinationFile;
  command
      .add_option("--coordination-file", file,
                  "The coordination file shared by the workers of this host")
      ->capture_default_str();
}

}  // namespace flink::cli
