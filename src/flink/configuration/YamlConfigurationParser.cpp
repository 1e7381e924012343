// The standard-YAML config.yaml reader (Flink 1.19+), on yaml-cpp. The document is flattened
// into Flink's dotted keys; every value becomes the text Flink makes of it (plain scalars resolved
// as YAML 1.1 resolves them, lists in flow form; see YamlValues.h). Anything Flink could not hold
// as one option value is an error naming the file, the line and the key, rather than a guess.
//
// Two things yaml-cpp 0.7 does not do are done here:
// - it accepts a quoted scalar left open at the end of the input (the rest of the file becomes
//   its text), so every quoted scalar that is read is checked against the raw text for its
//   closing quote;
// - it keeps an alias as a second reference to the anchored node, so flattening a document of
//   nested aliases can be exponential (an "alias bomb"); the flattening is bounded as it goes
//   (keys, map entries and list elements visited, bytes, nesting depth). It also reads merge
//   keys (`<<: *base`) as an ordinary key; they are merged here.
#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "flink/configuration/ConfigurationFileParsers.h"
#include "flink/configuration/YamlValues.h"
#include "util/Strings.h"

namespace flink {
namespace {

/// Limits on the flattened configuration. A use of an alias counts in full each time, so these
/// bound the work of flattening whatever the document.
constexpr int kMaxMapDepth = 64;           // maps nested in maps (the key's '.' parts)
constexpr int kMaxMergeDepth = 64;         // merge keys whose maps have merge keys
constexpr std::size_t kMaxKeys = 100'000;  // flattened keys
constexpr std::size_t kMaxVisits = yamlvalues::kMaxExpandedNodes;  // entries, elements visited
constexpr std::size_t kMaxBytes = yamlvalues::kMaxExpandedBytes;   // key and value text

/// The offset of the quote that closes the quoted scalar opening at `open` (a ' or a "), or
/// npos when the text ends first. YAML's rules: in '...' a quote is escaped by doubling it, in
/// "..." a backslash escapes the character after it.
std::size_t closingQuote(std::string_view text, std::size_t open) {
  const char quote = text[open];
  for (std::size_t at = open + 1; at < text.size(); ++at) {
    if (quote == '"' && text[at] == '\\') {
      ++at;
    } else if (text[at] == quote) {
      if (quote == '\'' && at + 1 < text.size() && text[at + 1] == '\'') {
        ++at;
      } else {
        return at;
      }
    }
  }
  return std::string_view::npos;
}

class Flattener {
 public:
  Flattener(std::string_view text, const std::string& fileName) : text_(text), fileName_(fileName) {
    // yaml-cpp's marks count bytes of the UTF-8 text after a byte order mark. A UTF-16 or
    // UTF-32 file is converted first, so its marks are not offsets into `text`: no quote check.
    if (text_.substr(0, strings::kUtf8ByteOrderMark.size()) == strings::kUtf8ByteOrderMark) {
      markOffset_ = strings::kUtf8ByteOrderMark.size();
    }
    const std::string_view intro = text_.substr(0, 4);
    const bool utf16Or32 = intro.find('\0') != std::string_view::npos ||
                           intro.substr(0, 2) == "\xFE\xFF" || intro.substr(0, 2) == "\xFF\xFE";
    checkQuotes_ = !utf16Or32;
  }

  void flattenRoot(const YAML::Node& root) {
    if (root.IsScalar()) requireClosed(root, [] { return std::string("a quoted value"); });
    if (!root.IsMap()) fail(root, "the document must be a map of configuration keys");
    flattenMap(root, "", 1, 0);
  }

  Configuration take() { return std::move(configuration_); }

  [[noreturn]] void fail(const YAML::Node& node, const std::string& why) const {
    failOnLine(line(node), why);
  }

 private:
  [[noreturn]] void failOnLine(int line, const std::string& why) const {
    throw IllegalConfigurationException(fileName_ + ":" + std::to_string(line) + ": " + why + ".");
  }

  static int line(const YAML::Node& node) {
    const YAML::Mark mark = node.Mark();
    return mark.is_null() ? 0 : mark.line + 1;
  }

