// status_bench: whether the commands that read the coordination file and the health records take
// about as long as reading them, whatever their size: `flink-gpu status` (text, JSON, Prometheus),
// `check` and `release` on a file of 100,000 records (and of 10,000, so that the two say how the
// time grows), status and check on 16,000 health lines, watch's update of those lines, each next
// to a bare read of the same file; and the peak memory of `release --junk` against the size of the
// file it repairs.
//
// The stand-in host, made at start-up in a temporary folder (`--status-bench-files=DIR` writes its
// files to DIR and exits, to measure another build by hand, the holder being the process that ran
// it):
//   host.json      8 GPUs for the tests' stand-in NVML ($FLINK_GPU_NVML_LIBRARY,
//                  $FAKE_NVML_DEVICES), GPUs 6 and 7 in MIG mode with two instances each.
//   records-N      N records (100,000 fill 3 MiB of the 4 MiB limit): GPUs 0-5 held by a live
//                  holder process this benchmark forks; then, in turn, a GPU by a UUID this host
//                  does not have, an index it does not have, one of its own GPUs (8 of them) and
//                  a MIG instance it does not have, the first three of gone owners (pids above
//                  any pid_max), the last held by the holder. records-10000 is the first 10,000.
//   health         the holder's 6 records, and beside them 16,000 health lines: in turn a drain
//                  of a GPU this host does not have (by index and UUID), a verdict of a MIG
//                  instance it does not have, and a verdict of one of its own GPUs.
//   junk-*         for release --junk, files of `size` MiB: `yes` (a record, then "y" lines: one
//                  line every two bytes, all removed, the file cut to one line), `mixed` (one
//                  record every 10 lines of 100 bytes: compacted) and `some` (a third of the lines
//                  junk: blanked in place, so the new text is as large as the old one).
//
//   BM_PairedRecords/N    one iteration runs, in rotating order and each timed: `cat` of the file
//                         (the bare read), `flink-gpu status`, `status --format json`, `status
//                         --format prometheus`, `status --gpu 0` (counter name `gpu`: the records
//                         of one GPU, picked from all), `check`, and `release --owner P`, P a gone
//                         owner of one record (so it reads, judges, blanks one line and writes; the
//                         file is put back outside the timing). Counters `<command>_ratio`: its
//                         time over cat's; `<command>_ms`: its mean.
//   BM_PairedHealth       the same with `cat` of the health file, status and check.
//   BM_PairedWatchUpdate  in-process: watch's update for one verdict (health::recordVerdicts: read,
//                         replace the 667 verdicts of that GPU, write) against a bare read of the
//                         health file (open, read whole, close); counter `watch_ratio`. The file is
//                         put back outside the timing.
//   BM_FullFileAllocation/kind  one coordinated discovery (`nvidia-gpu-discovery 1 --gpus 0,…,7
//                         --enable-coordination-mode`, the program Flink's script runs, for the
//                         holder) from a full file, rewritten before each run: kind 0, 4 MiB of
//                         gone owners' records of the 8 GPUs, a pid each (GPU 0's eighth taken
//                         back); kind 1, 3 MiB of the holder's records of GPUs the host does not
//                         have. Its time (`run_ms`), and its peak under ptrace as below
//                         (`peak_MiB`).
//   BM_FullFileStatus/gpu  `flink-gpu status` (gpu 0) and `status --gpu 0` (gpu 1) on the first
//                         of those files: `run_ms`, `peak_MiB` as above.
//   BM_ReleaseJunkMemory/MiB/kind  one run of `release --junk` under ptrace, read at its exit
//                         (as cli_bench reads flink-gpu's peak): counters `peak_MiB`, `file_MiB`,
//                         `peak_per_file` (their ratio), and `version_MiB`, the peak of
//                         `flink-gpu --version` (what any run of it holds). Not a time.
//
// bench/run-benchmarks.sh prints the ratios, the growth from 10,000 records to 100,000 and the
// peaks. Wall-clock time is what counts (UseRealTime).
#include <fcntl.h>
#include <unistd.h>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "BenchSupport.h"
#include "host/coordination/Coordination.h"
#include "host/health/HealthRecords.h"
#include "host/health/Watch.h"

