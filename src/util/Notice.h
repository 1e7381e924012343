// What a run has to say besides its answer, as values: a note, a warning, a GPU left out, or a
// detail, each with its text. The enumerations, the masks, the health filter and the default
// discovery push Notices; the programs print Notice::line(); the in-process driver logs each by
// its kind. Nothing in a process reads a line it or its library wrote to learn what it was: the
// kind travels beside the text.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flink {

struct Notice {
  /// The prefixes line() writes: the one place they are spelled. A discovery script's reader (the
  /// driver's, which reads another program's stderr) reads them back by
  /// docs/discovery-script-protocol.md.
  static constexpr std::string_view kWarningPrefix = "warning: ";
  static constexpr std::string_view kNotePrefix = "note: ";

  enum class Kind {
    /// Said as it is, without a prefix: a detail of a cause ("GPU 1 is held by process 42"), or a
    /// line another program printed, quoted ("nvidia-smi: WARNING: infoROM is corrupted …").
    kDetail,
    /// "note: …": what was ignored or chosen, or what is normal on some hosts (a container given
    /// some of the GPUs).
    kNote,
    /// "warning: …": what an operator should hear of.
    kWarning,
    /// "warning: …" too: a GPU or MIG instance the host lists but that is left out (lost, denied,
    /// failing its queries): a fault of the host, which the driver logs as an error.
    kGpuLeftOut,
  };

  Kind kind = Kind::kDetail;
  /// The words, without the prefix line() adds.
  std::string text;

  static Notice detail(std::string text) { return {Kind::kDetail, std::move(text)}; }
  static Notice note(std::string text) { return {Kind::kNote, std::move(text)}; }
  static Notice warning(std::string text) { return {Kind::kWarning, std::move(text)}; }
  static Notice gpuLeftOut(std::string text) { return {Kind::kGpuLeftOut, std::move(text)}; }

  /// The line as the programs print it: "note: <text>", "warning: <text>" (a GPU left out too),
  /// or the text alone (a detail).
  std::string line() const;

  friend bool operator==(const Notice&, const Notice&) = default;
};

/// The line() of each of `notices`, in order.
std::vector<std::string> linesOf(const std::vector<Notice>& notices);

}  // namespace flink
