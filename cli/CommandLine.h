// flink-gpu's command line: which subcommand to run, with its options and the global -v/-q. The
// parsing is CLI11's and lives in CommandLine.cpp alone: CLI/CLI.hpp is slow to compile, so no
// other translation unit includes it, and the commands see only their plain option structs.
#pragma once

#include <optional>

#include "commands/CompletionCommand.h"
#include "commands/ConfigCommand.h"
#include "commands/DiscoverCommand.h"
#include "commands/ExecCommand.h"
#include "commands/HealthCommands.h"
#include "commands/ReleaseCommand.h"
#include "commands/ShareCommands.h"
#include "commands/StatusCommand.h"
#include "commands/TopologyCommand.h"
#include "commands/WhichCommand.h"

namespace flink::cli {

enum class Command {
  kDiscover,
  kStatus,
  kRelease,
  kExec,
  kConfig,
  kTopology,
  kDrain,
  kUndrain,
  kCheck,
  kWatch,
  kShare,
  kUnshare,
  kWhich,
  kCompletion,
};

/// What argv asks for. Only the options of `command` are read from it; the others keep their
/// defaults.
struct CommandLine {
  Command command = Command::kDiscover;
  /// -v given once (info) or more (debug).
  int verboseCount = 0;
  /// -q: only the result and one line per error.
  bool quiet = false;
  DiscoverOptions discover;
  StatusOptions status;
  ReleaseOptions release;
  ExecOptions exec;
  ConfigOptions config;
  TopologyOptions topology;
  DrainOptions drain;
  DrainOptions undrain;
  CheckOptions check;
  WatchCommandOptions watch;
  ShareOptions share;
  UnshareOptions unshare;
  WhichOptions which;
  CompletionOptions completion;
};

/// Parses argv into `line`. Only the subcommand asked for has its options set up (start-up work
/// that every run would pay otherwise); all are for --help, and for an unknown command.
/// @returns nullopt when `line.command` is to run. Otherwise the exit code, with what was to be
///          printed printed: --help and --version on stdout (kSuccess); a usage error on stderr,
///          its first line standing alone (an unknown command or option names the nearest known
///          one), its second pointing to the help of the subcommand (kUsageError).
std::optional<int> parseCommandLine(int argc, char** argv, CommandLine& line);

/// The coordination-file options of `line.command`; nullptr for a command without a coordination
/// file (discover's is its script's, config and topology have none).
CoordinationFileOptions* coordinationFileOptionsOf(CommandLine& line);

}  // namespace flink::cli
