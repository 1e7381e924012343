// The operator's sharing declarations: which whole GPUs are shared among several workers, how
// many ways, with how much memory each share, time-sliced or behind an MPS control daemon. They
// live in a file of their own beside the coordination file, `<coordination file>.sharing`, which
// `flink-gpu share` and `unshare` write and the allocators read.
//
// Not in the coordination file itself, for the reasons the health records are not (see
// host/health/HealthRecords.h): Flink's script greps, awks and seds that file. Beside it, the
// file is read and written only through host/store/RecordFile.h, as the health
// records are: flock, journaled page-contained writes that cannot tear, symlinks refused, the
// 4 MiB limit, the trust rules of host/store/Siblings.h; writers take the lock
// `<file>.sharing.lock`, readers none, so that no reader can stall an allocator.
//
// The first line is a '#' comment. Then one declaration per line, tab-separated, the kind first
// and then key=value fields with percent-encoded values:
//
//   shared<TAB>gpu=0<TAB>uuid=GPU-…<TAB>replicas=4<TAB>memory=35942<TAB>since=1796119156<TAB>uid=0
//   shared<TAB>gpu=1<TAB>uuid=GPU-…<TAB>replicas=3<TAB>memory=40960<TAB>mps=/run/nvidia-mps-1<TAB>…
//
// `gpu` is the whole GPU's index; `uuid` its GPU-… UUID where known, which decides over the
// index where both sides know one (a container numbers GPUs from 0); `replicas` how many workers
// may share it (2 to 48); `memory` the MiB of each share, written when known; `mps` the
// CUDA_MPS_PIPE_DIRECTORY of the operator's MPS control daemon, an absolute path, only for MPS;
// `since` seconds since the epoch (UTC); `uid` who declared it. Lines starting with '#' are
// comments. A line that is not a valid declaration (another kind, no gpu or a MIG instance's,
// replicas that is no number from 2 to 48, no since, a bad number, a relative mps, a bad escape)
// is junk: kept as it is, reported, never applied; the valid declarations beside it still apply.
// Fields of an unknown key are kept.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "host/coordination/Coordination.h"
#include "host/enumeration/UnitIndex.h"
#include "host/store/RecordFile.h"

namespace flink::sharing {

/// The fewest workers a shared GPU is shared among.
inline constexpr unsigned kMinReplicas = 2;
/// The most: the clients one MPS server takes since Volta (16 before).
inline constexpr unsigned kMaxReplicas = 48;

/// One GPU declared shared.
struct Declaration {
  /// The whole GPU's index ("0").
  std::string gpu;
  /// Its GPU-… UUID, where known.
  std::optional<std::string> uuid = {};
  /// How many workers may share it at most: kMinReplicas to kMaxReplicas.
  unsigned replicas = kMinReplicas;
  /// Each share's memory in MiB, where the GPU's memory is known (> 0).
  std::optional<std::uint64_t> memoryPerShareMiB = {};
  /// The MPS control daemon's CUDA_MPS_PIPE_DIRECTORY (absolute) for MPS; absent: time-sliced.
  std::optional<std::string> mpsPipeDirectory = {};
  /// When, in seconds since the epoch.
  std::int64_t since = 0;
  /// Who declared it.
  std::optional<uid_t> uid = {};
  /// Fields of unknown keys, `key=value` as read.
  std::vector<std::string> extra = {};

