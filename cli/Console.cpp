#include "Console.h"

#include <iostream>

#include "util/Logging.h"

namespace flink::cli {
namespace {
Verbosity currentVerbosity = Verbosity::kNormal;
}

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
