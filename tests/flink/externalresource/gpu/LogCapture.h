// What GPUDriver logs, captured for the tests that check it.
#pragma once

#include <algorithm>
#include <memory>
#include <sstream>
#include <string>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "util/Logging.h"

namespace flink::testing {

/// Captures what the driver logs, as "LEVEL message" lines.
class LogCapture {
 public:
  LogCapture() : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(text_)) {
    sink_->set_pattern("%l %v");
    logging::Logger("GPUDriver");  // registers it with spdlog, if the driver has not yet
    logger_ = spdlog::get("GPUDriver");
    previousLevel_ = logger_->level();
    logger_->set_level(spdlog::level::debug);
    logger_->sinks().push_back(sink_);
  }
  ~LogCapture() {
    auto& sinks = logger_->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
    logger_->set_level(previousLevel_);
  }
  std::string text() {
    logger_->flush();
    return text_.str();
  }
  bool contains(const std::string& level, const std::string& fragment) {
    std::istringstream lines(text());
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind(level + " ", 0) == 0 && line.find(fragment) != std::string::npos) return true;
    }
    return false;
  }

 private:
  std::ostringstream text_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
  std::shared_ptr<spdlog::logger> logger_;
  spdlog::level::level_enum previousLevel_;
};

}  // namespace flink::testing
