// The coordination file as a locked, journaled byte store: open it safely, lock it as Flink's
// script does, read it, and replace its contents so that every reader sees either the old or the
// new contents, whatever kills the writer and whatever the disk's state.
//
// How a change is made (see Journal.h):
//  1. The change is cut into writes that each lie within one page; the records themselves are
//     laid out so that the common changes (a record blanked in place, records appended) touch
//     few pages and never move a record (see Coordination.cpp).
//  2. The old and new bytes of those writes go into the journal `<file>.journal`, sealed by a
//     checksum. A full disk here fails the change before the file is touched.
//  3. The space the file grows into is reserved (fallocate), so that a full disk or a quota fails
//     the change before the file is touched.
//  4. The writes are made; a failure puts the old bytes back. Then the file is truncated to its
//     new size and the journal is emptied: the change is done.
// Whoever opens the file next and finds a sealed journal rolls the file back (a writer that
// died between 2 and 4 never delivered its answer). Nothing is synced to disk: the records name
// running processes, which a reboot ends anyway.
//
// Locking is flock(LOCK_EX) on the coordination file itself (Flink's script does
// `flock -x 200` on `200<> $file`), held for one read-modify-write; the kernel drops it when the
// holder dies.
//
// The journal is a file beside the coordination file (Siblings.h): used only when its type,
// links, owner and mode pass the trust rules, and applied only when every write it holds lies
// inside the file and every size is within the file's limit (SQLite checks its journal before it
// rolls back, too). The same store keeps the health records (host/health/HealthRecords.h), a
// sibling itself, judged against the coordination file.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "host/liveness/HostFacts.h"
#include "host/store/Siblings.h"
#include "host/store/StoreError.h"
#include "process/FileDescriptor.h"

namespace flink::store {

/// How long to wait for a lock before giving up with StoreError.
inline constexpr std::chrono::milliseconds kDefaultLockTimeout{5000};

/// Files larger than this are not coordination files of ours: refused rather than rewritten.
/// 4 MiB: about 100,000 records.
inline constexpr std::uint64_t kMaxCoordinationFileBytes = 4 << 20;

/// What `flink-gpu release --junk` may still read, so that an operator can shrink a file that
/// someone grew past kMaxCoordinationFileBytes.
inline constexpr std::uint64_t kMaxRepairableFileBytes = 256 << 20;

/// Why a coordination file `file`, of status `opened`, is refused (for writing, when `write`):
/// another user's file this user may write only by privilege (root in a sticky /var/tmp), not a
/// regular file, hard-linked. nullopt when it may be used. The rule every open applies, for
/// `check` to tell beforehand.
std::optional<std::string> refusalOf(const std::filesystem::path& file, const struct stat& opened,
                                     bool write);

/// `<file>.inode`: the coordination file's device and inode as our writers last saw it under its
/// lock. A coordination file found under another inode was replaced since by a program that does
/// not know our lock discipline (Flink's `sed -i` renames a new file over it), whose script may
/// still hold the lock of the file it replaced and write to the new one: a writer waits for it.
std::filesystem::path inodeMemoryPathOf(const std::filesystem::path& file);

/// The journal's path for a coordination file: `<file>.journal`, beside it.
std::filesystem::path journalPathOf(const std::filesystem::path& file);

/// The pid of the process holding a flock on `file` (not followed), from /proc/locks; nullopt
/// when none does, or it cannot be told. The kernel's word, never the file's contents.
std::optional<pid_t> flockHolder(const std::filesystem::path& file);

/// The flocks held on the host (host/liveness/HostFacts.h).
using liveness::FlockTable;

class LockedFile {
 public:
  enum class Access {
    kRead,      ///< A shared lock; never writes, never creates (status).
    kWrite,     ///< An exclusive lock; creates the file (mode 0666 less the umask, as a shell
                ///< redirect does) and rolls back a change that was cut short.
    kSnapshot,  ///< No lock at all (any reader could hold one): two reads of the file and its
                ///< journal that agree. Never writes, never creates; a change cut short is rolled
                ///< back in memory. For what an allocator must read without being stalled (the
                ///< health records), written under kWriteUnlocked.
    kWriteUnlocked,  ///< As kWrite, without the file's own lock: the caller serializes the
                     ///< writers with a lock of its own, which readers cannot take (the health
                     ///< records' writers' lock, host/health/HealthRecords.h).
  };

