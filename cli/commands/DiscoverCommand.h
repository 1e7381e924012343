// `flink-gpu discover`: what a worker does at start-up — make a GPUDriver through
// GPUDriverFactory and print the GPUs it gets.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

namespace flink::cli {

struct DiscoverOptions {
  /// As typed: read by runDiscover, so that overflow and non-decimal forms are errors.
  std::string amount = "1";
  std::optional<std::string> discoveryScript;
  std::optional<std::string> discoveryArgs;
  std::optional<std::string> timeout;
  std::string format = "text";
};

/// Adds the `discover` subcommand to `app`; its parsed values land in `options`.
CLI::App* addDiscoverCommand(CLI::App& app, DiscoverOptions& options);

/// Runs the discovery; prints the GPUs on stdout and problems on stderr. @returns an ExitCode.
int runDiscover(const DiscoverOptions& options);

}  // namespace flink::cli
