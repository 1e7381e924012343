// How the allocators change the coordination file, for the files of host/coordination that
// change it (Coordination.cpp, ShareAllocation.cpp); not for use outside host/coordination.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "host/coordination/Coordination.h"
#include "host/coordination/Leases.h"
#include "host/store/LockedFile.h"

namespace flink::coordination::detail {

/// The file's new text from its old one: the lines in `blank` (spans of whole lines, as
/// parseRecords gives them) replaced by spaces in place, the new records appended, none crossing a
/// page boundary (a blank line pads to the next page), so that records are never moved by a
/// change and writing one is never cut in two (Journal.h). Trailing blank lines are cut off; when
/// more than half of a file larger than a few pages is blank, or laid out in place it would pass
/// kMaxCoordinationFileBytes, it is compacted (its lines laid out anew, in order, two identical
/// records once). LineEdit's rule.
std::string editRecords(std::string_view before, const std::vector<LineSpan>& blank,
                        const std::vector<Record>& added);

/// A plan's records made final, each record `read` moved once (no copy: a full file holds half a
/// million): those at `reclaimedIndices` (ascending) appended to `reclaimed`, the others kept in
/// order, in the vector read, before `records` (what the plan adds), which becomes that vector.
/// Returns each kept record's index in `records`, by its index in `read`.
std::vector<std::size_t> keepRecords(std::vector<Record>& records, std::vector<Record> read,
                                     const std::vector<std::size_t>& reclaimedIndices,
                                     std::vector<Record>& reclaimed);

/// Whether a change blanks a line: asked of each line of the text once, in order, with the line
/// (without its '\n'), where it lies, and its number (from 1, blank lines counted).
using BlankChoice =
    std::function<bool(std::string_view line, const LineSpan& span, std::size_t number)>;

/// One change of the file's text by editRecords' rule, with the lines to blank chosen as the text
/// is read (`blank`): no list of lines and no copy of the text is made beside the one text() makes,
/// but one bit a line, so that `release --junk` on a file of millions of lines (up to
/// kMaxRepairableFileBytes) holds the old text and the new one and little else. `before` must
/// outlive it.
class LineEdit {
 public:
  LineEdit(std::string_view before, const BlankChoice& blank);

  /// How many lines it blanks.
  std::size_t blanked() const noexcept { return blanked_; }

  /// The new text: the lines chosen blanked, `added` appended (editRecords).
  std::string text(const std::vector<Record>& added) const;

