// `flink-gpu status`: reads the coordination file under its lock (coordination::readStatus) and
// prints one row per record — GPU, owner pid, running or gone — as an aligned table or as JSON.
#include "commands/StatusCommand.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <iostream>
#include <string>
#include <system_error>
#include <vector>

#include <nlohmann/json.hpp>

#include "Console.h"
#include "ExitCode.h"
#include "commands/CoordinationFileOption.h"
#include "coordination/Coordination.h"
#include "util/Strings.h"

namespace flink::cli {
namespace {

void printJson(const std::string& file, const coordination::Status& status) {
  nlohmann::ordered_json records = nlohmann::ordered_json::array();
  for (const coordination::RecordStatus& entry : status.records) {
    nlohmann::ordered_json record;
    record["gpu"] = entry.record.gpu;
    record["owner_pid"] = entry.record.owner.pid;
    if (entry.record.owner.startTime) {
      record["owner_start_time"] = *entry.record.owner.startTime;
    } else {
      record["owner_start_time"] = nullptr;
    }
    record["running"] = entry.running;
    records.push_back(std::move(record));
  }
  nlohmann::ordered_json junk = nlohmann::ordered_json::array();
  for (const coordination::JunkLine& line : status.junk) {
    junk.push_back(nlohmann::ordered_json{{"line", line.lineNumber}, {"text", line.text}});
  }
  nlohmann::ordered_json document;
  document["coordination_file"] = file;
  document["records"] = std::move(records);
  document["junk"] = std::move(junk);
  // Replace rather than throw on bytes that are not UTF-8 (a junk line may hold anything).
  std::cout << document.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace)
            << '\n';
}

/// Columns separated by two spaces, each as wide as its widest cell; no trailing blanks.
void printTable(const std::vector<std::array<std::string, 3>>& rows) {
  std::array<std::size_t, 3> widths{};
  for (const auto& row : rows) {
    for (std::size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line.append(widths[i] - row[i].size() + 2, ' ');
    }
    std::cout << line << '\n';
  }
}

void printText(const std::string& file, const coordination::Status& status) {
  for (const coordination::JunkLine& line : status.junk) {
    printWarning("ignoring line " + std::to_string(line.lineNumber) + " of " + file +
                 ", which is not a record: '" + strings::quoteForMessage(line.text) + "'");
  }
  if (status.records.empty()) {
    std::error_code error;
    const bool exists = std::filesystem::exists(std::filesystem::symlink_status(file, error));
    std::cout << "no GPU is held: coordination file " << file
              << (exists ? " has no records" : " does not exist") << '\n';
    return;
  }
  std::vector<std::array<std::string, 3>> rows{{"GPU", "OWNER PID", "OWNER"}};
  for (const coordination::RecordStatus& entry : status.records) {
    rows.push_back({entry.record.gpu, std::to_string(entry.record.owner.pid),
                    entry.running ? "running" : "gone"});
  }
  printTable(rows);
}

}  // namespace

CLI::App* addStatusCommand(CLI::App& app, StatusOptions& options) {
  CLI::App* command =
      app.add_subcommand("status",
                         "Show which GPUs the coordination file records, for which processes, and "
                         "whether those are still running.");
  addCoordinationFileOption(*command, options.coordinationFile);
  command->add_option("--format", options.format, "Output format")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  return command;
}

int runStatus(const StatusOptions& options) {
  coordination::Status status;
  try {
    status = coordination::readStatus(options.coordinationFile);
  } catch (const coordination::CoordinationError& e) {
    printError(e.what());
    return kDiscoveryFailed;
  }
  if (options.format == "json") {
    printJson(options.coordinationFile, status);
  } else {
    printText(options.coordinationFile, status);
  }
  return kSuccess;
}

}  // namespace flink::cli
