// Level Zero's devices under the hierarchy and masks in force, as compute-runtime and SYCL read
// them: pure functions of the cards (in Level Zero's order) and the variables' values.
//
// - ZE_FLAT_DEVICE_HIERARCHY: unset, empty, FLAT or COMBINED: every tile is a device, card-major;
//   COMPOSITE: every card is one. Level Zero compares the value exactly and takes its default for
//   any other; since which default depends on the product, the discovery refuses such a value.
// - ZE_AFFINITY_MASK (ExecutionEnvironment::parseAffinityMask): unset, empty or "default": no
//   mask. Otherwise entries split on ',' and each on '.'. In FLAT an entry indexes the tiles;
//   `X.Y` entries and indices past the last device are skipped, the rest still count. In
//   COMPOSITE `K` is card K, `K.S` tile S of card K (S past its tiles: skipped). A mask does not
//   reorder: the devices it leaves keep Level Zero's order.
//   Level Zero reads a number with stoul base 0, so "010" is 8 and "0x1" is 1, and an entry it
//   cannot read at all ("", "a") makes it fail. The discovery reads decimal entries without
//   leading zeros only (so that every identifier it prints means one device to every reader) and
//   fails, naming the variable, on any other spelling.
// - ONEAPI_DEVICE_SELECTOR (SYCL): only `level_zero:<indices>` and `level_zero:*`, which index
//   the devices ZE_AFFINITY_MASK left, in their order. Any other form is refused.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "util/Notice.h"

namespace flink::intel {

inline constexpr const char* kHierarchyVariable = "ZE_FLAT_DEVICE_HIERARCHY";
inline constexpr const char* kAffinityMaskVariable = "ZE_AFFINITY_MASK";
inline constexpr const char* kDeviceSelectorVariable = "ONEAPI_DEVICE_SELECTOR";
inline constexpr const char* kPciOrderVariable = "ZE_ENABLE_PCI_ID_DEVICE_ORDER";

enum class Hierarchy { kFlat, kComposite };

/// The innermost mask in force: none, ZE_AFFINITY_MASK or ONEAPI_DEVICE_SELECTOR.
enum class MaskVariable { kNone, kAffinityMask, kDeviceSelector };

/// The hierarchy ZE_FLAT_DEVICE_HIERARCHY's value (nullptr: unset) asks for.
/// @throws discovery::DiscoveryError for a value other than FLAT, COMBINED, COMPOSITE or empty.
Hierarchy parseHierarchy(const char* value);

/// One Level Zero device: a whole card or one tile of a multi-tile card.
struct LevelZeroDevice {
  /// Into the cards given (Level Zero's order).
  std::size_t card = 0;
  /// The tile, for a tile of a multi-tile card; nullopt for a whole card (and a single-tile one).
  std::optional<unsigned> tile;
  /// What the innermost mask calls it (its entry as spelled), else its Level Zero index.
  std::string identifier;
  /// False for a device the discovery cannot hand out: under COMPOSITE, several (not all) tiles
  /// of one card that a mask joins into one device.
  bool usable = true;
  friend bool operator==(const LevelZeroDevice&, const LevelZeroDevice&) = default;
};

/// What the masks leave, in Level Zero's order.
struct LevelZeroDevices {
  std::vector<LevelZeroDevice> devices;
  /// Warnings: entries skipped, devices not handed out.
  std::vector<Notice> warnings;
  /// The innermost mask in force, "ZE_AFFINITY_MASK=0,1"; nullopt without one.
  std::optional<std::string> mask;
  /// Which variable that is.
  MaskVariable maskVariable = MaskVariable::kNone;
};

/// The devices of cards with `tiles[i]` tiles each (Level Zero's card order) under `hierarchy`
/// and the masks (nullptr: unset).
/// @throws discovery::DiscoveryError naming the variable for an entry or a form not read.
LevelZeroDevices levelZeroDevices(const std::vector<unsigned>& tiles, Hierarchy hierarchy,
                                  const char* affinityMask, const char* deviceSelector);

/// The index of `device` (card, tile) among every device of cards with `tiles` tiles, without
/// masks: FLAT counts tiles card-major, COMPOSITE counts cards.
std::size_t unmaskedIndex(const std::vector<unsigned>& tiles, Hierarchy hierarchy, std::size_t card,
                          std::optional<unsigned> tile);

}  // namespace flink::intel
