// Leases: a GPU held by a flock comes back the moment its holder dies, whatever the record's pid
// says; a held lease keeps its GPU even when the pid cannot be judged.
#include "host/coordination/Leases.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <vector>

#include <gtest/gtest.h>

#include "TestSupport.h"
#include "host/coordination/Coordination.h"
#include "host/store/Siblings.h"
#include "process/FileDescriptor.h"

namespace flink::coordination {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::readFile;
using testing::TempDir;

constexpr const char* kUuid0 = "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6";
constexpr const char* kUuid1 = "GPU-1a2b3c4d-0000-4106-c12f-20bd9faed9f6";

AllocationRequest leased(std::size_t amount, const Owner& owner) {
  AllocationRequest request{{"0", "1"}, amount, owner};
  request.uuids = {{"0", kUuid0}, {"1", kUuid1}};
  request.lease = true;
  return request;
}

class LeasesTest : public ::testing::Test {
 protected:
  fs::path file() const { return dir_ / "coordination"; }
  TempDir dir_{"flink-gpu-leases-test"};
};

TEST_F(LeasesTest, ALeaseIsNamedByTheGpusUuidAndRecorded) {
  liveness::Reader reader;
  reader.mountNamespace = 4026531841;
  discovery::UnitIndex index;
  const auto whole = index.add({"0", kUuid0, "0000:3b:00.0"});
  const auto byUuid = index.add({"1", kUuid1});
  const auto byIndex = index.add({"3"});
  const auto mig = index.add({"MIG-5c3e", std::string("MIG-5c3e"), {}, whole, 1u, 0u});
  const auto oldMig = index.add({"MIG-GPU-5c3e/1/0"});
  discovery::Unit amd{"amd:00000000:05:00.3"};
  amd.vendorUnit = true;
  discovery::Unit tile{"intel:00000000:5A:00.0/1"};
  tile.vendorUnit = true;
  discovery::Unit card{"intel:00000000:5A:00.0"};
  card.vendorUnit = true;
  const auto amdUnit = index.add(amd);
  const auto tileUnit = index.add(tile);
  const auto cardUnit = index.add(card);
  const auto names = [&](discovery::UnitRef ref) { return leaseNamesOf(index, ref, reader).all(); };
  // By the PCI bus id every allocator knows, and under the UUID older versions take and the index
  // in this mount namespace's numbering.
  EXPECT_EQ(names(whole),
            (std::vector<std::string>{"pci-00000000-3B-00.0", kUuid0, "index-0.mnt-4026531841"}));
  EXPECT_EQ(names(byUuid), (std::vector<std::string>{kUuid1, "index-1.mnt-4026531841"}));
  EXPECT_EQ(names(byIndex), (std::vector<std::string>{"index-3", "index-3.mnt-4026531841"}));
  EXPECT_EQ(names(mig),
            (std::vector<std::string>{"MIG-5c3e", std::string("MIG-") + kUuid0 + ".1.0"}));
  // The legacy form is one path component too.
  EXPECT_EQ(names(oldMig), (std::vector<std::string>{"MIG-GPU-5c3e.1.0"}));
  // AMD and Intel units by bus id, as one file name each (':' and '/' are no file name's).
  EXPECT_EQ(names(amdUnit), (std::vector<std::string>{"amd-00000000-05-00.3"}));
  EXPECT_EQ(names(tileUnit), (std::vector<std::string>{"intel-00000000-5A-00.0_1"}));
  EXPECT_EQ(names(cardUnit), (std::vector<std::string>{"intel-00000000-5A-00.0"}));
  // Every name reads back as its unit; another mount namespace's index names none here.
  for (const auto ref : {whole, byUuid, byIndex, mig, oldMig, amdUnit, tileUnit, cardUnit}) {
    for (const std::string& name : names(ref)) {
      EXPECT_EQ(unitsOfLeaseName(index, name, reader), (std::vector<discovery::UnitRef>{ref}))
          << name;
    }
  }
  EXPECT_TRUE(unitsOfLeaseName(index, "index-0.mnt-1", reader).empty());
  EXPECT_EQ(unitsOfLeaseName(index, "index-0", reader), (std::vector<discovery::UnitRef>{whole}));
  EXPECT_EQ(unitsOfLeaseName(index, std::string(kUuid0).substr(0, 12), reader),
            (std::vector<discovery::UnitRef>{whole}));

  const Allocation a = allocate(file(), leased(1, Owner::of(::getpid())));
  ASSERT_TRUE(a.satisfied);
  // Under its UUID and the index of this mount namespace's numbering (no bus id is known here).
  ASSERT_EQ(a.leases.size(), 2u);
  EXPECT_EQ(a.leases[0].name(), kUuid0);
  EXPECT_TRUE(fs::is_regular_file(leaseFolderOf(file()) / kUuid0));
  const ParsedRecords records = parseRecords(readFile(file()));
  ASSERT_EQ(records.records.size(), 1u);
  EXPECT_EQ(records.records[0].lease, std::string(kUuid0));
  // New records carry this boot's id: a record of an earlier boot is gone, whatever its pid.
  EXPECT_EQ(records.records[0].owner.bootId, currentBootId());
  EXPECT_NE(readFile(file()).find("\tboot=" + currentBootId().value_or("?")), std::string::npos);
  EXPECT_EQ(leaseState(file(), kUuid0), LeaseState::kHeld);
}

// A taker without /proc cannot tell its mount namespace: it takes its index as of an unknown one,
// with the GPU's own name, so that two such takers of different GPUs that both number theirs 0 (two
// sandboxes of different /dev) take different files. An allocator that knows the GPUs by index
// alone (a --gpus list) cannot match a lease's bus id or UUID to any of its GPUs, so every index
// alias names its GPU of that index there, whatever the namespace (fail closed, as a record by
// index does); one that knows the bus ids or UUIDs reads an index alias only of its own numbering,
// and the lease's other names.
TEST_F(LeasesTest, AnIndexAliasNamesAGpuKnownByItsIndexAloneInAnyNumbering) {
  liveness::Reader withoutProc;  // no mount namespace
  discovery::UnitIndex nvml;
  const auto whole = nvml.add({"0", kUuid0, "0000:3b:00.0"});
  const auto byIndex = nvml.add({"3"});
  discovery::UnitIndex otherSandbox;
  const auto otherZero = otherSandbox.add({"0", kUuid1, "0000:19:00.0"});
  const std::string unknownZero = "index-0.mnt-unknown.pci-00000000-3B-00.0";
  EXPECT_EQ(leaseNamesOf(nvml, whole, withoutProc).all(),
            (std::vector<std::string>{"pci-00000000-3B-00.0", kUuid0, unknownZero}));
  EXPECT_EQ(leaseNamesOf(otherSandbox, otherZero, withoutProc).all(),
            (std::vector<std::string>{"pci-00000000-19-00.0", kUuid1,
                                      "index-0.mnt-unknown.pci-00000000-19-00.0"}));
  // Known by its index alone: the plain index names it in any numbering already.
  EXPECT_EQ(leaseNamesOf(nvml, byIndex, withoutProc).all(), (std::vector<std::string>{"index-3"}));

  liveness::Reader reader;
  reader.mountNamespace = 4026531841;
  discovery::UnitIndex indexOnly;
  const auto first = indexOnly.add({"0"});
  for (const liveness::Reader& asker : {reader, withoutProc}) {
    for (const std::string& name :
         {unknownZero, "index-0.mnt-unknown." + std::string(kUuid0),
          std::string("index-0.mnt-4026531841"), std::string("index-0.mnt-77")}) {
      EXPECT_EQ(unitsOfLeaseName(indexOnly, name, asker), (std::vector<discovery::UnitRef>{first}))
          << name;
    }
    // Not a namespace as leaseNamesOf writes one: a file moved aside, or any other name.
    for (const char* name :
         {"index-0.mnt-unknown", "index-0.mnt-bogus", "index-0.mnt-999.untrusted-1-2",
          "index-0.mnt-unknown.pci-00000000-3B-00.0.untrusted-1-2", "index-0.mnt-unknown.index-0",
          "index-1.mnt-unknown.pci-00000000-3B-00.0"}) {
      EXPECT_TRUE(unitsOfLeaseName(indexOnly, name, asker).empty()) << name;
    }
  }
  // Known by bus id and UUID: only its own numbering's index, besides those names.
  EXPECT_TRUE(unitsOfLeaseName(nvml, unknownZero, reader).empty());
  EXPECT_TRUE(unitsOfLeaseName(nvml, "index-0.mnt-77", reader).empty());
  EXPECT_TRUE(unitsOfLeaseName(nvml, "index-0.mnt-4026531841", withoutProc).empty());
  EXPECT_EQ(unitsOfLeaseName(nvml, "index-0.mnt-4026531841", reader),
            (std::vector<discovery::UnitRef>{whole}));
  // Known by its index alone there too.
  EXPECT_EQ(unitsOfLeaseName(nvml, "index-3.mnt-77", reader),
            (std::vector<discovery::UnitRef>{byIndex}));
  // A bus id lease name is read whole, or not at all.
  EXPECT_EQ(unitsOfLeaseName(nvml, "pci-00000000-3B-00.0", reader),
            (std::vector<discovery::UnitRef>{whole}));
  EXPECT_TRUE(unitsOfLeaseName(nvml, "pci-00000000-3B-00.0.untrusted-1-2", reader).empty());
}
TEST_F(LeasesTest, ALeaseNeverTakesAwayTheLivenessOfARunningOwner) {
  // The owner named by the record keeps running but let its lease go (a command that closed the
  // descriptors it inherited, as sudo does): its GPUs stay held.
  const pid_t sleeper = ::fork();
  if (sleeper == 0) {
    ::pause();
    ::_exit(0);
  }
  {
    const Allocation a = allocate(file(), leased(2, Owner::of(sleeper)));
    ASSERT_TRUE(a.satisfied);
  }  // the leases end here; `sleeper` runs on
  EXPECT_FALSE(allocate(file(), leased(1, Owner::of(::getpid()))).satisfied);
  // Its lease files removed (systemd-tmpfiles, an operator's rm): still held. Kept open here
  // (unlocked) so that their inodes are not reused: a file made meanwhile by another process,
  // locked, would be taken for them in /proc/locks and the GPU shown held by a lease.
  std::vector<flink::process::FileDescriptor> keptInodes;
  for (const fs::directory_entry& entry : fs::directory_iterator(leaseFolderOf(file()))) {
    keptInodes.emplace_back(::open(entry.path().c_str(), O_RDONLY | O_CLOEXEC));
    ASSERT_TRUE(keptInodes.back().valid()) << entry.path();
  }
  ASSERT_EQ(keptInodes.size(), 2u);
  fs::remove_all(leaseFolderOf(file()));
  EXPECT_FALSE(allocate(file(), leased(1, Owner::of(::getpid()))).satisfied);
  EXPECT_TRUE(readStatus(file()).records.at(0).running);
  ::kill(sleeper, SIGKILL);
  ::waitpid(sleeper, nullptr, 0);
  // Gone by its pid, but its lease files were removed: what it started might hold them still.
  const Allocation b = allocate(file(), leased(2, Owner::of(::getpid())));
  EXPECT_FALSE(b.satisfied);
  EXPECT_EQ(b.failClosed.size(), 2u);
  // An operator frees them (no --force: the owner is not known to run).
  const Released released = releaseChecked(
      file(), [](const Record&) { return true; }, /*force=*/false);
  EXPECT_EQ(released.released.size(), 2u);
  EXPECT_TRUE(allocate(file(), leased(2, Owner::of(::getpid()))).satisfied);
}

TEST_F(LeasesTest, AGoneOwnersFreeLeaseGivesItsGpuBack) {
  const pid_t owner = ::fork();
  if (owner == 0) {
    ::pause();
    ::_exit(0);
  }
  { ASSERT_TRUE(allocate(file(), leased(2, Owner::of(owner))).satisfied); }
  ::kill(owner, SIGKILL);
  ::waitpid(owner, nullptr, 0);
  const Allocation b = allocate(file(), leased(2, Owner::of(::getpid())));
  EXPECT_TRUE(b.satisfied);
  EXPECT_EQ(b.reclaimed.size(), 2u);
}

TEST_F(LeasesTest, AFreeLeaseFreesARecordItsPidCannotJudge) {
  // Another pid namespace's record: its pid means nothing here, its free lease says it is gone.
  { const Lease taken = acquireLease(file(), kUuid0); }
  testing::writeScript(file(), "0 999999\t5\tpidns=1\tlease=" + std::string(kUuid0) + "\n",
                       fs::perms::owner_read | fs::perms::owner_write);
  const Allocation a = allocate(file(), leased(2, Owner::of(::getpid())));
  EXPECT_TRUE(a.satisfied);
  EXPECT_EQ(a.reclaimed.size(), 1u);
}

TEST_F(LeasesTest, AMissingLeaseFileKeepsARecordItsPidCannotJudgeHeldUntilReleased) {
  testing::writeScript(file(), "0 999999\t5\tpidns=1\tlease=" + std::string(kUuid0) + "\n",
                       fs::perms::owner_read | fs::perms::owner_write);
  const Allocation a = allocate(file(), leased(2, Owner::of(::getpid())));
  EXPECT_FALSE(a.satisfied);
  ASSERT_EQ(a.failClosed.size(), 1u);
  EXPECT_EQ(a.records[a.failClosed[0]].gpu, "0");
  const Status status = readStatus(file());
  ASSERT_EQ(status.records.size(), 1u);
  EXPECT_TRUE(status.records[0].running);
  EXPECT_EQ(status.records[0].liveness, Liveness::kLeaseMissing);
  EXPECT_NE(describeLiveness(status.records[0]).find("lease file is missing"), std::string::npos);
  // An operator's release frees it (it cannot be judged, so no --force is needed).
  const Released released = releaseChecked(
      file(), [](const Record& record) { return record.gpu == "0"; }, /*force=*/false);
  EXPECT_EQ(released.released.size(), 1u);
  EXPECT_TRUE(released.refused.empty());
  EXPECT_TRUE(allocate(file(), leased(2, Owner::of(::getpid()))).satisfied);
}

TEST_F(LeasesTest, KillNineOfALeasingWorkerFreesItsGpusAtOnceAndTheLeaseFileGoes) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t worker = ::fork();
  if (worker == 0) {
    const Allocation a = allocate(file(), leased(1, Owner::of(::getpid())));
    (void)::write(ready[1], a.satisfied ? "y" : "n", 1);
    ::pause();
    ::_exit(0);
  }
  char answer = 0;
  ASSERT_EQ(::read(ready[0], &answer, 1), 1);
  ASSERT_EQ(answer, 'y');
  ::kill(worker, SIGKILL);
  // Once it has died (not reaped yet), its leases are free: nothing to wait for.
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(worker), &info, WEXITED | WNOWAIT), 0);
  const Allocation a = allocate(file(), leased(2, Owner::of(::getpid())));
  EXPECT_TRUE(a.satisfied);
  ::waitpid(worker, nullptr, 0);
  ::close(ready[0]);
  ::close(ready[1]);
  // The free lease file was removed before it was taken again; ours is there.
  EXPECT_EQ(leaseState(file(), kUuid0), LeaseState::kHeld);
}

