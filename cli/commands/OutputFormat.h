// --format of the commands that print a result: parsed once, by the command line
// (CommandLine.cpp), into this value; each command only switches on it.
#pragma once

namespace flink::cli {

enum class OutputFormat {
  kText,        ///< "text": for people (the default)
  kJson,        ///< "json"
  kPrometheus,  ///< "prometheus": status only (node_exporter's textfile collector)
  kEnv,         ///< "env": which only (`export` lines a POSIX shell evaluates)
};

/// The "format" member at the top of every JSON document flink-gpu prints. Within a format,
/// members are only ever added, never renamed, removed or given another type; a change that
/// does any of that is a new format (docs/command-line.md, "Output a program can rely on").
inline constexpr int kJsonFormat = 1;

}  // namespace flink::cli