  bool isMps() const noexcept { return mpsPipeDirectory.has_value(); }
  friend bool operator==(const Declaration&, const Declaration&) = default;
};

struct ParsedDeclarations {
  /// In the file's order.
  std::vector<Declaration> declarations;
  /// Lines that are not declarations: kept and written back as they are, never applied.
  std::vector<store::JunkLine> junk;
};

/// `<coordination file>.sharing`.
std::filesystem::path sharingPathOf(const std::filesystem::path& coordinationFile);

/// The sharing declarations as a file of the store (host/store/RecordFile.h): its rules, and how
/// its junk is described.
store::RecordFile sharingFileOf(const std::filesystem::path& coordinationFile);

/// The memory of each of `replicas` shares of a GPU of `memoryTotalMiB`: rounded down to a MiB
/// (an H200's 143771 MiB in 4 shares: 35942).
std::uint64_t memoryPerShare(std::uint64_t memoryTotalMiB, unsigned replicas);

/// How many shares of `shareMiB` a GPU of `memoryTotalMiB` gives: rounded down (may be outside
/// kMinReplicas..kMaxReplicas, which the caller refuses). `shareMiB` must be > 0.
std::uint64_t sharesOfMemory(std::uint64_t memoryTotalMiB, std::uint64_t shareMiB);

/// One line (without '\n') for `declaration`.
std::string formatDeclaration(const Declaration& declaration);

/// Reads the text of a declarations file. Blank lines and comments are skipped.
ParsedDeclarations parseDeclarations(std::string_view text);

/// The whole file's text: a comment naming the format, the declarations, then the junk as it
/// was; empty when there is neither.
std::string formatDeclarations(const ParsedDeclarations& parsed);

/// Whether `declaration` names the whole GPU `gpu` (an index) of UUID `uuid` (when known): by
/// UUID where both say one, else by index; "01" is GPU 1, a UUID in upper case the same GPU.
bool names(const Declaration& declaration, std::string_view gpu,
           const std::optional<std::string>& uuid);

/// The declaration that applies to each unit of `index` (by UnitRef; nullptr for none, and for a
/// MIG instance, which is never shared): the last line that names it, by the index's record
/// reading. Linear in the declarations.
std::vector<const Declaration*> declarationsOf(const ParsedDeclarations& parsed,
                                               const discovery::UnitIndex& index);

/// What a declarations file holds, as read.
struct DeclarationsFile {
  std::filesystem::path path;
  bool exists = false;
  ParsedDeclarations parsed;
  /// What opening found and did (a change cut short, rolled back).
  std::vector<std::string> notes;
  /// What an operator must hear of (a file that failed the trust rules, moved aside).
  std::vector<std::string> warnings;
};

/// Reads the declarations beside `coordinationFile` without waiting on any lock: for the
/// allocators, which no reader or writer of this file may stall (a change cut short is rolled
/// back in memory; see LockedFile::Access::kSnapshot). A missing file declares nothing.
/// @throws store::StoreError naming the sharing declarations (a symlink, not a
///         regular file, a file that fails the trust rules, over 4 MiB, unreadable). An
///         allocator that cannot read them must not guess: it hands out no share.
DeclarationsFile readDeclarations(const std::filesystem::path& coordinationFile);

/// Changes the declarations beside `coordinationFile` (creating the file) under the writers'
/// lock `<file>.sharing.lock`: `change` gets the declarations and edits them; junk stays. It may
/// be called more than once (someone replaced the file meanwhile): it must start from what it
/// gets. Returns the file after the change.
/// @throws store::StoreError as readDeclarations does, and when the lock is held
///         past store::kDefaultLockTimeout (naming its holder); the file is then as it was.
DeclarationsFile updateDeclarations(const std::filesystem::path& coordinationFile,
                                    const std::function<void(std::vector<Declaration>&)>& change);

/// Declares `declaration`'s GPU shared, replacing every declaration that names it (by UUID
/// where both know one, else by index). Returns the declarations it replaced (usually none or
/// one).
/// @throws store::StoreError as updateDeclarations does.
std::vector<Declaration> declare(const std::filesystem::path& coordinationFile,
                                 const Declaration& declaration);

/// Takes out every declaration that names the GPU `gpu` (an index) of UUID `uuid` (when known),
/// or every declaration when `gpu` is nullopt. Returns those taken out. Junk lines stay.
/// @throws store::StoreError as updateDeclarations does.
std::vector<Declaration> removeDeclarations(const std::filesystem::path& coordinationFile,
                                            const std::optional<std::string>& gpu,
                                            const std::optional<std::string>& uuid,
                                            std::vector<std::string>* warnings = nullptr);

/// Whether `declaration` names a GPU this host does not have: discovery::UnitIndex::presence
/// against `host`, an index of the host's enumeration alone, as far as `coverage` says.
bool isStale(const Declaration& declaration, const discovery::UnitIndex& host,
             const discovery::HostCoverage& coverage);

/// `unshare --stale`: takes out every declaration isStale says is of a GPU this host does not
/// have, under the writers' lock; returns those taken out. Nothing when `coverage` cannot tell.
/// The caller reads first and calls this only when there is one, so that nothing is written
/// for nothing. @throws store::StoreError as updateDeclarations does.
std::vector<Declaration> removeStaleDeclarations(const std::filesystem::path& coordinationFile,
                                                 const discovery::UnitIndex& host,
                                                 const discovery::HostCoverage& coverage,
                                                 std::vector<std::string>* warnings = nullptr);

}  // namespace flink::sharing
