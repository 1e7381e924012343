// flink-gpu: the command-line front of the GPU driver. Each subcommand lives in commands/.
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "Console.h"
#include "ExitCode.h"
#include "commands/DiscoverCommand.h"
#include "commands/ExecCommand.h"
#include "commands/ReleaseCommand.h"
#include "commands/StatusCommand.h"

int main(int argc, char** argv) {
  using namespace flink::cli;

  CLI::App app(
      "flink-gpu: which GPUs a worker on this host gets, as Flink's GPU driver finds them, and the "
      "host's GPU coordination file (status, release, exec)",
      "flink-gpu");
  app.set_version_flag("--version", std::string("flink-gpu ") + FLINK_GPU_VERSION);
  app.require_subcommand(1);
  // Let -v/-q come after the subcommand too (`flink-gpu discover -q`).
  app.fallthrough();
  int verboseCount = 0;
  bool quiet = false;
  app.add_flag("-v,--verbose", verboseCount, "Show the library's log (info; twice for debug)");
  app.add_flag("-q,--quiet", quiet, "Print only the result and one line per error");

  DiscoverOptions discoverOptions;
  CLI::App* discover = addDiscoverCommand(app, discoverOptions);
  StatusOptions statusOptions;
  CLI::App* status = addStatusCommand(app, statusOptions);
  ReleaseOptions releaseOptions;
  CLI::App* release = addReleaseCommand(app, releaseOptions);
  ExecOptions execOptions;
  CLI::App* exec = addExecCommand(app, execOptions);

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "flink-gpu: error: " << e.what() << "\n"
              << "Run 'flink-gpu --help' for usage.\n";
    return kUsageError;
  }

  setVerbosity(quiet               ? Verbosity::kQuiet
               : verboseCount >= 2 ? Verbosity::kDebug
               : verboseCount == 1 ? Verbosity::kVerbose
                                   : Verbosity::kNormal);
  try {
    if (discover->parsed()) return runDiscover(discoverOptions);
    if (status->parsed()) return runStatus(statusOptions);
    if (release->parsed()) return runRelease(releaseOptions);
    if (exec->parsed()) return runExec(execOptions);
  } catch (const std::exception& e) {
    // Anything the commands do not map themselves (a vanished working directory, out of
    // memory): still one clear line, never an abort.
    printError(std::string("internal error: ") + e.what());
    return kDiscoveryFailed;
  }
  return kUsageError;
}
