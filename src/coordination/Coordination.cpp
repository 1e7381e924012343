// The coordination file: parsing and formatting records, the allocation rule, and the locked,
// in-place read-modify-write. See Coordination.h for the contract.
#include "coordination/Coordination.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "externalresource/gpu/DiscoveryOutput.h"
#include "process/FileDescriptor.h"
#include "util/Strings.h"

namespace flink::coordination {
namespace {

namespace fs = std::filesystem;
using process::FileDescriptor;

/// A coordination file larger than this is not one of ours; refuse it rather than rewrite it.
constexpr off_t kMaxFileBytes = 4 << 20;

template <typename Int>
std::optional<Int> parseDecimal(std::string_view text) {
  Int value{};
  if (text.empty() || text.front() == '-' || text.front() == '+') return std::nullopt;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

/// The fields of /proc/<pid>/stat after the command name, which is in parentheses and may itself
/// hold spaces and parentheses: field 3 (the state) is the first one returned. Read with plain
/// open/read: this runs in every discovery, and iostreams' set-up costs more than the read.
std::optional<std::vector<std::string>> procStatFields(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
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
  return strings::splitWhitespace(text.substr(close + 1));
}

struct OwnerHash {
  std::size_t operator()(const Owner& owner) const noexcept {
    return std::hash<pid_t>{}(owner.pid) * 31 +
           std::hash<std::uint64_t>{}(owner.startTime.value_or(~std::uint64_t{0}));
  }
};

[[noreturn]] void fail(const fs::path& file, const std::string& what, int error = 0) {
  std::string message = "coordination file " + file.string() + ": " + what;
  if (error != 0) message += ": " + std::string(std::strerror(error));
  throw CoordinationError(message);
}

/// An open, exclusively locked coordination file. The lock goes with the descriptor.
class LockedFile {
 public:
  /// Opens `file` without following a symlink at its last component (creating it when `create`),
  /// refuses anything but a regular file with one link, and takes the lock, waiting at most
  /// `lockTimeout`. Returns an invalid LockedFile if the file does not exist and !create.
  static LockedFile open(const fs::path& file, bool create, int lockType,
                         std::chrono::milliseconds lockTimeout) {
    const auto deadline = std::chrono::steady_clock::now() + lockTimeout;
    while (true) {
      // O_NONBLOCK: a FIFO planted at the path must not block the open; it is refused below.
      const int flags = (lockType == LOCK_EX ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW |
                        O_NONBLOCK | (create ? O_CREAT : 0);
      FileDescriptor fd(::open(file.c_str(), flags, 0666));
      if (!fd) {
        if (errno == ENOENT && !create) return LockedFile(file);
        if (errno == ELOOP) fail(file, "refusing to use it: it is a symbolic link");
        if (errno == EISDIR) fail(file, "refusing to use it: it is a directory");
        fail(file, "cannot open it", errno);
      }
      struct stat opened {};
      if (::fstat(fd.get(), &opened) != 0) fail(file, "cannot stat it", errno);
      if (!S_ISREG(opened.st_mode)) fail(file, "refusing to use it: it is not a regular file");
      if (opened.st_nlink > 1) {
        fail(file, "refusing to use it: it has " + std::to_string(opened.st_nlink) +
                       " hard links, so writing it would change another file");
      }

      while (::flock(fd.get(), lockType | LOCK_NB) != 0) {
        if (errno == EINTR) continue;
        if (errno != EWOULDBLOCK) fail(file, "cannot lock it", errno);
        if (std::chrono::steady_clock::now() >= deadline) {
          fail(file, "still locked by another process after " +
                         std::to_string(lockTimeout.count()) + " ms");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }

      // Someone may have replaced the file (Flink's script edits it with `sed -i`, which renames
      // a new file over it) between our open and our lock: then we hold the lock of a file
      // nobody else will look at. Start again on the file now at the path.
      struct stat current {};
      if (::lstat(file.c_str(), &current) == 0 && current.st_dev == opened.st_dev &&
          current.st_ino == opened.st_ino) {
        // The size must be read under the lock: the previous holder may have just grown it.
        struct stat locked {};
        if (::fstat(fd.get(), &locked) != 0) fail(file, "cannot stat it", errno);
        return LockedFile(file, std::move(fd), locked.st_size);
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        fail(file, "it kept being replaced while waiting for its lock");
      }
    }
  }

  bool exists() const { return fd_.valid(); }

  std::string read() {
    if (size_ > kMaxFileBytes) {
      fail(file_, "refusing to use it: " + std::to_string(size_) +
                      " bytes is far more than a coordination file holds");
    }
    std::string text(static_cast<std::size_t>(size_), '\0');
    std::size_t done = 0;
    while (done < text.size()) {
      const ssize_t n =
          ::pread(fd_.get(), text.data() + done, text.size() - done, static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail(file_, "cannot read it", errno);
      if (n == 0) break;
      done += static_cast<std::size_t>(n);
    }
    text.resize(done);
    return text;
  }

  /// Replaces the contents in place. One pwrite of the new text, padded with newlines to at least
  /// the old length so that no old byte survives past it, then a truncate to the new length: a
  /// writer killed at any point leaves whole lines (blank lines are skipped by readers).
  void write(const std::string& text) {
    std::string padded = text;
    if (padded.size() < static_cast<std::size_t>(size_)) {
      padded.append(static_cast<std::size_t>(size_) - padded.size(), '\n');
    }
    std::size_t done = 0;
    while (done < padded.size()) {
      const ssize_t n =
          ::pwrite(fd_.get(), padded.data() + done, padded.size() - done, static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail(file_, "cannot write it", errno);
      done += static_cast<std::size_t>(n);
    }
    while (::ftruncate(fd_.get(), static_cast<off_t>(text.size())) != 0) {
      if (errno != EINTR) fail(file_, "cannot truncate it", errno);
    }
    size_ = static_cast<off_t>(text.size());
  }

 private:
  explicit LockedFile(fs::path file) : file_(std::move(file)) {}
  LockedFile(fs::path file, FileDescriptor fd, off_t size)
      : file_(std::move(file)), fd_(std::move(fd)), size_(size) {}

  fs::path file_;
  FileDescriptor fd_;
  off_t size_ = 0;
};

}  // namespace

Owner Owner::of(pid_t pid) {
  Owner owner{pid, std::nullopt};
  // Field 22 (starttime) is the 20th after the command name.
  if (auto fields = procStatFields(pid); fields && fields->size() > 19) {
    owner.startTime = parseDecimal<std::uint64_t>((*fields)[19]);
  }
  return owner;
}

bool isRunning(const Owner& owner) {
  if (owner.pid <= 0) return false;
  if (auto fields = procStatFields(owner.pid)) {
    if (fields->empty()) return false;
    const std::string& state = fields->front();
    if (state == "Z" || state == "X" || state == "x") return false;  // dead, not yet reaped
    if (owner.startTime && fields->size() > 19) {
      return parseDecimal<std::uint64_t>((*fields)[19]) == owner.startTime;
    }
    return true;
  }
  // No /proc entry: gone, unless /proc is not there at all (then ask the kernel directly).
  if (::access("/proc/self/stat", F_OK) == 0) return false;
  return ::kill(owner.pid, 0) == 0 || errno == EPERM;
}

ParsedRecords parseRecords(std::string_view text) {
  ParsedRecords parsed;
  std::size_t lineNumber = 0;
  for (std::string_view line : strings::split(text, '\n')) {
    ++lineNumber;
    if (strings::isBlank(line)) continue;
    const std::vector<std::string> fields = strings::splitWhitespace(line);
    std::optional<pid_t> pid;
    std::optional<std::uint64_t> startTime;
    bool valid = (fields.size() == 2 || fields.size() == 3) &&
                 externalresource::gpu::isDeviceIdentifier(fields[0]);
    if (valid) {
      pid = parseDecimal<pid_t>(fields[1]);
      valid = pid.has_value() && *pid > 0;
    }
    if (valid && fields.size() == 3) {
      startTime = parseDecimal<std::uint64_t>(fields[2]);
      valid = startTime.has_value();
    }
    if (valid) {
      parsed.records.push_back(Record{fields[0], Owner{*pid, startTime}});
    } else {
      parsed.junk.push_back(JunkLine{lineNumber, std::string(strings::trim(line))});
    }
  }
  return parsed;
}

std::string formatRecords(const std::vector<Record>& records) {
  std::string text;
  text.reserve(records.size() * 32);
  for (const Record& record : records) {
    text += record.gpu;
    text += ' ';
    text += std::to_string(record.owner.pid);
    if (record.owner.startTime) {
      text += ' ';
      text += std::to_string(*record.owner.startTime);
    }
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
                          const LivenessProbe& isRunningProbe) {
  Allocation allocation;
  allocation.junk = current.junk;

  std::unordered_map<Owner, bool, OwnerHash> running;
  const auto ownerRunning = [&](const Owner& owner) {
    auto [it, inserted] = running.try_emplace(owner, false);
    if (inserted) it->second = isRunningProbe(owner);
    return it->second;
  };

  // GPUs held by the requester, and by other running owners; dead records are dropped.
  // A two-field record (Flink's script) with the requester's pid is the requester's too.
  std::unordered_set<std::string> mine;
  std::vector<Record> own;
  std::unordered_set<std::string> taken;
  std::vector<Record> kept;
  kept.reserve(current.records.size());
  for (const Record& record : current.records) {
    if (record.owner == request.owner ||
        (record.owner.pid == request.owner.pid && !record.owner.startTime)) {
      mine.insert(record.gpu);  // re-recorded below if granted again, else kept as it was
      own.push_back(record);
    } else if (ownerRunning(record.owner)) {
      taken.insert(record.gpu);
      allocation.heldByOthers.push_back(record);
      kept.push_back(record);
    } else {
      allocation.reclaimed.push_back(record);
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

  // GPUs that no other owner holds, but a related unit of which another running owner does.
  std::unordered_set<std::string> blocked;
  if (!neighbours.empty() && !allocation.heldByOthers.empty()) {
    std::unordered_map<std::string, std::vector<const Record*>> holders;
    for (const Record& record : allocation.heldByOthers) holders[record.gpu].push_back(&record);
    std::vector<const Record*> blockers;
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
      // In the file's order (the pointers are into heldByOthers), whatever the relations' order.
      std::sort(blockers.begin(), blockers.end());
      for (const Record* record : blockers) allocation.blocked.push_back(BlockedUnit{gpu, *record});
    }
  }

  // The requester's own GPUs first, then free ones, both in the host's order. A GPU related to
  // one already granted is passed over: the two would share hardware.
  std::vector<std::string> granted;
  std::unordered_set<std::string> grantedSet;
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
  for (const std::string& gpu : request.gpus) {
    if (granted.size() >= request.amount) break;
    if (mine.count(gpu)) grant(gpu);
  }
  // ---- placement hook: the chooser picks among the free units; anything off, first-free ----
  if (request.choose && granted.size() < request.amount) {
    std::vector<std::string> free;
    std::unordered_set<std::string> freeSet;
    for (const std::string& gpu : request.gpus) {
      if (grantable(gpu) && freeSet.insert(gpu).second) free.push_back(gpu);
    }
    const std::size_t needed = request.amount - granted.size();
    if (free.size() >= needed) {
      std::vector<std::string> chosen;
      try {
        chosen = request.choose(free, needed);
      } catch (...) {
        chosen.clear();  // a chooser's failure must never fail the allocation
      }
      const std::vector<std::string> before = granted;
      bool valid = chosen.size() == needed;
      for (std::size_t i = 0; valid && i < chosen.size(); ++i) {
        valid = freeSet.count(chosen[i]) && grant(chosen[i]);
      }
      if (!valid) {
        for (std::size_t i = before.size(); i < granted.size(); ++i) grantedSet.erase(granted[i]);
        granted = before;
      }
    }
  }
  // ---- end of the placement hook ----
  for (const std::string& gpu : request.gpus) {
    if (granted.size() >= request.amount) break;
    grant(gpu);
  }

  allocation.satisfied = request.amount > 0 && granted.size() == request.amount;
  allocation.records = std::move(kept);
  if (allocation.satisfied) {
    // Keep the host's order in the answer, whatever mix of old and new GPUs it holds.
    for (const std::string& gpu : request.gpus) {
      if (grantedSet.count(gpu)) {
        allocation.granted.push_back(gpu);
        allocation.records.push_back(Record{gpu, request.owner});
      }
    }
  } else {
    // Nothing changes hands; the requester keeps what it had.
    allocation.records.insert(allocation.records.end(), own.begin(), own.end());
  }
  return allocation;
}

namespace {

/// The file's new text: the records, then the junk lines as they were (nothing is lost; the
/// junk is reported on every read until someone removes it).
std::string formatFile(const std::vector<Record>& records, const std::vector<JunkLine>& junk) {
  std::string text = formatRecords(records);
  for (const JunkLine& line : junk) {
    text += line.text;
    text += '\n';
  }
  return text;
}

}  // namespace

Allocation allocate(const fs::path& file, const AllocationRequest& request,
                    std::chrono::milliseconds lockTimeout) {
  LockedFile locked = LockedFile::open(file, /*create=*/true, LOCK_EX, lockTimeout);
  const std::string before = locked.read();
  Allocation allocation = planAllocation(parseRecords(before), request, isRunning);
  const std::string after = formatFile(allocation.records, allocation.junk);
  if (after != before) locked.write(after);
  return allocation;
}

Status readStatus(const fs::path& file, std::chrono::milliseconds lockTimeout) {
  LockedFile locked = LockedFile::open(file, /*create=*/false, LOCK_SH, lockTimeout);
  Status status;
  if (!locked.exists()) return status;
  ParsedRecords parsed = parseRecords(locked.read());
  status.junk = std::move(parsed.junk);
  for (Record& record : parsed.records) {
    const bool running = isRunning(record.owner);
    status.records.push_back(RecordStatus{std::move(record), running});
  }
  return status;
}

std::vector<Record> release(const fs::path& file,
                            const std::function<bool(const Record&)>& predicate,
                            std::chrono::milliseconds lockTimeout) {
  LockedFile locked = LockedFile::open(file, /*create=*/false, LOCK_EX, lockTimeout);
  if (!locked.exists()) return {};
  const std::string before = locked.read();
  ParsedRecords parsed = parseRecords(before);
  std::vector<Record> kept;
  std::vector<Record> released;
  for (Record& record : parsed.records) {
    (predicate(record) ? released : kept).push_back(std::move(record));
  }
  if (!released.empty()) locked.write(formatFile(kept, parsed.junk));
  return released;
}

}  // namespace flink::coordination
