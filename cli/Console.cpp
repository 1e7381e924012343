#include "Console.h"

#include <cctype>
#include <iostream>
#include <mutex>
#include <string>
#include <vector>

#include "util/Logging.h"

namespace flink::cli {
namespace {
Verbosity currentVerbosity = Verbosity::kNormal;

std::mutex heldMutex;
bool holding = false;
std::vector<std::string> held;

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
      held.emplace_back(message);
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
  held.clear();
}

void HeldLibraryWarnings::print(std::string_view failure) {
  std::vector<std::string> toPrint;
  {
    const std::lock_guard lock(heldMutex);
    if (!holding) return;
    holding = false;
    toPrint.swap(held);
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

void printError(std::string_view message) {
  const std::size_t newline = message.find('\n');
  std::cerr << "flink-gpu: error: " << message.substr(0, newline) << '\n';
  if (newline != std::string_view::npos && currentVerbosity != Verbosity::kQuiet) {
    std::cerr << message.substr(newline + 1) << '\n';
  }
}

void printWarning(std::string_view message) {
  if (currentVerbosity != Verbosity::kQuiet) std::cerr << "flink-gpu: warning: " << message << '\n';
}

void printNote(std::string_view message) {
  if (currentVerbosity != Verbosity::kQuiet) std::cerr << "flink-gpu: note: " << message << '\n';
}

void printInfo(std::string_view message) {
  if (currentVerbosity >= Verbosity::kVerbose) std::cerr << "flink-gpu: " << message << '\n';
}

void printHint(std::string_view message) {
  if (currentVerbosity != Verbosity::kQuiet) std::cerr << "hint: " << message << '\n';
}

}  // namespace flink::cli
