// The coordination file's records: parsing and formatting them, the allocation rule, and the
// changes that blank records in place and append new ones. See Coordination.h for the contract.
#include "coordination/Coordination.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "coordination/CoordinationFile.h"
#include "device/DeviceIdentifiers.h"
#include "process/FileDescriptor.h"
#include "util/Strings.h"

namespace flink::coordination {
namespace {

namespace fs = std::filesystem;
using process::FileDescriptor;

template <typename Int>
std::optional<Int> parseDecimal(std::string_view text) {
  Int value{};
  if (text.empty() || text.front() == '-' || text.front() == '+') return std::nullopt;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

/// What discovery reads of /proc/<pid>/stat: the state (field 3) and the start time (field 22).
struct ProcStat {
  /// No field at all after the command name.
  bool empty = true;
  /// State Z, X or x: dead, not yet reaped.
  bool dead = false;
  /// Whether the line has a field 22; `startTime` is it, parsed (nullopt when not a number).
  bool hasStartTime = false;
  std::optional<std::uint64_t> startTime;
};

/// /proc/<pid>/stat read, or nullopt when it cannot be. The fields after the command name, which
/// is in parentheses and may itself hold spaces and parentheses, are split in place. Read with
/// plain open/read: this runs in every discovery, and iostreams' set-up costs more than the read.
std::optional<ProcStat> readProcStat(pid_t pid) {
  char path[32];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  FileDescriptor fd(::open(path, O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  // The line is well under 1 KiB: a 64-byte command name at most, and some fifty numbers.
  char buffer[2048];
  ssize_t size;
  do {
    size = ::read(fd.get(), buffer, sizeof buffer);
  } while (size < 0 && errno == EINTR);
  if (size <= 0) return std::nullopt;
  const std::string_view text(buffer, static_cast<std::size_t>(size));
  const std::size_t close = text.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  std::string_view rest = text.substr(close + 1);
  ProcStat stat;
  const std::string_view state = strings::nextToken(rest);
  if (state.empty()) return stat;
  stat.empty = false;
  stat.dead = state == "Z" || state == "X" || state == "x";
  // Field 22 (starttime) is the 20th after the command name.
  std::string_view field = state;
  for (int skipped = 0; skipped < 19 && !field.empty(); ++skipped) field = strings::nextToken(rest);
  if (!field.empty()) {
    stat.hasStartTime = true;
    stat.startTime = parseDecimal<std::uint64_t>(field);
  }
  return stat;
}

struct OwnerHash {
  std::size_t operator()(const Owner& owner) const noexcept {
    return std::hash<pid_t>{}(owner.pid) * 31 +
           std::hash<std::uint64_t>{}(owner.startTime.value_or(~std::uint64_t{0}));
  }
};

}  // namespace

std::optional<std::uint64_t> currentPidNamespace() {
  static const std::optional<std::uint64_t> inode = []() -> std::optional<std::uint64_t> {
    struct stat info {};
    if (::stat("/proc/self/ns/pid", &info) != 0) return std::nullopt;
    return static_cast<std::uint64_t>(info.st_ino);
  }();
  return inode;
}

Owner Owner::of(pid_t pid) {
  Owner owner{pid, std::nullopt, currentPidNamespace()};
  if (const std::optional<ProcStat> stat = readProcStat(pid)) owner.startTime = stat->startTime;
  return owner;
}

bool inOtherPidNamespace(const Owner& owner) {
  if (!owner.pidNamespace) return false;
  const std::optional<std::uint64_t> ours = currentPidNamespace();
  return ours && *ours != *owner.pidNamespace;
}

bool sameProcess(const Owner& a, const Owner& b) {
  if (a.pid != b.pid) return false;
  if (a.startTime && b.startTime && *a.startTime != *b.startTime) return false;
  return !(a.pidNamespace && b.pidNamespace && *a.pidNamespace != *b.pidNamespace);
}

bool isRunning(const Owner& owner) {
  if (owner.pid <= 0) return false;
  if (inOtherPidNamespace(owner)) return true;  // cannot be judged from here
  if (const std::optional<ProcStat> stat = readProcStat(owner.pid)) {
    if (stat->empty || stat->dead) return false;
    if (owner.startTime && stat->hasStartTime) return stat->startTime == owner.startTime;
    return true;
  }
  // No /proc entry: gone, unless /proc is not there at all (then ask the kernel directly).
  if (::access("/proc/self/stat", F_OK) == 0) return false;
  return ::kill(owner.pid, 0) == 0 || errno == EPERM;
}

namespace {

/// The record on one line, or nullopt for a line that is not one: `<gpu> <pid>`, then an
/// optional start time, then `key=value` fields, separated by spaces or tabs.
std::optional<Record> parseRecord(std::string_view line) {
  // Split in place: a file holds a record for every GPU of the host, read at every allocation.
  std::string_view rest = line;
  const std::string_view gpu = strings::nextToken(rest);
  const std::string_view pidText = strings::nextToken(rest);
  if (pidText.empty() || !device::isDeviceIdentifier(gpu)) return std::nullopt;
  const std::optional<pid_t> pid = parseDecimal<pid_t>(pidText);
  if (!pid || *pid <= 0) return std::nullopt;
  Record record{std::string(gpu), Owner{*pid, std::nullopt, std::nullopt}};
  std::string_view field = strings::nextToken(rest);
  if (!field.empty() && field.find('=') == std::string_view::npos) {
    record.owner.startTime = parseDecimal<std::uint64_t>(field);
    if (!record.owner.startTime) return std::nullopt;
    field = strings::nextToken(rest);
  }
  for (; !field.empty(); field = strings::nextToken(rest)) {
    const std::size_t equals = field.find('=');
    if (equals == std::string_view::npos || equals == 0 || equals + 1 == field.size()) {
      return std::nullopt;
    }
    const std::string_view key = field.substr(0, equals);
    const std::string_view value = field.substr(equals + 1);
    if (key == "uuid") {
      if (record.uuid || !device::isDeviceIdentifier(value)) return std::nullopt;
      record.uuid = std::string(value);
    } else if (key == "lease") {
      if (record.lease) return std::nullopt;
      record.lease = std::string(value);
    } else if (key == "pidns") {
      if (record.owner.pidNamespace) return std::nullopt;
      record.owner.pidNamespace = parseDecimal<std::uint64_t>(value);
      if (!record.owner.pidNamespace) return std::nullopt;
    } else {
      record.extra.emplace_back(field);
    }
  }
  return record;
}

}  // namespace

std::vector<std::string> describeJunk(const std::vector<JunkLine>& junk, const std::string& file,
                                      std::size_t shown) {
  std::vector<std::string> lines;
  for (std::size_t i = 0; i < junk.size() && i < shown; ++i) {
    lines.push_back("ignoring line " + std::to_string(junk[i].lineNumber) + " of " + file +
                    ", which is not a record: '" + strings::quoteForMessage(junk[i].text) + "'");
  }
  if (junk.size() > shown) {
    lines.push_back("... and " + std::to_string(junk.size() - shown) + " more lines of " + file +
                    " that are not records (`flink-gpu release --junk` removes them)");
  }
  return lines;
}

ParsedRecords parseRecords(std::string_view text) {
  ParsedRecords parsed;
  std::size_t lineNumber = 0;
  std::size_t offset = 0;
  for (std::string_view line : strings::split(text, '\n')) {
    ++lineNumber;
    const LineSpan span{offset, line.size()};
    offset += line.size() + 1;
    if (strings::isBlank(line)) continue;
    if (std::optional<Record> record = parseRecord(line)) {
      parsed.records.push_back(std::move(*record));
      parsed.recordSpans.push_back(span);
    } else {
      parsed.junk.push_back(JunkLine{lineNumber, std::string(strings::trim(line))});
      parsed.junkSpans.push_back(span);
    }
  }
  return parsed;
}

std::string formatRecords(const std::vector<Record>& records) {
  std::string text;
  text.reserve(records.size() * 48);
  for (const Record& record : records) {
    text += record.gpu;
    text += ' ';
    text += std::to_string(record.owner.pid);
    if (record.owner.startTime) text += '\t' + std::to_string(*record.owner.startTime);
    if (record.uuid) text += "\tuuid=" + *record.uuid;
    if (record.owner.pidNamespace) text += "\tpidns=" + std::to_string(*record.owner.pidNamespace);
    if (record.lease) text += "\tlease=" + *record.lease;
    for (const std::string& field : record.extra) text += '\t' + field;
    text += '\n';
  }
  return text;
}

std::string describe(const BlockedUnit& blocked) {
  const auto isMig = [](std::string_view gpu) { return gpu.starts_with("MIG-"); };
  const std::string& other = blocked.heldBy.gpu;
  const std::string holder = " is held by process " + std::to_string(blocked.heldBy.owner.pid);
  std::string why;
  if (!isMig(blocked.gpu) && isMig(other)) {
    why = "its MIG instance " + other + holder;
  } else if (isMig(blocked.gpu) && !isMig(other)) {
    why = "GPU " + other + ", which it is carved from," + holder;
  } else {
    why = "GPU " + other + ", which shares its hardware," + holder;
  }
  return "GPU " + blocked.gpu + " is busy: " + why;
}

Allocation planAllocation(const ParsedRecords& current, const AllocationRequest& request,
                          const LivenessProbe& isRunningProbe, const LeaseProbe& leaseHeld) {
  Allocation allocation;
  allocation.junk = current.junk;

  std::unordered_map<Owner, bool, OwnerHash> running;
  const auto ownerRunning = [&](const Owner& owner) {
    auto [it, inserted] = running.try_emplace(owner, false);
    if (inserted) it->second = isRunningProbe(owner);
    return it->second;
  };

  // Which unit of this request a record holds: by UUID where the record has one and this host
  // knows it (another container may number the same GPU differently), else by identifier. A
  // record with a UUID that this host does not know, for an index whose GPU here has another
  // UUID, is of a GPU this worker cannot see.
  // Keyed by views of request.uuids' values: no UUID is copied.
  std::unordered_map<std::string_view, const std::string*> unitOfUuid;
  unitOfUuid.reserve(request.uuids.size());
  for (const auto& [unit, uuid] : request.uuids) unitOfUuid.emplace(uuid, &unit);
  const auto unitOf = [&](const Record& record) -> std::optional<std::string> {
    if (!record.uuid || request.uuids.empty()) return record.gpu;
    if (const auto it = unitOfUuid.find(*record.uuid); it != unitOfUuid.end()) return *it->second;
    if (request.uuids.count(record.gpu)) return std::nullopt;
    return record.gpu;
  };

  // Units held by running owners, the requester included (each request takes new GPUs, as in
  // Flink's script); records of owners that are gone are dropped.
  std::unordered_set<std::string> taken;
  std::vector<const Record*> holding;  // the records behind `taken`, in the file's order
  std::vector<std::string> holdingUnit;
  allocation.records.reserve(current.records.size() + request.amount);
  for (std::size_t i = 0; i < current.records.size(); ++i) {
    const Record& record = current.records[i];
    // A two-field record (Flink's script) with the requester's pid is the requester's too.
    const bool own = sameProcess(record.owner, request.owner);
    // A lease, where a record has one, says it all: the pid may be reused or of another namespace.
    const bool alive =
        own || (record.lease && leaseHeld ? leaseHeld(*record.lease) : ownerRunning(record.owner));
    if (alive) {
      if (std::optional<std::string> unit = unitOf(record)) {
        taken.insert(*unit);
        holding.push_back(&record);
        holdingUnit.push_back(std::move(*unit));
      }
      (own ? allocation.heldByRequester : allocation.heldByOthers).push_back(record);
      allocation.records.push_back(record);
    } else {
      allocation.reclaimed.push_back(record);
      allocation.reclaimedIndices.push_back(i);
    }
  }

  // The relations both ways, among distinct units: each unit's neighbours. Built only when there
  // are relations, so that a plain request costs nothing more.
  std::unordered_map<std::string, std::vector<std::string>> neighbours;
  for (const auto& [unit, relatedUnits] : request.related) {
    for (const std::string& other : relatedUnits) {
      if (other == unit) continue;
      for (const auto& [from, to] : {std::pair{&unit, &other}, std::pair{&other, &unit}}) {
        std::vector<std::string>& list = neighbours[*from];
        if (std::find(list.begin(), list.end(), *to) == list.end()) list.push_back(*to);
      }
    }
  }
  const auto neighboursOf = [&](const std::string& gpu) -> const std::vector<std::string>* {
    if (neighbours.empty()) return nullptr;
    const auto it = neighbours.find(gpu);
    return it == neighbours.end() ? nullptr : &it->second;
  };

  // GPUs that no running owner holds, but a related unit of which one does.
  std::unordered_set<std::string> blocked;
  if (!neighbours.empty() && !holding.empty()) {
    std::unordered_map<std::string, std::vector<std::size_t>> holders;
    for (std::size_t i = 0; i < holding.size(); ++i) holders[holdingUnit[i]].push_back(i);
    std::vector<std::size_t> blockers;
    for (const std::string& gpu : request.gpus) {
      const std::vector<std::string>* related = neighboursOf(gpu);
      if (related == nullptr || taken.count(gpu) || blocked.count(gpu)) continue;
      blockers.clear();
      for (const std::string& other : *related) {
        const auto it = holders.find(other);
        if (it == holders.end()) continue;
        blockers.insert(blockers.end(), it->second.begin(), it->second.end());
      }
      if (blockers.empty()) continue;
      blocked.insert(gpu);
      // In the file's order, whatever the relations' order.
      std::sort(blockers.begin(), blockers.end());
      for (const std::size_t i : blockers) {
        allocation.blocked.push_back(BlockedUnit{gpu, *holding[i]});
      }
    }
  }

  // Free GPUs in the host's order. A GPU related to one already granted is passed over: the two
  // would share hardware.
  std::unordered_set<std::string> grantedSet;
  std::vector<std::string> granted;
  const auto grantable = [&](const std::string& gpu) {
    if (taken.count(gpu) || blocked.count(gpu) || grantedSet.count(gpu)) return false;
    if (const std::vector<std::string>* related = neighboursOf(gpu)) {
      for (const std::string& other : *related) {
        if (grantedSet.count(other)) return false;
      }
    }
    return true;
  };
  const auto grant = [&](const std::string& gpu) {
    if (!grantable(gpu)) return false;
    granted.push_back(gpu);
    grantedSet.insert(gpu);
    return true;
  };
  // The placement rule (placement/Placement.h) chooses among the free units, where there is one;
  // an answer that does not fit, or a throw, leaves the first free ones.
  if (request.choose) {
    std::vector<std::string> free;
    std::unordered_set<std::string> freeSet;
    for (const std::string& gpu : request.gpus) {
      if (grantable(gpu) && freeSet.insert(gpu).second) free.push_back(gpu);
    }
    if (free.size() >= request.amount) {
      std::vector<std::string> chosen;
      try {
        chosen = request.choose(free, request.amount);
      } catch (...) {
        chosen.clear();  // a chooser's failure must never fail the allocation
      }
      bool valid = chosen.size() == request.amount;
      for (std::size_t i = 0; valid && i < chosen.size(); ++i) {
        valid = freeSet.count(chosen[i]) && grant(chosen[i]);
      }
      if (!valid) {
        granted.clear();
        grantedSet.clear();
      }
    }
  }
  for (const std::string& gpu : request.gpus) {
    if (granted.size() >= request.amount) break;
    grant(gpu);
  }

  allocation.satisfied = request.amount > 0 && granted.size() == request.amount;
  if (allocation.satisfied) {
    // Keep the host's order in the answer.
    for (const std::string& gpu : request.gpus) {
      if (!grantedSet.count(gpu)) continue;
      Record record{gpu, request.owner};
      if (const auto uuid = request.uuids.find(gpu);
          uuid != request.uuids.end() && uuid->second != gpu) {
        record.uuid = uuid->second;
      }
      allocation.granted.push_back(gpu);
      allocation.records.push_back(std::move(record));
    }
  }
  return allocation;
}

namespace {

/// Where new lines go: records are never moved by a change, and none crosses a page boundary,
/// so that writing one is never cut in two (see Journal.h).
constexpr std::size_t kLayoutPage = 4096;

/// Appends `line` (with its '\n') to `text`, first padding to the next page with a blank line
/// when the line would cross a page boundary.
void appendLine(std::string& text, std::string_view line) {
  const std::size_t used = text.size() % kLayoutPage;
  if (used != 0 && used + line.size() > kLayoutPage && line.size() <= kLayoutPage) {
    const std::size_t room = kLayoutPage - used;
    text.append(room - 1, ' ');
    text += '\n';
  }
  text += line;
}

/// The file's new text from its old one: the lines in `blank` replaced by spaces in place, the
/// new records appended. Trailing blank lines are cut off; when more than half of a file larger
/// than a few pages is blank, it is compacted (its lines laid out anew, in order).
std::string edit(std::string_view before, const std::vector<LineSpan>& blank,
                 const std::vector<Record>& added) {
  std::string text(before);
  for (const LineSpan& span : blank) text.replace(span.offset, span.length, span.length, ' ');
  if (!text.empty() && text.back() != '\n') text += '\n';

  // Cut off what is blank at the end: a truncate moves nothing.
  std::size_t end = text.size();
  while (end > 0 && strings::isSpace(text[end - 1])) --end;
  if (end > 0) {
    text.resize(text.find('\n', end) + 1);
  } else {
    text.clear();
  }

  std::size_t blankBytes = 0;
  for (const char c : text) blankBytes += (c == ' ' || c == '\t') ? 1 : 0;
  if (text.size() > 4 * kLayoutPage && blankBytes * 2 > text.size()) {
    std::string compacted;
    for (std::string_view line : strings::split(text, '\n')) {
      if (strings::isBlank(line)) continue;
      std::string withNewline(line);
      withNewline += '\n';
      appendLine(compacted, withNewline);
    }
    text = std::move(compacted);
  }
  for (const Record& record : added) appendLine(text, formatRecords({record}));
  return text;
}

/// One change of the file: open and lock it, let `change` compute the new text from the
/// parsed records, write it. A Flink script can change the file without holding its lock: after
/// its own `sed -i` it holds the lock of the file that it replaced. When that happened before we
/// wrote (the file grew, or was replaced), or while we wrote (the path names a new file, and our
/// write went to one nobody reads), `change` runs again on the file now there, with `again` set
/// so that it can first undo what it finds of its own earlier attempt.
template <typename Change>
auto changeFile(const fs::path& file, std::chrono::milliseconds lockTimeout, std::uint64_t maxBytes,
                Change&& change) {
  for (int attempt = 0;; ++attempt) {
    CoordinationFile opened =
        CoordinationFile::open(file, CoordinationFile::Access::kWrite, lockTimeout, maxBytes);
    auto result = change(opened, attempt > 0);
    if (!opened.interfered()) return result;
    if (attempt >= 8) {
      throw CoordinationError("coordination file " + file.string() +
                              ": it kept being changed by a program that does not hold its lock");
    }
  }
}

}  // namespace

Allocation allocate(const fs::path& file, const AllocationRequest& request,
                    std::chrono::milliseconds lockTimeout) {
  // What an earlier attempt granted (see changeFile), and the leases taken for it: kept across
  // attempts, so that a lease this call holds is not asked for twice.
  std::unordered_set<std::string> grantedBefore;
  std::unordered_map<std::string, Lease> leases;
  Allocation result = changeFile(
      file, lockTimeout, kMaxCoordinationFileBytes, [&](CoordinationFile& opened, bool again) {
        ParsedRecords parsed = parseRecords(opened.text());
        std::vector<LineSpan> blank;
        if (again) {
          // What the earlier attempt wrote may have been copied over (Flink's `sed -i` copies the
          // file): it is not ours to keep, since this attempt plans afresh.
          ParsedRecords kept;
          for (std::size_t i = 0; i < parsed.records.size(); ++i) {
            const Record& record = parsed.records[i];
            if (record.owner == request.owner && grantedBefore.count(record.gpu)) {
              blank.push_back(parsed.recordSpans[i]);
            } else {
              kept.records.push_back(record);
              kept.recordSpans.push_back(parsed.recordSpans[i]);
            }
          }
          kept.junk = std::move(parsed.junk);
          kept.junkSpans = std::move(parsed.junkSpans);
          parsed = std::move(kept);
        }
        // A GPU whose lease is held is held, record or not: an operator's `release`, or Flink's
        // `sed "/1 /d"` deleting GPU 11's line, can leave a lease without its record.
        AllocationRequest unleased;
        std::vector<std::string> leaseHeldGpus;
        const AllocationRequest* plan = &request;
        LeaseFolder folder = LeaseFolder::open(file);
        if (!folder.empty()) {
          unleased = request;
          unleased.gpus.clear();
          for (const std::string& gpu : request.gpus) {
            const std::string name = leaseNameOf(gpu, request.uuids);
            // A free lease file goes now (we hold the file's lock): a GPU given back by a
            // driver or ended with exec leaves its file until someone finds it free.
            if (leases.count(name) || !folder.held(name, /*removeWhenFree=*/true)) {
              unleased.gpus.push_back(gpu);
            } else {
              leaseHeldGpus.push_back(gpu);
            }
          }
          plan = &unleased;
        }
        Allocation allocation =
            planAllocation(parsed, *plan, isRunning, [&](const std::string& name) {
              return leases.count(name) > 0 || folder.held(name, /*removeWhenFree=*/true);
            });
        // Only those no record names: a held record's GPU is reported with its record.
        for (const std::string& gpu : leaseHeldGpus) {
          const bool recorded =
              std::any_of(allocation.records.begin(), allocation.records.end(),
                          [&](const Record& record) { return record.gpu == gpu; });
          if (!recorded) allocation.heldByLeaseOnly.push_back(gpu);
        }
        allocation.notes = opened.notes();
        for (const std::size_t i : allocation.reclaimedIndices) {
          blank.push_back(parsed.recordSpans[i]);
        }
        std::vector<Record> added(
            allocation.records.end() - static_cast<std::ptrdiff_t>(allocation.granted.size()),
            allocation.records.end());
        if (request.lease) {
          // Before the file says so: a lease that cannot be had fails the call with nothing
          // written (its holder runs, though an operator removed its record).
          for (Record& record : added) {
            const std::string name = leaseNameOf(record.gpu, request.uuids);
            if (!leases.count(name)) leases.emplace(name, acquireLease(file, name, opened.mode()));
            record.lease = name;
          }
          std::copy(added.begin(), added.end(),
                    allocation.records.end() - static_cast<std::ptrdiff_t>(added.size()));
        }
        grantedBefore.insert(allocation.granted.begin(), allocation.granted.end());
        opened.replace(edit(opened.text(), blank, added));
        return allocation;
      });
  if (request.lease) {
    for (const std::string& gpu : result.granted) {
      const auto it = leases.find(leaseNameOf(gpu, request.uuids));
      if (it != leases.end()) result.leases.push_back(std::move(it->second));
    }
  }
  return result;
}

Status readStatus(const fs::path& file, std::chrono::milliseconds lockTimeout) {
  const CoordinationFile opened =
      CoordinationFile::open(file, CoordinationFile::Access::kRead, lockTimeout);
  Status status;
  status.limitBytes = kMaxCoordinationFileBytes;
  if (!opened.exists()) return status;
  status.sizeBytes = opened.text().size();
  status.notes = opened.notes();
  ParsedRecords parsed = parseRecords(opened.text());
  status.junk = std::move(parsed.junk);
  // Under the shared lock no allocator of ours creates lease files: one listing holds.
  LeaseFolder leaseFolder = LeaseFolder::open(file);
  for (Record& record : parsed.records) {
    const bool other = !record.lease && inOtherPidNamespace(record.owner);
    const bool running = record.lease ? leaseFolder.held(*record.lease, /*removeWhenFree=*/false)
                                      : isRunning(record.owner);
    status.records.push_back(RecordStatus{std::move(record), running, other});
  }
  return status;
}

namespace {

bool fileExists(const fs::path& file) {
  std::error_code error;
  return fs::symlink_status(file, error).type() != fs::file_type::not_found;
}

}  // namespace

std::vector<Record> release(const fs::path& file,
                            const std::function<bool(const Record&)>& predicate,
                            std::chrono::milliseconds lockTimeout) {
  if (!fileExists(file)) return {};
  return changeFile(file, lockTimeout, kMaxCoordinationFileBytes,
                    [&](CoordinationFile& opened, bool) {
                      const ParsedRecords parsed = parseRecords(opened.text());
                      std::vector<LineSpan> blank;
                      std::vector<Record> released;
                      for (std::size_t i = 0; i < parsed.records.size(); ++i) {
                        if (!predicate(parsed.records[i])) continue;
                        released.push_back(parsed.records[i]);
                        blank.push_back(parsed.recordSpans[i]);
                      }
                      if (!released.empty()) opened.replace(edit(opened.text(), blank, {}));
                      return released;
                    });
}

std::vector<JunkLine> releaseJunk(const fs::path& file, std::chrono::milliseconds lockTimeout) {
  if (!fileExists(file)) return {};
  return changeFile(file, lockTimeout, kMaxRepairableFileBytes,
                    [&](CoordinationFile& opened, bool) {
                      const ParsedRecords parsed = parseRecords(opened.text());
                      if (!parsed.junk.empty())
                        opened.replace(edit(opened.text(), parsed.junkSpans, {}));
                      return parsed.junk;
                    });
}

}  // namespace flink::coordination
