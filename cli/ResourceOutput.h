// How flink-gpu prints external-resource infos: one text line each, or JSON objects of their
// properties (every key getKeys() lists, in its order, values as text).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "flink/externalresource/ExternalResourceInfoSet.h"

namespace flink::cli {

/// [{"index": "0", "uuid": "GPU-…", …}, …]
nlohmann::ordered_json infosToJson(const ExternalResourceInfoSet& infos);

/// `json` as text (compact, or indented by `indent` spaces). Bytes that are not UTF-8 (a
/// configuration value, a script's output) become U+FFFD instead of failing the whole output.
std::string jsonText(const nlohmann::ordered_json& json, int indent = -1);

}  // namespace flink::cli
