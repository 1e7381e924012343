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
  EXPECT_EQ(trim(""), "");
  EXPECT_TRUE(isBlank(""));
}

TEST(StringsTest, TrimSkipsRunsOfSpacesAsTheByteRuleDoes) {
  // trim skips eight spaces at a time (a padded coordination file's blank lines): runs of every
  // length around that, with other whitespace and a word at each place, trim as the plain rule,
  // one byte at a time, does.
  const auto plainTrim = [](std::string_view text) {
    while (!text.empty() && isSpace(text.front())) text.remove_prefix(1);
    while (!text.empty() && isSpace(text.back())) text.remove_suffix(1);
    return text;
  };
  for (std::size_t before = 0; before <= 20; ++before) {
    for (std::size_t after = 0; after <= 20; ++after) {
      for (const std::string_view middle : {"", "x", "a b", "\t", "0 12\t7"}) {
        for (const char other : {' ', '\t', '\v'}) {
          std::string text =
              std::string(before, ' ') + std::string(middle) + std::string(after, ' ');
          // Another whitespace byte inside each run, where there is one.
          if (before > 3) text[before / 2] = other;
          if (after > 3) text[text.size() - after / 2 - 1] = other;
          EXPECT_EQ(trim(text), plainTrim(text)) << '[' << text << ']';
          EXPECT_EQ(isBlank(text), plainTrim(text).empty()) << '[' << text << ']';
        }
      }
    }
  }
  const std::string page = std::string(4095, ' ') + "0 1\t5" + std::string(4090, ' ');
  EXPECT_EQ(trim(page), "0 1\t5");
  EXPECT_TRUE(isBlank(std::string(4095, ' ')));
}

TEST(StringsTest, IsDigitsIsOneOrMoreAsciiDigitsAndNothingElse) {
  EXPECT_TRUE(isDigits("0"));
  EXPECT_TRUE(isDigits("0123456789"));
  for (const std::string_view text : {"", " 1", "1 ", "+1", "-1", "1.0", "0x1", "\xd9\xa1"}) {
    EXPECT_FALSE(isDigits(text)) << quoteForMessage(text);
  }
  EXPECT_EQ(parseUnsigned("007"), 7u);
  EXPECT_EQ(parseUnsigned(""), std::nullopt);
  EXPECT_EQ(parseUnsigned("4294967296"), std::nullopt);
}

TEST(StringsTest, ToUpperChangesOnlyAsciiLetters) {
  EXPECT_EQ(toUpper("gpu-5e1f0a2b"), "GPU-5E1F0A2B");
  EXPECT_EQ(toUpper("spx\xc3\xa9 \t_9"), "SPX\xc3\xa9 \t_9");
  EXPECT_EQ(toUpper(""), "");
}

TEST(StringsTest, InQuotesQuotesAsMessagesDo) {
  EXPECT_EQ(inQuotes("GPU-1"), "'GPU-1'");
  EXPECT_EQ(inQuotes("a\nb"), "'a\\nb'");
  EXPECT_EQ(inQuotes(""), "''");
}

TEST(StringsTest, SplitKeepsEmptyParts) {
  EXPECT_EQ(split("0,,1,", ','), (std::vector<std::string_view>{"0", "", "1", ""}));
}

TEST(StringsTest, QuoteForMessageEscapesAndBounds) {
  EXPECT_EQ(quoteForMessage("a\nb\t\x01"), "a\\nb\\t\\x01");
  EXPECT_EQ(quoteForMessage(std::string(300, 'x'), 10), "xxxxxxxxxx... (290 more bytes)");
  // A cut falls between characters: "é" is two bytes, and the tenth byte is inside the fifth.
  std::string accents;
  for (int i = 0; i < 10; ++i) accents += "\xc3\xa9";
  EXPECT_EQ(quoteForMessage(accents, 9), "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9... (12 more bytes)");
}

TEST(StringsTest, QuoteForMessageLetsNoEscapeSequenceThrough) {
  // ESC and CSI, the two ways a terminal sequence starts: as a C0 byte, as the C1 character
  // U+009B in UTF-8, and as a lone 0x9b byte (CSI itself on an 8-bit terminal).
  EXPECT_EQ(quoteForMessage("\x1b[2J\x1b]0;title\x07"), "\\x1b[2J\\x1b]0;title\\x07");
  EXPECT_EQ(quoteForMessage("a\xc2\x9b"
                            "31mb"),
            "a\\u009b31mb");
  EXPECT_EQ(quoteForMessage("a\x9b"
                            "31mb\x7f\r"),
            "a\\x9b31mb\\x7f\\r");
  // Well-formed UTF-8 is kept; bytes that are not are escaped one by one.
  EXPECT_EQ(quoteForMessage("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
            "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  EXPECT_EQ(quoteForMessage("caf\xe9"), "caf\\xe9");
  EXPECT_EQ(quoteForMessage("\xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80 \xe2\x82"),
            "\\xc0\\xaf \\xed\\xa0\\x80 \\xf4\\x90\\x80\\x80 \\xe2\\x82");
  // Its result quoted again is the same.
  const std::string once = quoteForMessage("x\n\x1b\xc2\x85\xff\xc3\xa9");
  EXPECT_EQ(quoteForMessage(once), once);
}

TEST(StringsTest, Utf8SequenceLength) {
  char32_t value = 0;
  EXPECT_EQ(utf8SequenceLength("a", value), 1u);
  EXPECT_EQ(value, U'a');
  EXPECT_EQ(utf8SequenceLength("\xe2\x82\xac!", value), 3u);
  EXPECT_EQ(value, U'\u20ac');
  EXPECT_EQ(utf8SequenceLength("\xf4\x8f\xbf\xbf", value), 4u);
  EXPECT_EQ(value, U'\U0010ffff');
  for (const char* bad : {"", "\x80", "\xc1\xbf", "\xe0\x80\x80", "\xed\xbf\xbf",
                          "\xf4\x90\x80\x80", "\xf8\x88\x80\x80\x80", "\xc3", "\xc3("}) {
    EXPECT_EQ(utf8SequenceLength(bad, value), 0u) << quoteForMessage(bad);
  }
}

TEST(EditDistanceTest, CountsEachInsertionDeletionSubstitutionAndSwapOnce) {
  EXPECT_EQ(editDistance("discover", "discover", 2), 0u);
  EXPECT_EQ(editDistance("dicsover", "discover", 2), 1u);  // a swap of neighbours
  EXPECT_EQ(editDistance("amout", "amount", 2), 1u);       // an insertion
  EXPECT_EQ(editDistance("amounts", "amount", 2), 1u);     // a deletion
  EXPECT_EQ(editDistance("gpux", "gpus", 2), 1u);          // a substitution
  EXPECT_EQ(editDistance("", "mig", 5), 3u);
  // Optimal string alignment: no substring is edited twice ("ca" → "abc" is 3, not 2).
  EXPECT_EQ(editDistance("ca", "abc", 5), 3u);
}

TEST(EditDistanceTest, StopsCountingPastTheLimit) {
  EXPECT_EQ(editDistance("status", "discover", 2), 3u);
  EXPECT_EQ(editDistance("a", "abcdefgh", 1), 2u);
  EXPECT_EQ(editDistance("topology", "topolgoy", 0), 1u);
}

}  // namespace
}  // namespace flink::strings
