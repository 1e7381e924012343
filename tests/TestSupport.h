// Helpers shared by the tests: temporary folders, fixture scripts written on the fly, and looks
// at the process table and the descriptor table through /proc.
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flink::testing {

/// A fresh folder under $TMPDIR (its name may contain `nameHint`), removed with its contents.
class TempDir {
 public:
  explicit TempDir(const std::string& nameHint = "flink-gpu-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

/// Sets (or, with nullopt, unsets) an environment variable for the life of this object, then
/// puts back what was there. Tests run one at a time in a process, so this is safe in them.
class ScopedEnvironment {
 public:
  /// Leaves the variable as it is until set() or unset().
  explicit ScopedEnvironment(std::string name);
  ScopedEnvironment(std::string name, const std::optional<std::string>& value);
  ~ScopedEnvironment();
  void set(const std::string& value) const;
  void unset() const;
  ScopedEnvironment(const ScopedEnvironment&) = delete;
  ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;

 private:
  std::string name_;
  std::optional<std::string> previous_;
};

/// Writes `body` to `path` with mode `mode` (executable by default) and returns the path.
std::filesystem::path writeScript(const std::filesystem::path& path, const std::string& body,
                                  std::filesystem::perms mode = std::filesystem::perms::owner_all);

std::string readFile(const std::filesystem::path& path);

/// Flink's name of the GPU driver's factory, as a configuration spells it
/// (external-resource.<name>.driver-factory.class).
inline constexpr const char* kGpuFactory = "org.apache.flink.externalresource.gpu.GPUDriverFactory";

/// Whether `part` occurs in `text` (string_view::contains, before C++23).
inline bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

/// Non-blank lines of a file (empty if it does not exist).
std::vector<std::string> readLines(const std::filesystem::path& path);

/// Where the store moved a file that failed the trust rules aside (store::admitSibling): the
/// entries beside `path` named `<path>.untrusted-…`, sorted. A lease file `<folder>/<name>` is
/// moved beside its folder: pass `<folder>.<name>`.
std::vector<std::filesystem::path> movedAside(const std::filesystem::path& path);

/// A child process that sleeps until stopped: an owner that is running. stop() and the
/// destructor kill it with SIGKILL and reap it.
class LiveProcess {
 public:
  LiveProcess();
  ~LiveProcess() { stop(); }
  LiveProcess(const LiveProcess&) = delete;
  LiveProcess& operator=(const LiveProcess&) = delete;
  void stop();
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

/// The pid of a process that has exited and been reaped.
pid_t deadPid();

/// Whether `pid` names a live process (not gone, not a zombie).
bool isRunning(pid_t pid);

/// Waits until none of `pids` is running, or `limit` passes; returns those still running.
std::vector<pid_t> waitUntilGone(const std::vector<pid_t>& pids, std::chrono::milliseconds limit);

/// Polls until the file at `path` has at least `count` non-blank lines, or `limit` passes.
std::vector<std::string> waitForLines(const std::filesystem::path& path, std::size_t count,
                                      std::chrono::milliseconds limit);

/// The number of descriptors open in this process.
std::size_t openDescriptorCount();

// __has_feature is clang's (and gcc's from 14); gcc before it tells a sanitizer by __SANITIZE_…__.
#ifdef __has_feature
#define FLINK_GPU_TEST_HAS_FEATURE(feature) __has_feature(feature)
#else
#define FLINK_GPU_TEST_HAS_FEATURE(feature) 0
#endif

/// Whether this program is built with ThreadSanitizer (which lets the child of a multi-threaded
/// fork start no thread).
inline constexpr bool kThreadSanitizer =
#if defined(__SANITIZE_THREAD__) || FLINK_GPU_TEST_HAS_FEATURE(thread_sanitizer)
    true;
#else
    false;
#endif

/// Whether this program is built with any sanitizer (AddressSanitizer, ThreadSanitizer,
/// MemorySanitizer), whose allocator serves malloc instead of glibc's and whose code runs several
/// times slower.
inline constexpr bool kSanitizer =
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || \
    FLINK_GPU_TEST_HAS_FEATURE(address_sanitizer) ||                 \
    FLINK_GPU_TEST_HAS_FEATURE(thread_sanitizer) || FLINK_GPU_TEST_HAS_FEATURE(memory_sanitizer)
    true;
#else
    false;
#endif

/// How many of `all` repetitions of a search (a simulation case's seeds, a race's rounds) a build
/// with a sanitizer runs: a quarter, at least one. The sanitizers look for memory errors, races and
/// undefined behaviour along code paths the first repetitions take already, at 10 to 15 times the
/// main tree's cost; the search through interleavings, which wants many repetitions, is the main
/// tree's, which runs them all.
constexpr std::uint64_t repetitionsToRun(std::uint64_t all) {
  return kSanitizer ? std::max<std::uint64_t>(1, all / 4) : all;
}

/// The number of threads of this process named `name` (/proc/self/task/*/comm).
std::size_t threadsNamed(std::string_view name);

/// Waits until no thread of this process is named `name`, or `limit` passes; returns whether
/// none is. For a test that forks: a thread still there (an in-process discovery's, which waits a
/// second for the next run) makes the fork a multi-threaded one, in whose child ThreadSanitizer
/// refuses to start threads.
bool waitForNoThreadNamed(std::string_view name, std::chrono::milliseconds limit);

/// Whether this process has any child, reaped or not (waitpid(-1, WNOHANG) != ECHILD).
bool hasChildren();

/// Whether `body`, run on a thread of its own, leaves that thread holding glibc's record of a
/// failed dlopen or dlsym: one that dlerror() has not yet been called twice for (see
/// src/util/DlError.h; a detached thread that exits with one leaves it to LeakSanitizer). Seen by
/// the record's free in mallinfo2's counts, so nullopt under a sanitizer, whose allocator serves
/// malloc instead of glibc's.
/// @throws std::runtime_error when glibc's counts cannot show a freed block (the measure would be
/// blind).
std::optional<bool> leavesDlErrorRecord(const std::function<void()>& body);

}  // namespace flink::testing
