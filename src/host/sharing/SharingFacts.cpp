// The driver's facts that matter to sharing, and check's notes on them (see SharingFacts.h).
#include "host/sharing/SharingFacts.h"

#include <algorithm>

#include "util/Strings.h"

namespace flink::sharing {
namespace {

/// At most this many clients are named in one note; the rest are counted.
constexpr std::size_t kClientsNamed = 5;

std::string clientsText(const std::vector<pid_t>& clients) {
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < clients.size() && i < kClientsNamed; ++i) {
    parts.push_back(std::to_string(clients[i]));
  }
  if (clients.size() > kClientsNamed) {
    parts.push_back(std::to_string(clients.size() - kClientsNamed) + " more");
  }
  const std::string word = clients.size() == 1 ? "MPS client process " : "MPS client processes ";
  if (parts.size() == 1) return word + parts.front();
  const std::string last = parts.back();
  parts.pop_back();
  return word + strings::join(parts, ", ") + " and " + last;
}

}  // namespace

MpsSigns mpsSignsOf(const usage::UnitUse& use, liveness::HostFacts& facts) {
  MpsSigns signs;
  if (!use.processes) return signs;
  // A pid NVML gives is the host's: its name means something only where this process sees them.
  const bool named = liveness::seesHostPids(facts.reader());
  for (const usage::GpuProcess& process : *use.processes) {
    if (named && !signs.server && facts.processName(process.pid) == usage::kMpsServerName) {
      signs.server = process.pid;
      continue;
    }
    if (process.mpsClient) signs.clients.push_back(process.pid);
  }
  std::sort(signs.clients.begin(), signs.clients.end());
  signs.clients.erase(std::unique(signs.clients.begin(), signs.clients.end()), signs.clients.end());
  if (signs.server) std::erase(signs.clients, *signs.server);
  return signs;
}

std::string_view sharingNoteWord(SharingNoteKind kind) {
  switch (kind) {
    case SharingNoteKind::kComputeMode:
      return "compute_mode";
    case SharingNoteKind::kMps:
      return "mps";
  }
  return "mps";
}

std::vector<SharingNote> undeclaredSharingNotes(const GpuSharingFacts& gpu) {
  std::vector<SharingNote> notes;
  const std::string name = "GPU " + gpu.gpu + (gpu.uuid ? " (" + *gpu.uuid + ")" : "");
  const std::string declare =
      "`flink-gpu share --gpu " + gpu.gpu + " --replicas K --mps DIR` declares it";
  if (gpu.exclusiveProcess) {
    notes.push_back({SharingNoteKind::kComputeMode, gpu.gpu,
                     name +
                         " is in EXCLUSIVE_PROCESS compute mode but not declared shared: one CUDA "
                         "process at a time may use it, so a worker that starts a second one "
                         "fails (all CUDA-capable devices are busy or unavailable); left from an "
                         "MPS set-up? `nvidia-smi -i " +
                         gpu.gpu + " -c DEFAULT` resets it, or " + declare});
  }
  if (gpu.mps.any()) {
    std::vector<std::string> seen;
    if (gpu.mps.server) {
      seen.push_back("its MPS server, process " + std::to_string(*gpu.mps.server));
    }
    if (!gpu.mps.clients.empty()) seen.push_back(clientsText(gpu.mps.clients));
    notes.push_back({SharingNoteKind::kMps, gpu.gpu,
                     "an MPS control daemon serves " + name +
                         ", which is not declared shared (NVML lists " +
                         strings::join(seen, " and ") +
                         " on it): its CUDA processes share one MPS server, and one fatal fault "
                         "ends them all, while allocators hand the GPU out whole; " +
                         declare + ", or stop the daemon"});
  }
  return notes;
}

}  // namespace flink::sharing
