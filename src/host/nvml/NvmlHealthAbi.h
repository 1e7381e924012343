// The part of NVIDIA's nvml.h that health checks and `flink-gpu watch` use: row remapping,
// retired pages, persistence mode, and event sets. Declared as nvml.h declares them, beside
// NvmlAbi.h and with the same rules (see there): only src/host/nvml/NvmlHealth.cpp, which takes the
// function types from these declarations and looks the functions up with dlsym, and the stand-in
// library of the tests, which defines them, include it.
#pragma once

#include "host/nvml/NvmlAbi.h"

extern "C" {

// nvml.h's generic enable/disable enum (persistence mode, retired pages pending),
// nvmlEnableState_t, is declared in NvmlAbi.h (NVLink state uses it too).

/// nvml.h's handle to an event set.
typedef struct nvmlEventSet_st* nvmlEventSet_t;

// nvml.h's event types (a bit mask).
#define nvmlEventTypeSingleBitEccError 0x0000000000000001LL
#define nvmlEventTypeDoubleBitEccError 0x0000000000000002LL
#define nvmlEventTypePState 0x0000000000000004LL
#define nvmlEventTypeXidCriticalError 0x0000000000000008LL
/// The driver's recovery action changed (drivers from 570 on): read
/// NVML_FI_DEV_GET_GPU_RECOVERY_ACTION.
#define nvmlEventTypeGpuRecoveryAction 0x0000000000008000LL
#define nvmlEventTypeNone 0x0000000000000000LL

/// nvml.h's event, as nvmlEventSetWait_v2 fills it. eventData is the Xid for
/// nvmlEventTypeXidCriticalError (999 for an Xid the driver does not know), 0 otherwise.
/// gpuInstanceId and computeInstanceId name the MIG instance an Xid is attributed to, and are
/// 0xFFFFFFFF when it is attributed to none. The unversioned nvmlEventSetWait of older drivers
/// fills only the first three fields.
typedef struct nvmlEventData_st {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlEventData_t;

nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int* corrRows,
                                       unsigned int* uncRows, unsigned int* isPending,
                                       unsigned int* failureOccurred);
nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device,
                                                    nvmlEnableState_t* isPending);
nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t* mode);
nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set);
nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long* eventTypes);
nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes,
                                      nvmlEventSet_t set);
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data, unsigned int timeoutms);
nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t* data, unsigned int timeoutms);
nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set);

}  // extern "C"

static_assert(sizeof(nvmlEventData_t) == 32, "nvml.h's nvmlEventData_t is 32 bytes on LP64");
