// The NVML binding: dlopen, the symbol table, and one thin wrapper per NVML call. See Nvml.h.
#include "host/nvml/Nvml.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include "host/nvml/NvmlAbi.h"
#include "host/nvml/NvmlCall.h"
#include "util/DlError.h"

namespace flink::nvml {

using call::missing;
using call::toReturn;

/// The functions found in the library. A required one is never null; an optional one is null
/// when the library lacks it. Each *Name is the symbol that was found (for messages).
struct NvmlLibrary::Api {
  decltype(&::nvmlInit_v2) init = nullptr;  // nvmlInit has the same type
  const char* initName = "nvmlInit_v2";
  decltype(&::nvmlShutdown) shutdown = nullptr;
  decltype(&::nvmlErrorString) errorString = nullptr;
  decltype(&::nvmlDeviceGetCount_v2) getCount = nullptr;
  const char* getCountName = "nvmlDeviceGetCount_v2";
  decltype(&::nvmlDeviceGetHandleByIndex_v2) getHandleByIndex = nullptr;
  const char* getHandleByIndexName = "nvmlDeviceGetHandleByIndex_v2";
  decltype(&::nvmlDeviceGetUUID) getUuid = nullptr;

  decltype(&::nvmlDeviceGetName) getName = nullptr;
  decltype(&::nvmlDeviceGetPciInfo_v3) getPciInfo = nullptr;
  const char* getPciInfoName = "nvmlDeviceGetPciInfo_v3";
  bool pciInfoIsV1 = false;  // the unversioned one, which writes nvmlPciInfoV1_t
  decltype(&::nvmlDeviceGetMemoryInfo) getMemoryInfo = nullptr;
  decltype(&::nvmlDeviceGetMinorNumber) getMinorNumber = nullptr;
  decltype(&::nvmlDeviceGetMigMode) getMigMode = nullptr;
  decltype(&::nvmlDeviceGetMaxMigDeviceCount) getMaxMigDeviceCount = nullptr;
  decltype(&::nvmlDeviceGetMigDeviceHandleByIndex) getMigDeviceHandleByIndex = nullptr;
  decltype(&::nvmlDeviceGetGpuInstanceId) getGpuInstanceId = nullptr;
  decltype(&::nvmlDeviceGetComputeInstanceId) getComputeInstanceId = nullptr;
  decltype(&::nvmlDeviceGetCudaComputeCapability) getCudaComputeCapability = nullptr;

