// Tests of the one hook the placement rule has in the coordination file's allocation rule:
// AllocationRequest::choose sees the grantable units in host order, and anything but a valid
// answer falls back to the first free ones.
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "host/coordination/Coordination.h"

namespace {

using namespace flink::coordination;
using Ids = std::vector<std::string>;

const Owner kMe{100, 1};
const Owner kOther{200, 2};

bool onlyOtherRuns(const Owner& owner) { return owner == kOther; }

ParsedRecords held(const Ids& gpus, const Owner& owner = kOther) {
  ParsedRecords records;
  for (const std::string& gpu : gpus) records.records.push_back(Record{gpu, owner});
  return records;
}

TEST(AllocationChooserTest, TheChooserSeesTheGrantableUnitsInHostOrder) {
  Ids seen;
  std::size_t asked = 0;
  AllocationRequest request{{"0", "1", "2", "3", "4"}, 2, kMe};
  request.choose = [&](const Ids& free, std::size_t amount) {
    seen = free;
    asked = amount;
    return Ids{"4", "2"};
  };
  const Allocation allocation = planAllocation(held({"1"}), request, onlyOtherRuns);
  EXPECT_EQ(seen, (Ids{"0", "2", "3", "4"}));
  EXPECT_EQ(asked, 2u);
  ASSERT_TRUE(allocation.satisfied);
  EXPECT_EQ(allocation.granted, (Ids{"2", "4"}));  // in host order
}

TEST(AllocationChooserTest, UnitsBlockedByARelatedUnitAreNotOffered) {
  const std::string mig = "MIG-0b6c1a2d-3e4f-5a6b-7c8d-9e0f1a2b3c4d";
  Ids seen;
  AllocationRequest request{{"0", "1", "2"}, 1, kMe, {{"1", {mig}}}};
  request.choose = [&](const Ids& free, std::size_t) {
    seen = free;
    return Ids{free.back()};
  };
  const Allocation allocation = planAllocation(held({mig}), request, onlyOtherRuns);
  EXPECT_EQ(seen, (Ids{"0", "2"}));
  EXPECT_EQ(allocation.granted, (Ids{"2"}));
}

TEST(AllocationChooserTest, AnInvalidAnswerFallsBackToTheFirstFree) {
  const std::vector<std::function<Ids(const Ids&, std::size_t)>> choosers = {
      [](const Ids&, std::size_t) { return Ids{}; },     // no choice
      [](const Ids&, std::size_t) { return Ids{"3"}; },  // too few
      [](const Ids&, std::size_t) {
        return Ids{"3", "3"};
      },  // the same twice
      [](const Ids&, std::size_t) {
        return Ids{"1", "3"};
      },  // a held one
      [](const Ids&, std::size_t) {
        return Ids{"3", "9"};
      },  // not a unit of the host
      [](const Ids&, std::size_t) -> Ids { throw std::runtime_error("topology"); },
  };
  for (const auto& chooser : choosers) {
    AllocationRequest request{{"0", "1", "2", "3"}, 2, kMe};
    request.choose = chooser;
    const Allocation allocation = planAllocation(held({"1"}), request, onlyOtherRuns);
    ASSERT_TRUE(allocation.satisfied);
    EXPECT_EQ(allocation.granted, (Ids{"0", "2"}));
    EXPECT_EQ(allocation.records.size(), 3u);
  }
}

TEST(AllocationChooserTest, TooFewFreeUnitsAreAShortfallWithoutAsking) {
  bool asked = false;
  AllocationRequest request{{"0", "1", "2"}, 3, kMe};
  request.choose = [&](const Ids& free, std::size_t) {
    asked = true;
    return free;
  };
  const Allocation allocation = planAllocation(held({"1"}), request, onlyOtherRuns);
  EXPECT_FALSE(allocation.satisfied);
  EXPECT_FALSE(asked);
}

}  // namespace
