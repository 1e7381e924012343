// lock_bench: what waiting for the coordination file's lock costs when many wait at once (a host's
// workers started together). N processes each take one file's flock 20 times: open the file, wait
// for the lock, hold it for H µs of CPU (a discovery's read, liveness checks and write), close the
// file (which lets the lock go, as LockedFile does). Three ways to wait, one storm each:
//
//   blocking   flock(LOCK_EX): the kernel wakes a waiter when the lock goes. The floor, but with no
//              time-out, which every wait of ours needs (Flink waits 10 s for the script).
//   ours       flock(LOCK_EX | LOCK_NB), then store::LockWait::pause until the next try (every
//              millisecond), with a deadline, as LockedFile and the records files' writers wait.
//   woken      flock(LOCK_EX | LOCK_NB), then a poll of an inotify watch of the file's closes (a
//              flock goes at its description's last close), at most 10 ms: tried as ours and not
//              kept (docs/benchmarks.md).
//
//   BM_PairedLockStorm/N/H  one storm of each per iteration, in rotating order. Counters:
//                       `<way>_ms`, the storm's wall-clock time (mean); `<way>_cpu_ms`, the CPU
//                       time its N processes used (user + system); `<way>_ratio` and
//                       `<way>_cpu_ratio`, ours and woken over blocking.
//
// bench/run-benchmarks.sh prints the ratios. Wall-clock time is what counts (UseRealTime).
#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <benchmark/benchmark.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "BenchSupport.h"
#include "host/store/LockWait.h"

namespace {

namespace fs = std::filesystem;
using std::chrono::steady_clock;

constexpr int kRoundsEach = 20;
constexpr std::chrono::seconds kDeadline{30};

enum class Way { kBlocking, kOurs, kWoken };
constexpr std::array<const char*, 3> kWayNames = {"blocking", "ours", "woken"};

/// The tried way: sleeps until `file` (locked on `fd`) is closed by some process, at most 10 ms.
/// The watch is set up at the first call, which returns at once (a close before the watch is not
/// missed); none where inotify cannot be had (then a millisecond's sleep).
void sleepUntilClosed(const fs::path& file, int& watch, bool& watched) {
  if (!watched) {
    watched = true;
    watch = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (watch >= 0 && ::inotify_add_watch(watch, file.c_str(), IN_CLOSE | IN_DONT_FOLLOW) < 0) {
      ::close(watch);
      watch = -1;
    }
    if (watch >= 0) return;
  }
  if (watch < 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return;
  }
  struct pollfd closes {
    watch, POLLIN, 0
  };
  if (::poll(&closes, 1, 10) > 0) {
    alignas(struct inotify_event) char events[4096];
    while (::read(watch, events, sizeof events) > 0) {
    }
  }
}

/// One process's rounds; returns its exit status (0: every lock had).
int takeTurns(const fs::path& file, Way way, std::chrono::microseconds hold) {
  for (int round = 0; round < kRoundsEach; ++round) {
    const int fd = ::open(file.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) return 2;
    bool had = false;
    if (way == Way::kBlocking) {
      had = ::flock(fd, LOCK_EX) == 0;
    } else {
      const steady_clock::time_point deadline = steady_clock::now() + kDeadline;
      flink::store::LockWait wait(file, {});
      int watch = -1;
      bool watched = false;
      while (!(had = ::flock(fd, LOCK_EX | LOCK_NB) == 0) && steady_clock::now() < deadline) {
        if (way == Way::kOurs) {
          wait.pause(deadline);
        } else {
          sleepUntilClosed(file, watch, watched);
        }
      }
      if (watch >= 0) ::close(watch);
      if (had) wait.acquired();
    }
    if (!had) return 3;
    const steady_clock::time_point held = steady_clock::now();
    while (steady_clock::now() - held < hold) {
    }
    ::close(fd);
  }
  return 0;
}

double cpuSecondsOfChildren() {
  struct rusage usage {};
  ::getrusage(RUSAGE_CHILDREN, &usage);
  const auto seconds = [](const timeval& time) {
    return static_cast<double>(time.tv_sec) + static_cast<double>(time.tv_usec) / 1e6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

struct Storm {
  double seconds = 0;
  double cpuSeconds = 0;
};

/// `processes` processes started together, each taking its turns `way`, holding the lock for
/// `hold`; throws if one failed.
Storm storm(const fs::path& file, Way way, int processes, std::chrono::microseconds hold) {
  int start[2];
  if (::pipe2(start, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  std::vector<pid_t> children;
  for (int i = 0; i < processes; ++i) {
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      ::close(start[1]);
      char go = 0;
      (void)!::read(start[0], &go, 1);  // EOF: all are there
      ::_exit(takeTurns(file, way, hold));
    }
    children.push_back(pid);
  }
  ::close(start[0]);
  const double cpuBefore = cpuSecondsOfChildren();
  const steady_clock::time_point began = steady_clock::now();
  ::close(start[1]);
  bool failed = false;
  for (const pid_t child : children) {
    int status = 0;
    ::waitpid(child, &status, 0);
    failed = failed || !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  }
  Storm result;
  result.seconds = std::chrono::duration<double>(steady_clock::now() - began).count();
  result.cpuSeconds = cpuSecondsOfChildren() - cpuBefore;
  if (failed)
    throw std::runtime_error(std::string("a process of the ") + kWayNames[static_cast<int>(way)] +
                             " storm failed");
  return result;
}

void BM_PairedLockStorm(benchmark::State& state) {
  const int processes = static_cast<int>(state.range(0));
  const std::chrono::microseconds hold(state.range(1));
  const fs::path dir = flink::bench::makeTempFolder("flink-gpu-lock-bench");
  const fs::path file = dir / "coordination";
  std::FILE* created = std::fopen(file.c_str(), "w");
  if (created != nullptr) std::fclose(created);
  std::array<Storm, 3> sums{};
  int rotation = 0;
  try {
    for (auto _ : state) {
      for (int i = 0; i < 3; ++i) {
        const int way = (rotation + i) % 3;
        const Storm one = storm(file, static_cast<Way>(way), processes, hold);
        sums[static_cast<std::size_t>(way)].seconds += one.seconds;
        sums[static_cast<std::size_t>(way)].cpuSeconds += one.cpuSeconds;
      }
      ++rotation;
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
  std::error_code ignored;
  fs::remove_all(dir, ignored);
  const double runs = static_cast<double>(state.iterations());
  if (runs == 0) return;
  for (std::size_t way = 0; way < 3; ++way) {
    state.counters[std::string(kWayNames[way]) + "_ms"] = sums[way].seconds / runs * 1e3;
    state.counters[std::string(kWayNames[way]) + "_cpu_ms"] = sums[way].cpuSeconds / runs * 1e3;
  }
  for (std::size_t way = 1; way < 3; ++way) {
    state.counters[std::string(kWayNames[way]) + "_ratio"] = sums[way].seconds / sums[0].seconds;
    state.counters[std::string(kWayNames[way]) + "_cpu_ratio"] =
        sums[way].cpuSeconds / sums[0].cpuSeconds;
  }
}

BENCHMARK(BM_PairedLockStorm)
    ->ArgsProduct({{4, 16}, {200, 2000}})
    ->ArgNames({"processes", "hold_us"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.0)
    ->Repetitions(5)
    ->DisplayAggregatesOnly(true);

}  // namespace

int main(int argc, char** argv) { return flink::bench::benchMain(argc, argv); }
