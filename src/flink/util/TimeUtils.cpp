// Duration text, read the way Flink's TimeUtils.parseDuration reads it.
#include "flink/util/TimeUtils.h"

#include <array>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <limits>
#include <stdexcept>

#include "util/Strings.h"

namespace flink {
namespace {

struct Unit {
  std::string_view name;
  std::int64_t nanos;
};

constexpr std::int64_t kMicro = 1'000;
constexpr std::int64_t kMilli = 1'000'000;
constexpr std::int64_t kSecond = 1'000'000'000;

constexpr std::array kUnits{
    Unit{"ns", 1},
    Unit{"nano", 1},
    Unit{"nanos", 1},
    Unit{"nanosecond", 1},
    Unit{"nanoseconds", 1},
    Unit{"us", kMicro},
    Unit{"\xC2\xB5s", kMicro},  // µs
    Unit{"micro", kMicro},
    Unit{"micros", kMicro},
    Unit{"microsecond", kMicro},
    Unit{"microseconds", kMicro},
    Unit{"ms", kMilli},
    Unit{"milli", kMilli},
    Unit{"millis", kMilli},
    Unit{"millisecond", kMilli},
    Unit{"milliseconds", kMilli},
    Unit{"s", kSecond},
    Unit{"sec", kSecond},
    Unit{"secs", kSecond},
    Unit{"second", kSecond},
    Unit{"seconds", kSecond},
    Unit{"m", 60 * kSecond},
    Unit{"min", 60 * kSecond},
    Unit{"minute", 60 * kSecond},
    Unit{"minutes", 60 * kSecond},
    Unit{"h", 3600 * kSecond},
    Unit{"hour", 3600 * kSecond},
    Unit{"hours", 3600 * kSecond},
    Unit{"d", 86400 * kSecond},
    Unit{"day", 86400 * kSecond},
    Unit{"days", 86400 * kSecond},
};

[[noreturn]] void fail(std::string_view text, std::string_view why) {
  throw InvalidDurationException(text, std::string(why));
}

}  // namespace

std::chrono::milliseconds parseDuration(std::string_view text) {
  const std::string_view trimmed = strings::trim(text);
  if (trimmed.empty()) fail(text, "it is empty");

  std::size_t digits = 0;
  while (digits < trimmed.size() && std::isdigit(static_cast<unsigned char>(trimmed[digits]))) {
    ++digits;
  }
  if (digits == 0) fail(text, "it does not start with a number");

  std::int64_t amount = 0;
  const auto [end, ec] = std::from_chars(trimmed.data(), trimmed.data() + digits, amount);
  if (ec != std::errc() || end != trimmed.data() + digits) fail(text, "the number is too large");

  const std::string unit = strings::toLower(strings::trim(trimmed.substr(digits)));
  std::int64_t nanosPerUnit = kMilli;  // Flink: no unit means milliseconds.
  if (!unit.empty()) {
    bool known = false;
    for (const Unit& candidate : kUnits) {
      if (candidate.name == unit) {
        nanosPerUnit = candidate.nanos;
        known = true;
        break;
      }
    }
    if (!known) {
      fail(text, "unknown time unit '" + unit + "' (use ms, s, min, h or d)");
    }
  }

  // Convert to whole milliseconds, rounding a sub-millisecond remainder up.
  if (nanosPerUnit >= kMilli) {
    const std::int64_t factor = nanosPerUnit / kMilli;
    if (amount > std::numeric_limits<std::int64_t>::max() / factor) fail(text, "it overflows");
    return std::chrono::milliseconds(amount * factor);
  }
  const std::int64_t perMilli = kMilli / nanosPerUnit;
  return std::chrono::milliseconds(amount / perMilli + (amount % perMilli != 0 ? 1 : 0));
}

std::string formatDuration(std::chrono::milliseconds duration) {
  const std::int64_t ms = duration.count();
  struct Step {
    std::int64_t millis;
    const char* unit;
  };
  constexpr std::array kSteps{Step{86'400'000, "d"}, Step{3'600'000, "h"}, Step{60'000, "min"},
                              Step{1'000, "s"}};
  if (ms != 0) {
    for (const Step& step : kSteps) {
      if (ms % step.millis == 0) return std::to_string(ms / step.millis) + " " + step.unit;
    }
  }
  return std::to_string(ms) + " ms";
}

}  // namespace flink
