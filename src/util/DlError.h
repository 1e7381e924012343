// dlerror() read after a failed dlopen or dlsym, with glibc's per-thread record of the error
// released.
//
// glibc (2.34 on) keeps the error of a failed dlopen/dlsym in a record of the thread's own (a
// 24-byte struct dl_action_result, and the message). The first dlerror() returns the message
// and only marks the record delivered; the second frees it. Otherwise it stays until the
// thread's exit-time clean-up, which runs after the sanitizers have stopped scanning the thread:
// a detached thread (the driver's in-process discovery) still on its way out when the process
// ends then leaves the record to LeakSanitizer, a leak reported now and then.
#pragma once

#include <string>

namespace flink::dl {

/// The text of the dlopen or dlsym that just failed on this thread ("" when dlerror() has none),
/// its record released. Call it once after each failed call, before any other dl* call on the
/// thread. Thread-safe: the record is the calling thread's.
std::string takeError();

}  // namespace flink::dl
