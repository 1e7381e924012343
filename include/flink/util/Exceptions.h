// The error kinds of Flink's GPU driver, as C++ exception types.
//
// Each mirrors the Java exception that Flink's driver throws in the same situation, so that
// Flink's documentation maps one to one. Where Flink throws IllegalArgumentException this
// library throws std::invalid_argument instead of a type of its own.
#pragma once

#include <stdexcept>
#include <string>

namespace flink {

/// Base of checked Flink errors (org.apache.flink.util.FlinkException): a discovery script that
/// cannot be run, exits non-zero, is killed by a signal or prints something that is not GPUs.
class FlinkException : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A configuration value is missing or invalid
/// (org.apache.flink.configuration.IllegalConfigurationException). The message names the key.
class IllegalConfigurationException : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A file named by the configuration does not exist (java.io.FileNotFoundException).
/// The message holds the absolute path that was looked for.
class FileNotFoundException : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// An operation did not finish in its time limit (java.util.concurrent.TimeoutException).
class TimeoutException : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace flink
