// Fuzzes the discovery-script output parser with arbitrary bytes. Besides "no crash, no
// sanitizer report", it checks the parser's promises on every input it accepts: identifiers are
// unique, non-empty device identifiers without whitespace, and come from the first line only.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <unordered_set>

#include "externalresource/gpu/DiscoveryOutput.h"
#include "flink/util/Exceptions.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace flink::externalresource::gpu;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const DiscoveryOutput output = parseDiscoveryOutput(text);
    const std::string_view firstLine = text.substr(0, text.find('\n'));
    std::unordered_set<std::string> seen;
    for (const std::string& id : output.identifiers) {
      if (!isDeviceIdentifier(id)) std::abort();
      if (!seen.insert(id).second) std::abort();
      // Canonical indices may drop leading zeros, so look for UUIDs only.
      if (id[0] != '0' && !(id[0] >= '1' && id[0] <= '9') &&
          firstLine.find(id) == std::string_view::npos) {
        std::abort();
      }
    }
  } catch (const flink::FlinkException&) {
    // Rejected input is a valid outcome.
  }
  return 0;
}
