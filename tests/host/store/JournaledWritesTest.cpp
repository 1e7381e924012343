// Writes of the coordination file that cannot tear: the journal's own format, the roll-back of a
// change cut short (by hand, and by SIGKILL the moment the file first changes, on the test
// folder's file system and on a tmpfs), a full disk, and the repair of a file filled with junk.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "TestSupport.h"
#include "host/coordination/Coordination.h"
#include "host/store/Journal.h"
#include "host/store/LockedFile.h"
#include "host/store/RecordFile.h"
#include "process/FileDescriptor.h"

namespace flink::store {
namespace {

// The coordination file's own changes, made through this store.
using coordination::allocate;
using coordination::Allocation;
using coordination::describeJunk;
using coordination::isRunning;
using coordination::Owner;
using coordination::ParsedRecords;
using coordination::parseRecords;
using coordination::readStatus;
using coordination::Record;
using coordination::RecordStatus;
using coordination::release;
using coordination::releaseJunk;
using coordination::Status;

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using process::FileDescriptor;
using testing::readFile;
using testing::TempDir;

constexpr std::size_t kPage = 4096;

void writeBytes(const fs::path& path, const std::string& bytes) {
  FileDescriptor fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  ASSERT_TRUE(fd.valid()) << path << ": " << std::strerror(errno);
  ASSERT_EQ(::write(fd.get(), bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
}

using testing::deadPid;
using testing::LiveProcess;

// --- the journal's format ----------------------------------------------------------------------

TEST(JournalTest, WritesStayWithinOnePageAndCoverEveryChange) {
  std::string before(3 * kPage + 100, 'a');
  std::string after = before;
  after[10] = 'b';                  // page 0
  after[kPage - 1] = 'b';           // page 0, its last byte
  after[kPage] = 'b';               // page 1, its first byte
  after += std::string(5000, 'c');  // grows over two more pages
  const std::vector<JournalWrite> writes = planWrites(before, after, kPage);
  std::string applied = before;
  for (const JournalWrite& write : writes) {
    EXPECT_EQ(write.offset / kPage, (write.offset + write.after.size() - 1) / kPage)
        << "a write crosses a page boundary at " << write.offset;
    applied.resize(std::max<std::size_t>(applied.size(), write.offset + write.after.size()));
    applied.replace(write.offset, write.after.size(), write.after);
  }
  EXPECT_EQ(applied, after);
  EXPECT_EQ(writes.front().offset, 10u);
  EXPECT_EQ(writes.front().after.size(), kPage - 10);
}

TEST(JournalTest, AShrinkingChangeBlanksTheTailBeforeTheTruncate) {
  const std::string before = "0 1\n1 2\n2 3\n";
  const std::vector<JournalWrite> writes = planWrites(before, "0 1\n", kPage);
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(writes[0].offset, 4u);
  EXPECT_EQ(writes[0].before, "1 2\n2 3");  // its last byte is '\n' already
  EXPECT_EQ(writes[0].after, "\n\n\n\n\n\n\n");
}

TEST(JournalTest, ASealedJournalRoundTripsAndATornOneIsNoJournal) {
  const Journal journal{12, 34, 5, 9, {{0, "ab", "xyz"}, {4096, "", "tail"}}};
  const std::string bytes = encodeJournal(journal);
  ASSERT_EQ(decodeJournal(bytes), journal);
  for (std::size_t cut = 0; cut < bytes.size(); ++cut) {
    EXPECT_FALSE(decodeJournal(bytes.substr(0, cut)).has_value()) << "cut at " << cut;
  }
  std::string flipped = bytes;
  flipped[30] ^= 1;
  EXPECT_FALSE(decodeJournal(flipped).has_value());
  EXPECT_FALSE(decodeJournal("").has_value());
  EXPECT_FALSE(decodeJournal("0 123\n").has_value());
}

TEST(JournalTest, AJournalEncodedFromTheTextsIsTheJournalOfItsWrites) {
  // LockedFile::replace writes the journal as it encodes it, from the two texts and the spans of
  // the writes: the same bytes as the journal of planWrites' writes, whether the change grows the
  // file, shrinks it or keeps its size.
  std::string before;
  for (int i = 0; i < 600; ++i) before += std::to_string(i) + " 100\t55\n";
  std::string blanked = before;
  blanked.replace(kPage - 4, 8, "        ");  // across a page boundary
  const std::string shrunk = before.substr(0, 9) + "\n";
  const std::string grown = before + std::string(2 * kPage, 'x') + "\n";
  for (const std::string& after : {blanked, shrunk, grown, before}) {
    const std::vector<JournalWrite> writes = planWrites(before, after, kPage);
    const std::vector<WriteSpan> spans = planWriteSpans(before, after, kPage);
    ASSERT_EQ(spans.size(), writes.size());
    for (std::size_t i = 0; i < spans.size(); ++i) {
      EXPECT_EQ(spans[i].offset, writes[i].offset);
      EXPECT_EQ(spans[i].beforeSize, writes[i].before.size());
      EXPECT_EQ(writtenBytes(after, spans[i]), writes[i].after);
    }
    std::string streamed;
    encodeJournalTo(12, 34, before, after, spans,
                    [&streamed](std::string_view bytes) { streamed += bytes; });
    EXPECT_EQ(streamed, encodeJournal(Journal{12, 34, before.size(), after.size(), writes}));
  }
}

TEST(JournalTest, EveryMomentOfAChangeRollsBackToTheOldBytes) {
  std::string before;
  for (int i = 0; i < 600; ++i) before += std::to_string(i) + " 100\t55\n";
  std::string after = before;
  after.replace(0, 8, "        ");  // a record blanked in place
  after += "600 200\t66\n";         // and one appended
  const std::vector<JournalWrite> writes = planWrites(before, after, kPage);
  const Journal journal{1, 2, before.size(), after.size(), writes};
  ASSERT_GE(writes.size(), 2u);
  // After each write (a kill can only come between them), and after the truncate.
  std::string file = before;
  EXPECT_TRUE(isPartOfChange(journal, file));
  EXPECT_EQ(rolledBack(journal, file), before);
  for (const JournalWrite& write : writes) {
    file.resize(std::max<std::size_t>(file.size(), write.offset + write.after.size()));
    file.replace(write.offset, write.after.size(), write.after);
    EXPECT_TRUE(isPartOfChange(journal, file));
    EXPECT_EQ(rolledBack(journal, file), before);
  }
  EXPECT_EQ(file, after);
  // Someone else appended after the writer died: not part of the change.
  EXPECT_FALSE(isPartOfChange(journal, file + "7 300\n"));
  std::string edited = file;
  edited[2] = 'x';
  EXPECT_FALSE(isPartOfChange(journal, edited));
}

// --- roll-back by the next opener --------------------------------------------------------------

class JournaledFileTest : public ::testing::Test {
 protected:
  fs::path file() const { return dir_ / "coordination"; }
  fs::path journal() const { return journalPathOf(file()); }

  /// What a writer killed after `applied` of its writes leaves: the sealed journal and the file
  /// with those writes made.
  void leaveChangeCutShort(const std::string& before, const std::string& after,
                           std::size_t applied) {
    writeBytes(file(), before);
    struct stat info {};
    ASSERT_EQ(::stat(file().c_str(), &info), 0);
    const std::vector<JournalWrite> writes = planWrites(before, after, kPage);
    ASSERT_GE(writes.size(), applied);
    writeBytes(journal(), encodeJournal(Journal{static_cast<std::uint64_t>(info.st_dev),
                                                static_cast<std::uint64_t>(info.st_ino),
                                                before.size(), after.size(), writes}));
    FileDescriptor fd(::open(file().c_str(), O_WRONLY | O_CLOEXEC));
    for (std::size_t i = 0; i < applied; ++i) {
      ASSERT_EQ(::pwrite(fd.get(), writes[i].after.data(), writes[i].after.size(),
                         static_cast<off_t>(writes[i].offset)),
                static_cast<ssize_t>(writes[i].after.size()));
    }
  }

  TempDir dir_{"flink-gpu-journal-test"};
};

// A worker that forks (a Python worker) while one of its threads holds the coordination file's
// lock: the child's copy of the descriptor must not keep the lock once the writer is done, or
// every allocator of the host waits until the child exits or execs.
TEST_F(JournaledFileTest, AChildForkedUnderTheLockDoesNotKeepIt) {
  writeBytes(file(), "");
  pid_t child = -1;
  {
    const LockedFile locked =
        LockedFile::open(file(), LockedFile::Access::kWrite, std::chrono::seconds(1));
    child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      ::pause();  // holds its copy of the descriptor until killed
      ::_exit(0);
    }
  }
  EXPECT_NO_THROW(
      (void)LockedFile::open(file(), LockedFile::Access::kWrite, std::chrono::milliseconds(500)));
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
}

// The same for the writers' lock of a file beside it (the health records').
TEST_F(JournaledFileTest, AChildForkedUnderTheWritersLockOfASiblingDoesNotKeepIt) {
  writeBytes(file(), "");
  const RecordFile records(file(), ".health", "health records", "health record", "");
  pid_t child = -1;
  records.update([&](const std::string& text) {
    child = ::fork();
    if (child == 0) {
      ::pause();  // holds its copy of the descriptors until killed
      ::_exit(0);
    }
    return text + "0 ok\n";
  });
  ASSERT_GT(child, 0);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_NO_THROW(records.update([](const std::string& text) { return text + "1 ok\n"; }));
  // Not the lock wait's kDefaultLockTimeout.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
}

TEST_F(JournaledFileTest, AnAppendAcrossAPageCutShortBeforeItsFirstWriteIsRolledBack) {
  // Just under a page of live records: the next record goes to the next page (the rest of this
  // one becomes a blank line), so a write of the change starts past the file's end. A writer
  // killed after sealing the journal, before any write, leaves the file as it was.
  LiveProcess holder;
  std::string before;
  for (int gpu = 100; before.size() < 4040; ++gpu) {
    before += std::to_string(gpu) + " " + std::to_string(holder.pid()) + "\n";
  }
  std::string after = before + std::string(4096 - before.size() - 1, ' ') + "\n0 77\t1\n";
  leaveChangeCutShort(before, after, 0);
  // Every reader and writer goes on: status, the operators' repair, an allocation.
  const std::size_t records =
      static_cast<std::size_t>(std::count(before.begin(), before.end(), '\n'));
  EXPECT_EQ(readStatus(file()).records.size(), records);
  EXPECT_TRUE(releaseJunk(file()).empty());
  LiveProcess requester;
  EXPECT_TRUE(allocate(file(), {{"0"}, 1, Owner::of(requester.pid())}).satisfied);
  EXPECT_EQ(fs::file_size(journal()), 0u);
}

TEST_F(JournaledFileTest, AChangeCutShortIsRolledBackByTheNextAllocation) {
  LiveProcess holder;
  std::string before = "0 " + std::to_string(deadPid()) + "\n";
  for (int gpu = 1; gpu < 800; ++gpu) {
    before += std::to_string(gpu) + " " + std::to_string(holder.pid()) + "\n";
  }
  // A writer blanked the dead record and was killed before its record at the end was written:
  // the file has a torn state that no reader should act on.
  std::string after = before;
  after.replace(0, before.find('\n'), before.find('\n'), ' ');
  after += "0 77\t1\n";
  leaveChangeCutShort(before, after, 1);
  ASSERT_NE(readFile(file()), before);

  // A reader sees the old records; the file itself is put back by the next writer.
  const Status status = readStatus(file());
  EXPECT_EQ(status.records.size(), 800u);
  ASSERT_EQ(status.notes.size(), 1u);
  EXPECT_NE(status.notes[0].find("rolled back"), std::string::npos) << status.notes[0];
  EXPECT_NE(readFile(file()), before);

  LiveProcess requester;
  const Allocation a = allocate(file(), {{"0"}, 1, Owner::of(requester.pid())});
  EXPECT_TRUE(a.satisfied);
  ASSERT_EQ(a.notes.size(), 1u);
  EXPECT_EQ(a.reclaimed.size(), 1u);
  EXPECT_EQ(fs::file_size(journal()), 0u);
  const ParsedRecords onDisk = parseRecords(readFile(file()));
  EXPECT_TRUE(onDisk.junk.empty());
  EXPECT_EQ(onDisk.records.size(), 800u);
  EXPECT_EQ(onDisk.records.back().owner.pid, requester.pid());
}

TEST_F(JournaledFileTest, AFileInAMissingFolderNamesTheFolder) {
  const fs::path missing = file().parent_path() / "nodir";
  try {
    LockedFile::open(missing / "coordination", LockedFile::Access::kWrite, 1s);
    ADD_FAILURE() << "opened";
  } catch (const store::StoreError& e) {
    EXPECT_EQ(std::string(e.what()), "coordination file " + (missing / "coordination").string() +
                                         ": cannot create it: the folder " + missing.string() +
                                         " does not exist");
  }
  EXPECT_FALSE(fs::exists(missing));
  // Read, a missing file is no records, whatever its folder.
  EXPECT_FALSE(LockedFile::open(missing / "coordination", LockedFile::Access::kRead, 1s).exists());
}

TEST_F(JournaledFileTest, AnUnsealedJournalMeansTheFileWasNotTouched) {
  const std::string before = "0 1234\n";
  writeBytes(file(), before);
  const std::string sealed = encodeJournal(Journal{1, 2, before.size(), 3, {{0, before, "xyz"}}});
  writeBytes(journal(), sealed.substr(0, sealed.size() / 2));
  const LockedFile opened = LockedFile::open(file(), LockedFile::Access::kWrite, 1s);
  EXPECT_EQ(opened.text(), before);
  ASSERT_EQ(opened.notes().size(), 1u);
  EXPECT_NE(opened.notes()[0].find("not whole"), std::string::npos) << opened.notes()[0];
  EXPECT_EQ(fs::file_size(journal()), 0u);
}

// A change writes through the journal its open() found only while the path still names it: one
// moved away meanwhile (by someone who does not hold the file's lock) is left as it is, and the
// change is journaled in a journal made anew at the path.
TEST_F(JournaledFileTest, AJournalMovedAwayAfterTheOpenIsLeftAsItIs) {
  writeBytes(file(), "0 1234\n");
  writeBytes(journal(), "");
  LockedFile opened = LockedFile::open(file(), LockedFile::Access::kWrite, 1s);
  const fs::path moved = dir_ / "moved-journal";
  fs::rename(journal(), moved);
  writeBytes(moved, "kept\n");
  opened.replace("0 1234\n1 5678\n");
  EXPECT_EQ(readFile(moved), "kept\n");
  EXPECT_EQ(readFile(file()), "0 1234\n1 5678\n");
  ASSERT_TRUE(fs::exists(journal()));
  EXPECT_EQ(fs::file_size(journal()), 0u);
}

TEST_F(JournaledFileTest, AFileChangedByAnotherProgramSinceIsLeftAsItIs) {
  const std::string before = "0 1\n1 2\n";
  const std::string after = "0 1\n1 2\n2 3\n";
  leaveChangeCutShort(before, after, 0);
  // Flink's script then appended its record: rolling back would lose it.
  std::string flinks = before + "5 4321\n";
  {
    FileDescriptor fd(::open(file().c_str(), O_WRONLY | O_APPEND | O_CLOEXEC));
    ASSERT_EQ(::write(fd.get(), "5 4321\n", 7), 7);
  }
  const LockedFile opened = LockedFile::open(file(), LockedFile::Access::kWrite, 1s);
  EXPECT_EQ(opened.text(), flinks);
  ASSERT_EQ(opened.notes().size(), 1u);
  EXPECT_NE(opened.notes()[0].find("kept the file as it is"), std::string::npos);

  // A journal of a file that `sed -i` has since replaced is not applied to the new one.
  leaveChangeCutShort(before, after, 1);
  const std::string replaced = (dir_ / "replaced").string();
  writeBytes(replaced, "7 99\n");
  fs::rename(replaced, file());
  const LockedFile again = LockedFile::open(file(), LockedFile::Access::kWrite, 1s);
  EXPECT_EQ(again.text(), "7 99\n");
}

TEST_F(JournaledFileTest, OurRecordsAreBlankedInPlaceAndAppendedWithoutCrossingAPage) {
  LiveProcess holder;
  const std::string line = "1 " + std::to_string(holder.pid()) + "\n";
  std::string text;
  while (text.size() + line.size() <= kPage - 10) text += line;  // ends a few bytes before a page
  writeBytes(file(), text);
  const Allocation a = allocate(file(), {{"0", "1"}, 1, Owner::of(holder.pid())});
  ASSERT_TRUE(a.satisfied);
  const std::string after = readFile(file());
  // The old bytes are where they were; the new record starts on the next page, after a blank
  // line that fills this one.
  EXPECT_TRUE(after.substr(0, text.size()) == text);
  EXPECT_EQ(after.find("0 " + std::to_string(holder.pid())), kPage);
  EXPECT_TRUE(parseRecords(after).junk.empty());
}

// --- SIGKILL the moment the file first changes -------------------------------------------------

/// Runs `change` in a child and SIGKILLs it as soon as inotify says the file was modified.
void killOnFirstChange(const fs::path& file, const std::function<void()>& change) {
  FileDescriptor watch(::inotify_init1(IN_CLOEXEC));
  ASSERT_TRUE(watch.valid());
  ASSERT_GE(::inotify_add_watch(watch.get(), file.c_str(), IN_MODIFY), 0);
  const pid_t writer = ::fork();
  if (writer == 0) {
    try {
      change();
    } catch (...) {
    }
    ::_exit(0);
  }
  pollfd ready{watch.get(), POLLIN, 0};
  const int events = ::poll(&ready, 1, 10000);
  ::kill(writer, SIGKILL);
  int status = 0;
  ::waitpid(writer, &status, 0);
  EXPECT_EQ(events, 1) << "the writer never changed the file";
}

/// The scenario of the report: one dead record first, then many live ones; a writer takes the
/// dead record's GPU back and is killed as soon as it first writes. Checks, through the next
/// opener, that no line is torn, no live record is lost, and no GPU has two running owners.
/// Returns how many of `trials` were rolled back.
int killWritersOfALargeFile(const fs::path& file, std::size_t minimumBytes, int trials,
                            bool compacting) {
  LiveProcess holder;
  const std::string pid = std::to_string(holder.pid());
  std::string text;
  std::set<std::string> live;
  if (compacting) {
    // More than half of it dead: the writer compacts, a rewrite of every page.
    for (int gpu = 0; text.size() < minimumBytes * 3 / 5; ++gpu) {
      // A start time no running process has: its owner is gone.
      text += std::to_string(gpu) + " " + std::to_string(::getpid()) + "\t1\n";
    }
  } else {
    text = "0 " + std::to_string(deadPid()) + "\n";
  }
  for (int gpu = 100001; text.size() < minimumBytes + kPage; ++gpu) {
    text += std::to_string(gpu) + " " + pid + "\n";
    live.insert(std::to_string(gpu));
  }
  int rolledBackCount = 0;
  for (int trial = 0; trial < trials; ++trial) {
    writeBytes(file, text);
    std::error_code ignored;
    fs::remove(journalPathOf(file), ignored);
    killOnFirstChange(file, [&] { allocate(file, {{"0"}, 1, Owner::of(::getpid())}); });

    const LockedFile opened = LockedFile::open(file, LockedFile::Access::kWrite, 2s);
    rolledBackCount += opened.notes().empty() ? 0 : 1;
    const ParsedRecords records = parseRecords(opened.text());
    EXPECT_TRUE(records.junk.empty())
        << "torn line: '" << (records.junk.empty() ? "" : records.junk[0].text) << "'";
    std::map<std::string, int> liveOwners;
    for (const Record& record : records.records) {
      if (isRunning(record.owner)) ++liveOwners[record.gpu];
    }
    for (const std::string& gpu : live) {
      EXPECT_EQ(liveOwners[gpu], 1) << "GPU " << gpu << " in trial " << trial;
    }
    for (const auto& [gpu, owners] : liveOwners) EXPECT_LE(owners, 1) << "GPU " << gpu;
    // Exactly the old contents, or the writer's whole change.
    if (!opened.notes().empty()) {
      EXPECT_TRUE(opened.text() == text) << "not rolled back to the old contents";
    }
    if (::testing::Test::HasFailure()) break;
  }
  return rolledBackCount;
}

TEST_F(JournaledFileTest, SigkillDuringTheChangeOfAFileOverSixtyFourKibLosesNothing) {
  const int rolledBack = killWritersOfALargeFile(file(), 64 * 1024, 8, false);
  std::cout << "rolled back " << rolledBack << " of 8 changes\n";
  const int compacted = killWritersOfALargeFile(dir_ / "compacting", 64 * 1024, 8, true);
  std::cout << "rolled back " << compacted << " of 8 compactions\n";
}

/// A tmpfs of `size` at `dir`, unmounted at the end; skip() says why there is none.
class ScopedTmpfs {
 public:
  ScopedTmpfs(const fs::path& dir, const std::string& size) : dir_(dir) {
    fs::create_directories(dir);
    if (::geteuid() != 0) {
      why_ = "mounting a tmpfs needs root";
    } else if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, ("size=" + size).c_str()) != 0) {
      why_ = std::string("cannot mount a tmpfs here: ") + std::strerror(errno);
    } else {
      mounted_ = true;
    }
  }
  ~ScopedTmpfs() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  const std::string& why() const { return why_; }

