// The library's loggers: a small facade over spdlog, the counterpart of the SLF4J loggers of
// Flink's driver. This header names no spdlog or fmt type, so only util/Logging.cpp compiles
// spdlog; callers hand over finished messages.
//
// A logger is registered in spdlog's registry under its name (e.g. "GPUDriver"), writes to
// stderr, and follows spdlog's global level. In the shared library that is the system's spdlog, so
// a host program controls the loggers with spdlog::set_level or spdlog::get(name).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace spdlog {
class logger;
}

namespace flink::logging {

/// Severities, lowest first; kOff (for setLevel only) logs nothing.
enum class Level { kDebug, kInfo, kWarn, kError, kOff };

/// One named logger. Cheap to copy; thread-safe.
class Logger {
 public:
  /// The logger named `name`, registered in spdlog's registry on first use.
  explicit Logger(const std::string& name);

  /// Whether a message at `level` would be written: to skip building an expensive one.
  bool enabled(Level level) const;
  void log(Level level, std::string_view message) const;

  void debug(std::string_view message) const { log(Level::kDebug, message); }
  void info(std::string_view message) const { log(Level::kInfo, message); }
  void warn(std::string_view message) const { log(Level::kWarn, message); }
  void error(std::string_view message) const { log(Level::kError, message); }

 private:
  std::shared_ptr<spdlog::logger> logger_;
};

/// Sets the level of every logger (spdlog's global level): flink-gpu's -q, -v and -vv.
void setLevel(Level level);

/// Where a message at or above the level goes instead of spdlog's stderr line: the sink gets the
/// level, the logger's name and the message, and returns whether it took the message (false: it
/// is written as without a sink). A program that talks to a person in its own voice (flink-gpu)
/// installs one at start-up; an empty one removes it. Called from any thread that logs.
using Sink = std::function<bool(Level level, std::string_view logger, std::string_view message)>;
void setSink(Sink sink);

}  // namespace flink::logging
