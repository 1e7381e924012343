// SnakeYAML's YAML 1.1 scalar resolution and flow-style writing, as Flink's standard-YAML
// configuration relies on them (see YamlValues.h). The patterns are SnakeYAML's Resolver
// patterns, matched by hand: std::regex recurses per character and may overflow the stack on
// long values.
#include "flink/configuration/YamlValues.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <sstream>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <system_error>

namespace flink::yamlvalues {
namespace {

bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isOctal(char c) { return c >= '0' && c <= '7'; }
bool isHex(char c) { return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

/// Whether `text` is one or more characters of which all satisfy `ok` or are '_', at least one
/// of them satisfying `ok`. SnakeYAML's `[0-7_]+` also takes "_" alone, which its constructor
/// then fails on (Flink cannot load such a file); a string is the kinder reading.
template <typename Ok>
bool digitsWithUnderscores(std::string_view text, Ok ok) {
  bool any = false;
  for (char c : text) {
    if (ok(c)) {
      any = true;
    } else if (c != '_') {
      return false;
    }
  }
  return any;
}

std::string_view withoutSign(std::string_view text) {
  if (!text.empty() && (text.front() == '-' || text.front() == '+')) text.remove_prefix(1);
  return text;
}

/// `(:[0-5]?[0-9])+` from the start of `text` to its end.
bool sexagesimalTail(std::string_view text) {
  if (text.empty()) return false;
  while (!text.empty()) {
    if (text.front() != ':') return false;
    text.remove_prefix(1);
    std::size_t digits = 0;
    while (digits < text.size() && isDigit(text[digits])) ++digits;
    if (digits == 0 || digits > 2 || (digits == 2 && text[0] > '5')) return false;
    text.remove_prefix(digits);
  }
  return true;
}

/// `[1-9][0-9_]*` followed by the sexagesimal tail; `rest` gets the text from the first ':'.
bool sexagesimalHead(std::string_view text, std::string_view& rest) {
  if (text.empty() || text.front() < '1' || text.front() > '9') return false;
  std::size_t at = 1;
  while (at < text.size() && (isDigit(text[at]) || text[at] == '_')) ++at;
  rest = text.substr(at);
  return true;
}

/// SnakeYAML's INT pattern.
bool isYamlInt(std::string_view text) {
  const std::string_view body = withoutSign(text);
  if (body == "0") return true;
  if (body.starts_with("0b"))
    return digitsWithUnderscores(body.substr(2), [](char c) { return c == '0' || c == '1'; });
  if (body.starts_with("0x")) return digitsWithUnderscores(body.substr(2), isHex);
  if (body.starts_with("0")) return digitsWithUnderscores(body.substr(1), isOctal);
  if (!body.empty() && body.front() >= '1' && body.front() <= '9' &&
      digitsWithUnderscores(body, isDigit)) {
    return true;
  }
  std::string_view rest;
  return sexagesimalHead(body, rest) && sexagesimalTail(rest);
}

/// SnakeYAML's FLOAT pattern.
bool isYamlFloat(std::string_view text) {
  if (text == ".nan" || text == ".NaN" || text == ".NAN") return true;
  // SnakeYAML tries the pattern only on a scalar that starts with one of these.
  if (text.empty() ||
      std::string_view("-+0123456789.").find(text.front()) == std::string_view::npos) {
    return false;
  }
  const std::string_view body = withoutSign(text);
  if (body == ".inf" || body == ".Inf" || body == ".INF") return true;
  // [0-9][0-9_]*(:[0-5]?[0-9])+\.[0-9_]*
  if (!body.empty() && isDigit(body.front())) {
    const std::size_t colon = body.find(':');
    const std::size_t dot = body.rfind('.');
    if (colon != std::string_view::npos && dot != std::string_view::npos && dot > colon &&
        digitsWithUnderscores(body.substr(0, colon), isDigit) &&
        sexagesimalTail(body.substr(colon, dot - colon)) &&
        (dot + 1 == body.size() || digitsWithUnderscores(body.substr(dot + 1), isDigit) ||
         body.substr(dot + 1).find_first_not_of('_') == std::string_view::npos)) {
      return true;
    }
  }
  // (\.[0-9]+|[0-9_]+(\.[0-9_]*)?)([eE][-+]?[0-9]+)?
  std::string_view mantissa = body;
  const std::size_t e = body.find_first_of("eE");
  if (e != std::string_view::npos) {
    mantissa = body.substr(0, e);
    std::string_view exponent = withoutSign(body.substr(e + 1));
    if (exponent.empty() || exponent.find_first_not_of("0123456789") != std::string_view::npos) {
      return false;
    }
  }
  if (mantissa.starts_with(".")) {
    const std::string_view digits = mantissa.substr(1);
    return !digits.empty() && digits.find_first_not_of("0123456789") == std::string_view::npos;
  }
  const std::size_t dot = mantissa.find('.');
  const std::string_view whole = mantissa.substr(0, dot);
  if (!digitsWithUnderscores(whole, isDigit)) return false;
  if (dot == std::string_view::npos) return true;
  return mantissa.substr(dot + 1).find_first_not_of("0123456789_") == std::string_view::npos;
}

bool isYamlBool(std::string_view text, bool& value) {
  static constexpr std::string_view kTrue[] = {"yes",  "Yes", "YES", "true", "True",
                                               "TRUE", "on",  "On",  "ON"};
  static constexpr std::string_view kFalse[] = {"no",    "No",  "NO",  "false", "False",
                                                "FALSE", "off", "Off", "OFF"};
  for (std::string_view word : kTrue) {
    if (text == word) return value = true, true;
  }
  for (std::string_view word : kFalse) {
    if (text == word) return value = false, true;
  }
  return false;
}

bool isYamlNull(std::string_view text) {
  return text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL";
}

/// A non-negative integer of any size, as base-10^9 limbs, least significant first.
class BigDecimal {
 public:
  void multiplyAdd(std::uint32_t factor, std::uint32_t addend) {
    std::uint64_t carry = addend;
    for (std::uint32_t& limb : limbs_) {
      const std::uint64_t value = static_cast<std::uint64_t>(limb) * factor + carry;
      limb = static_cast<std::uint32_t>(value % kBase);
      carry = value / kBase;
    }
    while (carry > 0) {
      limbs_.push_back(static_cast<std::uint32_t>(carry % kBase));
      carry /= kBase;
    }
  }
  bool isZero() const {
    for (std::uint32_t limb : limbs_) {
      if (limb != 0) return false;
    }
    return true;
  }
  std::string toString() const {
    std::size_t top = limbs_.size();
    while (top > 0 && limbs_[top - 1] == 0) --top;
    if (top == 0) return "0";
    std::string text = std::to_string(limbs_[top - 1]);
    for (std::size_t i = top - 1; i-- > 0;) {
      char buffer[16];
      std::snprintf(buffer, sizeof buffer, "%09u", static_cast<unsigned>(limbs_[i]));
      text += buffer;
    }
    return text;
  }

 private:
  static constexpr std::uint64_t kBase = 1'000'000'000;
  std::vector<std::uint32_t> limbs_;
};

std::uint32_t digitValue(char c) {
  if (isDigit(c)) return static_cast<std::uint32_t>(c - '0');
  if (c >= 'a' && c <= 'f') return static_cast<std::uint32_t>(c - 'a' + 10);
  return static_cast<std::uint32_t>(c - 'A' + 10);
}

/// SnakeYAML's ConstructYamlInt, written back in decimal (Integer, Long or BigInteger's
/// toString).
std::string intText(std::string_view text, ConversionBudget& budget) {
  std::string clean;
  for (char c : text) {
    if (c != '_') clean += c;
  }
  std::string_view body = clean;
  bool negative = false;
  if (!body.empty() && (body.front() == '-' || body.front() == '+')) {
    negative = body.front() == '-';
    body.remove_prefix(1);
  }
  BigDecimal value;
  if (body.find(':') != std::string_view::npos) {
    // Base 60: each ':'-separated part is a decimal digit group.
    budget.charge(body.size(), "base-60");
    std::size_t start = 0;
    while (start <= body.size()) {
      const std::size_t colon = std::min(body.find(':', start), body.size());
      std::uint32_t part = 0;
      for (char c : body.substr(start, colon - start)) part = part * 10 + digitValue(c);
      value.multiplyAdd(60, part);
      start = colon + 1;
    }
  } else {
    std::uint32_t radix = 10;
    if (body.starts_with("0b")) {
      radix = 2;
      body.remove_prefix(2);
    } else if (body.starts_with("0x")) {
      radix = 16;
      body.remove_prefix(2);
    } else if (body.size() > 1 && body.front() == '0') {
      radix = 8;
      body.remove_prefix(1);
    }
    if (radix == 10) {
      // Already decimal, without leading zeros (a leading 0 makes it octal): written back as is.
      return (negative && body != "0" ? "-" : "") + std::string(body);
    }
    budget.charge(body.size(), radix == 16 ? "hexadecimal" : radix == 8 ? "octal" : "binary");
    // Digits in chunks of at most 2^28 (7 hexadecimal, 9 octal, 28 binary): one pass over the
    // limbs a chunk, not a digit.
    constexpr std::uint32_t kMaxFactor = std::uint32_t{1} << 28;
    std::uint32_t factor = 1;
    std::uint32_t chunk = 0;
    for (char c : body) {
      if (factor > kMaxFactor / radix) {
        value.multiplyAdd(factor, chunk);
        factor = 1;
        chunk = 0;
      }
      factor *= radix;
      chunk = chunk * radix + digitValue(c);
    }
    if (factor > 1) value.multiplyAdd(factor, chunk);
  }
  return (negative && !value.isZero() ? "-" : "") + value.toString();
}

/// Java's Double.toString: the shortest digits that read back; plain notation with at least one
/// fraction digit for 1e-3 <= |v| < 1e7, else "d.dddE<n>".
std::string javaDoubleText(double value) {
  if (std::isnan(value)) return ".NaN";  // SnakeYAML's representer, not Java's "NaN"
  if (std::isinf(value)) return value > 0 ? ".inf" : "-.inf";
  if (value == 0) return std::signbit(value) ? "-0.0" : "0.0";
  const double magnitude = std::fabs(value);
  std::string digits;
  int exponent = 0;
  // The significant digits and the decimal exponent of `magnitude` written in scientific form
  // (shortest, or with `precision` digits after the point); false if that does not read back
  // as `magnitude`.
  const auto split = [&](std::optional<int> precision) {
    char buffer[64];
    const auto written = precision ? std::to_chars(buffer, buffer + sizeof buffer, magnitude,
                                                   std::chars_format::scientific, *precision)
                                   : std::to_chars(buffer, buffer + sizeof buffer, magnitude,
                                                   std::chars_format::scientific);
    const std::string_view scientific(buffer, static_cast<std::size_t>(written.ptr - buffer));
    double back = 0;
    std::from_chars(scientific.data(), scientific.data() + scientific.size(), back);
    if (back != magnitude) return false;
    const std::size_t e = scientific.find('e');
    digits.clear();
    for (char c : scientific.substr(0, e)) {
      if (c != '.') digits += c;
    }
    std::string_view exponentText = scientific.substr(e + 1);
    if (exponentText.starts_with("+")) exponentText.remove_prefix(1);
    std::from_chars(exponentText.data(), exponentText.data() + exponentText.size(), exponent);
    return true;
  };
  split(std::nullopt);
  // Java writes at least two digits, and where one would do, the two closest to the value:
  // Double.MIN_VALUE is 4.9E-324, not 5.0E-324 (for most values they are the digit and a 0).
  if (digits.size() == 1 && !split(1)) split(std::nullopt);
  if (digits.size() == 2 && digits.back() == '0') digits.pop_back();  // the digit and a 0
  std::string text = value < 0 ? "-" : "";
  if (magnitude >= 1e-3 && magnitude < 1e7) {
    if (exponent >= 0) {
      const std::size_t whole = static_cast<std::size_t>(exponent) + 1;
      if (digits.size() < whole) digits.append(whole - digits.size(), '0');
      text += digits.substr(0, whole) + "." + (digits.size() > whole ? digits.substr(whole) : "0");
    } else {
      text += "0." + std::string(static_cast<std::size_t>(-exponent - 1), '0') + digits;
    }
  } else {
    text += digits.substr(0, 1) + "." + (digits.size() > 1 ? digits.substr(1) : "0") + "E" +
            std::to_string(exponent);
  }
  return text;
}

/// Whether the unsigned decimal `number` ("1.5e400", "0.000…1e-300", "1e+99999999999"), too
/// large or too small for a double, is too large: its decimal exponent (the digits before the
/// point, or less the zeros after it, plus the exponent) is positive.
bool pastDoubleMax(std::string_view number) {
  const std::size_t e = number.find_first_of("eE");
  const std::string_view mantissa = number.substr(0, e);
  long long exponent = 0;
  if (e != std::string_view::npos) {
    std::string_view digits = number.substr(e + 1);
    bool negative = false;
    if (!digits.empty() && (digits.front() == '-' || digits.front() == '+')) {
      negative = digits.front() == '-';
      digits.remove_prefix(1);
    }
    for (char c : digits) {
      if (isDigit(c) && exponent < 1'000'000'000'000) exponent = exponent * 10 + (c - '0');
    }
    if (negative) exponent = -exponent;
  }
  const std::size_t point = mantissa.find('.');
  const std::string_view whole = mantissa.substr(0, point);
  long long magnitude = 0;
  if (const std::size_t first = whole.find_first_not_of('0'); first != std::string_view::npos) {
    magnitude = static_cast<long long>(whole.size() - first);
  } else if (point != std::string_view::npos) {
    const std::string_view fraction = mantissa.substr(point + 1);
    magnitude = -static_cast<long long>(std::min(fraction.find_first_not_of('0'), fraction.size()));
  }
  return magnitude + exponent > 0;
}

/// SnakeYAML's ConstructYamlFloat, written back as Java writes a Double.
std::string floatText(std::string_view text) {
  std::string clean;
  for (char c : text) {
    if (c != '_') clean += c;
  }
  std::string_view body = clean;
  double sign = 1;
  if (!body.empty() && (body.front() == '-' || body.front() == '+')) {
    if (body.front() == '-') sign = -1;
    body.remove_prefix(1);
  }
  if (body == ".inf" || body == ".Inf" || body == ".INF") return javaDoubleText(sign * INFINITY);
  if (body == ".nan" || body == ".NaN" || body == ".NAN") return javaDoubleText(NAN);
  const auto parse = [](std::string_view part) {
    double parsed = 0;
    const auto result = std::from_chars(part.data(), part.data() + part.size(), parsed);
    if (result.ec == std::errc::result_out_of_range) {
      // Past what a double holds (from_chars then leaves it as it was): Java's Double.valueOf
      // gives Infinity for too large a number, 0.0 for too small a one.
      return pastDoubleMax(part) ? HUGE_VAL : 0.0;
    }
    return parsed;
  };
  if (body.find(':') != std::string_view::npos) {
    double total = 0;
    std::size_t start = 0;
    while (start <= body.size()) {
      const std::size_t colon = std::min(body.find(':', start), body.size());
      total = total * 60 + parse(body.substr(start, colon - start));
      start = colon + 1;
    }
    return javaDoubleText(sign * total);
  }
  // Java's Double.valueOf takes "1." and ".5"; from_chars needs a digit before the point.
  std::string number(body);
  if (number.starts_with(".")) number.insert(0, "0");
  return javaDoubleText(sign * parse(number));
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
long long daysFromCivil(long long year, unsigned month, unsigned day) {
  year -= month <= 2;
  const long long era = (year >= 0 ? year : year - 399) / 400;
  const unsigned yearOfEra = static_cast<unsigned>(year - era * 400);
  const unsigned dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1;
  const unsigned dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear;
  return era * 146097 + static_cast<long long>(dayOfEra) - 719468;
}

void civilFromDays(long long days, long long& year, unsigned& month, unsigned& day) {
  days += 719468;
  const long long era = (days >= 0 ? days : days - 146096) / 146097;
  const unsigned dayOfEra = static_cast<unsigned>(days - era * 146097);
  const unsigned yearOfEra =
      (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146096) / 365;
  const unsigned dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100);
  const unsigned mp = (5 * dayOfYear + 2) / 153;
  day = dayOfYear - (153 * mp + 2) / 5 + 1;
  month = mp < 10 ? mp + 3 : mp - 9;
  year = static_cast<long long>(yearOfEra) + era * 400 + (month <= 2);
}

/// Reads `count` digits (between `min` and `max` of them) at `at`.
bool readNumber(std::string_view text, std::size_t& at, std::size_t min, std::size_t max,
                int& value) {
  std::size_t digits = 0;
  value = 0;
  while (at < text.size() && digits < max && isDigit(text[at])) {
    value = value * 10 + (text[at] - '0');
    ++at;
    ++digits;
  }
  return digits >= min;
}

/// SnakeYAML's TIMESTAMP pattern; when it matches, the instant as SnakeYAML writes a Date in UTC.
std::optional<std::string> timestampText(std::string_view text) {
  std::size_t at = 0;
  int year = 0, month = 0, day = 0;
  if (!readNumber(text, at, 4, 4, year) || at >= text.size() || text[at++] != '-') return {};
  const std::size_t monthStart = at;
  if (!readNumber(text, at, 1, 2, month) || at >= text.size() || text[at++] != '-') return {};
  const bool shortMonth = at - monthStart == 2;
  const std::size_t dayStart = at;
  if (!readNumber(text, at, 1, 2, day)) return {};
  int hour = 0, minute = 0, second = 0, millis = 0, offsetMinutes = 0;
  if (at == text.size()) {
    // The date-only form needs two-digit month and day.
    if (shortMonth || at - dayStart != 2) return {};
  } else {
    if (text[at] == 'T' || text[at] == 't') {
      ++at;
    } else if (text[at] == ' ' || text[at] == '\t') {
      while (at < text.size() && (text[at] == ' ' || text[at] == '\t')) ++at;
    } else {
      return {};
    }
    if (!readNumber(text, at, 1, 2, hour) || at >= text.size() || text[at++] != ':') return {};
    if (!readNumber(text, at, 2, 2, minute) || at >= text.size() || text[at++] != ':') return {};
    if (!readNumber(text, at, 2, 2, second)) return {};
    if (at < text.size() && text[at] == '.') {
      ++at;
      std::size_t digits = 0;
      while (at < text.size() && isDigit(text[at])) {
        if (digits < 3) millis = millis * 10 + (text[at] - '0');
        ++digits;
        ++at;
      }
      for (std::size_t pad = digits; pad < 3; ++pad) millis *= 10;
    }
    while (at < text.size() && (text[at] == ' ' || text[at] == '\t')) ++at;
    if (at < text.size()) {
      if (text[at] == 'Z') {
        ++at;
      } else if (text[at] == '+' || text[at] == '-') {
        const int sign = text[at++] == '-' ? -1 : 1;
        int hours = 0, minutes = 0;
        if (!readNumber(text, at, 1, 2, hours)) return {};
        if (at < text.size() && text[at] == ':') {
          ++at;
          if (!readNumber(text, at, 2, 2, minutes)) return {};
        }
        offsetMinutes = sign * (hours * 60 + minutes);
      } else {
        return {};
      }
    }
    if (at != text.size()) return {};
  }
  // Java's lenient Calendar rolls over out-of-range fields (month 13, day 32); so does the sum.
  const long long seconds =
      (daysFromCivil(year, static_cast<unsigned>(std::max(month, 1)), 1) + day - 1) * 86400 +
      hour * 3600LL + minute * 60LL + second - offsetMinutes * 60LL;
  long long days = seconds / 86400;
  long long inDay = seconds % 86400;
  if (inDay < 0) {
    inDay += 86400;
    --days;
  }
  long long outYear = 0;
  unsigned outMonth = 0, outDay = 0;
  civilFromDays(days, outYear, outMonth, outDay);
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%04lld-%02u-%02uT%02lld:%02lld:%02lld", outYear, outMonth,
                outDay, inDay / 3600, inDay / 60 % 60, inDay % 60);
  std::string result = buffer;
  if (millis > 0) {
    std::snprintf(buffer, sizeof buffer, ".%03d", millis);
    result += buffer;
  }
  return result + "Z";
}

}  // namespace

bool resolvesToNonString(std::string_view text) {
  bool ignored = false;
  return isYamlNull(text) || isYamlBool(text, ignored) || isYamlInt(text) || isYamlFloat(text) ||
         text == "<<" || timestampText(text).has_value();
}

namespace {

/// The length of the UTF-8 sequence at `at` and its code point, or 0 when it is not valid UTF-8.
std::size_t decodeUtf8(std::string_view text, std::size_t at, char32_t& codePoint) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(at);
  std::size_t length = 0;
  if (lead < 0x80) {
    codePoint = lead;
    return 1;
  }
  if ((lead & 0xE0) == 0xC0) {
    length = 2;
    codePoint = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3;
    codePoint = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4;
    codePoint = lead & 0x07;
  } else {
    return 0;
  }
  if (at + length > text.size()) return 0;
  for (std::size_t i = 1; i < length; ++i) {
    if ((byte(at + i) & 0xC0) != 0x80) return 0;
    codePoint = (codePoint << 6) | (byte(at + i) & 0x3F);
  }
  static constexpr char32_t kMinimum[] = {0, 0, 0x80, 0x800, 0x10000};
  if (codePoint < kMinimum[length] || codePoint > 0x10FFFF ||
      (codePoint >= 0xD800 && codePoint <= 0xDFFF)) {
    return 0;
  }
  return length;
}

enum class Style { kPlain, kSingleQuoted, kDoubleQuoted };

/// SnakeYAML's Emitter.analyzeScalar and chooseScalarStyle for a string in a flow collection. A
/// line break goes to double quotes here (SnakeYAML folds it into single quotes; both read back
/// the same).
Style chooseStyle(std::string_view value) {
  if (value.empty()) return Style::kSingleQuoted;
  bool flowIndicators = value.starts_with("---") || value.starts_with("...");
  bool special = false;
  bool precededByWhitespace = true;
  for (std::size_t at = 0; at < value.size();) {
    char32_t c = 0;
    const std::size_t length = decodeUtf8(value, at, c);
    if (length == 0) return Style::kDoubleQuoted;  // not UTF-8: only escapes can carry it
    const std::size_t next = at + length;
    const bool followedByWhitespace = next >= value.size() || value[next] == ' ' ||
                                      value[next] == '\t' || value[next] == '\r' ||
                                      value[next] == '\n';
    if (at == 0) {
      if (std::string_view("#,[]{}&*!|>'\"%@`").find(static_cast<char>(c)) !=
              std::string_view::npos &&
          c < 0x80) {
        flowIndicators = true;
      }
      if (c == '?' || c == ':') flowIndicators = true;
      if (c == '-' && followedByWhitespace) flowIndicators = true;
    } else {
      if (c < 0x80 &&
          std::string_view(",?[]{}").find(static_cast<char>(c)) != std::string_view::npos) {
        flowIndicators = true;
      }
      if (c == ':') flowIndicators = true;
      if (c == '#' && precededByWhitespace) flowIndicators = true;
    }
    // Printable: ASCII 0x20-0x7E, and Unicode outside the control and special ranges. Line
    // breaks (ASCII and NEL, LS, PS) and tabs go to double quotes.
    const bool printable =
        (c >= 0x20 && c <= 0x7E) || (c >= 0xA0 && c <= 0xD7FF && c != 0x2028 && c != 0x2029) ||
        (c >= 0xE000 && c <= 0xFFFD && c != 0xFEFF) || (c >= 0x10000 && c < 0x10FFFF);
    if (!printable) special = true;
    precededByWhitespace = c == ' ' || c == '\t' || c == '\r' || c == '\n';
    at = next;
  }
  if (special) return Style::kDoubleQuoted;
  const bool edgeSpace = value.front() == ' ' || value.back() == ' ';
  if (edgeSpace || flowIndicators || resolvesToNonString(value)) return Style::kSingleQuoted;
  return Style::kPlain;
}

std::string doubleQuoted(std::string_view value) {
  std::string text = "\"";
  for (std::size_t at = 0; at < value.size();) {
    char32_t c = 0;
    std::size_t length = decodeUtf8(value, at, c);
    char buffer[16];
    if (length == 0) {
      // Not UTF-8: the byte itself, as YAML's 8-bit escape.
      std::snprintf(buffer, sizeof buffer, "\\x%02X", static_cast<unsigned char>(value[at]));
      text += buffer;
      at += 1;
      continue;
    }
    switch (c) {
      case '"':
        text += "\\\"";
        break;
      case '\\':
        text += "\\\\";
        break;
      case '\0':
        text += "\\0";
        break;
      case '\a':
        text += "\\a";
        break;
      case '\b':
        text += "\\b";
        break;
      case '\t':
        text += "\\t";
        break;
      case '\n':
        text += "\\n";
        break;
      case '\v':
        text += "\\v";
        break;
      case '\f':
        text += "\\f";
        break;
      case '\r':
        text += "\\r";
        break;
      case 0x1B:
        text += "\\e";
        break;
      default:
        if (c < 0x20 || c == 0x7F) {
          std::snprintf(buffer, sizeof buffer, "\\x%02X", static_cast<unsigned>(c));
          text += buffer;
        } else if ((c >= 0x80 && c < 0xA0) || c == 0x2028 || c == 0x2029 || c == 0xFEFF ||
                   (c >= 0xFFFE && c <= 0xFFFF)) {
          std::snprintf(buffer, sizeof buffer, "\\u%04X", static_cast<unsigned>(c));
          text += buffer;
        } else {
          text.append(value.substr(at, length));
        }
    }
    at += length;
  }
  return text + "\"";
}

/// What reading one list text has spent (nodes visited, an alias in full each time it is used,
/// and bytes written), and its plain scalars, each resolved once.
struct ListReading {
  PlainScalars scalars;
  std::size_t nodes = 0;
  std::size_t bytes = 0;

