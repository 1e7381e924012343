// What the files of records beside the coordination file share (the health records,
// `<coordination file>.health`, and the sharing declarations, `<coordination file>.sharing`): one
// record per line, tab-separated, the kind first and then key=value fields with percent-encoded
// values; '#' comments and blank lines; lines that are not records kept as junk. And how such a
// file is read and changed through LockedFile: readers take no lock (LockedFile's
// kSnapshot), writers take a lock of their own, `<file>.lock`, that only those who may write the
// records can open, so that no reader can stall a writer or an allocator.
#pragma once

#include <charconv>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_set>
#include <vector>

#include "host/store/LockedFile.h"

namespace flink::store {

/// A line of a records file that is not a record: kept out of the records, reported (a few at a
/// time, describeJunk), never fatal, and written back unchanged after them.
struct JunkLine {
  std::size_t lineNumber;  ///< 1-based
  std::string text;
};

/// How many junk lines describeJunk quotes, at most.
inline constexpr std::size_t kJunkLinesShown = 5;

/// One line for a person per junk line of `file` ("ignoring line 3 of F, which is not a record:
/// '…'"; `what` is what a line should have been, "record"), at most `shown` of them, each quoted
/// (no control character of a file reaches a terminal), then one line that counts the rest and
/// names `repair`. The same for every file of the store: a file full of junk must not make the
/// discovery program's stderr grow with it, since Flink's driver reads that pipe only once the
/// script has ended, and a full pipe times the TaskManager out.
std::vector<std::string> describeJunk(const std::vector<JunkLine>& junk, const std::string& file,
                                      const std::string& what, const std::string& repair,
                                      std::size_t shown = kJunkLinesShown);

/// `value` with '%', tab, line breaks and the other control characters (and DEL) as %XX.
std::string encodeFieldValue(std::string_view value);

/// The inverse of encodeFieldValue; nullopt for a '%' not followed by two hex digits.
std::optional<std::string> decodeFieldValue(std::string_view value);

/// A whole decimal number of type T, nothing else around it (no sign for an unsigned T, no
/// spaces, no '+'); nullopt otherwise, or when it does not fit.
template <typename T>
std::optional<T> parseFieldNumber(std::string_view text) {
  T value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

/// The tab-separated fields of one line (without '\n'); at least one, maybe empty.
std::vector<std::string_view> splitFields(std::string_view line);

/// One `key=value` field, its value decoded.
struct Field {
  std::string_view key;
  std::string value;
};

/// `key=value` with a key of at least one character and a value that decodes; nullopt otherwise.
std::optional<Field> parseField(std::string_view field);

/// Adds "\t<key>=<encoded value>" to `line`.
void appendField(std::string& line, std::string_view key, std::string_view value);

/// The lines of a records file's `text` that are neither blank nor comments, each with its
/// 1-based number, handed to `line`; those for which it returns false are `junk`.
void forEachRecordLine(std::string_view text,
                       const std::function<bool(std::string_view line)>& line,
                       std::vector<JunkLine>& junk);

/// A records file read: the records `parseLine` makes of its lines (nullopt: not a record, kept
/// as junk), in file order.
template <typename Record>
struct ParsedSiblingRecords {
  std::vector<Record> records;
  std::vector<JunkLine> junk;
};

template <typename Record, typename ParseLine>
ParsedSiblingRecords<Record> parseSiblingRecords(std::string_view text, ParseLine parseLine) {
  ParsedSiblingRecords<Record> parsed;
  forEachRecordLine(
      text,
      [&](std::string_view line) {
        std::optional<Record> record = parseLine(line);
        if (record) parsed.records.push_back(std::move(*record));
        return record.has_value();
      },
      parsed.junk);
  return parsed;
}

/// A records file's text: `header` (a `#` comment line), each record as `formatLine` writes
/// it, each line once (a compaction writes two identical records once), then the junk lines as
/// they were; "" when there is neither record nor junk.
template <typename Record, typename FormatLine>
std::string formatSiblingRecords(std::string_view header, const std::vector<Record>& records,
                                 const std::vector<JunkLine>& junk, FormatLine formatLine) {
  if (records.empty() && junk.empty()) return "";
  std::string text = std::string(header) + '\n';
  std::unordered_set<std::string> written;
  for (const Record& record : records) {
    std::string line = formatLine(record);
    if (!written.insert(line).second) continue;
    text += line + '\n';
  }
  for (const JunkLine& line : junk) text += line.text + '\n';
  return text;
}

// ---- what a value read from a file of the store may be --------------------------------------

/// A GPU identifier as a record names one (DeviceIdentifiers.h): anything else is junk.
bool isRecordedGpu(std::string_view value) noexcept;

/// A GPU's or MIG instance's UUID, or a prefix of one (`GPU-…`, `MIG-…`).
bool isRecordedUuid(std::string_view value) noexcept;

/// An absolute path without control characters (a line break, an escape sequence): what a path
/// read from a file may be, since it is printed and handed to programs.
bool isRecordedPath(std::string_view value) noexcept;

// ---- the files ------------------------------------------------------------------------------

/// What a records file beside the coordination file holds, as read.
struct SiblingRecordsText {
  std::filesystem::path path;
  bool exists = false;
  std::string text;
  /// What opening found and did (a change cut short, rolled back).
  std::vector<std::string> notes;
  /// What an operator must hear of: files that failed the trust rules, moved aside.
  std::vector<std::string> warnings;
};

/// One file of records beside the coordination file, `<coordination file><suffix>`: how each of
/// them (the health records, the sharing declarations, and any a later feature adds) is read and
/// written, so that every one gets the same rules:
///   - read without waiting on any lock (LockedFile::Access::kSnapshot: a change cut short is
///     rolled back in memory), within the 4 MiB limit; a missing file reads as empty;
///   - changed under its writers' lock `<file>.lock` (which only those who may write the records
///     can open) by a journaled write that cannot tear; and never by a user who may not write the
///     coordination file itself: such a user's file would be refused by every reader, so the
///     writer refuses first, before it creates anything;
///   - the file, its journal and its lock judged against the coordination file (Siblings.h), one
///     that fails moved aside where this process may, else refused naming the fix;
///   - its junk described a few lines at a time (describeJunk).
class RecordFile {
 public:
  /// `what` names the file in messages ("health records"), `record` one line of it ("health
  /// record"), `repair` how its junk goes (for describeJunk).
  RecordFile(std::filesystem::path coordinationFile, std::string suffix, std::string what,
             std::string record, std::string repair);

  const std::filesystem::path& coordinationFile() const noexcept { return coordinationFile_; }
  /// `<coordination file><suffix>`.
  std::filesystem::path path() const;
  const std::string& what() const noexcept { return what_; }

  /// @throws StoreError naming the file and the cause.
  SiblingRecordsText read() const;

  /// Changes the file (creating it): `change` gets the text as read and returns the new text.
  /// When someone replaced the file while we had it (LockedFile::interfered), `change` is called
  /// again on a fresh read, a few times at most. Returns the text as last read and changed.
  /// @throws StoreError naming the file and the cause (this user may not write the coordination
  ///         file; the lock still held after kDefaultLockTimeout, naming its holder); the file is
  ///         then as it was.
  SiblingRecordsText update(const std::function<std::string(const std::string&)>& change) const;

  /// describeJunk for this file's junk.
  std::vector<std::string> describeJunk(const std::vector<JunkLine>& junk) const;

 private:
  std::filesystem::path coordinationFile_;
  std::string suffix_;
  std::string what_;
  std::string record_;
  std::string repair_;
};

/// Refuses, before anything is created or changed beside the coordination file `file`, a user
/// who may not write the coordination file itself (by its mode; root may): every reader would
/// refuse what such a user makes (Siblings.h). `what` names what was to be written.
/// @throws StoreError naming the coordination file, its owner and mode, and the fix.
void refuseWriterWhoMayNotWrite(const std::filesystem::path& file, const std::string& what);

}  // namespace flink::store
