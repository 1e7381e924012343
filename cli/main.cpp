// flink-gpu: the command-line front of the GPU driver. Each subcommand lives in commands/.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include "Console.h"
#include "ExitCode.h"
#include "commands/ConfigCommand.h"
#include "commands/DiscoverCommand.h"
#include "commands/ExecCommand.h"
#include "commands/HealthCommands.h"
#include "commands/ReleaseCommand.h"
#include "commands/StatusCommand.h"
#include "commands/TopologyCommand.h"
#include "flink/externalresource/gpu/GPUDriver.h"

namespace {

/// SIGINT, SIGTERM, SIGHUP or SIGQUIT while a discovery script runs: end the script's process
/// group too (it is not in ours, so a terminal's Ctrl-C would not reach it), then die of the
/// same signal as flink-gpu would have.
void endScriptsAndDie(int signal) {
  flink::externalresource::gpu::GPUDriver::killRunningDiscoveries();
  ::signal(signal, SIG_DFL);
  ::raise(signal);
}

void forwardFatalSignals() {
  struct sigaction action {};
  action.sa_handler = endScriptsAndDie;
  ::sigemptyset(&action.sa_mask);
  for (int signal : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) {
    struct sigaction current {};
    // A signal ignored by whoever started us (nohup, a background job) stays ignored.
    if (::sigaction(signal, nullptr, &current) == 0 && current.sa_handler == SIG_IGN) continue;
    ::sigaction(signal, &action, nullptr);
  }
}

/// The subcommand argv asks for: its first argument that is not a flag (the global ones, -v and
/// -q, take no value). Only that command's options are then set up, since building all five
/// commands' options is start-up work (allocations, first touches of memory) that every run
/// would pay. Empty when there is none or it is not one of ours (--help, --version, a typo):
/// then all are set up, for the help text and CLI11's error.
std::string_view requestedCommand(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg.empty() || arg.front() == '-') continue;
    for (std::string_view known : {"discover", "status", "release", "exec", "config", "topology",
                                   "drain", "undrain", "check", "watch"}) {
      if (arg == known) return arg;
    }
    break;
  }
  return {};
}

/// What was printed on stdout must have arrived: a full disk and a reader that went away (a
/// closed pipe, `| head -c0`) both fail the command with one line, exit 1.
int checkedStdout(int code) {
  using namespace flink::cli;
  errno = 0;
  if (!std::cout.flush()) {
    printError(std::string("cannot write the result to standard output") +
               (errno == 0 ? "" : std::string(": ") + std::strerror(errno)));
    return code == kSuccess ? kDiscoveryFailed : code;
  }
  return code;
}

}  // namespace

/// A descriptor 0, 1 or 2 that is closed would be the next file opened: a lease, the
/// coordination file, which the command of `exec` would then get as its stdin, stdout or stderr
/// and close like any (a daemon's `>/dev/null 2>&1` lets a lease go). Each is taken by /dev/null,
/// opened read-only for stdout so that a write there still fails as it did (EBADF), is reported,
/// and exits 1.
void occupyClosedStandardDescriptors() {
  for (const int fd : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO}) {
    if (::fcntl(fd, F_GETFD) >= 0 || errno != EBADF) continue;
    const int opened = ::open("/dev/null", fd == STDERR_FILENO ? O_WRONLY : O_RDONLY);
    if (opened >= 0 && opened != fd) ::close(opened);  // the lower ones are taken: not ours
  }
}

int main(int argc, char** argv) {
  using namespace flink::cli;
  occupyClosedStandardDescriptors();
  forwardFatalSignals();  // exec's command gets default dispositions back from execvp
  // A closed pipe is a write error (EPIPE) that we report, not a silent death. `exec` puts the
  // default back for its command, since an ignored signal stays ignored across execvp.
  ::signal(SIGPIPE, SIG_IGN);

  CLI::App app(
      "flink-gpu: which GPUs a worker on this host gets, as Flink's GPU driver finds them; the "
      "external resources of a Flink configuration (discover --config, config); and the host's "
      "GPU coordination file (status, release, exec); how the GPUs are connected (topology); GPU "
      "health for operators (drain, undrain, check, watch)",
      "flink-gpu");
  app.set_version_flag("--version", std::string("flink-gpu ") + FLINK_GPU_VERSION);
  app.require_subcommand(1);
  // Let -v/-q come after the subcommand too (`flink-gpu discover -q`).
  app.fallthrough();
  int verboseCount = 0;
  bool quiet = false;
  app.add_flag("-v,--verbose", verboseCount, "Show the library's log (info; twice for debug)");
  app.add_flag("-q,--quiet", quiet, "Print only the result and one line per error");

  const std::string_view requested = requestedCommand(argc, argv);
  const auto wanted = [&](std::string_view name) { return requested.empty() || requested == name; };
  // A command that is not set up stays null and is never run.
  DiscoverOptions discoverOptions;
  CLI::App* discover = wanted("discover") ? addDiscoverCommand(app, discoverOptions) : nullptr;
  StatusOptions statusOptions;
  CLI::App* status = wanted("status") ? addStatusCommand(app, statusOptions) : nullptr;
  ReleaseOptions releaseOptions;
  CLI::App* release = wanted("release") ? addReleaseCommand(app, releaseOptions) : nullptr;
  ExecOptions execOptions;
  CLI::App* exec = wanted("exec") ? addExecCommand(app, execOptions) : nullptr;
  ConfigOptions configOptions;
  CLI::App* config = wanted("config") ? addConfigCommand(app, configOptions) : nullptr;
  TopologyOptions topologyOptions;
  CLI::App* topology = wanted("topology") ? addTopologyCommand(app, topologyOptions) : nullptr;
  DrainOptions drainOptions;
  CLI::App* drain = wanted("drain") ? addDrainCommand(app, drainOptions) : nullptr;
  DrainOptions undrainOptions;
  CLI::App* undrain = wanted("undrain") ? addUndrainCommand(app, undrainOptions) : nullptr;
  CheckOptions checkOptions;
  CLI::App* check = wanted("check") ? addCheckCommand(app, checkOptions) : nullptr;
  WatchCommandOptions watchOptions;
  CLI::App* watch = wanted("watch") ? addWatchCommand(app, watchOptions) : nullptr;
  const auto parsed = [](const CLI::App* command) {
    return command != nullptr && command->parsed();
  };

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return checkedStdout(app.exit(e));
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
    int code = kUsageError;
    if (parsed(discover)) code = runDiscover(discoverOptions);
    if (parsed(status)) code = runStatus(statusOptions);
    if (parsed(release)) code = runRelease(releaseOptions);
    if (parsed(exec)) code = runExec(execOptions);
    if (parsed(config)) code = runConfig(configOptions);
    if (parsed(topology)) code = runTopology(topologyOptions);
    if (parsed(drain)) code = runDrain(drainOptions);
    if (parsed(undrain)) code = runUndrain(undrainOptions);
    if (parsed(check)) code = runCheck(checkOptions);
    if (parsed(watch)) code = runWatch(watchOptions);
    return checkedStdout(code);
  } catch (const std::exception& e) {
    // Anything the commands do not map themselves (a vanished working directory, out of
    // memory): still one clear line, never an abort.
    printError(std::string("internal error: ") + e.what());
    return kDiscoveryFailed;
  }
}
