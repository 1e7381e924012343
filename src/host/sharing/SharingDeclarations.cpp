// The declarations file's line format and its reading and writing (see SharingDeclarations.h).
#include "host/sharing/SharingDeclarations.h"

#include <algorithm>
#include <utility>

#include "host/enumeration/DeviceIdentifiers.h"
#include "host/enumeration/UnitIndex.h"
#include "host/store/RecordFile.h"

namespace flink::sharing {
namespace {

constexpr const char* kHeader =
    "# flink-gpu sharing declarations: GPUs shared among several workers (see flink-gpu's "
    "docs/sharing.md)";

/// What the file holds, in every message about it.
constexpr const char* kWhat = "sharing declarations";

/// `<coordination file>.sharing`.
constexpr std::string_view kSuffix = ".sharing";

constexpr std::string_view kKind = "shared";

std::optional<Declaration> parseLine(std::string_view line) {
  const std::vector<std::string_view> fields = store::splitFields(line);
  if (fields.front() != kKind) return std::nullopt;
  Declaration declaration;
  bool haveReplicas = false;
  bool haveSince = false;
  for (std::size_t i = 1; i < fields.size(); ++i) {
    const std::string_view field = fields[i];
    const std::optional<store::Field> parsed = store::parseField(field);
    if (!parsed) return std::nullopt;
    const std::string_view key = parsed->key;
    const std::string& value = parsed->value;
    if (key == "gpu") {
      // Each value as what it is, or the line is junk: none reaches a terminal, a GPU's name or
      // an environment variable unchecked (a percent-encoded escape sequence decodes to anything).
      if (!store::isRecordedGpu(value)) return std::nullopt;
      declaration.gpu = value;
    } else if (key == "uuid") {
      if (!store::isRecordedUuid(value)) return std::nullopt;
      declaration.uuid = value;
    } else if (key == "replicas") {
      const auto replicas = store::parseFieldNumber<unsigned>(value);
      if (!replicas || *replicas < kMinReplicas || *replicas > kMaxReplicas) return std::nullopt;
      declaration.replicas = *replicas;
      haveReplicas = true;
    } else if (key == "memory") {
      const auto memory = store::parseFieldNumber<std::uint64_t>(value);
      if (!memory || *memory == 0) return std::nullopt;
      declaration.memoryPerShareMiB = *memory;
    } else if (key == "mps") {
      if (!store::isRecordedPath(value)) return std::nullopt;
      declaration.mpsPipeDirectory = value;
    } else if (key == "since") {
      const auto since = store::parseFieldNumber<std::int64_t>(value);
      if (!since) return std::nullopt;
      declaration.since = *since;
      haveSince = true;
    } else if (key == "uid") {
      const auto uid = store::parseFieldNumber<uid_t>(value);
      if (!uid) return std::nullopt;
      declaration.uid = *uid;
    } else {
      declaration.extra.emplace_back(field);
    }
  }
  // A whole GPU only: sharing MIG instances is not ours to do.
  if (declaration.gpu.empty() || device::isMigUuid(declaration.gpu) || !haveReplicas ||
      !haveSince) {
    return std::nullopt;
  }
  return declaration;
}

DeclarationsFile fileOf(store::SiblingRecordsText read) {
  DeclarationsFile file;
  file.path = std::move(read.path);
  file.exists = read.exists;
  file.parsed = parseDeclarations(read.text);
  file.notes = std::move(read.notes);
  file.warnings = std::move(read.warnings);
  return file;
}

}  // namespace

store::RecordFile sharingFileOf(const std::filesystem::path& coordinationFile) {
  return store::RecordFile(coordinationFile, std::string(kSuffix), kWhat, "sharing declaration",
                           "`flink-gpu share` and `unshare` rewrite a GPU's lines; others are "
                           "for you to correct or remove");
}

std::filesystem::path sharingPathOf(const std::filesystem::path& coordinationFile) {
  return sharingFileOf(coordinationFile).path();
}

std::uint64_t memoryPerShare(std::uint64_t memoryTotalMiB, unsigned replicas) {
  return replicas == 0 ? 0 : memoryTotalMiB / replicas;
}

std::uint64_t sharesOfMemory(std::uint64_t memoryTotalMiB, std::uint64_t shareMiB) {
  return shareMiB == 0 ? 0 : memoryTotalMiB / shareMiB;
}

std::string formatDeclaration(const Declaration& declaration) {
  std::string line(kKind);
  store::appendField(line, "gpu", declaration.gpu);
  if (declaration.uuid) store::appendField(line, "uuid", *declaration.uuid);
  store::appendField(line, "replicas", std::to_string(declaration.replicas));
  if (declaration.memoryPerShareMiB) {
    store::appendField(line, "memory", std::to_string(*declaration.memoryPerShareMiB));
  }
  if (declaration.mpsPipeDirectory) {
    store::appendField(line, "mps", *declaration.mpsPipeDirectory);
  }
  store::appendField(line, "since", std::to_string(declaration.since));
  if (declaration.uid) store::appendField(line, "uid", std::to_string(*declaration.uid));
  for (const std::string& extra : declaration.extra) line += '\t' + extra;
  return line;
}

ParsedDeclarations parseDeclarations(std::string_view text) {
  auto parsed = store::parseSiblingRecords<Declaration>(text, parseLine);
  return ParsedDeclarations{std::move(parsed.records), std::move(parsed.junk)};
}

std::string formatDeclarations(const ParsedDeclarations& parsed) {
  return store::formatSiblingRecords(kHeader, parsed.declarations, parsed.junk, formatDeclaration);
}

bool names(const Declaration& declaration, std::string_view gpu,
           const std::optional<std::string>& uuid) {
  return discovery::namesUnit(declaration.gpu, declaration.uuid, gpu, uuid);
}

std::vector<const Declaration*> declarationsOf(const ParsedDeclarations& parsed,
                                               const discovery::UnitIndex& index) {
  std::vector<const Declaration*> of(index.size(), nullptr);
  // In the file's order: the last line that names a GPU applies.
  for (const Declaration& declaration : parsed.declarations) {
    for (const discovery::UnitRef ref : index.namedByRecord(declaration.gpu, declaration.uuid)) {
      if (!index[ref].isMigInstance()) of[ref] = &declaration;
    }
  }
  return of;
}

DeclarationsFile readDeclarations(const std::filesystem::path& coordinationFile) {
  return fileOf(sharingFileOf(coordinationFile).read());
}

DeclarationsFile updateDeclarations(const std::filesystem::path& coordinationFile,
                                    const std::function<void(std::vector<Declaration>&)>& change) {
  return fileOf(sharingFileOf(coordinationFile).update([&change](const std::string& text) {
    ParsedDeclarations parsed = parseDeclarations(text);
    change(parsed.declarations);
    return formatDeclarations(parsed);
  }));
}

std::vector<Declaration> declare(const std::filesystem::path& coordinationFile,
                                 const Declaration& declaration) {
  std::vector<Declaration> replaced;
  updateDeclarations(coordinationFile, [&](std::vector<Declaration>& declarations) {
    replaced.clear();
    std::erase_if(declarations, [&](const Declaration& old) {
      const bool same = names(old, declaration.gpu, declaration.uuid);
      if (same) replaced.push_back(old);
      return same;
    });
    declarations.push_back(declaration);
  });
  return replaced;
}

std::vector<Declaration> removeDeclarations(const std::filesystem::path& coordinationFile,
                                            const std::optional<std::string>& gpu,
                                            const std::optional<std::string>& uuid,
                                            std::vector<std::string>* warnings) {
  std::vector<Declaration> removed;
  DeclarationsFile file =
      updateDeclarations(coordinationFile, [&](std::vector<Declaration>& declarations) {
        removed.clear();
        std::erase_if(declarations, [&](const Declaration& old) {
          const bool match = !gpu || names(old, *gpu, uuid);
          if (match) removed.push_back(old);
          return match;
        });
      });
  if (warnings != nullptr) *warnings = std::move(file.warnings);
  return removed;
}

bool isStale(const Declaration& declaration, const discovery::UnitIndex& host,
             const discovery::HostCoverage& coverage) {
  return host.presence(declaration.gpu, declaration.uuid, coverage) ==
         discovery::Presence::kNotOnThisHost;
}

std::vector<Declaration> removeStaleDeclarations(const std::filesystem::path& coordinationFile,
                                                 const discovery::UnitIndex& host,
                                                 const discovery::HostCoverage& coverage,
                                                 std::vector<std::string>* warnings) {
  std::vector<Declaration> removed;
  if (!coverage.whole()) return removed;
  DeclarationsFile file =
      updateDeclarations(coordinationFile, [&](std::vector<Declaration>& declarations) {
        removed.clear();
        std::erase_if(declarations, [&](const Declaration& old) {
          const bool stale = isStale(old, host, coverage);
          if (stale) removed.push_back(old);
          return stale;
        });
      });
  if (warnings != nullptr) *warnings = std::move(file.warnings);
  return removed;
}

}  // namespace flink::sharing
