// How flink-gpu talks to a person on stderr: one clear first line, details after.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace flink::cli {

enum class Verbosity { kQuiet, kNormal, kVerbose, kDebug };

/// Sets the verbosity of flink-gpu's own messages and of the library's loggers: the library's
/// warnings and errors are flink-gpu's warnings, unless quiet (printWarning); its info (-v) and
/// debug (-vv) lines are its own log's.
void setVerbosity(Verbosity verbosity);
Verbosity verbosity();

/// While one lives, the library's warnings are held instead of printed; they are printed, as
/// flink-gpu's own warnings, by print() or at its end, except those a failure says again
/// (print(failure)): the library logs a failure before it throws it, and flink-gpu prints the
/// exception itself. One at a time.
class HeldLibraryWarnings {
 public:
  HeldLibraryWarnings();
  ~HeldLibraryWarnings() { print(); }
  HeldLibraryWarnings(const HeldLibraryWarnings&) = delete;
  HeldLibraryWarnings& operator=(const HeldLibraryWarnings&) = delete;

  /// Prints what is held, but the warnings `failure` (an exception's text) says again, and
  /// holds no more.
  void print(std::string_view failure = {});
};

/// From now on, every line the functions below print starts with the local time and a space
/// (localTimestamp), for a long-running command (`watch`) whose stderr is a file or a terminal.
/// Off by default: one-shot commands print none.
void setStderrTimestamps(bool on);

/// `time` as ISO 8601 local time with the UTC offset, to the second: "2026-12-05T04:10:00+01:00".
std::string localTimestamp(std::chrono::system_clock::time_point time);

/// `line` (no '\n') on stderr as it is, but for the time stamp; whatever the verbosity.
void printLine(std::string_view line);

/// "flink-gpu: error: <first line of message>", then the remaining lines of `message` unless quiet.
/// The first line must make sense alone, the cause in it: -q prints only it, and Flink's Java
/// driver joins a script's stderr lines without a separator in its log. Details go after it.
void printError(std::string_view message);

/// "flink-gpu: warning: <message>" unless quiet.
void printWarning(std::string_view message);

/// "flink-gpu: note: <message>" unless quiet: what flink-gpu chose for the user.
void printNote(std::string_view message);

/// "flink-gpu: <message>" with -v only: what flink-gpu found or chose, and why.
void printInfo(std::string_view message);

/// "hint: <message>" unless quiet.
void printHint(std::string_view message);

}  // namespace flink::cli
