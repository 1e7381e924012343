// AMD's units: the KFD topology's GPU nodes this process can open, in KFD node order (ROCr's
// index), then the masks ROCr and HIP apply; amd-smi or rocm-smi only where sysfs has no KFD
// topology. See docs/amd-and-intel.md, KfdTopology.h and RocmMasks.h. VendorHost::notices gets a
// note for each unit whose render node is absent (ENOENT) or denied by a device cgroup (EPERM),
// the normal case of a container given some GPUs, a GPU left out for a render node that fails to
// open for another reason, and a warning for a unit without a render node, for a mask read with a
// surprise and for a tool used as a fallback.
#include "host/amd/AmdGpus.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <utility>

#include "host/amd/AmdTools.h"
#include "host/amd/KfdTopology.h"
#include "host/amd/RocmMasks.h"
#include "host/enumeration/GpuEnumerator.h"
#include "host/placement/Topology.h"
#include "util/FileOwnership.h"
#include "util/Strings.h"

namespace flink::amd {

namespace fs = std::filesystem;
using discovery::DiscoveryError;
using discovery::VendorHost;
using discovery::VendorOptions;
using discovery::VendorUnit;

namespace {

/// A usable unit with what the masks and environmentFor need besides its VendorUnit.
struct Candidate {
  VendorUnit unit;
  std::optional<std::string> uuid;
  /// A UUID naming this unit alone (not a partition's shared one).
  bool ownUuid = false;
  /// Its position among the usable units, in KFD order: ROCr's index.
  std::size_t rocrIndex = 0;
  /// The entries of ROCR_VISIBLE_DEVICES and of the HIP mask that chose it, where in force.
  std::string rocrEntry;
  std::string hipEntry;
};

/// The group a user must join to open `path`, as usermod takes it: its name, else its number.
std::string groupToJoin(const struct stat& info) {
  return files::lookupGroupName(info.st_gid).value_or(std::to_string(info.st_gid));
}

std::string currentUser() {
  return files::lookupUserName(::geteuid()).value_or(std::to_string(::geteuid()));
}

[[noreturn]] void permissionDenied(const fs::path& path) {
  struct stat info {};
  const bool known = ::stat(path.c_str(), &info) == 0;
  const std::optional<std::string> ownership =
      known ? std::optional(files::describeOwnership(info)) : std::nullopt;
  const std::string group = known ? groupToJoin(info) : "<group>";
  throw DiscoveryError("permission denied opening " + path.string() +
                           (ownership ? " (" + *ownership + ")" : "") +
                           ": ROCm cannot open it for this user either",
                       {"give the user that group's membership: usermod -aG " + group + " " +
                        currentUser() + " (then log in again)"});
}

void checkKfd(const VendorOptions& options) {
  const fs::path kfd = options.roots.dev / "kfd";
  const int error = options.probe(kfd);
  if (error == 0) return;
  const std::vector<std::string> fix{
      "a container needs --device /dev/kfd (and --device /dev/dri/renderD<N> for each GPU it "
      "may use)"};
  if (error == ENOENT) {
    throw DiscoveryError("no kfd: the KFD topology lists AMD GPUs, but " + kfd.string() +
                             " does not exist in this process, and ROCm needs it",
                         fix);
  }
  if (error == EACCES) permissionDenied(kfd);
  if (error == EPERM) {
    throw DiscoveryError("opening " + kfd.string() +
                             " is not permitted (EPERM: a device cgroup denies it), and ROCm "
                             "needs it",
                         fix);
  }
  throw DiscoveryError("cannot open " + kfd.string() + ": " + std::strerror(error), fix);
}

/// A sysfs attribute, trimmed; nullopt when absent, unreadable or blank.
std::optional<std::string> attribute(const fs::path& file) {
  const std::optional<std::string> text = discovery::readSmallFile(file);
  if (!text || strings::isBlank(*text)) return std::nullopt;
  return std::string(strings::trim(*text));
}

/// "GPU 00000000:63:00.0", "partition 3 of GPU 00000000:05:00.0": a unit by its bus id.
std::string unitByBus(const KfdUnit& unit) {
  if (unit.partition) {
    return "partition " + std::to_string(*unit.partition) + " of GPU " + nvmlBusId(unit.device);
  }
  return "GPU " + nvmlBusId(unit.busId);
}

discovery::Properties propertiesOf(const KfdUnit& unit, const fs::path& sysfs) {
  discovery::Properties properties{{"vendor", "amd"}};
  const KfdNode& node = unit.node;
  if (node.uniqueId != 0) properties.emplace_back("uuid", rocrUuid(node.uniqueId));
  properties.emplace_back("pci.bus_id", nvmlBusId(unit.busId));
  if (node.deviceId) {
    char id[16];
    std::snprintf(id, sizeof id, "0x%04llx", static_cast<unsigned long long>(*node.deviceId));
    properties.emplace_back("pci.device_id", id);
  }
  const fs::path device = sysfs / "bus" / "pci" / "devices" / sysfsPciName(unit.device);
  if (const auto name = attribute(device / "product_name")) properties.emplace_back("name", *name);
  if (node.memoryBytes) {
    properties.emplace_back("memory.total", std::to_string(*node.memoryBytes / (1024 * 1024)));
  }
  properties.emplace_back("render_minor", std::to_string(node.renderMinor));
  if (const auto numa = attribute(device / "numa_node")) {
    char* end = nullptr;
    const long value = std::strtol(numa->c_str(), &end, 10);
    if (end != numa->c_str() && *end == '\0' && value >= 0) {
      properties.emplace_back("numa_node", std::to_string(value));
    }
  }
  if (const auto list = attribute(device / "local_cpulist")) {
    if (const auto cpus = placement::parseCpuList(*list); cpus && !cpus->empty()) {
      properties.emplace_back("cpu_affinity", placement::formatCpuList(*cpus));
    }
  }
  if (unit.partition) {
    properties.emplace_back("partition.id", std::to_string(*unit.partition));
    if (const auto mode = attribute(device / "current_compute_partition")) {
      properties.emplace_back("partition.mode", strings::toUpper(*mode));
    }
  }
  return properties;
}

std::string indices(std::size_t count) {
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < count; ++i) parts.push_back(std::to_string(i));
  return strings::join(parts, ",");
}

/// Applies the masks in force to the usable units (in ROCr's order) and makes the VendorHost.
VendorHost assemble(std::vector<Candidate> usable, const VendorOptions& options,
                    std::vector<Notice> notices) {
  for (std::size_t i = 0; i < usable.size(); ++i) usable[i].rocrIndex = i;
  std::vector<Candidate> list = std::move(usable);
  const auto uuidsOf = [](const std::vector<Candidate>& candidates) {
    std::vector<std::optional<std::string>> uuids;
    for (const Candidate& candidate : candidates) uuids.push_back(candidate.uuid);
    return uuids;
  };
  const auto narrowed = [](std::vector<Candidate>& from, const MaskReading& reading,
                           std::string Candidate::*entry) {
    std::vector<Candidate> chosen;
    for (std::size_t i = 0; i < reading.chosen.size(); ++i) {
      Candidate candidate = from[reading.chosen[i]];
      candidate.*entry = reading.spelled[i];
      chosen.push_back(std::move(candidate));
    }
    return chosen;
  };

  enum class Layer { kNone, kRocr, kHip };
  Layer innermost = Layer::kNone;
  std::optional<std::string> mask;
  // Each layer narrows what the one below left: ROCr's mask, then HIP's.
  const auto apply = [&](const char* variable, const char* value, const MaskReading& reading,
                         std::string Candidate::*entry, Layer layer, const char* reader,
                         const char* rule) {
    const std::string spelled =
        std::string(variable) + "='" + strings::quoteForMessage(value) + "'";
    if (reading.chosen.empty()) {
      throw DiscoveryError(spelled + " leaves no AMD GPU: " + reading.stop.value_or("?"), {rule});
    }
    for (const std::string& surprise : reading.surprises) {
      notices.push_back(Notice::warning(spelled + ": " + surprise));
    }
    if (reading.stop) {
      notices.push_back(Notice::warning(spelled + ": " + *reading.stop + ", so " + reader +
                                        " ignores that entry and every entry after it"));
    }
    list = narrowed(list, reading, entry);
    innermost = layer;
    mask = std::string(variable) + "=" + value;
  };
  if (const char* rocr = options.getenv(kRocrVisibleDevices); rocr != nullptr) {
    apply(kRocrVisibleDevices, rocr, readRocrVisibleDevices(rocr, uuidsOf(list)),
          &Candidate::rocrEntry, Layer::kRocr, "ROCr",
          "ROCr reads the list up to its first entry that names no usable GPU, a GPU named "
          "already or several GPUs");
  }
  const char* hipVariable = hipMaskVariable(options.getenv);
  if (hipVariable != nullptr) {
    const char* value = options.getenv(hipVariable);
    apply(hipVariable, value, readHipVisibleDevices(value, uuidsOf(list)), &Candidate::hipEntry,
          Layer::kHip, "HIP",
          "HIP reads the list up to its first entry that is not a GPU index or UUID of what ROCr "
          "left, so it sees no GPU");
  }

  VendorHost host;
  host.vendor = discovery::Vendor::kAmd;
  host.notices = std::move(notices);
  host.mask = mask;
  auto byRecord = std::make_shared<std::map<std::string, Candidate>>();
  for (Candidate& candidate : list) {
    switch (innermost) {
      case Layer::kNone:
        candidate.unit.identifier = std::to_string(candidate.rocrIndex);
        break;
      case Layer::kRocr:
        candidate.unit.identifier = candidate.rocrEntry;
        break;
      case Layer::kHip:
        candidate.unit.identifier = candidate.hipEntry;
        break;
    }
    if (candidate.unit.description.empty()) {
      candidate.unit.description =
          "GPU " + candidate.unit.identifier + " (" +
          discovery::propertyOf(candidate.unit.properties, "pci.bus_id").value_or("?") + ")";
    }
    host.units.push_back(candidate.unit);
    byRecord->emplace(candidate.unit.recordName, candidate);
  }
  const std::string hipName = hipVariable != nullptr ? hipVariable : "";
  host.environmentFor = [byRecord, innermost, hipName](
                            const std::vector<const VendorUnit*>& granted, bool uuids) {
    std::vector<const Candidate*> units;
    for (const VendorUnit* unit : granted) {
      const auto found = byRecord->find(unit->recordName);
      if (found == byRecord->end()) {
        throw std::invalid_argument("not an AMD unit of this discovery: " + unit->recordName);
      }
      units.push_back(&found->second);
    }
    std::vector<std::string> values;
    std::vector<std::pair<std::string, std::string>> environment;
    switch (innermost) {
      case Layer::kHip:
        for (const Candidate* unit : units) values.push_back(unit->hipEntry);
        environment.emplace_back(hipName, strings::join(values, ","));
        return environment;
      case Layer::kRocr:
        for (const Candidate* unit : units) values.push_back(unit->rocrEntry);
        break;
      case Layer::kNone:
        for (const Candidate* unit : units) {
          if (!uuids) {
            values.push_back(std::to_string(unit->rocrIndex));
          } else if (unit->ownUuid && unit->uuid) {
            values.push_back(*unit->uuid);
          } else {
            throw std::invalid_argument(
                unit->unit.description +
                (unit->uuid ? " has no UUID of its own (the partitions of a GPU share its UUID)"
                            : " has no UUID (its KFD node has no unique_id)"));
          }
        }
        break;
    }
    environment.emplace_back(kRocrVisibleDevices, strings::join(values, ","));
    environment.emplace_back(kHipVisibleDevices, indices(units.size()));
    return environment;
  };
  return host;
}

/// Marks the candidates whose UUID is theirs alone among `all` (every GPU unit listed, usable or
/// not).
void markOwnUuids(std::vector<Candidate>& candidates,
                  const std::vector<std::optional<std::string>>& all) {
  for (Candidate& candidate : candidates) {
    if (!candidate.uuid) continue;
    candidate.ownUuid = std::count(all.begin(), all.end(), candidate.uuid) == 1;
  }
}

VendorHost fromTopology(const std::vector<KfdNode>& nodes, const VendorOptions& options) {
  const std::vector<KfdUnit> units = kfdUnitsOf(nodes);
  if (units.empty()) {
    throw DiscoveryError("no AMD GPU on this host: the KFD topology at " +
                             kfdNodesFolder(options.roots.sysfs).string() +
                             (nodes.empty() ? " lists no node" : " lists CPU nodes only"),
                         {}, DiscoveryError::Kind::kNoGpu);
  }
  checkKfd(options);
  // What is left out and why: a note for a render node that is absent or denied by a device
  // cgroup, which is how a container is given some GPUs; a warning for a unit without a render
  // node; a GPU left out, a fault of the host, for any other failure to open one.
  std::vector<Notice> leftOut;
  std::vector<Candidate> usable;
  std::vector<std::optional<std::string>> allUuids;
  for (const KfdUnit& unit : units) {
    std::optional<std::string> uuid;
    if (unit.node.uniqueId != 0) uuid = rocrUuid(unit.node.uniqueId);
    allUuids.push_back(uuid);
    const std::string node = "KFD node " + std::to_string(unit.node.id);
    if (unit.node.renderMinor == 0) {
      leftOut.push_back(Notice::warning(node + " (" + unitByBus(unit) +
                                        ") has no render node (drm_render_minor 0): left out, and "
                                        "the other GPUs keep their numbering without it"));
      continue;
    }
    const fs::path render =
        options.roots.dev / "dri" / ("renderD" + std::to_string(unit.node.renderMinor));
    const int error = options.probe(render);
    if (error == EACCES) permissionDenied(render);
    if (error != 0) {
      std::string why;
      if (error == ENOENT) {
        why = render.string() + " does not exist in this process (a container given other GPUs)";
      } else if (error == EPERM) {
        why = "opening " + render.string() + " is not permitted (EPERM: a device cgroup denies it)";
      } else {
        why = "cannot open " + render.string() + ": " + std::strerror(error);
      }
      std::string line =
          unitByBus(unit) + " (" + node + ") is left out: " + why + "; ROCm does not count it";
      leftOut.push_back(error == ENOENT || error == EPERM ? Notice::note(std::move(line))
                                                          : Notice::gpuLeftOut(std::move(line)));
      continue;
    }
    Candidate candidate;
    candidate.uuid = uuid;
    candidate.unit.recordName = "amd:" + nvmlBusId(unit.busId);
    candidate.unit.properties = propertiesOf(unit, options.roots.sysfs);
    // A whole GPU's description ("GPU <identifier> (<bus id>)") is made once its identifier is.
    if (unit.partition) candidate.unit.description = unitByBus(unit);
    usable.push_back(std::move(candidate));
  }
  if (usable.empty()) {
    std::vector<std::string> details;
    for (const Notice& out : leftOut) details.push_back(out.text);
    throw DiscoveryError("no AMD GPU that this process can use: each of the " +
                             std::to_string(units.size()) + " in the KFD topology is left out",
                         details, DiscoveryError::Kind::kNoUsableGpu);
  }
  markOwnUuids(usable, allUuids);
  return assemble(std::move(usable), options, std::move(leftOut));
}

/// Runs `tool` and returns its stdout; nullopt when it is not on the search path.
/// @throws DiscoveryError when it cannot be started or fails.
std::optional<std::string> toolOutput(const std::string& tool, const std::vector<std::string>& args,
                                      const VendorOptions& options) {
  const discovery::ToolRun run = discovery::runTool(tool, args, options.tools);
  if (!run.path) return std::nullopt;
  const std::string command = tool + " " + strings::join(args, " ");
  if (run.startError) {
    throw DiscoveryError(command + " could not be started: " + *run.startError);
  }
  if (!run.result->outcome.succeeded()) {
    std::vector<std::string> details;
    for (const std::string* stream :
         {&run.result->stdoutOutput.data, &run.result->stderrOutput.data}) {
      if (!strings::isBlank(*stream)) {
        details.push_back("it printed: '" + strings::quoteForMessage(strings::trim(*stream)) + "'");
      }
    }
    throw DiscoveryError(command + " " + run.result->outcome.toString(), details);
  }
  return run.result->stdoutOutput.data;
}

VendorHost fromTools(const VendorOptions& options) {
  const fs::path nodes = kfdNodesFolder(options.roots.sysfs);
  std::string tool = "amd-smi";
  std::vector<ToolGpu> gpus;
  if (const auto output = toolOutput(tool, {"list", "--json"}, options)) {
    gpus = parseAmdSmiList(*output);
  } else {
    tool = "rocm-smi";
    const auto rocm = toolOutput(tool, {"--showuniqueid", "--showbus", "--json"}, options);
    if (!rocm) {
      throw DiscoveryError("no AMD GPU found: there is no KFD topology at " + nodes.string() +
                               ", and neither amd-smi nor rocm-smi is on the PATH",
                           {"the amdgpu driver publishes the topology when it is loaded; a "
                            "container needs the host's /sys"},
                           DiscoveryError::Kind::kNoDriver);
    }
    gpus = parseRocmSmiJson(*rocm);
  }
  if (gpus.empty()) {
    throw DiscoveryError("no AMD GPU on this host: " + tool + " lists none", {},
                         DiscoveryError::Kind::kNoGpu);
  }
  std::stable_sort(gpus.begin(), gpus.end(),
                   [](const ToolGpu& a, const ToolGpu& b) { return a.busId < b.busId; });
  std::vector<Notice> notices{Notice::warning(
      "there is no KFD topology at " + nodes.string() + ", so the AMD GPUs come from " + tool +
      ", in PCI order: ROCm numbers GPUs in KFD order, which may differ, and " + tool +
      " also lists GPUs this process cannot open")};
  std::vector<Candidate> candidates;
  std::vector<std::optional<std::string>> allUuids;
  for (const ToolGpu& gpu : gpus) {
    Candidate candidate;
    candidate.uuid = gpu.uuid;
    allUuids.push_back(gpu.uuid);
    const std::string busId = nvmlBusId(gpu.busId);
    candidate.unit.recordName = "amd:" + busId;
    candidate.unit.properties.emplace_back("vendor", "amd");
    if (gpu.uuid) candidate.unit.properties.emplace_back("uuid", *gpu.uuid);
    candidate.unit.properties.emplace_back("pci.bus_id", busId);
    candidates.push_back(std::move(candidate));
  }
  markOwnUuids(candidates, allUuids);
  return assemble(std::move(candidates), options, std::move(notices));
}

}  // namespace

VendorHost findAmdUnits(const VendorOptions& options) {
  const std::optional<std::vector<KfdNode>> nodes = readKfdTopology(options.roots.sysfs);
  if (!nodes) return fromTools(options);
  return fromTopology(*nodes, options);
}

}  // namespace flink::amd
