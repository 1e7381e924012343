// A storm of owners of every kind on one coordination file — `flink-gpu exec` (half of them with
// a command that closes its descriptors), the discovery program for an owner pid, Flink's own
// script, the in-process driver — started together, some SIGKILLed while they allocate and more
// while they hold, their lease files removed now and then, round after round. After each round a
// liveness-aware checker finds no GPU held by two running processes: neither among what the
// owners were handed, nor among the file's records whose owner runs (by pid and start time).
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "CliRun.h"
#include "TestSupport.h"
#include "host/coordination/Coordination.h"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using flink::testing::Background;
using flink::testing::kCli;
using flink::testing::readFile;
using flink::testing::readLines;
using flink::testing::TempDir;

constexpr const char* kGpus = "0,1,2,3,4,5";
constexpr int kGpuCount = 6;

enum class Kind { kExec, kProgram, kFlinkScript, kInProcess };

const char* nameOf(Kind kind) {
  switch (kind) {
    case Kind::kExec:
      return "exec";
    case Kind::kProgram:
      return "program";
    case Kind::kFlinkScript:
      return "Flink's script";
    case Kind::kInProcess:
      return "in-process driver";
  }
  return "?";
}

/// One owner: the process whose life holds the GPUs, and for the program and Flink's script the
/// request run for it.
struct Owner {
  Kind kind = Kind::kExec;
  std::unique_ptr<Background> holder;
  std::unique_ptr<Background> request;
  fs::path out;
  fs::path err;
  std::vector<std::string> gpus;
  bool settled = false;
  bool alive = true;
};

std::vector<std::string> splitGpus(const std::string& line) {
  std::vector<std::string> gpus;
  std::stringstream in(line);
  for (std::string gpu; std::getline(in, gpu, ',');) {
    if (!gpu.empty()) gpus.push_back(gpu);
  }
  return gpus;
}

class CoordinationStormTest : public ::testing::Test {
 protected:
  std::string file() const { return (dir_ / "coordination").string(); }

  std::unique_ptr<Owner> start(Kind kind, int serial) {
    auto owner = std::make_unique<Owner>();
    owner->kind = kind;
    owner->out = dir_ / ("owner-" + std::to_string(serial) + ".out");
    owner->err = dir_ / ("owner-" + std::to_string(serial) + ".err");
    const auto sleeper = [&] {
      return std::make_unique<Background>(
          std::vector<std::string>{flink::testing::sleepPath(), "120"}, dir_ / "sleeper.log");
    };
    switch (kind) {
      case Kind::kExec: {
        // Every other one closes the descriptors it inherited, its lease's among them, as sudo
        // and daemons do: it still runs, so its GPU is still its own.
        const std::string close =
            serial % 2 == 0 ? ""
                            : "for fd in /proc/$$/fd/*; do fd=${fd##*/}; [ \"$fd\" -gt 2 ] && "
                              "eval \"exec $fd>&-\"; done; ";
        owner->holder = std::make_unique<Background>(
            std::vector<std::string>{kCli, "exec", "--amount", "1", "--gpus", kGpus,
                                     "--coordination-file", file(), "--", "/bin/bash", "-c",
                                     close + "echo $CUDA_VISIBLE_DEVICES > '" +
                                         owner->out.string() + "'; exec sleep 120"},
            dir_ / ("owner-" + std::to_string(serial) + ".log"), owner->err);
        break;
      }
      case Kind::kProgram:
        owner->holder = sleeper();
        owner->request = std::make_unique<Background>(
            std::vector<std::string>{FLINK_GPU_DISCOVERY, "1", "--gpus", kGpus,
                                     "--enable-coordination-mode", "--coordination-file", file(),
                                     "--owner-pid", owner->holder->pidText()},
            owner->out, owner->err);
        break;
      case Kind::kFlinkScript: {
        owner->holder = sleeper();
        std::vector<std::string> args{"/bin/bash", FLINK_SCRIPT, file(), "1",
                                      owner->holder->pidText()};
        for (int gpu = 0; gpu < kGpuCount; ++gpu) args.push_back(std::to_string(gpu));
        owner->request = std::make_unique<Background>(args, owner->out, owner->err);
        break;
      }
      case Kind::kInProcess:
        owner->holder = std::make_unique<Background>(
            std::vector<std::string>{FLINK_GPU_IN_PROCESS_WORKER, DEFAULT_DISCOVERY_SCRIPT, "1",
                                     std::string("--gpus ") + kGpus +
                                         " --enable-coordination-mode --coordination-file " +
                                         file()},
            owner->out, owner->err);
        break;
    }
    return owner;
  }

