// The JSON of amd-smi list --json and rocm-smi --showuniqueid --showbus --json.
#include "host/amd/AmdTools.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "host/enumeration/GpuEnumerator.h"

namespace flink::amd {
namespace {

using discovery::DiscoveryError;
using ::testing::HasSubstr;

TEST(AmdTools, AmdSmiListInItsOrderWithoutUuid) {
  const std::vector<ToolGpu> gpus = parseAmdSmiList(
      R"([{"gpu": 0, "bdf": "0000:63:00.0", "uuid": "d3ff740f-0000-1000-8022-1901ead3a2ec"},
          {"gpu": 1, "bdf": "0000:05:00.3", "uuid": "x", "partition_id": 3}])");
  ASSERT_EQ(gpus.size(), 2U);
  EXPECT_EQ(nvmlBusId(gpus[0].busId), "00000000:63:00.0");
  EXPECT_EQ(gpus[0].uuid, std::nullopt);
  EXPECT_EQ(nvmlBusId(gpus[1].busId), "00000000:05:00.3");
}

TEST(AmdTools, RocmSmiCardsInCardOrderUuidsZeroPadded) {
  const std::vector<ToolGpu> gpus = parseRocmSmiJson(
      R"({"card10": {"Unique ID": "0x1", "PCI Bus": "0000:0A:00.0"},
          "card2": {"Unique ID": "N/A", "PCI Bus": "0000:C3:00.0"},
          "card0": {"Unique ID": "abc", "PCI Bus": "0000:63:00.0"},
          "system": {"Driver version": "6.8.5"}})");
  ASSERT_EQ(gpus.size(), 3U);
  EXPECT_EQ(nvmlBusId(gpus[0].busId), "00000000:63:00.0");
  EXPECT_EQ(gpus[0].uuid, "GPU-0000000000000abc");
  EXPECT_EQ(gpus[1].uuid, std::nullopt);
  EXPECT_EQ(nvmlBusId(gpus[2].busId), "00000000:0A:00.0");
  EXPECT_EQ(gpus[2].uuid, "GPU-0000000000000001");
}

TEST(AmdTools, AnythingElseFailsNamingTheToolAndQuotingIt) {
  for (const std::string output : {"", "[", "{}", "[1]", R"([{"bdf": "nowhere"}])"}) {
    try {
      parseAmdSmiList(output);
      ADD_FAILURE() << output;
    } catch (const DiscoveryError& e) {
      EXPECT_THAT(e.what(), HasSubstr("amd-smi printed something that is not its JSON")) << output;
      EXPECT_THAT(e.what(), HasSubstr("'" + output + "'"));
    }
  }
  for (const std::string output :
       {"[]", R"({"card0": {"Unique ID": "0x1"}})",
        R"({"card0": {"Unique ID": "zz", "PCI Bus": "0000:01:00.0"}})"}) {
    EXPECT_THROW(parseRocmSmiJson(output), DiscoveryError) << output;
  }
}

}  // namespace
}  // namespace flink::amd
