// Reads what a discovery script printed on stdout: the protocol's only parser.
//
// Two forms are read:
// - Flink's (the line form): the first line holds comma-separated GPU identifiers; parts are
//   trimmed and blank parts dropped; further lines are ignored.
// - Spark's resource discovery form (the JSON form), so that a discovery script written for Spark
//   (`spark.executor.resource.gpu.discoveryScript`) works unchanged: the whole of stdout is one
//   JSON object, which may span lines, e.g. `{"name": "gpu", "addresses": ["0", "1"]}`, as
//   Spark's ResourceInformation prints it. It is chosen when stdout, after a UTF-8 byte order
//   mark and leading whitespace, starts with `{` (no line of the line form can: `{` is no
//   device identifier).
// Unlike Flink, which takes any text as an index, every identifier must be a device identifier
// that CUDA_VISIBLE_DEVICES accepts (host/enumeration/DeviceIdentifiers.h), so that "No devices
// were found" or a warning never turns into GPUs.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flink::externalresource::gpu {

struct ScriptOutput {
  /// Unique identifiers, in the order printed. Decimal indices are in canonical form ("007" → "7").
  std::vector<std::string> identifiers;
  /// Identifiers printed more than once, once each, in order of their second appearance.
  std::vector<std::string> duplicates;
  /// Non-blank lines after the first, which the line form ignores (always 0 for the JSON form).
  std::size_t ignoredLines = 0;
  /// The JSON form's "name" (Spark's resource name, "gpu" for GPUs), when it has one; nullopt
  /// for the line form. Not checked here: a caller may warn when it is not "gpu".
  std::optional<std::string> resourceName;
};

/// Parses a script's stdout, in either form. Empty or blank output gives no identifiers.
///
/// The JSON form: "addresses" is required and must be an array of strings (Spark's addresses are
/// strings: `["0"]`, not `[0]`); each is trimmed and must be a device identifier, and is then
/// read as a part of the line form is (canonical indices, duplicates reported once). An empty
/// array means no GPUs. "name" may be left out, but when present must be a string. Other members
/// are ignored. Nothing but whitespace may follow the object.
///
/// @throws FlinkException when a part is not a device identifier, or the JSON form is not valid
///         JSON or breaks the rules above. The message reads on from "<script> printed ": the
///         line form's quotes the first line and the part; the JSON form's says it is Spark's
///         JSON form and quotes nlohmann-json's reason (with the byte position) or the member
///         at fault.
ScriptOutput parseScriptOutput(std::string_view stdoutText);

}  // namespace flink::externalresource::gpu
