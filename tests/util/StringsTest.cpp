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

TEST(StringsTest, NextTokenSplitsInPlaceAsSplitWhitespaceDoes) {
  for (const std::string_view text :
       {"  --device-type\tnvidia \n --x  ", "0 1234\t99\tlease=GPU-a", "   ", "", "one"}) {
    std::vector<std::string> tokens;
    std::string_view rest = text;
    for (std::string_view token = nextToken(rest); !token.empty(); token = nextToken(rest)) {
      tokens.emplace_back(token);
    }
    EXPECT_EQ(tokens, splitWhitespace(text)) << text;
    EXPECT_TRUE(isBlank(rest)) << text;
  }
  std::string_view rest = "gpu  7 tail";
  EXPECT_EQ(nextToken(rest), "gpu");
  EXPECT_EQ(rest, "  7 tail");
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
