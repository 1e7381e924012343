#include "CliRun.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <thread>

#include <gtest/gtest.h>

#include "TestSupport.h"
#include "process/Subprocess.h"

namespace flink::testing {
namespace {

/// exec makes the folder of its allocation file in $XDG_RUNTIME_DIR when that is private
/// (host/defaultdiscovery/AllocationFile.h). Many tests end an exec with SIGKILL (Background's
/// stop), which leaves that folder behind, as it would anywhere: so every flink-gpu a test starts
/// gets, unless the test sets its own, a private folder of this test process's, removed at its
/// exit, after every Background is gone.
class RuntimeFolder {
 public:
  RuntimeFolder() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "flink-gpu-cli-runtime.XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) return;  // exec then uses $TMPDIR
    path_ = pattern;
    ::setenv("XDG_RUNTIME_DIR", path_.c_str(), 1);
  }
  ~RuntimeFolder() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  RuntimeFolder(const RuntimeFolder&) = delete;
  RuntimeFolder& operator=(const RuntimeFolder&) = delete;

 private:
  std::filesystem::path path_;
};

const RuntimeFolder runtimeFolder;

}  // namespace

std::ostream& operator<<(std::ostream& stream, const CliRun& run) {
  return stream << "\nexit code: " << run.exitCode << "\n--- stdout ---\n"
                << run.out << "--- stderr ---\n"
                << run.err;
}

CliRun runProgram(const std::vector<std::string>& argv) {
  process::RunOptions options;
  // Far above anything a test expects, so that a hang shows as a failure rather than a ctest
  // time-out.
  options.timeout = std::chrono::seconds(30);
  const auto start = std::chrono::steady_clock::now();
  const process::ProcessResult result = process::run(argv, options);
  CliRun run;
  run.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  run.out = result.stdoutOutput.data;
  run.err = result.stderrOutput.data;
  if (result.outcome.kind() == process::ProcessOutcome::Kind::kExited) {
    run.exitCode = result.outcome.value();
  } else {
    ADD_FAILURE() << argv.front() << ' ' << result.outcome.toString() << run;
  }
  return run;
}

std::vector<std::string> inPidNamespace() {
  return {"/usr/bin/unshare", "-p", "--fork", "--mount-proc"};
}

std::optional<std::string> whyNoPidNamespace() {
  std::vector<std::string> probe = inPidNamespace();
  probe.push_back("/bin/true");
  const process::ProcessResult tried = process::run(probe, {});
  if (tried.outcome.succeeded()) return std::nullopt;
  return "unshare -p --fork --mount-proc is not permitted here (not root?): " +
         tried.stderrOutput.data;
}

namespace {

CliRun runThroughEnv(std::vector<std::string> argv, const std::filesystem::path& program,
                     const std::vector<std::string>& args,
                     const std::vector<std::string>& environment) {
  // Always through env, without the Flink variables of the environment the tests run in:
  // `flink-gpu discover` without options reads the host's Flink configuration, and a test must
  // see only the one it sets up (env unsets first, then applies `environment`).
  argv.insert(argv.end(), {"-u", "FLINK_CONF_DIR", "-u", "FLINK_HOME"});
  argv.insert(argv.end(), environment.begin(), environment.end());
  argv.push_back(program.string());
  argv.insert(argv.end(), args.begin(), args.end());
  return runProgram(argv);
}

/// The pids of the processes of process group `group` that have not yet exited, as /proc lists
/// them.
std::vector<pid_t> runningInGroup(pid_t group) {
  std::vector<pid_t> members;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string text;
    if (!std::getline(stat, text)) continue;
    // After the command name, in parentheses (and holding anything): state, ppid, pgrp.
    const std::size_t close = text.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(text.substr(close + 1));
    std::string state;
    pid_t parent = 0;
    pid_t pgrp = 0;
    if (fields >> state >> parent >> pgrp && pgrp == group && state != "Z" && state != "X") {
      members.push_back(static_cast<pid_t>(std::stol(name)));
    }
  }
  return members;
}

}  // namespace

CliRun runCli(const std::vector<std::string>& args, const std::vector<std::string>& environment) {
  return runThroughEnv({"/usr/bin/env"}, kCli, args, environment);
}

