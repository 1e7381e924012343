// A data race on purpose: the check that the build under ThreadSanitizer really reports races.
// Without it, a build that lost its -fsanitize=thread (a changed flag, another compiler) would
// run the suite uninstrumented and pass it, proving nothing.
#include <thread>

namespace {
int shared = 0;  // written by two threads without a lock: the race ThreadSanitizer must see
}  // namespace

int main() {
  std::thread other([] { ++shared; });
  ++shared;
  other.join();
  return shared == 0 ? 1 : 0;
}
