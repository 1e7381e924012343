// The text helpers behind argument splitting and message quoting.
#include "util/Strings.h"

#include <gtest/gtest.h>

namespace flink::strings {
namespace {

TEST(StringsTest, SplitWhitespaceIsJavasStringTokenizer) {
  EXPECT_EQ(splitWhitespace("  --device-type\tnvidia \n --x  "),
            (std::vector<std::string>{"--device-type", "nvidia", "--x"}));
  EXPECT_TRUE(splitWhitespace("   ").empty());
  EXPECT_TRUE(splitWhitespace("").empty());
}

TEST(StringsTest, TrimAndBlank) {
  EXPECT_EQ(trim(" \t 0 \r\n"), "0");
  EXPECT_TRUE(isBlank(" \t\r\n\f"));
  EXPECT_FALSE(isBlank(" x "));
}

TEST(StringsTest, SplitKeepsEmptyParts) {
  EXPECT_EQ(split("0,,1,", ','), (std::vector<std::string_view>{"0", "", "1", ""}));
}

TEST(StringsTest, QuoteForMessageEscapesAndBounds) {
  EXPECT_EQ(quoteForMessage("a\nb\t\x01"), "a\\nb\\t\\x01");
  EXPECT_EQ(quoteForMessage(std::string(300, 'x'), 10), "xxxxxxxxxx... (290 more bytes)");
}

}  // namespace
}  // namespace flink::strings
