// Before each test of this program, the thread on which an earlier test's in-process discovery
// ran (flink-gpu-run, which waits a second for the next run) has ended: many of these tests fork,
// and ThreadSanitizer lets the child of a multi-threaded fork start no thread. ctest runs each
// test in a process of its own; this is for many tests in one process (a filter, a repeat, a
// shuffle).
#include <gtest/gtest.h>

#include <chrono>

#include "TestSupport.h"

namespace {

class NoRunThreadAtStart : public ::testing::EmptyTestEventListener {
  void OnTestStart(const ::testing::TestInfo& test) override {
    if (!flink::testing::waitForNoThreadNamed("flink-gpu-run", std::chrono::seconds(10))) {
      ADD_FAILURE() << "a flink-gpu-run thread was still there 10 s before " << test.name();
    }
  }
};

// Appended before main runs the tests; the listener list owns it.
const bool kRegistered = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new NoRunThreadAtStart);
  return true;
}();

}  // namespace
