// The host's facts as /proc tells them. See HostFacts.h.
#include "host/liveness/HostFacts.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <string_view>

#include "process/FileDescriptor.h"
#include "util/Strings.h"

namespace flink::liveness {
namespace {

using process::FileDescriptor;

template <typename Int>
std::optional<Int> parseDecimal(std::string_view text) {
  Int value{};
  if (text.empty() || text.front() == '-' || text.front() == '+') return std::nullopt;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

/// A small file of /proc read whole in one read(2) (what the kernel gives at once); nullopt when
/// it cannot be opened or read. Plain open/read: this runs in every discovery, and iostreams'
/// set-up costs more than the read.
template <std::size_t N>
std::optional<std::string_view> readProcFile(const char* path, char (&buffer)[N]) {
  FileDescriptor fd(::open(path, O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  ssize_t size;
  do {
    size = ::read(fd.get(), buffer, N);
  } while (size < 0 && errno == EINTR);
  if (size <= 0) return std::nullopt;
  return std::string_view(buffer, static_cast<std::size_t>(size));
}

std::optional<std::uint64_t> namespaceInode(const char* path) {
  struct stat info {};
  if (::stat(path, &info) != 0) return std::nullopt;
  return static_cast<std::uint64_t>(info.st_ino);
}

/// A boot id as the kernel writes it (a UUID): hex digits and dashes, at most 64 characters.
bool isBootId(std::string_view text) {
  if (text.empty() || text.size() > 64) return false;
  return std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == '-';
  });
}

/// Whether /proc/self is this process: /proc is mounted, for this pid namespace.
bool procIsOurs() {
  char target[32];
  const ssize_t size = ::readlink("/proc/self", target, sizeof target - 1);
  if (size <= 0) return false;
  const std::optional<pid_t> pid =
      parseDecimal<pid_t>(std::string_view(target, static_cast<std::size_t>(size)));
  return pid && *pid == ::getpid();
}

/// What a fork may change of the reader: its pid, and after unshare(CLONE_NEWPID) in the parent,
/// its pid namespace and whether /proc is that namespace's. System calls only, no allocation: it
/// also runs in the child of a fork (SystemFacts).
void readProcessFacts(Reader& reader) {
  reader.pid = ::getpid();
  reader.ownProc = procIsOurs();
  // /proc/self resolves to this process wherever it resolves at all (through a /proc of an
  // ancestor namespace too, by that namespace's pid), so its ns links are ours; but only /proc
  // of our own namespace shows the processes our pids name.
  reader.pidNamespace = namespaceInode("/proc/self/ns/pid");
}

Reader readReader() {
  Reader reader;
  readProcessFacts(reader);
  reader.mountNamespace = namespaceInode("/proc/self/ns/mnt");
  char buffer[128];
  if (const std::optional<std::string_view> text =
          readProcFile("/proc/sys/kernel/random/boot_id", buffer)) {
    const std::string_view id = strings::trim(*text);
    if (isBootId(id)) reader.bootId = std::string(id);
  }
  return reader;
}

}  // namespace

std::optional<std::int64_t> ownBoottimeOffsetTicks() {
  // The file tells the offsets of the namespace this process's children enter
  // (time_for_children): this process's own only while it is in that one. One that unshared
  // CLONE_NEWTIME is not, until a child of its fork() is.
  const std::optional<std::uint64_t> own = namespaceInode("/proc/self/ns/time");
  const std::optional<std::uint64_t> children = namespaceInode("/proc/self/ns/time_for_children");
  if (own && children && *own != *children) return std::nullopt;
  char buffer[256];
  const std::optional<std::string_view> text = readProcFile("/proc/self/timens_offsets", buffer);
  if (!text) return 0;  // a kernel without time namespaces, or no /proc: no offset to tell
  const long ticks = ::sysconf(_SC_CLK_TCK);
  return boottimeOffsetTicks(*text, ticks > 0 ? ticks : 100);
}

namespace {

/// Whether the process `pid` has a thread besides its leader (/proc/<pid>/status "Threads:").
bool hasOtherThreads(pid_t pid) {
  char path[40];
  std::snprintf(path, sizeof path, "/proc/%d/status", static_cast<int>(pid));
  char buffer[4096];
  const std::optional<std::string_view> text = readProcFile(path, buffer);
  if (!text) return false;
  const std::size_t at = text->find("\nThreads:");
  if (at == std::string_view::npos) return false;
  std::string_view rest = text->substr(at + 9);
  const std::optional<unsigned> threads = parseDecimal<unsigned>(strings::nextToken(rest));
  return threads && *threads > 1;
}

/// What kill(pid, 0) tells: the pid exists (also when this user may not signal it, EPERM).
ProcessLook byKill(pid_t pid) {
  ProcessLook look;
  if (::kill(pid, 0) == 0 || errno == EPERM) look.state = ProcessLook::State::kHidden;
  return look;
}

class SystemFacts;
/// The one SystemFacts, once it is made: what the fork handler updates.
std::atomic<SystemFacts*> gSystemFacts{nullptr};

class SystemFacts final : public HostFacts {
 public:
  // The facts are read once, but a child of fork() is another process: its pid is its own (a
  // sandbox without its own /proc reads its own start time through /proc/self by that pid), and
  // where the parent unshared its pid or time namespace, so are its namespace, what /proc shows
  // it and the boot-time offset its start times are read with. The handler runs in the child,
  // where only the forking thread exists: nothing reads these meanwhile. Registered last, when
  // the facts are whole.
  SystemFacts() {
    gSystemFacts.store(this);
    ::pthread_atfork(nullptr, nullptr, [] {
      if (SystemFacts* facts = gSystemFacts.load()) {
        readProcessFacts(facts->reader_);
        facts->offset_ = ownBoottimeOffsetTicks();
        facts->ownStart_.store(kUnread, std::memory_order_relaxed);
      }
    });
  }
  ~SystemFacts() override { gSystemFacts.store(nullptr); }
  SystemFacts(const SystemFacts&) = delete;
  SystemFacts& operator=(const SystemFacts&) = delete;

