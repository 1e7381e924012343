// Fuzzes the discovery-script output parser with arbitrary bytes, in both of its forms (Flink's
// line form, Spark's JSON form). Besides "no crash, no sanitizer report", it checks the parser's
// promises on every input it accepts: identifiers are unique, non-empty device identifiers
// without whitespace; in the line form they come from the first line only; in the JSON form they
// are exactly the "addresses", trimmed, canonical and without repeats, and "name" is recorded.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "flink/externalresource/gpu/ScriptOutput.h"
#include "flink/util/Exceptions.h"
#include "host/enumeration/DeviceIdentifiers.h"
#include "util/Strings.h"

namespace {

using flink::device::canonicalDeviceIdentifier;
using flink::device::isDeviceIdentifier;
using flink::externalresource::gpu::ScriptOutput;

void check(bool promise) {
  if (!promise) std::abort();
}

/// The JSON form, read again independently: what the parser accepted must be what it says.
void checkJsonForm(std::string_view content, const ScriptOutput& output) {
  check(output.ignoredLines == 0);
  const nlohmann::json object = nlohmann::json::parse(content, nullptr, /*allow_exceptions=*/false);
  check(object.is_object());
  const auto name = object.find("name");
  check(name == object.end() ? !output.resourceName
                             : output.resourceName == name->get<std::string>());
  const auto addresses = object.find("addresses");
  check(addresses != object.end() && addresses->is_array());
  std::vector<std::string> expected;
  for (const nlohmann::json& address : *addresses) {
    const std::string identifier =
        canonicalDeviceIdentifier(flink::strings::trim(address.get_ref<const std::string&>()));
    if (std::find(expected.begin(), expected.end(), identifier) == expected.end()) {
      expected.push_back(identifier);
    }
  }
  check(output.identifiers == expected);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace flink::externalresource::gpu;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const ScriptOutput output = parseScriptOutput(text);
    std::unordered_set<std::string> seen;
    for (const std::string& id : output.identifiers) {
      check(isDeviceIdentifier(id));
      check(seen.insert(id).second);
    }
    std::string_view content = text;
    if (content.starts_with("\xEF\xBB\xBF")) content.remove_prefix(3);
    content = flink::strings::trim(content);
    if (content.starts_with('{')) {
      checkJsonForm(content, output);
      return 0;
    }
    check(!output.resourceName);
    // Canonical identifiers: indices without leading zeros, UUIDs' hex digits in lower case.
    const std::string firstLine = flink::strings::toLower(text.substr(0, text.find('\n')));
    for (const std::string& id : output.identifiers) {
      // Indices may drop leading zeros, so look for UUIDs only.
      if (!(id[0] >= '0' && id[0] <= '9')) {
        check(firstLine.find(flink::strings::toLower(id)) != std::string::npos);
      }
    }
  } catch (const flink::FlinkException&) {
    // Rejected input is a valid outcome.
  }
  return 0;
}