  void visit() {
    if (++nodes > kMaxExpandedNodes) {
      throw ListTooLarge("it expands to more than " + std::to_string(kMaxExpandedNodes) +
                         " elements and entries; an alias (*name) counts in full each time it "
                         "is used");
    }
  }
  void write(std::size_t size) {
    bytes += size;
    if (bytes > kMaxExpandedBytes) {
      throw ListTooLarge("it expands to more than " + std::to_string(kMaxExpandedBytes >> 20) +
                         " MiB of text; an alias (*name) counts in full each time it is used");
    }
  }
};

/// A yaml-cpp node as Flink writes the object SnakeYAML makes of it; nullopt for a null
/// anywhere in it (Flink's convertToString then fails, and convertToList falls back).
std::optional<std::string> nodeText(const YAML::Node& node, bool inFlow, ListReading& reading) {
  reading.visit();
  switch (node.Type()) {
    case YAML::NodeType::Scalar: {
      // "?" is a plain scalar; "!" a quoted one; an explicit !!str keeps its text too.
      const bool plain = node.Tag() == "?";
      std::optional<std::string> text;
      if (!plain) {
        text = inFlow ? flowString(node.Scalar()) : node.Scalar();
      } else {
        const PlainScalars::Resolved& resolved =
            reading.scalars.resolve(node.Mark().pos, node.Scalar());
        if (!resolved.text) return std::nullopt;
        text = inFlow && resolved.isString ? flowString(*resolved.text) : *resolved.text;
      }
      reading.write(text->size());
      return text;
    }
    case YAML::NodeType::Sequence: {
      std::string text = "[";
      for (const YAML::Node& element : node) {
        std::optional<std::string> elementText = nodeText(element, true, reading);
        if (!elementText) return std::nullopt;
        if (text.size() > 1) text += ", ";
        text += *elementText;
      }
      return text + "]";
    }
    case YAML::NodeType::Map: {
      std::string text = "{";
      for (const auto& entry : node) {
        std::optional<std::string> key = nodeText(entry.first, true, reading);
        std::optional<std::string> value = nodeText(entry.second, true, reading);
        if (!key || !value) return std::nullopt;
        if (text.size() > 1) text += ", ";
        text += *key + ": " + *value;
      }
      return text + "}";
    }
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      break;
  }
  return std::nullopt;
}

/// Notes where each document's first node is.
class DocumentCounter final : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override {
    ++documents_;
    firstMark_ = mark;
    sawNode_ = false;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { node(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { node(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override {
    node(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    node(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    node(mark);
  }
  void OnMapEnd() override {}

  int documents() const { return documents_; }
  int line() const { return firstMark_.is_null() ? 0 : firstMark_.line + 1; }

 private:
  void node(const YAML::Mark& mark) {
    if (!sawNode_) firstMark_ = mark;
    sawNode_ = true;
  }
  int documents_ = 0;
  YAML::Mark firstMark_ = YAML::Mark::null_mark();
  bool sawNode_ = false;
};

}  // namespace

int countDocuments(const std::string& text, int& secondLine) {
  std::istringstream input(text);
  YAML::Parser parser(input);
  DocumentCounter counter;
  while (counter.documents() < 2 && parser.HandleNextDocument(counter)) {
  }
  if (counter.documents() >= 2) secondLine = counter.line();
  return counter.documents();
}

void ConversionBudget::charge(std::size_t digits, const char* base) {
  if (digits <= kFreeConvertedDigits) return;
  const bool tooLong = digits > kMaxConvertedDigits;
  if (!tooLong && digits <= kMaxConvertedDigitsInAll - spent_) {
    spent_ += digits;
    return;
  }
  const std::string integer =
      "a plain " + std::string(base) + " integer of " + std::to_string(digits) + " digits";
  const std::string why =
      tooLong ? ", more than the " + std::to_string(kMaxConvertedDigits) +
                    " this reader writes back in decimal as Flink does"
              : ", which brings the long integers in bases other than 10 past " +
                    std::to_string(kMaxConvertedDigitsInAll) +
                    " digits in all, more than this reader writes back in decimal as Flink does";
  throw IntegerTooLong(integer + why + "; quote it to keep it as text");
}

std::optional<std::string> plainScalarText(std::string_view text, ConversionBudget& budget) {
  if (isYamlNull(text)) return std::nullopt;
  bool boolean = false;
  if (isYamlBool(text, boolean)) return std::string(boolean ? "true" : "false");
  // SnakeYAML tries INT before FLOAT, and TIMESTAMP after both.
  if (isYamlInt(text)) return intText(text, budget);
  if (isYamlFloat(text)) return floatText(text);
  if (std::optional<std::string> timestamp = timestampText(text)) return timestamp;
  return std::string(text);
}

const PlainScalars::Resolved& PlainScalars::resolve(int position, std::string_view text) {
  if (position >= 0) {
    if (const auto known = byPosition_.find(position); known != byPosition_.end()) {
      return known->second;
    }
  }
  Resolved resolved{plainScalarText(text, integers_), !resolvesToNonString(text)};
  if (position < 0) return unplaced_ = std::move(resolved);
  return byPosition_.emplace(position, std::move(resolved)).first->second;
}

std::string flowString(std::string_view value) {
  switch (chooseStyle(value)) {
    case Style::kPlain:
      return std::string(value);
    case Style::kSingleQuoted: {
      std::string text = "'";
      for (char c : value) {
        text += c;
        if (c == '\'') text += '\'';
      }
      return text + "'";
    }
    case Style::kDoubleQuoted:
      break;
  }
  return doubleQuoted(value);
}

std::string flowSequence(const std::vector<FlowElement>& elements) {
  std::string text = "[";
  for (const FlowElement& element : elements) {
    if (text.size() > 1) text += ", ";
    text += element.isString ? flowString(element.text) : element.text;
  }
  return text + "]";
}

std::string flowSequenceOfStrings(const std::vector<std::string>& elements) {
  std::vector<FlowElement> strings;
  strings.reserve(elements.size());
  for (const std::string& element : elements) strings.push_back({element, true});
  return flowSequence(strings);
}

std::optional<std::vector<std::string>> readYamlList(const std::string& text) {
  try {
    // "gpu;fpga" and "gpu" are YAML scalars, not sequences: the legacy split reads them.
    int secondLine = 0;
    if (countDocuments(text, secondLine) != 1) return std::nullopt;
    const YAML::Node root = YAML::Load(text);
    if (!root.IsSequence()) return std::nullopt;
    std::vector<std::string> elements;
    ListReading reading;
    for (const YAML::Node& element : root) {
      std::optional<std::string> elementText = nodeText(element, false, reading);
      if (!elementText) return std::nullopt;
      elements.push_back(std::move(*elementText));
    }
    return elements;
  } catch (const YAML::Exception&) {
    return std::nullopt;  // not YAML: Flink falls back to the ';' split
  }
}

}  // namespace flink::yamlvalues
