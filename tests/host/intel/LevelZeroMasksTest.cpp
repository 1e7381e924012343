// levelZeroDevices, parseHierarchy and the DRM helpers as pure functions: the corners of Level
// Zero's mask rules that a stand-in host need not be built for.
#include "host/intel/LevelZeroMasks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "host/enumeration/GpuEnumerator.h"
#include "host/intel/DrmCards.h"

namespace flink::intel {
namespace {

using discovery::DiscoveryError;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const std::vector<unsigned> kTwoMax = {2, 2};

TEST(LevelZeroMasksTest, WithoutMasksFlatCountsTilesCardMajorAndCompositeCards) {
  const std::vector<unsigned> tiles = {2, 1, 2};
  EXPECT_THAT(levelZeroDevices(tiles, Hierarchy::kFlat, nullptr, nullptr).devices,
              ElementsAre(LevelZeroDevice{0, 0, "0", true}, LevelZeroDevice{0, 1, "1", true},
                          LevelZeroDevice{1, std::nullopt, "2", true},
                          LevelZeroDevice{2, 0, "3", true}, LevelZeroDevice{2, 1, "4", true}));
  EXPECT_THAT(levelZeroDevices(tiles, Hierarchy::kComposite, nullptr, nullptr).devices,
              ElementsAre(LevelZeroDevice{0, std::nullopt, "0", true},
                          LevelZeroDevice{1, std::nullopt, "1", true},
                          LevelZeroDevice{2, std::nullopt, "2", true}));
  EXPECT_EQ(unmaskedIndex(tiles, Hierarchy::kFlat, 2, 1u), 4u);
  EXPECT_EQ(unmaskedIndex(tiles, Hierarchy::kFlat, 1, std::nullopt), 2u);
  EXPECT_EQ(unmaskedIndex(tiles, Hierarchy::kComposite, 2, std::nullopt), 2u);
}

TEST(LevelZeroMasksTest, DefaultAndEmptyAreNoMask) {
  for (const char* mask : {"", "default"}) {
    const LevelZeroDevices result = levelZeroDevices(kTwoMax, Hierarchy::kFlat, mask, nullptr);
    EXPECT_EQ(result.devices.size(), 4u) << mask;
    EXPECT_EQ(result.mask, std::nullopt) << mask;
    EXPECT_EQ(result.maskVariable, MaskVariable::kNone) << mask;
  }
}

TEST(LevelZeroMasksTest, AnEntryNamedTwiceCountsOnceAndATrailingCommaIsDropped) {
  const LevelZeroDevices result = levelZeroDevices(kTwoMax, Hierarchy::kFlat, "2, 2,0,", nullptr);
  EXPECT_THAT(result.devices,
              ElementsAre(LevelZeroDevice{0, 0, "0", true}, LevelZeroDevice{1, 0, "2", true}));
  EXPECT_THAT(linesOf(result.warnings), IsEmpty());
  EXPECT_EQ(result.mask, "ZE_AFFINITY_MASK=2, 2,0,");
}

TEST(LevelZeroMasksTest, CompositeTileOfASingleTileCardIsTheCard) {
  const LevelZeroDevices result =
      levelZeroDevices({1, 2}, Hierarchy::kComposite, "0.0,1.0", nullptr);
  EXPECT_THAT(result.devices, ElementsAre(LevelZeroDevice{0, std::nullopt, "0.0", true},
                                          LevelZeroDevice{1, 0, "1.0", true}));
}

TEST(LevelZeroMasksTest, CompositeCardAndItsTileIsTheWholeCard) {
  const LevelZeroDevices result =
      levelZeroDevices(kTwoMax, Hierarchy::kComposite, "0.1,0", nullptr);
  EXPECT_THAT(result.devices, ElementsAre(LevelZeroDevice{0, std::nullopt, "0", true}));
}

TEST(LevelZeroMasksTest, CompositeTilesJoinedIntoOneDeviceAreNotHandedOut) {
  const LevelZeroDevices result =
      levelZeroDevices(kTwoMax, Hierarchy::kComposite, "0.1,0.0,1", "level_zero:1");
  // Level Zero's device 0 is card 0 made of both its tiles: it still takes index 0.
  EXPECT_THAT(result.devices, ElementsAre(LevelZeroDevice{1, std::nullopt, "1", true}));
  EXPECT_THAT(linesOf(result.warnings),
              ElementsAre("warning: ZE_AFFINITY_MASK names 0.0 and 0.1, tiles of card 0: Level "
                          "Zero makes them one device, which is not handed out"));
  const LevelZeroDevices joined =
      levelZeroDevices(kTwoMax, Hierarchy::kComposite, "0.1,0.0", nullptr);
  EXPECT_THAT(joined.devices, ElementsAre(LevelZeroDevice{0, std::nullopt, "0.0", false}));
}

TEST(LevelZeroMasksTest, CompositeThreePartEntriesAreRefusedFlatSkipsThem) {
  EXPECT_THROW(levelZeroDevices(kTwoMax, Hierarchy::kComposite, "0.1.0", nullptr), DiscoveryError);
  const LevelZeroDevices flat = levelZeroDevices(kTwoMax, Hierarchy::kFlat, "0.1.0,1", nullptr);
  EXPECT_THAT(flat.devices, ElementsAre(LevelZeroDevice{0, 1, "1", true}));
  EXPECT_EQ(linesOf(flat.warnings).size(), 1u);
}

TEST(LevelZeroMasksTest, ASelectorEntryPastTheLastDeviceIsSkippedWithAWarning) {
  const LevelZeroDevices result =
      levelZeroDevices(kTwoMax, Hierarchy::kComposite, nullptr, "LEVEL_ZERO:5,1");
  EXPECT_THAT(result.devices, ElementsAre(LevelZeroDevice{1, std::nullopt, "1", true}));
  EXPECT_THAT(linesOf(result.warnings),
              ElementsAre("warning: ONEAPI_DEVICE_SELECTOR entry 5 is skipped: "
                          "Level Zero gives 2 devices"));
  EXPECT_EQ(result.mask, "ONEAPI_DEVICE_SELECTOR=LEVEL_ZERO:5,1");
}

TEST(LevelZeroMasksTest, TheSelectorsGpuIsEveryDevice) {
  const LevelZeroDevices result = levelZeroDevices({1, 1}, Hierarchy::kFlat, "1", "level_zero:gpu");
  EXPECT_THAT(result.devices, ElementsAre(LevelZeroDevice{1, std::nullopt, "0", true}));
}

TEST(LevelZeroMasksTest, HierarchyValues) {
  EXPECT_EQ(parseHierarchy(nullptr), Hierarchy::kFlat);
  EXPECT_EQ(parseHierarchy(""), Hierarchy::kFlat);
  EXPECT_EQ(parseHierarchy("FLAT"), Hierarchy::kFlat);
  EXPECT_EQ(parseHierarchy("COMBINED"), Hierarchy::kFlat);
  EXPECT_EQ(parseHierarchy("COMPOSITE"), Hierarchy::kComposite);
  try {
    parseHierarchy("Flat");
    FAIL() << "no exception";
  } catch (const DiscoveryError& e) {
    EXPECT_THAT(e.what(), HasSubstr("ZE_FLAT_DEVICE_HIERARCHY=Flat"));
  }
}

TEST(DrmCardsTest, PciAddressesAndPciOrderValues) {
  EXPECT_EQ(parsePciAddress("0000:5a:00.0")->nvmlForm(), "00000000:5A:00.0");
  EXPECT_EQ(parsePciAddress("10000:e1:1f.7")->nvmlForm(), "00010000:E1:1F.7");
  EXPECT_TRUE(parsePciAddress("0000:00:02.0")->isIntegrated());
  for (const char* bad :
       {"", "5a:00.0", "0000:5a:00", "0000:5a:00.8", "0000:5a:0.0", "0000:5g:00.0", "card0"}) {
    EXPECT_EQ(parsePciAddress(bad), std::nullopt) << bad;
  }
  EXPECT_FALSE(pciOrderRequested(nullptr));
  EXPECT_FALSE(pciOrderRequested(""));
  EXPECT_FALSE(pciOrderRequested("0"));
  EXPECT_FALSE(pciOrderRequested("no"));
  EXPECT_TRUE(pciOrderRequested("1"));
  EXPECT_TRUE(pciOrderRequested("2"));
}

}  // namespace
}  // namespace flink::intel
