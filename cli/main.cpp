// flink-gpu: the command-line front of the GPU driver. Each subcommand lives in commands/; its
// options, and the command line as a whole, in CommandLine.cpp.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <streambuf>
#include <string>
#include <system_error>

#include "CommandLine.h"
#include "Console.h"
#include "ExitCode.h"
#include "flink/externalresource/gpu/GPUDriver.h"
#include "host/store/LockWait.h"

namespace {

/// SIGINT, SIGTERM, SIGHUP or SIGQUIT while a discovery script runs: end the script's process
/// group too (it is not in ours, so a terminal's Ctrl-C would not reach it), then die of the
/// same signal as flink-gpu would have.
void endScriptsAndDie(int signal) {
  flink::externalresource::gpu::GPUDriver::killRunningDiscoveries();
  ::signal(signal, SIG_DFL);
  ::raise(signal);
}

void forwardFatalSignals() {
  struct sigaction action {};
  action.sa_handler = endScriptsAndDie;
  ::sigemptyset(&action.sa_mask);
  for (int signal : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) {
    struct sigaction current {};
    // A signal ignored by whoever started us (nohup, a background job) stays ignored.
    if (::sigaction(signal, nullptr, &current) == 0 && current.sa_handler == SIG_IGN) continue;
    ::sigaction(signal, &action, nullptr);
  }
}

/// Flink's home, as Flink's bin/config.sh finds it when FLINK_HOME is unset or empty: the folder
/// above the bin/ that holds the program (flink-gpu's own place, links resolved, as
/// /proc/self/exe names it: <prefix>/bin/flink-gpu of an install, and of the build tree). Set in
/// the environment, as config.sh exports it, so that the library ($FLINK_HOME/conf, the plugins
/// folder, a relative discovery-script path) and the programs flink-gpu runs see it. Returns the
/// home set; nullopt when FLINK_HOME is set, or flink-gpu is not in a bin/ folder.
std::optional<std::string> setFlinkHomeFromOurPlace() {
  const char* home = std::getenv("FLINK_HOME");
  if (home != nullptr && *home != '\0') return std::nullopt;
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error || !self.is_absolute() || self.parent_path().filename() != "bin") return std::nullopt;
  const std::string prefix = self.parent_path().parent_path().string();
  if (::setenv("FLINK_HOME", prefix.c_str(), 1) != 0) return std::nullopt;
  return prefix;
}

/// A relative `discover --discovery-script` is the user's, typed in the working directory: it stays
/// relative to it, as it was without FLINK_HOME. Only the paths of Flink's own rules (the
/// configuration's, the default script's) take the home that setFlinkHomeFromOurPlace set; a
/// FLINK_HOME the user set still applies to it, as it does in Flink.
void keepTypedScriptInTheWorkingDirectory(flink::cli::DiscoverOptions& options) {
  if (!options.discoveryScript) return;
  const std::string& script = *options.discoveryScript;
  // A blank one is refused as blank by the driver.
  if (script.find_first_not_of(" \t\n\r\f\v") == std::string::npos) return;
  std::error_code error;
  const std::filesystem::path absolute = std::filesystem::absolute(script, error);
  if (!error) options.discoveryScript = absolute.string();
}

/// std::cout's buffer, wrapped so that the errno of the first write that failed is kept: the
/// stream only remembers that one failed (badbit), and flushing a failed stream writes nothing,
/// so that by the time checkedStdout looks, errno no longer tells why (`--version`, whose
/// std::endl flushes at once). Everything is passed on unbuffered, in order, to the buffer it
/// wraps, which writes to C's stdout as before. Put back on destruction.
class StdoutErrorKeeper : public std::streambuf {
 public:
  StdoutErrorKeeper() : target_(std::cout.rdbuf(this)) {}
  StdoutErrorKeeper(const StdoutErrorKeeper&) = delete;
  StdoutErrorKeeper& operator=(const StdoutErrorKeeper&) = delete;
  ~StdoutErrorKeeper() override {
    std::cout.flush();
    std::cout.rdbuf(target_);
  }

  /// The errno of the first write that failed; 0 when none did, or it set none.
  int firstError() const { return error_; }

 protected:
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) {
      return sync() == 0 ? traits_type::not_eof(c) : traits_type::eof();
    }
    return kept(target_->sputc(traits_type::to_char_type(c)), [](int_type written) {
      return traits_type::eq_int_type(written, traits_type::eof());
    });
  }
  std::streamsize xsputn(const char* text, std::streamsize size) override {
    return kept(target_->sputn(text, size),
                [size](std::streamsize written) { return written < size; });
  }
  int sync() override {
    return kept(target_->pubsync(), [](int result) { return result != 0; });
  }

 private:
  template <typename Result, typename Failed>
  Result kept(Result result, Failed failed) {
    if (failed(result) && error_ == 0) error_ = errno;
    return result;
  }

  std::streambuf* target_;
  int error_ = 0;
};

