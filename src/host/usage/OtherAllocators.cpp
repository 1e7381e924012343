// Other GPU allocators of this host. See OtherAllocators.h.
#include "host/usage/OtherAllocators.h"

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <system_error>

#include "util/Strings.h"

namespace flink::usage {
namespace {

/// The first 1 MiB of a configuration file; empty when it cannot be read.
std::string readSmallFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::string text(1 << 20, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  return text;
}

/// Whether a gres.conf or slurm.conf text configures a gpu gres: gres.conf's `Name=gpu`,
/// slurm.conf's `GresTypes=…gpu…` or a node's `Gres=gpu…`. Comments (`#` on) are left out; keys
/// are case-insensitive, as Slurm reads them.
bool configuresGpuGres(const std::string& text) {
  for (std::string_view line : strings::split(text, '\n')) {
    line = line.substr(0, line.find('#'));
    const std::string lower = strings::toLower(line);
    for (const std::string& word : strings::splitWhitespace(lower)) {
      if (word.starts_with("name=gpu")) return true;
      if (word.starts_with("grestypes=") || word.starts_with("gres=")) {
        for (std::string_view item : strings::split(word.substr(word.find('=') + 1), ',')) {
          if (item == "gpu" || item.starts_with("gpu:")) return true;
        }
      }
    }
  }
  return false;
}

}  // namespace

std::filesystem::path hostRoot() {
  const char* root = std::getenv(kHostRootVariable);
  return root != nullptr && *root != '\0' ? std::filesystem::path(root)
                                          : std::filesystem::path("/");
}

std::vector<std::string> otherAllocators(const std::filesystem::path& root,
                                         liveness::HostFacts& facts) {
  std::vector<std::string> found;
  std::error_code error;
  const std::filesystem::path plugins = root / "var/lib/kubelet/device-plugins";
  for (std::filesystem::directory_iterator entry(plugins, error), end; !error && entry != end;
       entry.increment(error)) {
    const std::string name = entry->path().filename().string();
    if (name.starts_with("nvidia") && name.ends_with(".sock")) {
      found.push_back("a Kubernetes device plugin for NVIDIA GPUs (its kubelet socket " +
                      (std::filesystem::path("/var/lib/kubelet/device-plugins") / name).string() +
                      ")");
    }
  }
  if (std::filesystem::is_directory(root / "var/lib/kubelet/plugins/gpu.nvidia.com", error)) {
    found.push_back(
        "NVIDIA's Kubernetes DRA driver (its kubelet plugin folder "
        "/var/lib/kubelet/plugins/gpu.nvidia.com)");
  }
  const std::vector<pid_t> slurmd = facts.processesNamed("slurmd");
  if (!slurmd.empty()) {
    for (const char* folder : {"etc/slurm", "etc/slurm-llnl"}) {
      std::string configured;
      for (const char* file : {"gres.conf", "slurm.conf"}) {
        if (configuresGpuGres(readSmallFile(root / folder / file))) {
          configured = "/" + std::string(folder) + "/" + file;
          break;
        }
      }
      if (configured.empty()) continue;
      found.push_back("Slurm's slurmd (process " + std::to_string(slurmd.front()) +
                      "), with a gpu gres in " + configured);
      break;
    }
  }
  return found;
}

}  // namespace flink::usage
