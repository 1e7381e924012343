#include "ResourceOutput.h"

namespace flink::cli {

nlohmann::ordered_json infosToJson(const ExternalResourceInfoSet& infos) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const auto& info : infos) {
    nlohmann::ordered_json properties = nlohmann::ordered_json::object();
    for (const std::string& key : info->getKeys()) {
      properties[key] = info->getProperty(key).value_or("");
    }
    list.push_back(std::move(properties));
  }
  return list;
}

std::string jsonText(const nlohmann::ordered_json& json, int indent) {
  return json.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace flink::cli
