// The part of NVIDIA's nvml.h that this project uses, declared as nvml.h declares it, so that
// nothing here needs the CUDA toolkit or the driver's headers at build time.
//
// Only two kinds of file include this: the binding's sources (src/host/nvml/*.cpp), which take each
// function's type from these declarations (`decltype(&nvmlInit_v2)`) and look the function up
// with dlsym, never calling it by name (so nothing links against libnvidia-ml); and the stand-in
// library of the tests (tests/fixtures/nvml/), which defines them, so that the compiler checks
// that the stand-in and the binding agree. The C++ copies of its values that the rest of the
// project uses (nvml::Return, TopologyLevel, NvLinkRemote in Nvml.h) are checked against these
// with static_asserts beside their conversions (Nvml.cpp, NvmlTopologyCalls.cpp).
//
// The names, tags and layouts are nvml.h's, in the global namespace: a function called through a
// pointer of another type (a plain int for nvmlReturn_t, say) is undefined behaviour, and UBSan's
// -fsanitize=function reports it when the stand-in is loaded into a sanitized test.
//
// Every function returns an nvmlReturn_t and writes its results through pointers; the buffer
// sizes are nvml.h's NVML_DEVICE_UUID_V2_BUFFER_SIZE and NVML_DEVICE_NAME_V2_BUFFER_SIZE.
#pragma once

extern "C" {

/// nvml.h's nvmlReturn_t: what every NVML function returns. Only the codes this project names.
typedef enum nvmlReturn_enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_ALREADY_INITIALIZED = 5,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_INSUFFICIENT_POWER = 8,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_IRQ_ISSUE = 11,
  NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_CORRUPTED_INFOROM = 14,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_RESET_REQUIRED = 16,
  NVML_ERROR_OPERATING_SYSTEM = 17,
  NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
  NVML_ERROR_IN_USE = 19,
  NVML_ERROR_MEMORY = 20,
  NVML_ERROR_NO_DATA = 21,
  NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22,
  NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
  NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
  NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
  NVML_ERROR_DEPRECATED = 26,
  NVML_ERROR_NOT_READY = 27,
  NVML_ERROR_GPU_NOT_FOUND = 28,
  NVML_ERROR_INVALID_STATE = 29,
  NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;

/// An opaque device handle: a whole GPU's or a MIG device's. Valid between nvmlInit and
/// nvmlShutdown.
typedef struct nvmlDevice_st* nvmlDevice_t;

/// nvmlDeviceGetPciInfo_v2/_v3's result. busId is "domain:bus:device.function" with an 8-digit
/// domain ("00000000:19:00.0", NVML_DEVICE_PCI_BUS_ID_FMT "%08X:%02X:%02X.0"); busIdLegacy has a
/// 4-digit one ("0000:19:00.0").
typedef struct nvmlPciInfo_st {
  char busIdLegacy[16];  // NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;     // device id in the upper 16 bits, vendor id in the lower
  unsigned int pciSubSystemId;  // likewise
  char busId[32];               // NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE
} nvmlPciInfo_t;

/// What the unversioned nvmlDeviceGetPciInfo (NVML before v2) writes into the same buffer:
/// the legacy 16-byte bus id where busIdLegacy is, then the numbers, then reserved words. It
/// is shorter than nvmlPciInfo_t, so a caller passes an nvmlPciInfo_t and reads it as this.
typedef struct nvmlPciInfoV1_st {
  char busId[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  unsigned int reserved0;
  unsigned int reserved1;
  unsigned int reserved2;
  unsigned int reserved3;
} nvmlPciInfoV1_t;

/// nvmlDeviceGetMemoryInfo's result, in bytes.
typedef struct nvmlMemory_st {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_DEVICE_MIG_DISABLE 0
#define NVML_DEVICE_MIG_ENABLE 1

nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlInit(void);
nvmlReturn_t nvmlShutdown(void);
const char* nvmlErrorString(nvmlReturn_t result);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* deviceCount);
nvmlReturn_t nvmlDeviceGetCount(unsigned int* deviceCount);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device);
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device);
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length);
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci);
nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t* pci);
/// Writes an nvmlPciInfoV1_t (see there), whatever the pointer's type says.
nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t* pci);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory);
nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int* minorNumber);
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* currentMode,
                                  unsigned int* pendingMode);
nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int* count);
nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                 nvmlDevice_t* migDevice);
nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int* id);
nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int* id);
nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int* major, int* minor);

// ---- Initialization with flags (NVML 9 on) ----------------------------------------------------

/// nvml.h's flag for nvmlInitWithFlags: do not fail when the host has no GPU (a plain nvmlInit
/// fails then, and a host with the driver but no GPU could not be told from a broken driver).
#define NVML_INIT_FLAG_NO_GPUS 1
nvmlReturn_t nvmlInitWithFlags(unsigned int flags);
// ---- Topology (src/host/enumeration/NvmlTopology.cpp, the placement rule) ----
// NVLinks, PCIe ancestry, CPU and memory affinity, as nvml.h declares them.

// nvml.h's NVML_NVLINK_MAX_LINKS is not declared here, nor any other limit that changes between
// versions of nvml.h (it is 18 in 12.9, 36 in 13.3): a limit is the header's, not the GPU's, and
// a build with an older one would never ask a newer GPU's last links. A GPU's links are asked one
// by one until NVML answers NVML_ERROR_INVALID_ARGUMENT (host/enumeration/NvmlTopology.cpp).

/// nvml.h's nvmlEnableState_t.
typedef enum nvmlEnableState_enum {
  NVML_FEATURE_DISABLED = 0,
  NVML_FEATURE_ENABLED = 1
} nvmlEnableState_t;

/// nvml.h's nvmlIntNvLinkDeviceType_t: what is at the far end of an NVLink.
typedef enum nvmlIntNvLinkDeviceType_enum {
  NVML_NVLINK_DEVICE_TYPE_GPU = 0x00,
  NVML_NVLINK_DEVICE_TYPE_IBMNPU = 0x01,
  NVML_NVLINK_DEVICE_TYPE_SWITCH = 0x02,
  NVML_NVLINK_DEVICE_TYPE_UNKNOWN = 0xFF
} nvmlIntNvLinkDeviceType_t;

/// nvml.h's nvmlGpuTopologyLevel_t: the closest common PCIe ancestor of two GPUs.
typedef enum nvmlGpuLevel_enum {
  NVML_TOPOLOGY_INTERNAL = 0,
  NVML_TOPOLOGY_SINGLE = 10,
  NVML_TOPOLOGY_MULTIPLE = 20,
  NVML_TOPOLOGY_HOSTBRIDGE = 30,
  NVML_TOPOLOGY_NODE = 40,
  NVML_TOPOLOGY_SYSTEM = 50
} nvmlGpuTopologyLevel_t;

/// nvml.h's nvmlAffinityScope_t and its two values.
typedef unsigned int nvmlAffinityScope_t;
#define NVML_AFFINITY_SCOPE_NODE 0
#define NVML_AFFINITY_SCOPE_SOCKET 1

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                      nvmlEnableState_t* isActive);
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                 nvmlPciInfo_t* pci);
nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link,
                                                 nvmlIntNvLinkDeviceType_t* pNvLinkDeviceType);
nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1, nvmlDevice_t device2,
                                                 nvmlGpuTopologyLevel_t* pathInfo);
/// cpuSet: cpuSetSize unsigned longs, CPU i in bit i % 64 of word i / 64 (on 64-bit Linux).
nvmlReturn_t nvmlDeviceGetCpuAffinityWithinScope(nvmlDevice_t device, unsigned int cpuSetSize,
                                                 unsigned long* cpuSet, nvmlAffinityScope_t scope);
nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t device, unsigned int cpuSetSize,
                                      unsigned long* cpuSet);
nvmlReturn_t nvmlDeviceGetMemoryAffinity(nvmlDevice_t device, unsigned int nodeSetSize,
                                         unsigned long* nodeSet, nvmlAffinityScope_t scope);
nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t device, unsigned int* node);
// ---- end of topology ----

}  // extern "C"

static_assert(sizeof(nvmlPciInfo_t) == 68, "nvml.h's nvmlPciInfo_t is 68 bytes");
static_assert(sizeof(nvmlPciInfoV1_t) == 52 && sizeof(nvmlPciInfoV1_t) <= sizeof(nvmlPciInfo_t),
              "NVML v1's nvmlPciInfo_t is 52 bytes and fits in the current one");
static_assert(sizeof(nvmlMemory_t) == 24, "nvml.h's nvmlMemory_t is three 64-bit counts");
