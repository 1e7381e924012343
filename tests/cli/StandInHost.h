// Hosts for the stand-in libnvidia-ml.so.1 (tests/fixtures/nvml), written by the CLI tests that
// need a host of their own rather than one of tests/fixtures/nvml/hosts/.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace flink::testing {

/// The UUID the stand-in hosts below give GPU `index`: "GPU-10000000-0000-4000-8000-000000000001"
/// for GPU 1, its first digit and last group telling the index.
std::string standInUuid(unsigned index);

/// The members of an H200 of 143771 MiB, MIG mode off, after its UUID and name.
inline constexpr const char* kH200Members = R"("memory_total_mib": 143771, "mig_enabled": false)";

/// Writes `file`: a host of `count` NVIDIA H200s, GPU i with standInUuid(i) and, after its UUID
/// and name, `members[i]` where given and not empty, else kH200Members.
void writeStandInHost(const std::filesystem::path& file, unsigned count,
                      const std::vector<std::string>& members = {});

/// The CPUs this test may use (its affinity), ascending: what `exec --bind-cpus` intersects with.
std::vector<unsigned> allowedCpus();

/// A unix socket bound at `path`, standing for an MPS control daemon's `control` socket (what
/// exec looks for before it runs an MPS share's command): bound and listening, never accepting.
/// Removed with the object.
class BoundSocket {
 public:
  explicit BoundSocket(const std::filesystem::path& path);
  ~BoundSocket();
  BoundSocket(const BoundSocket&) = delete;
  BoundSocket& operator=(const BoundSocket&) = delete;

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

}  // namespace flink::testing