#ifndef FLINK_GPU_EXECUTABLE
#error "FLINK_GPU_EXECUTABLE (the path of flink-gpu) must be defined by the build"
#endif
#ifndef FLINK_GPU_NVIDIA_DISCOVERY
#error "FLINK_GPU_NVIDIA_DISCOVERY (the path of nvidia-gpu-discovery) must be defined by the build"
#endif
#ifndef FLINK_GPU_FAKE_NVML
#error "FLINK_GPU_FAKE_NVML (the stand-in libnvidia-ml.so.1) must be set by the build"
#endif

namespace {

namespace fs = std::filesystem;
namespace coordination = flink::coordination;
namespace health = flink::health;
using Clock = std::chrono::steady_clock;

constexpr int kHostGpus = 8;
constexpr int kHealthLines = 16000;
/// No pid_t of Linux reaches it (pid_max is at most 2^22): an owner that is surely gone.
constexpr long kGonePids = 5000000;

std::string hostUuid(int gpu) {
  char uuid[64];
  std::snprintf(uuid, sizeof uuid, "GPU-a000000%d-1111-4222-8333-44440000000%d", gpu, gpu);
  return uuid;
}

std::string hostJson() {
  std::string json = "{\"devices\": [";
  for (int gpu = 0; gpu < kHostGpus; ++gpu) {
    char device[256];
    std::snprintf(device, sizeof device,
                  "%s{\"uuid\": \"%s\", \"name\": \"NVIDIA H200\", \"pci_bus_id\": "
                  "\"00000000:%02X:00.0\", \"memory_total_mib\": 143771, \"minor_number\": %d, "
                  "\"persistence_mode\": true",
                  gpu == 0 ? "" : ", ", hostUuid(gpu).c_str(), 0x19 + 16 * gpu, gpu);
    json += device;
    if (gpu >= 6) {
      json += ", \"mig_enabled\": true, \"mig\": [";
      for (int slot = 0; slot < 2; ++slot) {
        char instance[200];
        std::snprintf(instance, sizeof instance,
                      "%s{\"uuid\": \"MIG-b000000%d-%d111-4222-8333-444400000000\", \"name\": "
                      "\"NVIDIA H200 MIG 1g.18gb\", \"memory_total_mib\": 16384, "
                      "\"gpu_instance_id\": %d, \"compute_instance_id\": 0}",
                      slot == 0 ? "" : ", ", gpu, slot, slot + 1);
        json += instance;
      }
      json += "]";
    }
    json += "}";
  }
  return json + "]}\n";
}

/// The holder's records of GPUs 0-5, as a worker writes them.
std::string heldRecords(pid_t holder) {
  const coordination::Owner owner = coordination::Owner::of(holder);
  std::vector<coordination::Record> records;
  for (int gpu = 0; gpu < 6; ++gpu) records.push_back({std::to_string(gpu), owner, hostUuid(gpu)});
  return coordination::formatRecords(records);
}

/// records-N (see the top of this file): `count` records in all.
std::string recordsText(pid_t holder, int count) {
  std::string text = heldRecords(holder);
  char line[128];
  for (int n = 0; n < count - 6; ++n) {
    const long gone = kGonePids + n;
    switch (n % 4) {
      case 0:
        std::snprintf(line, sizeof line, "GPU-%08x-0000-4000-8000-%012x %ld\n",
                      static_cast<unsigned>(n), static_cast<unsigned>(n), gone);
        break;
      case 1:
        std::snprintf(line, sizeof line, "%d %ld\n", 100 + n, gone);
        break;
      case 2:
        std::snprintf(line, sizeof line, "%d %ld\n", n % kHostGpus, gone);
        break;
      default:
        std::snprintf(line, sizeof line, "MIG-%08x-0000-4000-8000-%012x %d\n",
                      static_cast<unsigned>(n), static_cast<unsigned>(n), static_cast<int>(holder));
    }
    text += line;
  }
  return text;
}

/// The 16,000 health lines (see the top of this file).
std::string healthText() {
  std::string text = "# flink-gpu health records\n";
  char line[256];
  for (int n = 0; n < kHealthLines; ++n) {
    switch (n % 3) {
      case 0:
        std::snprintf(line, sizeof line,
                      "drained\tgpu=%d\tuuid=GPU-%08x-0000-4000-8000-%012x\tsince=1764581000\tuid=0"
                      "\treason=fan%%20noise\n",
                      200000 + n, static_cast<unsigned>(n), static_cast<unsigned>(n));
        break;
      case 1:
        std::snprintf(line, sizeof line,
                      "unhealthy\tgpu=MIG-%08x-1111-4000-8000-%012x\tsince=1764581000\txid=79"
                      "\tsource=watch\treason=critical%%20Xid\n",
                      static_cast<unsigned>(n), static_cast<unsigned>(n));
        break;
      default:
        std::snprintf(line, sizeof line,
                      "unhealthy\tgpu=%d\tuuid=%s\tsince=1764581000\txid=48\tsource=watch"
                      "\treason=double-bit%%20ECC\n",
                      n % kHostGpus, hostUuid(n % kHostGpus).c_str());
    }
    text += line;
  }
  return text;
}

void writeFile(const fs::path& file, std::string_view text) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!out.flush()) throw std::runtime_error("cannot write " + file.string());
}

