// A thin, typed binding to NVML (libnvidia-ml), loaded at run time with dlopen.
//
// Nothing is linked against libnvidia-ml and no NVIDIA header is needed to build: the library
// is looked up when first used, so one build runs on hosts with and without a driver, and a host
// without one gets an error naming the cause rather than a program that does not start. The
// shape follows NVIDIA's go-nvml: one method per NVML function, each returning NVML's own return
// code beside the value (Result<T>), the versioned symbols (_v2, _v3) preferred with the older
// names as fall-backs, and errors that carry the code and nvmlErrorString's text.
//
//   NvmlLibrary   the loaded library and its symbol table; loaded once per path, never unloaded
//   NvmlSession   nvmlInit_v2 in the constructor, nvmlShutdown in the destructor
//   Device        a device handle (a whole GPU or a MIG device) with its property calls
//   NvmlError     what load() and NvmlSession throw
//
// Which library: the path in $FLINK_GPU_NVML_LIBRARY when set and not empty (tests point it at a
// stand-in), else "libnvidia-ml.so.1" — the versioned name, which the driver package installs
// (the bare libnvidia-ml.so comes only with development packages) — through the dynamic
// loader's search path. Opened with RTLD_NOW | RTLD_LOCAL.
//
// Thread-safety: loading is safe from any thread (a mutex guards the cache). NVML's own calls
// are thread-safe, and nvmlInit/nvmlShutdown are reference-counted by NVML, so sessions may
// overlap across threads. A Device is valid only while the session it came from lives.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

struct nvmlDevice_st;  // nvml.h's opaque device, behind nvmlDevice_t

namespace flink::nvml {

/// nvmlReturn_t's values (nvml.h's NVML_SUCCESS, NVML_ERROR_*). A code not listed here may still
/// come back from a newer driver; returnName() names it by number.
enum class Return : int {
  kSuccess = 0,
  kUninitialized = 1,
  kInvalidArgument = 2,
  kNotSupported = 3,
  kNoPermission = 4,
  kAlreadyInitialized = 5,
  kNotFound = 6,
  kInsufficientSize = 7,
  kInsufficientPower = 8,
  kDriverNotLoaded = 9,
  kTimeout = 10,
  kIrqIssue = 11,
  kLibraryNotFound = 12,
  kFunctionNotFound = 13,
  kCorruptedInforom = 14,
  kGpuIsLost = 15,
  kResetRequired = 16,
  kOperatingSystem = 17,
  kLibRmVersionMismatch = 18,
  kInUse = 19,
  kMemory = 20,
  kNoData = 21,
  kVgpuEccNotSupported = 22,
  kInsufficientResources = 23,
  kFreqNotSupported = 24,
  kArgumentVersionMismatch = 25,
  kDeprecated = 26,
  kNotReady = 27,
  kGpuNotFound = 28,
  kInvalidState = 29,
  kUnknown = 999,
};

/// nvml.h's name of `code`: "NVML_SUCCESS", "NVML_ERROR_LIB_RM_VERSION_MISMATCH"; for a code
/// this binding does not know, "nvmlReturn_t 42".
std::string returnName(Return code);

/// The environment variable naming the library to load instead of libnvidia-ml.so.1.
inline constexpr const char* kLibraryEnvironmentVariable = "FLINK_GPU_NVML_LIBRARY";
/// What is loaded when that variable is unset: the driver's versioned file name.
inline constexpr const char* kDefaultLibraryName = "libnvidia-ml.so.1";

/// NVML cannot be used: the library or one of its required functions is missing
/// (code() kLibraryNotFound / kFunctionNotFound, what() with dlerror's text), or a call failed.
/// what() is one line naming the function, nvmlErrorString's text and the code, e.g.
/// "nvmlInit_v2 failed: Driver/library version mismatch (NVML_ERROR_LIB_RM_VERSION_MISMATCH, 18)".
class NvmlError : public std::runtime_error {
 public:
  NvmlError(const std::string& message, Return code, std::string function,
            bool libraryPresent = true)
      : std::runtime_error(message),
        code_(code),
        function_(std::move(function)),
        libraryPresent_(libraryPresent) {}
  /// What NVML returned; kLibraryNotFound / kFunctionNotFound for a failed dlopen / dlsym.
  Return code() const noexcept { return code_; }
  /// The NVML function that failed (the symbol name, e.g. "nvmlInit_v2"), or "dlopen".
  const std::string& function() const noexcept { return function_; }
  /// False only for a dlopen that found no such file: the driver is not installed. A library
  /// that is there but cannot be loaded (wrong architecture, a missing dependency, not a shared
  /// library) is present, and worth a warning.
  bool libraryPresent() const noexcept { return libraryPresent_; }

