#include "TestSupport.h"

#include <dlfcn.h>
#include <malloc.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace flink::testing {
namespace fs = std::filesystem;

namespace {
/// No test sees the shell's coordination file or mask: every test names its own file, and sets a
/// mask itself where it wants one (ctest's ENVIRONMENT_MODIFICATION carries CUDA_VISIBLE_DEVICES's
/// removal too, but cannot carry a second entry through gtest_discover_tests).
[[maybe_unused]] const bool kShellEnvironmentCleared = [] {
  ::unsetenv("FLINK_GPU_COORDINATION_FILE");
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  return true;
}();
}  // namespace

TempDir::TempDir(const std::string& nameHint) {
  std::string pattern = (fs::temp_directory_path() / (nameHint + ".XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  fs::remove_all(path_, ignored);
}

fs::path writeScript(const fs::path& path, const std::string& body, fs::perms mode) {
  fs::create_directories(path.parent_path());
  {
    std::ofstream out(path, std::ios::trunc);
    out << body;
  }
  fs::permissions(path, mode);
  return path;
}

std::vector<fs::path> movedAside(const fs::path& path) {
  std::vector<fs::path> found;
  const std::string prefix = path.filename().string() + ".untrusted-";
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(path.parent_path(), error)) {
    if (entry.path().filename().string().starts_with(prefix)) found.push_back(entry.path());
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::string readFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> readLines(const fs::path& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) lines.push_back(line);
  }
  return lines;
}

bool isRunning(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return false;
  // The state follows the command name, which is in parentheses and may hold spaces.
  const auto close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] != 'Z' &&
         text[close + 2] != 'X';
}

std::vector<pid_t> waitUntilGone(const std::vector<pid_t>& pids, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (true) {
    std::vector<pid_t> running;
    for (pid_t pid : pids) {
      if (isRunning(pid)) running.push_back(pid);
    }
    if (running.empty() || std::chrono::steady_clock::now() >= deadline) return running;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::vector<std::string> waitForLines(const fs::path& path, std::size_t count,
                                      std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (true) {
    auto lines = readLines(path);
    if (lines.size() >= count || std::chrono::steady_clock::now() >= deadline) return lines;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::size_t openDescriptorCount() {
  std::size_t count = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator("/proc/self/fd")) ++count;
  return count - 1;  // the iterator's own descriptor
}

std::size_t threadsNamed(std::string_view name) {
  std::size_t count = 0;
  std::error_code error;
  for (const auto& task : fs::directory_iterator("/proc/self/task", error)) {
    std::ifstream comm(task.path() / "comm");
    std::string line;
    if (std::getline(comm, line) && line == name) ++count;
  }
  return count;
}

bool waitForNoThreadNamed(std::string_view name, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (threadsNamed(name) > 0) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

bool hasChildren() {
  siginfo_t info{};
  // Running or zombie, any child makes this succeed; only "no child at all" is ECHILD.
  return !(::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) < 0 && errno == ECHILD);
}

ScopedEnvironment::ScopedEnvironment(std::string name) : name_(std::move(name)) {
  if (const char* current = std::getenv(name_.c_str())) previous_ = current;
}

ScopedEnvironment::ScopedEnvironment(std::string name, const std::optional<std::string>& value)
    : ScopedEnvironment(std::move(name)) {
  if (value) {
    set(*value);
  } else {
    unset();
  }
}

void ScopedEnvironment::set(const std::string& value) const {
  ::setenv(name_.c_str(), value.c_str(), 1);
}

void ScopedEnvironment::unset() const { ::unsetenv(name_.c_str()); }

ScopedEnvironment::~ScopedEnvironment() {
  if (previous_) {
    ::setenv(name_.c_str(), previous_->c_str(), 1);
  } else {
    ::unsetenv(name_.c_str());
  }
}

LiveProcess::LiveProcess() : pid_(::fork()) {
  if (pid_ == 0) {
    ::pause();
    ::_exit(0);
  }
}

void LiveProcess::stop() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
}

pid_t deadPid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

namespace {

constexpr bool kGlibcMalloc = !kSanitizer;

/// glibc's struct dl_action_result: what a failed dlopen or dlsym leaves per thread.
constexpr std::size_t kRecordSize = 24;

/// Bytes in use by the program's heap, as glibc counts them.
std::size_t inUse() { return ::mallinfo2().uordblks; }

// malloc and free called through these, so that the compiler cannot drop a block that is freed
// unused (it may, for calls by name).
void* (*volatile allocate)(std::size_t) = std::malloc;
void (*volatile release)(void*) = std::free;

/// Fills this thread's cache of freed blocks the size of a record, so that the next one freed
/// goes back to the arena, which mallinfo2 counts as free (a block in the cache counts as used).
void fillThreadCache() {
  std::array<void*, 64> blocks{};  // on the stack: no block of the size counted
  for (void*& block : blocks) block = allocate(kRecordSize);
  for (void* block : blocks) release(block);
}

/// Whether this thread holds a record now; releases it.
bool holdsDlErrorRecord() {
  // First, that the measure sees a freed block of the size at all.
  void* probe = allocate(kRecordSize);
  fillThreadCache();
  const std::size_t withProbe = inUse();
  release(probe);
  if (inUse() >= withProbe) {
    throw std::runtime_error("mallinfo2 does not show a freed " + std::to_string(kRecordSize) +
                             "-byte block: a dlerror record could not be seen either");
  }
  const std::size_t before = inUse();
  // An error not yet delivered: dlerror() gives its text (and the next call frees it). One
  // delivered: dlerror() frees it, and answers null.
  if (::dlerror() != nullptr) {
    static_cast<void>(::dlerror());
    return true;
  }
  return inUse() < before;
}

}  // namespace

std::optional<bool> leavesDlErrorRecord(const std::function<void()>& body) {
  if (!kGlibcMalloc) return std::nullopt;
  std::optional<bool> held;
  std::exception_ptr error;
  std::thread([&] {
    try {
      body();
      held = holdsDlErrorRecord();
    } catch (...) {
      error = std::current_exception();
    }
  }).join();
  if (error) std::rethrow_exception(error);
  return held;
}

}  // namespace flink::testing
