#include "Console.h"

#include <time.h>

#include <cctype>
#include <chrono>
#include <ctime>
#include <iostream>
#include <mutex>
#include <string>
#include <vector>

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

std::mutex heldMutex;
bool holding = false;
std::vector<std::string> heldMessages;

/// The library's message in flink-gpu's voice: "The GPU discovery script warns: …" reads
/// "the GPU discovery script warns: …" after "flink-gpu: warning: ".
std::string inOurVoice(std::string_view message) {
  std::string text(message);
  if (text.size() > 1 && std::isupper(static_cast<unsigned char>(text[0])) &&
      std::islower(static_cast<unsigned char>(text[1]))) {
    text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
  }
  return text;
}

/// The library's warnings and errors, as flink-gpu's warnings (held while a
/// HeldLibraryWarnings lives); its info and debug lines stay its log's.
bool takeLibraryMessage(logging::Level level, std::string_view, std::string_view message) {
  if (level != logging::Level::kWarn && level != logging::Level::kError) return false;
  {
    const std::lock_guard lock(heldMutex);
    if (holding) {
      heldMessages.emplace_back(message);
      return true;
    }
  }
  printWarning(inOurVoice(message));
  return true;
}

}  // namespace

HeldLibraryWarnings::HeldLibraryWarnings() {
  const std::lock_guard lock(heldMutex);
  holding = true;
  heldMessages.clear();
}

void HeldLibraryWarnings::print(std::string_view failure) {
  std::vector<std::string> toPrint;
  {
    const std::lock_guard lock(heldMutex);
    if (!holding) return;
    holding = false;
    toPrint.swap(heldMessages);
  }
  for (const std::string& warning : toPrint) {
    if (failure.empty() || failure.find(warning) == std::string_view::npos) {
      printWarning(inOurVoice(warning));
    }
  }
}

void setVerbosity(Verbosity verbosity) {
  currentVerbosity = verbosity;
  logging::setSink(takeLibraryMessage);
  switch (verbosity) {
    case Verbosity::kQuiet:
      logging::setLevel(logging::Level::kOff);
      break;
    case Verbosity::kNormal:
      logging::setLevel(logging::Level::kWarn);
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
  if (currentVerbosity >= Verbosity::kVerbose) writeLines("flink-gpu: ", message);
}

void printHint(std::string_view message) {
  if (currentVerbosity != Verbosity::kQuiet) writeLines("hint: ", message);
}

}  // namespace flink::cli
