// What build of flink-gpu this is: its version and the commit it was built from, for --version
// and the metrics' flink_gpu_build_info. BuildInfo.cpp is written at configure time
// (cli/BuildInfo.cpp.in), anew whenever the source tree's HEAD moves.
#pragma once

namespace flink::cli {

/// The project's version, e.g. "0.9.0".
const char* buildVersion();

/// The commit the build was made from (git rev-parse --short=12 HEAD), or "unknown" outside a git
/// checkout.
const char* buildCommit();

}  // namespace flink::cli
