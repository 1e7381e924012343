#include "CliRun.h"

#include <gtest/gtest.h>

#include "process/Subprocess.h"

namespace flink::testing {

std::ostream& operator<<(std::ostream& stream, const CliRun& run) {
  return stream << "\nexit code: " << run.exitCode << "\n--- stdout ---\n"
                << run.out << "--- stderr ---\n"
                << run.err;
}

CliRun runCli(const std::vector<std::string>& args, const std::vector<std::string>& environment) {
  std::vector<std::string> argv;
  if (!environment.empty()) {
    argv.push_back("/usr/bin/env");
    argv.insert(argv.end(), environment.begin(), environment.end());
  }
  argv.push_back(kCli);
  argv.insert(argv.end(), args.begin(), args.end());

  process::RunOptions options;
  // Far above anything a test expects, so that a hang shows as a failure rather than a ctest
  // time-out.
  options.timeout = std::chrono::seconds(30);
  const auto start = std::chrono::steady_clock::now();
  const process::ProcessResult result = process::run(argv, options);
  CliRun run;
  run.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  run.out = result.stdoutOutput.data;
  run.err = result.stderrOutput.data;
  if (result.outcome.kind() == process::ProcessOutcome::Kind::kExited) {
    run.exitCode = result.outcome.value();
  } else {
    ADD_FAILURE() << "flink-gpu " << result.outcome.toString() << run;
  }
  return run;
}

std::vector<std::string> linesOf(std::string_view text) {
  std::vector<std::string> lines;
  while (!text.empty()) {
    const std::size_t newline = text.find('\n');
    lines.emplace_back(text.substr(0, newline));
    text = newline == std::string_view::npos ? std::string_view() : text.substr(newline + 1);
  }
  return lines;
}

std::string firstLine(std::string_view text) {
  const auto lines = linesOf(text);
  return lines.empty() ? std::string() : lines.front();
}

bool hasLineStartingWith(std::string_view text, std::string_view prefix) {
  for (const std::string& line : linesOf(text)) {
    if (line.starts_with(prefix)) return true;
  }
  return false;
}

}  // namespace flink::testing
