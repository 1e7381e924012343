// Text forms of durations, as Flink's TimeUtils reads and writes them.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace flink {

/// Parses a duration such as "10 s", "500 ms", "1 min", "2h" or "1500" (no unit: milliseconds).
/// Units, as in Flink's TimeUtils.parseDuration: ns/nano/nanos/nanosecond(s), us/µs/micro/...,
/// ms/milli/millis/millisecond(s), s/sec/secs/second(s), m/min/minute(s), h/hour(s), d/day(s);
/// case-insensitive, optional whitespace between number and unit. Sub-millisecond parts are
/// rounded up to whole milliseconds so that a positive duration never becomes zero.
/// @throws std::invalid_argument naming the text when it is empty, has no number, an unknown unit,
///         or overflows.
std::chrono::milliseconds parseDuration(std::string_view text);

/// Formats a duration the way parseDuration reads it, in the largest unit that keeps it exact:
/// "10 s", "500 ms", "1 min".
std::string formatDuration(std::chrono::milliseconds duration);

}  // namespace flink
