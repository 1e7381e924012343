// The part of NVIDIA's nvml.h that tells what a device is doing and whether it can be used now:
// the processes running on it, its memory in use, NVIDIA's recovery action (a field value), its
// NVLink fabric registration, its compute mode. Declared as nvml.h declares them, beside
// NvmlAbi.h and with the same rules (see there): only src/host/nvml/NvmlDeviceState.cpp, which
// takes the function types from these declarations and looks the functions up with dlsym, and
// the stand-in library of the tests, which defines them, include it.
#pragma once

#include "host/nvml/NvmlAbi.h"

extern "C" {

/// nvml.h's version tag of a versioned struct: its size, and the version in the top byte.
#define NVML_STRUCT_VERSION(data, ver) \
  (unsigned int)(sizeof(nvml##data##_v##ver##_t) | (ver << 24U))

/// nvml.h's "value not available" (an unsigned field reads as all ones).
#define NVML_VALUE_NOT_AVAILABLE (-1)

// ---- Running processes ------------------------------------------------------------------------

/// What the unversioned nvmlDevice*RunningProcesses (NVML before v2) fill.
typedef struct nvmlProcessInfo_v1_st {
  unsigned int pid;
  unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

/// What the _v2 and _v3 functions fill. pid is in the host's pid namespace; usedGpuMemory is
/// NVML_VALUE_NOT_AVAILABLE where the driver cannot tell. gpuInstanceId and computeInstanceId
/// name the MIG instance the process runs on, 0xFFFFFFFF without MIG.
typedef struct nvmlProcessInfo_v2_st {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlProcessInfo_v2_t, nvmlProcessInfo_t;

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* infoCount,
                                                     nvmlProcessInfo_t* infos);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int* infoCount,
                                                     nvmlProcessInfo_v2_t* infos);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int* infoCount,
                                                  nvmlProcessInfo_v1_t* infos);
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device, unsigned int* infoCount,
                                                      nvmlProcessInfo_t* infos);
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t device, unsigned int* infoCount,
                                                      nvmlProcessInfo_v2_t* infos);
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t device, unsigned int* infoCount,
                                                   nvmlProcessInfo_v1_t* infos);
nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v3(nvmlDevice_t device,
                                                        unsigned int* infoCount,
                                                        nvmlProcessInfo_t* infos);
nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v2(nvmlDevice_t device,
                                                        unsigned int* infoCount,
                                                        nvmlProcessInfo_v2_t* infos);
nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses(nvmlDevice_t device, unsigned int* infoCount,
                                                     nvmlProcessInfo_v1_t* infos);

// ---- Memory, version 2 ------------------------------------------------------------------------

/// nvmlDeviceGetMemoryInfo_v2's result: the memory the driver and firmware reserve is apart
/// (`reserved`), so that `used` is what allocations use.
typedef struct nvmlMemory_v2_st {
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_v2_t;

#define nvmlMemory_v2 NVML_STRUCT_VERSION(Memory, 2)

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory);

// ---- Field values: NVIDIA's recovery action ---------------------------------------------------

typedef enum nvmlValueType_enum {
  NVML_VALUE_TYPE_DOUBLE = 0,
  NVML_VALUE_TYPE_UNSIGNED_INT = 1,
  NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
  NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3,
  NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4,
  NVML_VALUE_TYPE_SIGNED_INT = 5,
  NVML_VALUE_TYPE_UNSIGNED_SHORT = 6,
  NVML_VALUE_TYPE_COUNT
} nvmlValueType_t;

typedef union nvmlValue_st {
  double dVal;
  int siVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  signed long long sllVal;
  unsigned short usVal;
} nvmlValue_t;

/// One field of nvmlDeviceGetFieldValues: fieldId (and scopeId) set by the caller; nvmlReturn
/// says whether this field was read, and value is defined only then.
typedef struct nvmlFieldValue_st {
  unsigned int fieldId;
  unsigned int scopeId;
  long long timestamp;
  long long latencyUsec;
  nvmlValueType_t valueType;
  nvmlReturn_t nvmlReturn;
  nvmlValue_t value;
} nvmlFieldValue_t;

/// The field of the action the driver asks for before the GPU can be used again
/// (nvmlDeviceGpuRecoveryAction_t), drivers from 560 on.
#define NVML_FI_DEV_GET_GPU_RECOVERY_ACTION 230

typedef enum nvmlDeviceGpuRecoveryAction_s {
  NVML_GPU_RECOVERY_ACTION_NONE = 0,
  NVML_GPU_RECOVERY_ACTION_GPU_RESET = 1,
  NVML_GPU_RECOVERY_ACTION_NODE_REBOOT = 2,
  NVML_GPU_RECOVERY_ACTION_DRAIN_P2P = 3,
  NVML_GPU_RECOVERY_ACTION_DRAIN_AND_RESET = 4,
  NVML_GPU_RECOVERY_ACTION_RECOVER_IMEX_DOMAIN = 5,
} nvmlDeviceGpuRecoveryAction_t;

