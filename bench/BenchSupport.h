// Shared set-up of the two benchmark programs (driver_bench, cli_bench): the trivial discovery
// script they all run, and a main() that makes one run compare its benchmarks fairly.
//
// The script is the cheapest one the driver accepts (`#!/bin/sh` + `echo 0,1`), so that what the
// benchmarks measure is the cost of starting and finishing a process, which is what the driver
// and the CLI add overhead to, not the cost of a real nvidia-smi.
#pragma once

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <benchmark/benchmark.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace flink::bench {

/// A fresh temporary folder holding the discovery script; both are removed when this goes.
class TempDiscoveryScript {
 public:
  TempDiscoveryScript() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/flink-gpu-bench-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::system_error(errno, std::generic_category(), "mkdtemp " + pattern);
    }
    dir_ = pattern;
    script_ = dir_ / "discover.sh";
    {
      // Closed before the first exec: a file still open for writing cannot be run (ETXTBSY).
      std::ofstream out(script_, std::ios::binary | std::ios::trunc);
      out << "#!/bin/sh\necho 0,1\n";
      if (!out.flush()) throw std::runtime_error("cannot write " + script_.string());
    }
    if (::chmod(script_.c_str(), 0755) != 0) {
      throw std::system_error(errno, std::generic_category(), "chmod " + script_.string());
    }
  }
  ~TempDiscoveryScript() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  TempDiscoveryScript(const TempDiscoveryScript&) = delete;
  TempDiscoveryScript& operator=(const TempDiscoveryScript&) = delete;

  const std::filesystem::path& path() const noexcept { return script_; }

 private:
  std::filesystem::path dir_;
  std::filesystem::path script_;
};

/// The script of this run. Benchmarks are registered statically, before main() has made it, so
/// they read it through this pointer at run time.
inline const TempDiscoveryScript* gScript = nullptr;

inline const std::string& scriptPath() {
  static const std::string path = gScript->path().string();
  return path;
}

/// Google Benchmark's main, with one default changed: repetitions of different benchmarks are
/// interleaved in random order (--benchmark_enable_random_interleaving). On a noisy 2-core
/// machine, a slow patch (another build, a cron job) then spreads over every benchmark instead
/// of landing on whichever ran at that moment, which is what makes their ratio trustworthy.
/// A flag on the command line still wins: later flags override earlier ones.
inline int benchMain(int argc, char** argv) {
  TempDiscoveryScript script;
  gScript = &script;

  std::string interleave = "--benchmark_enable_random_interleaving=true";
  std::vector<char*> args{argv[0], interleave.data()};
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  int count = static_cast<int>(args.size());
  args.push_back(nullptr);

  benchmark::Initialize(&count, args.data());
  if (benchmark::ReportUnrecognizedArguments(count, args.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  gScript = nullptr;
  return 0;
}

}  // namespace flink::bench
