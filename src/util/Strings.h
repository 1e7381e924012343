// Small text helpers shared by the parsers of this library (not part of the public API).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flink::strings {

/// The UTF-8 byte order mark, which a text file may start with.
inline constexpr std::string_view kUtf8ByteOrderMark = "\xEF\xBB\xBF";

/// Whitespace as Java's String.trim and StringTokenizer see it: space, \t, \n, \r, \f, \v.
constexpr bool isSpace(char c) noexcept {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/// `text` without leading and trailing whitespace.
std::string_view trim(std::string_view text) noexcept;

/// Whether `text` is one or more ASCII digits and nothing else (no sign, no blanks).
bool isDigits(std::string_view text) noexcept;

/// `text` as a decimal number, the whole of it digits (no sign, no blanks); nullopt when it is
/// not one, or does not fit an unsigned.
std::optional<unsigned> parseUnsigned(std::string_view text) noexcept;

/// Whether `text` is empty or whitespace only.
bool isBlank(std::string_view text) noexcept;

std::string toLower(std::string_view text);

/// `text` with the ASCII letters a-z in upper case; every other byte as it is.
std::string toUpper(std::string_view text);

/// Splits on runs of whitespace, dropping empty tokens (java.util.StringTokenizer's default,
/// which Runtime.exec uses to split a command line).
std::vector<std::string> splitWhitespace(std::string_view text);

/// The first token of `text` as splitWhitespace splits it, with `text` advanced past it; empty
/// when only whitespace is left. Allocates nothing: for parsing a line in place.
std::string_view nextToken(std::string_view& text) noexcept;

/// The parts joined with `separator` between them.
std::string join(const std::vector<std::string>& parts, std::string_view separator);

/// Splits on `separator`, keeping empty parts.
std::vector<std::string_view> split(std::string_view text, char separator);

/// The length in bytes of the well-formed UTF-8 sequence that `text` starts with, its value in
/// `codePoint`; 0 when it starts with none (a byte that starts no sequence, a sequence cut short,
/// an overlong form, a surrogate, a value past U+10FFFF) or is empty.
std::size_t utf8SequenceLength(std::string_view text, char32_t& codePoint) noexcept;

/// `text` made safe to quote in one line of a message, and to print on a terminal: control
/// characters are escaped (\n, \r, \t, \xNN for the other C0 ones and DEL, \u00NN for the C1
/// ones U+0080 to U+009F, which terminals may read as the start of an escape sequence), a byte
/// that is not part of well-formed UTF-8 becomes \xNN, and anything past `maxLength` bytes is
/// replaced by "... (N more bytes)". What it returns comes out unchanged from it again.
std::string quoteForMessage(std::string_view text, std::size_t maxLength = 200);

/// `text` quoted for a message: quoteForMessage's form in single quotes.
std::string inQuotes(std::string_view text);

/// The optimal-string-alignment distance of `a` and `b` (Damerau–Levenshtein where no substring
/// is edited twice, as spelling checkers count it): insertions, deletions, substitutions and swaps
/// of two neighbours, one edit each. Only its value up to `limit` is computed: anything further is
/// `limit + 1`. O(|a|·|b|) time, O(|b|) memory.
std::size_t editDistance(std::string_view a, std::string_view b, std::size_t limit);

/// `text` as one shell word, for a command line a person may paste: as it is when it holds only
/// characters no shell treats specially, else in single quotes.
std::string shellWord(std::string_view text);

}  // namespace flink::strings
