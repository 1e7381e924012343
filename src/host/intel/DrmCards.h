// The Intel GPUs DRM lists in sysfs, as Level Zero (intel/compute-runtime) sees and orders them.
//
// Each <sysfs>/class/drm/card<N> whose PCI device says vendor 0x8086 is one Intel card; connectors
// (card0-DP-1) and render nodes (renderD128) are not cards, and other vendors' cards (AMD, NVIDIA,
// a BMC's VGA) are never counted. What is read of a card:
// - its PCI bus id, from the name of the PCI device `device` links to ("0000:5a:00.0");
// - `device/device` (the PCI device id), `device/driver` (i915 or xe, the link's name);
// - its tiles: xe's `device/tile<T>` folders, i915's `card<N>/gt/gt<T>`; none listed is one tile.
//   An integrated GPU (0000:00:02.0) has one tile whatever it lists: i915 lists a media GT there
//   (Meteor Lake's gt1) that is no tile;
// - xe's `device/tile<T>/physical_vram_size_bytes`, each tile's memory;
// - its render node, `device/drm/renderD<M>`.
//
// Level Zero numbers cards in PCI order (domain, bus, device, function) when
// ZE_ENABLE_PCI_ID_DEVICE_ORDER is set and non-zero, else discrete cards first and integrated ones
// after, each in PCI order (ExecutionEnvironment::comparePciIdBusNumber).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flink::intel {

/// A PCI address: what a card's `device` link names.
struct PciAddress {
  std::uint32_t domain = 0;
  std::uint32_t bus = 0;
  std::uint32_t device = 0;
  std::uint32_t function = 0;

  /// NVML's form, `%08X:%02X:%02X.%X`: "00000000:5A:00.0".
  std::string nvmlForm() const;
  /// Intel's integrated GPUs sit at 0000:00:02.0.
  bool isIntegrated() const noexcept {
    return domain == 0 && bus == 0 && device == 2 && function == 0;
  }
  friend auto operator<=>(const PciAddress&, const PciAddress&) = default;
};

/// `DDDD:BB:DD.F` as the kernel names PCI devices (hex digits of either case; a domain of 4 or
/// more digits, as VMD's 10000); nullopt for anything else.
std::optional<PciAddress> parsePciAddress(std::string_view text) noexcept;

/// One Intel card.
struct IntelCard {
  /// The N of card<N>; nullopt for a card xpu-smi listed.
  std::optional<unsigned> cardNumber;
  PciAddress address;
  /// `device/device`, the PCI device id.
  std::optional<std::uint32_t> deviceId;
  /// "i915", "xe"; empty when unknown (xpu-smi).
  std::string driver;
  /// Level Zero's sub-devices: 1 for a single-tile card.
  unsigned tiles = 1;
  /// Each tile's memory in bytes (xe's physical_vram_size_bytes), one entry per tile, nullopt
  /// where the file is absent or unreadable (i915 has none).
  std::vector<std::optional<std::uint64_t>> tileMemoryBytes;
  /// The M of renderD<M>; nullopt when the card lists none.
  std::optional<unsigned> renderMinor;
  /// The product name, from xpu-smi only.
  std::optional<std::string> name;

  bool multiTile() const noexcept { return tiles > 1; }
  /// "intel:00000000:5A:00.0", the whole card's record name.
  std::string recordName() const;
  /// The record name of tile `tile` of a multi-tile card ("intel:00000000:5A:00.0/1"); the card's
  /// own for a single-tile card.
  std::string tileRecordName(unsigned tile) const;
  /// "card 0 (00000000:5A:00.0)", or "GPU 00000000:5A:00.0" for one xpu-smi listed.
  std::string describe() const;
};

/// Reads every Intel card of `<sysfs>/class/drm`, in card-number order. A card of ours whose bus
/// id cannot be read makes the discovery fail rather than guess (every index after it
/// would be a guess): @throws discovery::DiscoveryError naming the file.
std::vector<IntelCard> readDrmCards(const std::filesystem::path& sysfsRoot);

/// `cards` in Level Zero's order: PCI order when `pciOrder`, else discrete first and integrated
/// after, each in PCI order.
std::vector<IntelCard> levelZeroOrder(std::vector<IntelCard> cards, bool pciOrder);

/// Whether ZE_ENABLE_PCI_ID_DEVICE_ORDER's value asks for PCI order: set and non-zero, read as
/// Level Zero reads its debug variables (a decimal number, as atoll: "1", "2"; "0", "", "no" are
/// 0).
bool pciOrderRequested(const char* value) noexcept;

}  // namespace flink::intel
