// A data race on purpose: the check that the build under ThreadSanitizer really reports races.
// Without it, a build that lost its -fsanitize=thread (a changed flag, another compiler) would
// run the suite uninstrumented and pass it, proving nothing.
//
// ThreadSanitizer misses a race now and then by design (google/sanitizers#1576: about one run in
// a thousand of two threads racing once; it missed this canary's single race once in make test).
// So the two threads race many times, and both stay alive until both are done: they meet before
// and after through a relaxed atomic, which orders nothing, for ThreadSanitizer either.
#include <atomic>
#include <thread>

namespace {

constexpr int kRaces = 1000;
volatile int shared = 0;  // written by two threads without a lock; volatile: every write is made
std::atomic<int> arrived{0};

void meet(int count) {
  arrived.fetch_add(1, std::memory_order_relaxed);
  while (arrived.load(std::memory_order_relaxed) < count) std::this_thread::yield();
}

void race() {
  meet(2);
  for (int i = 0; i < kRaces; ++i) shared = shared + 1;
  meet(4);
}

}  // namespace

int main() {
  std::thread other(race);
  race();
  other.join();
  return shared == 0 ? 1 : 0;
}
