// Finding a program by name as execvp would, for the programs this project runs by absolute path
// (process::run never searches): nvidia-smi, amd-smi, rocm-smi, xpu-smi.
#pragma once

#include <filesystem>
#include <optional>
#include <string_view>
#include <vector>

namespace flink::process {

/// Where a program is, and every folder looked in to find out (for a "not found" message).
struct ProgramLocation {
  std::optional<std::filesystem::path> path;  ///< absolute; nullopt when not found
  std::vector<std::filesystem::path> searched;
};

/// Looks for an executable regular file (after symlinks) named `name` in each folder of
/// `searchPath` (a PATH value; an empty entry is the working directory, as for execvp), then in
/// `folders`; a folder is looked in once even when listed twice ("/usr/bin/" and "/usr/bin" are
/// one). Never throws.
ProgramLocation findProgram(std::string_view name, std::string_view searchPath,
                            const std::vector<std::filesystem::path>& folders = {});

}  // namespace flink::process
