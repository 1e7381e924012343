// --format of the commands that print a result: parsed once, by the command line
// (CommandLine.cpp), into this value; each command only switches on it.
#pragma once

namespace flink::cli {

enum class OutputFormat {
  kText,        ///< "text": for people (the default)
  kJson,        ///< "json"
  kPrometheus,  ///< "prometheus": status only (node_exporter's textfile collector)
};

}  // namespace flink::cli