  static std::string quoted(std::string_view text) { return strings::quoteForMessage(text, 100); }

  /// " under '<the map's key>'", or nothing for the root map.
  static std::string under(const std::string& prefix) {
    // The prefix ends in the '.' that joins it to this key.
    return prefix.empty() ? "" : " under '" + quoted(prefix.substr(0, prefix.size() - 1)) + "'";
  }

  static bool isMergeKey(const YAML::Node& keyNode) {
    // A plain `<<` (not '<<' or "<<", whose tag is "!"), or one tagged !!merge.
    return keyNode.IsScalar() && keyNode.Scalar() == "<<" &&
           (keyNode.Tag() == "?" || keyNode.Tag() == "tag:yaml.org,2002:merge");
  }

  /// Flattens the entries of `map` under `prefix` (empty, or ending in '.'); `mapDepth` counts
  /// the maps down to this one (the root is 1).
  void flattenMap(const YAML::Node& map, const std::string& prefix, int mapDepth, int mergeDepth) {
    std::set<std::string, std::less<>> explicitKeys;
    std::vector<std::pair<YAML::Node, YAML::Node>> merges;
    for (const auto& entry : map) {
      const YAML::Node& keyNode = entry.first;
      if (prefix.empty()) rootLine_ = line(keyNode);
      if (isMergeKey(keyNode)) {
        visit(prefix + "<<");
        merges.emplace_back(keyNode, entry.second);
        continue;
      }
      const std::string& name = keyText(keyNode, prefix);
      explicitKeys.insert(name);
      flattenEntry(keyNode, entry.second, prefix + name, mapDepth);
    }
    // The map's own keys win over merged ones, and an earlier merged map over a later one.
    for (const auto& [mergeKey, value] : merges) {
      if (prefix.empty()) rootLine_ = line(mergeKey);
      merge(mergeKey, value, prefix, explicitKeys, mapDepth, mergeDepth + 1);
    }
  }

  /// Adds the entries of the map (or list of maps) `value` of the merge key `mergeKey` whose keys
  /// are not in `taken` (and adds them there).
  void merge(const YAML::Node& mergeKey, const YAML::Node& value, const std::string& prefix,
             std::set<std::string, std::less<>>& taken, int mapDepth, int mergeDepth) {
    if (mergeDepth > kMaxMergeDepth) {
      fail(mergeKey, "the merge key '<<'" + under(prefix) + " nests merges more than " +
                         std::to_string(kMaxMergeDepth) + " deep");
    }
    const std::string notMaps =
        "the merge key '<<'" + under(prefix) + " must be given a map or a list of maps";
    if (value.IsMap()) {
      mergeMap(value, prefix, taken, mapDepth, mergeDepth);
    } else if (value.IsSequence()) {
      for (const YAML::Node& element : value) {
        visit(prefix + "<<");
        if (!element.IsMap()) fail(element, notMaps);
        mergeMap(element, prefix, taken, mapDepth, mergeDepth);
      }
    } else {
      if (value.IsScalar()) {
        requireClosed(value,
                      [&] { return "the quoted value of the merge key '<<'" + under(prefix); });
      }
      fail(mergeKey, notMaps);
    }
  }

  void mergeMap(const YAML::Node& map, const std::string& prefix,
                std::set<std::string, std::less<>>& taken, int mapDepth, int mergeDepth) {
    std::vector<std::pair<YAML::Node, YAML::Node>> merges;
    for (const auto& entry : map) {
      const YAML::Node& keyNode = entry.first;
      if (isMergeKey(keyNode)) {
        visit(prefix + "<<");
        merges.emplace_back(keyNode, entry.second);
        continue;
      }
      const std::string& name = keyText(keyNode, prefix);
      if (!taken.insert(name).second) {
        visit(prefix + name);
        continue;
      }
      flattenEntry(keyNode, entry.second, prefix + name, mapDepth);
    }
    for (const auto& [mergeKey, value] : merges) {
      merge(mergeKey, value, prefix, taken, mapDepth, mergeDepth + 1);
    }
  }

