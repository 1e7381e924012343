// The randomized simulation of many allocators on one host (Simulation.h): seeds run one after
// another, each checked after every step; a failing seed prints its world and every step, and
// replays alone with FLINK_GPU_SIMULATION_SEED=<seed> FLINK_GPU_SIMULATION_SEEDS=1.
//
// The default run (ctest label unit) is a few seconds; FLINK_GPU_SIMULATION_SEEDS and
// FLINK_GPU_SIMULATION_STEPS make it longer (the ctest entry labelled `simulation` does);
// FLINK_GPU_SIMULATION_PRINT=1 prints every run's steps, failed or not. Under a sanitizer each
// case runs a quarter of its seeds (repetitionsToRun, TestSupport.h).
#include "Simulation.h"

#include <cstdlib>
#include <iostream>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "TestSupport.h"

namespace flink::testing {
namespace {

std::uint64_t setting(const char* name, std::uint64_t fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  return std::strtoull(value, nullptr, 10);
}

/// Every step of a failed run, for a person to read: the seed replays it.
std::string report(const SimulationOptions& options, const SimulationResult& result) {
  std::string text =
      "seed " + std::to_string(options.seed) + " (" + std::to_string(options.steps) +
      " steps) failed at " + result.failure + "\nworld: " + result.world +
      "\nreplay: FLINK_GPU_SIMULATION_SEED=" + std::to_string(options.seed) +
      " FLINK_GPU_SIMULATION_SEEDS=1 FLINK_GPU_SIMULATION_STEPS=" + std::to_string(options.steps) +
      "\n";
  for (const std::string& step : result.steps) text += step + "\n";
  return text;
}

/// Runs seeds of `world` (their number and length from the environment, else the defaults given)
/// until one fails; the counts of every run, summed.
std::map<std::string, std::size_t> runSeeds(SimulationOptions world, std::uint64_t seeds,
                                            std::size_t steps) {
  const std::uint64_t first = setting("FLINK_GPU_SIMULATION_SEED", 1);
  // Under a sanitizer a quarter of the seeds (the case of readers without /proc took 72-90 s
  // under ASan+UBSan with all of them, 5 s in the main tree); the label `simulation` runs more.
  seeds = repetitionsToRun(seeds);
  seeds = setting("FLINK_GPU_SIMULATION_SEEDS", seeds);
  world.steps = setting("FLINK_GPU_SIMULATION_STEPS", steps);
  std::map<std::string, std::size_t> counts;
  for (std::uint64_t seed = first; seed < first + seeds; ++seed) {
    world.seed = seed;
    const SimulationResult result = simulate(world);
    for (const auto& [what, count] : result.counts) counts[what] += count;
    if (setting("FLINK_GPU_SIMULATION_PRINT", 0) != 0) {
      for (const std::string& step : result.steps) std::cout << step << "\n";
    }
    if (!result.ok) {
      ADD_FAILURE() << report(world, result);
      break;
    }
  }
  return counts;
}

std::string describe(const std::map<std::string, std::size_t>& counts) {
  std::string text;
  for (const auto& [what, count] : counts)
    text += "  " + what + ": " + std::to_string(count) + "\n";
  return text;
}

TEST(SimulationTest, NoGpuIsUsedTwiceNoRecordIsLostNoDrainedGpuIsHandedOut) {
  const std::map<std::string, std::size_t> counts = runSeeds(SimulationOptions{}, 96, 3000);
  std::cout << describe(counts);
  // The runs reached what they are for.
  for (const char* what :
       {"exec grants", "exec share grants", "program grants", "program share grants",
        "in-process grants", "in-process share grants", "script grants", "script reclaims", "kills",
        "found replaced", "waits for replaced copies", "reopened"}) {
    EXPECT_GT(counts.count(what) ? counts.at(what) : 0, 0u) << what;
  }
}

/// Seeds of Flink's scripts beside ours in `world` (24 of 3000 steps by default): none fails.
void findsNothingWithScripts(SimulationOptions world, std::uint64_t seeds = 24,
                             std::size_t steps = 3000) {
  world.worlds = SimulationWorlds::kWithScripts;
  std::cout << describe(runSeeds(world, seeds, steps));
}

// Flink's script locks through `flock -x 200`: flock(1) takes the lock and exits, and /proc/locks
// names it, gone (or a process that has its pid now), while the script's shell holds the lock. A
// writer of ours that finds the file replaced judges such a lock by whoever has the locked inode
// open (liveness::openFileOfLock), not by the pid listed. Found by this simulation (D5).
TEST(SimulationTest, D5FindsAScriptWhoseLockFlockTookAndLeft) {
  SimulationOptions world;
  world.scriptLockTakenByFlockProgram = true;
  findsNothingWithScripts(world);
}

// `<file>.inode` remembers a device and an inode number, and ext4 gives a freed inode's number to
// the next file it makes: a script's `sed -i` copy may get the number our writers remembered for a
// file that is gone. A writer that looked for copies in use only when the file was not the one
// remembered took it for the file it last saw and wrote while the script that made it still
// wrote (a record lost); writers look on every change (docs/coordination-file.md).
TEST(SimulationTest, D5FindsAScriptWhoseCopyGotARememberedInodeNumber) {
  SimulationOptions world;
  world.inodeNumbersComeBack = true;
  findsNothingWithScripts(world);
}

// A script that opened the file before it was replaced, and calls flock only after our writer
// that found it replaced has looked, waited and written: a writer that looked only when the file
// was not the one remembered did not look for it, while the script's `sed -i` copy, read before
// that writer's change, was renamed over it after (a record lost); writers look on every change.
TEST(SimulationTest, D5FindsAScriptThatLockedACopyAfterOurLastLook) {
  SimulationOptions world;
  world.scriptsStallBeforeFlock = true;
  findsNothingWithScripts(world);
}

// ---- what the simulation found: a lease no index-only allocator saw ----------------------------
//
// A worker without /proc (bwrap without --proc) cannot tell its mount namespace, so it took its
// leases under the PCI bus id and the UUID only, without the `index-<n>.mnt-<m>` alias
// (leaseNamesOf). Once no record named such a lease (an operator's `release --force`, Flink's
// `sed -i` taking the record of a gone pid), an allocator that knows the GPUs by index alone (a
// --gpus list without NVML) read no unit in its name (unitsOfLeaseName), found the GPU free, and
// handed it out while the lease's holder (a daemon the command left) still used it (seed 86 of
// 5000 steps). It now takes `index-<n>.mnt-unknown.<primary>`, and an index alias of any
// numbering names the GPU of that index to an allocator that knows it by its index alone (exact
// where the numberings agree, as the simulated host's do).
TEST(SimulationTest, ALeaseOfAReaderWithoutProcIsSeenByIndexOnlyAllocators) {
  SimulationOptions world;
  world.worlds = SimulationWorlds::kInContainers;
  world.indexOnlyBesideReadersWithoutProc = true;
  std::cout << describe(runSeeds(world, 100, 5000));
}

}  // namespace
}  // namespace flink::testing
