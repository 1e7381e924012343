// The one error of the coordination layer.
#pragma once

#include <cerrno>
#include <stdexcept>
#include <string>

namespace flink::store {

/// A file of the store (the coordination file, its journal, a file or folder beside it) cannot be
/// used. cause() says what went wrong, for a caller or a test that acts on it; the message is for
/// people: it names the path and the cause, and whether the file was left as it was.
class StoreError : public std::runtime_error {
 public:
  enum class Cause {
    /// Not a file to use: a symbolic link or a directory at the path, more bytes than the file
    /// may hold, a journal or a file beside the coordination file that fails the trust rules, a
    /// lease name that is not a plain file name.
    kRefused,
    /// This user may not open, create, lock or write it (EACCES, EPERM, EROFS, ENOLCK), or may not
    /// write the coordination file that what it would write beside belongs to.
    kAccessDenied,
    /// Its lock is held by another process: still, when the time-out ended; a lease, at all.
    kLocked,
    /// A program that does not hold its lock kept replacing, changing or removing it.
    kInterfered,
    /// Any other failure of a system call: open, stat, read, write, truncate, list.
    kIo,
  };

  StoreError(Cause cause, const std::string& message)
      : std::runtime_error(message), cause_(cause) {}

  Cause cause() const noexcept { return cause_; }

  /// kAccessDenied for an errno that says this user may not (EACCES, EPERM, EROFS), else kIo.
  static Cause causeOf(int error) noexcept {
    return error == EACCES || error == EPERM || error == EROFS ? Cause::kAccessDenied : Cause::kIo;
  }

 private:
  Cause cause_;
};

}  // namespace flink::store
