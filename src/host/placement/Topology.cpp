// The topology description: pair relations, their scores and names, CPU lists. See Topology.h.
#include "host/placement/Topology.h"

#include <algorithm>
#include <charconv>

#include "util/Strings.h"

namespace flink::placement {

std::string_view shortName(PcieLevel level) {
  switch (level) {
    case PcieLevel::kInternal:
    case PcieLevel::kSingleSwitch:
      return "PIX";
    case PcieLevel::kMultipleSwitches:
      return "PXB";
    case PcieLevel::kHostBridge:
      return "PHB";
    case PcieLevel::kNode:
      return "NODE";
    case PcieLevel::kSystem:
      return "SYS";
  }
  return "N/A";
}

std::string_view jsonName(PcieLevel level) {
  switch (level) {
    case PcieLevel::kInternal:
      return "internal";
    case PcieLevel::kSingleSwitch:
      return "single-switch";
    case PcieLevel::kMultipleSwitches:
      return "multiple-switches";
    case PcieLevel::kHostBridge:
      return "host-bridge";
    case PcieLevel::kNode:
      return "node";
    case PcieLevel::kSystem:
      return "system";
  }
  return "unknown";
}

Topology::Topology(std::vector<GpuTopology> gpus)
    : gpus_(std::move(gpus)), links_(gpus_.size() * gpus_.size()) {}

void Topology::setLink(std::size_t a, std::size_t b, const PairLink& link) {
  links_[a * gpus_.size() + b] = link;
  links_[b * gpus_.size() + a] = link;
}

std::optional<std::size_t> Topology::positionOf(std::string_view identifier) const {
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    if (gpus_[i].identifier == identifier) return i;
  }
  return std::nullopt;
}

bool Topology::anythingKnown() const noexcept {
  for (const GpuTopology& gpu : gpus_) {
    if (gpu.numaNode || gpu.degradedBandwidth) return true;
  }
  return std::any_of(links_.begin(), links_.end(), [](const PairLink& l) { return l.known(); });
}

int pairScore(const PairLink& link) noexcept {
  int score = link.nvlinkKnown ? 100 * static_cast<int>(link.nvlinks) : 0;
  if (link.pcie) {
    switch (*link.pcie) {
      case PcieLevel::kInternal:
        score += 60;
        break;
      case PcieLevel::kSingleSwitch:
        score += 50;
        break;
      case PcieLevel::kMultipleSwitches:
        score += 40;
        break;
      case PcieLevel::kHostBridge:
        score += 30;
        break;
      case PcieLevel::kNode:
        score += 20;
        break;
      case PcieLevel::kSystem:
        score += 10;
        break;
    }
  }
  return score;
}

std::string relationName(const PairLink& link) {
  if (link.nvlinkKnown && link.nvlinks > 0) return "NV" + std::to_string(link.nvlinks);
  if (link.pcie) return std::string(shortName(*link.pcie));
  return "N/A";
}

std::string formatCpuList(const std::vector<unsigned>& cpus) {
  std::string text;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t end = i;
    while (end + 1 < cpus.size() && cpus[end + 1] == cpus[end] + 1) ++end;
    if (!text.empty()) text += ',';
    text += std::to_string(cpus[i]);
    if (end > i) text += '-' + std::to_string(cpus[end]);
    i = end + 1;
  }
  return text;
}

std::optional<std::vector<unsigned>> parseCpuList(std::string_view text) {
  const auto number = [](std::string_view part) -> std::optional<unsigned> {
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
    if (part.empty() || ec != std::errc() || end != part.data() + part.size()) return std::nullopt;
    return value;
  };
  std::vector<unsigned> cpus;
  text = strings::trim(text);
  if (text.empty()) return cpus;
  for (std::string_view part : strings::split(text, ',')) {
    part = strings::trim(part);
    const std::size_t dash = part.find('-');
    const auto first = number(part.substr(0, dash));
    const auto last = dash == std::string_view::npos ? first : number(part.substr(dash + 1));
    // A range of more than 1 << 16 CPUs is no host's.
    if (!first || !last || *last < *first || *last - *first > (1u << 16)) return std::nullopt;
    for (unsigned cpu = *first; cpu <= *last; ++cpu) cpus.push_back(cpu);
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

}  // namespace flink::placement