 private:
  Return code_;
  std::string function_;
  bool libraryPresent_ = true;
};

/// One NVML call's outcome: the return code, and the value when it is kSuccess. A function the
/// loaded library lacks gives kFunctionNotFound without being called (as go-nvml does).
template <typename T>
struct Result {
  Return code = Return::kUninitialized;
  /// Meaningful only when ok(); value-initialized otherwise.
  T value{};
  /// The NVML function called (the symbol that was found), or the preferred name of the one that
  /// was missing; a string literal.
  const char* function = "";

  bool ok() const noexcept { return code == Return::kSuccess; }
  /// The value when ok(), else nullopt: how a property NVML does not know is kept.
  std::optional<T> get() const { return ok() ? std::optional<T>(value) : std::nullopt; }
};

/// nvmlPciInfo_t, read out. busId is the 8-digit-domain form ("00000000:19:00.0", what
/// nvidia-smi's pci.bus_id prints), busIdLegacy the 4-digit one ("0000:19:00.0").
struct PciInfo {
  std::string busId;
  std::string busIdLegacy;
  unsigned domain = 0;
  unsigned bus = 0;
  unsigned device = 0;
  /// Device id in the upper 16 bits, vendor id (0x10de) in the lower.
  unsigned pciDeviceId = 0;
  unsigned pciSubSystemId = 0;
};

/// nvmlMemory_t: memory in bytes.
struct Memory {
  std::uint64_t totalBytes = 0;
  std::uint64_t freeBytes = 0;
  std::uint64_t usedBytes = 0;
};

/// nvmlDeviceGetCudaComputeCapability: the CUDA compute capability, major.minor ("9.0" for an
/// H100, "8.9" for an L4).
struct CudaComputeCapability {
  int major = 0;
  int minor = 0;
};

/// nvmlDeviceGetMigMode's two modes: 1 (NVML_DEVICE_MIG_ENABLE) or 0 (disabled).
struct MigMode {
  unsigned current = 0;
  unsigned pending = 0;
  /// The mode in force now (a pending change takes effect after a GPU reset).
  bool enabled() const noexcept { return current == 1; }
};

class NvmlLibrary;

// ---- Topology (NvmlTopology.cpp) ----
/// The most CPUs an affinity mask is read for.
inline constexpr unsigned kMaxCpus = 4096;
/// The most NUMA nodes a memory affinity is read for.
inline constexpr unsigned kMaxNumaNodes = 1024;
/// nvmlIntNvLinkDeviceType_t.
enum class NvLinkRemote { kGpu = 0x00, kIbmNpu = 0x01, kSwitch = 0x02, kUnknown = 0xFF };
/// nvmlGpuTopologyLevel_t.
enum class TopologyLevel : int {
  kInternal = 0,
  kSingle = 10,
  kMultiple = 20,
  kHostBridge = 30,
  kNode = 40,
  kSystem = 50,
};
// ---- end of topology ----

/// A device handle, whole GPU or MIG device. Cheap to copy. Valid only while the NvmlSession it
/// came from lives; a default-constructed one is null and must not be used.
class Device {
 public:
  Device() = default;