// Each mount namespace that took a GPU (a container, a sandbox without /proc) leaves an index
// alias of its own numbering a GPU, which names no GPU to an allocator that knows the GPUs' bus ids
// and UUIDs: an allocation removes the free ones it did not ask of, and leaves a held one, and
// a file moved aside.
TEST_F(LeasesTest, FreeIndexAliasesOfOtherNumberingsGoAtTheNextAllocation) {
  const std::vector<std::string> freeAliases = {
      "index-0.mnt-77", "index-1.mnt-unknown.pci-00000000-19-00.0", "index-0.mnt-77.share-1"};
  for (const std::string& name : freeAliases) (void)acquireLease(file(), name);  // let go at once
  const Lease held = acquireLease(file(), "index-1.mnt-78");
  const fs::path leases = fs::path(file().string() + ".leases");
  const std::string movedAside = "index-0.mnt-79.untrusted-1-2";
  fs::copy_file(leases / "index-1.mnt-78", leases / movedAside);
  for (const std::string& name : freeAliases) ASSERT_TRUE(fs::exists(leases / name)) << name;

  const Allocation a = allocate(file(), leased(1, Owner::of(::getpid())));
  ASSERT_TRUE(a.satisfied);
  for (const std::string& name : freeAliases) EXPECT_FALSE(fs::exists(leases / name)) << name;
  EXPECT_TRUE(fs::exists(leases / "index-1.mnt-78"));
  EXPECT_EQ(leaseState(file(), "index-1.mnt-78"), LeaseState::kHeld);
  EXPECT_TRUE(fs::exists(leases / movedAside));
  // What the allocation took stays, held while `a` lives.
  EXPECT_EQ(leaseState(file(), kUuid0), LeaseState::kHeld);

  EXPECT_TRUE(isIndexAliasLeaseName("index-3.mnt-4026531841.share-12"));
  for (const char* name : {"index-0", "index-0.share-1", "index-0.mnt-", "index-x.mnt-77",
                           "index-0.mnt-unknown.index-0", "pci-00000000-19-00.0", kUuid0}) {
    EXPECT_FALSE(isIndexAliasLeaseName(name)) << name;
  }
}

