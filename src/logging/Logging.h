// The library's loggers (spdlog), the counterpart of the SLF4J loggers in Flink's driver.
//
// Loggers are registered in spdlog's registry under their name (e.g. "GPUDriver"), write to
// stderr, and follow spdlog's global level, so a host program controls them with
// spdlog::set_level or spdlog::get(name).
#pragma once

#include <memory>
#include <string>

#include <spdlog/logger.h>

namespace flink::logging {

/// The logger named `name`, made on first use. Thread-safe.
std::shared_ptr<spdlog::logger> get(const std::string& name);

}  // namespace flink::logging
