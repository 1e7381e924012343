#include "host/store/LockWait.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

namespace flink::store {
namespace {

constexpr std::chrono::seconds kTellAfter{1};
constexpr std::size_t kMaxCommandBytes = 120;

std::mutex observerMutex;
std::shared_ptr<const LockWaitObserver> observer;

std::shared_ptr<const LockWaitObserver> currentObserver() {
  const std::lock_guard<std::mutex> lock(observerMutex);
  return observer;
}

}  // namespace

void setLockWaitObserver(LockWaitObserver newObserver) {
  std::shared_ptr<const LockWaitObserver> installed;
  if (newObserver) installed = std::make_shared<const LockWaitObserver>(std::move(newObserver));
  const std::lock_guard<std::mutex> lock(observerMutex);
  observer = std::move(installed);
}

std::string commandOf(pid_t pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  std::string command;
  char c = 0;
  while (command.size() <= kMaxCommandBytes && file.get(c)) {
    // Arguments are NUL-separated; other control bytes are shown as '?'.
    command += c == '\0' ? ' ' : (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  }
  while (!command.empty() && command.back() == ' ') command.pop_back();
  if (command.size() > kMaxCommandBytes) command = command.substr(0, kMaxCommandBytes - 3) + "...";
  return command;
}

LockWait::LockWait(std::filesystem::path lock, std::function<std::optional<pid_t>()> holder)
    : lock_(std::move(lock)),
      holder_(std::move(holder)),
      start_(std::chrono::steady_clock::now()) {}

LockWait::~LockWait() {
  if (told_ && !done_) tell(LockWaitEvent::Stage::kGaveUp);
}

void LockWait::stillWaiting() {
  if (told_ || std::chrono::steady_clock::now() - start_ < kTellAfter) return;
  told_ = true;
  if (!currentObserver()) return;
  toldHolder_ = holder_ ? holder_() : std::nullopt;
  if (toldHolder_) toldCommand_ = commandOf(*toldHolder_);
  tell(LockWaitEvent::Stage::kWaiting);
}

void LockWait::pause(std::chrono::steady_clock::time_point deadline) const {
  const auto left = deadline - std::chrono::steady_clock::now();
  if (left <= std::chrono::steady_clock::duration::zero()) return;
  std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(left, kRetryInterval));
}

void LockWait::acquired() {
  if (told_ && !done_) tell(LockWaitEvent::Stage::kAcquired);
  done_ = true;
}

void LockWait::tell(LockWaitEvent::Stage stage) {
  const std::shared_ptr<const LockWaitObserver> current = currentObserver();
  if (!current) return;
  LockWaitEvent event;
  event.stage = stage;
  event.lock = lock_;
  event.holder = toldHolder_;
  event.holderCommand = toldCommand_;
  event.waited = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start_);
  try {
    (*current)(event);
  } catch (...) {
    // An observer's failure (a closed stderr) must not fail the lock.
  }
}

}  // namespace flink::store
