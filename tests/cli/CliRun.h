// Running the real flink-gpu binary from a test, and reading what it printed. Shared by the CLI
// test files.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace flink::testing {

/// The flink-gpu binary of this build.
inline constexpr const char* kCli = FLINK_GPU_CLI;

/// What one run of flink-gpu showed.
struct CliRun {
  int exitCode = -1;
  std::string out;
  std::string err;
  std::chrono::milliseconds elapsed{0};
};

std::ostream& operator<<(std::ostream& stream, const CliRun& run);

/// Runs `flink-gpu <args>` (the binary of this build) to completion, 30 s at most, through
/// /usr/bin/env: without $FLINK_CONF_DIR and $FLINK_HOME (so that no test reads a Flink
/// configuration of the host by accident), then with `environment` ("NAME=value" entries), since
/// process::run hands the child this process's own environment. Without FLINK_HOME, flink-gpu
/// takes the build folder (above its bin/) as Flink's home, which holds no conf/. A run that does
/// not exit normally is a test failure.
CliRun runCli(const std::vector<std::string>& args,
              const std::vector<std::string>& environment = {});

/// Runs `argv` as given (a program and its arguments, `env NAME=value …` first where the
/// environment matters) to completion, 30 s at most: for the programs beside flink-gpu (the
/// discovery program). A run that does not exit normally is a test failure.
CliRun runProgram(const std::vector<std::string>& argv);

/// The command line that runs what follows it in a pid namespace of its own with its own /proc,
/// as a container does: unshare -p --fork --mount-proc.
std::vector<std::string> inPidNamespace();

/// Why inPidNamespace() cannot be used here (unshare missing, not permitted: not root), for
/// GTEST_SKIP; nullopt when it can.
std::optional<std::string> whyNoPidNamespace();

/// As runCli, but runs `program` (a copy of the binary elsewhere, e.g. in <prefix>/bin/) in the
/// working directory `workingDirectory`.
CliRun runCliAt(const std::filesystem::path& program, const std::filesystem::path& workingDirectory,
                const std::vector<std::string>& args,
                const std::vector<std::string>& environment = {});

/// A program started with posix_spawn in a process group of its own, stdin on /dev/null and
/// stdout/stderr into files (both into `log` with the one-file form). The destructor kills the
/// group and reaps the program. Start failures are test failures (pid() is then -1).
class Background {
 public:
  Background(const std::vector<std::string>& args, const std::filesystem::path& out,
             const std::filesystem::path& err);
  Background(const std::vector<std::string>& args, const std::filesystem::path& log);
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;
  ~Background() { stop(); }

  pid_t pid() const { return pid_; }
  std::string pidText() const { return std::to_string(pid_); }

  /// SIGKILL to its process group, then reaps it (the group is its own: pgid == pid), and waits
  /// until no process of the group runs (10 s at most, else a test failure): until then one may
  /// still hold what it inherited (exec's command, the leases).
  void stop();

  /// Waits for it to end by itself; returns its exit code, or nullopt (killed, or still
  /// running after `limit`).
  std::optional<int> waitForExit(std::chrono::milliseconds limit);

 private:
  void start(const std::vector<std::string>& args, const std::filesystem::path& out,
             const std::filesystem::path* err);
  void reap(int flags);

  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = 0;
};

/// The sleep program's absolute path (/bin/sleep, else /usr/bin/sleep): a stand-in owner.
std::string sleepPath();

/// A stand-in owner: `sleep 60` in the background, its output to /dev/null, killed with the object.
class Sleeper : public Background {
 public:
  Sleeper() : Background({sleepPath(), "60"}, "/dev/null") {}
};

/// The lines of `text`, without their '\n' (a final newline ends the last line, not a new one).
std::vector<std::string> linesOf(std::string_view text);

std::string firstLine(std::string_view text);

bool hasLineStartingWith(std::string_view text, std::string_view prefix);

/// A record of the coordination file as Flink's script reads one: its "<gpu> <pid>".
struct FileRecord {
  std::string gpu;
  pid_t pid = 0;
};

/// The records among `lines` (a copy of the coordination file's): each line whose first two
/// fields are a GPU and a number.
std::vector<FileRecord> recordsOf(const std::vector<std::string>& lines);

/// The lines of an aligned table, as flink-gpu prints its tables: columns two spaces apart, each
/// as wide as its widest cell, no trailing blanks.
std::string table(const std::vector<std::vector<std::string>>& rows);

}  // namespace flink::testing
