// Text forms of durations, as Flink's TimeUtils reads and writes them.
#pragma once

#include <chrono>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace flink {

/// What parseDuration throws: its message names the text ("Invalid duration '5x': unknown time
/// unit 'x' (use ms, s, min, h or d)"); reason() is the cause alone, for a caller that names the
/// text its own way (flink-gpu's `invalid --timeout '5x': ...`).
class InvalidDurationException : public std::invalid_argument {
 public:
  InvalidDurationException(std::string_view text, std::string reason)
      : std::invalid_argument("Invalid duration '" + std::string(text) + "': " + reason),
        reason_(std::move(reason)) {}

  const std::string& reason() const noexcept { return reason_; }

 private:
  std::string reason_;
};

/// Parses a duration such as "10 s", "500 ms", "1 min", "2h" or "1500" (no unit: milliseconds).
/// Units, as in Flink's TimeUtils.parseDuration: ns/nano/nanos/nanosecond(s), us/µs/micro/...,
/// ms/milli/millis/millisecond(s), s/sec/secs/second(s), m/min/minute(s), h/hour(s), d/day(s);
/// case-insensitive, optional whitespace between number and unit. Sub-millisecond parts are
/// rounded up to whole milliseconds so that a positive duration never becomes zero.
/// @throws InvalidDurationException (a std::invalid_argument) naming the text when it is empty,
///         has no number, an unknown unit, or overflows.
std::chrono::milliseconds parseDuration(std::string_view text);

/// Formats a duration the way parseDuration reads it, in the largest unit that keeps it exact:
/// "10 s", "500 ms", "1 min".
std::string formatDuration(std::chrono::milliseconds duration);

}  // namespace flink
