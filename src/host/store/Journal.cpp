// The undo journal: planning page-contained writes, and the journal's own bytes. See Journal.h.
#include "host/store/Journal.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <utility>

namespace flink::store {
namespace {

constexpr std::string_view kMagic = "flink-gpu journal 1\n";
constexpr std::string_view kSealed = "sealed ";

std::uint64_t fnv1a(std::string_view bytes) {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (const char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

std::string hex(std::uint64_t value) {
  char buffer[17];
  std::snprintf(buffer, sizeof buffer, "%016llx", static_cast<unsigned long long>(value));
  return buffer;
}

/// Reads one '\n'-terminated line of space-separated fields from `bytes` at `pos`.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}

  bool literal(std::string_view text) {
    if (bytes_.substr(pos_, text.size()) != text) return false;
    pos_ += text.size();
    return true;
  }

  std::optional<std::uint64_t> number(char terminator) {
    const std::size_t end = bytes_.find(terminator, pos_);
    if (end == std::string_view::npos || end == pos_) return std::nullopt;
    std::uint64_t value = 0;
    const auto [ptr, ec] = std::from_chars(bytes_.data() + pos_, bytes_.data() + end, value);
    if (ec != std::errc() || ptr != bytes_.data() + end) return std::nullopt;
    pos_ = end + 1;
    return value;
  }

  std::optional<std::string_view> take(std::uint64_t count) {
    if (count > bytes_.size() - pos_) return std::nullopt;
    const std::string_view taken = bytes_.substr(pos_, count);
    pos_ += count;
    return taken;
  }

  std::size_t position() const { return pos_; }
  std::string_view rest() const { return bytes_.substr(pos_); }

 private:
  std::string_view bytes_;
  std::size_t pos_ = 0;
};

}  // namespace

std::vector<WriteSpan> planWriteSpans(std::string_view before, std::string_view after,
                                      std::size_t pageSize) {
  // What is written: `after`, then '\n' up to the old size.
  const std::size_t size = std::max(before.size(), after.size());
  const auto target = [&](std::size_t i) { return i < after.size() ? after[i] : '\n'; };
  const auto changed = [&](std::size_t i) { return i >= before.size() || before[i] != target(i); };

  std::vector<WriteSpan> writes;
  for (std::size_t page = 0; page < size; page += pageSize) {
    const std::size_t end = std::min(size, page + pageSize);
    std::size_t first = page;
    while (first < end && !changed(first)) ++first;
    if (first == end) continue;
    std::size_t last = end;
    while (!changed(last - 1)) --last;
    WriteSpan write;
    write.offset = first;
    if (first < before.size()) write.beforeSize = std::min(last, before.size()) - first;
    write.afterSize = last - first;
    writes.push_back(write);
  }
  return writes;
}

std::string writtenBytes(std::string_view after, const WriteSpan& span) {
  std::string bytes;
  bytes.reserve(span.afterSize);
  if (span.offset < after.size()) {
    bytes.append(after.substr(static_cast<std::size_t>(span.offset), span.afterSize));
  }
  bytes.append(span.afterSize - bytes.size(), '\n');
  return bytes;
}

std::vector<JournalWrite> planWrites(std::string_view before, std::string_view after,
                                     std::size_t pageSize) {
  std::vector<JournalWrite> writes;
  for (const WriteSpan& span : planWriteSpans(before, after, pageSize)) {
    writes.push_back(
        JournalWrite{span.offset,
                     std::string(before.substr(std::min<std::size_t>(span.offset, before.size()),
                                               span.beforeSize)),
                     writtenBytes(after, span)});
  }
  return writes;
}

namespace {

/// The journal's bytes, in order, to a sink, with the checksum the sealing line carries: the one
/// writer of the format, for a journal in memory (encodeJournal) and one streamed to its file.
class JournalEncoder {
 public:
  explicit JournalEncoder(const std::function<void(std::string_view)>& sink) : sink_(sink) {}

  void header(std::uint64_t device, std::uint64_t inode, std::uint64_t sizeBefore,
              std::uint64_t sizeAfter, std::size_t writes) {
    put(kMagic);
    put("file " + std::to_string(device) + ' ' + std::to_string(inode) + ' ' +
        std::to_string(sizeBefore) + ' ' + std::to_string(sizeAfter) + ' ' +
        std::to_string(writes) + '\n');
  }

  /// A write's line; its old bytes and its new ones follow (put), then end().
  void write(std::uint64_t offset, std::size_t beforeSize, std::size_t afterSize) {
    put("write " + std::to_string(offset) + ' ' + std::to_string(beforeSize) + ' ' +
        std::to_string(afterSize) + '\n');
  }

  void put(std::string_view bytes) {
    for (const char c : bytes) {
      hash_ ^= static_cast<unsigned char>(c);
      hash_ *= 0x100000001b3ULL;
    }
    sink_(bytes);
  }

  void end() { put("\n"); }

  /// The sealing line, of the checksum of everything before it.
  void seal() { sink_(std::string(kSealed) + hex(hash_) + '\n'); }