  /// Waits until `owner`'s request has its answer (or has failed); reads what it was handed.
  void settle(Owner& owner) {
    if (owner.settled) return;
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    bool answered = false;
    while (std::chrono::steady_clock::now() < deadline) {
      if (owner.request) {
        // Its answer counts only with exit 0 (Flink's script prints its failure on stdout).
        if (const std::optional<int> code = owner.request->waitForExit(20ms)) {
          answered = *code == 0;
          break;
        }
      } else if (!readLines(owner.out).empty()) {
        answered = true;  // written only once the GPUs are had
        break;
      } else if (owner.holder->waitForExit(20ms)) {
        break;
      }
    }
    owner.settled = true;
    const std::vector<std::string> lines = readLines(owner.out);
    if (answered && !lines.empty()) owner.gpus = splitGpus(lines.front());
    // An owner that got nothing has nothing to hold: let it go.
    if (owner.gpus.empty()) kill(owner);
  }

  void kill(Owner& owner) {
    if (owner.request) owner.request->stop();
    owner.holder->stop();
    owner.alive = false;
  }

  /// No GPU is held by two running processes: among what the live owners were handed, and
  /// among the records whose owner runs (by pid, and start time where recorded).
  void check(int round) {
    std::map<std::string, std::vector<std::string>> handedTo;
    for (const auto& owner : owners_) {
      if (!owner->alive) continue;
      for (const std::string& gpu : owner->gpus) {
        handedTo[gpu].push_back(std::string(nameOf(owner->kind)) + " " + owner->holder->pidText());
      }
    }
    for (const auto& [gpu, holders] : handedTo) {
      std::string who;
      for (const std::string& holder : holders) who += holder + "; ";
      EXPECT_EQ(holders.size(), 1u) << "round " << round << ": GPU " << gpu
                                    << " was handed to two live owners: " << who << "file:\n"
                                    << readFile(file());
    }
    const flink::coordination::ParsedRecords parsed =
        flink::coordination::parseRecords(readFile(file()));
    std::map<std::string, std::set<pid_t>> runningOwners;
    for (const flink::coordination::Record& record : parsed.records) {
      if (!flink::testing::isRunning(record.owner.pid)) continue;
      const flink::coordination::Owner now = flink::coordination::Owner::of(record.owner.pid);
      if (record.owner.startTime && now.startTime != record.owner.startTime) continue;
      runningOwners[record.gpu].insert(record.owner.pid);
    }
    for (const auto& [gpu, pids] : runningOwners) {
      EXPECT_EQ(pids.size(), 1u) << "round " << round << ": GPU " << gpu
                                 << " is recorded for two running processes; file:\n"
                                 << readFile(file());
    }
  }

  TempDir dir_{"flink-gpu-storm-test"};
  std::vector<std::unique_ptr<Owner>> owners_;
};

TEST_F(CoordinationStormTest, NoGpuIsEverHeldByTwoRunningProcesses) {
  std::mt19937 random(20261201);  // fixed: a failure can be replayed
  int serial = 0;
  for (int round = 0; round < 8; ++round) {
    // A batch started together: one of each kind of ours, a second exec killed at once (while it
    // allocates), and Flink's script, one at a time (two of Flink's own race each other: its
    // `sed -i` lets a second script run beside the first, which is Flink's flaw, not ours).
    std::vector<Owner*> batch;
    for (const Kind kind :
         {Kind::kExec, Kind::kProgram, Kind::kInProcess, Kind::kExec, Kind::kFlinkScript}) {
      owners_.push_back(start(kind, serial++));
      batch.push_back(owners_.back().get());
    }
    if (round % 2 == 1) kill(*batch[3]);
    for (Owner* owner : batch) {
      if (owner->alive) settle(*owner);
    }
    check(round);
    // systemd-tmpfiles (or an operator's rm) ages the lease files out from under their holders.
    if (round % 3 == 2) {
      std::error_code ignored;
      fs::remove_all(fs::path(file() + ".leases"), ignored);
    }
    // SIGKILL about half of those alive, holding their GPUs.
    for (const auto& owner : owners_) {
      if (owner->alive && random() % 2 == 0) kill(*owner);
    }
    check(round);
  }
  // Something was handed out in every round: the storm exercised the rule.
  std::size_t handed = 0;
  for (const auto& owner : owners_) handed += owner->gpus.size();
  EXPECT_GE(handed, 16u);
  for (const auto& owner : owners_) kill(*owner);
}

}  // namespace
