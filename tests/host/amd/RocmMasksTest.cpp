// ROCR_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES read over a list of UUIDs.
#include "host/amd/RocmMasks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

namespace flink::amd {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const std::vector<std::optional<std::string>> kUuids{"GPU-1901ead3a2ecd4a6", "GPU-51276ac12ce05db3",
                                                     std::nullopt, "GPU-51276ac12ce05db3",
                                                     "GPU-93bb3629c01aea1c"};

TEST(RocmMasks, RocrIndicesTrimmedReadByStrtolBaseZero) {
  const MaskReading reading = readRocrVisibleDevices(" 4 ,0x2,01", kUuids);
  EXPECT_THAT(reading.chosen, ElementsAre(4U, 2U, 1U));
  EXPECT_THAT(reading.spelled, ElementsAre("4", "0x2", "01"));
  EXPECT_EQ(reading.stop, std::nullopt);
}

TEST(RocmMasks, RocrEndsAtNegativeGarbageOrEmptyEntries) {
  for (const std::string value : {"0,-1,1", "0,x,1", "0,,1", "0,5,1", "0,1e,1"}) {
    const MaskReading reading = readRocrVisibleDevices(value, kUuids);
    EXPECT_THAT(reading.chosen, ElementsAre(0U)) << value;
    EXPECT_THAT(reading.stop.value_or(""), HasSubstr("(entry 2)")) << value;
  }
  EXPECT_THAT(readRocrVisibleDevices("", kUuids).chosen, IsEmpty());
  EXPECT_THAT(readRocrVisibleDevices("", kUuids).stop.value_or(""), HasSubstr("set and empty"));
}

TEST(RocmMasks, RocrUuidPrefixesOfFiveToTwentyCharacters) {
  EXPECT_THAT(readRocrVisibleDevices("gpu-9", kUuids).chosen, ElementsAre(4U));
  EXPECT_THAT(readRocrVisibleDevices("GPU-1901EAD3A2ECD4A6", kUuids).chosen, ElementsAre(0U));
  EXPECT_THAT(readRocrVisibleDevices("GPU-", kUuids).chosen, IsEmpty());
  EXPECT_THAT(readRocrVisibleDevices("GPU-1901ead3a2ecd4a60", kUuids).chosen, IsEmpty());
  // Shared by two units: ends the list.
  const MaskReading shared = readRocrVisibleDevices("4,GPU-51276,0", kUuids);
  EXPECT_THAT(shared.chosen, ElementsAre(4U));
  EXPECT_THAT(shared.stop.value_or(""), HasSubstr("names 2 units"));
  // Named already: ends the list (ROCr's rule, unlike CUDA's).
  const MaskReading twice = readRocrVisibleDevices("0,GPU-1901e,4", kUuids);
  EXPECT_THAT(twice.chosen, ElementsAre(0U));
  EXPECT_THAT(twice.stop.value_or(""), HasSubstr("named already"));
}

TEST(RocmMasks, HipTakesPlainDecimalsAndFullUuids) {
  EXPECT_THAT(readHipVisibleDevices("3,0", kUuids).chosen, ElementsAre(3U, 0U));
  EXPECT_THAT(readHipVisibleDevices("GPU-93BB3629C01AEA1C", kUuids).chosen, ElementsAre(4U));
  for (const std::string value : {"1,01", "1,+2", "1,-1", "1, 2", "1,5", "1,1", "1,GPU-9",
                                  "1,GPU-51276ac12ce05db3", "1,NoDevFiles"}) {
    const MaskReading reading = readHipVisibleDevices(value, kUuids);
    EXPECT_THAT(reading.chosen, ElementsAre(1U)) << value;
    EXPECT_THAT(reading.stop.value_or(""), HasSubstr("(entry 2)")) << value;
  }
  EXPECT_THAT(readHipVisibleDevices("NoDevFiles", kUuids).chosen, IsEmpty());
}

TEST(RocmMasks, HipVariableInForce) {
  std::map<std::string, std::string> environment;
  const auto getenv = [&](const char* name) -> const char* {
    const auto found = environment.find(name);
    return found == environment.end() ? nullptr : found->second.c_str();
  };
  EXPECT_EQ(hipMaskVariable(getenv), nullptr);
  environment["CUDA_VISIBLE_DEVICES"] = "";
  environment["HIP_VISIBLE_DEVICES"] = "";
  EXPECT_EQ(hipMaskVariable(getenv), nullptr);
  environment["CUDA_VISIBLE_DEVICES"] = "1";
  EXPECT_STREQ(hipMaskVariable(getenv), "CUDA_VISIBLE_DEVICES");
  environment["HIP_VISIBLE_DEVICES"] = "0";
  EXPECT_STREQ(hipMaskVariable(getenv), "HIP_VISIBLE_DEVICES");
}

}  // namespace
}  // namespace flink::amd