/// What was printed on stdout must have arrived: a full disk and a reader that went away (a
/// closed pipe, `| head -c0`) both fail the command with one line, exit 1.
int checkedStdout(int code, const StdoutErrorKeeper& errors) {
  using namespace flink::cli;
  errno = 0;
  if (!std::cout.flush()) {
    const int error = errors.firstError() != 0 ? errors.firstError() : errno;
    printError(std::string("cannot write the result to standard output") +
               (error == 0 ? "" : std::string(": ") + std::strerror(error)));
    return code == kSuccess ? kDiscoveryFailed : code;
  }
  return code;
}

int runCommand(const flink::cli::CommandLine& line) {
  using namespace flink::cli;
  switch (line.command) {
    case Command::kDiscover:
      return runDiscover(line.discover);
    case Command::kStatus:
      return runStatus(line.status);
    case Command::kRelease:
      return runRelease(line.release);
    case Command::kExec:
      return runExec(line.exec);
    case Command::kConfig:
      return runConfig(line.config);
    case Command::kTopology:
      return runTopology(line.topology);
    case Command::kWhich:
      return runWhich(line.which);
    case Command::kDrain:
      return runDrain(line.drain);
    case Command::kUndrain:
      return runUndrain(line.undrain);
    case Command::kCheck:
      return runCheck(line.check);
    case Command::kWatch:
      return runWatch(line.watch);
    case Command::kShare:
      return runShare(line.share);
    case Command::kUnshare:
      return runUnshare(line.unshare);
    case Command::kCompletion:
      return runCompletion(line.completion);
  }
  return kUsageError;
}

/// A wait of more than a second for a lock another process holds says so, then how it ended.
void tellLockWaits() {
  using flink::store::LockWaitEvent;
  flink::store::setLockWaitObserver([](const LockWaitEvent& event) {
    using namespace flink::cli;
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.1f s",
                  static_cast<double>(event.waited.count()) / 1000);
    switch (event.stage) {
      case LockWaitEvent::Stage::kWaiting:
        printNote("waiting for the lock of " + event.lock.string() + ", held by " +
                  (event.holder
                       ? "process " + std::to_string(*event.holder) +
                             (event.holderCommand.empty() ? std::string()
                                                          : " (" + event.holderCommand + ")")
                       : std::string("another process")));
        break;
      case LockWaitEvent::Stage::kAcquired:
        printNote("got the lock of " + event.lock.string() + " after " + seconds);
        break;
      case LockWaitEvent::Stage::kGaveUp:
        break;  // the error that follows says it
    }
  });
}

}  // namespace

/// A descriptor 0, 1 or 2 that is closed would be the next file opened: a lease, the
/// coordination file, which the command of `exec` would then get as its stdin, stdout or stderr
/// and close like any (a daemon's `>/dev/null 2>&1` lets a lease go). Each is taken by /dev/null,
/// opened read-only for stdout so that a write there still fails as it did (EBADF), is reported,
/// and exits 1.
void occupyClosedStandardDescriptors() {
  for (const int fd : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO}) {
    if (::fcntl(fd, F_GETFD) >= 0 || errno != EBADF) continue;
    const int opened = ::open("/dev/null", fd == STDERR_FILENO ? O_WRONLY : O_RDONLY);
    if (opened >= 0 && opened != fd) ::close(opened);  // the lower ones are taken: not ours
  }
}

int main(int argc, char** argv) {
  using namespace flink::cli;
  occupyClosedStandardDescriptors();
  forwardFatalSignals();  // exec's command gets default dispositions back from execvp
  // A closed pipe is a write error (EPIPE) that we report, not a silent death. `exec` puts the
  // default back for its command, since an ignored signal stays ignored across execvp.
  ::signal(SIGPIPE, SIG_IGN);

  const bool flinkHomeEmpty = std::getenv("FLINK_HOME") != nullptr;
  const std::optional<std::string> derivedHome = setFlinkHomeFromOurPlace();

  const StdoutErrorKeeper stdoutErrors;
  CommandLine line;
  if (const std::optional<int> code = parseCommandLine(argc, argv, line)) {
    return checkedStdout(*code, stdoutErrors);
  }
  setVerbosity(line.quiet               ? Verbosity::kQuiet
               : line.verboseCount >= 2 ? Verbosity::kDebug
               : line.verboseCount == 1 ? Verbosity::kVerbose
                                        : Verbosity::kNormal);
  if (derivedHome) {
    if (verbosity() >= Verbosity::kVerbose) {
      std::cerr << "flink-gpu: FLINK_HOME is " << (flinkHomeEmpty ? "empty" : "not set")
                << "; using " << *derivedHome << ", the folder above flink-gpu's bin/\n";
    }
    keepTypedScriptInTheWorkingDirectory(line.discover);
  }
  tellLockWaits();
  if (CoordinationFileOptions* coordination = coordinationFileOptionsOf(line)) {
    if (!resolveCoordinationFile(*coordination)) return kUsageError;
  }
  try {
    return checkedStdout(runCommand(line), stdoutErrors);
  } catch (const std::exception& e) {
    // Anything the commands do not map themselves (a vanished working directory, out of
    // memory): still one clear line, never an abort.
    printError(std::string("internal error: ") + e.what());
    return kDiscoveryFailed;
  }
}
