// findIntelUnits against stand-in DRM sysfs and /dev trees: which cards count, Level Zero's
// order, tiles under each hierarchy, the masks, properties, what exec sets, and xpu-smi where
// sysfs has no DRM folder.
#include "host/intel/IntelGpus.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <fstream>
#include <map>
#include <stdexcept>

#include "TestSupport.h"
#include "host/enumeration/GpuEnumerator.h"

namespace flink::intel {
namespace {

namespace fs = std::filesystem;
using discovery::DiscoveryError;
using discovery::Properties;
using discovery::VendorHost;
using discovery::VendorUnit;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;
using testing::TempDir;
using ::testing::UnorderedElementsAre;
using Variables = std::vector<std::pair<std::string, std::string>>;

constexpr std::uint64_t kGiB = 1024ull * 1024 * 1024;

/// One card of a stand-in host.
struct Card {
  unsigned number = 0;
  std::string bdf;  // "0000:5a:00.0"
  std::uint32_t vendor = 0x8086;
  std::uint32_t device = 0x0bd5;
  std::string driver = "xe";
  unsigned tiles = 1;
  /// xe's physical_vram_size_bytes per tile; none written where shorter.
  std::vector<std::uint64_t> vram;
  std::optional<unsigned> render;
};

class IntelGpusTest : public ::testing::Test {
 protected:
  IntelGpusTest() {
    options_.roots.sysfs = dir_ / "sys";
    options_.roots.dev = dir_ / "dev";
    options_.tools.searchPath = (dir_ / "bin").string();
    options_.getenv = [this](const char* name) -> const char* {
      const auto found = environment_.find(name);
      return found == environment_.end() ? nullptr : found->second.c_str();
    };
    fs::create_directories(dir_ / "bin");
    fs::create_directories(options_.roots.sysfs / "class" / "drm");
    fs::create_directories(options_.roots.dev / "dri");
  }

  static void write(const fs::path& path, const std::string& text) {
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }
  static std::string hex4(std::uint32_t value) {
    char text[8];
    std::snprintf(text, sizeof text, "0x%04x", value);
    return text;
  }

  /// Writes a card as the kernel lays it out: class/drm/card<N> with `device` linking to the PCI
  /// device, whose `driver` links to the driver; a render node in /dev as a plain file.
  void addCard(const Card& card) {
    const fs::path sys = options_.roots.sysfs;
    const fs::path pci = sys / "devices" / "pci0000:00" / card.bdf;
    write(pci / "vendor", hex4(card.vendor) + "\n");
    write(pci / "device", hex4(card.device) + "\n");
    write(pci / "uevent", "DRIVER=" + card.driver + "\nPCI_SLOT_NAME=" + card.bdf + "\n");
    fs::create_directories(sys / "bus" / "pci" / "drivers" / card.driver);
    fs::create_symlink(sys / "bus" / "pci" / "drivers" / card.driver, pci / "driver");
    const fs::path drm = sys / "class" / "drm" / ("card" + std::to_string(card.number));
    fs::create_directories(drm);
    fs::create_symlink(pci, drm / "device");
    for (unsigned t = 0; t < card.tiles; ++t) {
      if (card.driver == "xe") {
        fs::create_directories(pci / ("tile" + std::to_string(t)) / ("gt" + std::to_string(t)));
        if (t < card.vram.size()) {
          write(pci / ("tile" + std::to_string(t)) / "physical_vram_size_bytes",
                std::to_string(card.vram[t]) + "\n");
        }
      } else {
        fs::create_directories(drm / "gt" / ("gt" + std::to_string(t)));
      }
    }
    if (card.render) {
      const std::string node = "renderD" + std::to_string(*card.render);
      fs::create_directories(pci / "drm" / node);
      fs::create_directories(pci / "drm" / ("card" + std::to_string(card.number)));
      write(options_.roots.dev / "dri" / node, "");
    }
    // What else class/drm holds: connectors and render nodes, which are no cards.
    fs::create_directories(sys / "class" / "drm" /
                           ("card" + std::to_string(card.number) + "-DP-1"));
    if (card.render) {
      fs::create_directories(sys / "class" / "drm" / ("renderD" + std::to_string(*card.render)));
    }
  }

  /// 8× Data Center GPU Max 1550 under xe: 2 tiles of 64 GiB each, cards 1..8 (card0 the BMC).
  void addEightMax1550() {
    addCard({0, "0000:03:00.0", 0x1a03, 0x2000, "ast", 1, {}, std::nullopt});
    const char* buses[] = {"18", "42", "6c", "9a", "af", "c6", "dc", "f3"};
    for (unsigned i = 0; i < 8; ++i) {
      addCard({i + 1,
               std::string("0000:") + buses[i] + ":00.0",
               0x8086,
               0x0bd5,
               "xe",
               2,
               {64 * kGiB, 64 * kGiB},
               128 + i});
    }
  }

  VendorHost find() { return findIntelUnits(options_); }

  static std::vector<std::string> identifiers(const VendorHost& host) {
    std::vector<std::string> out;
    for (const VendorUnit& unit : host.units) out.push_back(unit.identifier);
    return out;
  }
  static std::vector<std::string> recordNames(const VendorHost& host) {
    std::vector<std::string> out;
    for (const VendorUnit& unit : host.units) out.push_back(unit.recordName);
    return out;
  }
  static std::vector<const VendorUnit*> pick(const VendorHost& host,
                                             const std::vector<std::size_t>& positions) {
    std::vector<const VendorUnit*> out;
    for (const std::size_t i : positions) out.push_back(&host.units.at(i));
    return out;
  }
  DiscoveryError findFails() {
    try {
      find();
    } catch (const DiscoveryError& e) {
      return e;
    }
    ADD_FAILURE() << "no DiscoveryError";
    return DiscoveryError("none");
  }

