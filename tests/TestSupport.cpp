#include "TestSupport.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace flink::testing {
namespace fs = std::filesystem;

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

}  // namespace flink::testing
