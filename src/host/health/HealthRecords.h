// The host's health records: which GPUs an operator drained and which `flink-gpu watch` found
// unhealthy, in a file of their own beside the coordination file, `<coordination file>.health`.
//
// Not in the coordination file itself: Flink's script runs `grep "^<gpu> "`, `awk '{print $2}'`
// and `sed -i "/<gpu> /d"` on that file, and a health line there would be read as a record or
// deleted by a release. Beside it, the file is read and written only through
// store::LockedFile, under the same discipline as the records: flock, journaled
// page-contained writes that cannot tear, symlinks refused, a size limit; and, as a file beside
// the coordination file, the trust rules of host/store/Siblings.h. Allocators read it
// without waiting on its lock.
//
// One verdict per line, tab-separated, the kind first and then key=value fields:
//
//   drained<TAB>gpu=1<TAB>uuid=GPU-…<TAB>since=1764581000<TAB>uid=1000<TAB>reason=fan%20noise
//   unhealthy<TAB>gpu=MIG-…<TAB>since=…<TAB>xid=79<TAB>source=watch<TAB>reason=…
//   readmitted<TAB>gpu=1<TAB>uuid=GPU-…<TAB>since=…<TAB>uid=0<TAB>reason=…
//   readmitted<TAB>gpu=1<TAB>uuid=GPU-…<TAB>since=…<TAB>recovery_action=1<TAB>source=watch<TAB>…
//
// `gpu` is what discovery hands out (an index, or a MIG instance's MIG-… UUID); `uuid` the
// whole GPU's GPU-… UUID where known, which decides over the index (a container numbers GPUs
// from 0); `since` seconds since the epoch (UTC); values are percent-encoded ('%', tab, line
// breaks and other control characters as %XX). `readmitted` records who undrained a GPU and
// when (`source=watch`: watch, on the driver's word); it takes nothing out. `recovery_action` on
// a verdict of watch is the action the driver asked since the verdict (NVML's value), which lets
// watch re-admit the GPU once the driver asks none; readers before it keep it as an unknown
// field, and the line means to them what it meant. Lines starting with '#' are comments. A line
// that is none of these (an unknown kind, no gpu, a bad number) is reported and kept as it is;
// fields of an unknown key are kept too.
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
#include "host/store/RecordFile.h"

namespace flink::health {

enum class RecordKind { kDrained, kUnhealthy, kReadmitted };

/// "drained", "unhealthy", "readmitted".
std::string_view kindName(RecordKind kind);

struct HealthRecord {
  RecordKind kind = RecordKind::kDrained;
  /// The unit: a whole GPU's index ("1") or a MIG instance's UUID ("MIG-…").
  std::string gpu;
  /// The whole GPU's UUID ("GPU-…"), where known.
  std::optional<std::string> uuid = {};
  /// When, in seconds since the epoch.
  std::int64_t since = 0;
  /// Who (drain, undrain).
  std::optional<uid_t> uid = {};
  /// The Xid of a verdict of watch.
  std::optional<std::uint64_t> xid = {};
  /// On a verdict of watch: the recovery action the driver asked since the verdict
  /// (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION, other than NONE); on a re-admission of watch, the one
  /// it had asked. Absent otherwise.
  std::optional<unsigned> recoveryAction = {};
  /// "watch", or absent for an operator's record.
  std::optional<std::string> source = {};
  /// Free text: the operator's reason, or NVML's text for a verdict.
  std::string reason = {};
  /// Fields of unknown keys, `key=value` as read.
  std::vector<std::string> extra = {};
  friend bool operator==(const HealthRecord&, const HealthRecord&) = default;
};

struct ParsedHealth {
  std::vector<HealthRecord> records;
  /// Lines that are not records, kept and written back as they are.
  std::vector<store::JunkLine> junk;
};

/// `<coordination file>.health`.
std::filesystem::path healthPathOf(const std::filesystem::path& coordinationFile);

/// The health records as a file of the store (host/store/RecordFile.h): its rules, and how its
/// junk is described.
store::RecordFile healthFileOf(const std::filesystem::path& coordinationFile);

/// One line (without '\n') for `record`.
std::string formatHealthRecord(const HealthRecord& record);

/// Reads the text of a health file. Blank lines and comments are skipped.
ParsedHealth parseHealth(std::string_view text);

/// The whole file's text: a comment naming the format, the records, then the junk as it was.
std::string formatHealth(const ParsedHealth& health);

/// What a health file holds, as read under its lock.
struct HealthFile {
  std::filesystem::path path;
  bool exists = false;
  ParsedHealth parsed;
  /// What opening found and did (a change cut short, rolled back).
  std::vector<std::string> notes;
  /// What an operator must hear of (a file that failed the trust rules, moved aside).
  std::vector<std::string> warnings;
};

/// Reads the health file beside `coordinationFile` without waiting on its lock (a change cut
/// short is rolled back in memory; see LockedFile::Access::kSnapshot); a missing file has
/// no records. The file and its journal are judged against the coordination file
/// (host/store/Siblings.h). @throws store::StoreError naming the health
/// records (a symlink, not a regular file, a file that fails the trust rules, too big, unreadable).
HealthFile readHealth(const std::filesystem::path& coordinationFile);

/// Changes the records of the health file beside `coordinationFile` (creating it) under the
/// writers' lock `<file>.health.lock`, a file only those who may write the records can open:
/// `change` gets the records and edits them; junk lines stay. Returns the file after the change.
/// Readers take no lock, so none can stall a writer (watch recording a verdict).
/// @throws store::StoreError as LockedFile does, naming the health records.
HealthFile updateHealth(const std::filesystem::path& coordinationFile,
                        const std::function<void(std::vector<HealthRecord>&)>& change);

/// Whether `record` names the unit `gpu` of the whole GPU `uuid` (when known): by UUID where both
/// say one, else by identifier. As a person may write them by hand: an index with leading zeros
/// ("01"), a UUID in upper case.
bool names(const HealthRecord& record, std::string_view gpu,
           const std::optional<std::string>& uuid);

/// Seconds since the epoch, now.
std::int64_t nowSeconds();

/// "2026-12-01T09:40:00Z".
std::string isoTime(std::int64_t secondsSinceEpoch);

/// "1000 (alice)", or "1000" where the name is not known.
std::string describeUid(uid_t uid);

}  // namespace flink::health
