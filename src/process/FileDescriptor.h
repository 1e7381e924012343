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

/// The two ends of a pipe, both O_CLOEXEC. @throws std::system_error.
struct Pipe {
  FileDescriptor readEnd;
  FileDescriptor writeEnd;
  static Pipe create();
};

}  // namespace flink::process