  TempDir dir_{"intel-gpus"};
  discovery::VendorOptions options_;
  std::map<std::string, std::string> environment_;
};

// ---- which cards count ----

TEST_F(IntelGpusTest, EightMax1550AreSixteenDevicesUnderTheDefaultFlatHierarchy) {
  addEightMax1550();
  const VendorHost host = find();
  EXPECT_EQ(host.vendor, discovery::Vendor::kIntel);
  EXPECT_EQ(identifiers(host),
            (std::vector<std::string>{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11",
                                      "12", "13", "14", "15"}));
  ASSERT_EQ(host.units.size(), 16u);
  EXPECT_EQ(host.units[0].recordName, "intel:00000000:18:00.0/0");
  EXPECT_EQ(host.units[1].recordName, "intel:00000000:18:00.0/1");
  EXPECT_EQ(host.units[15].recordName, "intel:00000000:F3:00.0/1");
  EXPECT_EQ(host.units[1].description, "tile 1 of card 1 (00000000:18:00.0)");
  EXPECT_EQ(host.units[1].properties, (Properties{{"vendor", "intel"},
                                                  {"pci.bus_id", "00000000:18:00.0"},
                                                  {"pci.device_id", "0x0bd5"},
                                                  {"render_minor", "128"},
                                                  {"tile", "1"},
                                                  {"memory.total", "65536"}}));
  EXPECT_THAT(linesOf(host.notices), IsEmpty());
  EXPECT_EQ(host.mask, std::nullopt);
}

TEST_F(IntelGpusTest, CombinedIsFlat) {
  addEightMax1550();
  environment_["ZE_FLAT_DEVICE_HIERARCHY"] = "COMBINED";
  EXPECT_EQ(find().units.size(), 16u);
  environment_["ZE_FLAT_DEVICE_HIERARCHY"] = "FLAT";
  EXPECT_EQ(find().units.size(), 16u);
}

TEST_F(IntelGpusTest, EightMax1550AreEightDevicesUnderComposite) {
  addEightMax1550();
  environment_["ZE_FLAT_DEVICE_HIERARCHY"] = "COMPOSITE";
  const VendorHost host = find();
  EXPECT_EQ(identifiers(host), (std::vector<std::string>{"0", "1", "2", "3", "4", "5", "6", "7"}));
  EXPECT_EQ(recordNames(host),
            (std::vector<std::string>{"intel:00000000:18:00.0", "intel:00000000:42:00.0",
                                      "intel:00000000:6C:00.0", "intel:00000000:9A:00.0",
                                      "intel:00000000:AF:00.0", "intel:00000000:C6:00.0",
                                      "intel:00000000:DC:00.0", "intel:00000000:F3:00.0"}));
  EXPECT_EQ(host.units[7].description, "card 8 (00000000:F3:00.0)");
  EXPECT_EQ(host.units[7].properties, (Properties{{"vendor", "intel"},
                                                  {"pci.bus_id", "00000000:F3:00.0"},
                                                  {"pci.device_id", "0x0bd5"},
                                                  {"render_minor", "135"},
                                                  {"tiles", "2"},
                                                  {"memory.total", "131072"}}));
}

TEST_F(IntelGpusTest, AHierarchyLevelZeroDoesNotReadIsAnError) {
  addEightMax1550();
  environment_["ZE_FLAT_DEVICE_HIERARCHY"] = "composite";
  const DiscoveryError e = findFails();
  EXPECT_STREQ(e.what(), "ZE_FLAT_DEVICE_HIERARCHY=composite is not a hierarchy Level Zero reads");
}

TEST_F(IntelGpusTest, I915TilesAreItsGtFoldersAndItHasNoMemoryFigure) {
  addCard({0, "0000:4d:00.0", 0x8086, 0x0bd5, "i915", 2, {}, 128});
  VendorHost host = find();
  EXPECT_EQ(recordNames(host),
            (std::vector<std::string>{"intel:00000000:4D:00.0/0", "intel:00000000:4D:00.0/1"}));
  EXPECT_EQ(host.units[0].properties, (Properties{{"vendor", "intel"},
                                                  {"pci.bus_id", "00000000:4D:00.0"},
                                                  {"pci.device_id", "0x0bd5"},
                                                  {"render_minor", "128"},
                                                  {"tile", "0"}}));
  environment_["ZE_FLAT_DEVICE_HIERARCHY"] = "COMPOSITE";
  host = find();
  EXPECT_EQ(recordNames(host), (std::vector<std::string>{"intel:00000000:4D:00.0"}));
  EXPECT_EQ(host.units[0].properties, (Properties{{"vendor", "intel"},
                                                  {"pci.bus_id", "00000000:4D:00.0"},
                                                  {"pci.device_id", "0x0bd5"},
                                                  {"render_minor", "128"},
                                                  {"tiles", "2"}}));
}

TEST_F(IntelGpusTest, ASingleTileCardIsOneDeviceEitherWayWithOneRecordName) {
  addCard({0, "0000:03:00.0", 0x8086, 0x56c0, "i915", 1, {}, 128});
  addCard({1, "0000:83:00.0", 0x8086, 0xe20b, "xe", 1, {12 * kGiB}, 129});
  for (const char* hierarchy : {"FLAT", "COMPOSITE"}) {
    environment_["ZE_FLAT_DEVICE_HIERARCHY"] = hierarchy;
    const VendorHost host = find();
    EXPECT_EQ(identifiers(host), (std::vector<std::string>{"0", "1"})) << hierarchy;
    EXPECT_EQ(recordNames(host),
              (std::vector<std::string>{"intel:00000000:03:00.0", "intel:00000000:83:00.0"}))
        << hierarchy;
    EXPECT_EQ(host.units[1].description, "card 1 (00000000:83:00.0)");
    EXPECT_EQ(host.units[1].properties, (Properties{{"vendor", "intel"},
                                                    {"pci.bus_id", "00000000:83:00.0"},
                                                    {"pci.device_id", "0xe20b"},
                                                    {"render_minor", "129"},
                                                    {"memory.total", "12288"}}));
    EXPECT_THAT(host.related, IsEmpty());
  }
}

TEST_F(IntelGpusTest, OtherVendorsCardsAreNeverCounted) {
  addCard({0, "0000:02:00.0", 0x1a03, 0x2000, "ast", 1, {}, std::nullopt});
  addCard({1, "0000:05:00.0", 0x1002, 0x740f, "amdgpu", 1, {}, 128});
  addCard({2, "0000:18:00.0", 0x8086, 0x56c0, "i915", 1, {}, 129});
  addCard({3, "0000:3b:00.0", 0x10de, 0x2335, "nvidia", 1, {}, 130});
  addCard({4, "0000:9a:00.0", 0x8086, 0x56c0, "i915", 1, {}, 131});
  const VendorHost host = find();
  EXPECT_EQ(identifiers(host), (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(recordNames(host),
            (std::vector<std::string>{"intel:00000000:18:00.0", "intel:00000000:9A:00.0"}));
  EXPECT_EQ(host.units[1].description, "card 4 (00000000:9A:00.0)");
}

TEST_F(IntelGpusTest, NoIntelCardIsNoIntelGpu) {
  addCard({0, "0000:05:00.0", 0x1002, 0x740f, "amdgpu", 1, {}, 128});
  const DiscoveryError e = findFails();
  EXPECT_STREQ(e.what(), "no Intel GPU");
  EXPECT_EQ(e.kind(), DiscoveryError::Kind::kNoGpu);
  EXPECT_THAT(e.details(), ElementsAre((options_.roots.sysfs / "class/drm").string() +
                                       " lists no card of vendor 0x8086"));
}

// ---- order ----

class MixedHostTest : public IntelGpusTest {
 protected:
  MixedHostTest() {
    addCard({0, "0000:00:02.0", 0x8086, 0x7d55, "i915", 1, {}, 128});
    addCard({1, "0000:4d:00.0", 0x8086, 0x56a0, "xe", 1, {16 * kGiB}, 129});
    addCard({2, "0000:03:00.0", 0x8086, 0x56a0, "xe", 1, {16 * kGiB}, 130});
  }
  const std::string kWarning =
      "warning: this host has discrete and integrated Intel GPUs and "
      "ZE_ENABLE_PCI_ID_DEVICE_ORDER is not set: the indices printed follow Level Zero's default "
      "order, discrete cards first; ZE_ENABLE_PCI_ID_DEVICE_ORDER=1 gives PCI order (flink-gpu "
      "exec sets it for its command, with the indices to match)";
};

TEST_F(MixedHostTest, DiscreteCardsComeFirstAndAWarningNamesThePciOrderVariable) {
  const VendorHost host = find();
  EXPECT_EQ(recordNames(host),
            (std::vector<std::string>{"intel:00000000:03:00.0", "intel:00000000:4D:00.0",
                                      "intel:00000000:00:02.0"}));
  EXPECT_EQ(identifiers(host), (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_THAT(linesOf(host.notices), ElementsAre(kWarning));
}

TEST_F(MixedHostTest, TheWarningSaysWhatExecSetsWithoutAMask) {
  const VendorHost host = find();
  ASSERT_THAT(linesOf(host.notices), ElementsAre(kWarning));
  // As the warning says: exec sets the variable, and the indices in PCI order to match.
  EXPECT_EQ(host.environmentFor(pick(host, {0}), false),
            (Variables{{"ZE_AFFINITY_MASK", "1"}, {"ZE_ENABLE_PCI_ID_DEVICE_ORDER", "1"}}));
}

TEST_F(MixedHostTest, UnderAnInheritedMaskTheWarningSaysExecLeavesTheOrderVariableUnset) {
  struct Case {
    std::string variable, value;
    std::vector<std::string> records;
    std::string execValue;  // for the first unit
  };
  const std::vector<Case> cases = {
      {"ZE_AFFINITY_MASK", "2,0", {"intel:00000000:03:00.0", "intel:00000000:00:02.0"}, "0"},
      {"ONEAPI_DEVICE_SELECTOR", "level_zero:2", {"intel:00000000:00:02.0"}, "level_zero:2"}};
  for (const Case& c : cases) {
    environment_.erase("ZE_AFFINITY_MASK");
    environment_.erase("ONEAPI_DEVICE_SELECTOR");
    environment_[c.variable] = c.value;
    const VendorHost host = find();
    EXPECT_THAT(linesOf(host.notices),
                ElementsAre("warning: this host has discrete and integrated Intel GPUs and "
                            "ZE_ENABLE_PCI_ID_DEVICE_ORDER is not set: the indices printed "
                            "follow Level Zero's default order, discrete cards first; "
                            "ZE_ENABLE_PCI_ID_DEVICE_ORDER=1 gives PCI order (flink-gpu exec "
                            "leaves it unset for its command, since " +
                            c.variable + "=" + c.value + " names devices in the default order)"))
        << c.variable;
    ASSERT_EQ(recordNames(host), c.records) << c.variable;
    // As the warning says: no ZE_ENABLE_PCI_ID_DEVICE_ORDER for the command.
    EXPECT_EQ(host.environmentFor(pick(host, {0}), false), (Variables{{c.variable, c.execValue}}))
        << c.variable;
  }
}

TEST_F(MixedHostTest, ThePciOrderVariableSetNonZeroGivesPciOrder) {
  environment_["ZE_ENABLE_PCI_ID_DEVICE_ORDER"] = "1";
  const VendorHost host = find();
  EXPECT_EQ(recordNames(host),
            (std::vector<std::string>{"intel:00000000:00:02.0", "intel:00000000:03:00.0",
                                      "intel:00000000:4D:00.0"}));
  EXPECT_THAT(linesOf(host.notices), IsEmpty());
}

TEST_F(MixedHostTest, ThePciOrderVariableSetToZeroKeepsDiscreteFirstWithoutAWarning) {
  environment_["ZE_ENABLE_PCI_ID_DEVICE_ORDER"] = "0";
  const VendorHost host = find();
  EXPECT_EQ(recordNames(host),
            (std::vector<std::string>{"intel:00000000:03:00.0", "intel:00000000:4D:00.0",
                                      "intel:00000000:00:02.0"}));
  EXPECT_THAT(linesOf(host.notices), IsEmpty());
}

TEST_F(IntelGpusTest, DiscreteCardsOnlyAreInPciOrderWithoutAWarning) {
  addCard({0, "0000:9a:00.0", 0x8086, 0x56c0, "i915", 1, {}, 128});
  addCard({1, "0000:18:00.0", 0x8086, 0x56c0, "i915", 1, {}, 129});
  const VendorHost host = find();
  EXPECT_EQ(recordNames(host),
            (std::vector<std::string>{"intel:00000000:18:00.0", "intel:00000000:9A:00.0"}));
  EXPECT_EQ(host.units[0].description, "card 1 (00000000:18:00.0)");
  EXPECT_THAT(linesOf(host.notices), IsEmpty());
}

// ---- masks ----

class TwoMaxCardsTest : public IntelGpusTest {
 protected:
  TwoMaxCardsTest() {
    addCard({0, "0000:18:00.0", 0x8086, 0x0bd5, "xe", 2, {64 * kGiB, 64 * kGiB}, 128});
    addCard({1, "0000:42:00.0", 0x8086, 0x0bd5, "xe", 2, {64 * kGiB, 64 * kGiB}, 129});
  }
};

TEST_F(TwoMaxCardsTest, FlatMaskSkipsCardTileEntriesAndEntriesPastTheLastDevice) {
  environment_["ZE_AFFINITY_MASK"] = "3,0.1,1,99";
  const VendorHost host = find();
  // Level Zero keeps its own order: tile 1 of card 0 (entry 1) before tile 1 of card 1 (entry 3).
  EXPECT_EQ(identifiers(host), (std::vector<std::string>{"1", "3"}));
  EXPECT_EQ(recordNames(host),
            (std::vector<std::string>{"intel:00000000:18:00.0/1", "intel:00000000:42:00.0/1"}));
  EXPECT_EQ(host.mask, "ZE_AFFINITY_MASK=3,0.1,1,99");
  EXPECT_THAT(linesOf(host.notices),
              ElementsAre("warning: ZE_AFFINITY_MASK entry 0.1 is skipped, as Level Zero skips "
                          "it: under the FLAT hierarchy its entries index devices, not "
                          "<card>.<tile>",
                          "warning: ZE_AFFINITY_MASK entry 99 is skipped, as Level Zero skips "
                          "it: there are only 4 devices"));
}

TEST_F(TwoMaxCardsTest, CompositeMaskNamesCardsAndTilesOfCards) {
  environment_["ZE_FLAT_DEVICE_HIERARCHY"] = "COMPOSITE";
  environment_["ZE_AFFINITY_MASK"] = "1,0.1,0.5,2";
  const VendorHost host = find();
  EXPECT_EQ(identifiers(host), (std::vector<std::string>{"0.1", "1"}));
  EXPECT_EQ(recordNames(host),
            (std::vector<std::string>{"intel:00000000:18:00.0/1", "intel:00000000:42:00.0"}));
  EXPECT_EQ(host.units[0].description, "tile 1 of card 0 (00000000:18:00.0)");
  EXPECT_EQ(host.units[0].properties, (Properties{{"vendor", "intel"},
                                                  {"pci.bus_id", "00000000:18:00.0"},
                                                  {"pci.device_id", "0x0bd5"},
                                                  {"render_minor", "128"},
                                                  {"tile", "1"},
                                                  {"memory.total", "65536"}}));
  EXPECT_THAT(linesOf(host.notices),
              ElementsAre("warning: ZE_AFFINITY_MASK entry 0.5 is skipped, as Level Zero skips "
                          "it: card 0 has 2 tiles",
                          "warning: ZE_AFFINITY_MASK entry 2 is skipped, as Level Zero skips "
                          "it: there are only 2 cards"));
}

TEST_F(TwoMaxCardsTest, AnEmptyMaskHidesNothing) {
  environment_["ZE_AFFINITY_MASK"] = "";
  const VendorHost host = find();
  EXPECT_EQ(identifiers(host), (std::vector<std::string>{"0", "1", "2", "3"}));
  EXPECT_EQ(host.mask, std::nullopt);
}

TEST_F(TwoMaxCardsTest, AMaskEntryNotInDecimalIsAnErrorNamingTheVariable) {
  for (const char* mask : {"0x1", "01", "a", "0,,1", "1.", " "}) {
    environment_["ZE_AFFINITY_MASK"] = mask;
    const DiscoveryError e = findFails();
    EXPECT_THAT(e.what(), HasSubstr(std::string("ZE_AFFINITY_MASK=") + mask +
                                    " has an entry the discovery does not read"))
        << mask;
  }
}

TEST_F(TwoMaxCardsTest, TheSelectorIndexesWhatTheAffinityMaskLeft) {
  environment_["ZE_AFFINITY_MASK"] = "1,2,3";
  environment_["ONEAPI_DEVICE_SELECTOR"] = "level_zero:2,0";
  const VendorHost host = find();
  EXPECT_EQ(identifiers(host), (std::vector<std::string>{"0", "2"}));
  EXPECT_EQ(recordNames(host),
            (std::vector<std::string>{"intel:00000000:18:00.0/1", "intel:00000000:42:00.0/1"}));
  EXPECT_EQ(host.mask, "ONEAPI_DEVICE_SELECTOR=level_zero:2,0");
}

TEST_F(TwoMaxCardsTest, TheSelectorOfOneToZeroTakesBothInLevelZeroOrder) {
  environment_["ONEAPI_DEVICE_SELECTOR"] = "level_zero:1,0";
  const VendorHost host = find();
  EXPECT_EQ(identifiers(host), (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(recordNames(host),
            (std::vector<std::string>{"intel:00000000:18:00.0/0", "intel:00000000:18:00.0/1"}));
  EXPECT_THAT(linesOf(host.notices), IsEmpty());
}

TEST_F(TwoMaxCardsTest, TheSelectorsStarTakesEveryDeviceByItsIndex) {
  environment_["ZE_AFFINITY_MASK"] = "3,2";
  environment_["ONEAPI_DEVICE_SELECTOR"] = "level_zero:*";
  const VendorHost host = find();
  EXPECT_EQ(identifiers(host), (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(recordNames(host),
            (std::vector<std::string>{"intel:00000000:42:00.0/0", "intel:00000000:42:00.0/1"}));
  EXPECT_EQ(host.mask, "ONEAPI_DEVICE_SELECTOR=level_zero:*");
}

TEST_F(TwoMaxCardsTest, OtherSelectorFormsAreAnErrorNamingTheVariable) {
  for (const char* selector :
       {"!level_zero:0", "opencl:0", "level_zero:0;opencl:*", "level_zero:0.1", "*:0", ""}) {
    environment_["ONEAPI_DEVICE_SELECTOR"] = selector;
    const DiscoveryError e = findFails();
    EXPECT_EQ(e.what(), std::string("ONEAPI_DEVICE_SELECTOR=") + selector +
                            " is not a form the discovery reads")
        << selector;
  }
}

// ---- related units, memory ----

TEST_F(TwoMaxCardsTest, EachMultiTileCardIsRelatedToItsTilesWhateverTheHierarchy) {
  addCard({2, "0000:6c:00.0", 0x8086, 0x56c0, "i915", 1, {}, 130});
  for (const char* hierarchy : {"FLAT", "COMPOSITE"}) {
    environment_["ZE_FLAT_DEVICE_HIERARCHY"] = hierarchy;
    const VendorHost host = find();
    EXPECT_THAT(host.related,
                UnorderedElementsAre(
                    Pair("intel:00000000:18:00.0",
                         ElementsAre("intel:00000000:18:00.0/0", "intel:00000000:18:00.0/1")),
                    Pair("intel:00000000:18:00.0/0", ElementsAre("intel:00000000:18:00.0")),
                    Pair("intel:00000000:18:00.0/1", ElementsAre("intel:00000000:18:00.0")),
                    Pair("intel:00000000:42:00.0",
                         ElementsAre("intel:00000000:42:00.0/0", "intel:00000000:42:00.0/1")),
                    Pair("intel:00000000:42:00.0/0", ElementsAre("intel:00000000:42:00.0")),
                    Pair("intel:00000000:42:00.0/1", ElementsAre("intel:00000000:42:00.0"))))
        << hierarchy;
  }
}

TEST_F(IntelGpusTest, ACardsMemoryIsTheSumOfItsTilesAndAbsentWhenOneIsUnknown) {
  addCard({0, "0000:18:00.0", 0x8086, 0x0bd5, "xe", 2, {48 * kGiB, 16 * kGiB}, 128});
  addCard({1, "0000:42:00.0", 0x8086, 0x0bd5, "xe", 2, {48 * kGiB}, 129});
  VendorHost host = find();
  EXPECT_EQ(discovery::propertyOf(host.units[0].properties, "memory.total"), "49152");
  EXPECT_EQ(discovery::propertyOf(host.units[1].properties, "memory.total"), "16384");
  EXPECT_EQ(discovery::propertyOf(host.units[2].properties, "memory.total"), "49152");
  EXPECT_EQ(discovery::propertyOf(host.units[3].properties, "memory.total"), std::nullopt);
  environment_["ZE_FLAT_DEVICE_HIERARCHY"] = "COMPOSITE";
  host = find();
  EXPECT_EQ(discovery::propertyOf(host.units[0].properties, "memory.total"), "65536");
  EXPECT_EQ(discovery::propertyOf(host.units[1].properties, "memory.total"), std::nullopt);
}

// ---- render nodes ----

TEST_F(TwoMaxCardsTest, ACardWhoseRenderNodeCannotBeOpenedIsLeftOutWithANote) {
  addCard({2, "0000:6c:00.0", 0x8086, 0x0bd5, "xe", 2, {64 * kGiB, 64 * kGiB}, 130});
  const fs::path denied = options_.roots.dev / "dri" / "renderD128";
  options_.probe = [denied](const fs::path& node) {
    return node == denied ? EACCES : discovery::probeOpen(node);
  };
  fs::remove(options_.roots.dev / "dri" / "renderD130");
  const VendorHost host = find();
  EXPECT_EQ(identifiers(host), (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(recordNames(host),
            (std::vector<std::string>{"intel:00000000:42:00.0/0", "intel:00000000:42:00.0/1"}));
  EXPECT_THAT(linesOf(host.notices),
              ElementsAre("note: card 0 (00000000:18:00.0) is left out: " + denied.string() +
                              " cannot be opened: Permission denied (EACCES); Level Zero does "
                              "not see it in this process",
                          "note: card 2 (00000000:6C:00.0) is left out: " +
                              (options_.roots.dev / "dri" / "renderD130").string() +
                              " cannot be opened: No such file or directory (ENOENT); Level "
                              "Zero does not see it in this process"));
  // Its record still blocks its tiles for whoever can open it.
  EXPECT_EQ(host.related.count("intel:00000000:18:00.0"), 1u);
}

TEST_F(TwoMaxCardsTest, ACardWithoutARenderNodeIsLeftOutWithANote) {
  addCard({2, "0000:6c:00.0", 0x8086, 0x0bd5, "xe", 2, {64 * kGiB, 64 * kGiB}, std::nullopt});
  const VendorHost host = find();
  EXPECT_EQ(identifiers(host), (std::vector<std::string>{"0", "1", "2", "3"}));
  EXPECT_THAT(linesOf(host.notices),
              ElementsAre("note: card 2 (00000000:6C:00.0) is left out: it has no render node "
                          "(device/drm/renderD*)"));
}

TEST_F(MixedHostTest, ALeftOutCardIsANoteAndTheOrderLineStaysAWarning) {
  options_.probe = [this](const fs::path& node) {
    return node == options_.roots.dev / "dri" / "renderD130" ? ENXIO : discovery::probeOpen(node);
  };
  const VendorHost host = find();
  EXPECT_EQ(recordNames(host),
            (std::vector<std::string>{"intel:00000000:4D:00.0", "intel:00000000:00:02.0"}));
  EXPECT_THAT(linesOf(host.notices),
              ElementsAre("note: card 2 (00000000:03:00.0) is left out: " +
                              (options_.roots.dev / "dri" / "renderD130").string() +
                              " cannot be opened: No such device or address (ENXIO); Level Zero "
                              "does not see it in this process",
                          kWarning));
}

TEST_F(TwoMaxCardsTest, EveryCardLeftOutIsAnError) {
  options_.probe = [](const fs::path&) { return EPERM; };
  const DiscoveryError e = findFails();
  EXPECT_STREQ(e.what(), "no usable Intel GPU: every card is left out");
  EXPECT_EQ(e.kind(), DiscoveryError::Kind::kNoUsableGpu);
  ASSERT_EQ(e.details().size(), 2u);
  EXPECT_THAT(e.details()[1], HasSubstr("card 1 (00000000:42:00.0) is left out: "));
  EXPECT_THAT(e.details()[1], HasSubstr("Operation not permitted (EPERM)"));
}

// ---- what exec sets ----

TEST_F(TwoMaxCardsTest, ExecGetsTheIndicesAndThePciOrderVariable) {
  const VendorHost host = find();
  EXPECT_EQ(host.environmentFor(pick(host, {3, 1}), false),
            (Variables{{"ZE_AFFINITY_MASK", "3,1"}, {"ZE_ENABLE_PCI_ID_DEVICE_ORDER", "1"}}));
}

TEST_F(TwoMaxCardsTest, ExecKeepsThePciOrderVariableWhenSetZeroIncluded) {
  for (const char* value : {"0", "1"}) {
    environment_["ZE_ENABLE_PCI_ID_DEVICE_ORDER"] = value;
    const VendorHost host = find();
    EXPECT_EQ(host.environmentFor(pick(host, {2}), false), (Variables{{"ZE_AFFINITY_MASK", "2"}}))
        << value;
  }
}

TEST_F(TwoMaxCardsTest, ExecUnderCompositeGetsCardIndices) {
  environment_["ZE_FLAT_DEVICE_HIERARCHY"] = "COMPOSITE";
  const VendorHost host = find();
  EXPECT_EQ(host.environmentFor(pick(host, {1}), false),
            (Variables{{"ZE_AFFINITY_MASK", "1"}, {"ZE_ENABLE_PCI_ID_DEVICE_ORDER", "1"}}));
}

TEST_F(TwoMaxCardsTest, ExecNarrowsAnInheritedAffinityMaskToItsOwnEntries) {
  environment_["ZE_FLAT_DEVICE_HIERARCHY"] = "COMPOSITE";
  environment_["ZE_AFFINITY_MASK"] = "1,0.1";
  const VendorHost host = find();
  ASSERT_EQ(identifiers(host), (std::vector<std::string>{"0.1", "1"}));
  EXPECT_EQ(host.environmentFor(pick(host, {0}), false),
            (Variables{{"ZE_AFFINITY_MASK", "0.1"}, {"ZE_ENABLE_PCI_ID_DEVICE_ORDER", "1"}}));
}

TEST_F(TwoMaxCardsTest, ExecNarrowsAnInheritedSelectorInItsOwnForm) {
  environment_["ZE_AFFINITY_MASK"] = "1,2,3";
  environment_["ONEAPI_DEVICE_SELECTOR"] = "level_zero:2,0";
  const VendorHost host = find();
  EXPECT_EQ(host.environmentFor(pick(host, {1}), false),
            (Variables{{"ONEAPI_DEVICE_SELECTOR", "level_zero:2"},
                       {"ZE_ENABLE_PCI_ID_DEVICE_ORDER", "1"}}));
}

TEST_F(MixedHostTest, ExecWithoutAMaskGivesIndicesInThePciOrderItSets) {
  const VendorHost host = find();
  // Unit 0 is 0000:03:00.0, Level Zero's 0 here and 1 in PCI order; the integrated one is 2 and 0.
  EXPECT_EQ(host.environmentFor(pick(host, {0, 2}), false),
            (Variables{{"ZE_AFFINITY_MASK", "1,0"}, {"ZE_ENABLE_PCI_ID_DEVICE_ORDER", "1"}}));
}

TEST_F(MixedHostTest, ExecWithAnInheritedMaskLeavesTheOrderAsTheMaskReadsIt) {
  environment_["ZE_AFFINITY_MASK"] = "2,0";
  const VendorHost host = find();
  ASSERT_EQ(recordNames(host),
            (std::vector<std::string>{"intel:00000000:03:00.0", "intel:00000000:00:02.0"}));
  EXPECT_EQ(host.environmentFor(pick(host, {1}), false), (Variables{{"ZE_AFFINITY_MASK", "2"}}));
}

TEST_F(MixedHostTest, ExecWithThePciOrderVariableSetKeepsItAndItsIndices) {
  environment_["ZE_ENABLE_PCI_ID_DEVICE_ORDER"] = "1";
  const VendorHost host = find();
  EXPECT_EQ(host.environmentFor(pick(host, {0}), false), (Variables{{"ZE_AFFINITY_MASK", "0"}}));
}

TEST_F(TwoMaxCardsTest, ExecRefusesUuidsAndAnEmptyGrant) {
  const VendorHost host = find();
  EXPECT_THROW(host.environmentFor(pick(host, {0}), true), std::invalid_argument);
  try {
    host.environmentFor(pick(host, {0}), true);
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("Intel GPUs have no UUID form here"));
  }
  EXPECT_THROW(host.environmentFor({}, false), std::invalid_argument);
}

TEST_F(TwoMaxCardsTest, ExecStillWorksOnACopyOfTheHost) {
  VendorHost copy;
  {
    const VendorHost host = find();
    copy = host;
  }
  EXPECT_EQ(copy.environmentFor(pick(copy, {1}), false),
            (Variables{{"ZE_AFFINITY_MASK", "1"}, {"ZE_ENABLE_PCI_ID_DEVICE_ORDER", "1"}}));
}

// ---- xpu-smi, where sysfs has no DRM folder ----

class XpuSmiFallbackTest : public IntelGpusTest {
 protected:
  XpuSmiFallbackTest() { fs::remove_all(options_.roots.sysfs / "class" / "drm"); }
  void standInPrints(const std::string& body) {
    testing::writeScript(dir_ / "bin" / "xpu-smi", "#!/bin/sh\n" + body);
  }
  void standInPrintsTheFixture() {
    standInPrints(
        "[ \"$1 $2\" = \"discovery -j\" ] || exit 3\n"
        "cat '" INTEL_FIXTURES "/xpu-smi-discovery.json'\n");
  }
  std::string drm() const { return (options_.roots.sysfs / "class/drm").string(); }
};

TEST_F(XpuSmiFallbackTest, UnderCompositeXpuSmisCardsAreTakenInPciOrderWithTheirNames) {
  standInPrintsTheFixture();
  environment_["ZE_FLAT_DEVICE_HIERARCHY"] = "COMPOSITE";
  const VendorHost host = find();
  EXPECT_EQ(identifiers(host), (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(recordNames(host),
            (std::vector<std::string>{"intel:00000000:18:00.0", "intel:00000000:9A:00.0"}));
  EXPECT_EQ(host.units[0].description, "GPU 00000000:18:00.0");
  EXPECT_EQ(host.units[0].properties, (Properties{{"vendor", "intel"},
                                                  {"name", "Intel(R) Data Center GPU Max 1550"},
                                                  {"pci.bus_id", "00000000:18:00.0"},
                                                  {"pci.device_id", "0x0bd5"}}));
  EXPECT_THAT(linesOf(host.notices),
              ElementsAre("warning: " + drm() +
                          " does not exist, so the Intel GPUs are xpu-smi's, one device per card "
                          "as Level Zero's COMPOSITE hierarchy numbers them; xpu-smi lists cards "
                          "this process may not open, too"));
  EXPECT_EQ(host.mask, std::nullopt);
  EXPECT_THAT(host.related, IsEmpty());
  EXPECT_EQ(host.environmentFor(pick(host, {1}), false),
            (Variables{{"ZE_AFFINITY_MASK", "1"}, {"ZE_ENABLE_PCI_ID_DEVICE_ORDER", "1"}}));
}

TEST_F(XpuSmiFallbackTest, UnderFlatXpuSmisCardsAreNotNumbered) {
  // Two Max 1550s: Level Zero's FLAT devices 0..3, xpu-smi's cards 0 and 1.
  standInPrintsTheFixture();
  const std::string hint =
      "to make the discovery answer, set ZE_FLAT_DEVICE_HIERARCHY=COMPOSITE (Level Zero then "
      "numbers cards, as xpu-smi lists them) for the discovery and the worker alike, or give "
      "this process sysfs's class/drm (mount the host's /sys, or set FLINK_GPU_SYSFS_ROOT to "
      "where it is mounted), where every card's tiles are listed";
  const std::string listed = drm() +
                             " does not exist, so the Intel GPUs would be xpu-smi's: it lists 2 "
                             "cards, and its discovery -j does not say how many tiles each has";
  const std::map<std::optional<std::string>, std::string> says = {
      {std::nullopt, "ZE_FLAT_DEVICE_HIERARCHY is unset, and Level Zero's default is FLAT"},
      {"", "ZE_FLAT_DEVICE_HIERARCHY is empty, which Level Zero reads as FLAT"},
      {"FLAT", "ZE_FLAT_DEVICE_HIERARCHY=FLAT"},
      {"COMBINED", "ZE_FLAT_DEVICE_HIERARCHY=COMBINED"}};
  for (const auto& [value, line] : says) {
    if (value) {
      environment_["ZE_FLAT_DEVICE_HIERARCHY"] = *value;
    } else {
      environment_.erase("ZE_FLAT_DEVICE_HIERARCHY");
    }
    const DiscoveryError e = findFails();
    EXPECT_STREQ(e.what(),
                 "the Intel GPUs cannot be numbered from xpu-smi: xpu-smi counts cards, while "
                 "Level Zero's FLAT hierarchy counts tiles (a two-tile card is two devices)")
        << line;
    EXPECT_EQ(e.kind(), DiscoveryError::Kind::kFailed) << line;
    EXPECT_THAT(e.details(), ElementsAre(listed, line, hint));
  }
}

TEST_F(XpuSmiFallbackTest, UnderFlatEvenOneCardIsNotNumbered) {
  standInPrints(
      "echo '{\"device_list\": [{\"device_id\": 0, \"pci_bdf_address\": \"0000:4d:00.0\"}]}'\n");
  const DiscoveryError e = findFails();
  ASSERT_EQ(e.details().size(), 3u);
  EXPECT_EQ(e.details()[0], drm() +
                                " does not exist, so the Intel GPUs would be xpu-smi's: it lists 1 "
                                "card, and its discovery -j does not say how many tiles each has");
}

TEST_F(XpuSmiFallbackTest, UnderCompositeAMaskOfCardsIsRead) {
  standInPrintsTheFixture();
  environment_["ZE_FLAT_DEVICE_HIERARCHY"] = "COMPOSITE";
  environment_["ZE_AFFINITY_MASK"] = "1";
  VendorHost host = find();
  EXPECT_EQ(identifiers(host), (std::vector<std::string>{"1"}));
  EXPECT_EQ(recordNames(host), (std::vector<std::string>{"intel:00000000:9A:00.0"}));
  EXPECT_EQ(host.mask, "ZE_AFFINITY_MASK=1");
  EXPECT_EQ(host.environmentFor(pick(host, {0}), false),
            (Variables{{"ZE_AFFINITY_MASK", "1"}, {"ZE_ENABLE_PCI_ID_DEVICE_ORDER", "1"}}));
  environment_["ONEAPI_DEVICE_SELECTOR"] = "level_zero:0";
  host = find();
  EXPECT_EQ(identifiers(host), (std::vector<std::string>{"0"}));
  EXPECT_EQ(recordNames(host), (std::vector<std::string>{"intel:00000000:9A:00.0"}));
}

TEST_F(XpuSmiFallbackTest, UnderCompositeAMaskNamingTilesIsAnError) {
  standInPrintsTheFixture();
  environment_["ZE_FLAT_DEVICE_HIERARCHY"] = "COMPOSITE";
  environment_["ZE_AFFINITY_MASK"] = "0, 1.0,1.1";
  const DiscoveryError e = findFails();
  EXPECT_STREQ(e.what(),
               "ZE_AFFINITY_MASK=0, 1.0,1.1 names tiles (1.0, 1.1), which the discovery cannot "
               "place from xpu-smi's list");
  EXPECT_THAT(
      e.details(),
      ElementsAre(drm() + " does not exist, so the Intel GPUs would be xpu-smi's: it lists 2 "
                          "cards, and its discovery -j does not say how many tiles each has",
                  "to make the discovery answer, give the mask whole cards only, or give "
                  "this process sysfs's class/drm (mount the host's /sys, or set "
                  "FLINK_GPU_SYSFS_ROOT to where it is mounted), where every card's "
                  "tiles are listed"));
}

TEST_F(XpuSmiFallbackTest, AnAnswerThatIsNotItsJsonFailsQuotingIt) {
  standInPrints("echo 'Error: Level Zero Initialization Error'\n");
  const DiscoveryError e = findFails();
  EXPECT_STREQ(e.what(),
               "xpu-smi discovery -j answered something that is not its JSON device list: not "
               "JSON");
  EXPECT_THAT(e.details(),
              ElementsAre("xpu-smi printed: Error: Level Zero Initialization Error\\n"));
  standInPrints("echo '{\"devices\": []}'\n");
  EXPECT_THAT(findFails().what(), HasSubstr("no device_list array"));
}

TEST_F(XpuSmiFallbackTest, AnEmptyDeviceListIsNoIntelGpu) {
  standInPrints("echo '{\"device_list\": []}'\n");
  const DiscoveryError e = findFails();
  EXPECT_STREQ(e.what(), "no Intel GPU");
  EXPECT_EQ(e.kind(), DiscoveryError::Kind::kNoGpu);
}

TEST_F(XpuSmiFallbackTest, NoDrmAndNoToolNamesBoth) {
  const DiscoveryError e = findFails();
  const std::string drm = (options_.roots.sysfs / "class/drm").string();
  EXPECT_EQ(e.what(),
            "cannot list Intel GPUs: " + drm + " does not exist and xpu-smi is not found");
  EXPECT_EQ(e.kind(), DiscoveryError::Kind::kNoDriver);
  EXPECT_THAT(e.details(),
              ElementsAre("looked for DRM's cards in " + drm,
                          "looked for xpu-smi on the path " + (dir_ / "bin").string()));
}

TEST_F(XpuSmiFallbackTest, AFailingToolFailsTheDiscovery) {
  standInPrints("echo 'no service' >&2\nexit 2\n");
  const DiscoveryError e = findFails();
  EXPECT_STREQ(e.what(), "xpu-smi discovery -j exited with code 2");
  EXPECT_THAT(e.details(), ElementsAre("on stderr: no service\\n"));
}

TEST_F(IntelGpusTest, WithDrmNoToolIsRun) {
  addCard({0, "0000:18:00.0", 0x8086, 0x56c0, "i915", 1, {}, 128});
  testing::writeScript(dir_ / "bin" / "xpu-smi",
                       "#!/bin/sh\ntouch '" + (dir_ / "ran").string() + "'\nexit 1\n");
  EXPECT_EQ(find().units.size(), 1u);
  EXPECT_FALSE(fs::exists(dir_ / "ran"));
}

}  // namespace
}  // namespace flink::intel