  const Reader& reader() override { return reader_; }

  ProcessLook process(pid_t pid) override {
    if (pid <= 0) return {};
    if (pid == reader_.pid) return self();
    if (!reader_.ownProc) return byKill(pid);
    // A pid that no process of this namespace has is told by the kernel without a path lookup:
    // a file of many gone owners' records asks this of each.
    if (::kill(pid, 0) != 0 && errno == ESRCH) return {};
    char path[32];
    std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
    return readStat(path, pid);
  }

  std::optional<FlockTable> flocks() override { return FlockTable::read(); }

  std::optional<std::string> processName(pid_t pid) override {
    if (pid <= 0 || !reader_.ownProc) return std::nullopt;
    char path[40];
    std::snprintf(path, sizeof path, "/proc/%d/comm", static_cast<int>(pid));
    char buffer[64];
    const std::optional<std::string_view> text = readProcFile(path, buffer);
    if (!text) return std::nullopt;
    std::string name(strings::trim(*text));
    if (name.empty()) return std::nullopt;
    // TASK_COMM_LEN is 16 with its NUL: a longer name was cut, and argv[0] may tell it whole.
    if (name.size() == 15) {
      std::snprintf(path, sizeof path, "/proc/%d/cmdline", static_cast<int>(pid));
      char command[4096];
      if (const std::optional<std::string_view> line = readProcFile(path, command)) {
        std::string_view first = line->substr(0, line->find('\0'));
        first = first.substr(first.rfind('/') == std::string_view::npos ? 0 : first.rfind('/') + 1);
        if (first.size() > name.size() && first.starts_with(name)) name = std::string(first);
      }
    }
    return name;
  }

  std::vector<pid_t> processesNamed(std::string_view wanted) override {
    std::vector<pid_t> found;
    if (!reader_.ownProc) return found;
    DIR* folder = ::opendir("/proc");
    if (folder == nullptr) return found;
    while (const struct dirent* entry = ::readdir(folder)) {
      const std::optional<pid_t> pid = parseDecimal<pid_t>(entry->d_name);
      if (!pid) continue;
      char path[40];
      std::snprintf(path, sizeof path, "/proc/%d/comm", static_cast<int>(*pid));
      char buffer[64];
      const std::optional<std::string_view> text = readProcFile(path, buffer);
      if (text && strings::trim(*text) == wanted) found.push_back(*pid);
    }
    ::closedir(folder);
    return found;
  }

 private:
  static constexpr std::uint64_t kUnread = ~std::uint64_t{0};

