// `flink-gpu completion bash|zsh`: prints a shell completion script for flink-gpu. The scripts are
// made from a description of the command line (CompletionModel) that CommandLine.cpp takes from
// the very CLI11 set-up the parser uses, so that they list every subcommand, option and choice
// the parser accepts, and nothing else. This file knows the shells, not CLI11.
#pragma once

#include <string>
#include <vector>

namespace flink::cli {

/// What a shell may offer for the value of an option or a positional argument.
enum class ValueKind {
  kNone,         ///< a flag: no value
  kChoice,       ///< one of `choices`
  kFile,         ///< a path (PATH)
  kDirectory,    ///< a folder (DIR)
  kCommandLine,  ///< a program and its arguments (exec's command)
  kOther,        ///< a value no shell can guess (a number, a list, text)
};

struct CompletionOption {
  /// "-n", "--amount"; empty for a positional argument.
  std::vector<std::string> names;
  ValueKind value = ValueKind::kNone;
  /// The value may be left out (`--config [DIR]`).
  bool valueOptional = false;
  std::vector<std::string> choices;
  /// What help shows for the value ("UINT", "PATH"); empty for a flag.
  std::string valueName;
  std::string description;
};

struct CompletionSubcommand {
  std::string name;
  std::string description;
  std::vector<CompletionOption> options;
  /// In order; a kCommandLine one takes the rest of the words.
  std::vector<CompletionOption> positionals;
};

/// flink-gpu's command line: the options before a subcommand (which also follow it), and the
/// subcommands in the order --help lists them.
struct CompletionModel {
  std::vector<CompletionOption> globalOptions;
  std::vector<CompletionSubcommand> subcommands;
};

enum class CompletionShell { kBash, kZsh };

struct CompletionOptions {
  CompletionShell shell = CompletionShell::kBash;
  /// Filled by parseCommandLine from its CLI11 set-up.
  CompletionModel model;
};

/// A bash script defining _flink_gpu and registering it (`complete -F _flink_gpu flink-gpu`), for
/// /usr/share/bash-completion/completions/flink-gpu or to be sourced. It completes the
/// subcommands, each one's options and the global ones, the choices of an option, files and
/// folders where a value is a path, and exec's command as a command line.
std::string bashCompletion(const CompletionModel& model);

/// A zsh completion function (#compdef flink-gpu), for a folder of $fpath as _flink-gpu.
std::string zshCompletion(const CompletionModel& model);

/// Prints the script for `options.shell` on stdout; returns kSuccess.
int runCompletion(const CompletionOptions& options);

}  // namespace flink::cli
