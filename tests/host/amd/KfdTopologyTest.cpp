// The KFD topology's pure parts: properties files, location_id, PCI address forms, partitions.
#include "host/amd/KfdTopology.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "FakeAmdHost.h"
#include "host/enumeration/GpuEnumerator.h"

namespace flink::amd {
namespace {

using discovery::DiscoveryError;
using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(KfdTopology, PropertiesAreNameAndDecimalPerLine) {
  const KfdProperties properties =
      parseKfdProperties("simd_count 416\n\nunique_id 17888023871577450191\n", "p");
  EXPECT_EQ(properties.get("simd_count"), 416U);
  EXPECT_EQ(properties.get("unique_id"), 17888023871577450191ULL);
  EXPECT_EQ(properties.get("domain"), std::nullopt);
}

TEST(KfdTopology, MalformedLinesNameFileAndLine) {
  for (const std::string text :
       {"simd_count 416\nlocation_id\n", "simd_count 416\nx -1\n", "simd_count 416\nx 1 2\n",
        "simd_count 416\nx 99999999999999999999\n", "simd_count 416\nx 0x10\n"}) {
    try {
      parseKfdProperties(text, "/sys/x/properties");
      ADD_FAILURE() << text;
    } catch (const DiscoveryError& e) {
      EXPECT_THAT(e.what(), AllOf(HasSubstr("/sys/x/properties"), HasSubstr("line 2")));
    }
  }
}

TEST(KfdTopology, LocationIdBitsAndInterimPartitionBits) {
  const LocationId plain = decodeLocationId(25344, 0);  // 0x6300
  EXPECT_EQ(plain.address, (PciAddress{0, 0x63, 0, 0}));
  const LocationId fn = decodeLocationId(0x0503 | (3 << 3), 2);
  EXPECT_EQ(fn.address, (PciAddress{2, 0x05, 3, 3}));
  EXPECT_EQ(fn.highPartition, 0U);
  EXPECT_EQ(decodeLocationId((5ULL << 28) | 0x0500, 0).highPartition, 5U);
}

TEST(KfdTopology, BusIdForms) {
  EXPECT_EQ(nvmlBusId(PciAddress{0, 0x63, 0, 0}), "00000000:63:00.0");
  EXPECT_EQ(nvmlBusId(PciAddress{2, 0x41, 0, 1}), "00000002:41:00.1");
  EXPECT_EQ(sysfsPciName(PciAddress{0, 0xe3, 0x1f, 0}), "0000:e3:1f.0");
  EXPECT_EQ(sysfsPciName(PciAddress{0x10000, 0x1, 0, 0}), "10000:01:00.0");
  EXPECT_EQ(parsePciAddress("0000:C3:00.0"), (PciAddress{0, 0xc3, 0, 0}));
  EXPECT_EQ(parsePciAddress("00000002:41:00.1"), (PciAddress{2, 0x41, 0, 1}));
  EXPECT_EQ(parsePciAddress("63:00.0"), (PciAddress{0, 0x63, 0, 0}));
  EXPECT_EQ(parsePciAddress("0000:63:00.8"), std::nullopt);
  EXPECT_EQ(parsePciAddress("0000:63:20.0"), std::nullopt);
  EXPECT_EQ(parsePciAddress("N/A"), std::nullopt);
}

TEST(KfdTopology, ReadsNodesInNumericOrderAndSkipsOtherNames) {
  testing::FakeAmdHost fake;
  fake.cpu(0);
  fake.gpu(testing::gpuAt(10, 0x0a00, 138));
  fake.gpu(testing::gpuAt(9, 0x0900, 137));
  fake.gpu(testing::gpuAt(1, 0x0100, 128));
  testing::FakeAmdHost::touch(fake.nodes() / "README");
  const auto nodes = readKfdTopology(fake.sysfs());
  ASSERT_TRUE(nodes);
  ASSERT_EQ(nodes->size(), 4U);
  EXPECT_EQ((*nodes)[0].id, 0U);
  EXPECT_FALSE((*nodes)[0].gpu);
  EXPECT_EQ((*nodes)[1].id, 1U);
  EXPECT_EQ((*nodes)[2].id, 9U);
  EXPECT_EQ((*nodes)[3].id, 10U);
  EXPECT_EQ((*nodes)[3].renderMinor, 138U);
  EXPECT_EQ(readKfdTopology(fake.root() / "nowhere"), std::nullopt);
}

TEST(KfdTopology, NodesSharingBusDeviceAndUniqueIdArePartitions) {
  std::vector<KfdNode> nodes(3);
  for (unsigned p = 0; p < 2; ++p) {
    nodes[p].gpu = true;
    nodes[p].uniqueId = 7;
    nodes[p].location = decodeLocationId(0x0500 | p, 0);
  }
  nodes[2].gpu = true;
  nodes[2].uniqueId = 8;
  nodes[2].location = decodeLocationId(0x0600, 0);
  const std::vector<KfdUnit> units = kfdUnitsOf(nodes);
  ASSERT_EQ(units.size(), 3U);
  EXPECT_EQ(units[1].partition, 1U);
  EXPECT_EQ(nvmlBusId(units[1].busId), "00000000:05:00.1");
  EXPECT_EQ(nvmlBusId(units[1].device), "00000000:05:00.0");
  EXPECT_EQ(units[0].partition, 0U);
  EXPECT_EQ(units[2].partition, std::nullopt);
}

}  // namespace
}  // namespace flink::amd
