// The undo journal of the coordination file: what a change overwrote, so that the next locked
// reader can put the file back when the writer died half-way.
//
// A change of the coordination file is a set of page-contained writes (see planWrites): each one
// lies within one page of the file, so the kernel never stops it half-way when the writer is
// killed (it checks for a fatal signal only between pages), and a full disk makes it fail whole.
// Before the first of them, the writer saves each write's old and new bytes in the journal, a
// file beside the coordination file, and seals it with a checksum; after the last, it empties the
// journal. A reader that finds a sealed journal knows a change was cut short and rolls the file
// back to what it was before (rolledBack), unless the file holds bytes that neither side of the
// change wrote (someone else, Flink's script, changed it since: then it is left alone).
// An unsealed journal means the writer died before it touched the coordination file.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flink::store {

/// One page-contained write of a change: at `offset`, `after` replaces `before` (shorter than
/// `after`, or empty, where the write extends the file).
struct JournalWrite {
  std::uint64_t offset = 0;
  std::string before;
  std::string after;
  friend bool operator==(const JournalWrite&, const JournalWrite&) = default;
};

/// A change of the coordination file, as the journal keeps it.
struct Journal {
  /// The coordination file's device and inode: a journal is only ever applied to that file.
  std::uint64_t device = 0;
  std::uint64_t inode = 0;
  std::uint64_t sizeBefore = 0;
  std::uint64_t sizeAfter = 0;
  std::vector<JournalWrite> writes;
  friend bool operator==(const Journal&, const Journal&) = default;
};

/// The writes that turn `before` into `after`, none crossing a multiple of `pageSize`: for each
/// page, the span from its first to its last changed byte. Bytes past the end of `after` are
/// written as '\n' first (so that a writer killed before its final truncate leaves blank lines,
/// never old records), and the caller truncates to after.size() last.
std::vector<JournalWrite> planWrites(std::string_view before, std::string_view after,
                                     std::size_t pageSize);

/// A write of planWrites without its bytes: where it is, and how many old and new bytes it
/// covers. Its old bytes are `before` there, its new ones writtenBytes (`after`, then '\n').
struct WriteSpan {
  std::uint64_t offset = 0;
  std::size_t beforeSize = 0;
  std::size_t afterSize = 0;
  friend bool operator==(const WriteSpan&, const WriteSpan&) = default;
};

/// planWrites' writes as spans: no copy of either text, for a change of a large file (a few
/// dozen bytes a page).
std::vector<WriteSpan> planWriteSpans(std::string_view before, std::string_view after,
                                      std::size_t pageSize);

/// The new bytes of the write `span` of a change to `after` (JournalWrite::after): `after`'s
/// bytes there, and '\n' past its end.
std::string writtenBytes(std::string_view after, const WriteSpan& span);

/// The journal's bytes: a text header, each write's old and new bytes, and a sealing line with
/// an FNV-1a checksum of everything before it.
std::string encodeJournal(const Journal& journal);

/// encodeJournal's bytes for the change from `before` to `after` by `writes` (planWriteSpans) of
/// the file `device`, `inode`, handed to `sink` piece by piece in order: a change of a large file
/// is journaled without a copy of its bytes in memory.
void encodeJournalTo(std::uint64_t device, std::uint64_t inode, std::string_view before,
                     std::string_view after, const std::vector<WriteSpan>& writes,
                     const std::function<void(std::string_view)>& sink);

/// The journal in `bytes`, or nullopt when they are not a whole, sealed journal (empty, torn by
/// a writer that died while writing it, or not a journal at all).
std::optional<Journal> decodeJournal(std::string_view bytes);

/// Why `journal` cannot be a change of a file of at most `maxBytes` bytes, in words for a person
/// ("write 2 ends at byte 90000, past the file's 512 bytes"); nullopt when it can. Every write
/// must lie inside the file (its old bytes within the old size, its new bytes within the larger
/// of the two sizes, as planWrites makes them) and both sizes within the limit. A journal that
/// fails was not written by a writer of ours for this file: it is not whole, and is never applied.
std::optional<std::string> whyNotApplicable(const Journal& journal, std::uint64_t maxBytes);

/// Whether `current` can be what the file held at some point of `journal`'s change: its size is
/// between the two sizes and every byte the change writes is either its old or its new value.
bool isPartOfChange(const Journal& journal, std::string_view current);

/// `current` with every write of the change undone: the file as it was before. `journal` must
/// pass whyNotApplicable.
std::string rolledBack(const Journal& journal, std::string current);

}  // namespace flink::store