  /// nvmlDeviceGetUUID: "GPU-…" for a whole GPU, "MIG-…" for a MIG device.
  Result<std::string> uuid() const;
  /// nvmlDeviceGetName: the product name ("NVIDIA H200"; for MIG "NVIDIA H200 MIG 1g.18gb").
  Result<std::string> name() const;
  /// nvmlDeviceGetPciInfo_v3, else _v2, else the unversioned nvmlDeviceGetPciInfo. That last one
  /// has no 8-digit busId: it is then formatted from domain, bus and device as NVML formats it
  /// ("%08X:%02X:%02X.0"), and busIdLegacy is what it wrote.
  Result<PciInfo> pciInfo() const;
  /// nvmlDeviceGetMemoryInfo: total, free and used memory, in bytes (a MIG device: its share).
  Result<Memory> memoryInfo() const;
  /// nvmlDeviceGetMinorNumber: the N of /dev/nvidiaN.
  Result<unsigned> minorNumber() const;
  /// nvmlDeviceGetMigMode: kNotSupported on GPUs without MIG.
  Result<MigMode> migMode() const;
  /// nvmlDeviceGetMaxMigDeviceCount: the number of MIG device slots to ask
  /// migDeviceByIndex about.
  Result<unsigned> maxMigDeviceCount() const;
  /// nvmlDeviceGetMigDeviceHandleByIndex: the MIG device in slot `index` (0 to
  /// maxMigDeviceCount - 1); kNotFound for an empty slot.
  Result<Device> migDeviceByIndex(unsigned index) const;
  /// nvmlDeviceGetGpuInstanceId of a MIG device handle (kInvalidArgument for a whole GPU).
  Result<unsigned> gpuInstanceId() const;
  /// nvmlDeviceGetComputeInstanceId of a MIG device handle (kInvalidArgument for a whole GPU).
  Result<unsigned> computeInstanceId() const;
  /// nvmlDeviceGetCudaComputeCapability: answered for every GPU since Kepler; asked of whole
  /// GPUs only (a MIG instance has its GPU's).
  Result<CudaComputeCapability> cudaComputeCapability() const;

  // ---- Topology (defined in NvmlTopology.cpp) ----
  /// nvmlDeviceGetNvLinkState: whether NVLink `link` (from 0) is active; kNotSupported on a GPU
  /// without NVLink, kInvalidArgument past its last link (how many links a GPU has is known only
  /// from that answer: nvml.h's NVML_NVLINK_MAX_LINKS changes between versions).
  Result<bool> nvLinkActive(unsigned link) const;
  /// nvmlDeviceGetNvLinkRemotePciInfo_v2: the PCI address of what `link` leads to.
  Result<PciInfo> nvLinkRemotePciInfo(unsigned link) const;
  /// nvmlDeviceGetNvLinkRemoteDeviceType: what `link` leads to.
  Result<NvLinkRemote> nvLinkRemoteDeviceType(unsigned link) const;
  /// nvmlDeviceGetTopologyCommonAncestor: the closest PCIe ancestor of this GPU and `other`.
  Result<TopologyLevel> commonAncestor(const Device& other) const;
  /// The CPUs close to this GPU, ascending: nvmlDeviceGetCpuAffinityWithinScope with
  /// NVML_AFFINITY_SCOPE_NODE where the library has it and it answers, else
  /// nvmlDeviceGetCpuAffinity. CPUs up to kMaxCpus - 1 are seen.
  Result<std::vector<unsigned>> cpuAffinity() const;
  /// nvmlDeviceGetNumaNodeId (drivers from about 550 on).
  Result<unsigned> numaNodeId() const;
  /// nvmlDeviceGetMemoryAffinity with NVML_AFFINITY_SCOPE_NODE: the NUMA nodes of the memory
  /// close to this GPU, ascending (nodes up to kMaxNumaNodes - 1).
  Result<std::vector<unsigned>> memoryAffinity() const;
  /// The raw handle, for comparing devices.
  const nvmlDevice_st* handle() const noexcept { return handle_; }
  // ---- end of topology ----
  // ---- for the health calls of NvmlHealth.h ----
  /// nvml.h's handle, for the calls outside this class (NvmlHealth.h); null when default-made.
  nvmlDevice_st* rawHandle() const noexcept { return handle_; }
  /// The library the handle came from; null when default-made.
  const NvmlLibrary* library() const noexcept { return library_; }

 private:
  friend class NvmlSession;
  Device(const NvmlLibrary* library, nvmlDevice_st* handle) : library_(library), handle_(handle) {}

