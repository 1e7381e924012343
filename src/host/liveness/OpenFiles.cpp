#include "host/liveness/OpenFiles.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <climits>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>

#include "host/liveness/HostFacts.h"

namespace flink::liveness {
namespace {

/// The kernel's number for the initial pid namespace's inode (PROC_PID_INIT_INO): a reader there
/// sees every process of the host.
constexpr std::uint64_t kInitialPidNamespace = 0xEFFFFFFCU;

/// At most this many descriptors of one process are looked at (a process may hold a million).
constexpr std::size_t kMostDescriptors = 65536;

struct DirCloser {
  void operator()(DIR* dir) const noexcept { ::closedir(dir); }
};
using Dir = std::unique_ptr<DIR, DirCloser>;

bool isPid(std::string_view name, pid_t& pid) {
  const auto [end, error] = std::from_chars(name.data(), name.data() + name.size(), pid);
  return error == std::errc() && end == name.data() + name.size() && pid > 0;
}

enum class Seen { kFound, kNone, kUnseen, kGone };

/// Looks through `pid`'s descriptors for one of (device, inode).
Seen lookAt(pid_t pid, std::uint64_t device, std::uint64_t inode, OpenFile& found) {
  const std::string folder = "/proc/" + std::to_string(pid) + "/fd";
  const Dir dir(::opendir(folder.c_str()));
  if (!dir) {
    if (errno == ENOENT || errno == ESRCH) return Seen::kGone;
    return ::kill(pid, 0) != 0 && errno == ESRCH ? Seen::kGone : Seen::kUnseen;
  }
  std::size_t looked = 0;
  while (const dirent* entry = ::readdir(dir.get())) {
    if (entry->d_name[0] == '.') continue;
    if (++looked > kMostDescriptors) return Seen::kUnseen;
    const std::string path = folder + "/" + entry->d_name;
    struct stat info {};
    if (::stat(path.c_str(), &info) != 0 || static_cast<std::uint64_t>(info.st_dev) != device ||
        static_cast<std::uint64_t>(info.st_ino) != inode) {
      continue;
    }
    char target[PATH_MAX];
    const ssize_t size = ::readlink(path.c_str(), target, sizeof target);
    if (size <= 0) continue;
    found = {pid, std::string(target, static_cast<std::size_t>(size))};
    return Seen::kFound;
  }
  return Seen::kNone;
}

/// Whether this process sees, in its /proc, every process of the host.
bool seesEveryProcess() {
  static const bool every = [] {
    const Reader& reader = HostFacts::system().reader();
    return reader.ownProc && reader.pidNamespace == kInitialPidNamespace;
  }();
  return every;
}

OpenFileLook lookAtEveryProcess(std::uint64_t device, std::uint64_t inode) {
  OpenFileLook look;
  const Dir proc(::opendir("/proc"));
  if (!proc) return look;
  bool unseen = false;
  while (const dirent* entry = ::readdir(proc.get())) {
    pid_t pid = 0;
    if (!isPid(entry->d_name, pid) || pid == ::getpid()) continue;
    OpenFile found;
    switch (lookAt(pid, device, inode, found)) {
      case Seen::kFound:
        look.found = std::move(found);
        return look;
      case Seen::kUnseen:
        unseen = true;
        break;
      case Seen::kNone:
      case Seen::kGone:
        break;
    }
  }
  look.none = !unseen && seesEveryProcess();
  return look;
}

}  // namespace

std::string deletedLinkOf(const std::string& path) { return path + " (deleted)"; }

OpenFileLook openFileOfLock(pid_t holder, std::uint64_t device, std::uint64_t inode) {
  if (holder > 0) {
    OpenFileLook look;
    OpenFile found;
    switch (lookAt(holder, device, inode, found)) {
      case Seen::kFound:
        look.found = std::move(found);
        return look;
      case Seen::kNone:
        // Its taker holds no descriptor of it: it passed the descriptor on (a child) and closed
        // its own, or the number is another process's now. Whoever has the file open holds it.
        break;
      case Seen::kUnseen:
        return look;
      case Seen::kGone:
        break;
    }
  }
  return lookAtEveryProcess(device, inode);
}

std::vector<FileKey> flocksHeldByThisProcess() {
  std::vector<FileKey> held;
  const Dir dir(::opendir("/proc/self/fd"));
  if (!dir) return held;
  std::size_t looked = 0;
  while (const dirent* entry = ::readdir(dir.get())) {
    if (entry->d_name[0] == '.') continue;
    if (++looked > kMostDescriptors) break;
    const std::string name = entry->d_name;
    struct stat info {};
    if (::stat(("/proc/self/fd/" + name).c_str(), &info) != 0 || !S_ISREG(info.st_mode)) continue;
    // fdinfo lists the locks held through this open file description: "lock:\t1: FLOCK …".
    std::ifstream fdinfo("/proc/self/fdinfo/" + name);
    std::string line;
    while (std::getline(fdinfo, line)) {
      if (line.starts_with("lock:") && line.find("FLOCK") != std::string::npos) {
        held.push_back(
            {static_cast<std::uint64_t>(info.st_dev), static_cast<std::uint64_t>(info.st_ino)});
        break;
      }
    }
  }
  return held;
}

}  // namespace flink::liveness
