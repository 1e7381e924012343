// The one error of the coordination layer.
#pragma once

#include <stdexcept>

namespace flink::store {

/// The coordination file cannot be used: a symlink or not a regular file at the path, a lock that
/// is not released in time, a file this user may not write, an I/O error. The message names the
/// path and the cause, and whether the file was left as it was.
class StoreError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace flink::store
