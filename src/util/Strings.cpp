#include "util/Strings.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <cstring>

namespace flink::strings {

bool isDigits(std::string_view text) noexcept {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::optional<unsigned> parseUnsigned(std::string_view text) noexcept {
  if (!isDigits(text)) return std::nullopt;
  unsigned value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

namespace {

/// Whether the eight bytes at `at` are all spaces. The coordination file's page layout pads with
/// spaces (blanked records, the ends of pages), kilobytes of them a line: every parse of the file
/// trims those lines, and a byte at a time that was most of a parse of a padded file.
bool eightSpacesAt(const char* at) noexcept {
  constexpr std::uint64_t kEightSpaces = 0x2020202020202020ULL;
  std::uint64_t bytes = 0;
  std::memcpy(&bytes, at, sizeof bytes);
  return bytes == kEightSpaces;
}

}  // namespace

std::string_view trim(std::string_view text) noexcept {
  const char* begin = text.data();
  const char* end = begin + text.size();
  while (begin != end) {
    if (end - begin >= 8 && eightSpacesAt(begin)) {
      begin += 8;
    } else if (isSpace(*begin)) {
      ++begin;
    } else {
      break;
    }
  }
  while (end != begin) {
    if (end - begin >= 8 && eightSpacesAt(end - 8)) {
      end -= 8;
    } else if (isSpace(end[-1])) {
      --end;
    } else {
      break;
    }
  }
  return {begin, static_cast<std::size_t>(end - begin)};
}

bool isBlank(std::string_view text) noexcept { return trim(text).empty(); }

std::string toLower(std::string_view text) {
  std::string lower(text);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower;
}

std::string toUpper(std::string_view text) {
  std::string upper(text);
  for (char& c : upper) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return upper;
}

std::vector<std::string> splitWhitespace(std::string_view text) {
  std::vector<std::string> tokens;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && isSpace(text[i])) ++i;
    const std::size_t start = i;
    while (i < text.size() && !isSpace(text[i])) ++i;
    if (i > start) tokens.emplace_back(text.substr(start, i - start));
  }
  return tokens;
}

std::string_view nextToken(std::string_view& text) noexcept {
  std::size_t start = 0;
  while (start < text.size() && isSpace(text[start])) ++start;
  std::size_t end = start;
  while (end < text.size() && !isSpace(text[end])) ++end;
  const std::string_view token = text.substr(start, end - start);
  text.remove_prefix(end);
  return token;
}

std::string join(const std::vector<std::string>& parts, std::string_view separator) {
  std::string joined;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) joined += separator;
    joined += parts[i];
  }
  return joined;
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = text.find(separator, start);
    if (end == std::string_view::npos) {
      parts.push_back(text.substr(start));
      return parts;
    }
    parts.push_back(text.substr(start, end - start));
    start = end + 1;
  }
}

std::size_t utf8SequenceLength(std::string_view text, char32_t& codePoint) noexcept {
  if (text.empty()) return 0;
  const auto lead = static_cast<unsigned char>(text[0]);
  std::size_t length = 0;
  char32_t value = 0;
  char32_t least = 0;  // the smallest value of this length: below it, the form is overlong
  if (lead < 0x80) {
    codePoint = lead;
    return 1;
  } else if ((lead & 0xe0) == 0xc0) {
    length = 2;
    value = lead & 0x1f;
    least = 0x80;
  } else if ((lead & 0xf0) == 0xe0) {
    length = 3;
    value = lead & 0x0f;
    least = 0x800;
  } else if ((lead & 0xf8) == 0xf0) {
    length = 4;
    value = lead & 0x07;
    least = 0x10000;
  } else {
    return 0;  // a continuation byte, or 0xf8 and above
  }
  if (text.size() < length) return 0;
  for (std::size_t i = 1; i < length; ++i) {
    const auto next = static_cast<unsigned char>(text[i]);
    if ((next & 0xc0) != 0x80) return 0;
    value = (value << 6) | (next & 0x3f);
  }
  if (value < least || value > 0x10ffff || (value >= 0xd800 && value <= 0xdfff)) return 0;
  codePoint = value;
  return length;
}

std::string inQuotes(std::string_view text) { return "'" + quoteForMessage(text) + "'"; }

std::string quoteForMessage(std::string_view text, std::size_t maxLength) {
  std::string quoted;
  std::size_t shown = text.size() < maxLength ? text.size() : maxLength;
  // Cut between characters, never inside one: back off over UTF-8 continuation bytes (three at
  // most, the longest sequence's), so that a cut "é" is not shown as "\xc3".
  for (int back = 0; back < 3 && shown > 0 && shown < text.size() &&
                     (static_cast<unsigned char>(text[shown]) & 0xc0) == 0x80;
       ++back) {
    --shown;
  }
  quoted.reserve(shown + 16);
  // "\\x1b", "\\u009b": `prefix`, then `digits` lower-case hex digits of `value`.
  const auto escape = [&quoted](std::string_view prefix, unsigned value, int digits) {
    static constexpr char kHex[] = "0123456789abcdef";
    quoted += prefix;
    for (int shift = (digits - 1) * 4; shift >= 0; shift -= 4)
      quoted += kHex[(value >> shift) & 0xf];
  };
  for (std::size_t i = 0; i < shown;) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      char32_t codePoint = 0;
      const std::size_t length = utf8SequenceLength(text.substr(i, shown - i), codePoint);
      if (length == 0) {
        escape("\\x", c, 2);
        ++i;
      } else if (codePoint <= 0x9f) {
        escape("\\u", static_cast<unsigned>(codePoint), 4);
        i += length;
      } else {
        quoted.append(text.substr(i, length));
        i += length;
      }
      continue;
    }
    switch (c) {
      case '\n':
        quoted += "\\n";
        break;
      case '\r':
        quoted += "\\r";
        break;
      case '\t':
        quoted += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          escape("\\x", c, 2);
        } else {
          quoted += static_cast<char>(c);
        }
    }
    ++i;
  }
  if (shown < text.size()) {
    quoted += "... (" + std::to_string(text.size() - shown) + " more bytes)";
  }
  return quoted;
}

std::size_t editDistance(std::string_view a, std::string_view b, std::size_t limit) {
  const std::size_t longer = std::max(a.size(), b.size());
  const std::size_t shorter = std::min(a.size(), b.size());
  if (longer - shorter > limit) return limit + 1;
  // Three rows of the table: i - 2, i - 1 and i.
  std::vector<std::size_t> before(b.size() + 1);
  std::vector<std::size_t> previous(b.size() + 1);
  std::vector<std::size_t> current(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substitution = a[i - 1] == b[j - 1] ? 0 : 1;
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, previous[j - 1] + substitution});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        current[j] = std::min(current[j], before[j - 2] + 1);
      }
    }
    std::swap(before, previous);
    std::swap(previous, current);
  }
  return std::min(previous[b.size()], limit + 1);
}

std::string shellWord(std::string_view text) {
  const bool plain = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("_/.,:@%+=-").find(c) != std::string_view::npos;
  });
  if (plain) return std::string(text);
  std::string quoted = "'";
  for (const char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

}  // namespace flink::strings