  /// Opens the coordination file `file` without following a symlink at its last component,
  /// refuses anything but a regular file with one link, and takes the lock, waiting at most
  /// `lockTimeout` (the error then names the process holding it, where /proc/locks tells). A
  /// file replaced while we waited (Flink's `sed -i` renames a new file over it) is opened again.
  /// With kRead and kSnapshot, a missing file gives an object with exists() false.
  /// @throws StoreError naming the path and the cause; for a file this user may not open
  ///         or lock, also its owner, group and mode, and how to share it.
  static LockedFile open(const std::filesystem::path& file, Access access,
                         std::chrono::milliseconds lockTimeout,
                         std::uint64_t maxBytes = kMaxCoordinationFileBytes);

  /// The same store for a file beside the coordination file (the health records): `what` names
  /// what it holds in every message ("health records"); the file and its journal are judged by
  /// `trust` (Siblings.h) and made with its mode and group.
  /// @throws StoreError as open() does, and for a file or journal that fails the rules.
  /// `readers`: who may read the file and its journal when they are made.
  static LockedFile openSibling(const std::filesystem::path& file, const std::string& what,
                                const SiblingTrust& trust, Access access,
                                std::chrono::milliseconds lockTimeout,
                                std::uint64_t maxBytes = kMaxCoordinationFileBytes,
                                SiblingReaders readers = SiblingReaders::kAsTheFile);

  /// Drops the lock (LOCK_UN), then closes the file: a child of fork() holds a copy of the
  /// descriptor, which would otherwise keep the lock, and every allocator of the host waiting,
  /// until the child exits or execs.
  ~LockedFile();
  LockedFile(LockedFile&&) noexcept = default;
  LockedFile& operator=(LockedFile&&) = delete;

  bool exists() const { return fd_.valid(); }
  bool writes() const { return access_ == Access::kWrite || access_ == Access::kWriteUnlocked; }
  const std::filesystem::path& path() const { return path_; }
  /// The file's permission bits (what files made beside it get).
  mode_t mode() const { return mode_; }
  /// Who may write the file, for what is made and read beside it.
  const SiblingTrust& trust() const { return trust_; }

  /// The contents as of the last whole change: with a sealed journal left by a writer that
  /// died, the contents before that change.
  const std::string& text() const { return text_; }

  /// What opening found and did that a person may want to know (a change rolled back, a journal
  /// discarded), one line each, without the path.
  const std::vector<std::string>& notes() const { return notes_; }

  /// What an operator must hear of: a file beside the coordination file that failed the trust
  /// rules and was moved aside (store/Siblings.h: admitSibling), one line each, naming both paths.
  const std::vector<std::string>& warnings() const { return warnings_; }

  /// Replaces the contents with `text` as described above. A no-op when they are equal, and when
  /// someone changed the file without its lock since it was read (Flink's script after its own
  /// `sed -i`): then interfered() is true and the change must be planned again. `text` becomes
  /// text() (moved, not copied), and nothing else of the size of the file is made: the journal is
  /// written as it is encoded, so a change holds the old and the new contents and no more.
  /// @throws StoreError when it cannot be done; the file is then as it was (the message
  ///         says so), or, when even putting it back failed, the journal keeps the change for the
  ///         next opener to roll back.
  void replace(std::string text);

  /// Whether the path still names the file this object has locked: false when someone renamed
  /// another file over it (Flink's `sed -i`) after we locked it, so that what we wrote went to
  /// a file nobody reads.
  bool stillAtPath() const;

  /// Whether replace() found the file changed by someone who did not hold its lock, or the path
  /// no longer names this file: what was planned must be planned again on a fresh open.
  bool interfered() const { return interfered_ || !stillAtPath(); }

  /// After a change, for a file that was found replaced since our writers last saw it (Flink's
  /// `sed -i`): waits (at most `lockTimeout`) while a process still holds or waits for the lock
  /// of a copy it replaced, then whether the path still names this file. False: a Flink script
  /// may have renamed a copy read before the change over it, so the change must be planned again.
  /// @throws StoreError past the time-out, naming the holder.
  bool settled(std::chrono::milliseconds lockTimeout);