  const NvmlLibrary* library_ = nullptr;
  nvmlDevice_st* handle_ = nullptr;
};

/// libnvidia-ml, opened, with its functions looked up. Immutable once loaded; share it freely.
class NvmlLibrary {
 public:
  /// The library named by $FLINK_GPU_NVML_LIBRARY, else libnvidia-ml.so.1: load(that).
  /// @throws NvmlError as load(name) does.
  static std::shared_ptr<const NvmlLibrary> load();
  /// Opens `pathOrName` (a path with a '/', or a file name for the loader's search path) and
  /// looks up its functions. A path loaded before returns the same library (each is opened once
  /// per process and never closed: NVML is not written to be unloaded). A name that could not be
  /// opened fails again without another dlopen for 10 s (the loader's search is not free; the
  /// driver may ask on every discovery).
  /// @throws NvmlError with code kLibraryNotFound (dlopen failed: what() has dlerror's text, and
  /// for a library that is there but cannot be loaded says so; see libraryPresent()) or
  /// kFunctionNotFound (a required function is missing: nvmlInit_v2 or nvmlInit, nvmlShutdown,
  /// nvmlErrorString, nvmlDeviceGetCount_v2 or nvmlDeviceGetCount,
  /// nvmlDeviceGetHandleByIndex_v2 or nvmlDeviceGetHandleByIndex, nvmlDeviceGetUUID).
  static std::shared_ptr<const NvmlLibrary> load(const std::string& pathOrName);

  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  /// What was passed to dlopen.
  const std::string& name() const noexcept { return name_; }
  /// The file the loader opened (from dladdr), e.g. "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1";
  /// name() when that cannot be told.
  const std::string& file() const noexcept { return file_; }

  /// nvmlErrorString(code): NVML's text for a return code ("Driver/library version mismatch").
  std::string errorString(Return code) const;
  /// "<function> failed: <errorString> (<returnName>, <number>)": the one line NvmlError holds.
  std::string describeFailure(std::string_view function, Return code) const;

  /// Whether the library has `symbol` (any NVML function name, versioned or not). For
  /// diagnostics: the binding already falls back by itself.
  bool hasSymbol(const std::string& symbol) const;

  /// The address of `symbol` (dlsym, dlerror cleared first), or null: for the calls bound
  /// outside this class (NvmlHealth.h), which cast it to the type nvml.h declares.
  void* symbol(const char* symbol) const;

 private:
  struct Api;  // the symbol table, defined in Nvml.cpp

  NvmlLibrary(std::string name, void* handle);

  friend class NvmlSession;
  friend class Device;

  // ---- Topology (NvmlTopology.cpp): its functions, looked up on first use ----
  struct TopologyApi;
  const TopologyApi& topologyApi() const;
  mutable std::once_flag topologyOnce_;
  mutable std::shared_ptr<const TopologyApi> topologyApi_;
  // ---- end of topology ----

  std::string name_;
  std::string file_;
  void* handle_ = nullptr;  // from dlopen; never closed
  std::unique_ptr<const Api> api_;
};

/// NVML initialized for the lifetime of this object: the constructor calls nvmlInit_v2 (or
/// nvmlInit), the destructor nvmlShutdown, always, whatever happened in between. Neither copied
/// nor moved, so that there is exactly one shutdown per successful init.
class NvmlSession {
 public:
  /// nvmlInitWithFlags(NVML_INIT_FLAG_NO_GPUS) where the library has it, so that a host with the
  /// driver but no GPU opens a session that counts 0 GPUs; else nvmlInit_v2 (or nvmlInit), which
  /// fails on such a host.
  /// @throws NvmlError when the init fails, e.g. with kLibRmVersionMismatch (the kernel module
  /// and the library are of different driver versions) or kDriverNotLoaded.
  explicit NvmlSession(std::shared_ptr<const NvmlLibrary> library);
  ~NvmlSession();
  NvmlSession(const NvmlSession&) = delete;
  NvmlSession& operator=(const NvmlSession&) = delete;

  const NvmlLibrary& library() const noexcept { return *library_; }

  /// nvmlDeviceGetCount_v2 (or nvmlDeviceGetCount): the number of GPUs. _v2 counts every GPU,
  /// including those this process may not open (deviceByIndex then answers kNoPermission: the
  /// normal case under a cgroup that denies devices); the v1 function leaves those out. MIG
  /// devices are not counted.
  Result<unsigned> deviceCount() const;
  /// nvmlDeviceGetHandleByIndex_v2 (or nvmlDeviceGetHandleByIndex): GPU `index`, 0 to
  /// deviceCount() - 1.
  Result<Device> deviceByIndex(unsigned index) const;

 private:
  std::shared_ptr<const NvmlLibrary> library_;
};

/// A session to hold around several users of NVML in one run (the enumeration, the health
/// probe), so that the driver is initialised once: NVML keeps a count of nested nvmlInit calls
/// and shuts down only when it drops to zero (nvml.h, nvmlInit_v2), and an init takes seconds on a
/// host without persistence mode. Null where NVML cannot be used: each user then finds out, and
/// reports why, by itself.
std::unique_ptr<NvmlSession> holdSession();

}  // namespace flink::nvml
