#include "Console.h"

#include <time.h>

#include <chrono>
#include <ctime>
#include <iostream>
#include <string>

#include "util/Logging.h"

namespace flink::cli {
namespace {
Verbosity currentVerbosity = Verbosity::kNormal;
bool stampLines = false;

/// Each line of `text` on stderr, after `prefix`, each with the time when stamps are on.
void writeLines(std::string_view prefix, std::string_view text) {
  const std::string stamp =
      stampLines ? localTimestamp(std::chrono::system_clock::now()) + ' ' : std::string();
  std::string out;
  bool first = true;
  while (true) {
    const std::size_t newline = text.find('\n');
    out.append(stamp).append(first ? prefix : std::string_view()).append(text.substr(0, newline));
    out.push_back('\n');
    if (newline == std::string_view::npos) break;
    text.remove_prefix(newline + 1);
    first = false;
  }
  // One write per message, so that lines of two processes on one stream do not interleave.
  std::cerr << out << std::flush;
}
}  // namespace

void setVerbosity(Verbosity verbosity) {
  currentVerbosity = verbosity;
  switch (verbosity) {
    case Verbosity::kQuiet:
    case Verbosity::kNormal:
      // The library logs a failure at WARN before throwing it; flink-gpu prints the exception
      // itself, so by default the log would only say it twice.
      logging::setLevel(logging::Level::kError);
      break;
    case Verbosity::kVerbose:
      logging::setLevel(logging::Level::kInfo);
      break;
    case Verbosity::kDebug:
      logging::setLevel(logging::Level::kDebug);
      break;
  }
}

Verbosity verbosity() { return currentVerbosity; }

void setStderrTimestamps(bool on) { stampLines = on; }

std::string localTimestamp(std::chrono::system_clock::time_point time) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(time);
  struct tm local {};
  if (::localtime_r(&seconds, &local) == nullptr) return "?";
  char text[40];
  // %z is "+0100"; ISO 8601's extended form, which the date has, wants "+01:00".
  const std::size_t length = std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%S%z", &local);
  std::string stamp(text, length);
  if (stamp.size() >= 5) stamp.insert(stamp.size() - 2, 1, ':');
  return stamp;
}

void printLine(std::string_view line) { writeLines("", line); }

void printError(std::string_view message) {
  const std::size_t newline = message.find('\n');
  if (newline == std::string_view::npos || currentVerbosity == Verbosity::kQuiet) {
    writeLines("flink-gpu: error: ", message.substr(0, newline));
  } else {
    writeLines("flink-gpu: error: ", message);
  }
}

void printWarning(std::string_view message) {
  if (currentVerbosity != Verbosity::kQuiet) writeLines("flink-gpu: warning: ", message);
}

void printNote(std::string_view message) {
  if (currentVerbosity != Verbosity::kQuiet) writeLines("flink-gpu: note: ", message);
}

void printInfo(std::string_view message) {
  if (currentVerbosity >= Verbosity::kVerbose) std::cerr << "flink-gpu: " << message << '\n';
}

void printHint(std::string_view message) {
  if (currentVerbosity != Verbosity::kQuiet) writeLines("hint: ", message);
}

}  // namespace flink::cli
