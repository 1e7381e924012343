// Which coordination file a program uses: the one rule, shared by every flink-gpu command, the
// default discovery program and the in-process discovery, so that they never disagree.
//
// In order, the first that names one:
//   1. the command line's --coordination-file;
//   2. $FLINK_GPU_COORDINATION_FILE;
//   3. a Flink configuration's GPU resources (`discovery-script.args`), for the flink-gpu
//      commands that read one (the discovery program gets those arguments as its own, so for it
//      they are step 1);
//   4. Flink's default, /var/tmp/flink-gpu-coordination.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>

namespace flink::coordination {

/// Flink's default coordination file.
inline constexpr const char* kDefaultCoordinationFile = "/var/tmp/flink-gpu-coordination";

/// The variable that names the coordination file when no --coordination-file does.
inline constexpr const char* kCoordinationFileVariable = "FLINK_GPU_COORDINATION_FILE";

/// Where the coordination file in use was named.
enum class CoordinationFileSource { kOption, kVariable, kConfiguration, kDefault };

/// A coordination file named in a Flink configuration, and where (for messages: "<file>'s
/// external-resource.gpu.param.discovery-script.args").
struct ConfiguredCoordinationFile {
  std::filesystem::path path;
  std::string where;
};

struct CoordinationFileChoice {
  std::filesystem::path path;
  CoordinationFileSource source = CoordinationFileSource::kDefault;
  /// For kConfiguration: where the configuration named it.
  std::string where;

  /// "the coordination file is <path>, from <source>", for -v.
  std::string describe() const;
};

/// The rule above. `fromConfiguration` is asked only when neither the option nor the variable
/// names a file; it returns nullopt when the configuration names none (or there is none).
/// @throws std::invalid_argument when --coordination-file or the variable is set but empty
///         (never the host's shared file when another was meant), or the variable is relative
///         (each process would read it from its own working directory), naming which and the fix.
CoordinationFileChoice chooseCoordinationFile(
    const std::optional<std::string>& option,
    const std::function<std::optional<ConfiguredCoordinationFile>()>& fromConfiguration = {});

}  // namespace flink::coordination
