// Files beside the coordination file are someone else's input until checked: the trust rules
// themselves, then each sibling planted or damaged as another user would, and the journal that is
// checked before it is applied.
#include "host/store/Siblings.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "TestSupport.h"
#include "host/coordination/Coordination.h"
#include "host/coordination/Leases.h"
#include "host/health/HealthRecords.h"
#include "host/store/Journal.h"
#include "host/store/LockedFile.h"
#include "host/store/ReplacedCopies.h"

namespace flink::store::siblings_test {
namespace {

// What the coordination layer builds on this store.
using coordination::allocate;
using coordination::Allocation;
using coordination::AllocationRequest;
using coordination::leaseFolderOf;
using coordination::Owner;
using coordination::parseRecords;
using coordination::readStatus;
using coordination::releaseJunk;
using coordination::Status;

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::readFile;
using testing::TempDir;

constexpr uid_t kNobody = 65534;
constexpr gid_t kNogroup = 65534;

struct stat fileOf(uid_t owner, gid_t group, mode_t mode, nlink_t links = 1) {
  struct stat info {};
  info.st_uid = owner;
  info.st_gid = group;
  info.st_mode = S_IFREG | mode;
  info.st_nlink = links;
  return info;
}

struct stat folderOf(uid_t owner, gid_t group, mode_t mode) {
  struct stat info = fileOf(owner, group, mode, 2);
  info.st_mode = S_IFDIR | mode;
  return info;
}

void writeBytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// --- the rules ---------------------------------------------------------------------------------

TEST(SiblingTrustTest, WhoMayWriteTheCoordinationFileMayMakeWhatIsBesideIt) {
  // A file of root's, group-writable by group 4242, readable by everyone.
  const SiblingTrust trust = SiblingTrust::of(fileOf(0, 4242, 0664));
  EXPECT_TRUE(trust.mayWrite(0));
  EXPECT_FALSE(trust.mayWrite(kNobody));  // not of group 4242
  EXPECT_EQ(trust.distrust(fileOf(0, 4242, 0664), SiblingKind::kFile), std::nullopt);
  EXPECT_EQ(trust.distrust(fileOf(::geteuid(), 4242, 0660), SiblingKind::kFile), std::nullopt);
  // Made by a user who may not write the coordination file.
  if (::geteuid() != kNobody) {
    EXPECT_THAT(trust.distrust(fileOf(kNobody, kNogroup, 0644), SiblingKind::kFile).value_or(""),
                HasSubstr("its owner nobody may not write the coordination file"));
    // Of the coordination file's group, which may write it: only a member (whatever groups the
    // name service lists for it) or a setgid folder of that group gives a file that group.
    EXPECT_EQ(trust.distrust(fileOf(kNobody, 4242, 0644), SiblingKind::kFile), std::nullopt);
  }
  // Writable by whom the coordination file keeps out.
  EXPECT_THAT(trust.distrust(fileOf(0, 4242, 0666), SiblingKind::kFile).value_or(""),
              HasSubstr("anyone may write it, but not the coordination file"));
  EXPECT_THAT(trust.distrust(fileOf(0, kNogroup, 0664), SiblingKind::kFile).value_or(""),
              HasSubstr("may write it, but may not write the coordination file"));
  // Not a plain file of its own.
  EXPECT_THAT(trust.distrust(fileOf(0, 4242, 0644, 2), SiblingKind::kFile).value_or(""),
              HasSubstr("2 hard links"));
  EXPECT_THAT(trust.distrust(folderOf(0, 4242, 0775), SiblingKind::kFile).value_or(""),
              HasSubstr("not a regular file"));
}

TEST(SiblingTrustTest, AWorldWritableCoordinationFileTrustsAnyoneAndAFolderMustBeSticky) {
  const SiblingTrust shared = SiblingTrust::of(fileOf(0, 0, 0666));
  EXPECT_TRUE(shared.mayWrite(kNobody));
  EXPECT_EQ(shared.distrust(fileOf(kNobody, kNogroup, 0666), SiblingKind::kFile), std::nullopt);
  EXPECT_THAT(shared.distrust(folderOf(0, 0, 0777), SiblingKind::kFolder).value_or(""),
              HasSubstr("lacks the sticky bit"));
  EXPECT_EQ(shared.distrust(folderOf(0, 0, 01777), SiblingKind::kFolder), std::nullopt);
  EXPECT_THAT(shared.distrust(fileOf(0, 0, 0644), SiblingKind::kFolder).value_or(""),
              HasSubstr("not a folder"));
}

// --- siblings planted in the coordination file's folder ----------------------------------------

class PlantedSiblingsTest : public ::testing::Test {
 protected:
  fs::path file() const { return dir_ / "coordination"; }
  AllocationRequest request(std::size_t amount, bool lease = false) const {
    AllocationRequest wanted{{"0", "1"}, amount, Owner::of(::getpid())};
    wanted.lease = lease;
    return wanted;
  }
  /// The coordination file, root's (this test's) and not writable by others.
  void makeFile(const std::string& text = "") const {
    writeBytes(file(), text);
    fs::permissions(file(), fs::perms(0644));
  }
  bool root() const { return ::geteuid() == 0; }
  TempDir dir_{"flink-gpu-siblings-test"};
};

TEST_F(PlantedSiblingsTest, ACoordinationFileAnotherUserMadeIsNotWrittenByPrivilege) {
  if (!root()) GTEST_SKIP() << "another user's file needs root";
  // Made by another user before any worker, where anyone may create files (/var/tmp): root could
  // write it only by privilege, and its maker could change every record under root's workers.
  makeFile();
  ASSERT_EQ(::chown(file().c_str(), kNobody, kNogroup), 0);
  try {
    allocate(file(), request(1));
    ADD_FAILURE() << "another user's coordination file was written";
  } catch (const store::StoreError& e) {
    EXPECT_EQ(e.cause(), store::StoreError::Cause::kRefused) << e.what();
    EXPECT_THAT(e.what(), HasSubstr("refusing to use it: it is another user's (owner nobody"));
    EXPECT_THAT(e.what(), HasSubstr("chmod g+rw"));
  }
  EXPECT_EQ(readFile(file()), "");
  // Shared by its mode with a group of this user's, it is the set-up of docs/coordination-file.md:
  // used.
  ASSERT_EQ(::chown(file().c_str(), kNobody, ::getegid()), 0);
  fs::permissions(file(), fs::perms(0664));
  EXPECT_TRUE(allocate(file(), request(1)).satisfied);
}

TEST_F(PlantedSiblingsTest, AJournalOfAUserWhoMayNotWriteTheFileIsNeverApplied) {
  if (!root()) GTEST_SKIP() << "another user's journal needs root";
  makeFile("0 999999\n");
  // Sealed and fit for this very file: applied, it would give GPU 0 to process 4242.
  struct stat info {};
  ASSERT_EQ(::stat(file().c_str(), &info), 0);
  const std::string before = "0 4242\n";
  const std::string after = readFile(file());
  writeBytes(journalPathOf(file()),
             encodeJournal(Journal{static_cast<std::uint64_t>(info.st_dev),
                                   static_cast<std::uint64_t>(info.st_ino), before.size(),
                                   after.size(), planWrites(before, after, 4096)}));
  ASSERT_EQ(::chown(journalPathOf(file()).c_str(), kNobody, kNogroup), 0);
  // Never applied: moved aside (root may), kept for the operator, and said; the allocation goes on
  // from the file as it is. (A user who may not move it aside is refused: promise_test.sh.)
  const Allocation a = allocate(file(), request(1));
  EXPECT_TRUE(a.satisfied);
  ASSERT_EQ(a.warnings.size(), 1u);
  EXPECT_THAT(a.warnings[0], HasSubstr("coordination file " + file().string() + ": its journal " +
                                       journalPathOf(file()).string() + " failed the trust rules"));
  EXPECT_THAT(a.warnings[0], HasSubstr("owner nobody, group nogroup, mode 0644"));
  EXPECT_THAT(readFile(file()), ::testing::StartsWith("0 999999\n"));
  // No record of process 4242 (the text alone is no test: this process's new record may hold
  // those digits in its pid or start time).
  for (const coordination::Record& record : parseRecords(readFile(file())).records) {
    EXPECT_NE(record.owner.pid, 4242) << record.gpu;
  }
  ASSERT_EQ(testing::movedAside(journalPathOf(file())).size(), 1u);
  EXPECT_EQ(readStatus(file()).records.size(), 2u);
}

TEST_F(PlantedSiblingsTest, AnInodeMemoryOfAUserWhoMayNotWriteTheFileIsMovedAsideAndMadeAnew) {
  if (!root()) GTEST_SKIP() << "another user's file needs root";
  makeFile();
  // Believed, a planted memory would make writers wait for the wrong copy of the file replaced by
  // Flink's `sed -i`, or for none; left in place, no writer could ever remember the file again.
  writeBytes(inodeMemoryPathOf(file()), formatInodeMemory(FileId{1, 2}));
  ASSERT_EQ(::chown(inodeMemoryPathOf(file()).c_str(), kNobody, kNogroup), 0);
  const Allocation a = allocate(file(), request(1));
  EXPECT_TRUE(a.satisfied);
  ASSERT_EQ(a.warnings.size(), 1u);
  EXPECT_THAT(a.warnings[0],
              HasSubstr("coordination file " + file().string() + ": its inode memory " +
                        inodeMemoryPathOf(file()).string() + " failed the trust rules"));
  ASSERT_EQ(testing::movedAside(inodeMemoryPathOf(file())).size(), 1u);
  struct stat memory {};
  struct stat info {};
  ASSERT_EQ(::stat(inodeMemoryPathOf(file()).c_str(), &memory), 0);
  ASSERT_EQ(::stat(file().c_str(), &info), 0);
  EXPECT_EQ(memory.st_uid, ::geteuid());
  EXPECT_EQ(
      parseInodeMemory(readFile(inodeMemoryPathOf(file()))),
      (FileId{static_cast<std::uint64_t>(info.st_dev), static_cast<std::uint64_t>(info.st_ino)}));
}

TEST_F(PlantedSiblingsTest, AnInodeMemoryThatIsASymlinkIsMovedAsideAndNothingIsWrittenThrough) {
  makeFile();
  const fs::path target = dir_ / "target";
  writeBytes(target, "kept\n");
  fs::create_symlink(target, inodeMemoryPathOf(file()));
  const Allocation a = allocate(file(), request(1));
  EXPECT_TRUE(a.satisfied);
  ASSERT_EQ(a.warnings.size(), 1u);
  EXPECT_THAT(a.warnings[0], HasSubstr("it is a symbolic link"));
  EXPECT_EQ(readFile(target), "kept\n");
  EXPECT_EQ(testing::movedAside(inodeMemoryPathOf(file())).size(), 1u);
}

TEST_F(PlantedSiblingsTest, AJournalThatIsASymlinkOrAHardLinkIsRefusedAndNothingIsWrittenThrough) {
  makeFile();
  const fs::path target = dir_ / "target";
  writeBytes(target, "untouched\n");
  fs::create_symlink(target, journalPathOf(file()));
  // This user owns the coordination file in a folder that is not sticky: it moves them aside,
  // and writes through neither.
  const Allocation first = allocate(file(), request(1));
  EXPECT_TRUE(first.satisfied);
  ASSERT_EQ(first.warnings.size(), 1u);
  EXPECT_THAT(first.warnings[0], HasSubstr("it is a symbolic link"));
  fs::remove(journalPathOf(file()));
  fs::create_hard_link(target, journalPathOf(file()));
  const Allocation second = allocate(file(), request(1));
  EXPECT_TRUE(second.satisfied);
  ASSERT_EQ(second.warnings.size(), 1u);
  EXPECT_THAT(second.warnings[0], HasSubstr("hard links"));
  EXPECT_EQ(readFile(target), "untouched\n");
  EXPECT_EQ(testing::movedAside(journalPathOf(file())).size(), 2u);
  EXPECT_EQ(parseRecords(readFile(file())).records.size(), 2u);
}

TEST_F(PlantedSiblingsTest, ALeaseFolderOfAnotherUserIsRefused) {
  if (!root()) GTEST_SKIP() << "another user's folder needs root";
  makeFile();
  fs::create_directory(leaseFolderOf(file()));
  ASSERT_EQ(::chown(leaseFolderOf(file()).c_str(), kNobody, kNogroup), 0);
  // Never used: moved aside (root may), kept, said; the leases are taken in a folder made anew.
  const Allocation a = allocate(file(), request(1, /*lease=*/true));
  EXPECT_TRUE(a.satisfied);
  ASSERT_EQ(a.warnings.size(), 1u);
  EXPECT_THAT(a.warnings[0], HasSubstr("lease folder " + leaseFolderOf(file()).string() +
                                       " failed the trust rules (its owner nobody"));
  struct stat folder {};
  ASSERT_EQ(::stat(leaseFolderOf(file()).c_str(), &folder), 0);
  EXPECT_EQ(folder.st_uid, ::geteuid());
  EXPECT_EQ(testing::movedAside(leaseFolderOf(file())).size(), 1u);
}

TEST_F(PlantedSiblingsTest, AFreeLeaseFileOfAnotherUserCannotFreeAGpu) {
  if (!root()) GTEST_SKIP() << "another user's lease file needs root";
  // A record its pid cannot judge (another pid namespace), held by a lease that someone removed
  // and replaced with a free file of their own.
  makeFile("0 999999\t5\tpidns=1\tlease=index-0\n");
  fs::create_directory(leaseFolderOf(file()));
  fs::permissions(leaseFolderOf(file()), fs::perms(0755));
  writeBytes(leaseFolderOf(file()) / "index-0", "");
  ASSERT_EQ(::chown((leaseFolderOf(file()) / "index-0").c_str(), kNobody, kNogroup), 0);
  // Moved aside (root may): the lease file is then missing, which frees nothing (fail closed).
  const Allocation a = allocate(file(), request(2, /*lease=*/true));
  EXPECT_FALSE(a.satisfied);
  ASSERT_EQ(a.failClosed.size(), 1u);
  EXPECT_EQ(readFile(file()), "0 999999\t5\tpidns=1\tlease=index-0\n");
  EXPECT_EQ(testing::movedAside(leaseFolderOf(file()).string() + ".index-0").size(), 1u);
}

TEST_F(PlantedSiblingsTest, SiblingsAreMadeWithTheFilesModeAndGroupWhateverTheUmask) {
  makeFile();
  fs::permissions(file(), fs::perms(0660));
  const mode_t previous = ::umask(077);
  Allocation allocation;
  try {
    allocation = allocate(file(), request(1, /*lease=*/true));
  } catch (...) {
    ::umask(previous);
    throw;
  }
  ::umask(previous);
  ASSERT_TRUE(allocation.satisfied);
  struct stat info {};
  ASSERT_EQ(::stat(journalPathOf(file()).c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0660u);
  ASSERT_EQ(::stat(leaseFolderOf(file()).c_str(), &info), 0);
  // Searchable where readable, sticky and setgid where its group may write it.
  EXPECT_EQ(info.st_mode & 07777, 03770u);
  ASSERT_EQ(::stat((leaseFolderOf(file()) / "index-0").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0660u);
}

// --- the journal is checked before it is applied ----------------------------------------------

class UnfitJournalTest : public PlantedSiblingsTest {
 protected:
  /// A sealed journal for the coordination file whose one write is `write`, with `sizeBefore`.
  void plant(const JournalWrite& write, std::uint64_t sizeBefore) const {
    struct stat info {};
    ASSERT_EQ(::stat(file().c_str(), &info), 0);
    writeBytes(journalPathOf(file()),
               encodeJournal(Journal{static_cast<std::uint64_t>(info.st_dev),
                                     static_cast<std::uint64_t>(info.st_ino),
                                     sizeBefore,
                                     static_cast<std::uint64_t>(info.st_size),
                                     {write}}));
  }
};

TEST_F(UnfitJournalTest, AWritePastTheEndIsNotWholeAndIsDiscardedNotApplied) {
  makeFile("0 999999\n");
  // Its old bytes lie past the end of the file as it was: no writer of ours made it.
  plant(JournalWrite{500, std::string(20, 'x'), std::string(20, 'y')}, 9);
  // Every reader still works: status, and the operators' repairs.
  const Status status = readStatus(file());
  EXPECT_EQ(status.records.size(), 1u);
  ASSERT_EQ(status.notes.size(), 1u);
  EXPECT_THAT(status.notes[0], HasSubstr("discarded a journal that is not whole: write 1"));
  EXPECT_TRUE(releaseJunk(file()).empty());
  // And a writer discards it.
  const Allocation allocation = allocate(file(), request(1));
  EXPECT_TRUE(allocation.satisfied);
  EXPECT_EQ(readFile(file()).substr(0, 9), "0 999999\n");
  EXPECT_EQ(fs::file_size(journalPathOf(file())), 0u);
}

TEST_F(UnfitJournalTest, ASizeBeforePastTheLimitIsNotWholeAndGrowsNothing) {
  makeFile("0 999999\n");
  // "The file was 20 MB before": rolled back, it would grow the file and this process to it.
  plant(JournalWrite{0, "0 999999\n", "0 999999\n"}, 20u << 20);
  const Allocation allocation = allocate(file(), request(1));
  EXPECT_TRUE(allocation.satisfied);
  ASSERT_FALSE(allocation.notes.empty());
  EXPECT_THAT(allocation.notes[0], HasSubstr("past the file's limit"));
  EXPECT_LT(fs::file_size(file()), 4096u);
}

TEST(JournalCheckTest, WhatPlanWritesMakesIsAlwaysFit) {
  const std::string before = std::string(5000, 'a') + "\n";
  const std::string after = std::string(3000, 'b') + "\n" + std::string(9000, 'c') + "\n";
  for (const auto& [from, to] : {std::pair{before, after}, std::pair{after, before}}) {
    const Journal journal{1, 2, from.size(), to.size(), planWrites(from, to, 4096)};
    EXPECT_EQ(whyNotApplicable(journal, kMaxCoordinationFileBytes), std::nullopt);
  }
  const Journal hostile{1, 2, 10, 10, {JournalWrite{~std::uint64_t{0} - 2, "ab", "ab"}}};
  EXPECT_NE(whyNotApplicable(hostile, kMaxCoordinationFileBytes), std::nullopt);
}

// --- the health records, read by allocators ----------------------------------------------------

TEST_F(PlantedSiblingsTest, HealthRecordsAreReadWithoutWaitingOnALockAnyReaderMayHold) {
  makeFile();
  health::updateHealth(file(), [](std::vector<health::HealthRecord>& records) {
    health::HealthRecord drained;
    drained.gpu = "1";
    drained.since = 1;
    records.push_back(drained);
  });
  // Anyone who may read the file may flock it, for as long as they like.
  const process::FileDescriptor reader(
      ::open(health::healthPathOf(file()).c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(reader.valid());
  ASSERT_EQ(::flock(reader.get(), LOCK_EX), 0);
  const health::HealthFile read = health::readHealth(file());
  ASSERT_EQ(read.parsed.records.size(), 1u);
  EXPECT_EQ(read.parsed.records[0].gpu, "1");
}

TEST_F(PlantedSiblingsTest, OnlyWhoMayWriteTheHealthRecordsCanTakeTheirWritersLock) {
  // Readers take no lock, and the writers' lock is readable only where writable: no reader can
  // stall watch's verdicts by holding a lock; everyone may still read the records.
  for (const auto& [fileMode, lockMode] :
       {std::pair{0644u, 0600u}, std::pair{0664u, 0660u}, std::pair{0666u, 0666u}}) {
    std::error_code ignored;
    for (const char* suffix : {".health", ".health.journal", ".health.lock"}) {
      fs::remove(file().string() + suffix, ignored);
    }
    makeFile();
    fs::permissions(file(), fs::perms(fileMode));
    health::updateHealth(file(), [](std::vector<health::HealthRecord>& records) {
      health::HealthRecord drained;
      drained.gpu = "1";
      drained.since = 1;
      records.push_back(drained);
    });
    struct stat info {};
    ASSERT_EQ(::stat((file().string() + ".health.lock").c_str(), &info), 0);
    EXPECT_EQ(info.st_mode & 07777, lockMode) << std::oct << fileMode;
    ASSERT_EQ(::stat(health::healthPathOf(file()).c_str(), &info), 0);
    EXPECT_EQ(info.st_mode & 07777, fileMode) << std::oct << fileMode;
  }
  // A reader holding the records' own lock stalls no writer.
  const process::FileDescriptor reader(
      ::open(health::healthPathOf(file()).c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_EQ(::flock(reader.get(), LOCK_EX), 0);
  health::updateHealth(file(), [](std::vector<health::HealthRecord>& records) { records.clear(); });
  EXPECT_TRUE(health::readHealth(file()).parsed.records.empty());
}

TEST_F(PlantedSiblingsTest, HealthRecordsThatFailTheRulesAreMovedAsideNamingThem) {
  makeFile();
  const fs::path target = dir_ / "target";
  writeBytes(target, "");
  fs::create_hard_link(target, health::healthPathOf(file()));
  // Moved aside by this user (the coordination file's owner, in a folder that is not sticky),
  // kept, and said; never read.
  const health::HealthFile read = health::readHealth(file());
  EXPECT_TRUE(read.parsed.records.empty());
  ASSERT_EQ(read.warnings.size(), 1u);
  EXPECT_THAT(read.warnings[0],
              HasSubstr("health records " + health::healthPathOf(file()).string() +
                        " failed the trust rules (it has 2 hard links"));
  EXPECT_EQ(testing::movedAside(health::healthPathOf(file())).size(), 1u);
}

}  // namespace
}  // namespace flink::store::siblings_test
