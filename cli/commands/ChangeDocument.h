// What `share`, `unshare`, `drain`, `undrain` and `release` changed, for a program: with
// --format json, one document, {"format":1,"coordination_file":…,"file":…,"changed":…, …}, the
// command's own members after those. A template over the JSON type, so that this header does not
// include nlohmann/json.hpp (only the commands that print JSON do).
#pragma once

#include <ostream>
#include <string>
#include <utility>

#include "commands/OutputFormat.h"

namespace flink::cli {

/// Prints the document on `out`: `file` is the file written (the coordination file, or the
/// sibling beside it), `changed` whether anything was written, `members` the command's own (an
/// object). ASCII only, bytes that are not UTF-8 replaced, as every JSON of flink-gpu.
template <typename Json>
void printChangeDocument(std::ostream& out, const std::string& coordinationFile,
                         const std::string& file, bool changed, const Json& members) {
  Json document = Json::object();
  document["format"] = kJsonFormat;
  document["coordination_file"] = coordinationFile;
  document["file"] = file;
  document["changed"] = changed;
  for (const auto& [key, value] : members.items()) document[key] = value;
  out << document.dump(-1, ' ', true, Json::error_handler_t::replace) << '\n';
}

}  // namespace flink::cli
