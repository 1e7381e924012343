// A randomized, deterministic simulation of many allocators of one host's GPUs, after
// FoundationDB's simulation testing: one seed gives one run, every choice comes from one seeded
// engine, any process may be killed between any two steps, and after every step the simulator's
// ground truth (which processes run, which GPUs each was handed) is checked:
//   (a) no GPU is used by two running users (a whole GPU by one; a shared GPU by at most its K
//   share
//       holders, each of its own share, and never also whole);
//   (b) no running user's record is lost (each is in the file at the path), except where Flink's
//       own script took it back by its own rule (it judges by pid alone);
//   (c) no drained or lost GPU is handed out.
// A failure names the seed and carries every step, so that the seed replays it.
//
// The allocators: `flink-gpu exec` (whole or shares, leased; its command as its child, which may
// close its descriptors, run in a pid namespace of its own, leave a daemon behind), the discovery
// program (for an owner that lives on, without leases), the in-process driver (a long-lived worker
// that leases what it takes, may fork, and gives back when it ends), and Flink's own script, step
// by step as tests/fixtures/flink-script/flink-coordination-pattern.sh does it (fd 200, flock(1),
// grep by path, `ps -p`, `sed -i` writing a new inode, appends without the new inode's lock).
// Readers in other pid namespaces, without /proc of their own, in time namespaces with fractional
// offsets; allocators knowing the GPUs by NVML, by UUID only, or by index only.
//
// What is simulated is the kernel alone (tests/host/liveness/SimulatedHost.h: processes, pid and
// time namespaces, /proc; SimulatedFiles.h: names, inodes, open file descriptions, flocks). Every
// rule is the product's own function: the allocation plans (planAllocation, planShareAllocation)
// with the liveness rule, the file's text (parseRecords, editRecords, dropEarlierAttempt), lease
// names (leaseNamesOf, unitsOfLeaseName through the plans), the unit index, and the writer's
// decisions against Flink's `sed -i` (host/store/ReplacedCopies.h). What the simulation writes
// itself, it mirrors from the code named beside each step (LockedFile's and changeFile's order of
// steps, the lease folder's system calls, exec's and the in-process driver's lifetimes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace flink::testing {

/// What kinds of world a run may draw.
enum class SimulationWorlds {
  kAll,           ///< each seed draws one of the three below
  kWithScripts,   ///< Flink's scripts beside ours, all in the host's pid namespace
  kInContainers,  ///< no Flink script; allocators in pid namespaces, some without /proc
  /// Flink's scripts beside ours on the host and leased allocators of ours in sandboxes (pid
  /// namespaces with their parent's /proc), which judge no pid they cannot see: the script
  /// misjudges their records, which their leases then hold.
  kSandboxesBesideScripts,
};

struct SimulationOptions {
  std::uint64_t seed = 1;
  std::size_t steps = 2000;
  SimulationWorlds worlds = SimulationWorlds::kAll;
  // Things a real host does that the rules do not survive (see SimulationTest.cpp, whose disabled
  // tests show each). Off, the host keeps to what the rules assume.
  /// Flink's script's lock as the kernel lists it: taken by flock(1), a child that exits once it
  /// has the lock, so that /proc/locks names a process that is gone. Off: as if the script's own
  /// shell took it, so that the holder's descriptors can be read.
  bool scriptLockTakenByFlockProgram = false;
  /// Inode numbers as ext4 gives them (the lowest free one, so that a new file may get the number
  /// of one that is gone). Off: as tmpfs and btrfs give them (always a new one).
  bool inodeNumbersComeBack = false;
  /// A script may be left aside by the scheduler between opening the file and calling flock, for
  /// long enough that the copy it opened is replaced and our writers have looked and gone. Off:
  /// it calls flock in the step that opens the file.
  bool scriptsStallBeforeFlock = false;
  /// Allocators that know the GPUs by index alone (a --gpus list) beside readers without /proc,
  /// who cannot tell their mount namespace and so take their index alias as of an unknown one
  /// (see SimulationTest.cpp). Off: where there are readers without /proc, every allocator knows
  /// the GPUs' UUIDs.
  bool indexOnlyBesideReadersWithoutProc = false;
};

struct SimulationResult {
  bool ok = true;
  /// Which invariant failed, and how, in words.
  std::string failure;
  /// The world the seed drew, one line.
  std::string world;
  /// Every step, in order: what it did.
  std::vector<std::string> steps;
  /// Counts of what happened (grants by kind, kills, plans made again, waits…), to show that a run
  /// reached the cases it is for.
  std::map<std::string, std::size_t> counts;
};

/// Runs one seed.
SimulationResult simulate(const SimulationOptions& options);

}  // namespace flink::testing
