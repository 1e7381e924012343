// The Intel discovery: the cards DRM lists (DrmCards.h), those this process can open, in Level
// Zero's order, under the hierarchy and masks in force (LevelZeroMasks.h); xpu-smi only where
// sysfs has no DRM folder (XpuSmi.h), and then only under COMPOSITE, since xpu-smi does not say
// how many tiles a card has.
#include "host/intel/IntelGpus.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "host/enumeration/GpuEnumerator.h"
#include "host/intel/DrmCards.h"
#include "host/intel/LevelZeroMasks.h"
#include "host/intel/XpuSmi.h"
#include "util/Strings.h"

namespace flink::intel {

namespace fs = std::filesystem;
using discovery::DiscoveryError;

namespace {

/// "Permission denied (EACCES)".
std::string describeErrno(int error) {
  const char* name = nullptr;
  switch (error) {
    case ENOENT:
      name = "ENOENT";
      break;
    case EPERM:
      name = "EPERM";
      break;
    case EACCES:
      name = "EACCES";
      break;
    case ENXIO:
      name = "ENXIO";
      break;
    case ENODEV:
      name = "ENODEV";
      break;
    case EBUSY:
      name = "EBUSY";
      break;
    case EIO:
      name = "EIO";
      break;
    case EROFS:
      name = "EROFS";
      break;
    case EISDIR:
      name = "EISDIR";
      break;
    default:
      break;
  }
  const std::string words = std::strerror(error);
  return name != nullptr ? words + " (" + name + ")"
                         : words + " (errno " + std::to_string(error) + ")";
}

/// The cards xpu-smi lists, when sysfs has no DRM folder.
std::vector<IntelCard> cardsFromXpuSmi(const fs::path& drm, const discovery::ToolOptions& tools) {
  const discovery::ToolRun run = discovery::runTool("xpu-smi", {"discovery", "-j"}, tools);
  if (!run.path) {
    throw DiscoveryError(
        "cannot list Intel GPUs: " + drm.string() + " does not exist and xpu-smi is not found",
        {"looked for DRM's cards in " + drm.string(),
         "looked for xpu-smi on " + (tools.searchPath ? "the path " + *tools.searchPath
                                                      : std::string("this process's PATH"))},
        DiscoveryError::Kind::kNoDriver);
  }
  if (run.startError) {
    throw DiscoveryError("xpu-smi (" + run.path->string() +
                         ") could not be started: " + *run.startError);
  }
  const process::ProcessResult& result = *run.result;
  if (!result.outcome.succeeded()) {
    std::vector<std::string> details;
    if (!result.stdoutOutput.data.empty()) {
      details.push_back("xpu-smi printed: " +
                        strings::quoteForMessage(result.stdoutOutput.data, 400));
    }
    if (!result.stderrOutput.data.empty()) {
      details.push_back("on stderr: " + strings::quoteForMessage(result.stderrOutput.data, 400));
    }
    throw DiscoveryError("xpu-smi discovery -j " + result.outcome.toString(), std::move(details));
  }
  return parseXpuSmiDiscovery(result.stdoutOutput.data);
}

/// xpu-smi lists cards and does not say how many tiles each has, so its cards are Level Zero's
/// devices only under COMPOSITE, and only for masks that name cards.
/// @throws DiscoveryError under FLAT (or COMBINED), or for a ZE_AFFINITY_MASK entry <card>.<tile>.
void refuseWhatXpuSmiCannotNumber(const fs::path& drm, std::size_t cardCount, Hierarchy hierarchy,
                                  const char* hierarchyValue, const char* affinityMask) {
  const std::string why = drm.string() +
                          " does not exist, so the Intel GPUs would be xpu-smi's: "
                          "it lists " +
                          std::to_string(cardCount) + (cardCount == 1 ? " card" : " cards") +
                          ", and its discovery -j does not say how many tiles each has";
  const std::string remedy = std::string(
      "give this process sysfs's class/drm (mount the host's /sys, or set "
      "FLINK_GPU_SYSFS_ROOT to where it is mounted), where every card's tiles are "
      "listed");
  if (hierarchy == Hierarchy::kFlat) {
    std::string value;
    if (hierarchyValue == nullptr) {
      value = std::string(kHierarchyVariable) + " is unset, and Level Zero's default is FLAT";
    } else if (*hierarchyValue == '\0') {
      value = std::string(kHierarchyVariable) + " is empty, which Level Zero reads as FLAT";
    } else {
      value = std::string(kHierarchyVariable) + "=" + hierarchyValue;
    }
    throw DiscoveryError(
        "the Intel GPUs cannot be numbered from xpu-smi: xpu-smi counts cards, while Level Zero's "
        "FLAT hierarchy counts tiles (a two-tile card is two devices)",
        {why, value,
         std::string("to make the discovery answer, set ") + kHierarchyVariable +
             "=COMPOSITE (Level Zero then numbers cards, as xpu-smi lists them) for the "
             "discovery and the worker alike, or " +
             remedy});
  }
  if (affinityMask == nullptr || *affinityMask == '\0' ||
      std::strcmp(affinityMask, "default") == 0) {
    return;
  }
  std::vector<std::string> tileEntries;
  for (std::string_view entry : strings::split(affinityMask, ',')) {
    entry = strings::trim(entry);
    if (entry.find('.') != std::string_view::npos) tileEntries.emplace_back(entry);
  }
  if (tileEntries.empty()) return;
  throw DiscoveryError(
      std::string(kAffinityMaskVariable) + "=" + strings::quoteForMessage(affinityMask) +
          " names tiles (" + strings::join(tileEntries, ", ") +
          "), which the discovery cannot place from xpu-smi's list",
      {why,
       std::string("to make the discovery answer, give the mask whole cards only, or ") + remedy});
}

/// What environmentFor needs of one unit.
struct UnitEnvironment {
  /// Its entry in the inherited mask, or its index under the order the command gets.
  std::string value;
};

}  // namespace

discovery::VendorHost findIntelUnits(const discovery::VendorOptions& options) {
  const auto env = [&](const char* name) -> const char* {
    return options.getenv ? options.getenv(name) : nullptr;
  };
  discovery::VendorHost host;
  host.vendor = discovery::Vendor::kIntel;

  const fs::path drm = options.roots.sysfs / "class" / "drm";
  std::error_code error;
  const bool haveDrm = fs::exists(drm, error);
  std::vector<IntelCard> found =
      haveDrm ? readDrmCards(options.roots.sysfs) : cardsFromXpuSmi(drm, options.tools);
  if (found.empty()) {
    throw DiscoveryError("no Intel GPU",
                         {haveDrm ? drm.string() + " lists no card of vendor 0x8086"
                                  : "xpu-smi discovery -j lists no device"},
                         DiscoveryError::Kind::kNoGpu);
  }
  const char* hierarchyValue = env(kHierarchyVariable);
  const Hierarchy hierarchy = parseHierarchy(hierarchyValue);
  if (!haveDrm) {
    // An index printed is Level Zero's, or none is printed.
    refuseWhatXpuSmiCannotNumber(drm, found.size(), hierarchy, hierarchyValue,
                                 env(kAffinityMaskVariable));
    host.notices.push_back(Notice::warning(
        drm.string() +
        " does not exist, so the Intel GPUs are xpu-smi's, one device per card as Level Zero's "
        "COMPOSITE hierarchy numbers them; xpu-smi lists cards this process may not open, too"));
  }

  // A card shares its hardware with its tiles, whoever holds which, whatever the hierarchy.
  for (const IntelCard& card : found) {
    if (!card.multiTile()) continue;
    for (unsigned tile = 0; tile < card.tiles; ++tile) {
      host.related[card.recordName()].push_back(card.tileRecordName(tile));
      host.related[card.tileRecordName(tile)].push_back(card.recordName());
    }
  }

  // Level Zero sees only the cards whose render node it can open.
  std::vector<IntelCard> usable;
  std::vector<std::string> leftOut;
  for (IntelCard& card : found) {
    if (!haveDrm) {
      usable.push_back(std::move(card));
      continue;
    }
    if (!card.renderMinor) {
      leftOut.push_back(card.describe() +
                        " is left out: it has no render node (device/drm/renderD*)");
      continue;
    }
    const fs::path node =
        options.roots.dev / "dri" / ("renderD" + std::to_string(*card.renderMinor));
    if (const int failure = options.probe ? options.probe(node) : discovery::probeOpen(node)) {
      leftOut.push_back(card.describe() + " is left out: " + node.string() + " cannot be opened: " +
                        describeErrno(failure) + "; Level Zero does not see it in this process");
      continue;
    }
    usable.push_back(std::move(card));
  }
  // Not a fault: Level Zero does not see such a card in this process either (issue 20, 5).
  for (const std::string& line : leftOut) host.notices.push_back(Notice::note(line));
  if (usable.empty()) {
    throw DiscoveryError("no usable Intel GPU: every card is left out", leftOut,
                         DiscoveryError::Kind::kNoUsableGpu);
  }

  const char* pciOrderValue = env(kPciOrderVariable);
  const bool pciOrder = pciOrderRequested(pciOrderValue);
  std::vector<IntelCard> cards = levelZeroOrder(usable, pciOrder);
  const std::vector<IntelCard> pciCards = levelZeroOrder(std::move(usable), true);
  bool integrated = false;
  bool discrete = false;
  for (const IntelCard& card : cards) (card.address.isIntegrated() ? integrated : discrete) = true;

  std::vector<unsigned> tiles;
  for (const IntelCard& card : cards) tiles.push_back(card.tiles);
  std::vector<unsigned> pciTiles;
  for (const IntelCard& card : pciCards) pciTiles.push_back(card.tiles);
  LevelZeroDevices devices =
      levelZeroDevices(tiles, hierarchy, env(kAffinityMaskVariable), env(kDeviceSelectorVariable));

  // The command exec starts gets ZE_ENABLE_PCI_ID_DEVICE_ORDER=1 where it is unset, unless an
  // inherited mask's entries would then name other devices than they name here.
  bool sameOrderEitherWay = true;
  for (std::size_t i = 0; i < cards.size(); ++i) {
    sameOrderEitherWay = sameOrderEitherWay && cards[i].address == pciCards[i].address;
  }
  const bool setPciOrder = pciOrderValue == nullptr &&
                           (devices.maskVariable == MaskVariable::kNone || sameOrderEitherWay);

  if (integrated && discrete && pciOrderValue == nullptr) {
    host.notices.push_back(Notice::warning(
        std::string("this host has discrete and integrated Intel GPUs and ") + kPciOrderVariable +
        " is not set: the indices printed follow Level Zero's default order, discrete cards "
        "first; " +
        kPciOrderVariable + "=1 gives PCI order" +
        (setPciOrder ? " (flink-gpu exec sets it for its command, with the indices to match)"
                     : " (flink-gpu exec leaves it unset for its command, since " + *devices.mask +
                           " names devices in the default order)")));
  }
  for (Notice& warning : devices.warnings) host.notices.push_back(std::move(warning));
  host.mask = devices.mask;

  std::unordered_map<std::string, UnitEnvironment> environments;
  for (const LevelZeroDevice& device : devices.devices) {
    if (!device.usable) continue;
    const IntelCard& card = cards[device.card];
    discovery::VendorUnit unit;
    unit.identifier = device.identifier;
    unit.recordName = device.tile ? card.tileRecordName(*device.tile) : card.recordName();
    unit.description = device.tile
                           ? "tile " + std::to_string(*device.tile) + " of " + card.describe()
                           : card.describe();
    discovery::Properties& properties = unit.properties;
    properties.emplace_back("vendor", "intel");
    if (card.name) properties.emplace_back("name", *card.name);
    properties.emplace_back("pci.bus_id", card.address.nvmlForm());
    if (card.deviceId) {
      char id[16];
      std::snprintf(id, sizeof id, "0x%04x", static_cast<unsigned>(*card.deviceId));
      properties.emplace_back("pci.device_id", id);
    }
    if (card.renderMinor)
      properties.emplace_back("render_minor", std::to_string(*card.renderMinor));
    if (device.tile) {
      properties.emplace_back("tile", std::to_string(*device.tile));
    } else if (card.multiTile()) {
      properties.emplace_back("tiles", std::to_string(card.tiles));
    }
    // A tile's own memory, or the sum of the card's tiles when every one is known.
    std::optional<std::uint64_t> bytes;
    if (device.tile) {
      if (*device.tile < card.tileMemoryBytes.size()) bytes = card.tileMemoryBytes[*device.tile];
    } else {
      bytes = std::uint64_t{0};
      for (const auto& tileBytes : card.tileMemoryBytes) {
        bytes = tileBytes && bytes ? std::optional(*bytes + *tileBytes) : std::nullopt;
      }
      if (card.tileMemoryBytes.empty()) bytes.reset();
    }
    if (bytes && *bytes > 0) {
      properties.emplace_back("memory.total", std::to_string(*bytes / (1024 * 1024)));
    }

    UnitEnvironment environment;
    if (devices.maskVariable != MaskVariable::kNone) {
      environment.value = device.identifier;
    } else if (setPciOrder) {
      std::size_t pciCard = 0;
      while (pciCards[pciCard].address != card.address) ++pciCard;
      environment.value = std::to_string(unmaskedIndex(pciTiles, hierarchy, pciCard, device.tile));
    } else {
      environment.value = device.identifier;
    }
    environments.emplace(unit.recordName, std::move(environment));
    host.units.push_back(std::move(unit));
  }

  // exec narrows the innermost mask inherited, else sets ZE_AFFINITY_MASK.
  const std::string maskVariable = devices.maskVariable == MaskVariable::kDeviceSelector
                                       ? kDeviceSelectorVariable
                                       : kAffinityMaskVariable;
  std::string prefix;
  if (devices.maskVariable == MaskVariable::kDeviceSelector) {
    const std::string selector = env(kDeviceSelectorVariable);
    prefix = selector.substr(0, selector.find(':') + 1);
  }
  host.environmentFor = [environments = std::move(environments), maskVariable, prefix, setPciOrder](
                            const std::vector<const discovery::VendorUnit*>& granted, bool uuids) {
    if (uuids) {
      throw std::invalid_argument(
          "Intel GPUs have no UUID form here (Level Zero's UUIDs are not "
          "in sysfs, and ZE_AFFINITY_MASK takes indices)");
    }
    if (granted.empty()) {
      throw std::invalid_argument(
          "no Intel GPU granted: Level Zero has no mask that hides every device");
    }
    std::vector<std::string> values;
    for (const discovery::VendorUnit* unit : granted) {
      const auto known = unit != nullptr ? environments.find(unit->recordName) : environments.end();
      if (known == environments.end()) {
        throw std::invalid_argument("not an Intel unit of this discovery: " +
                                    (unit != nullptr ? unit->recordName : std::string("null")));
      }
      values.push_back(known->second.value);
    }
    std::vector<std::pair<std::string, std::string>> variables;
    variables.emplace_back(maskVariable, prefix + strings::join(values, ","));
    if (setPciOrder) variables.emplace_back(kPciOrderVariable, "1");
    return variables;
  };
  return host;
}

}  // namespace flink::intel