// The removal runs after the change was written: an alias that fails the trust rules (a symbolic
// link, a hard link) neither fails the allocation (whose record is in the file by then) nor is
// moved aside unheard; it stays for an allocation that asks of it.
TEST_F(LeasesTest, AnIndexAliasThatFailsTheTrustRulesIsLeftAsItIs) {
  (void)acquireLease(file(), "index-0.mnt-77");
  const fs::path leases = fs::path(file().string() + ".leases");
  const fs::path target = dir_ / "target";
  std::ofstream(target) << "kept\n";
  fs::create_symlink(target, leases / "index-6.mnt-90");
  fs::create_hard_link(leases / "index-0.mnt-77", leases / "index-1.mnt-77");

  const Allocation a = allocate(file(), leased(1, Owner::of(::getpid())));
  ASSERT_TRUE(a.satisfied);
  EXPECT_TRUE(fs::is_symlink(leases / "index-6.mnt-90"));
  EXPECT_EQ(readFile(target), "kept\n");
  EXPECT_TRUE(fs::exists(leases / "index-0.mnt-77"));
  EXPECT_TRUE(fs::exists(leases / "index-1.mnt-77"));
  for (const fs::directory_entry& entry : fs::directory_iterator(dir_.path())) {
    EXPECT_FALSE(store::wasMovedAside(entry.path().string())) << entry.path();
  }
}

