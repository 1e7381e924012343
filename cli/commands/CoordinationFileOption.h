// Which coordination file a flink-gpu command uses: `--coordination-file PATH`, else
// $FLINK_GPU_COORDINATION_FILE, else the one the GPU resources of a Flink configuration name in
// their discovery-script.args (--config, -D, $FLINK_CONF_DIR, else $FLINK_HOME/conf when it holds
// one), else Flink's default
// (host/coordination/CoordinationFile.h holds the rule; this adds the configuration's step).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "commands/FlinkConfigurationOption.h"

namespace flink::cli {

struct CoordinationFileOptions {
  /// --coordination-file, when given.
  std::optional<std::string> option;
  /// --config, --config-file, -D (for the commands that take them).
  FlinkConfigurationOptions flinkConfig;
  /// The file chosen (absolute): set by resolveCoordinationFile before the command runs.
  std::string path;
};

/// Chooses the file (-v says which, and why) and sets `options.path`. A configuration asked for
/// (--config, -D, $FLINK_CONF_DIR) that cannot be read, GPU resources that name two different
/// files (one in coordination mode naming none names the default), a relative file named by the
/// configuration or the variable, an empty --coordination-file or variable, and a file that is
/// not a regular file are errors: printed, false (exit 2). The one of $FLINK_HOME/conf that
/// cannot be read is a warning; a variable that names another file than the configuration too.
bool resolveCoordinationFile(CoordinationFileOptions& options);

/// What a coordination file without records is, for a person, after its path: " has no records",
/// " does not exist", or, a folder missing too (more likely a mistyped path than a host yet to
/// allocate), " does not exist, nor does its folder F".
std::string describeFileWithoutRecords(const std::filesystem::path& file);

/// A coordination file a Flink configuration's GPU resource names, and where.
struct NamedCoordinationFile {
  std::string resource;
  std::filesystem::path path;
  /// "external-resource.<resource>.param.discovery-script.args in <file>" (or "-D …").
  std::string where;
};

/// The coordination files the GPU resources of `loaded` in coordination mode use (their
/// discovery-script.args' --coordination-file, the default for one that names none), in the
/// order of the resources. A resource whose arguments cannot be read, one a TaskManager skips (a
/// bad amount) and one not in coordination mode are left out.
std::vector<NamedCoordinationFile> coordinationFilesOf(const FlinkConfigurationOptions& options,
                                                       const LoadedConfiguration& loaded);

/// The coordination files the host's Flink configuration names: the one the options ask for,
/// else $FLINK_CONF_DIR's, else $FLINK_HOME/conf's (which flink-gpu may have set itself). Best
/// effort: none when there is no configuration or it cannot be read. For `check`, which warns
/// when the file it reads was never written while one of these was.
std::vector<NamedCoordinationFile> coordinationFilesOfTheHost(
    const FlinkConfigurationOptions& options);

}  // namespace flink::cli