  /// This process: it runs (it is asking), its parent is its parent now (getppid(): a parent's
  /// death reparents it), and its start time, which never changes, is read once (every
  /// discovery records and checks its owner, this process).
  ProcessLook self() {
    const std::uint64_t start = ownStart_.load(std::memory_order_relaxed);
    if (start != kUnread) {
      ProcessLook look;
      look.state = ProcessLook::State::kRunning;
      look.startTime = start;
      look.parent = ::getppid();
      return look;
    }
    // Through a /proc of an ancestor namespace too, /proc/self is this process.
    const ProcessLook look = readStat("/proc/self/stat", reader_.pid);
    if (look.state == ProcessLook::State::kRunning && look.startTime) {
      ownStart_.store(*look.startTime, std::memory_order_relaxed);
    }
    return look;
  }

  /// The process `pid` as its stat file at `path` tells.
  ProcessLook readStat(const char* path, pid_t pid) const {
    // The line is well under 1 KiB: a 64-byte command name at most, and some fifty numbers.
    char buffer[2048];
    const std::optional<std::string_view> text = readProcFile(path, buffer);
    // No /proc entry of it: gone, or hidden from this user (/proc mounted hidepid=2 or
    // invisible, systemd's ProtectProc=): the kernel itself tells.
    if (!text) return byKill(pid);
    // The fields after the command name, which is in parentheses and may itself hold spaces and
    // parentheses, are split in place.
    const std::size_t close = text->rfind(')');
    if (close == std::string_view::npos) return byKill(pid);
    std::string_view rest = text->substr(close + 1);
    ProcessLook look;
    const std::string_view state = strings::nextToken(rest);
    if (state.empty()) return look;  // absent: an entry without fields
    const bool dead = state == "Z" || state == "X" || state == "x";
    // A leader that called pthread_exit shows as a zombie while its other threads run on.
    look.state =
        dead && !hasOtherThreads(pid) ? ProcessLook::State::kDead : ProcessLook::State::kRunning;
    look.parent = parseDecimal<pid_t>(strings::nextToken(rest));  // field 4
    // Field 22 (starttime) is the 18th after the parent.
    std::string_view field;
    for (int skipped = 0; skipped < 18; ++skipped) field = strings::nextToken(rest);
    // The kernel adds the reader's time namespace's boot-time offset: taken away, every reader
    // of the host (a container in a time namespace of its own too) sees one start time, within a
    // tick (sameStartTime). Where that offset cannot be told, no start time is known (fail
    // closed: a process whose pid runs counts as running).
    const std::optional<std::uint64_t> start = parseDecimal<std::uint64_t>(field);
    if (start && offset_) {
      look.startTime = static_cast<std::uint64_t>(static_cast<std::int64_t>(*start) - *offset_);
    }
    return look;
  }