TEST_F(LeasesTest, AHeldLeaseKeepsARecordOfAnotherPidNamespaceOrAGonePid) {
  // The record names a pid that is gone (or means nothing here), but its lease is held.
  const Lease held = acquireLease(file(), kUuid0);
  testing::writeScript(file(), "0 999999\t5\tpidns=1\tlease=" + std::string(kUuid0) + "\n",
                       fs::perms::owner_read | fs::perms::owner_write);
  const Allocation a = allocate(file(), leased(2, Owner::of(::getpid())));
  EXPECT_FALSE(a.satisfied);
  EXPECT_EQ(a.heldByOthers.size(), 1u);
  EXPECT_TRUE(readStatus(file()).records.at(0).running);
}

/// A record of GPU 0 whose owner cannot be judged (another pid namespace), leased by `name` on the
/// file (device, inode) of `taken`.
std::string recordLeasedOn(const std::string& name, const fs::path& taken) {
  struct stat info {};
  EXPECT_EQ(::stat(taken.c_str(), &info), 0) << taken;
  return "0 999999\t5\tpidns=1\tlease=" + name + "\tleasefile=" + std::to_string(info.st_dev) +
         ":" + std::to_string(info.st_ino) + "\n";
}

TEST_F(LeasesTest, ALeaseFileRemovedOrMovedAsideWhileHeldStillHoldsItsGpu) {
  const fs::path leases = fs::path(file().string() + ".leases");
  for (const bool movedAside : {false, true}) {
    SCOPED_TRACE(movedAside ? "moved aside" : "removed");
    const Lease held = acquireLease(file(), kUuid0);
    const fs::path lease = leases / kUuid0;
    testing::writeScript(file(), recordLeasedOn(kUuid0, lease),
                         fs::perms::owner_read | fs::perms::owner_write);
    if (movedAside) {
      fs::rename(lease, store::asidePathOf(fs::path(leases.string() + "." + kUuid0)));
    } else {
      fs::remove(lease);
    }
    EXPECT_EQ(readStatus(file()).records.at(0).liveness, Liveness::kLeaseHeld);
    EXPECT_FALSE(allocate(file(), leased(2, Owner::of(::getpid()))).satisfied);
  }
}