/// A junk file of about `mib` MiB (see the top of this file), written in pieces: the benchmark
/// itself never holds it.
void writeJunk(const fs::path& file, std::size_t mib, std::string_view kind, pid_t holder) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  // At most `mib` MiB: 256 is what release --junk reads at most (kMaxRepairableFileBytes).
  const std::size_t size = mib << 20;
  std::size_t written = 0;
  std::string chunk;
  bool full = false;
  const auto put = [&](std::string_view text) {
    if (written + text.size() > size) {
      full = true;
      return;
    }
    chunk += text;
    written += text.size();
    if (chunk.size() >= (1 << 20)) {
      out << chunk;
      chunk.clear();
    }
  };
  put("0 " + std::to_string(holder) + "\n");
  const std::string junkLine = std::string(99, 'j') + "\n";
  char record[128];
  for (long n = 1; !full; ++n) {
    if (kind == "yes") {
      put("y\n");
    } else if (kind == "mixed") {
      if (n % 10 == 0) {
        std::snprintf(record, sizeof record, "%ld %ld\n", n % kHostGpus, kGonePids + n);
        put(record);
      } else {
        put(junkLine);
      }
    } else {
      if (n % 3 == 0) {
        put("a line that is not a record\n");
      } else {
        std::snprintf(record, sizeof record, "GPU-%08lx-0000-4000-8000-%012lx %ld\t%ld\n", n, n,
                      kGonePids + n, n);
        put(record);
      }
    }
  }
  out << chunk;
  if (!out.flush()) throw std::runtime_error("cannot write " + file.string());
}

std::string catPath() {
  for (const char* path : {"/usr/bin/cat", "/bin/cat"}) {
    if (::access(path, X_OK) == 0) return path;
  }
  throw std::runtime_error("no cat in /usr/bin or /bin");
}

/// The stand-in host (see the top of this file). Undone (holder killed, folder removed) when this
/// goes; the environment is left as it is, the process being about to exit.
class StandInHost {
 public:
  StandInHost() : dir_(flink::bench::makeTempFolder("flink-gpu-status-bench")) {
    try {
      holder_ = std::make_unique<flink::bench::HolderProcess>();
      writeFiles(dir_, holder_->pid());
      for (const int count : {10000, 100000}) {
        records_[count == 10000 ? 0 : 1] = recordsText(holder_->pid(), count);
      }
      healthText_ = healthText();
      flink::bench::useStandInNvml(FLINK_GPU_FAKE_NVML, dir_ / "host.json");
    } catch (...) {
      cleanUp();
      throw;
    }
  }
  ~StandInHost() { cleanUp(); }
  StandInHost(const StandInHost&) = delete;
  StandInHost& operator=(const StandInHost&) = delete;

  /// Writes host.json, records-10000, records-100000, health and health.health into `dir`, and
  /// with `junk` the junk files of 64 MiB (junk-yes, junk-mixed, junk-some).
  static void writeFiles(const fs::path& dir, pid_t holder, bool junk = false) {
    writeFile(dir / "host.json", hostJson());
    for (const int count : {10000, 100000}) {
      writeFile(dir / ("records-" + std::to_string(count)), recordsText(holder, count));
    }
    writeFile(dir / "health", heldRecords(holder));
    writeFile(dir / "health.health", healthText());
    if (junk) {
      for (const char* kind : {"yes", "mixed", "some"}) {
        writeJunk(dir / (std::string("junk-") + kind), 64, kind, holder);
      }
    }
  }

  const fs::path& dir() const noexcept { return dir_; }
  pid_t holder() const noexcept { return holder_->pid(); }
  fs::path recordsFile(int count) const { return dir_ / ("records-" + std::to_string(count)); }
  /// Puts records-N back as it was made.
  void restoreRecords(int count) const {
    writeFile(recordsFile(count), records_[count == 10000 ? 0 : 1]);
  }
  fs::path healthFile() const { return dir_ / "health"; }
  void restoreHealth() const { writeFile(dir_ / "health.health", healthText_); }

