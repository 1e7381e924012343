// How flink-gpu prints external-resource infos: one text line each, or JSON objects of their
// properties (every key getKeys() lists, in its order, values as text).
#pragma once

#include <nlohmann/json.hpp>

#include "flink/externalresource/ExternalResourceInfoSet.h"

namespace flink::cli {

/// [{"index": "0", "uuid": "GPU-…", …}, …]
nlohmann::ordered_json infosToJson(const ExternalResourceInfoSet& infos);

}  // namespace flink::cli