  void flattenEntry(const YAML::Node& keyNode, const YAML::Node& value, const std::string& key,
                    int mapDepth) {
    visit(key);
    charge(key, key.size());
    switch (value.Type()) {
      case YAML::NodeType::Map:
        if (mapDepth >= kMaxMapDepth) {
          fail(keyNode, "key '" + quoted(key) + "' is nested more than " +
                            std::to_string(kMaxMapDepth) + " maps deep");
        }
        flattenMap(value, key + ".", mapDepth + 1, 0);
        break;
      case YAML::NodeType::Scalar:
        requireClosed(value, [&] { return "the quoted value of key '" + quoted(key) + "'"; });
        add(key, scalarText(value, key), keyNode);
        break;
      case YAML::NodeType::Sequence:
        add(key, listText(key, value), keyNode);
        break;
      case YAML::NodeType::Null:
      case YAML::NodeType::Undefined:
        fail(keyNode, "key '" + quoted(key) + "' has no value (null)");
    }
  }

  const std::string& keyText(const YAML::Node& keyNode, const std::string& prefix) {
    const std::string where = under(prefix);
    if (keyNode.IsNull()) fail(keyNode, "a key" + where + " is null");
    if (!keyNode.IsScalar()) fail(keyNode, "a key" + where + " is not a plain value");
    requireClosed(keyNode, [&] { return "a quoted key" + where; });
    if (keyNode.Scalar().empty()) fail(keyNode, "a key" + where + " is empty");
    return keyNode.Scalar();
  }

  /// A plain scalar (yaml-cpp's tag "?") as YAML 1.1 resolves it (once, however many aliases use
  /// it); nullptr for a quoted or !!str-tagged one, which is its text as written.
  const yamlvalues::PlainScalars::Resolved* plain(const YAML::Node& scalar,
                                                  const std::string& key) {
    if (scalar.Tag() != "?") return nullptr;
    try {
      return &plainScalars_.resolve(scalar.Mark().pos, scalar.Scalar());
    } catch (const yamlvalues::IntegerTooLong& e) {
      fail(scalar, std::string("the value of key '") + quoted(key) + "' is " + e.what());
    }
  }

  /// What Flink makes of a scalar of key `key`.
  const std::string& scalarText(const YAML::Node& scalar, const std::string& key) {
    const yamlvalues::PlainScalars::Resolved* resolved = plain(scalar, key);
    return resolved && resolved->text ? *resolved->text : scalar.Scalar();
  }

