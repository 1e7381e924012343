// The standard-YAML config.yaml reader (Flink 1.19+), on yaml-cpp. The document is flattened
// into Flink's dotted keys; every value is kept as the text it was written with, lists as
// Flink's list text. Anything Flink could not hold as one option value is an error naming the
// file, the line and the key, rather than a guess.
#include <yaml-cpp/yaml.h>

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "configuration/ConfigurationFileParsers.h"
#include "util/Strings.h"

namespace flink {
namespace {

class Flattener {
 public:
  explicit Flattener(const std::string& fileName) : fileName_(fileName) {}

  void flattenMap(const YAML::Node& map, const std::string& prefix) {
    for (const auto& entry : map) {
      const YAML::Node& keyNode = entry.first;
      const YAML::Node& value = entry.second;
      const std::string key = prefix + keyText(keyNode, prefix);
      switch (value.Type()) {
        case YAML::NodeType::Map:
          flattenMap(value, key + ".");
          break;
        case YAML::NodeType::Scalar:
          add(key, value.Scalar(), keyNode);
          break;
        case YAML::NodeType::Sequence:
          add(key, listText(key, value), keyNode);
          break;
        case YAML::NodeType::Null:
        case YAML::NodeType::Undefined:
          fail(keyNode, "key '" + quoted(key) + "' has no value (null)");
      }
    }
  }

  Configuration take() { return std::move(configuration_); }

  [[noreturn]] void fail(const YAML::Node& node, const std::string& why) const {
    throw IllegalConfigurationException(fileName_ + ":" + std::to_string(line(node)) + ": " + why +
                                        ".");
  }

 private:
  static int line(const YAML::Node& node) {
    const YAML::Mark mark = node.Mark();
    return mark.is_null() ? 0 : mark.line + 1;
  }

  static std::string quoted(std::string_view text) { return strings::quoteForMessage(text, 100); }

  std::string keyText(const YAML::Node& keyNode, const std::string& prefix) const {
    // The prefix ends in the '.' that joins it to this key.
    const std::string where =
        prefix.empty() ? "" : " under '" + quoted(prefix.substr(0, prefix.size() - 1)) + "'";
    if (keyNode.IsNull()) fail(keyNode, "a key" + where + " is null");
    if (!keyNode.IsScalar()) fail(keyNode, "a key" + where + " is not a plain value");
    if (keyNode.Scalar().empty()) fail(keyNode, "a key" + where + " is empty");
    return keyNode.Scalar();
  }

  std::string listText(const std::string& key, const YAML::Node& sequence) const {
    std::vector<std::string> elements;
    for (const YAML::Node& element : sequence) {
      switch (element.Type()) {
        case YAML::NodeType::Scalar:
          elements.push_back(element.Scalar());
          break;
        case YAML::NodeType::Map:
          fail(element, "the list of key '" + quoted(key) +
                            "' holds a map; only lists of plain values are supported");
        case YAML::NodeType::Sequence:
          fail(element, "the list of key '" + quoted(key) +
                            "' holds a list; nested lists are not supported");
        case YAML::NodeType::Null:
        case YAML::NodeType::Undefined:
          fail(element, "the list of key '" + quoted(key) + "' holds a null element");
      }
    }
    return detail::formatConfigValue(elements);
  }

  void add(const std::string& key, std::string value, const YAML::Node& keyNode) {
    const auto [earlier, inserted] = lineOfKey_.emplace(key, line(keyNode));
    if (!inserted) {
      fail(keyNode, "key '" + quoted(key) + "' is set twice (first on line " +
                        std::to_string(earlier->second) + ")");
    }
    configuration_.setString(key, std::move(value));
  }

  const std::string& fileName_;
  Configuration configuration_;
  std::map<std::string, int, std::less<>> lineOfKey_;
};

}  // namespace

Configuration parseStandardYamlConfiguration(std::string_view text, const std::string& fileName) {
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(std::string(text));
  } catch (const YAML::Exception& e) {
    std::string where = fileName;
    if (!e.mark.is_null()) {
      where += ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1);
    }
    throw IllegalConfigurationException(where + ": " + e.msg);
  }

  Flattener flattener(fileName);
  if (documents.size() > 1) {
    flattener.fail(documents[1], "a second YAML document; a configuration file holds one");
  }
  if (documents.empty() || documents.front().IsNull()) return {};
  const YAML::Node& root = documents.front();
  if (!root.IsMap()) {
    flattener.fail(root, "the document must be a map of configuration keys");
  }
  flattener.flattenMap(root, "");
  return flattener.take();
}

}  // namespace flink
