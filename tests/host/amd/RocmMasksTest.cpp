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
  // Shared by two units, the partitions of one GPU: ends the list.
  const MaskReading shared = readRocrVisibleDevices("4,GPU-51276,0", kUuids);
  EXPECT_THAT(shared.chosen, ElementsAre(4U));
  EXPECT_EQ(shared.stop,
            "'GPU-51276' (entry 2) names 2 units (the partitions of one GPU share its UUID)");
  // Named already: ends the list (ROCr's rule, unlike CUDA's).
  const MaskReading twice = readRocrVisibleDevices("0,GPU-1901e,4", kUuids);
  EXPECT_THAT(twice.chosen, ElementsAre(0U));
  EXPECT_THAT(twice.stop.value_or(""), HasSubstr("named already"));
}

TEST(RocmMasks, RocrAmbiguousPrefixSaysWhetherTheMatchesArePartitionsOfOneGpu) {
  const std::vector<std::optional<std::string>> boards{"GPU-aea834aa2723eb57",
                                                       "GPU-a3781b5a10fcf54a"};
  const MaskReading two = readRocrVisibleDevices("1,GPU-a,0", boards);
  EXPECT_THAT(two.chosen, ElementsAre(1U));
  EXPECT_EQ(two.stop, "'GPU-a' (entry 2) matches 2 GPUs");
  const std::vector<std::optional<std::string>> mixed{
      "GPU-aea834aa2723eb57", "GPU-a3781b5a10fcf54a", std::nullopt, "GPU-a3781b5a10fcf54a"};
  const MaskReading three = readRocrVisibleDevices("gpu-A", mixed);
  EXPECT_THAT(three.chosen, IsEmpty());
  EXPECT_EQ(three.stop,
            "'gpu-A' (entry 1) matches 2 GPUs (3 units: the partitions of a GPU share its UUID)");
  EXPECT_THAT(readRocrVisibleDevices("GPU-ae", mixed).chosen, ElementsAre(0U));
}

TEST(RocmMasks, HipTakesPlainDecimals) {
  const MaskReading reading = readHipVisibleDevices("3,0", kUuids);
  EXPECT_THAT(reading.chosen, ElementsAre(3U, 0U));
  EXPECT_THAT(reading.spelled, ElementsAre("3", "0"));
  EXPECT_EQ(reading.stop, std::nullopt);
  EXPECT_THAT(reading.surprises, IsEmpty());
  for (const std::string value : {"1,01", "1,+2", "1,-1", "1, 2", "1,5", "1,NoDevFiles", "1,,2",
                                  "1,1234567890", "1,2 ", "1, GPU-93bb", "1,xGPU-93bb"}) {
    const MaskReading stopped = readHipVisibleDevices(value, kUuids);
    EXPECT_THAT(stopped.chosen, ElementsAre(1U)) << value;
    EXPECT_THAT(stopped.stop.value_or(""), HasSubstr("(entry 2)")) << value;
  }
  EXPECT_EQ(readHipVisibleDevices("1,5", kUuids).stop,
            "'5' (entry 2) names no GPU that ROCr left (there are 5)");
  EXPECT_EQ(readHipVisibleDevices("1,1234567890", kUuids).stop,
            "'1234567890' (entry 2) names no GPU that ROCr left (there are 5)");
  EXPECT_EQ(readHipVisibleDevices("1,01", kUuids).stop,
            "'01' (entry 2) is neither a GPU index nor a GPU-… UUID");
  EXPECT_THAT(readHipVisibleDevices("NoDevFiles", kUuids).chosen, IsEmpty());
}

TEST(RocmMasks, HipEndsAtAFinalCommaWithoutReadingIt) {
  const MaskReading trailing = readHipVisibleDevices("1,", kUuids);
  EXPECT_THAT(trailing.chosen, ElementsAre(1U));
  EXPECT_EQ(trailing.stop, std::nullopt);
  const MaskReading comma = readHipVisibleDevices(",", kUuids);
  EXPECT_THAT(comma.chosen, IsEmpty());
  EXPECT_EQ(comma.stop, "'' (entry 1) is neither a GPU index nor a GPU-… UUID");
  const MaskReading two = readHipVisibleDevices("1,,", kUuids);
  EXPECT_THAT(two.chosen, ElementsAre(1U));
  EXPECT_EQ(two.stop, "'' (entry 2) is neither a GPU index nor a GPU-… UUID");
}

