// Duration text: Flink's forms, and clear errors for everything else.
#include "flink/util/TimeUtils.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace flink {
namespace {

using namespace std::chrono_literals;

TEST(TimeUtilsTest, ParsesFlinksUnits) {
  EXPECT_EQ(parseDuration("10 s"), 10s);
  EXPECT_EQ(parseDuration("10s"), 10s);
  EXPECT_EQ(parseDuration("500 ms"), 500ms);
  EXPECT_EQ(parseDuration("1 min"), 60s);
  EXPECT_EQ(parseDuration("1m"), 60s);
  EXPECT_EQ(parseDuration("2 h"), 7200s);
  EXPECT_EQ(parseDuration("1 d"), 86400s);
  EXPECT_EQ(parseDuration("3 SECONDS"), 3s);
  EXPECT_EQ(parseDuration("  7 milliseconds "), 7ms);
  EXPECT_EQ(parseDuration("1500"), 1500ms);  // no unit: milliseconds, as in Flink
}

TEST(TimeUtilsTest, SubMillisecondAmountsRoundUpSoThatTheyStayPositive) {
  EXPECT_EQ(parseDuration("1 ns"), 1ms);
  EXPECT_EQ(parseDuration("1500 us"), 2ms);
  EXPECT_EQ(parseDuration("2000000 ns"), 2ms);
  EXPECT_EQ(parseDuration("0 s"), 0ms);
}

TEST(TimeUtilsTest, RejectsWhatIsNotADuration) {
  for (const char* bad : {"", "   ", "s", "-1 s", "1.5 s", "10 parsecs", "ten seconds",
                          "99999999999999999999 ms", "9223372036854775807 d"}) {
    EXPECT_THROW(parseDuration(bad), std::invalid_argument) << "'" << bad << "'";
  }
  try {
    parseDuration("10 parsecs");
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'10 parsecs'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("parsecs"), std::string::npos);
  }
}

TEST(TimeUtilsTest, TheReasonIsTheCauseWithoutTheText) {
  // For a caller that names the text its own way (flink-gpu's `invalid --timeout '5x': ...`).
  const std::vector<std::pair<std::string, std::string>> cases{
      {"5x", "unknown time unit 'x' (use ms, s, min, h or d)"},
      {"", "it is empty"},
      {"fast", "it does not start with a number"},
  };
  for (const auto& [text, reason] : cases) {
    try {
      parseDuration(text);
      ADD_FAILURE() << "'" << text << "' was taken";
    } catch (const InvalidDurationException& e) {
      EXPECT_EQ(e.reason(), reason);
      EXPECT_EQ(std::string(e.what()), "Invalid duration '" + text + "': " + reason);
    }
  }
}

TEST(TimeUtilsTest, FormatsInTheLargestExactUnit) {
  EXPECT_EQ(formatDuration(10s), "10 s");
  EXPECT_EQ(formatDuration(500ms), "500 ms");
  EXPECT_EQ(formatDuration(60s), "1 min");
  EXPECT_EQ(formatDuration(90s), "90 s");
  EXPECT_EQ(formatDuration(0ms), "0 ms");
  for (std::chrono::milliseconds d : {1ms, 1001ms, 3600'000ms, 86400'000ms, 123456789ms}) {
    EXPECT_EQ(parseDuration(formatDuration(d)), d);
  }
}

}  // namespace
}  // namespace flink
