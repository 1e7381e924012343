// Fuzzes what the AMD and Intel discoveries read from others: a KFD properties file, the ROCr and
// HIP masks, and Level Zero's ZE_AFFINITY_MASK and ONEAPI_DEVICE_SELECTOR. The first byte picks
// the parser and the shape of the host (how many units, which share a UUID, how many tiles each
// card has); the rest is the text. Besides "no crash, no sanitizer report", it checks the
// promises a wrong index would break: a mask chooses each unit at most once, only units that
// exist, with the entry that chose it; the Level Zero devices are of cards that exist, in Level
// Zero's order, each once; a properties file either fails with a DiscoveryError or holds only
// what its lines say.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "host/amd/KfdTopology.h"
#include "host/amd/RocmMasks.h"
#include "host/enumeration/GpuEnumerator.h"
#include "host/intel/LevelZeroMasks.h"

namespace {

void check(bool promise) {
  if (!promise) std::abort();
}

void checkReading(const flink::amd::MaskReading& reading, std::size_t units) {
  check(reading.chosen.size() == reading.spelled.size());
  const std::set<std::size_t> distinct(reading.chosen.begin(), reading.chosen.end());
  check(distinct.size() == reading.chosen.size());
  for (const std::size_t unit : reading.chosen) check(unit < units);
}

/// Units 0..n-1; with `shared`, units 1 and 2 are partitions of one GPU (one UUID), and unit 3
/// has none.
std::vector<std::optional<std::string>> uuidsOf(std::size_t units, bool shared) {
  std::vector<std::optional<std::string>> uuids;
  for (std::size_t i = 0; i < units; ++i) {
    char text[32];
    std::snprintf(text, sizeof text, "GPU-%016zx", (shared && i == 2) ? 1 : 0x1000 + i);
    uuids.emplace_back(text);
  }
  if (shared && units > 3) uuids[3].reset();
  return uuids;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t shape = data[0];
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::size_t units = shape % 9;  // 0 to 8
  switch ((shape >> 4) % 4) {
    case 0:
      try {
        const flink::amd::KfdProperties properties = flink::amd::parseKfdProperties(text, "f");
        // Only what the lines say: each name is one of the text, at most one value per line.
        check(properties.values.size() <=
              static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')) + 1);
        for (const auto& [name, value] : properties.values) {
          check(!name.empty() && text.find(name) != std::string::npos);
          check(properties.get(name).has_value());
        }
      } catch (const flink::discovery::DiscoveryError&) {
      }
      break;
    case 1:
      checkReading(flink::amd::readRocrVisibleDevices(text, uuidsOf(units, shape & 8)), units);
      break;
    case 2:
      checkReading(flink::amd::readHipVisibleDevices(text, uuidsOf(units, shape & 8)), units);
      break;
    case 3: {
      // Cards of 1 or 2 tiles; the text is the affinity mask, or after a NUL the selector.
      std::vector<unsigned> tiles;
      for (std::size_t i = 0; i < units; ++i) tiles.push_back(((shape >> 3) + i) % 2 + 1);
      const std::size_t nul = text.find('\0');
      const std::string mask = text.substr(0, nul);
      const std::optional<std::string> selector =
          nul == std::string::npos ? std::nullopt : std::optional(text.substr(nul + 1));
      for (const auto hierarchy :
           {flink::intel::Hierarchy::kFlat, flink::intel::Hierarchy::kComposite}) {
        try {
          const flink::intel::LevelZeroDevices found = flink::intel::levelZeroDevices(
              tiles, hierarchy, mask.c_str(), selector ? selector->c_str() : nullptr);
          std::set<std::pair<std::size_t, unsigned>> seen;
          std::size_t lastOrder = 0;
          for (const flink::intel::LevelZeroDevice& device : found.devices) {
            check(device.card < tiles.size());
            if (device.tile) check(*device.tile < tiles[device.card]);
            check(!device.identifier.empty());
            check(seen.emplace(device.card, device.tile.value_or(~0u)).second);
            // Level Zero keeps its own order, whatever order the mask names them in.
            const std::size_t order =
                flink::intel::unmaskedIndex(tiles, hierarchy, device.card, device.tile.value_or(0));
            check(order >= lastOrder);
            lastOrder = order;
          }
        } catch (const flink::discovery::DiscoveryError&) {
        }
      }
      break;
    }
  }
  return 0;
}