TEST_F(LeasesTest, ALockOnAFileThatTookTheGoneLeaseFilesInodeNumberIsAnothersLock) {
  // The lease file is gone with its holder, and the file system gave its inode number to a new
  // file elsewhere, which another process holds a flock on: that lock is not the lease's (it kept
  // a GPU held for ever, and made a test flaky when tests ran side by side).
  const TempDir elsewhere{"flink-gpu-leases-elsewhere"};
  const fs::path other = elsewhere.path() / "someone-elses.lock";
  std::ofstream(other).flush();
  const process::FileDescriptor otherFd(::open(other.c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(otherFd);
  ASSERT_EQ(::flock(otherFd.get(), LOCK_EX), 0);
  testing::writeScript(file(), recordLeasedOn(kUuid0, other),
                       fs::perms::owner_read | fs::perms::owner_write);
  const Status status = readStatus(file());
  EXPECT_EQ(status.records.at(0).liveness, Liveness::kLeaseMissing);
  // Missing fails closed still (the pid cannot be judged): held until an operator releases it.
  EXPECT_FALSE(allocate(file(), leased(2, Owner::of(::getpid()))).satisfied);
  ASSERT_EQ(releaseChecked(
                file(), [](const Record& record) { return record.gpu == "0"; }, /*force=*/false)
                .released.size(),
            1u);
  EXPECT_TRUE(allocate(file(), leased(2, Owner::of(::getpid()))).satisfied);
}

TEST_F(LeasesTest, AHeldLeaseWithoutItsRecordStillHoldsItsGpu) {
  // An operator's `release`, or Flink's `sed "/1 /d"` taking GPU 11's line with GPU 1's, can
  // remove a record while its lease is held: the GPU is still in use.
  const Lease held = acquireLease(file(), kUuid1);
  AllocationRequest plain{{"0", "1"}, 1, Owner::of(::getpid())};
  plain.uuids = {{"0", kUuid0}, {"1", kUuid1}};
  plain.amount = 2;
  const Allocation shortOfOne = allocate(file(), plain);
  EXPECT_FALSE(shortOfOne.satisfied);
  // Said, so that "N free" counts it as held.
  EXPECT_EQ(shortOfOne.heldByLeaseOnly, std::vector<std::string>{"1"});
  plain.amount = 1;
  EXPECT_EQ(allocate(file(), plain).granted, std::vector<std::string>{"0"});
}

TEST_F(LeasesTest, AHeldLeaseOfAMigInstanceWithoutItsRecordKeepsItsGpuFromGoingWhole) {
  // Flink's `sed "/1 /d"` took the instance's record along with another line; its lease is held.
  constexpr const char* kMig = "MIG-1c7d2b3e-4f5a-6b7c-8d9e-0f1a2b3c4d5e";
  const Lease held = acquireLease(file(), kMig);
  AllocationRequest whole = leased(2, Owner::of(::getpid()));
  whole.related = {{"1", {kMig}}};
  const Allocation a = allocate(file(), whole);
  EXPECT_FALSE(a.satisfied);
  EXPECT_EQ(a.blockedByLeaseOnly, (std::vector<std::pair<std::string, std::string>>{{"1", kMig}}));
  EXPECT_EQ(describeBlockedByLease("1", kMig),
            std::string("GPU 1 is busy: its MIG instance ") + kMig +
                " is held by a lease of another process, without a record");
  whole.amount = 1;
  EXPECT_EQ(allocate(file(), whole).granted, std::vector<std::string>{"0"});
  // status says the lease holds, though no record names it.
  EXPECT_EQ(readStatus(file()).leasesWithoutRecord, std::vector<std::string>{kMig});
}

TEST_F(LeasesTest, TheLeaseFolderAndFilesAreNeverFollowedThroughSymlinks) {
  // Planted symlinks are moved aside by whoever may (this user owns the coordination file, in a
  // folder that is not sticky), kept, and never followed; the lease is taken on a file of its own.
  const fs::path elsewhere = dir_ / "elsewhere";
  fs::create_directories(elsewhere);
  fs::create_directory_symlink(elsewhere, leaseFolderOf(file()));
  const Allocation a = allocate(file(), leased(1, Owner::of(::getpid())));
  EXPECT_TRUE(a.satisfied);
  EXPECT_TRUE(fs::is_empty(elsewhere));
  ASSERT_EQ(testing::movedAside(leaseFolderOf(file())).size(), 1u);
  EXPECT_TRUE(fs::is_symlink(testing::movedAside(leaseFolderOf(file())).front()));
  ASSERT_EQ(a.warnings.size(), 1u);
  EXPECT_NE(a.warnings[0].find("lease folder " + leaseFolderOf(file()).string() +
                               " failed the trust rules (it is a symbolic link"),
            std::string::npos)
      << a.warnings[0];
  EXPECT_TRUE(fs::is_directory(fs::symlink_status(leaseFolderOf(file()))));

  fs::create_symlink(elsewhere / "target", leaseFolderOf(file()) / kUuid1);
  const Lease lease = acquireLease(file(), kUuid1);
  EXPECT_FALSE(fs::exists(elsewhere / "target"));
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(leaseFolderOf(file()) / kUuid1)));
  // Beside the folder, where no allocator reads it as a lease.
  EXPECT_EQ(testing::movedAside(leaseFolderOf(file()).string() + "." + kUuid1).size(), 1u);
  try {
    acquireLease(file(), "../escape");
    ADD_FAILURE() << "a lease name that is a path was taken";
  } catch (const store::StoreError& e) {
    EXPECT_EQ(e.cause(), store::StoreError::Cause::kRefused) << e.what();
  }
}

}  // namespace
}  // namespace flink::coordination