  Reader reader_ = readReader();
  std::optional<std::int64_t> offset_ = ownBoottimeOffsetTicks();
  /// This process's start time once read (kUnread before; again in a child of fork()).
  std::atomic<std::uint64_t> ownStart_{kUnread};
};

std::string lockId(std::uint64_t device, std::uint64_t inode) {
  // /proc/locks' form: major:minor:inode, the numbers of the device in hex.
  char id[64];
  std::snprintf(id, sizeof id, "%02x:%02x:%llu", ::major(static_cast<dev_t>(device)),
                ::minor(static_cast<dev_t>(device)), static_cast<unsigned long long>(inode));
  return id;
}

}  // namespace

std::int64_t boottimeOffsetTicks(std::string_view text, long ticksPerSecond) noexcept {
  const std::size_t at = text.find("boottime");
  if (at == std::string_view::npos) return 0;
  std::string_view rest = text.substr(at + 8);
  std::int64_t seconds = 0;
  std::int64_t nanoseconds = 0;
  const std::string_view secondsText = strings::nextToken(rest);
  const std::string_view nanosecondsText = strings::nextToken(rest);
  if (std::from_chars(secondsText.data(), secondsText.data() + secondsText.size(), seconds).ec !=
          std::errc() ||
      std::from_chars(nanosecondsText.data(), nanosecondsText.data() + nanosecondsText.size(),
                      nanoseconds)
              .ec != std::errc()) {
    return 0;
  }
  // The kernel's form: the nanoseconds within [0, 1 s), added to the seconds (-1 500000000 is
  // half a second back).
  constexpr std::int64_t kNanosecondsPerSecond = 1000000000;
  if (nanoseconds < 0 || nanoseconds >= kNanosecondsPerSecond) return 0;
  // Rounded down, as the kernel rounds the start time it shows: the two roundings can put one
  // process's start a tick apart for two readers (sameStartTime). The whole seconds' ticks and the
  // fraction's apart: an offset of years in nanoseconds times the ticks would not fit.
  const std::int64_t perSecond = ticksPerSecond > 0 ? ticksPerSecond : 100;
  std::int64_t whole = 0;
  if (__builtin_mul_overflow(seconds, perSecond, &whole)) return 0;
  return whole + nanoseconds * perSecond / kNanosecondsPerSecond;
}

HostFacts& HostFacts::system() {
  static SystemFacts facts;
  return facts;
}

const Reader& HostFacts::readerOr(const std::optional<Reader>& given) {
  return given ? *given : system().reader();
}

std::optional<FlockTable> FlockTable::read() {
  FileDescriptor fd(::open("/proc/locks", O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  // Whole: a holder must not hide behind other users' locks. Bounded all the same.
  std::string text;
  // Two pages of stack: on a new thread or process each page touched first faults.
  char buffer[8192];
  ssize_t n;
  while ((n = ::read(fd.get(), buffer, sizeof buffer)) > 0) {
    text.append(buffer, static_cast<std::size_t>(n));
    if (text.size() > (std::size_t{64} << 20)) return std::nullopt;
  }
  if (n < 0) return std::nullopt;
  return parse(text);
}

FlockTable FlockTable::parse(std::string_view text) {
  FlockTable table;
  for (std::string_view line : strings::split(text, '\n')) {
    // "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; a blocked waiter's line starts
    // "1: -> FLOCK ...": it holds nothing, but will hold it next.
    std::string_view rest = line;
    strings::nextToken(rest);  // "1:"
    std::string_view kind = strings::nextToken(rest);
    const bool waiting = kind == "->";
    if (waiting) kind = strings::nextToken(rest);
    if (kind != "FLOCK") continue;
    strings::nextToken(rest);  // ADVISORY
    strings::nextToken(rest);  // WRITE / READ
    const std::string_view pidText = strings::nextToken(rest);
    const std::string_view id = strings::nextToken(rest);
    pid_t pid = 0;
    const auto [end, error] = std::from_chars(pidText.data(), pidText.data() + pidText.size(), pid);
    // A holder that this pid namespace cannot see shows as -1 or 0: held all the same.
    if (error != std::errc() || end != pidText.data() + pidText.size() || pid < 0) pid = 0;
    if (waiting) {
      table.waiters_.emplace_back(std::string(id), pid);
    } else {
      table.holders_.emplace(std::string(id), pid);
    }
  }
  return table;
}

void FlockTable::add(std::uint64_t device, std::uint64_t inode, pid_t holder) {
  holders_.emplace(lockId(device, inode), holder);
}

bool FlockTable::held(std::uint64_t device, std::uint64_t inode) const {
  return holders_.count(lockId(device, inode)) > 0;
}

std::vector<FlockTable::Lock> FlockTable::onDevice(std::uint64_t device) const {
  // "maj:min:" of lockId, then the inode in decimal.
  std::string prefix = lockId(device, 0);
  prefix.resize(prefix.size() - 1);
  std::vector<Lock> locks;
  const auto add = [&](const std::string& id, pid_t pid, bool waiting) {
    if (!id.starts_with(prefix)) return;
    const std::string_view inode = std::string_view(id).substr(prefix.size());
    if (const std::optional<std::uint64_t> value = parseDecimal<std::uint64_t>(inode)) {
      locks.push_back({*value, pid, waiting});
    }
  };
  for (const auto& [id, pid] : holders_) add(id, pid, false);
  for (const auto& [id, pid] : waiters_) add(id, pid, true);
  return locks;
}

std::optional<pid_t> FlockTable::holder(std::uint64_t device, std::uint64_t inode) const {
  const auto it = holders_.find(lockId(device, inode));
  if (it == holders_.end() || it->second <= 0) return std::nullopt;
  return it->second;
}

}  // namespace flink::liveness
