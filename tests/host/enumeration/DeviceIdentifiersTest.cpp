// The grammar of device identifiers, which the discovery answer, the coordination and health
// files and the command line all read through.
#include "host/enumeration/DeviceIdentifiers.h"

#include <gtest/gtest.h>

namespace flink::device {
namespace {

TEST(DeviceIdentifiersTest, IndicesOfAtMostNineDigits) {
  EXPECT_TRUE(isDeviceIdentifier("0"));
  EXPECT_TRUE(isDeviceIdentifier("007"));
  EXPECT_TRUE(isDeviceIdentifier("999999999"));
  EXPECT_FALSE(isDeviceIdentifier("1000000000"));
  EXPECT_FALSE(isDeviceIdentifier(""));
  EXPECT_FALSE(isDeviceIdentifier(" 0"));
  EXPECT_FALSE(isDeviceIdentifier("-1"));
  EXPECT_FALSE(isDeviceIdentifier("1.5e3"));
}

TEST(DeviceIdentifiersTest, LevelZeroCardDotTileIsAnIdentifier) {
  // ZE_AFFINITY_MASK's `<card>.<tile>` under the COMPOSITE hierarchy, printed as spelled.
  EXPECT_TRUE(isDeviceIdentifier("1.0"));
  EXPECT_TRUE(isDeviceIdentifier("07.01"));
  EXPECT_EQ(canonicalDeviceIdentifier("07.01"), "7.1");
  EXPECT_FALSE(isCanonicalDeviceIdentifier("07.01"));
  EXPECT_TRUE(isCanonicalDeviceIdentifier("7.1"));
  for (const char* bad : {"1.", ".1", "1.2.3", "1.-1", "1.0x1", "1000000000.0"}) {
    EXPECT_FALSE(isDeviceIdentifier(bad)) << bad;
  }
}

TEST(DeviceIdentifiersTest, AmdAndIntelRecordNamesAreByVendorAndPciBusId) {
  EXPECT_TRUE(isVendorUnitName("amd:00000000:05:00.3"));
  EXPECT_TRUE(isVendorUnitName("amd:0000:e3:00.0"));
  EXPECT_TRUE(isVendorUnitName("intel:00000000:5A:00.0"));
  EXPECT_TRUE(isVendorUnitName("intel:00000000:5A:00.0/1"));
  EXPECT_TRUE(isDeviceIdentifier("intel:00000000:5A:00.0/1"));
  for (const char* bad :
       {"amd:", "amd:05:00.0", "amd:00000000:05:00.8", "amd:00000000:5:00.0",
        "amd:00000000:05:00.0/1", "intel:00000000:5A:00.0/", "intel:00000000:5A:00.0/x",
        "nvidia:00000000:05:00.0", "amd:00000000:05:00.0 ", "AMD:00000000:05:00.0"}) {
    EXPECT_FALSE(isVendorUnitName(bad)) << bad;
    EXPECT_FALSE(isDeviceIdentifier(bad)) << bad;
  }
  // One unit, however its bus id's hex is spelled: NVML's upper case.
  EXPECT_EQ(canonicalDeviceIdentifier("intel:00000000:5a:00.0/01"), "intel:00000000:5A:00.0/1");
  EXPECT_EQ(canonicalDeviceIdentifier("amd:0000:e3:00.0"), "amd:00000000:E3:00.0");
  EXPECT_FALSE(isCanonicalDeviceIdentifier("amd:0000:E3:00.0"));
  EXPECT_TRUE(isCanonicalDeviceIdentifier("amd:00000000:E3:00.0"));
  EXPECT_FALSE(isCanonicalDeviceIdentifier("amd:00000000:e3:00.0"));
  EXPECT_EQ(vendorOfUnit("amd:00000000:E3:00.0"), "amd");
  EXPECT_EQ(vendorOfUnit("intel:00000000:5A:00.0"), "intel");
  EXPECT_EQ(vendorOfUnit("0"), "nvidia");
  EXPECT_EQ(vendorOfUnit("GPU-8932f937"), "nvidia");
}

TEST(DeviceIdentifiersTest, GpuAndMigUuidsAndTheirPrefixes) {
  EXPECT_TRUE(isDeviceIdentifier("GPU-6a2ce2c5-4a5e-b1c0-36a8-7f1e6c1d7d95"));
  EXPECT_TRUE(isDeviceIdentifier("GPU-ABCDEF01-2345"));
  EXPECT_TRUE(isDeviceIdentifier("GPU-6a"));  // a prefix, which CUDA matches
  EXPECT_TRUE(isDeviceIdentifier("MIG-1f2e3d4c-5b6a-7980-a1b2-c3d4e5f60718"));
  EXPECT_FALSE(isDeviceIdentifier("GPU-"));
  EXPECT_FALSE(isDeviceIdentifier("GPU--"));
  EXPECT_FALSE(isDeviceIdentifier("GPU-xyz"));
  EXPECT_FALSE(isDeviceIdentifier("gpu-6a"));
  EXPECT_FALSE(isDeviceIdentifier("No devices were found"));
}

TEST(DeviceIdentifiersTest, OlderMigFormNeedsAllThreeParts) {
  EXPECT_TRUE(isDeviceIdentifier("MIG-GPU-6a2ce2c5-4a5e/1/0"));
  EXPECT_FALSE(isDeviceIdentifier("MIG-GPU-6a2ce2c5-4a5e/1"));
  EXPECT_FALSE(isDeviceIdentifier("MIG-GPU-6a2ce2c5-4a5e/1/0/2"));
  EXPECT_FALSE(isDeviceIdentifier("MIG-GPU-6a2ce2c5-4a5e/a/0"));
  EXPECT_FALSE(isDeviceIdentifier("MIG-GPU-6a2ce2c5-4a5e//0"));
  EXPECT_FALSE(isDeviceIdentifier("MIG-GPU-/1/0"));
}

TEST(DeviceIdentifiersTest, CanonicalFormDropsLeadingZerosOfIndicesOnly) {
  EXPECT_EQ(canonicalDeviceIdentifier("007"), "7");
  EXPECT_EQ(canonicalDeviceIdentifier("000"), "0");
  EXPECT_EQ(canonicalDeviceIdentifier("10"), "10");
  EXPECT_EQ(canonicalDeviceIdentifier("GPU-0a"), "GPU-0a");
  EXPECT_EQ(canonicalDeviceIdentifier("GPU-00"), "GPU-00");
}

TEST(DeviceIdentifiersTest, UuidFormsAreToldApartFromIndices) {
  EXPECT_TRUE(isUuid("GPU-6a"));
  EXPECT_TRUE(isUuid("MIG-1f"));
  EXPECT_FALSE(isUuid("0"));
  EXPECT_TRUE(isMigUuid("MIG-GPU-6a/1/0"));
  EXPECT_FALSE(isMigUuid("GPU-6a"));
}

}  // namespace
}  // namespace flink::device
