// A move-only owner of one POSIX file descriptor: closed exactly once, by its destructor or
// reset(). Every descriptor this library opens lives in one, with O_CLOEXEC set at creation.
#pragma once

#include <utility>

namespace flink::process {

class FileDescriptor {
 public:
  FileDescriptor() noexcept = default;
  explicit FileDescriptor(int fd) noexcept : fd_(fd) {}
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  FileDescriptor& operator=(FileDescriptor&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() { reset(); }

  int get() const noexcept { return fd_; }
  bool valid() const noexcept { return fd_ >= 0; }
  explicit operator bool() const noexcept { return valid(); }

  /// Closes the descriptor held (if any) and takes `fd` instead.
  void reset(int fd = -1) noexcept;

  /// Gives up ownership without closing.
  int release() noexcept { return std::exchange(fd_, -1); }

 private:
  int fd_ = -1;
};

/// Lets the flock this process took on `fd` go (LOCK_UN) when it goes out of scope, before the
/// descriptor is closed, unless handed on (release()). A flock belongs to the open file
/// description, which a child of fork() shares: a descriptor merely closed leaves the lock held
/// while a child forked meanwhile (a worker that forks without exec) keeps its copy. Declared
/// after the FileDescriptor it guards, so that it runs first. Not for a lease, whose lock is meant
/// to stay with the children it is passed to (exec's command).
class FlockGuard {
 public:
  explicit FlockGuard(int fd) noexcept : fd_(fd) {}
  FlockGuard(const FlockGuard&) = delete;
  FlockGuard& operator=(const FlockGuard&) = delete;
  ~FlockGuard();

  /// The lock is someone else's to let go now.
  void release() noexcept { fd_ = -1; }

 private:
  int fd_;
};

/// The two ends of a pipe, both O_CLOEXEC. @throws std::system_error.
struct Pipe {
  FileDescriptor readEnd;
  FileDescriptor writeEnd;
  static Pipe create();
};

}  // namespace flink::process
