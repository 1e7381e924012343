// What the binding's sources (src/host/nvml/*.cpp) share to call an NVML function they looked up
// with dlsym: the cast of its address to the type nvml.h declares, the conversion of its return
// code, and the result of a function the library lacks. Not for anything outside src/host/nvml/.
#pragma once

#include "host/nvml/Nvml.h"
#include "host/nvml/NvmlAbi.h"

namespace flink::nvml::call {

/// `address` (from dlsym) as the function pointer type `Function`, which must be the type nvml.h
/// declares (`decltype(&::nvmlDeviceGetUUID)`): POSIX guarantees that the conversion works.
template <typename Function>
Function as(void* address) {
  return reinterpret_cast<Function>(address);
}

/// nvml.h's return code as Return (the two are checked against each other in Nvml.cpp).
inline Return toReturn(nvmlReturn_t code) { return static_cast<Return>(static_cast<int>(code)); }

/// What a call to a function the library lacks gives, without calling anything (as go-nvml).
template <typename T>
Result<T> missing(const char* function) {
  return Result<T>{Return::kFunctionNotFound, T{}, function};
}

/// The GPU or compute instance id NVML gives where there is none (no MIG).
inline constexpr unsigned kNoInstance = 0xFFFFFFFFu;

}  // namespace flink::nvml::call
