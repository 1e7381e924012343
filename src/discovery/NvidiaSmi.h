// How the default discovery learns which NVIDIA GPUs a host has: through nvidia-smi.
//
// The rules are those of the earlier bash nvidia-gpu-discovery.sh, so that its users see the same
// results and messages: `nvidia-smi --query-gpu=index --format=csv,noheader` is run (found on
// PATH, then in the folders drivers usually install it into); each output line that is a
// non-negative decimal integer is a GPU index; any other non-blank line (an error, a warning) is
// never a GPU and is passed on as `nvidia-smi: <line>`. Indices printed together with a non-zero
// exit code are used, with a warning (nvidia-smi exits 14 when an infoROM is corrupted but still
// lists every GPU). No index at all is an error naming the cause.
//
// Enumeration sits behind GpuEnumerator so that other sources (NVML, an explicit list) can take
// nvidia-smi's place without the allocation logic knowing.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "discovery/GpuEnumerator.h"
#include "process/Subprocess.h"

namespace flink::discovery {

/// Shorter than the driver's own 10 s, so that a hanging nvidia-smi is reported by us, with its
/// output, rather than the whole discovery being killed without a word.
inline constexpr std::chrono::seconds kDefaultNvidiaSmiTimeout{8};

/// The folders NVIDIA drivers and container toolkits put nvidia-smi into, looked at after PATH
/// (a worker started by a service manager often has a PATH without them).
const std::vector<std::filesystem::path>& defaultNvidiaSmiFolders();

/// A time-out read from the environment, with a note when the value had to be ignored.
struct TimeoutSetting {
  std::chrono::seconds timeout = kDefaultNvidiaSmiTimeout;
  std::optional<std::string> note;
};

/// Reads NVIDIA_SMI_TIMEOUT's value (nullptr: unset): whole seconds, 1 to 99999. Anything else
/// gives the default and a note saying so, as the bash script did.
TimeoutSetting parseNvidiaSmiTimeout(const char* value);

/// Where nvidia-smi is, and every folder looked in to find out (for the "not found" message).
struct NvidiaSmiLocation {
  std::optional<std::filesystem::path> path;  ///< absolute; nullopt when not found
  std::vector<std::filesystem::path> searched;
};

/// Looks for an executable regular file named nvidia-smi in each folder of `searchPath` (a PATH
/// value; an empty entry is the working directory, as for execvp), then in `folders`; a folder is
/// looked in once even when listed twice.
NvidiaSmiLocation findNvidiaSmi(std::string_view searchPath,
                                const std::vector<std::filesystem::path>& folders);

/// Turns one nvidia-smi run into GPUs or an error, by the rules above. `output` is what it
/// printed (stdout, then stderr); `timeout` is only used in messages.
/// @throws DiscoveryError when no line is an index.
Enumeration interpretNvidiaSmiOutput(std::string_view output,
                                     const process::ProcessOutcome& outcome,
                                     std::chrono::milliseconds timeout);

struct NvidiaSmiOptions {
  /// Where to look first, PATH-style; nullopt: the PATH of this process.
  std::optional<std::string> searchPath;
  /// Where to look next.
  std::vector<std::filesystem::path> folders = defaultNvidiaSmiFolders();
  /// Used instead of searching, when set (tests, or a caller that knows).
  std::optional<std::filesystem::path> executable;
  std::chrono::milliseconds timeout = kDefaultNvidiaSmiTimeout;
};

/// Runs nvidia-smi (never through a shell) and reads its index list.
class NvidiaSmiEnumerator : public GpuEnumerator {
 public:
  explicit NvidiaSmiEnumerator(NvidiaSmiOptions options = {}) : options_(std::move(options)) {}
  /// @throws DiscoveryError: nvidia-smi not found, not startable, failing, hanging, no GPU.
  Enumeration enumerate() override;

 private:
  NvidiaSmiOptions options_;
};

}  // namespace flink::discovery
