#include "process/FileDescriptor.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace flink::process {

void FileDescriptor::reset(int fd) noexcept {
  if (fd_ >= 0) {
    // POSIX leaves the descriptor's state unspecified after EINTR; on Linux it is closed, so a
    // retry could close a descriptor another thread just opened. Never retry close().
    ::close(fd_);
  }
  fd_ = fd;
}

FlockGuard::~FlockGuard() {
  if (fd_ >= 0) (void)::flock(fd_, LOCK_UN);
}

namespace {

// Moves a descriptor to 3 or above, so that it never lands on a standard stream of a host that
// started with one of them closed (dup2 onto itself would not clear O_CLOEXEC in the child).
FileDescriptor aboveStandardStreams(FileDescriptor fd) {
  if (fd.get() > STDERR_FILENO) return fd;
  const int moved = ::fcntl(fd.get(), F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
  if (moved < 0) throw std::system_error(errno, std::generic_category(), "fcntl(F_DUPFD_CLOEXEC)");
  return FileDescriptor(moved);
}

}  // namespace

Pipe Pipe::create() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw std::system_error(errno, std::generic_category(), "pipe2");
  }
  Pipe pipe{FileDescriptor(fds[0]), FileDescriptor(fds[1])};
  pipe.readEnd = aboveStandardStreams(std::move(pipe.readEnd));
  pipe.writeEnd = aboveStandardStreams(std::move(pipe.writeEnd));
  return pipe;
}

}  // namespace flink::process