 private:
  const std::function<void(std::string_view)>& sink_;
  std::uint64_t hash_ = 0xcbf29ce484222325ULL;  // FNV-1a's offset basis: fnv1a("")
};

}  // namespace

std::string encodeJournal(const Journal& journal) {
  std::string text;
  const std::function<void(std::string_view)> sink = [&text](std::string_view bytes) {
    text += bytes;
  };
  JournalEncoder encoder(sink);
  encoder.header(journal.device, journal.inode, journal.sizeBefore, journal.sizeAfter,
                 journal.writes.size());
  for (const JournalWrite& write : journal.writes) {
    encoder.write(write.offset, write.before.size(), write.after.size());
    encoder.put(write.before);
    encoder.put(write.after);
    encoder.end();
  }
  encoder.seal();
  return text;
}

void encodeJournalTo(std::uint64_t device, std::uint64_t inode, std::string_view before,
                     std::string_view after, const std::vector<WriteSpan>& writes,
                     const std::function<void(std::string_view)>& sink) {
  JournalEncoder encoder(sink);
  encoder.header(device, inode, before.size(), after.size(), writes.size());
  for (const WriteSpan& write : writes) {
    encoder.write(write.offset, write.beforeSize, write.afterSize);
    encoder.put(
        before.substr(std::min<std::size_t>(write.offset, before.size()), write.beforeSize));
    encoder.put(writtenBytes(after, write));
    encoder.end();
  }
  encoder.seal();
}

std::optional<Journal> decodeJournal(std::string_view bytes) {
  Reader reader(bytes);
  Journal journal;
  if (!reader.literal(kMagic) || !reader.literal("file ")) return std::nullopt;
  const auto device = reader.number(' ');
  const auto inode = reader.number(' ');
  const auto sizeBefore = reader.number(' ');
  const auto sizeAfter = reader.number(' ');
  const auto count = reader.number('\n');
  if (!device || !inode || !sizeBefore || !sizeAfter || !count) return std::nullopt;
  journal.device = *device;
  journal.inode = *inode;
  journal.sizeBefore = *sizeBefore;
  journal.sizeAfter = *sizeAfter;
  // Each write takes at least a dozen bytes: a count beyond that is no journal of ours.
  if (*count > bytes.size()) return std::nullopt;
  for (std::uint64_t i = 0; i < *count; ++i) {
    if (!reader.literal("write ")) return std::nullopt;
    const auto offset = reader.number(' ');
    const auto beforeSize = reader.number(' ');
    const auto afterSize = reader.number('\n');
    if (!offset || !beforeSize || !afterSize) return std::nullopt;
    const auto before = reader.take(*beforeSize);
    const auto after = before ? reader.take(*afterSize) : std::nullopt;
    if (!after || !reader.literal("\n")) return std::nullopt;
    journal.writes.push_back(JournalWrite{*offset, std::string(*before), std::string(*after)});
  }
  const std::size_t sealedAt = reader.position();
  if (!reader.literal(kSealed)) return std::nullopt;
  if (reader.rest() != hex(fnv1a(bytes.substr(0, sealedAt))) + '\n') return std::nullopt;
  return journal;
}

std::optional<std::string> whyNotApplicable(const Journal& journal, std::uint64_t maxBytes) {
  for (const auto& [name, size] :
       {std::pair{"before", journal.sizeBefore}, std::pair{"after", journal.sizeAfter}}) {
    if (size > maxBytes) {
      return std::string("its size ") + name + " the change, " + std::to_string(size) +
             " bytes, is past the file's limit of " + std::to_string(maxBytes);
    }
  }
  const std::uint64_t largest = std::max(journal.sizeBefore, journal.sizeAfter);
  for (std::size_t i = 0; i < journal.writes.size(); ++i) {
    const JournalWrite& write = journal.writes[i];
    const std::string which = "write " + std::to_string(i + 1);
    // Each bound is checked without overflow: the offset comes from the file.
    if (write.before.size() > write.after.size()) {
      return which + " puts back more bytes than it wrote";
    }
    // A write into what the change adds saves nothing and may start past the old end.
    if (!write.before.empty() && (write.offset > journal.sizeBefore ||
                                  write.before.size() > journal.sizeBefore - write.offset)) {
      return which + " puts back bytes past the end of the file's " +
             std::to_string(journal.sizeBefore) + " bytes before the change";
    }
    if (write.offset > largest || write.after.size() > largest - write.offset) {
      return which + " ends past the end of the file's " + std::to_string(largest) + " bytes";
    }
    if (write.before.size() < write.after.size() && write.offset < journal.sizeBefore &&
        write.offset + write.before.size() < journal.sizeBefore) {
      // planWrites saves every old byte a write covers within the old size.
      return which + " does not save the old bytes it overwrites";
    }
  }
  return std::nullopt;
}

bool isPartOfChange(const Journal& journal, std::string_view current) {
  std::uint64_t largest = journal.sizeBefore;
  for (const JournalWrite& write : journal.writes) {
    largest = std::max<std::uint64_t>(largest, write.offset + write.after.size());
  }
  const std::uint64_t smallest = std::min(journal.sizeBefore, journal.sizeAfter);
  if (current.size() < smallest || current.size() > largest) return false;
  for (const JournalWrite& write : journal.writes) {
    for (std::size_t i = 0; i < write.after.size(); ++i) {
      const std::uint64_t at = write.offset + i;
      if (at >= current.size()) break;
      const char c = current[at];
      if (c != write.after[i] && (i >= write.before.size() || c != write.before[i])) return false;
    }
  }
  return true;
}

std::string rolledBack(const Journal& journal, std::string current) {
  // Bytes past the new end were '\n' where the change did not write them (see planWrites).
  current.resize(std::max<std::uint64_t>(current.size(), journal.sizeBefore), '\n');
  for (const JournalWrite& write : journal.writes) {
    // A write into what the change added saved nothing: the final resize undoes it, and it may
    // start past the end of a file its writer was killed before growing.
    if (write.before.empty()) continue;
    current.replace(write.offset, write.before.size(), write.before);
  }
  current.resize(journal.sizeBefore);
  return current;
}

}  // namespace flink::store
