// Coordination: the record format (Flink's, plus a start time), the allocation rule, and the
// locked file — symlinks refused, junk tolerated, locks that die with their holder, and no
// GPU ever held by two running owners, also under races and kill -9.
#include "host/coordination/Coordination.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <fstream>
#include <functional>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "TestSupport.h"
#include "host/coordination/RecordEdits.h"
#include "host/liveness/HostFacts.h"
#include "process/FileDescriptor.h"
#include "util/Strings.h"

namespace flink::coordination {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::readFile;
using testing::TempDir;

std::vector<std::string> gpuRange(int count) {
  std::vector<std::string> gpus;
  for (int i = 0; i < count; ++i) gpus.push_back(std::to_string(i));
  return gpus;
}

using testing::deadPid;
using testing::LiveProcess;

// --- records -----------------------------------------------------------------------------------

TEST(CoordinationRecordsTest, ReadsFlinksTwoFieldLinesAndOurThreeFieldLines) {
  const ParsedRecords parsed = parseRecords("0 1234\n1 99 5551212\n\n 11 7 \n");
  ASSERT_EQ(parsed.records.size(), 3u);
  EXPECT_EQ(parsed.records[0], (Record{"0", Owner{1234, std::nullopt}}));
  EXPECT_EQ(parsed.records[1], (Record{"1", Owner{99, 5551212}}));
  EXPECT_EQ(parsed.records[2], (Record{"11", Owner{7, std::nullopt}}));
  EXPECT_TRUE(parsed.junk.empty());
}

TEST(CoordinationRecordsTest, JunkLinesAreReportedWithTheirLineNumbers) {
  const ParsedRecords parsed =
      parseRecords("0 1234\n3\nx 12\n4 abc\n5 -1\n6 0\n7 8 9 10\n8 9 x\n# comment\n1 77\n");
  ASSERT_EQ(parsed.records.size(), 2u);
  EXPECT_EQ(parsed.records[1].gpu, "1");
  std::vector<std::size_t> lines;
  for (const JunkLine& junk : parsed.junk) lines.push_back(junk.lineNumber);
  EXPECT_EQ(lines, (std::vector<std::size_t>{2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(parsed.junk[0].text, "3");
}

TEST(CoordinationRecordsTest, FormatIsFlinksWithOurFieldsAfterATab) {
  EXPECT_EQ(formatRecords({Record{"0", Owner{12, 345}}, Record{"GPU-ab12", Owner{13, {}}}}),
            "0 12\t345\nGPU-ab12 13\n");
  const Record full{"3",
                    Owner{12, 345, 4026531836},
                    "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6",
                    {"future=1"},
                    "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6"};
  const std::string line = formatRecords({full});
  EXPECT_EQ(line,
            "3 12\t345\tuuid=GPU-8932f937-d72c-4106-c12f-20bd9faed9f6\tpidns=4026531836\t"
            "lease=GPU-8932f937-d72c-4106-c12f-20bd9faed9f6\tfuture=1\n");
  // One space, after the GPU, as in Flink's "3 12": Flink's `sed "/<gpu> /d"` finds no more in
  // it than in its own lines.
  EXPECT_EQ(std::count(line.begin(), line.end(), ' '), 1);
  const ParsedRecords parsed = parseRecords(line);
  ASSERT_EQ(parsed.records.size(), 1u);
  EXPECT_EQ(parsed.records[0], full);
}

TEST(CoordinationRecordsTest, ReadsOurOlderSpaceSeparatedLinesAndRefusesBadFields) {
  const ParsedRecords parsed = parseRecords(
      "0 12 345\n1 13\tuuid=GPU-1\n2 14\tpidns=x\n3 15\tuuid=\n4 16\t=1\n5 17\t12\t13\n");
  ASSERT_EQ(parsed.records.size(), 2u);
  EXPECT_EQ(parsed.records[0], (Record{"0", Owner{12, 345}}));
  EXPECT_EQ(parsed.records[1], (Record{"1", Owner{13, {}}, "GPU-1"}));
  EXPECT_EQ(parsed.junk.size(), 4u);
}

TEST(CoordinationRecordsTest, OwnerOfReadsTheStartTimeAndIsRunningChecksIt) {
  const Owner self = Owner::of(::getpid());
  ASSERT_TRUE(self.startTime.has_value());
  EXPECT_TRUE(isRunning(self));
  EXPECT_TRUE(isRunning(Owner{::getpid(), std::nullopt}));
  // The same pid with another start time is another process: the record's owner is gone.
  // A start time two ticks or more away is another process's (one tick is a time namespace's
  // rounding: liveness::sameStartTime).
  EXPECT_TRUE(isRunning(Owner{::getpid(), *self.startTime + 1}));
  EXPECT_FALSE(isRunning(Owner{::getpid(), *self.startTime + 2}));
  EXPECT_FALSE(isRunning(Owner{deadPid(), std::nullopt}));
  EXPECT_FALSE(isRunning(Owner{0, std::nullopt}));
}

// A child of fork() is another process: it records itself, and reads its own /proc/self (where
// /proc is not its namespace's), by its own pid, not by the pid the parent read the host's facts
// with.
TEST(CoordinationRecordsTest, AChildOfForkKnowsItsOwnPid) {
  (void)Owner::of(::getpid());  // the host's facts read in this process first
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::_exit(liveness::HostFacts::system().reader().pid == ::getpid() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
}

/// The exit code of a child of fork() in a forked worker: `inWorker` runs in the worker first (its
/// set-up: an exit code other than 0 ends the worker with it, 77 where this host does not permit
/// the set-up), then `inChild` in the worker's child; -1 where a process did not exit.
int exitCodeOfForkedChild(const std::function<int()>& inWorker,
                          const std::function<int()>& inChild) {
  const pid_t worker = ::fork();
  if (worker < 0) return -1;
  if (worker == 0) {
    if (const int setUp = inWorker(); setUp != 0) ::_exit(setUp);
    const pid_t child = ::fork();
    if (child < 0) ::_exit(2);
    if (child == 0) ::_exit(inChild());
    int status = 0;
    if (::waitpid(child, &status, 0) != child || !WIFEXITED(status)) ::_exit(3);
    ::_exit(WEXITSTATUS(status));
  }
  int status = 0;
  if (::waitpid(worker, &status, 0) != worker || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

/// unshare(CLONE_NEWTIME) with a boot-time offset of 1000 s for the children (before any is in
/// it): 0, or 77 where this host does not permit it or has no /proc.
int unshareTimeWithOffsetOf1000Seconds() {
  if (::unshare(CLONE_NEWTIME) != 0) return 77;
  const int offsets = ::open("/proc/self/timens_offsets", O_WRONLY | O_CLOEXEC);
  const char offset[] = "boottime 1000 0";
  const bool written = offsets >= 0 && ::write(offsets, offset, sizeof offset - 1) > 0;
  if (offsets >= 0) ::close(offsets);
  return written ? 0 : 77;
}

constexpr const char* kNoNamespaces =
    "unsharing a namespace is not permitted here (not root?), or there is no /proc";

// A worker that unshared its pid namespace without mounting a /proc of it (unshare -p, no
// --mount-proc): its children are pids 1, 2, ... of a namespace the host's /proc does not
// describe. A child records itself in that namespace, and judges no pid by that /proc.
TEST(CoordinationRecordsTest, AChildInAPidNamespaceItsParentUnsharedKnowsItIsThere) {
  (void)Owner::of(::getpid());  // the host's facts read in this process first
  const int code = exitCodeOfForkedChild(
      [] { return ::unshare(CLONE_NEWPID) == 0 ? 0 : 77; },
      [] {
        const liveness::Reader& reader = liveness::HostFacts::system().reader();
        struct stat ns {};
        if (::stat("/proc/self/ns/pid", &ns) != 0) return 77;  // no /proc at all here
        const Owner own = Owner::of(::getpid());
        return reader.pid == 1 && !reader.ownProc && reader.pidNamespace == ns.st_ino &&
                       own.pidNamespace == ns.st_ino
                   ? 0
                   : 1;
      });
  if (code == 77) GTEST_SKIP() << kNoNamespaces;
  EXPECT_EQ(code, 0);
}

/// Field 22 of /proc/self/stat (the start time, as this process's time namespace shows it).
std::optional<std::uint64_t> shownStartTime() {
  const std::string text = testing::readFile("/proc/self/stat");
  const std::size_t close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  for (int at = 3; at <= 22 && (fields >> field); ++at) {
  }
  return std::stoull(field);
}

// A worker that unshared its time namespace with a boot-time offset (CRIU restores one so): its
// children see start times moved by it, and must record the host's, as every other reader of the
// host reads them (liveness::sameStartTime).
TEST(CoordinationRecordsTest, AChildInATimeNamespaceItsParentUnsharedRecordsTheHostsStartTime) {
  (void)Owner::of(::getpid());
  const int code = exitCodeOfForkedChild(unshareTimeWithOffsetOf1000Seconds, [] {
    const std::optional<std::uint64_t> shown = shownStartTime();
    const Owner own = Owner::of(::getpid());
    const auto ticks = static_cast<std::uint64_t>(::sysconf(_SC_CLK_TCK));
    return shown && own.startTime && *own.startTime == *shown - 1000 * ticks ? 0 : 1;
  });
  if (code == 77) GTEST_SKIP() << kNoNamespaces;
  EXPECT_EQ(code, 0);
}

// The offset as /proc/self/timens_offsets gives it, in ticks rounded down; years of it too (a
// CRIU restore of a host up for years), which in nanoseconds times the ticks would not fit.
TEST(CoordinationRecordsTest, ABootTimeOffsetOfYearsIsReadWhole) {
  EXPECT_EQ(liveness::boottimeOffsetTicks("monotonic 0 0\nboottime 1000 0\n", 100), 100000);
  EXPECT_EQ(liveness::boottimeOffsetTicks("boottime 200000000 0\n", 100), 20000000000);
  EXPECT_EQ(liveness::boottimeOffsetTicks("boottime -200000000 0\n", 100), -20000000000);
  EXPECT_EQ(liveness::boottimeOffsetTicks("boottime 1 505000000\n", 100), 150);
  EXPECT_EQ(liveness::boottimeOffsetTicks("boottime -1 500000000\n", 100), -50);  // -0.5 s
  EXPECT_EQ(liveness::boottimeOffsetTicks("boottime -1 505000000\n", 100), -50);  // -0.495 s
  EXPECT_EQ(liveness::boottimeOffsetTicks("boottime 1 2000000000\n", 100), 0);    // not the form
  EXPECT_EQ(liveness::boottimeOffsetTicks("monotonic 5 0\n", 100), 0);
}

// A process that unshared its time namespace is not in it, and the file tells that namespace's
// offsets, its children's: it cannot tell its own, and knows no start time rather than a wrong one
// (fail closed). A child of its fork() is in it, and reads them.
TEST(CoordinationRecordsTest, AProcessThatUnsharedItsTimeNamespaceCannotTellItsOffset) {
  const int code = exitCodeOfForkedChild(
      [] {
        const int setUp = unshareTimeWithOffsetOf1000Seconds();
        return setUp != 0 ? setUp : liveness::ownBoottimeOffsetTicks() ? 1 : 0;
      },
      [] {
        const auto ticks = static_cast<std::int64_t>(::sysconf(_SC_CLK_TCK));
        return liveness::ownBoottimeOffsetTicks() == 1000 * ticks ? 0 : 4;
      });
  if (code == 77) GTEST_SKIP() << kNoNamespaces;
  EXPECT_EQ(code, 0);
}

TEST(CoordinationRecordsTest, AZombieOwnerIsNotRunning) {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  // Not reaped yet: a zombie. (Up to 20 s for a forked sanitized child to exit on a slow
  // machine; the failure is never.)
  for (int i = 0; i < 4000 && isRunning(Owner{child, std::nullopt}); ++i) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_FALSE(isRunning(Owner{child, std::nullopt}));
  ::waitpid(child, nullptr, 0);
}

TEST(CoordinationRecordsTest, AProcessWhoseLeaderThreadExitedStillRuns) {
  // Its main thread called pthread_exit (Python, Java launchers can): /proc says Z for the leader
  // while its other threads work on.
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    std::thread([] {
      for (;;) ::pause();
    }).detach();
    (void)::write(ready[1], "y", 1);
    // The thread alone ends (pthread_exit without its unwinding through the test).
    ::syscall(SYS_exit, 0);
  }
  // The child's end only: a child that dies first (one that may start no thread) ends the read.
  ::close(ready[1]);
  char answer = 0;
  ASSERT_EQ(::read(ready[0], &answer, 1), 1);
  const Owner owner = Owner::of(child);
  // Until the leader is a zombie, and then still.
  for (int i = 0; i < 100; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_TRUE(isRunning(owner));
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_FALSE(isRunning(owner));
  ::close(ready[0]);
}

// --- the allocation rule -----------------------------------------------------------------------

bool byPidTable(const Owner& owner, const std::vector<pid_t>& live) {
  return std::find(live.begin(), live.end(), owner.pid) != live.end();
}

TEST(CoordinationPlanTest, TakesFreeGpusInOrderAndRecordsTheOwner) {
  const Allocation a =
      planAllocation(parseRecords("0 10\n"), {gpuRange(4), 2, Owner{20, 7}}, [](const Owner& o) {
        return byPidTable(o, {10, 20});
      });
  EXPECT_TRUE(a.satisfied);
  EXPECT_EQ(a.granted, (std::vector<std::string>{"1", "2"}));
  EXPECT_EQ(formatRecords(a.records), "0 10\n1 20\t7\n2 20\t7\n");
}

TEST(CoordinationPlanTest, DeadOwnersRecordOfGpuOneNeverTouchesGpuEleven) {
  // Flink's script deletes with sed "/1 /d", which also removes "11 <pid>".
  const Allocation a = planAllocation(parseRecords("1 500\n11 600\n"),
                                      {{"1", "11"}, 1, Owner{700, 1}}, [](const Owner& o) {
                                        return byPidTable(o, {600, 700});
                                      });
  EXPECT_EQ(a.granted, std::vector<std::string>{"1"});
  EXPECT_EQ(a.reclaimed, (std::vector<Record>{Record{"1", Owner{500, {}}}}));
  EXPECT_EQ(formatRecords(a.records), "11 600\n1 700\t1\n");
}

TEST(CoordinationPlanTest, TheHoldersAreNamedByTheirPlaceAmongTheRecordsKept) {
  // Gone owner 500's records of GPU 0 come first and are taken back: the records after them move
  // up, and each list names the record it means there. GPU 3's owner is of another pid
  // namespace, and its lease file is missing: held, fail closed.
  const std::string other = std::to_string(currentPidNamespace().value_or(0) + 1);
  const Allocation a = planAllocation(
      parseRecords("0 500\n0 501\n1 600\n2 700\t1\n3 800\t5\tpidns=" + other + "\tlease=gpu-3\n"),
      {{"0", "1", "2", "3"}, 1, Owner{700, 1}},
      [](const Owner& o) {
        return byPidTable(o, {600, 700, 800});
      },
      [](const std::string&, const std::optional<LeaseFile>&) { return LeaseState::kMissing; });
  ASSERT_TRUE(a.satisfied);
  EXPECT_EQ(a.granted, std::vector<std::string>{"0"});
  EXPECT_EQ(a.reclaimed,
            (std::vector<Record>{Record{"0", Owner{500, {}}}, Record{"0", Owner{501, {}}}}));
  EXPECT_EQ(a.reclaimedIndices, (std::vector<std::size_t>{0, 1}));
  ASSERT_EQ(a.records.size(), 4u);
  const auto gpusOf = [&a](const std::vector<std::size_t>& named) {
    std::vector<std::string> gpus;
    for (const std::size_t i : named) gpus.push_back(a.records.at(i).gpu);
    return gpus;
  };
  EXPECT_EQ(gpusOf(a.heldByOthers), (std::vector<std::string>{"1", "3"}));
  EXPECT_EQ(gpusOf(a.failClosed), std::vector<std::string>{"3"});
  EXPECT_EQ(gpusOf(a.heldByRequester), std::vector<std::string>{"2"});
  EXPECT_EQ(a.records.back(), (Record{"0", Owner{700, 1}}));
}

TEST(CoordinationPlanTest, WhatIsTakenBackIsToldInFiveLinesAndACount) {
  std::vector<Record> reclaimed{Record{"0", Owner{500, {}}}};
  for (unsigned share = 0; share < 6; ++share) {
    Record record{"1", Owner{600 + static_cast<pid_t>(share), {}}};
    record.share = ShareSlot{share, 8};
    reclaimed.push_back(record);
  }
  EXPECT_EQ(describeReclaimed(reclaimed),
            (std::vector<std::string>{
                "took back GPU 0 from process 500, which is no longer running",
                "took back share 0/8 of GPU 1 from process 600, which is no longer running",
                "took back share 1/8 of GPU 1 from process 601, which is no longer running",
                "took back share 2/8 of GPU 1 from process 602, which is no longer running",
                "took back share 3/8 of GPU 1 from process 603, which is no longer running",
                "... and took back 2 more records of processes that are no longer running"}));
  reclaimed.resize(5);
  EXPECT_EQ(describeReclaimed(reclaimed).size(), 5u);
  EXPECT_TRUE(describeReclaimed({}).empty());
  // A record written again and again (Flink's script appends without looking) is told once.
  EXPECT_EQ(describeReclaimed(std::vector<Record>(9, Record{"2", Owner{700, {}}})),
            (std::vector<std::string>{
                "took back GPU 2 from process 700, which is no longer running",
                "... and took back 4 more records of processes that are no longer running"}));
}

TEST(CoordinationPlanTest, GpusNoRecordNamesGoBeforeAGoneOwnersAsInFlinksScript) {
  // Flink's GPUDiscoveryScriptTest.testCoordinateIndexes: each call's owner is a subshell that
  // is gone by the next call, and the second call of 2 of 5 GPUs still gets GPUs 2 and 3.
  const auto onlyRequesters = [](const Owner& o) { return o.pid >= 100; };
  const Allocation first =
      planAllocation(parseRecords(""), {gpuRange(5), 2, Owner{100, 1}}, onlyRequesters);
  EXPECT_EQ(first.granted, (std::vector<std::string>{"0", "1"}));
  // Owner 100 is gone now: its records stay until their GPUs are needed.
  const auto gone = [](const Owner& o) { return o.pid == 200; };
  const Allocation second = planAllocation(parseRecords(formatRecords(first.records)),
                                           {gpuRange(5), 2, Owner{200, 1}}, gone);
  EXPECT_EQ(second.granted, (std::vector<std::string>{"2", "3"}));
  EXPECT_TRUE(second.reclaimed.empty());
  EXPECT_EQ(formatRecords(second.records), "0 100\t1\n1 100\t1\n2 200\t1\n3 200\t1\n");
  // Only when those are not enough: GPU 4, then the gone owner's first GPU, taken back.
  const auto third =
      planAllocation(parseRecords(formatRecords(second.records)), {gpuRange(5), 2, Owner{300, 1}},
                     [](const Owner& o) { return o.pid == 200 || o.pid == 300; });
  EXPECT_EQ(third.granted, (std::vector<std::string>{"0", "4"}));
  EXPECT_EQ(third.reclaimed, (std::vector<Record>{Record{"0", Owner{100, 1}}}));
}

TEST(CoordinationPlanTest, TheChooserPicksAmongUnrecordedGpusFirst) {
  AllocationRequest request{gpuRange(4), 1, Owner{300, 1}};
  std::vector<std::vector<std::string>> asked;
  request.choose = [&](const std::vector<std::string>& free, std::size_t amount) {
    asked.push_back(free);
    return std::vector<std::string>(free.end() - static_cast<std::ptrdiff_t>(amount), free.end());
  };
  // GPUs 0 and 3 are a gone owner's: the chooser sees only 1 and 2.
  const Allocation a = planAllocation(parseRecords("0 100\n3 100\n"), request,
                                      [](const Owner& o) { return o.pid == 300; });
  EXPECT_EQ(a.granted, std::vector<std::string>{"2"});
  EXPECT_EQ(asked, (std::vector<std::vector<std::string>>{{"1", "2"}}));
  // A MIG instance's gone record puts its GPU in the second tier too.
  request.related = {{"1", {"MIG-1c7d2b3e-4f5a-6b7c-8d9e-0f1a2b3c4d5e"}}};
  asked.clear();
  const Allocation b =
      planAllocation(parseRecords("0 100\n3 100\nMIG-1c7d2b3e-4f5a-6b7c-8d9e-0f1a2b3c4d5e 100\n"),
                     request, [](const Owner& o) { return o.pid == 300; });
  EXPECT_EQ(b.granted, std::vector<std::string>{"2"});
  EXPECT_TRUE(asked.empty()) << "one unit in the first tier: no choice to make";
}

TEST(CoordinationPlanTest, ADeadOwnersGpuIsTakenOver) {
  const Allocation a =
      planAllocation(parseRecords("0 500\n1 600\n"), {gpuRange(2), 2, Owner{700, 1}},
                     [](const Owner& o) { return o.pid == 700; });
  EXPECT_TRUE(a.satisfied);
  EXPECT_EQ(a.granted, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(a.reclaimed.size(), 2u);
}

TEST(CoordinationPlanTest, AskingAgainGivesOtherGpusAsFlinksScriptDoes) {
  // Flink's GPUDiscoveryScriptTest.testCoordinateIndexes: two calls of one caller get disjoint
  // GPUs (a TaskManager with two GPU resources on one file, a MiniCluster's TaskManagers).
  const auto live = [](const Owner& o) { return byPidTable(o, {10, 20}); };
  const Allocation first =
      planAllocation(parseRecords("0 10\n"), {gpuRange(4), 2, Owner{20, 7}}, live);
  EXPECT_EQ(first.granted, (std::vector<std::string>{"1", "2"}));
  const Allocation again = planAllocation(parseRecords(formatRecords(first.records)),
                                          {gpuRange(4), 1, Owner{20, 7}}, live);
  EXPECT_EQ(again.granted, std::vector<std::string>{"3"});
  EXPECT_EQ(again.heldByRequester.size(), 2u);
  EXPECT_EQ(formatRecords(again.records), "0 10\n1 20\t7\n2 20\t7\n3 20\t7\n");
  // Nothing is left for a third request; it keeps what it has.
  const Allocation third = planAllocation(parseRecords(formatRecords(again.records)),
                                          {gpuRange(4), 1, Owner{20, 7}}, live);
  EXPECT_FALSE(third.satisfied);
  EXPECT_EQ(third.records, again.records);
}

TEST(CoordinationPlanTest, ARecordWithAUuidHoldsThatGpuWhateverItsIndex) {
  // Container A sees the host's GPU 2 as its GPU 0 and recorded it with its UUID; container B
  // sees all three GPUs.
  AllocationRequest b{gpuRange(3), 2, Owner{20, 7}};
  b.uuids = {{"0", "GPU-aaaa"}, {"1", "GPU-bbbb"}, {"2", "GPU-cccc"}};
  const auto live = [](const Owner& o) { return byPidTable(o, {10, 20}); };
  const Allocation a = planAllocation(parseRecords("0 10\tuuid=GPU-cccc\n"), b, live);
  EXPECT_EQ(a.granted, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(formatRecords(a.records),
            "0 10\tuuid=GPU-cccc\n0 20\t7\tuuid=GPU-aaaa\n1 20\t7\tuuid=GPU-bbbb\n");
  // A record of a UUID this worker does not see holds none of its GPUs, not even that index.
  const Allocation unseen = planAllocation(parseRecords("0 10\tuuid=GPU-dddd\n"), b, live);
  EXPECT_EQ(unseen.granted, (std::vector<std::string>{"0", "1"}));
  // Without UUIDs (Flink's records, --gpus lists) the index is all there is.
  const Allocation flink = planAllocation(parseRecords("0 10\n"), b, live);
  EXPECT_EQ(flink.granted, (std::vector<std::string>{"1", "2"}));
}

TEST(CoordinationPlanTest, AGpuIsOneGpuWhicheverFieldOrSpellingNamesIt) {
  const auto live = [](const Owner& o) { return o.pid == 10 || o.pid == 20; };
  AllocationRequest byIndex{gpuRange(3), 2, Owner{20, 7}};
  byIndex.uuids = {{"0", "GPU-aaaa"}, {"1", "GPU-bbbb"}, {"2", "GPU-cccc"}};
  // A worker that handed GPUs out by UUID recorded the UUID as the GPU itself.
  EXPECT_EQ(planAllocation(parseRecords("GPU-aaaa 10\n"), byIndex, live).granted,
            (std::vector<std::string>{"1", "2"}));
  // The UUID's hex digits in another case, an index with a leading zero: the same GPUs.
  EXPECT_EQ(planAllocation(parseRecords("GPU-AAAA 10\n"), byIndex, live).granted,
            (std::vector<std::string>{"1", "2"}));
  EXPECT_EQ(planAllocation(parseRecords("01 10\n"), byIndex, live).granted,
            (std::vector<std::string>{"0", "2"}));
  // A worker that hands GPUs out by UUID (a --gpus list of UUIDs, no NVML) sees the records of
  // one that records them by index with their UUID.
  AllocationRequest byUuid{{"GPU-aaaa", "GPU-bbbb"}, 1, Owner{20, 7}};
  EXPECT_EQ(planAllocation(parseRecords("0 10\tuuid=GPU-aaaa\n"), byUuid, live).granted,
            std::vector<std::string>{"GPU-bbbb"});
}

TEST(CoordinationPlanTest, TooFewFreeGpusGrantsNothingAndTakesNothingBack) {
  const Allocation a = planAllocation(parseRecords("0 10\n1 11\n2 99\n3 12\n"),
                                      {gpuRange(4), 2, Owner{20, 7}}, [](const Owner& o) {
                                        return byPidTable(o, {10, 11, 12, 20});
                                      });
  EXPECT_FALSE(a.satisfied);
  EXPECT_TRUE(a.granted.empty());
  EXPECT_EQ(a.heldByOthers.size(), 3u);
  EXPECT_TRUE(a.reclaimed.empty());
  EXPECT_EQ(formatRecords(a.records), "0 10\n1 11\n2 99\n3 12\n");
}

// --- liveness: a lease adds liveness, never takes it away; records of an earlier boot ----------

/// A lease probe answering `state` for every lease.
LeaseProbe leasesAre(LeaseState state) {
  return [state](const std::string&, const std::optional<LeaseFile>&) { return state; };
}

TEST(CoordinationLivenessTest, ARunningOwnerOfThisNamespaceHoldsWhateverItsLease) {
  // The command closed the lease's descriptor (sudo's closefrom), or tmpfiles removed the file.
  const Record record{"0", Owner{10, 5, currentPidNamespace()}, {}, {}, "GPU-a"};
  const auto running = [](const Owner&) { return true; };
  for (const LeaseState state : {LeaseState::kHeld, LeaseState::kFree, LeaseState::kMissing}) {
    EXPECT_EQ(judge(record, running, leasesAre(state)), Liveness::kRunning);
  }
  // Gone by its pid: only a held lease (a child it left) keeps it.
  const auto gone = [](const Owner&) { return false; };
  EXPECT_EQ(judge(record, gone, leasesAre(LeaseState::kHeld)), Liveness::kLeaseHeld);
  EXPECT_EQ(judge(record, gone, leasesAre(LeaseState::kFree)), Liveness::kGone);
  // Its lease file removed (or replaced), a child it left may still hold the lease: held.
  EXPECT_EQ(judge(record, gone, leasesAre(LeaseState::kMissing)), Liveness::kLeaseMissing);
  // Without a lease, the pid alone.
  EXPECT_EQ(judge(Record{"0", record.owner}, gone, leasesAre(LeaseState::kHeld)), Liveness::kGone);
}

TEST(CoordinationLivenessTest, WhatThePidCannotJudgeTheLeaseDecidesAndAMissingOneFailsClosed) {
  const auto neverAsked = [](const Owner&) -> bool {
    ADD_FAILURE() << "the pid of another namespace was asked";
    return false;
  };
  const std::uint64_t other = currentPidNamespace().value_or(0) + 1;
  const Record otherNamespace{"0", Owner{10, 5, other}, {}, {}, "GPU-a"};
  EXPECT_EQ(judge(otherNamespace, neverAsked, leasesAre(LeaseState::kHeld)), Liveness::kLeaseHeld);
  EXPECT_EQ(judge(otherNamespace, neverAsked, leasesAre(LeaseState::kFree)), Liveness::kGone);
  EXPECT_EQ(judge(otherNamespace, neverAsked, leasesAre(LeaseState::kMissing)),
            Liveness::kLeaseMissing);
  EXPECT_TRUE(holdsGpu(Liveness::kLeaseMissing));
  // Without a start time the pid cannot tell a reused pid: the lease decides too.
  const Record noStartTime{"0", Owner{10, std::nullopt, currentPidNamespace()}, {}, {}, "GPU-a"};
  const auto running = [](const Owner&) { return true; };
  EXPECT_EQ(judge(noStartTime, running, leasesAre(LeaseState::kFree)), Liveness::kGone);
  EXPECT_EQ(judge(noStartTime, running, leasesAre(LeaseState::kMissing)), Liveness::kLeaseMissing);
  // Without a lease: another namespace cannot be judged; Flink's record goes by its pid.
  EXPECT_EQ(judge(Record{"0", Owner{10, 5, other}}, neverAsked, {}), Liveness::kUnjudgeable);
  EXPECT_EQ(judge(Record{"0", Owner{10}}, running, {}), Liveness::kRunning);
}

TEST(CoordinationLivenessTest, ARecordOfAnEarlierBootIsGoneWhateverItsPid) {
  const std::optional<std::string> boot = currentBootId();
  ASSERT_TRUE(boot) << "/proc/sys/kernel/random/boot_id";
  // This very process, as an earlier boot would have recorded it: same pid, same start time.
  Owner earlier = Owner::of(::getpid());
  EXPECT_EQ(earlier.bootId, boot);
  EXPECT_TRUE(isRunning(earlier));
  earlier.bootId = "00000000-0000-4000-8000-000000000000";
  EXPECT_FALSE(isRunning(earlier));
  EXPECT_EQ(judge(Record{"0", earlier}, isRunning, leasesAre(LeaseState::kHeld)),
            Liveness::kEarlierBoot);
  // It is dropped by any allocation, and its GPU counts as one no record names.
  const std::string text = formatRecords({Record{"0", earlier}});
  EXPECT_NE(text.find("\tboot=00000000-0000-4000-8000-000000000000"), std::string::npos);
  const Allocation a = planAllocation(parseRecords(text + "1 424242\n"),
                                      {gpuRange(3), 1, Owner::of(::getpid())}, isRunning);
  EXPECT_EQ(a.granted, std::vector<std::string>{"0"});
  EXPECT_EQ(a.reclaimed.size(), 1u);
  // A record without a boot id keeps the pid rule.
  EXPECT_TRUE(isRunning(Owner{::getpid()}));
}

TEST(CoordinationRecordsTest, TwoIdenticalRecordsAreOne) {
  LiveProcess owner;
  TempDir dir("flink-gpu-identical-records");
  const fs::path file = dir / "coordination";
  const std::string line = "3 " + std::to_string(owner.pid()) + "\t77\n";
  std::ofstream(file) << line << line << "4 " << owner.pid() << "\t77\n";
  EXPECT_EQ(readStatus(file).records.size(), 2u);
}

TEST(CoordinationPlanTest, LivenessIsAskedOncePerOwnerSoTheCostIsLinear) {
  std::string text;
  for (int i = 0; i < 63; ++i) text += std::to_string(i) + " 10 5\n";
  int probes = 0;
  const Allocation a =
      planAllocation(parseRecords(text), {gpuRange(64), 1, Owner{20, 7}}, [&](const Owner& o) {
        ++probes;
        return o.pid == 10;
      });
  EXPECT_EQ(a.granted, std::vector<std::string>{"63"});
  EXPECT_EQ(probes, 1);
}

// --- related units: a GPU and its MIG instances
// ---------------------------------------------------

constexpr const char* kMigA = "MIG-0b6c1a2d-3e4f-5a6b-7c8d-9e0f1a2b3c4d";
constexpr const char* kMigB = "MIG-1c7d2b3e-4f5a-6b7c-8d9e-0f1a2b3c4d5e";

/// GPU 0 without MIG; GPU 1 in MIG mode with instances kMigA and kMigB, related both ways (as
/// discovery::relatedUnits gives them).
RelatedUnits gpuOneAndItsInstances() {
  return {{"1", {kMigA, kMigB}}, {kMigA, {"1"}}, {kMigB, {"1"}}};
}

AllocationRequest request(std::vector<std::string> gpus, std::size_t amount, Owner owner,
                          RelatedUnits related) {
  return AllocationRequest{std::move(gpus), amount, owner, std::move(related)};
}

const auto kLive = [](const Owner& o) { return byPidTable(o, {10, 11, 20}); };

TEST(CoordinationRelatedUnitsTest, AGpuWhoseMigInstanceIsHeldIsNotGranted) {
  // Owner 10 holds GPU 0 and instance A (--mig); owner 20 hands out whole GPUs.
  const std::string held = std::string("0 10\n") + kMigA + " 10\n";
  const Allocation a = planAllocation(
      parseRecords(held), request({"0", "1"}, 1, Owner{20, 7}, gpuOneAndItsInstances()), kLive);
  EXPECT_FALSE(a.satisfied);
  EXPECT_TRUE(a.granted.empty());
  ASSERT_EQ(a.blocked.size(), 1u);
  EXPECT_EQ(a.blocked[0], (BlockedUnit{"1", Record{kMigA, Owner{10, {}}}}));
  EXPECT_EQ(describe(a.blocked[0]),
            std::string("GPU 1 is busy: its MIG instance ") + kMigA + " is held by process 10");
  EXPECT_EQ(formatRecords(a.records), held);

  // Without the relations GPU 1 looks free: the bug.
  const Allocation unrelated =
      planAllocation(parseRecords(held), request({"0", "1"}, 1, Owner{20, 7}, {}), kLive);
  EXPECT_EQ(unrelated.granted, std::vector<std::string>{"1"});
}

TEST(CoordinationRelatedUnitsTest, MigInstancesOfAGpuHeldWholeAreNotGranted) {
  const Allocation a =
      planAllocation(parseRecords("1 10\n"),
                     request({"0", kMigA, kMigB}, 2, Owner{20, 7}, gpuOneAndItsInstances()), kLive);
  EXPECT_FALSE(a.satisfied);
  EXPECT_EQ(a.blocked, (std::vector<BlockedUnit>{BlockedUnit{kMigA, Record{"1", Owner{10, {}}}},
                                                 BlockedUnit{kMigB, Record{"1", Owner{10, {}}}}}));
  EXPECT_EQ(describe(a.blocked[0]), std::string("GPU ") + kMigA +
                                        " is busy: GPU 1, which it is carved from, is held by "
                                        "process 10");

  // One unit is still free.
  const Allocation one =
      planAllocation(parseRecords("1 10\n"),
                     request({"0", kMigA, kMigB}, 1, Owner{20, 7}, gpuOneAndItsInstances()), kLive);
  EXPECT_EQ(one.granted, std::vector<std::string>{"0"});
  EXPECT_EQ(formatRecords(one.records), "1 10\n0 20\t7\n");
}

TEST(CoordinationRelatedUnitsTest, TwoInstancesOfOneGpuGoToTwoOwners) {
  const RelatedUnits related = gpuOneAndItsInstances();
  const Allocation first = planAllocation(
      parseRecords(""), request({"0", kMigA, kMigB}, 2, Owner{10, {}}, related), kLive);
  EXPECT_EQ(first.granted, (std::vector<std::string>{"0", kMigA}));
  const Allocation second =
      planAllocation(parseRecords(formatRecords(first.records)),
                     request({"0", kMigA, kMigB}, 1, Owner{11, {}}, related), kLive);
  EXPECT_TRUE(second.satisfied);
  EXPECT_EQ(second.granted, std::vector<std::string>{kMigB});
  EXPECT_TRUE(second.blocked.empty());
}

TEST(CoordinationRelatedUnitsTest, ARelationGivenOneWayCountsBothWays) {
  // Only "1 -> A": a record of A still blocks 1, and a record of 1 still blocks A.
  const RelatedUnits oneWay{{"1", {kMigA}}};
  const Allocation gpu = planAllocation(parseRecords(std::string(kMigA) + " 10\n"),
                                        request({"1"}, 1, Owner{20, 7}, oneWay), kLive);
  EXPECT_FALSE(gpu.satisfied);
  const Allocation instance =
      planAllocation(parseRecords("1 10\n"), request({kMigA}, 1, Owner{20, 7}, oneWay), kLive);
  EXPECT_FALSE(instance.satisfied);
  EXPECT_EQ(instance.blocked.size(), 1u);
}

TEST(CoordinationRelatedUnitsTest, ARelatedRecordOfADeadOwnerIsTakenBackAndBlocksNothing) {
  const Allocation a =
      planAllocation(parseRecords(std::string(kMigA) + " 99\n" + kMigB + " 98\n"),
                     request({"0", "1"}, 2, Owner{20, 7}, gpuOneAndItsInstances()), kLive);
  EXPECT_TRUE(a.satisfied);
  EXPECT_EQ(a.granted, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(a.reclaimed.size(), 2u);
  EXPECT_TRUE(a.blocked.empty());
  EXPECT_EQ(formatRecords(a.records), "0 20\t7\n1 20\t7\n");
}

TEST(CoordinationRelatedUnitsTest, TheRequestersOwnRelatedRecordsBlockItToo) {
  // Owner 20 holds instance A (an earlier --mig request) and now asks for whole GPUs: GPU 1
  // shares A's hardware, so only GPU 0 can be had.
  const Allocation two =
      planAllocation(parseRecords(std::string(kMigA) + " 20 7\n"),
                     request({"0", "1"}, 2, Owner{20, 7}, gpuOneAndItsInstances()), kLive);
  EXPECT_FALSE(two.satisfied);
  const Allocation one =
      planAllocation(parseRecords(std::string(kMigA) + " 20 7\n"),
                     request({"0", "1"}, 1, Owner{20, 7}, gpuOneAndItsInstances()), kLive);
  EXPECT_EQ(one.granted, std::vector<std::string>{"0"});
}

TEST(CoordinationRelatedUnitsTest, AGpuAndItsInstanceAreNeverGrantedTogether) {
  // A list that holds both (not what allocatableUnits gives): the second one is passed over.
  const Allocation a =
      planAllocation(parseRecords(""),
                     request({"1", kMigA, "0"}, 2, Owner{20, 7}, gpuOneAndItsInstances()), kLive);
  EXPECT_EQ(a.granted, (std::vector<std::string>{"1", "0"}));
  const Allocation three =
      planAllocation(parseRecords(""),
                     request({"1", kMigA, "0"}, 3, Owner{20, 7}, gpuOneAndItsInstances()), kLive);
  EXPECT_FALSE(three.satisfied);
}

TEST(CoordinationRelatedUnitsTest, RecordsMatchExactlyThroughRelationsToo) {
  // GPU 11's instance does not block GPU 1.
  const RelatedUnits related{{"11", {kMigA}}, {kMigA, {"11"}}};
  const Allocation a = planAllocation(parseRecords(std::string(kMigA) + " 10\n"),
                                      request({"1", "11"}, 1, Owner{20, 7}, related), kLive);
  EXPECT_EQ(a.granted, std::vector<std::string>{"1"});
  const Allocation both = planAllocation(parseRecords(std::string(kMigA) + " 10\n"),
                                         request({"1", "11"}, 2, Owner{20, 7}, related), kLive);
  EXPECT_FALSE(both.satisfied);
  EXPECT_EQ(both.blocked,
            (std::vector<BlockedUnit>{BlockedUnit{"11", Record{kMigA, Owner{10, {}}}}}));
}

// --- AMD and Intel units ----------------------------------------------------------------------

constexpr const char* kIntelCard = "intel:00000000:5A:00.0";
constexpr const char* kIntelTile0 = "intel:00000000:5A:00.0/0";
constexpr const char* kIntelTile1 = "intel:00000000:5A:00.0/1";

TEST(CoordinationVendorRecordsTest, AnAmdOrIntelLineHoldsNoSpaceSoFlinksScriptNeverTouchesIt) {
  const Record amd{"amd:00000000:05:00.3", Owner{12, 345, 4026531836}};
  const Record intel{kIntelTile1, Owner{13, 346}};
  const std::string text = formatRecords({Record{"0", Owner{11, 344}}, amd, intel});
  EXPECT_EQ(text,
            "0 11\t344\n"
            "amd:00000000:05:00.3\t12\t345\tpidns=4026531836\n"
            "intel:00000000:5A:00.0/1\t13\t346\n");
  // Flink's `grep "^<gpu> "` and `sed "/<gpu> /d"` need a space: only NVIDIA's line has one.
  const std::string amdLine = formatRecords({amd});
  EXPECT_EQ(amdLine.find(' '), std::string::npos);
  const ParsedRecords parsed = parseRecords(text);
  ASSERT_EQ(parsed.records.size(), 3u);
  EXPECT_TRUE(parsed.junk.empty());
  EXPECT_EQ(parsed.records[1], amd);
  EXPECT_EQ(parsed.records[2], intel);
}

TEST(CoordinationVendorRecordsTest, EachVendorGetsItsOwnGpuZeroFromOneFile) {
  // An NVIDIA worker holds GPU 0; the AMD worker's units are other hardware.
  const std::string held = "0 10\t1\n";
  const Allocation amd = planAllocation(
      parseRecords(held),
      request({"amd:00000000:63:00.0", "amd:00000000:43:00.0"}, 1, Owner{20, 7}, {}), kLive);
  ASSERT_TRUE(amd.satisfied);
  EXPECT_EQ(amd.granted, std::vector<std::string>{"amd:00000000:63:00.0"});
  const Allocation nvidia = planAllocation(parseRecords(formatRecords(amd.records)),
                                           request({"0", "1"}, 1, Owner{11, 7}, {}), kLive);
  EXPECT_EQ(nvidia.granted, std::vector<std::string>{"1"});
}

TEST(CoordinationVendorRecordsTest, AnIntelCardHeldWholeBlocksItsTilesAndATileItsCard) {
  const RelatedUnits related{{kIntelCard, {kIntelTile0, kIntelTile1}}};
  // A COMPOSITE worker holds the card: a FLAT worker gets neither tile.
  const std::string card = std::string(kIntelCard) + "\t10\n";
  const Allocation flat = planAllocation(
      parseRecords(card), request({kIntelTile0, kIntelTile1}, 1, Owner{20, 7}, related), kLive);
  EXPECT_FALSE(flat.satisfied);
  ASSERT_EQ(flat.blocked.size(), 2u);
  EXPECT_EQ(describe(flat.blocked[0]), std::string("GPU ") + kIntelTile0 + " is busy: card " +
                                           kIntelCard +
                                           ", which it is part of, is held by process 10");
  // A FLAT worker holds tile 1: the COMPOSITE worker does not get the card, and a second FLAT
  // worker gets tile 0 (tiles are not related to each other).
  const std::string tile = std::string(kIntelTile1) + "\t10\n";
  const Allocation composite =
      planAllocation(parseRecords(tile), request({kIntelCard}, 1, Owner{20, 7}, related), kLive);
  EXPECT_FALSE(composite.satisfied);
  ASSERT_EQ(composite.blocked.size(), 1u);
  EXPECT_EQ(describe(composite.blocked[0]), std::string("GPU ") + kIntelCard +
                                                " is busy: its tile " + kIntelTile1 +
                                                " is held by process 10");
  const Allocation otherTile = planAllocation(
      parseRecords(tile), request({kIntelTile0, kIntelTile1}, 1, Owner{20, 7}, related), kLive);
  EXPECT_EQ(otherTile.granted, std::vector<std::string>{kIntelTile0});
}

TEST(CoordinationRelatedUnitsTest, ManyGpusWithSevenInstancesEachStayLinear) {
  // 64 GPUs of 7 instances; every instance but GPU 63's is held: GPU 63 is the only one free.
  RelatedUnits related;
  std::string text;
  std::vector<std::string> gpus;
  for (int gpu = 0; gpu < 64; ++gpu) {
    gpus.push_back(std::to_string(gpu));
    for (int i = 0; i < 7; ++i) {
      const std::string mig = "MIG-" + std::to_string(gpu) + "-" + std::to_string(i);
      related[std::to_string(gpu)].push_back(mig);
      related[mig].push_back(std::to_string(gpu));
      if (gpu < 63) text += mig + " 10 5\n";
    }
  }
  int probes = 0;
  const Allocation a = planAllocation(parseRecords(text), request(gpus, 1, Owner{20, 7}, related),
                                      [&](const Owner& o) {
                                        ++probes;
                                        return o.pid == 10;
                                      });
  EXPECT_EQ(a.granted, std::vector<std::string>{"63"});
  EXPECT_EQ(a.blocked.size(), 63u * 7u);
  EXPECT_EQ(probes, 1);
}

// --- the file ----------------------------------------------------------------------------------

class CoordinationFileTest : public ::testing::Test {
 protected:
  fs::path file() const { return dir_ / "nested" / "coordination"; }
  TempDir dir_;
};

TEST_F(CoordinationFileTest, CreatesTheFileAndTwoOwnersGetDisjointGpus) {
  fs::create_directories(file().parent_path());
  LiveProcess first;
  LiveProcess second;
  const Allocation a = allocate(file(), {gpuRange(4), 2, Owner::of(first.pid())});
  const Allocation b = allocate(file(), {gpuRange(4), 2, Owner::of(second.pid())});
  EXPECT_EQ(a.granted, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(b.granted, (std::vector<std::string>{"2", "3"}));
  LiveProcess third;
  EXPECT_FALSE(allocate(file(), {gpuRange(4), 1, Owner::of(third.pid())}).satisfied);

  // Flink's script reads `<index> <pid>`: the first two fields are exactly that.
  const ParsedRecords onDisk = parseRecords(readFile(file()));
  ASSERT_EQ(onDisk.records.size(), 4u);
  EXPECT_EQ(onDisk.records[0].owner.pid, first.pid());
  EXPECT_EQ(onDisk.records[3].owner.pid, second.pid());

  first.stop();  // its GPUs come back
  EXPECT_EQ(allocate(file(), {gpuRange(4), 2, Owner::of(third.pid())}).granted,
            (std::vector<std::string>{"0", "1"}));
}

TEST_F(CoordinationFileTest, ReadRecordsGivesTheRecordsAsTheyAreWithoutJudgingThem) {
  EXPECT_TRUE(readRecords(file()).records.empty());
  EXPECT_TRUE(snapshotRecords(file()).records.empty());
  fs::create_directories(file().parent_path());
  LiveProcess owner;
  const pid_t gone = deadPid();
  const std::string text = "0 " + std::to_string(gone) + "\nnot a record\n1 " +
                           std::to_string(owner.pid()) + "\n1 " + std::to_string(owner.pid()) +
                           "\n";
  testing::writeScript(file(), text, fs::perms::owner_read | fs::perms::owner_write);
  for (const ParsedRecords& read : {readRecords(file()), snapshotRecords(file())}) {
    // The gone owner's record, and a record twice, as the file has them.
    EXPECT_EQ(read.records, (std::vector<Record>{Record{"0", Owner{gone, {}}},
                                                 Record{"1", Owner{owner.pid(), {}}},
                                                 Record{"1", Owner{owner.pid(), {}}}}));
    ASSERT_EQ(read.junk.size(), 1u);
    EXPECT_EQ(read.junk[0].text, "not a record");
  }
  EXPECT_EQ(readFile(file()), text);
}

TEST_F(CoordinationFileTest, ARecordWithAReusedPidIsTakenBack) {
  fs::create_directories(file().parent_path());
  const Owner self = Owner::of(::getpid());
  // This process's pid, but a start time of another process: the pid was reused.
  testing::writeScript(
      file(),
      "0 " + std::to_string(::getpid()) + " " + std::to_string(*self.startTime + 100) + "\n",
      fs::perms::owner_read | fs::perms::owner_write);
  LiveProcess other;
  const Allocation a = allocate(file(), {gpuRange(1), 1, Owner::of(other.pid())});
  EXPECT_TRUE(a.satisfied);
  EXPECT_EQ(a.reclaimed.size(), 1u);
}

TEST_F(CoordinationFileTest, ASymlinkAtThePathIsRefusedAndItsTargetNeverWritten) {
  fs::create_directories(file().parent_path());
  const fs::path target = dir_ / "precious";
  testing::writeScript(target, "do not touch\n", fs::perms::owner_read | fs::perms::owner_write);
  fs::create_symlink(target, file());
  try {
    allocate(file(), {gpuRange(2), 1, Owner::of(::getpid())});
    FAIL();
  } catch (const store::StoreError& e) {
    EXPECT_EQ(e.cause(), store::StoreError::Cause::kRefused) << e.what();
    EXPECT_NE(std::string(e.what()).find("symbolic link"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(file().string()), std::string::npos) << e.what();
  }
  EXPECT_EQ(readFile(target), "do not touch\n");
  EXPECT_THROW(release(file(), [](const Record&) { return true; }), store::StoreError);
}

TEST_F(CoordinationFileTest, AnythingButARegularFileIsRefused) {
  fs::create_directories(file());  // a directory at the path
  EXPECT_THROW(allocate(file(), {gpuRange(2), 1, Owner::of(::getpid())}), store::StoreError);
  fs::remove(file());
  ASSERT_EQ(::mkfifo(file().c_str(), 0600), 0);
  EXPECT_THROW(allocate(file(), {gpuRange(2), 1, Owner::of(::getpid())}), store::StoreError);
  fs::remove(file());
  const fs::path other = dir_ / "other";
  testing::writeScript(other, "", fs::perms::owner_read | fs::perms::owner_write);
  fs::create_hard_link(other, file());
  EXPECT_THROW(allocate(file(), {gpuRange(2), 1, Owner::of(::getpid())}), store::StoreError);
  EXPECT_EQ(readFile(other), "");
}

TEST_F(CoordinationFileTest, JunkLinesAreToleratedReportedAndKept) {
  fs::create_directories(file().parent_path());
  testing::writeScript(file(), "garbage\n0 " + std::to_string(deadPid()) + "\n\n1 not-a-pid\n",
                       fs::perms::owner_read | fs::perms::owner_write);
  LiveProcess owner;
  const Allocation a = allocate(file(), {gpuRange(2), 2, Owner::of(owner.pid())});
  EXPECT_TRUE(a.satisfied);
  ASSERT_EQ(a.junk.size(), 2u);
  EXPECT_EQ(a.junk[0].lineNumber, 1u);
  EXPECT_EQ(a.junk[1].text, "1 not-a-pid");
  const ParsedRecords onDisk = parseRecords(readFile(file()));
  EXPECT_EQ(onDisk.records.size(), 2u);
  EXPECT_EQ(onDisk.junk.size(), 2u);
}

TEST_F(CoordinationFileTest, ALockHeldTooLongIsAClearErrorAndALockOfTheDeadIsNot) {
  fs::create_directories(file().parent_path());
  allocate(file(), {gpuRange(2), 1, Owner::of(::getpid())});
  {
    process::FileDescriptor holder(::open(file().c_str(), O_RDWR | O_CLOEXEC));
    ASSERT_EQ(::flock(holder.get(), LOCK_EX), 0);
    try {
      allocate(file(), {gpuRange(2), 1, Owner::of(::getpid())}, 200ms);
      FAIL();
    } catch (const store::StoreError& e) {
      EXPECT_EQ(e.cause(), store::StoreError::Cause::kLocked) << e.what();
      EXPECT_NE(std::string(e.what()).find("locked"), std::string::npos) << e.what();
    }
  }
  // A process killed while it holds the lock does not leave the host locked.
  const pid_t holder = ::fork();
  if (holder == 0) {
    const int fd = ::open(file().c_str(), O_RDWR);
    ::flock(fd, LOCK_EX);
    ::pause();
    ::_exit(0);
  }
  std::this_thread::sleep_for(50ms);
  ::kill(holder, SIGKILL);
  ::waitpid(holder, nullptr, 0);
  EXPECT_TRUE(allocate(file(), {gpuRange(2), 1, Owner::of(::getpid())}, 1s).satisfied);
}

TEST_F(CoordinationFileTest, StatusAndRelease) {
  fs::create_directories(file().parent_path());
  EXPECT_TRUE(readStatus(file()).records.empty());  // no file yet: nothing held
  LiveProcess owner;
  allocate(file(), {gpuRange(4), 2, Owner::of(owner.pid())});
  std::ofstream(file(), std::ios::app) << "3 " << deadPid() << "\n";
  Status status = readStatus(file());
  ASSERT_EQ(status.records.size(), 3u);
  EXPECT_TRUE(status.records[0].running);
  EXPECT_FALSE(status.records[2].running);

  const auto released = release(file(), [](const Record& r) { return r.gpu == "1"; });
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0].owner.pid, owner.pid());
  const pid_t pid = owner.pid();
  EXPECT_EQ(release(file(), [&](const Record& r) { return r.owner.pid == pid; }).size(), 1u);
  EXPECT_EQ(readStatus(file()).records.size(), 1u);
}

TEST_F(CoordinationFileTest, ReleaseStaleKeepsARunningOwnersRecordAndRemovesTheOthers) {
  fs::create_directories(file().parent_path());
  LiveProcess owner;
  // GPUs 2 and 3 are stale (the predicate says which); 2 of a running owner, 3 of a gone one.
  std::ofstream(file()) << "0 " << deadPid() << "\n2 " << owner.pid() << "\n3 " << deadPid()
                        << "\n";
  const auto stale = [](const Record& r) { return r.gpu == "2" || r.gpu == "3"; };
  const Released result = releaseStale(file(), stale);
  ASSERT_EQ(result.released.size(), 1u);
  EXPECT_EQ(result.released[0].record.gpu, "3");
  ASSERT_EQ(result.refused.size(), 1u);
  EXPECT_EQ(result.refused[0].record.owner.pid, owner.pid());
  const Status status = readStatus(file());
  ASSERT_EQ(status.records.size(), 2u);
  EXPECT_EQ(status.records[0].record.gpu, "0");
  EXPECT_EQ(status.records[1].record.gpu, "2");
  // releaseChecked, by contrast, removes none of them when one is refused.
  std::ofstream(file(), std::ios::app) << "3 " << deadPid() << "\n";
  EXPECT_TRUE(releaseChecked(file(), stale, false).released.empty());
  EXPECT_EQ(readStatus(file()).records.size(), 3u);
}

// --- races and kill -9 -------------------------------------------------------------------------

/// One round: `owners` processes start together and each asks for one of `gpus` GPUs. A process
/// that gets a GPU claims a marker file for it with O_EXCL while it holds it, and removes the
/// marker before it exits: finding the marker already there means two running owners held the
/// same GPU. Returns {granted, violations}.
std::pair<int, int> raceRound(const fs::path& file, const fs::path& markers, int owners, int gpus) {
  int startPipe[2];
  EXPECT_EQ(::pipe(startPipe), 0);
  std::vector<pid_t> children;
  for (int i = 0; i < owners; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(startPipe[1]);
      char go;
      (void)::read(startPipe[0], &go, 1);  // wait for the start: all race at once
      int code = 2;                        // not granted
      try {
        // The 32 wait for the lock one after another; under ThreadSanitizer, beside make test's
        // next build, a round took over the default 5 s, and the last ones in line gave up.
        // What is tested is who holds a GPU, not how long the line is.
        const Allocation a =
            allocate(file, {gpuRange(gpus), 1, Owner::of(::getpid())}, std::chrono::minutes(2));
        if (a.satisfied) {
          const fs::path marker = markers / a.granted.front();
          const int fd = ::open(marker.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0600);
          if (fd < 0) ::_exit(3);  // someone running holds this GPU too
          ::close(fd);
          ::usleep(2000);
          ::unlink(marker.c_str());
          code = 0;
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "owner %d: %s\n", static_cast<int>(::getpid()), e.what());
        code = 4;
      } catch (...) {
        code = 4;
      }
      ::_exit(code);
    }
    children.push_back(pid);
  }
  ::close(startPipe[0]);
  ::close(startPipe[1]);  // EOF: go
  int granted = 0;
  int violations = 0;
  for (pid_t child : children) {
    int status = 0;
    ::waitpid(child, &status, 0);
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (code == 0) ++granted;
    if (code == 3 || code == 4 || code == -1) {
      ++violations;
      ADD_FAILURE() << "owner " << child << " ended with " << code << " (status " << status << ")";
    }
  }
  return {granted, violations};
}

TEST_F(CoordinationFileTest, ThirtyTwoOwnersRaceForEightGpusAndNoGpuHasTwoRunningOwners) {
  fs::create_directories(file().parent_path());
  const fs::path markers = dir_ / "markers";
  fs::create_directories(markers);
  // Under a sanitizer a quarter of the rounds: each forked owner costs about ten times the CPU
  // there (25 rounds took 57 s of make test's ASan+UBSan phase).
  const int rounds = static_cast<int>(testing::repetitionsToRun(25));
  int totalGranted = 0;
  for (int round = 0; round < rounds; ++round) {
    const auto [granted, violations] = raceRound(file(), markers, 32, 8);
    ASSERT_EQ(violations, 0) << "round " << round;
    EXPECT_GE(granted, 8) << "round " << round;  // at least one full set of GPUs handed out
    totalGranted += granted;
  }
  EXPECT_GE(totalGranted, rounds * 8);
  const ParsedRecords onDisk = parseRecords(readFile(file()));
  EXPECT_TRUE(onDisk.junk.empty());
}

// --- the layout of a change ---------------------------------------------------------------------

/// editRecords' rule as it reads most plainly (as it was written before LineEdit read the file in
/// one pass): a copy blanked in place, its blank end cut off, compacted when more than half of a
/// file of more than four pages is spaces and tabs, the new records appended; no line crosses a
/// page boundary it need not.
std::string plainEdit(std::string_view before, const std::vector<LineSpan>& blank,
                      const std::vector<Record>& added) {
  constexpr std::size_t kLayoutPage = 4096;
  const auto append = [](std::string& text, std::string_view line) {
    const std::size_t used = text.size() % kLayoutPage;
    if (used != 0 && used + line.size() > kLayoutPage && line.size() <= kLayoutPage) {
      text.append(kLayoutPage - used - 1, ' ');
      text += '\n';
    }
    text += line;
  };
  std::string text(before);
  for (const LineSpan& span : blank) text.replace(span.offset, span.length, span.length, ' ');
  if (!text.empty() && text.back() != '\n') text += '\n';
  std::size_t end = text.size();
  while (end > 0 && strings::isSpace(text[end - 1])) --end;
  text = end > 0 ? text.substr(0, text.find('\n', end) + 1) : std::string();
  const auto blanks =
      std::count_if(text.begin(), text.end(), [](char c) { return c == ' ' || c == '\t'; });
  if (text.size() > 4 * kLayoutPage && static_cast<std::size_t>(blanks) * 2 > text.size()) {
    std::string compacted;
    std::set<std::string> written;
    for (const std::string_view line : strings::split(text, '\n')) {
      if (strings::isBlank(line)) continue;
      const ParsedRecords parsed = parseRecords(line);
      if (parsed.records.size() == 1) {
        const Record& record = parsed.records.front();
        const std::string identity =
            record.gpu + ' ' + std::to_string(record.owner.pid) + ' ' +
            (record.owner.startTime ? std::to_string(*record.owner.startTime) : "-") + ' ' +
            record.owner.bootId.value_or("-") + ' ' +
            (record.share ? formatShareSlot(*record.share) : "whole");
        if (!written.insert(identity).second) continue;
      }
      append(compacted, std::string(line) + '\n');
    }
    text = std::move(compacted);
  }
  for (const Record& record : added) append(text, formatRecords({record}));
  return text;
}

TEST(CoordinationLayoutTest, AChangeIsLaidOutByThePlainRuleWhateverTheFile) {
  // Random files of records (some identical, some of boot "-"), junk, blank lines of every
  // whitespace, lines longer than a page and a last line without '\n'; random lines blanked,
  // random records appended: small files changed in place, large mostly blank ones compacted.
  std::mt19937 random(2026);
  const auto pick = [&random](std::size_t count) {
    return static_cast<std::size_t>(random() % count);
  };
  const std::vector<std::string> pool = {"0 101",
                                         "0 101\t7",
                                         "1 101\t7\tboot=-",
                                         "1 101\t7",
                                         "0 101\t7\tboot=ab",
                                         "2 202\t9\tuuid=GPU-abc\tshare=1/4",
                                         "2 202\t9\tshare=1/4",
                                         "0  101",
                                         "junk",
                                         "this is not a record",
                                         " \t ",
                                         "\r",
                                         "",
                                         "\f\v",
                                         std::string(5000, 'j'),
                                         std::string(4090, 'k')};
  int compacted = 0;
  const int rounds = static_cast<int>(testing::repetitionsToRun(400));
  for (int round = 0; round < rounds; ++round) {
    std::string before;
    const std::size_t lines = 1 + pick(round % 4 == 0 ? 3000 : 40);
    for (std::size_t i = 0; i < lines; ++i) {
      before += pool[pick(pool.size())];
      if (i + 1 < lines || pick(2) == 0) before += '\n';
    }
    const ParsedRecords parsed = parseRecords(before);
    std::vector<LineSpan> blank;
    const std::size_t blankEvery = 1 + pick(4);
    for (std::size_t i = 0; i < parsed.recordSpans.size(); ++i) {
      if (i % blankEvery == 0) blank.push_back(parsed.recordSpans[i]);
    }
    for (std::size_t i = 0; i < parsed.junkSpans.size(); ++i) {
      if (pick(2) == 0) blank.push_back(parsed.junkSpans[i]);
    }
    std::shuffle(blank.begin(), blank.end(), random);
    std::vector<Record> added;
    for (std::size_t i = pick(3); i > 0; --i) {
      added.push_back({std::to_string(pick(4)), Owner{static_cast<pid_t>(300 + pick(3)), 5}});
    }
    const std::string expected = plainEdit(before, blank, added);
    ASSERT_EQ(detail::editRecords(before, blank, added), expected) << "round " << round;
    if (before.size() > 4 * 4096 && expected.size() < before.size() / 2) ++compacted;
  }
  EXPECT_GT(compacted, rounds / 40) << "too few compactions to say anything of them";
}

TEST(CoordinationLayoutTest, ReleaseJunkKeepsTheFirstLinesAndCountsThemAll) {
  TempDir dir;
  const fs::path file = dir.path() / "coordination";
  std::string text = "0 " + std::to_string(::getpid()) + "\n";
  for (int i = 0; i < 50; ++i) text += "junk " + std::to_string(i) + "\n\n";
  std::ofstream(file) << text;
  const ReleasedJunk removed = releaseJunk(file, 3);
  EXPECT_EQ(removed.count, 50u);
  ASSERT_EQ(removed.lines.size(), 3u);
  EXPECT_EQ(removed.lines[2].lineNumber, 6u);
  EXPECT_EQ(removed.lines[2].text, "junk 2");
  EXPECT_EQ(readFile(file), "0 " + std::to_string(::getpid()) + "\n");
  EXPECT_EQ(releaseJunk(file, 3).count, 0u);
}

TEST_F(CoordinationFileTest, KillNineAtRandomMomentsLeavesAConsistentFile) {
  fs::create_directories(file().parent_path());
  std::mt19937 random(12345);
  for (int round = 0; round < 60; ++round) {
    std::vector<pid_t> children;
    for (int i = 0; i < 6; ++i) {
      const pid_t pid = ::fork();
      if (pid == 0) {
        // Allocate over and over: a kill lands inside an allocation most of the time.
        for (;;) {
          try {
            allocate(file(), {gpuRange(8), 1 + static_cast<std::size_t>(::getpid() % 3),
                              Owner::of(::getpid())});
            release(file(), [](const Record& r) { return r.owner.pid == ::getpid(); });
          } catch (...) {
            ::_exit(4);
          }
        }
      }
      children.push_back(pid);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(random() % 20000));
    for (pid_t child : children) {
      ::kill(child, SIGKILL);
    }
    for (pid_t child : children) {
      int status = 0;
      ::waitpid(child, &status, 0);
      ASSERT_TRUE(WIFSIGNALED(status)) << "a child failed instead of being killed";
    }
    const ParsedRecords onDisk = parseRecords(readFile(file()));
    ASSERT_TRUE(onDisk.junk.empty()) << "torn file: " << readFile(file());
  }
  // Every owner is dead: the whole host is free again.
  const Allocation all = allocate(file(), {gpuRange(8), 8, Owner::of(::getpid())});
  EXPECT_TRUE(all.satisfied);
}

}  // namespace
}  // namespace flink::coordination
