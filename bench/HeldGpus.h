// The coordination file of a stand-in host whose GPUs another live worker holds, for the
// benchmarks of coordinated discovery (discovery_bench, in_process_bench).
#pragma once

#include <sys/types.h>

#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "host/coordination/Coordination.h"

namespace flink::bench {

/// Writes `file` with records `<gpu> <pid>\t<start time>` for GPUs 0..count-1, all owned by
/// `holder`, which must show as running (else each discovery would take them back).
/// @throws std::runtime_error when it does not, or the file cannot be written.
inline void writeHeldRecords(const std::string& file, pid_t holder, int count) {
  const coordination::Owner owner = coordination::Owner::of(holder);
  if (!owner.startTime || !coordination::isRunning(owner)) {
    throw std::runtime_error("the holder process " + std::to_string(holder) +
                             " does not show as running");
  }
  std::vector<coordination::Record> records;
  for (int i = 0; i < count; ++i) records.push_back({std::to_string(i), owner});
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << coordination::formatRecords(records);
  if (!out.flush()) throw std::runtime_error("cannot write " + file);
}

}  // namespace flink::bench