CliRun runCliAt(const std::filesystem::path& program, const std::filesystem::path& workingDirectory,
                const std::vector<std::string>& args, const std::vector<std::string>& environment) {
  return runThroughEnv({"/usr/bin/env", "-C", workingDirectory.string()}, program, args,
                       environment);
}

std::vector<std::string> linesOf(std::string_view text) {
  std::vector<std::string> lines;
  while (!text.empty()) {
    const std::size_t newline = text.find('\n');
    lines.emplace_back(text.substr(0, newline));
    text = newline == std::string_view::npos ? std::string_view() : text.substr(newline + 1);
  }
  return lines;
}

std::vector<FileRecord> recordsOf(const std::vector<std::string>& lines) {
  std::vector<FileRecord> records;
  for (const std::string& line : lines) {
    std::istringstream fields(line);
    FileRecord record;
    if (fields >> record.gpu >> record.pid) records.push_back(record);
  }
  return records;
}

std::string firstLine(std::string_view text) {
  const auto lines = linesOf(text);
  return lines.empty() ? std::string() : lines.front();
}

std::string table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> widths(rows.front().size());
  for (const auto& row : rows) {
    for (std::size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::string text;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line.append(widths[i] - row[i].size() + 2, ' ');
    }
    text += line.substr(0, line.find_last_not_of(' ') + 1) + '\n';
  }
  return text;
}

bool hasLineStartingWith(std::string_view text, std::string_view prefix) {
  for (const std::string& line : linesOf(text)) {
    if (line.starts_with(prefix)) return true;
  }
  return false;
}

Background::Background(const std::vector<std::string>& args, const std::filesystem::path& out,
                       const std::filesystem::path& err) {
  start(args, out, &err);
}

Background::Background(const std::vector<std::string>& args, const std::filesystem::path& log) {
  start(args, log, nullptr);
}

void Background::start(const std::vector<std::string>& args, const std::filesystem::path& out,
                       const std::filesystem::path* err) {
  std::vector<char*> argv;
  for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attributes;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  ::posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (err != nullptr) {
    ::posix_spawn_file_actions_addopen(&actions, 2, err->c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                       0644);
  } else {
    ::posix_spawn_file_actions_adddup2(&actions, 1, 2);
  }
  ::posix_spawnattr_init(&attributes);
  ::posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  ::posix_spawnattr_setpgroup(&attributes, 0);
  const int error = ::posix_spawn(&pid_, argv[0], &actions, &attributes, argv.data(), environ);
  ::posix_spawnattr_destroy(&attributes);
  ::posix_spawn_file_actions_destroy(&actions);
  if (error != 0) {
    pid_ = -1;
    ADD_FAILURE() << "cannot start " << args.front() << ": " << std::strerror(error);
  }
}

void Background::stop() {
  if (pid_ <= 0 || reaped_) return;
  ::kill(-pid_, SIGKILL);
  // The leader's children are killed with it, but may still be exiting once it is reaped: exec's
  // command, which holds its leases too, lets them go only then.
  const std::vector<pid_t> group = runningInGroup(pid_);
  reap(0);
  const std::vector<pid_t> left = waitUntilGone(group, std::chrono::seconds(10));
  EXPECT_TRUE(left.empty()) << left.size() << " process(es) of group " << pid_
                            << " still run 10 s after SIGKILL";
}

std::optional<int> Background::waitForExit(std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!reaped_ && std::chrono::steady_clock::now() < deadline) {
    reap(WNOHANG);
    if (!reaped_) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (reaped_ && WIFEXITED(status_)) return WEXITSTATUS(status_);
  return std::nullopt;
}

void Background::reap(int flags) {
  while (true) {
    const pid_t done = ::waitpid(pid_, &status_, flags);
    if (done == pid_) {
      reaped_ = true;
      // Nothing of its group may outlive the test.
      ::kill(-pid_, SIGKILL);
      return;
    }
    if (done < 0 && errno == EINTR) continue;
    if (done < 0) reaped_ = true;  // not our child any more: nothing to reap
    return;
  }
}

std::string sleepPath() {
  return std::filesystem::exists("/bin/sleep") ? "/bin/sleep" : "/usr/bin/sleep";
}

}  // namespace flink::testing
