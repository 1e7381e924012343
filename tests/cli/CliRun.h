// Running the real flink-gpu binary from a test, and reading what it printed. Shared by the CLI
// test files.
#pragma once

#include <chrono>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace flink::testing {

/// The flink-gpu binary of this build.
inline constexpr const char* kCli = FLINK_GPU_CLI;

/// What one run of flink-gpu showed.
struct CliRun {
  int exitCode = -1;
  std::string out;
  std::string err;
  std::chrono::milliseconds elapsed{0};
};

std::ostream& operator<<(std::ostream& stream, const CliRun& run);

/// Runs `flink-gpu <args>` (the binary of this build) to completion, 30 s at most. With
/// `environment` ("NAME=value" entries) it runs through /usr/bin/env, because process::run hands
/// the child this process's own environment. A run that does not exit normally is a test failure.
CliRun runCli(const std::vector<std::string>& args,
              const std::vector<std::string>& environment = {});

/// The lines of `text`, without their '\n' (a final newline ends the last line, not a new one).
std::vector<std::string> linesOf(std::string_view text);

std::string firstLine(std::string_view text);

bool hasLineStartingWith(std::string_view text, std::string_view prefix);

}  // namespace flink::testing
