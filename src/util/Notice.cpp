#include "util/Notice.h"

namespace flink {

std::string Notice::line() const {
  switch (kind) {
    case Kind::kDetail:
      return text;
    case Kind::kNote:
      return std::string(kNotePrefix) + text;
    case Kind::kWarning:
    case Kind::kGpuLeftOut:
      return std::string(kWarningPrefix) + text;
  }
  return text;
}

std::vector<std::string> linesOf(const std::vector<Notice>& notices) {
  std::vector<std::string> lines;
  lines.reserve(notices.size());
  for (const Notice& notice : notices) lines.push_back(notice.line());
  return lines;
}

}  // namespace flink