TEST(RocmMasks, HipUuidEntryIsACaseSensitiveSubstringAndTheFirstMatchIsTaken) {
  const MaskReading full = readHipVisibleDevices("GPU-93bb3629c01aea1c,GPU-1901", kUuids);
  EXPECT_THAT(full.chosen, ElementsAre(4U, 0U));
  EXPECT_THAT(full.spelled, ElementsAre("GPU-93bb3629c01aea1c", "GPU-1901"));
  EXPECT_EQ(full.stop, std::nullopt);
  EXPECT_THAT(full.surprises, IsEmpty());
  // A prefix of a partitioned GPU's shared UUID: the first partition, with a surprise.
  const MaskReading prefix = readHipVisibleDevices("GPU-5127", kUuids);
  EXPECT_THAT(prefix.chosen, ElementsAre(1U));
  EXPECT_THAT(prefix.spelled, ElementsAre("GPU-5127"));
  EXPECT_THAT(prefix.surprises,
              ElementsAre("'GPU-5127' (entry 1) matches 2 units (the partitions of one GPU share "
                          "its UUID) that ROCr left, and HIP takes the first, index 1"));
  // "GPU-" is in every UUID; a unit without one is ROCr's "GPU-XX".
  const MaskReading any = readHipVisibleDevices("GPU-", kUuids);
  EXPECT_THAT(any.chosen, ElementsAre(0U));
  EXPECT_THAT(any.surprises,
              ElementsAre("'GPU-' (entry 1) matches 4 GPUs (5 units: the partitions of a GPU "
                          "share its UUID) that ROCr left, and HIP takes the first, index 0"));
  EXPECT_THAT(readHipVisibleDevices("GPU-XX", kUuids).chosen, ElementsAre(2U));
}

TEST(RocmMasks, HipUpperCaseHexOrLowerCasePrefixEndsTheList) {
  const MaskReading hex = readHipVisibleDevices("1,GPU-93BB3629C01AEA1C,4", kUuids);
  EXPECT_THAT(hex.chosen, ElementsAre(1U));
  EXPECT_EQ(hex.stop,
            "'GPU-93BB3629C01AEA1C' (entry 2) names no GPU that ROCr left (HIP compares UUIDs "
            "case-sensitively, and ROCr's are 'GPU-' and lower-case hex digits)");
  const MaskReading prefix = readHipVisibleDevices("gpu-93bb3629c01aea1c,1", kUuids);
  EXPECT_THAT(prefix.chosen, IsEmpty());
  EXPECT_EQ(prefix.stop,
            "'gpu-93bb3629c01aea1c' (entry 1) is neither a GPU index nor a GPU-… UUID (HIP looks "
            "for 'GPU-' in upper case)");
  EXPECT_EQ(readHipVisibleDevices("1,GPU-ffff", kUuids).stop,
            "'GPU-ffff' (entry 2) names no GPU that ROCr left");
}

TEST(RocmMasks, HipSkipsAnEntryNamingAChosenGpuAndReadsOn) {
  const MaskReading index = readHipVisibleDevices("0,0,4", kUuids);
  EXPECT_THAT(index.chosen, ElementsAre(0U, 4U));
  EXPECT_THAT(index.spelled, ElementsAre("0", "4"));
  EXPECT_EQ(index.stop, std::nullopt);
  EXPECT_THAT(index.surprises,
              ElementsAre("'0' (entry 2) names the GPU that entry 1 chose already ('0'), so HIP "
                          "skips it and reads on"));
  // The shared UUID always names the first partition: the second entry skips, the index takes
  // the other partition.
  const MaskReading shared =
      readHipVisibleDevices("GPU-51276ac12ce05db3,GPU-51276ac12ce05db3,3,GPU-1901,0,7", kUuids);
  EXPECT_THAT(shared.chosen, ElementsAre(1U, 3U, 0U));
  EXPECT_THAT(shared.spelled, ElementsAre("GPU-51276ac12ce05db3", "3", "GPU-1901"));
  EXPECT_EQ(shared.stop, "'7' (entry 6) names no GPU that ROCr left (there are 5)");
  EXPECT_THAT(
      shared.surprises,
      ElementsAre("'GPU-51276ac12ce05db3' (entry 1) matches 2 units (the partitions of one GPU "
                  "share its UUID) that ROCr left, and HIP takes the first, index 1",
                  "'GPU-51276ac12ce05db3' (entry 2) matches 2 units (the partitions of one GPU "
                  "share its UUID) that ROCr left, and HIP takes the first, index 1",
                  "'GPU-51276ac12ce05db3' (entry 2) names the GPU that entry 1 chose already "
                  "('GPU-51276ac12ce05db3'), so HIP skips it and reads on",
                  "'0' (entry 5) names the GPU that entry 4 chose already ('GPU-1901'), so HIP "
                  "skips it and reads on"));
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