  // Optional: nvmlInitWithFlags, preferred over init when present (see NvmlSession).
  decltype(&::nvmlInitWithFlags) initWithFlags = nullptr;
};

namespace {

/// dlsym with dlerror() cleared first, so that a stale error is never read as this lookup's.
/// Null when the library has no such symbol; `error` then holds dlerror's text. A failed lookup's
/// error is always taken, wanted or not, so that the thread keeps no record of it (DlError.h).
void* lookUp(void* handle, const char* symbol, std::string* error = nullptr) {
  ::dlerror();
  void* address = ::dlsym(handle, symbol);
  if (address == nullptr) {
    std::string text = dl::takeError();
    if (error != nullptr) {
      *error = !text.empty() ? std::move(text) : std::string("undefined symbol: ") + symbol;
    }
  }
  return address;
}

/// Binds `slot` to the first of `symbols` the library has; returns its name, or nullptr.
template <typename Function, std::size_t N>
const char* bind(void* handle, Function& slot, const char* const (&symbols)[N],
                 std::string* error = nullptr) {
  for (const char* symbol : symbols) {
    if (void* address = lookUp(handle, symbol, error)) {
      // POSIX guarantees that a dlsym result converts to a function pointer.
      slot = reinterpret_cast<Function>(address);
      return symbol;
    }
  }
  return nullptr;
}

/// For a required function: binds it or throws, naming every symbol tried.
template <typename Function, std::size_t N>
const char* bindRequired(void* handle, const std::string& library, Function& slot,
                         const char* const (&symbols)[N]) {
  std::string error;
  if (const char* found = bind(handle, slot, symbols, &error)) return found;
  std::string names;
  for (const char* symbol : symbols) {
    if (!names.empty()) names += " or ";
    names += symbol;
  }
  throw NvmlError(library + " has no " + names + ": " + error, Return::kFunctionNotFound,
                  symbols[0]);
}

/// A NUL-terminated string out of a fixed buffer that NVML may have filled to the brim.
template <std::size_t N>
std::string fromBuffer(const char (&buffer)[N]) {
  return std::string(buffer, ::strnlen(buffer, N));
}

// Return (Nvml.h) is a copy of nvml.h's nvmlReturn_t (NvmlAbi.h), converted by value: each copy
// checked against the declaration, so that a typo in either fails the build instead of turning
// one code into another.
constexpr bool sameCode(Return ours, nvmlReturn_t theirs) {
  return static_cast<int>(ours) == static_cast<int>(theirs);
}
static_assert(sameCode(Return::kSuccess, NVML_SUCCESS));
static_assert(sameCode(Return::kUninitialized, NVML_ERROR_UNINITIALIZED));
static_assert(sameCode(Return::kInvalidArgument, NVML_ERROR_INVALID_ARGUMENT));
static_assert(sameCode(Return::kNotSupported, NVML_ERROR_NOT_SUPPORTED));
static_assert(sameCode(Return::kNoPermission, NVML_ERROR_NO_PERMISSION));
static_assert(sameCode(Return::kAlreadyInitialized, NVML_ERROR_ALREADY_INITIALIZED));
static_assert(sameCode(Return::kNotFound, NVML_ERROR_NOT_FOUND));
static_assert(sameCode(Return::kInsufficientSize, NVML_ERROR_INSUFFICIENT_SIZE));
static_assert(sameCode(Return::kInsufficientPower, NVML_ERROR_INSUFFICIENT_POWER));
static_assert(sameCode(Return::kDriverNotLoaded, NVML_ERROR_DRIVER_NOT_LOADED));
static_assert(sameCode(Return::kTimeout, NVML_ERROR_TIMEOUT));
static_assert(sameCode(Return::kIrqIssue, NVML_ERROR_IRQ_ISSUE));
static_assert(sameCode(Return::kLibraryNotFound, NVML_ERROR_LIBRARY_NOT_FOUND));
static_assert(sameCode(Return::kFunctionNotFound, NVML_ERROR_FUNCTION_NOT_FOUND));
static_assert(sameCode(Return::kCorruptedInforom, NVML_ERROR_CORRUPTED_INFOROM));
static_assert(sameCode(Return::kGpuIsLost, NVML_ERROR_GPU_IS_LOST));
static_assert(sameCode(Return::kResetRequired, NVML_ERROR_RESET_REQUIRED));
static_assert(sameCode(Return::kOperatingSystem, NVML_ERROR_OPERATING_SYSTEM));
static_assert(sameCode(Return::kLibRmVersionMismatch, NVML_ERROR_LIB_RM_VERSION_MISMATCH));
static_assert(sameCode(Return::kInUse, NVML_ERROR_IN_USE));
static_assert(sameCode(Return::kMemory, NVML_ERROR_MEMORY));
static_assert(sameCode(Return::kNoData, NVML_ERROR_NO_DATA));
static_assert(sameCode(Return::kVgpuEccNotSupported, NVML_ERROR_VGPU_ECC_NOT_SUPPORTED));
static_assert(sameCode(Return::kInsufficientResources, NVML_ERROR_INSUFFICIENT_RESOURCES));
static_assert(sameCode(Return::kFreqNotSupported, NVML_ERROR_FREQ_NOT_SUPPORTED));
static_assert(sameCode(Return::kArgumentVersionMismatch, NVML_ERROR_ARGUMENT_VERSION_MISMATCH));
static_assert(sameCode(Return::kDeprecated, NVML_ERROR_DEPRECATED));
static_assert(sameCode(Return::kNotReady, NVML_ERROR_NOT_READY));
static_assert(sameCode(Return::kGpuNotFound, NVML_ERROR_GPU_NOT_FOUND));
static_assert(sameCode(Return::kInvalidState, NVML_ERROR_INVALID_STATE));
static_assert(sameCode(Return::kUnknown, NVML_ERROR_UNKNOWN));
// MigMode::enabled() compares with nvml.h's value of the mode.
static_assert(NVML_DEVICE_MIG_ENABLE == 1 && NVML_DEVICE_MIG_DISABLE == 0);
nvmlReturn_t toC(Return code) { return static_cast<nvmlReturn_t>(static_cast<int>(code)); }

}  // namespace

std::string returnName(Return code) {
  switch (code) {
    case Return::kSuccess:
      return "NVML_SUCCESS";
    case Return::kUninitialized:
      return "NVML_ERROR_UNINITIALIZED";
    case Return::kInvalidArgument:
      return "NVML_ERROR_INVALID_ARGUMENT";
    case Return::kNotSupported:
      return "NVML_ERROR_NOT_SUPPORTED";
    case Return::kNoPermission:
      return "NVML_ERROR_NO_PERMISSION";
    case Return::kAlreadyInitialized:
      return "NVML_ERROR_ALREADY_INITIALIZED";
    case Return::kNotFound:
      return "NVML_ERROR_NOT_FOUND";
    case Return::kInsufficientSize:
      return "NVML_ERROR_INSUFFICIENT_SIZE";
    case Return::kInsufficientPower:
      return "NVML_ERROR_INSUFFICIENT_POWER";
    case Return::kDriverNotLoaded:
      return "NVML_ERROR_DRIVER_NOT_LOADED";
    case Return::kTimeout:
      return "NVML_ERROR_TIMEOUT";
    case Return::kIrqIssue:
      return "NVML_ERROR_IRQ_ISSUE";
    case Return::kLibraryNotFound:
      return "NVML_ERROR_LIBRARY_NOT_FOUND";
    case Return::kFunctionNotFound:
      return "NVML_ERROR_FUNCTION_NOT_FOUND";
    case Return::kCorruptedInforom:
      return "NVML_ERROR_CORRUPTED_INFOROM";
    case Return::kGpuIsLost:
      return "NVML_ERROR_GPU_IS_LOST";
    case Return::kResetRequired:
      return "NVML_ERROR_RESET_REQUIRED";
    case Return::kOperatingSystem:
      return "NVML_ERROR_OPERATING_SYSTEM";
    case Return::kLibRmVersionMismatch:
      return "NVML_ERROR_LIB_RM_VERSION_MISMATCH";
    case Return::kInUse:
      return "NVML_ERROR_IN_USE";
    case Return::kMemory:
      return "NVML_ERROR_MEMORY";
    case Return::kNoData:
      return "NVML_ERROR_NO_DATA";
    case Return::kVgpuEccNotSupported:
      return "NVML_ERROR_VGPU_ECC_NOT_SUPPORTED";
    case Return::kInsufficientResources:
      return "NVML_ERROR_INSUFFICIENT_RESOURCES";
    case Return::kFreqNotSupported:
      return "NVML_ERROR_FREQ_NOT_SUPPORTED";
    case Return::kArgumentVersionMismatch:
      return "NVML_ERROR_ARGUMENT_VERSION_MISMATCH";
    case Return::kDeprecated:
      return "NVML_ERROR_DEPRECATED";
    case Return::kNotReady:
      return "NVML_ERROR_NOT_READY";
    case Return::kGpuNotFound:
      return "NVML_ERROR_GPU_NOT_FOUND";
    case Return::kInvalidState:
      return "NVML_ERROR_INVALID_STATE";
    case Return::kUnknown:
      return "NVML_ERROR_UNKNOWN";
  }
  return "nvmlReturn_t " + std::to_string(static_cast<int>(code));
}

// ---- NvmlLibrary ----

namespace {
/// How long a library that could not be opened is taken to be still missing.
constexpr std::chrono::seconds kRetryMissingAfter{10};

/// Whether a failed dlopen of `pathOrName` found the library and could not load it (a wrong
/// architecture, a missing dependency, a file that is no shared library), as opposed to finding
/// no such file: a host without the driver. A path is there when the file exists; a bare name,
/// unless the loader says that it, not one of its dependencies, is not found.
bool libraryIsPresent(const std::string& pathOrName, const std::string& reason) {
  if (pathOrName.find('/') != std::string::npos) {
    struct stat info {};
    return ::stat(pathOrName.c_str(), &info) == 0;
  }
  return !reason.starts_with(pathOrName + ": cannot open shared object file: No such file");
}
}  // namespace

std::shared_ptr<const NvmlLibrary> NvmlLibrary::load() {
  const char* chosen = std::getenv(kLibraryEnvironmentVariable);
  return load(chosen != nullptr && *chosen != '\0' ? chosen : kDefaultLibraryName);
}

std::shared_ptr<const NvmlLibrary> NvmlLibrary::load(const std::string& pathOrName) {
  // One entry per name, kept for the life of the process. A failed dlopen is remembered for a
  // while (kRetryMissingAfter): on a host without the driver every discovery would otherwise
  // pay the loader's whole search again, a tenth of a millisecond and more; a driver installed
  // later is still found after that.
  // Never destroyed, so that a load() from another static's destructor still finds it.
  static std::mutex& mutex = *new std::mutex;
  static auto& loaded = *new std::map<std::string, std::shared_ptr<const NvmlLibrary>>;
  struct Missing {
    std::string message;
    std::chrono::steady_clock::time_point until;
    bool present = false;
  };
  static auto& missing = *new std::map<std::string, Missing>;
  const std::lock_guard<std::mutex> lock(mutex);
  if (auto found = loaded.find(pathOrName); found != loaded.end()) return found->second;
  const auto now = std::chrono::steady_clock::now();
  if (auto failed = missing.find(pathOrName);
      failed != missing.end() && now < failed->second.until) {
    throw NvmlError(failed->second.message, Return::kLibraryNotFound, "dlopen",
                    failed->second.present);
  }

  ::dlerror();
  void* handle = ::dlopen(pathOrName.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    std::string reason = dl::takeError();
    if (reason.empty()) reason = "(no text)";
    const bool present = libraryIsPresent(pathOrName, reason);
    std::string message = present ? pathOrName + " is there but cannot be loaded: dlopen(" +
                                        pathOrName + ") failed: " + reason
                                  : "dlopen(" + pathOrName + ") failed: " + reason;
    missing[pathOrName] = Missing{message, now + kRetryMissingAfter, present};
    throw NvmlError(std::move(message), Return::kLibraryNotFound, "dlopen", present);
  }
  missing.erase(pathOrName);
  // Not closed on failure either: what a half-usable vendor library registered at load (atexit
  // handlers, threads) must not outlive its code.
  std::shared_ptr<const NvmlLibrary> library(new NvmlLibrary(pathOrName, handle));
  loaded.emplace(pathOrName, library);
  return library;
}

NvmlLibrary::NvmlLibrary(std::string name, void* handle)
    : name_(std::move(name)), file_(name_), handle_(handle) {
  auto api = std::make_unique<Api>();
  api->initName = bindRequired(handle, name_, api->init, {"nvmlInit_v2", "nvmlInit"});
  bindRequired(handle, name_, api->shutdown, {"nvmlShutdown"});
  bindRequired(handle, name_, api->errorString, {"nvmlErrorString"});
  api->getCountName =
      bindRequired(handle, name_, api->getCount, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"});
  api->getHandleByIndexName =
      bindRequired(handle, name_, api->getHandleByIndex,
                   {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"});
  bindRequired(handle, name_, api->getUuid, {"nvmlDeviceGetUUID"});

  bind(handle, api->getName, {"nvmlDeviceGetName"});
  if (const char* found =
          bind(handle, api->getPciInfo,
               {"nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2", "nvmlDeviceGetPciInfo"})) {
    api->getPciInfoName = found;
    api->pciInfoIsV1 = std::strcmp(found, "nvmlDeviceGetPciInfo") == 0;
  }
  bind(handle, api->getMemoryInfo, {"nvmlDeviceGetMemoryInfo"});
  bind(handle, api->getMinorNumber, {"nvmlDeviceGetMinorNumber"});
  bind(handle, api->getMigMode, {"nvmlDeviceGetMigMode"});
  bind(handle, api->getMaxMigDeviceCount, {"nvmlDeviceGetMaxMigDeviceCount"});
  bind(handle, api->getMigDeviceHandleByIndex, {"nvmlDeviceGetMigDeviceHandleByIndex"});
  bind(handle, api->getGpuInstanceId, {"nvmlDeviceGetGpuInstanceId"});
  bind(handle, api->getComputeInstanceId, {"nvmlDeviceGetComputeInstanceId"});
  bind(handle, api->getCudaComputeCapability, {"nvmlDeviceGetCudaComputeCapability"});
  bind(handle, api->initWithFlags, {"nvmlInitWithFlags"});

  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(api->init), &info) != 0 && info.dli_fname != nullptr &&
      *info.dli_fname != '\0') {
    file_ = info.dli_fname;
  }
  api_ = std::move(api);
}

NvmlLibrary::~NvmlLibrary() = default;

std::string NvmlLibrary::errorString(Return code) const {
  const char* text = api_->errorString(toC(code));
  return text != nullptr ? std::string(text) : std::string();
}

std::string NvmlLibrary::describeFailure(std::string_view function, Return code) const {
  std::string text = errorString(code);
  if (text.empty()) text = "(no text)";
  return std::string(function) + " failed: " + text + " (" + returnName(code) + ", " +
         std::to_string(static_cast<int>(code)) + ")";
}

bool NvmlLibrary::hasSymbol(const std::string& symbol) const {
  return lookUp(handle_, symbol.c_str()) != nullptr;
}

void* NvmlLibrary::symbol(const char* symbol) const { return lookUp(handle_, symbol); }

// ---- NvmlSession ----

NvmlSession::NvmlSession(std::shared_ptr<const NvmlLibrary> library)
    : library_(std::move(library)) {
  const NvmlLibrary::Api& api = *library_->api_;
  const bool withFlags = api.initWithFlags != nullptr;
  const char* function = withFlags ? "nvmlInitWithFlags" : api.initName;
  const Return code = toReturn(withFlags ? api.initWithFlags(NVML_INIT_FLAG_NO_GPUS) : api.init());
  if (code != Return::kSuccess) {
    // No shutdown: NVML counts only the inits that succeeded.
    throw NvmlError(library_->describeFailure(function, code), code, function);
  }
}

NvmlSession::~NvmlSession() {
  // Its result is of no use here: after a failed shutdown there is nothing left to undo.
  static_cast<void>(library_->api_->shutdown());
}

Result<unsigned> NvmlSession::deviceCount() const {
  const NvmlLibrary::Api& api = *library_->api_;
  unsigned int count = 0;
  const Return code = toReturn(api.getCount(&count));
  return {code, code == Return::kSuccess ? count : 0u, api.getCountName};
}

Result<Device> NvmlSession::deviceByIndex(unsigned index) const {
  const NvmlLibrary::Api& api = *library_->api_;
  nvmlDevice_t handle = nullptr;
  const Return code = toReturn(api.getHandleByIndex(index, &handle));
  if (code != Return::kSuccess) return {code, Device(), api.getHandleByIndexName};
  return {code, Device(library_.get(), handle), api.getHandleByIndexName};
}

// ---- Device ----

Result<std::string> Device::uuid() const {
  char buffer[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
  const Return code = toReturn(library_->api_->getUuid(handle_, buffer, sizeof buffer));
  return {code, code == Return::kSuccess ? fromBuffer(buffer) : std::string(), "nvmlDeviceGetUUID"};
}

Result<std::string> Device::name() const {
  constexpr const char* kFunction = "nvmlDeviceGetName";
  if (library_->api_->getName == nullptr) return missing<std::string>(kFunction);
  char buffer[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
  const Return code = toReturn(library_->api_->getName(handle_, buffer, sizeof buffer));
  return {code, code == Return::kSuccess ? fromBuffer(buffer) : std::string(), kFunction};
}

Result<PciInfo> Device::pciInfo() const {
  const NvmlLibrary::Api& api = *library_->api_;
  if (api.getPciInfo == nullptr) return missing<PciInfo>(api.getPciInfoName);
  nvmlPciInfo_t raw{};
  const Return code = toReturn(api.getPciInfo(handle_, &raw));
  Result<PciInfo> result{code, PciInfo{}, api.getPciInfoName};
  if (code != Return::kSuccess) return result;
  PciInfo& info = result.value;
  if (api.pciInfoIsV1) {
    nvmlPciInfoV1_t v1{};
    std::memcpy(&v1, &raw, sizeof v1);  // it wrote this shorter layout into our buffer
    info.busIdLegacy = fromBuffer(v1.busId);
    info.domain = v1.domain;
    info.bus = v1.bus;
    info.device = v1.device;
    info.pciDeviceId = v1.pciDeviceId;
    info.pciSubSystemId = v1.pciSubSystemId;
    char busId[32];
    std::snprintf(busId, sizeof busId, "%08X:%02X:%02X.0", v1.domain, v1.bus, v1.device);
    info.busId = busId;
  } else {
    info.busId = fromBuffer(raw.busId);
    info.busIdLegacy = fromBuffer(raw.busIdLegacy);
    info.domain = raw.domain;
    info.bus = raw.bus;
    info.device = raw.device;
    info.pciDeviceId = raw.pciDeviceId;
    info.pciSubSystemId = raw.pciSubSystemId;
  }
  return result;
}

Result<Memory> Device::memoryInfo() const {
  constexpr const char* kFunction = "nvmlDeviceGetMemoryInfo";
  if (library_->api_->getMemoryInfo == nullptr) return missing<Memory>(kFunction);
  nvmlMemory_t raw{};
  const Return code = toReturn(library_->api_->getMemoryInfo(handle_, &raw));
  return {code, code == Return::kSuccess ? Memory{raw.total, raw.free, raw.used} : Memory{},
          kFunction};
}

namespace {

/// The shape of every call that writes one unsigned int.
template <typename Function>
Result<unsigned> unsignedProperty(Function function, const char* name, nvmlDevice_t handle) {
  if (function == nullptr) return missing<unsigned>(name);
  unsigned int value = 0;
  const Return code = toReturn(function(handle, &value));
  return {code, code == Return::kSuccess ? value : 0u, name};
}

}  // namespace

Result<unsigned> Device::minorNumber() const {
  return unsignedProperty(library_->api_->getMinorNumber, "nvmlDeviceGetMinorNumber", handle_);
}

Result<MigMode> Device::migMode() const {
  constexpr const char* kFunction = "nvmlDeviceGetMigMode";
  if (library_->api_->getMigMode == nullptr) return missing<MigMode>(kFunction);
  unsigned int current = 0;
  unsigned int pending = 0;
  const Return code = toReturn(library_->api_->getMigMode(handle_, &current, &pending));
  return {code, code == Return::kSuccess ? MigMode{current, pending} : MigMode{}, kFunction};
}

Result<unsigned> Device::maxMigDeviceCount() const {
  return unsignedProperty(library_->api_->getMaxMigDeviceCount, "nvmlDeviceGetMaxMigDeviceCount",
                          handle_);
}

Result<Device> Device::migDeviceByIndex(unsigned index) const {
  constexpr const char* kFunction = "nvmlDeviceGetMigDeviceHandleByIndex";
  if (library_->api_->getMigDeviceHandleByIndex == nullptr) return missing<Device>(kFunction);
  nvmlDevice_t mig = nullptr;
  const Return code = toReturn(library_->api_->getMigDeviceHandleByIndex(handle_, index, &mig));
  if (code != Return::kSuccess) return {code, Device(), kFunction};
  return {code, Device(library_, mig), kFunction};
}

Result<unsigned> Device::gpuInstanceId() const {
  return unsignedProperty(library_->api_->getGpuInstanceId, "nvmlDeviceGetGpuInstanceId", handle_);
}

Result<unsigned> Device::computeInstanceId() const {
  return unsignedProperty(library_->api_->getComputeInstanceId, "nvmlDeviceGetComputeInstanceId",
                          handle_);
}

Result<CudaComputeCapability> Device::cudaComputeCapability() const {
  constexpr const char* kFunction = "nvmlDeviceGetCudaComputeCapability";
  if (library_->api_->getCudaComputeCapability == nullptr) {
    return missing<CudaComputeCapability>(kFunction);
  }
  int major = 0;
  int minor = 0;
  const Return code = toReturn(library_->api_->getCudaComputeCapability(handle_, &major, &minor));
  return {code,
          code == Return::kSuccess ? CudaComputeCapability{major, minor} : CudaComputeCapability{},
          kFunction};
}

std::unique_ptr<NvmlSession> holdSession() {
  try {
    return std::make_unique<NvmlSession>(NvmlLibrary::load());
  } catch (const NvmlError&) {
    return nullptr;
  }
}

}  // namespace flink::nvml