 private:
  LockedFile(std::filesystem::path path, Access access, std::string what, SiblingTrust trust,
             bool sibling)
      : path_(std::move(path)),
        access_(access),
        what_(std::move(what)),
        trust_(trust),
        sibling_(sibling) {}
  static LockedFile openWith(LockedFile result, std::chrono::milliseconds lockTimeout,
                             std::uint64_t maxBytes);
  /// For a writer that holds the lock of the coordination file at `file` (`locked`): waits (until
  /// `deadline`) while another process holds or waits for a flock on a copy the file replaced:
  /// one whose holder's descriptor reads `<file> (deleted)`, or, where that cannot be looked at,
  /// the one our writers last saw (inodeMemoryPathOf). Then remembers this file. The decisions are
  /// ReplacedCopies.h's, which the tests' simulated host makes too.
  /// False when the path names another file after the wait (start again).
  /// @throws StoreError past the deadline, naming the holder.
  static bool waitForReplacedCopies(const std::filesystem::path& file, const struct stat& locked,
                                    std::chrono::steady_clock::time_point deadline,
                                    std::chrono::milliseconds lockTimeout, LockedFile& result);
  /// The holder (0: unseen) of a lock held or waited for on a copy this file replaced, if any;
  /// `notCopies`: locked files seen to be no copy, not looked at again.
  std::optional<pid_t> replacedCopyInUse(std::unordered_set<std::uint64_t>& notCopies);
  /// Waits until no replaced copy is in use; whether the path still names this file.
  bool waitWhileReplacedCopiesInUse(std::chrono::steady_clock::time_point deadline,
                                    std::chrono::milliseconds lockTimeout);
  /// The journal's bytes and, for a writer, its descriptor; nullopt bytes when there is none.
  struct JournalRead {
    process::FileDescriptor fd;
    std::optional<std::string> bytes;
    std::uint64_t device = 0;
    std::uint64_t inode = 0;
  };
  JournalRead readJournal();
  void recover(const JournalRead& journal);
  /// The journal open() read, for replace(), where the path still names it; none otherwise.
  process::FileDescriptor keptJournal();
  void readWithoutLock(const struct stat& opened);
  [[noreturn]] void fail(StoreError::Cause cause, const std::string& what, int error = 0) const;
  bool changedUnderLock() const;
  process::FileDescriptor openJournal(bool create);
  /// Makes the file's bytes `target` again from `current` by page-contained writes (truncating
  /// first where it shrinks), for a change that failed or was cut short.
  void restore(const std::string& current, const std::string& target);
  void writeAll(int fd, std::string_view bytes, std::uint64_t offset, const char* what);

  std::filesystem::path path_;
  Access access_;
  /// "coordination file", "health records": what the file holds, for messages.
  std::string what_;
  SiblingTrust trust_;
  /// A file beside the coordination file, judged by trust_ (the coordination file is the
  /// anchor of its own journal).
  bool sibling_ = false;
  SiblingReaders readers_ = SiblingReaders::kAsTheFile;
  process::FileDescriptor fd_;
  /// A writer's journal as open() found it, checked by the trust rules then (its device and
  /// inode beside it): replace() writes through it while the path still names it, rather than
  /// opening and checking it again.
  process::FileDescriptor journal_;
  std::uint64_t journalDevice_ = 0;
  std::uint64_t journalInode_ = 0;
  /// The coordination file, locked by a writer: copies it replaced are looked for again once it
  /// is changed (waitForReplacedCopies, settled).
  bool watchReplaced_ = false;
  std::vector<std::uint64_t> replacedCopies_;
  std::uint64_t device_ = 0;
  std::uint64_t inode_ = 0;
  mode_t mode_ = 0;
  gid_t group_ = 0;
  std::string text_;
  std::vector<std::string> notes_;
  std::vector<std::string> warnings_;
  bool interfered_ = false;
  std::uint64_t maxBytes_ = kMaxCoordinationFileBytes;
};

}  // namespace flink::store
