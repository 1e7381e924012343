#include "util/Logging.h"

#include <mutex>
#include <utility>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace flink::logging {
namespace {

spdlog::level::level_enum toSpdlog(Level level) {
  switch (level) {
    case Level::kDebug:
      return spdlog::level::debug;
    case Level::kInfo:
      return spdlog::level::info;
    case Level::kWarn:
      return spdlog::level::warn;
    case Level::kError:
      return spdlog::level::err;
    case Level::kOff:
      break;
  }
  return spdlog::level::off;
}

std::shared_ptr<spdlog::logger> registered(const std::string& name) {
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  if (auto existing = spdlog::get(name)) return existing;
  auto logger = spdlog::stderr_color_mt(name);
  logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%-5l%$ %n - %v");
  return logger;
}

std::mutex sinkMutex;
std::shared_ptr<const Sink> installedSink;

std::shared_ptr<const Sink> currentSink() {
  const std::lock_guard lock(sinkMutex);
  return installedSink;
}

}  // namespace

Logger::Logger(const std::string& name) : logger_(registered(name)) {}

bool Logger::enabled(Level level) const { return logger_->should_log(toSpdlog(level)); }

void Logger::log(Level level, std::string_view message) const {
  if (!logger_->should_log(toSpdlog(level))) return;
  if (const std::shared_ptr<const Sink> sink = currentSink()) {
    if ((*sink)(level, logger_->name(), message)) return;
  }
  logger_->log(toSpdlog(level), "{}", message);
}

void setLevel(Level level) { spdlog::set_level(toSpdlog(level)); }

void setSink(Sink sink) {
  std::shared_ptr<const Sink> installed;
  if (sink) installed = std::make_shared<const Sink>(std::move(sink));
  const std::lock_guard lock(sinkMutex);
  installedSink = std::move(installed);
}

}  // namespace flink::logging