 private:
  std::string_view before_;
  std::vector<bool> blank_;  // by line, the first at 0
  std::size_t blanked_ = 0;
  /// The new text's size before records are appended: up to the last line that holds more than
  /// whitespace once blanked, with its '\n' (trailing blank lines are cut off).
  std::size_t size_ = 0;
  /// Its spaces and tabs (blanked lines included): more than half, and it is compacted.
  std::size_t blankBytes_ = 0;
};

/// For a change run again (changeFile's `again`): takes out of `parsed` the records that `ours`
/// says an earlier attempt wrote (Flink's `sed -i` may have copied them over: they are not ours
/// to keep, since the attempt plans afresh), and adds their lines to `blank`.
template <typename Ours>
void dropEarlierAttempt(ParsedRecords& parsed, Ours&& ours, std::vector<LineSpan>& blank) {
  ParsedRecords kept;
  for (std::size_t i = 0; i < parsed.records.size(); ++i) {
    if (ours(parsed.records[i])) {
      blank.push_back(parsed.recordSpans[i]);
    } else {
      kept.records.push_back(std::move(parsed.records[i]));
      kept.recordSpans.push_back(parsed.recordSpans[i]);
    }
  }
  kept.junk = std::move(parsed.junk);
  kept.junkSpans = std::move(parsed.junkSpans);
  parsed = std::move(kept);
}

/// The lease names an allocation keeps: those it took (`leasesTaken`) and those the records it
/// wrote (`records`, what the file now holds) name. Every other free lease file may go.
std::unordered_set<std::string> namedLeases(const std::vector<Record>& records,
                                            const std::vector<std::string>& leasesTaken);

/// After an allocation's change is written (allocateInFile's `written`, under the file's lock):
/// the free lease files not of namedLeases go (FolderLeaseSpace::removeFreeExcept), unless a
/// writer without the lock changed the file meanwhile (the records are then not what it holds).
void removeFreeLeases(const LockedFile& opened, const std::vector<Record>& records,
                      const std::vector<std::string>& leasesTaken, FolderLeaseSpace& space);

/// One change of the file: open and lock it, let `change` compute the new text from the parsed
/// records, write it. A Flink script can change the file without holding its lock: after its own
/// `sed -i` it holds the lock of the file that it replaced. When that happened before we wrote
/// (the file grew, or was replaced), or while we wrote (the path names a new file, and our write
/// went to one nobody reads), `change` runs again on the file now there, with `again` set so that
/// it can first undo what it finds of its own earlier attempt.
/// @throws store::StoreError from opening, or when the file kept being changed so 8 times.
template <typename Change>
auto changeFile(const std::filesystem::path& file, std::chrono::milliseconds lockTimeout,
                std::uint64_t maxBytes, Change&& change) {
  for (int attempt = 0;; ++attempt) {
    LockedFile opened = LockedFile::open(file, LockedFile::Access::kWrite, lockTimeout, maxBytes);
    auto result = change(opened, attempt > 0);
    if (!opened.interfered() && opened.settled(lockTimeout)) return result;
    if (attempt >= 8) {
      throw store::StoreError(
          store::StoreError::Cause::kInterfered,
          "coordination file " + file.string() +
              ": it kept being changed by a program that does not hold its lock");
    }
  }
}

/// An allocation of the coordination file `file` (allocate, allocateShares): under its lock, the
/// records parsed (an earlier attempt's own taken out), `plan(parsed, space)` over the lease
/// folder, the records it grants appended and those it reclaims blanked; `written(opened,
/// allocation, space)` runs once the change is written. The leases it took are moved into the
/// result, for the caller to hold. `Result` has the members of Allocation that this uses (notes,
/// warnings, records, granted, reclaimedIndices, leasesTaken, leases).
template <typename Result, typename Plan, typename Written>
Result allocateInFile(const std::filesystem::path& file, std::chrono::milliseconds lockTimeout,
                      Plan&& plan, Written&& written) {
  // What an earlier attempt wrote (see changeFile), and the leases taken for it: kept across
  // attempts, so that a lease this call holds is not asked for twice.
  std::vector<Record> writtenBefore;
  std::unordered_map<std::string, Lease> leases;
  Result result =
      changeFile(file, lockTimeout, kMaxCoordinationFileBytes, [&](LockedFile& opened, bool again) {
        ParsedRecords parsed = parseRecords(opened.text());
        std::vector<LineSpan> blank;
        if (again) {
          // What the earlier attempt wrote may have been copied over (Flink's `sed -i` copies the
          // file): it is not ours to keep, since this attempt plans afresh.
          dropEarlierAttempt(
              parsed,
              [&](const Record& record) {
                return std::find(writtenBefore.begin(), writtenBefore.end(), record) !=
                       writtenBefore.end();
              },
              blank);
        }
        FolderLeaseSpace space(file, opened.trust(), leases);
        // The plan may take the records; where their lines lie stays here.
        const std::vector<LineSpan> spans = std::move(parsed.recordSpans);
        Result allocation = plan(std::move(parsed), space);
        std::vector<std::string> notes = opened.notes();
        notes.insert(notes.end(), allocation.notes.begin(), allocation.notes.end());
        allocation.notes = std::move(notes);
        allocation.warnings = opened.warnings();
        for (std::string& warning : space.warnings()) {
          allocation.warnings.push_back(std::move(warning));
        }
        const std::vector<Record> added(
            allocation.records.end() - static_cast<std::ptrdiff_t>(allocation.granted.size()),
            allocation.records.end());
        for (const std::size_t i : allocation.reclaimedIndices) {
          blank.push_back(spans[i]);
        }
        writtenBefore.insert(writtenBefore.end(), added.begin(), added.end());
        opened.replace(editRecords(opened.text(), blank, added));
        written(opened, allocation, space);
        return allocation;
      });
  for (const std::string& name : result.leasesTaken) {
    const auto it = leases.find(name);
    if (it != leases.end()) result.leases.push_back(std::move(it->second));
  }
  return result;
}

}  // namespace flink::coordination::detail
