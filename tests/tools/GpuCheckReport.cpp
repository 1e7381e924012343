// gpu-check-report: reads the JSON report of scripts/gpu-machine-check.sh for its test
// (gpu_machine_check_test.sh), with nlohmann's parser, which refuses anything that is not JSON
// (invalid UTF-8 included). The script writes that JSON with awk and sed alone, so this is where
// its escaping is proved.
//
//   gpu-check-report FILE.json verdicts        checks the report's shape, then prints
//                                               "<verdict> <id>" for each check, in order
//   gpu-check-report FILE.json commands        "$ <command>" for each command, as the text
//                                               report shows them
//   gpu-check-report FILE.json field CHECK COMMAND KEY
//                                               the KEY of a command of the check: COMMAND is
//                                               its place (from 0), or the end of its text;
//                                               strings as they are, anything else as JSON
//   gpu-check-report FILE.json check CHECK KEY the KEY of a check (its reason, …), likewise
//   gpu-check-report FILE.json top KEY         a key of the report itself, likewise
//
// Exit status: 0, 1 when the file is not JSON or not the report's shape (the line says why), 2
// for a wrong command line.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace {

using nlohmann::json;

[[noreturn]] void invalid(const std::string& why) { throw std::runtime_error(why); }

const json& member(const json& object, const std::string& key, json::value_t type) {
  if (!object.is_object() || !object.contains(key)) invalid("no key '" + key + "'");
  const json& value = object.at(key);
  const bool numberWanted = type == json::value_t::number_integer;
  if (numberWanted ? !value.is_number_integer() : value.type() != type) {
    invalid("'" + key + "' is " + value.type_name());
  }
  return value;
}

/// Every key the script promises, with its type; the summary agreeing with the verdicts.
void checkShape(const json& report) {
  using T = json::value_t;
  if (member(report, "report", T::string) != "flink-gpu gpu-machine-check") invalid("report name");
  member(report, "format", T::number_integer);
  const std::string mode = member(report, "mode", T::string);
  if (mode != "bundle" && mode != "full") invalid("mode " + mode);
  for (const char* key : {"started", "finished", "host", "user"}) member(report, key, T::string);
  member(report, "duration_ms", T::number_integer);
  for (const char* key : {"check_s", "total_s", "watch_s", "nvml_runs"}) {
    member(member(report, "limits", T::object), key, T::number_integer);
  }
  const std::set<std::string> verdicts{"pass", "fail", "timeout", "skipped"};
  json counts = {{"pass", 0}, {"fail", 0}, {"timeout", 0}, {"skipped", 0}};
  std::set<std::string> ids;
  for (const json& check : member(report, "checks", T::array)) {
    const std::string id = member(check, "id", T::string);
    if (!ids.insert(id).second) invalid("check " + id + " twice");
    const std::string verdict = member(check, "verdict", T::string);
    if (verdicts.count(verdict) == 0) invalid(id + ": verdict " + verdict);
    counts[verdict] = counts[verdict].get<int>() + 1;
    member(check, "title", T::string);
    const std::string reason = member(check, "reason", T::string);
    if ((verdict == "pass") != reason.empty()) invalid(id + ": reason '" + reason + "'");
    member(check, "limit_s", T::number_integer);
    member(check, "duration_ms", T::number_integer);
    for (const json& line : member(check, "failures", T::array)) {
      if (!line.is_string()) invalid(id + ": a failure that is not a string");
    }
    for (const json& line : member(check, "notes", T::array)) {
      if (!line.is_string()) invalid(id + ": a note that is not a string");
    }
    for (const json& command : member(check, "commands", T::array)) {
      member(command, "command", T::string);
      const std::string judged = member(command, "judged", T::string);
      if (judged != "exit-status" && judged != "by-the-check" && judged != "shown") {
        invalid(id + ": judged " + judged);
      }
      member(command, "exit", T::number_integer);
      member(command, "timed_out", T::boolean);
      member(command, "duration_ms", T::number_integer);
      for (const char* stream : {"stdout", "stderr"}) {
        const std::string name = stream;
        member(command, name, T::string);
        member(command, name + "_lines", T::number_integer);
        member(command, name + "_bytes", T::number_integer);
        member(command, name + "_cut", T::boolean);
      }
    }
  }
  const json& summary = member(report, "summary", T::object);
  for (const auto& [verdict, count] : counts.items()) {
    if (member(summary, verdict, T::number_integer) != count) invalid("summary of " + verdict);
  }
  if (!report.contains("interrupted")) invalid("no key 'interrupted'");
  const json& interrupted = report.at("interrupted");
  if (!interrupted.is_null() && !interrupted.is_string()) invalid("'interrupted' is not a signal");
  const bool ok = counts["fail"] == 0 && counts["timeout"] == 0 && interrupted.is_null();
  if (member(report, "ok", T::boolean) != ok) invalid("ok disagrees with the verdicts");
}

void print(const json& value) {
  if (value.is_string()) {
    std::cout << value.get<std::string>();
  } else {
    std::cout << value.dump() << '\n';
  }
}

int usage() {
  std::cerr << "usage: gpu-check-report FILE.json verdicts | commands | field CHECK COMMAND KEY | "
               "check CHECK KEY | top KEY\n";
  return 2;
}

const json& findCheck(const json& report, const std::string& id) {
  for (const json& check : report.at("checks")) {
    if (check.at("id") == id) return check;
  }
  invalid("no check " + id);
}

/// The command at `selector` (a place, from 0), or the first whose text ends with it.
const json& findCommand(const json& check, const std::string& selector) {
  const json& commands = check.at("commands");
  if (!selector.empty() && selector.find_first_not_of("0123456789") == std::string::npos) {
    return commands.at(std::stoul(selector));
  }
  for (const json& command : commands) {
    const std::string text = command.at("command");
    if (std::string_view(text).ends_with(selector)) return command;
  }
  invalid("no command ending in '" + selector + "' in " + check.at("id").get<std::string>());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return usage();
  const std::string what = argv[2];
  try {
    std::ifstream file(argv[1], std::ios::binary);
    if (!file) invalid(std::string("cannot open ") + argv[1]);
    const json report = json::parse(file);
    if (what == "verdicts" && argc == 3) {
      checkShape(report);
      for (const json& check : report.at("checks")) {
        std::cout << check.at("verdict").get<std::string>() << ' '
                  << check.at("id").get<std::string>() << '\n';
      }
    } else if (what == "commands" && argc == 3) {
      for (const json& check : report.at("checks")) {
        for (const json& command : check.at("commands")) {
          std::cout << "$ " << command.at("command").get<std::string>() << '\n';
        }
      }
    } else if (what == "field" && argc == 6) {
      print(findCommand(findCheck(report, argv[3]), argv[4]).at(argv[5]));
    } else if (what == "check" && argc == 5) {
      print(findCheck(report, argv[3]).at(argv[4]));
    } else if (what == "top" && argc == 4) {
      print(report.at(argv[3]));
    } else {
      return usage();
    }
  } catch (const std::exception& e) {
    std::cerr << "gpu-check-report: " << argv[1] << ": " << e.what() << '\n';
    return 1;
  }
  return 0;
}