 private:
  fs::path dir_;
  bool mounted_ = false;
  std::string why_;
};

TEST_F(JournaledFileTest, SigkillDuringTheChangeOfAFileOverFourKibOnATmpfsLosesNothing) {
  const ScopedTmpfs tmpfs(dir_ / "tmpfs", "16m");
  if (!tmpfs.mounted()) GTEST_SKIP() << tmpfs.why();
  const int rolledBack = killWritersOfALargeFile(dir_ / "tmpfs" / "coordination", 6000, 8, false);
  std::cout << "rolled back " << rolledBack << " of 8 changes\n";
  const int compacted = killWritersOfALargeFile(dir_ / "tmpfs" / "compacting", 20000, 8, true);
  std::cout << "rolled back " << compacted << " of 8 compactions\n";
}

// --- a full disk -------------------------------------------------------------------------------

TEST_F(JournaledFileTest, AFullDiskLeavesTheFileByteForByteUnchanged) {
  const ScopedTmpfs tmpfs(dir_ / "small", "256k");
  if (!tmpfs.mounted()) GTEST_SKIP() << tmpfs.why();
  const fs::path coordination = dir_ / "small" / "coordination";
  LiveProcess owner;
  // Exactly one page of records, so that any new record needs a page of its own.
  std::string text;
  for (int gpu = 0; text.size() < kPage - 40; ++gpu) {
    text += std::to_string(gpu) + " " + std::to_string(owner.pid()) + "\n";
  }
  text += "#" + std::string(kPage - 2 - text.size(), '-') + "\n";  // a junk line, kept
  ASSERT_EQ(text.size(), kPage);

  for (const bool roomForTheJournal : {false, true}) {
    writeBytes(coordination, text);
    std::error_code ignored;
    fs::remove(journalPathOf(coordination), ignored);
    // The writers' memory of the file's inode (LockedFile.h), made before the disk is full
    // as any earlier change makes it: rewritten in place, it takes no room of the journal's.
    writeBytes(inodeMemoryPathOf(coordination), std::string(63, ' ') + "\n");
    // Fill the file system, then give back one page when the journal is to fit (the file's
    // growth then fails instead).
    std::vector<fs::path> fillers;
    for (int i = 0;; ++i) {
      const fs::path filler = dir_ / "small" / ("filler" + std::to_string(i));
      FileDescriptor fd(::open(filler.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
      if (!fd) break;
      fillers.push_back(filler);
      const std::string page(kPage, 'x');
      if (::write(fd.get(), page.data(), page.size()) != static_cast<ssize_t>(page.size())) break;
    }
    if (roomForTheJournal) {
      fs::remove(fillers.back());
      fs::remove(fillers[fillers.size() - 2]);
    }

    LiveProcess requester;
    for (const Owner& who :
         {Owner::of(requester.pid()), Owner::of(owner.pid())}) {  // a new one, then the holder
      try {
        allocate(coordination, {{"900", "901"}, 1, who});
        ADD_FAILURE() << "allocated on a full file system (journal room: " << roomForTheJournal
                      << ")";
      } catch (const store::StoreError& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find("the file is unchanged"), std::string::npos) << message;
        // Without room the journal cannot be written; with it, the file's growth is refused.
        EXPECT_NE(message.find(roomForTheJournal ? "cannot make room" : "cannot write its journal"),
                  std::string::npos)
            << message;
      }
      EXPECT_TRUE(readFile(coordination) == text) << "the file changed";
      std::error_code noJournal;
      EXPECT_EQ(fs::exists(journalPathOf(coordination), noJournal)
                    ? fs::file_size(journalPathOf(coordination))
                    : 0u,
                0u);
    }
    for (const fs::path& filler : fillers) fs::remove(filler, ignored);
  }
}

// --- a file that anyone grew past the limit ----------------------------------------------------

/// Records of a running owner, each of its own GPU identifier (none of the host's, none the same as
/// another, so that no compaction makes room), from `first` on, until the next would take `text`
/// past `size` bytes; returns how many.
std::size_t appendDistinctRecords(std::string& text, std::size_t size, pid_t owner,
                                  std::size_t first = 100) {
  std::size_t count = 0;
  for (std::size_t gpu = first;; ++gpu, ++count) {
    const std::string line = std::to_string(gpu) + " " + std::to_string(owner) + "\n";
    if (text.size() + line.size() > size) return count;
    text += line;
  }
}

TEST_F(JournaledFileTest, NoChangeGrowsTheFilePastTheLimit) {
  LiveProcess owner;
  // Live records, none blank and no two the same, up to a few bytes below the limit: one more
  // record would cross it, and no compaction makes room.
  std::string text;
  text.reserve(kMaxCoordinationFileBytes);
  const std::size_t records =
      appendDistinctRecords(text, kMaxCoordinationFileBytes - 4, owner.pid());
  writeBytes(file(), text);
  try {
    allocate(file(), {{"0", "1"}, 1, Owner::of(::getpid())});
    ADD_FAILURE() << "the file grew past its limit";
  } catch (const store::StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("the file is unchanged"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(readFile(file()) == text) << "the file changed";
  // It can still be read, and what it holds still counts.
  const Status status = readStatus(file());
  ASSERT_EQ(status.records.size(), records);
  EXPECT_TRUE(std::all_of(status.records.begin(), status.records.end(),
                          [](const RecordStatus& record) { return record.running; }));
  EXPECT_EQ(status.sizeBytes, text.size());
}

TEST_F(JournaledFileTest, AFullFileTakesAChangeForWhichTheRecordsItTakesBackMakeRoom) {
  LiveProcess owner;
  // A quarter of the file a gone owner's records of GPU 0 (written again and again), the rest live
  // records: in place, the new record would cross the limit; blank, the gone owner's lines do not
  // make half the file, which alone would compact it.
  const std::string gone = "0 " + std::to_string(deadPid()) + "\n";
  std::string text;
  text.reserve(kMaxCoordinationFileBytes);
  while (text.size() + gone.size() <= kMaxCoordinationFileBytes / 4) text += gone;
  const std::size_t live = appendDistinctRecords(text, kMaxCoordinationFileBytes - 4, owner.pid());
  writeBytes(file(), text);

  const Allocation a = allocate(file(), {{"0"}, 1, Owner{::getpid(), {}}});
  ASSERT_TRUE(a.satisfied);
  EXPECT_EQ(a.granted, (std::vector<std::string>{"0"}));
  const std::string after = readFile(file());
  EXPECT_LE(after.size(), kMaxCoordinationFileBytes);
  EXPECT_EQ(after.find(gone), std::string::npos) << "a gone owner's record is still there";
  // Every live record is still there, once, and the new one with them.
  const ParsedRecords parsed = parseRecords(after);
  EXPECT_TRUE(parsed.junk.empty());
  ASSERT_EQ(parsed.records.size(), live + 1);
  for (std::size_t i = 0; i < live; ++i) {
    ASSERT_EQ(parsed.records[i].gpu, std::to_string(100 + i));
    ASSERT_EQ(parsed.records[i].owner.pid, owner.pid());
  }
  EXPECT_EQ(parsed.records.back(), (Record{"0", Owner{::getpid(), {}}}));
}

TEST_F(JournaledFileTest, ANearlyFullFileThatAnotherWriterLaidOutTakesARecordInPlace) {
  LiveProcess owner;
  // Lines appended without the page rule (as Flink's script appends them), up to 1,000 bytes
  // below the limit: the new record fits in place, where the lines laid out anew by the page rule
  // would not.
  std::string text;
  text.reserve(kMaxCoordinationFileBytes);
  appendDistinctRecords(text, kMaxCoordinationFileBytes - 1000, owner.pid());
  writeBytes(file(), text);
  const Allocation a = allocate(file(), {{"0"}, 1, Owner{::getpid(), {}}});
  ASSERT_TRUE(a.satisfied);
  const std::string after = readFile(file());
  EXPECT_LE(after.size(), kMaxCoordinationFileBytes);
  EXPECT_TRUE(after.compare(0, text.size(), text) == 0) << "a record moved";
  const std::string added = "0 " + std::to_string(::getpid()) + "\n";
  EXPECT_TRUE(after.size() >= added.size() &&
              after.compare(after.size() - added.size(), added.size(), added) == 0)
      << after.substr(text.size());
}

TEST_F(JournaledFileTest, ACompactionWritesTwoIdenticalRecordsOnce) {
  LiveProcess owner;
  const std::string record = "1 " + std::to_string(owner.pid()) + "\n";
  // Mostly blank (what blanked records leave), with one record twice: compacted at the next
  // change.
  std::string text = record + std::string(5 * 4096, ' ') + "\n" + record;
  writeBytes(file(), text);
  ASSERT_TRUE(allocate(file(), {{"0", "1"}, 1, Owner::of(::getpid())}).satisfied);
  const std::string after = readFile(file());
  EXPECT_LT(after.size(), 4096u) << "not compacted";
  std::size_t copies = 0;
  for (std::size_t at = after.find(record); at != std::string::npos;
       at = after.find(record, at + 1)) {
    ++copies;
  }
  EXPECT_EQ(copies, 1u) << after;
}

TEST(DescribeJunkTest, AFileFullOfJunkGetsAFewLinesAndACount) {
  std::vector<JunkLine> junk;
  for (std::size_t i = 1; i <= 2000; ++i) junk.push_back(JunkLine{i, "x"});
  const std::vector<std::string> lines = describeJunk(junk, "F");
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(lines[0], "ignoring line 1 of F, which is not a record: 'x'");
  EXPECT_EQ(lines[5],
            "... and 1995 more lines of F that are not records (`flink-gpu release --junk` removes "
            "them)");
  EXPECT_EQ(describeJunk({junk.begin(), junk.begin() + 2}, "F").size(), 2u);
}

TEST_F(JournaledFileTest, AFileOfJunkPastTheLimitBlocksAllocationUntilReleaseJunk) {
  LiveProcess owner;
  std::string text = "0 " + std::to_string(owner.pid()) + "\n";
  const std::string junk(1000, 'j');
  while (text.size() <= kMaxCoordinationFileBytes) text += junk + "\n";
  writeBytes(file(), text);
  try {
    allocate(file(), {{"0", "1"}, 1, Owner::of(::getpid())});
    FAIL();
  } catch (const store::StoreError& e) {
    EXPECT_EQ(e.cause(), store::StoreError::Cause::kRefused) << e.what();
    EXPECT_NE(std::string(e.what()).find("release --junk"), std::string::npos) << e.what();
  }
  const std::vector<JunkLine> removed = releaseJunk(file());
  EXPECT_GT(removed.size(), 4000u);
  EXPECT_LT(fs::file_size(file()), 64u);
  const ParsedRecords left = parseRecords(readFile(file()));
  ASSERT_EQ(left.records.size(), 1u);
  EXPECT_EQ(left.records[0].owner.pid, owner.pid());
  EXPECT_TRUE(allocate(file(), {{"0", "1"}, 1, Owner::of(::getpid())}).satisfied);
}

}  // namespace
}  // namespace flink::store
