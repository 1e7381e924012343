#include "flink/externalresource/gpu/ScriptOutput.h"

#include <unordered_set>

#include <nlohmann/json.hpp>

#include "flink/util/Exceptions.h"
#include "host/enumeration/DeviceIdentifiers.h"
#include "util/Strings.h"

namespace flink::externalresource::gpu {
namespace {

using device::canonicalDeviceIdentifier;
using device::isDeviceIdentifier;

constexpr const char* kNotADevice =
    "is not a device index (a number of at most 9 digits) nor a GPU-/MIG- UUID";

/// Collects identifiers in order, each once, noting the ones seen again.
class IdentifierCollector {
 public:
  explicit IdentifierCollector(ScriptOutput& output) : output_(output) {}

  /// `part` is a device identifier.
  void add(std::string_view part) {
    std::string identifier = canonicalDeviceIdentifier(part);
    if (seen_.insert(identifier).second) {
      output_.identifiers.push_back(std::move(identifier));
    } else if (std::find(output_.duplicates.begin(), output_.duplicates.end(), identifier) ==
               output_.duplicates.end()) {
      output_.duplicates.push_back(std::move(identifier));
    }
  }

 private:
  ScriptOutput& output_;
  std::unordered_set<std::string> seen_;
};

/// The start of every JSON form message, after "<script> printed ".
constexpr const char* kSparkForm = "a JSON object (Spark's resource discovery form)";

/// A JSON value as it appears in a message: compact, escaped, bounded.
std::string shown(const nlohmann::json& value) {
  return strings::quoteForMessage(value.dump(), 120);
}

/// Spark's form: `text` is all of stdout without the byte order mark, trimmed (Java's whitespace
/// around the object, not only JSON's, is allowed), and starts with '{'.
ScriptOutput parseSparkJson(std::string_view text) {
  nlohmann::json object;
  try {
    // Strict: anything after the object is an error ("expected end of input").
    object = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    // what() is "[json.exception.parse_error.101] parse error at line 1, column 9: ...". Not
    // only syntax: a number too large for a double ("1E1666") is out_of_range.406.
    std::string_view reason = e.what();
    if (reason.starts_with("[json.exception.")) {
      reason = strings::trim(reason.substr(reason.find(']') + 1));
    }
    const auto* syntax = dynamic_cast<const nlohmann::json::parse_error*>(&e);
    throw FlinkException(
        "output starting with '{', which is not valid JSON for Spark's resource "
        "discovery form (e.g. {\"name\": \"gpu\", \"addresses\": [\"0\"]}): " +
        strings::quoteForMessage(reason, 300) +
        (syntax != nullptr ? " (byte " + std::to_string(syntax->byte) + " of the object)" : ""));
  }

  ScriptOutput output;
  if (const auto name = object.find("name"); name != object.end()) {
    if (!name->is_string()) {
      throw FlinkException(std::string(kSparkForm) +
                           " whose \"name\" is not a string: " + shown(*name));
    }
    output.resourceName = name->get<std::string>();
  }
  const auto addresses = object.find("addresses");
  if (addresses == object.end()) {
    throw FlinkException(std::string(kSparkForm) + " without \"addresses\": " + shown(object));
  }
  if (!addresses->is_array()) {
    throw FlinkException(std::string(kSparkForm) +
                         " whose \"addresses\" is not an array of strings: " + shown(*addresses));
  }
  IdentifierCollector collector(output);
  for (const nlohmann::json& address : *addresses) {
    if (!address.is_string()) {
      throw FlinkException(std::string(kSparkForm) + " whose \"addresses\" holds " +
                           shown(address) +
                           ", which is not a string (Spark's addresses are strings, e.g. \"0\")");
    }
    const std::string_view part = strings::trim(address.get_ref<const std::string&>());
    if (!isDeviceIdentifier(part)) {
      throw FlinkException(std::string(kSparkForm) + ", which is not a list of GPUs: address " +
                           shown(address) + " " + kNotADevice);
    }
    collector.add(part);
  }
  return output;
}

}  // namespace

ScriptOutput parseScriptOutput(std::string_view stdoutText) {
  // A script saved by a Windows editor may start with a UTF-8 byte order mark.
  if (stdoutText.starts_with("\xEF\xBB\xBF")) stdoutText.remove_prefix(3);
  const std::string_view content = strings::trim(stdoutText);
  if (content.starts_with('{')) return parseSparkJson(content);

  const std::size_t newline = stdoutText.find('\n');
  const std::string_view firstLine = stdoutText.substr(0, newline);

  ScriptOutput output;
  if (newline != std::string_view::npos) {
    for (std::string_view line : strings::split(stdoutText.substr(newline + 1), '\n')) {
      if (!strings::isBlank(line)) ++output.ignoredLines;
    }
  }

  IdentifierCollector collector(output);
  for (std::string_view rawPart : strings::split(firstLine, ',')) {
    const std::string_view part = strings::trim(rawPart);
    if (part.empty()) continue;
    if (!isDeviceIdentifier(part)) {
      throw FlinkException("\"" + strings::quoteForMessage(strings::trim(firstLine)) +
                           "\", which is not a list of GPUs: \"" +
                           strings::quoteForMessage(part, 80) + "\" " + kNotADevice);
    }
    collector.add(part);
  }
  return output;
}

}  // namespace flink::externalresource::gpu