  std::string listText(const std::string& key, const YAML::Node& sequence) {
    std::vector<yamlvalues::FlowElement> elements;
    for (const YAML::Node& element : sequence) {
      switch (element.Type()) {
        case YAML::NodeType::Scalar:
          requireClosed(
              element, [&] { return "a quoted element of the list of key '" + quoted(key) + "'"; });
          visit(key);
          charge(key, element.Scalar().size());
          if (const yamlvalues::PlainScalars::Resolved* resolved = plain(element, key)) {
            elements.push_back({resolved->text.value_or(element.Scalar()), resolved->isString});
          } else {
            elements.push_back({element.Scalar(), true});
          }
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
    return yamlvalues::flowSequence(elements);
  }

  void add(const std::string& key, std::string value, const YAML::Node& keyNode) {
    const auto [earlier, inserted] = lineOfKey_.emplace(key, line(keyNode));
    if (!inserted) {
      fail(keyNode, "key '" + quoted(key) + "' is set twice (first on line " +
                        std::to_string(earlier->second) + ")");
    }
    if (lineOfKey_.size() > kMaxKeys) {
      tooLarge(key, "more than " + std::to_string(kMaxKeys) + " keys");
    }
    charge(key, value.size());
    configuration_.setString(key, std::move(value));
  }

  /// Counts one map entry or list element visited against the limit.
  void visit(const std::string& key) {
    if (++visits_ > kMaxVisits) {
      tooLarge(key, "more than " + std::to_string(kMaxVisits) + " map entries and list elements");
    }
  }

  /// Counts `bytes` of key or value text against the limit.
  void charge(const std::string& key, std::size_t bytes) {
    bytes_ += bytes;
    if (bytes_ > kMaxBytes) {
      tooLarge(key, "more than " + std::to_string(kMaxBytes >> 20) + " MiB of keys and values");
    }
  }

  /// The line is that of the root map's entry being flattened: a node inside an anchored map
  /// has the line of the anchor, wherever the alias is.
  [[noreturn]] void tooLarge(const std::string& key, const std::string& what) const {
    failOnLine(rootLine_, "the configuration is too large once flattened (at key '" + quoted(key) +
                              "'): " + what +
                              "; an alias (*name) counts in full each time it is used");
  }

  /// Throws when `node` is a quoted scalar whose closing quote is missing from the text (yaml-cpp
  /// then reads the rest of the file as its text). `what()` names the scalar.
  template <typename What>
  void requireClosed(const YAML::Node& node, What what) {
    const YAML::Mark mark = node.Mark();
    if (!checkQuotes_ || mark.is_null() || mark.pos < 0) return;
    std::size_t at = markOffset_ + static_cast<std::size_t>(mark.pos);
    int lineIndex = mark.line;
    int column = mark.column;
    // The mark is that of the node's properties when it has any (`&anchor`, `!tag`): skip them,
    // with the spaces, line breaks and comments after them.
    const auto advance = [&] {
      if (text_[at] == '\n') {
        ++lineIndex;
        column = 0;
      } else {
        ++column;
      }
      ++at;
    };
    while (at < text_.size() && (text_[at] == '&' || text_[at] == '!')) {
      while (at < text_.size() &&
             std::string_view(" \t\r\n,[]{}").find(text_[at]) == std::string_view::npos) {
        advance();
      }
      while (at < text_.size()) {
        if (text_[at] == '#') {
          while (at < text_.size() && text_[at] != '\n') advance();
        } else if (text_[at] == ' ' || text_[at] == '\t' || text_[at] == '\r' ||
                   text_[at] == '\n') {
          advance();
        } else {
          break;
        }
      }
    }
    if (at >= text_.size() || (text_[at] != '\'' && text_[at] != '"')) return;
    // Checked once per quoted scalar, however many aliases use it.
    if (!closedQuotes_.insert(at).second) return;
    if (closingQuote(text_, at) != std::string_view::npos) return;
    throw IllegalConfigurationException(fileName_ + ":" + std::to_string(lineIndex + 1) + ":" +
                                        std::to_string(column + 1) + ": " + what() +
                                        " is never closed (a " + text_[at] + " is missing).");
  }

  std::string_view text_;
  const std::string& fileName_;
  std::size_t markOffset_ = 0;
  bool checkQuotes_ = true;
  std::unordered_set<std::size_t> closedQuotes_;
  yamlvalues::PlainScalars plainScalars_;
  int rootLine_ = 0;
  std::size_t visits_ = 0;
  std::size_t bytes_ = 0;
  Configuration configuration_;
  std::map<std::string, int, std::less<>> lineOfKey_;
};

}  // namespace

Configuration parseStandardYamlConfiguration(std::string_view text, const std::string& fileName) {
  const std::string input(text);
  YAML::Node document;
  int documents = 0;
  int secondLine = 0;
  try {
    // Not LoadAll, which loops forever on "[a], b" (see yamlvalues::countDocuments).
    documents = yamlvalues::countDocuments(input, secondLine);
    if (documents == 1) document = YAML::Load(input);
  } catch (const YAML::Exception& e) {
    std::string where = fileName;
    if (!e.mark.is_null()) {
      where += ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1);
    }
    throw IllegalConfigurationException(where + ": " + e.msg);
  }

  if (documents > 1) {
    throw IllegalConfigurationException(
        fileName + ":" + std::to_string(secondLine) +
        ": a second YAML document; a configuration file holds one.");
  }
  if (documents == 0 || document.IsNull()) return {};
  Flattener flattener(text, fileName);
  flattener.flattenRoot(document);
  return flattener.take();
}

}  // namespace flink