 private:
  void cleanUp() noexcept {
    holder_.reset();
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  fs::path dir_;
  std::unique_ptr<flink::bench::HolderProcess> holder_;
  std::array<std::string, 2> records_;
  std::string healthText_;
};

const StandInHost* gHost = nullptr;

/// One command of a paired benchmark: its argv, the exit codes it may end with (check exits 1
/// when it finds a problem: a health verdict, a junk line), and what to do before each run,
/// outside the timing.
struct Command {
  std::string name;
  std::vector<std::string> argv;
  std::vector<int> exitCodes = {0};
  std::function<void()> before = {};
};

std::vector<std::string> flinkGpu(const fs::path& file, std::vector<std::string> args) {
  std::vector<std::string> argv{FLINK_GPU_EXECUTABLE};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.insert(argv.end(), {"--coordination-file", file.string()});
  return argv;
}

/// Runs `commands` once each per iteration, in rotating order, each timed; sets `<name>_ratio`
/// (its time over the first command's, the bare read) and `<name>_ms` for each.
void runPaired(benchmark::State& state, const std::vector<Command>& commands) {
  std::vector<Clock::duration> spent(commands.size());
  std::size_t first = 0;
  for (auto _ : state) {
    for (std::size_t offset = 0; offset < commands.size(); ++offset) {
      const std::size_t which = (first + offset) % commands.size();
      const Command& command = commands[which];
      if (command.before) command.before();
      const Clock::time_point start = Clock::now();
      const flink::bench::ChildEnd end = flink::bench::spawnAndWait(command.argv, true);
      spent[which] += Clock::now() - start;
      if (std::find(command.exitCodes.begin(), command.exitCodes.end(), end.exitCode) ==
          command.exitCodes.end()) {
        std::string line;
        for (const std::string& arg : command.argv) line += arg + ' ';
        state.SkipWithError(("exited with " + std::to_string(end.exitCode) + ": " + line).c_str());
        return;
      }
    }
    first = (first + 1) % commands.size();
  }
  const auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  const double iterations = static_cast<double>(state.iterations());
  for (std::size_t i = 0; i < commands.size(); ++i) {
    if (i > 0) state.counters[commands[i].name + "_ratio"] = seconds(spent[i]) / seconds(spent[0]);
    state.counters[commands[i].name + "_ms"] = seconds(spent[i]) * 1000 / iterations;
  }
}

void BM_PairedRecords(benchmark::State& state) {
  const int count = static_cast<int>(state.range(0));
  const fs::path file = gHost->recordsFile(count);
  // records-N's first gone owner: one record (a GPU by a UUID this host does not have).
  const std::string gone = std::to_string(kGonePids);
  runPaired(state, {{"cat", {catPath(), file.string()}},
                    {"status", flinkGpu(file, {"status"})},
                    {"json", flinkGpu(file, {"status", "--format", "json"})},
                    {"prometheus", flinkGpu(file, {"status", "--format", "prometheus"})},
                    {"gpu", flinkGpu(file, {"status", "--gpu", "0"})},
                    {"check", flinkGpu(file, {"check"}), {0, 1}},
                    {"release", flinkGpu(file, {"release", "--owner", gone}), {0}, [count] {
                       gHost->restoreRecords(count);
                     }}});
  gHost->restoreRecords(count);
}

void BM_PairedHealth(benchmark::State& state) {
  const fs::path file = gHost->healthFile();
  runPaired(state, {{"cat", {catPath(), file.string() + ".health"}},
                    {"status", flinkGpu(file, {"status"})},
                    {"check", flinkGpu(file, {"check"}), {0, 1}}});
}

/// The health file read whole, as the least a reader of it does.
std::size_t bareRead(const fs::path& file) {
  const int raw = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (raw < 0) throw std::system_error(errno, std::generic_category(), "open " + file.string());
  std::string text;
  std::array<char, 1 << 16> buffer;
  for (;;) {
    const ssize_t n = ::read(raw, buffer.data(), buffer.size());
    if (n > 0) {
      text.append(buffer.data(), static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(raw);
  return text.size();
}

void BM_PairedWatchUpdate(benchmark::State& state) {
  health::HealthRecord verdict;
  verdict.kind = health::RecordKind::kUnhealthy;
  verdict.gpu = "1";
  verdict.uuid = hostUuid(1);
  verdict.since = 1764590000;
  verdict.xid = 79;
  verdict.source = "watch";
  verdict.reason = "critical Xid error event: GPU has fallen off the bus";
  const std::vector<health::HealthRecord> verdicts{verdict};
  Clock::duration update{};
  Clock::duration read{};
  bool updateFirst = true;
  try {
    for (auto _ : state) {
      gHost->restoreHealth();
      for (int side = 0; side < 2; ++side) {
        const Clock::time_point start = Clock::now();
        if ((side == 0) == updateFirst) {
          benchmark::DoNotOptimize(health::recordVerdicts(gHost->healthFile(), verdicts));
          update += Clock::now() - start;
        } else {
          benchmark::DoNotOptimize(bareRead(gHost->healthFile().string() + ".health"));
          read += Clock::now() - start;
        }
      }
      updateFirst = !updateFirst;
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  const auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  state.counters["watch_ratio"] = seconds(update) / seconds(read);
  state.counters["watch_ms"] = seconds(update) * 1000 / static_cast<double>(state.iterations());
  state.counters["read_ms"] = seconds(read) * 1000 / static_cast<double>(state.iterations());
  gHost->restoreHealth();
}

/// After the runs of a peak's benchmark: removes `file` and its journal, and sets `peak_MiB`;
/// false, the benchmark skipped, when no peak was read (`what` failed, or ptrace is not allowed).
bool countPeak(benchmark::State& state, const fs::path& file, long peakKiB,
               const std::string& what) {
  std::error_code ignored;
  fs::remove(file, ignored);
  fs::remove(flink::store::journalPathOf(file), ignored);
  if (peakKiB < 0) {
    state.SkipWithError((what + " failed, or ptrace is not allowed here").c_str());
    return false;
  }
  state.counters["peak_MiB"] = static_cast<double>(peakKiB) / 1024.0;
  return true;
}

void BM_ReleaseJunkMemory(benchmark::State& state) {
  static const char* const kKinds[] = {"yes", "mixed", "some"};
  const std::size_t mib = static_cast<std::size_t>(state.range(0));
  const char* kind = kKinds[state.range(1)];
  const fs::path file = gHost->dir() / (std::string("junk-") + kind);
  long peakKiB = -1;
  try {
    for (auto _ : state) {
      state.PauseTiming();
      writeJunk(file, mib, kind, gHost->holder());
      state.ResumeTiming();
      peakKiB = flink::bench::measurePeakRssKiB(flinkGpu(file, {"release", "--junk"}), true);
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  if (!countPeak(state, file, peakKiB, "release --junk")) return;
  state.counters["file_MiB"] = static_cast<double>(mib);
  state.counters["peak_per_file"] =
      static_cast<double>(peakKiB) / 1024.0 / static_cast<double>(mib);
  if (const long version = flink::bench::measurePeakRssKiB({FLINK_GPU_EXECUTABLE, "--version"});
      version >= 0) {
    state.counters["version_MiB"] = static_cast<double>(version) / 1024.0;
  }
}

/// A coordination file just under its limit for BM_FullFileAllocation: kind 0, gone owners'
/// records of the host's GPUs in turn, each of its own pid (so that none is written twice);
/// kind 1, three quarters of the limit of records the holder holds, each of its own GPU
/// identifier (none of the host's, so that every GPU stays free).
void writeFullFile(const fs::path& file, int kind, pid_t holder) {
  const std::size_t size = kind == 0 ? coordination::kMaxCoordinationFileBytes - 64
                                     : coordination::kMaxCoordinationFileBytes / 4 * 3;
  std::string text;
  text.reserve(size);
  char record[64];
  for (long n = 0;; ++n) {
    if (kind == 0) {
      std::snprintf(record, sizeof record, "%ld %ld\n", n % kHostGpus, kGonePids + n);
    } else {
      std::snprintf(record, sizeof record, "%ld %ld\n", 100 + n, static_cast<long>(holder));
    }
    if (text.size() + std::strlen(record) > size) break;
    text += record;
  }
  std::ofstream(file, std::ios::binary | std::ios::trunc) << text;
}

/// Runs `argv` under ptrace (measurePeakRssKiB): its peak in KiB (-1 if it failed), and its
/// wall-clock time as the counter `run_ms`.
long timedPeak(benchmark::State& state, const std::vector<std::string>& argv) {
  const Clock::time_point start = Clock::now();
  const long peakKiB = flink::bench::measurePeakRssKiB(argv, true);
  state.counters["run_ms"] =
      std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  return peakKiB;
}

void BM_FullFileAllocation(benchmark::State& state) {
  const int kind = static_cast<int>(state.range(0));
  const fs::path file = gHost->dir() / (kind == 0 ? "full-gone" : "full-held");
  long peakKiB = -1;
  try {
    for (auto _ : state) {
      state.PauseTiming();
      writeFullFile(file, kind, gHost->holder());
      state.counters["file_MiB"] = static_cast<double>(fs::file_size(file)) / (1 << 20);
      state.ResumeTiming();
      peakKiB = timedPeak(state, {FLINK_GPU_NVIDIA_DISCOVERY, "1", "--gpus", "0,1,2,3,4,5,6,7",
                                  "--enable-coordination-mode", "--coordination-file",
                                  file.string(), "--owner-pid", std::to_string(gHost->holder())});
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  countPeak(state, file, peakKiB, "the discovery");
}

/// `status` (argument gpu 0) or `status --gpu 0` (gpu 1) on BM_FullFileAllocation's first file (4
/// MiB of gone owners' records of the host's GPUs), under ptrace for its peak.
void BM_FullFileStatus(benchmark::State& state) {
  const bool oneGpu = state.range(0) == 1;
  const fs::path file = gHost->dir() / "full-gone-status";
  long peakKiB = -1;
  try {
    writeFullFile(file, 0, gHost->holder());
    state.counters["file_MiB"] = static_cast<double>(fs::file_size(file)) / (1 << 20);
    for (auto _ : state) {
      peakKiB =
          timedPeak(state, flinkGpu(file, oneGpu ? std::vector<std::string>{"status", "--gpu", "0"}
                                                 : std::vector<std::string>{"status"}));
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  countPeak(state, file, peakKiB, oneGpu ? "status --gpu 0" : "status");
}

/// One iteration a repetition: one runs for seconds (status of 100,000 records: about one).
void configureSlow(benchmark::internal::Benchmark* benchmark, int repetitions) {
  benchmark->UseRealTime()
      ->Unit(benchmark::kMillisecond)
      ->Iterations(1)
      ->Repetitions(repetitions)
      ->DisplayAggregatesOnly(true);
}

BENCHMARK(BM_PairedRecords)->Arg(10000)->Apply([](benchmark::internal::Benchmark* benchmark) {
  configureSlow(benchmark, 10);
});
BENCHMARK(BM_PairedRecords)->Arg(100000)->Apply([](benchmark::internal::Benchmark* benchmark) {
  configureSlow(benchmark, 5);
});
BENCHMARK(BM_PairedHealth)->Apply([](benchmark::internal::Benchmark* benchmark) {
  configureSlow(benchmark, 10);
});
BENCHMARK(BM_PairedWatchUpdate)->Apply([](benchmark::internal::Benchmark* benchmark) {
  benchmark->UseRealTime()
      ->Unit(benchmark::kMillisecond)
      ->MinTime(0.25)
      ->Repetitions(10)
      ->DisplayAggregatesOnly(true);
});
BENCHMARK(BM_FullFileAllocation)
    ->DenseRange(0, 1)
    ->ArgName("kind")
    ->Apply([](benchmark::internal::Benchmark* benchmark) { configureSlow(benchmark, 3); });
BENCHMARK(BM_FullFileStatus)
    ->DenseRange(0, 1)
    ->ArgName("gpu")
    ->Apply([](benchmark::internal::Benchmark* benchmark) { configureSlow(benchmark, 3); });
BENCHMARK(BM_ReleaseJunkMemory)
    ->ArgsProduct({{64, 256}, {0, 1, 2}})
    ->ArgNames({"MiB", "kind"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

}  // namespace

int main(int argc, char** argv) {
  constexpr std::string_view kFilesFlag = "--status-bench-files=";
  if (argc > 1 && std::string_view(argv[1]).starts_with(kFilesFlag)) {
    // The files alone, for a run of another build by hand, with the records of the holder held
    // by the process that ran this one (a shell, which lives on).
    try {
      const fs::path dir(std::string_view(argv[1]).substr(kFilesFlag.size()));
      fs::create_directories(dir);
      StandInHost::writeFiles(dir, ::getppid(), true);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "status_bench: %s\n", e.what());
      return 1;
    }
    return 0;
  }
  return flink::bench::benchMainWithHost<StandInHost>("status_bench", argc, argv, gHost);
}