/// NVML_SUCCESS when any value was filled: each field's own nvmlReturn says whether it was.
nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount,
                                      nvmlFieldValue_t* values);

// ---- NVLink fabric (NVSwitch hosts: HGX Hopper and later, GB200) -------------------------------

#define NVML_GPU_FABRIC_UUID_LEN 16

#define NVML_GPU_FABRIC_STATE_NOT_SUPPORTED 0
#define NVML_GPU_FABRIC_STATE_NOT_STARTED 1
#define NVML_GPU_FABRIC_STATE_IN_PROGRESS 2
#define NVML_GPU_FABRIC_STATE_COMPLETED 3

typedef unsigned char nvmlGpuFabricState_t;

/// What the unversioned (deprecated) nvmlDeviceGetGpuFabricInfo fills.
typedef struct {
  unsigned char clusterUuid[NVML_GPU_FABRIC_UUID_LEN];
  nvmlReturn_t status;
  unsigned int cliqueId;
  nvmlGpuFabricState_t state;
} nvmlGpuFabricInfo_t;

typedef struct {
  unsigned int version;
  unsigned char clusterUuid[NVML_GPU_FABRIC_UUID_LEN];
  nvmlReturn_t status;
  unsigned int cliqueId;
  nvmlGpuFabricState_t state;
  unsigned int healthMask;
} nvmlGpuFabricInfo_v2_t;

#define nvmlGpuFabricInfo_v2 NVML_STRUCT_VERSION(GpuFabricInfo, 2)

/// status is meaningful only once state is NVML_GPU_FABRIC_STATE_COMPLETED.
typedef struct {
  unsigned int version;
  unsigned char clusterUuid[NVML_GPU_FABRIC_UUID_LEN];
  nvmlReturn_t status;
  unsigned int cliqueId;
  nvmlGpuFabricState_t state;
  unsigned int healthMask;
  unsigned char healthSummary;
} nvmlGpuFabricInfo_v3_t;

typedef nvmlGpuFabricInfo_v3_t nvmlGpuFabricInfoV_t;

#define nvmlGpuFabricInfo_v3 NVML_STRUCT_VERSION(GpuFabricInfo, 3)

// The degraded-bandwidth part of healthMask: two bits at bit 0.
#define NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_NOT_SUPPORTED 0
#define NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_TRUE 1
#define NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_FALSE 2
#define NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_DEGRADED_BW 0
#define NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_DEGRADED_BW 0x3

#define NVML_GPU_FABRIC_HEALTH_SUMMARY_NOT_SUPPORTED 0
#define NVML_GPU_FABRIC_HEALTH_SUMMARY_HEALTHY 1
#define NVML_GPU_FABRIC_HEALTH_SUMMARY_UNHEALTHY 2
#define NVML_GPU_FABRIC_HEALTH_SUMMARY_LIMITED_CAPACITY 3

/// The caller sets version (nvmlGpuFabricInfo_v3, or _v2); a driver that does not know it answers
/// NVML_ERROR_ARGUMENT_VERSION_MISMATCH.
nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device, nvmlGpuFabricInfoV_t* gpuFabricInfo);
nvmlReturn_t nvmlDeviceGetGpuFabricInfo(nvmlDevice_t device, nvmlGpuFabricInfo_t* gpuFabricInfo);

// ---- Compute mode -----------------------------------------------------------------------------

typedef enum nvmlComputeMode_enum {
  NVML_COMPUTEMODE_DEFAULT = 0,
  NVML_COMPUTEMODE_EXCLUSIVE_THREAD = 1,
  NVML_COMPUTEMODE_PROHIBITED = 2,
  NVML_COMPUTEMODE_EXCLUSIVE_PROCESS = 3,
  NVML_COMPUTEMODE_COUNT
} nvmlComputeMode_t;

nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, nvmlComputeMode_t* mode);

}  // extern "C"

static_assert(sizeof(nvmlProcessInfo_v1_t) == 16, "nvml.h's nvmlProcessInfo_v1_t is 16 bytes");
static_assert(sizeof(nvmlProcessInfo_t) == 24, "nvml.h's nvmlProcessInfo_t is 24 bytes");
static_assert(sizeof(nvmlMemory_v2_t) == 40, "nvml.h's nvmlMemory_v2_t is 40 bytes");
static_assert(sizeof(nvmlFieldValue_t) == 40, "nvml.h's nvmlFieldValue_t is 40 bytes");
static_assert(nvmlGpuFabricInfo_v2 == 0x02000024u, "nvml.h's nvmlGpuFabricInfo_v2 tag");
static_assert(nvmlGpuFabricInfo_v3 == 0x03000028u, "nvml.h's nvmlGpuFabricInfo_v3 tag");
static_assert(nvmlMemory_v2 == 0x02000028u, "nvml.h's nvmlMemory_v2 tag");
