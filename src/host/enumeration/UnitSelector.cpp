// Reading and applying `--select`. See UnitSelector.h for the keys and operators.
#include "host/enumeration/UnitSelector.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <map>
#include <utility>

#include "host/enumeration/UnitIndex.h"
#include "util/Strings.h"

namespace flink::discovery {
namespace {

constexpr std::string_view kOperatorCharacters = "=!~<>";

struct KeySpelling {
  std::string_view name;
  SelectorKey key;
};

/// In the order the documentation and the errors list them.
constexpr std::array<KeySpelling, 8> kKeys{{
    {"name", SelectorKey::kName},
    {"uuid", SelectorKey::kUuid},
    {"pci.bus_id", SelectorKey::kPciBusId},
    {"memory.total", SelectorKey::kMemoryTotal},
    {"compute_capability", SelectorKey::kComputeCapability},
    {"vendor", SelectorKey::kVendor},
    {"numa_node", SelectorKey::kNumaNode},
    {"mig", SelectorKey::kMig},
}};

struct OperatorSpelling {
  std::string_view text;
  SelectorOperator op;
};

constexpr std::array<OperatorSpelling, 7> kOperators{{
    {"=", SelectorOperator::kEqual},
    {"!=", SelectorOperator::kNotEqual},
    {"~", SelectorOperator::kContains},
    {">=", SelectorOperator::kGreaterOrEqual},
    {"<=", SelectorOperator::kLessOrEqual},
    {">", SelectorOperator::kGreater},
    {"<", SelectorOperator::kLess},
}};

constexpr std::string_view kOperatorsLine =
    "the operators are =, !=, ~ (contains, ignoring case), >=, <=, >, <";

[[noreturn]] void fail(const std::string& message) { throw SelectorError("--select: " + message); }

enum class KeyKind { kText, kNumber, kVersion, kYesNo, kVendor };

KeyKind kindOf(SelectorKey key) noexcept {
  switch (key) {
    case SelectorKey::kName:
    case SelectorKey::kUuid:
    case SelectorKey::kPciBusId:
      return KeyKind::kText;
    case SelectorKey::kMemoryTotal:
    case SelectorKey::kNumaNode:
      return KeyKind::kNumber;
    case SelectorKey::kComputeCapability:
      return KeyKind::kVersion;
    case SelectorKey::kMig:
      return KeyKind::kYesNo;
    case SelectorKey::kVendor:
      return KeyKind::kVendor;
  }
  return KeyKind::kText;
}

bool isOrder(SelectorOperator op) noexcept {
  return op == SelectorOperator::kGreaterOrEqual || op == SelectorOperator::kLessOrEqual ||
         op == SelectorOperator::kGreater || op == SelectorOperator::kLess;
}

/// Whether every operator that `kind` takes includes `op`; the message naming those it takes
/// otherwise.
std::optional<std::string> refusedOperator(KeyKind kind, SelectorOperator op) {
  switch (kind) {
    case KeyKind::kText:
    case KeyKind::kVendor:
      if (isOrder(op)) return "a text: use =, != or ~";
      return std::nullopt;
    case KeyKind::kNumber:
    case KeyKind::kVersion:
      if (op == SelectorOperator::kContains) return "a number: use =, !=, >=, <=, > or <";
      return std::nullopt;
    case KeyKind::kYesNo:
      if (op != SelectorOperator::kEqual && op != SelectorOperator::kNotEqual) {
        return "yes or no: use = or !=";
      }
      return std::nullopt;
  }
  return std::nullopt;
}

std::optional<std::uint64_t> parseNumber(std::string_view text) {
  if (!strings::isDigits(text)) {
    return std::nullopt;
  }
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

/// "9.0", "10.0", "8.9": MAJOR.MINOR, each a decimal of up to 4 digits.
std::optional<ComputeCapability> parseCapability(std::string_view text) {
  const std::size_t dot = text.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot > 4 || text.size() - dot - 1 == 0 ||
      text.size() - dot - 1 > 4) {
    return std::nullopt;
  }
  const std::optional<std::uint64_t> major = parseNumber(text.substr(0, dot));
  const std::optional<std::uint64_t> minor = parseNumber(text.substr(dot + 1));
  if (!major || !minor) return std::nullopt;
  return ComputeCapability{static_cast<unsigned>(*major), static_cast<unsigned>(*minor)};
}

/// `written`: one term as it stands between commas; spaces around it, its key and its value are
/// dropped (`exec --select 'name~L4, mig=no'`), those within a value kept (`name=NVIDIA L4`).
SelectorTerm parseTerm(std::string_view written, std::string_view whole) {
  const std::string_view term = strings::trim(written);
  if (term.empty()) {
    fail("an empty term in " + strings::inQuotes(whole) +
         ": write terms KEY OP VALUE separated by single commas, e.g. name~H100,mig=no");
  }
  const std::size_t at = term.find_first_of(kOperatorCharacters);
  if (at == std::string_view::npos) {
    fail(strings::inQuotes(term) + " has no operator: write KEY OP VALUE, e.g. name~H100; " +
         std::string(kOperatorsLine));
  }
  const std::string_view keyText = strings::trim(term.substr(0, at));
  const std::string key = strings::toLower(keyText);
  if (key.empty()) {
    fail(strings::inQuotes(term) + " has no key: write KEY OP VALUE, e.g. name~H100; " +
         selectorKeysLine());
  }
  const auto spelling = std::find_if(kKeys.begin(), kKeys.end(),
                                     [&](const KeySpelling& known) { return known.name == key; });
  if (spelling == kKeys.end()) {
    fail("unknown key " + strings::inQuotes(keyText) + " in " + strings::inQuotes(term) + "; " +
         selectorKeysLine());
  }
  std::size_t valueAt = term.find_first_not_of(kOperatorCharacters, at);
  if (valueAt == std::string_view::npos) valueAt = term.size();
  const std::string_view opText = term.substr(at, valueAt - at);
  const auto op = std::find_if(kOperators.begin(), kOperators.end(),
                               [&](const OperatorSpelling& known) { return known.text == opText; });
  if (op == kOperators.end()) {
    fail(strings::inQuotes(opText) + " in " + strings::inQuotes(term) + " is not an operator; " +
         std::string(kOperatorsLine));
  }
  SelectorTerm parsed;
  parsed.text = std::string(term);
  parsed.key = spelling->key;
  parsed.op = op->op;
  parsed.value = std::string(strings::trim(term.substr(valueAt)));
  if (parsed.value.empty()) {
    fail(strings::inQuotes(term) + " has no value: write KEY OP VALUE, e.g. name~H100");
  }
  const KeyKind kind = kindOf(parsed.key);
  if (const std::optional<std::string> refused = refusedOperator(kind, parsed.op)) {
    fail(strings::inQuotes(opText) + " in " + strings::inQuotes(term) + " does not apply to " +
         std::string(key) + ", " + *refused);
  }
  switch (kind) {
    case KeyKind::kText:
      if (parsed.key == SelectorKey::kPciBusId && parsed.op != SelectorOperator::kContains) {
        // One GPU, several spellings (lspci's 0000:3b:00.0, NVML's 00000000:3B:00.0).
        const std::optional<std::string> busId = canonicalPciBusId(parsed.value);
        if (!busId) {
          fail(strings::inQuotes(parsed.value) + " in " + strings::inQuotes(term) +
               " is not a PCI bus id: write domain:bus:device.function, e.g. 0000:3b:00.0 (or "
               "use ~ for a part of one)");
        }
        parsed.value = *busId;
      }
      break;
    case KeyKind::kNumber: {
      const std::optional<std::uint64_t> number = parseNumber(parsed.value);
      if (!number) {
        fail(strings::inQuotes(parsed.value) + " in " + strings::inQuotes(term) +
             " is not a number: " + key +
             (parsed.key == SelectorKey::kMemoryTotal
                  ? std::string(" is in MiB, a whole number, e.g. memory.total>=40000")
                  : std::string(" is a whole number, e.g. numa_node=0")));
      }
      parsed.number = *number;
      break;
    }
    case KeyKind::kVersion: {
      const std::optional<ComputeCapability> capability = parseCapability(parsed.value);
      if (!capability) {
        fail(strings::inQuotes(parsed.value) + " in " + strings::inQuotes(term) +
             " is not a compute capability: write MAJOR.MINOR, e.g. compute_capability>=8.9");
      }
      parsed.capability = *capability;
      break;
    }
    case KeyKind::kYesNo: {
      const std::string value = strings::toLower(parsed.value);
      if (value != "yes" && value != "no") {
        fail(strings::inQuotes(parsed.value) + " in " + strings::inQuotes(term) +
             " is not yes or no: mig=yes keeps the MIG instances, mig=no the whole GPUs");
      }
      parsed.yes = value == "yes";
      break;
    }
    case KeyKind::kVendor:
      if (parsed.op != SelectorOperator::kContains) {
        const std::optional<Vendor> vendor = parseVendor(strings::toLower(parsed.value));
        if (!vendor) {
          fail(strings::inQuotes(parsed.value) + " in " + strings::inQuotes(term) +
               " is no vendor: write nvidia, amd or intel");
        }
        parsed.vendor = *vendor;
      }
      break;
  }
  return parsed;
}

bool containsIgnoringCase(std::string_view text, std::string_view part) {
  return strings::toLower(text).find(strings::toLower(part)) != std::string::npos;
}

template <typename T>
bool compare(const T& actual, SelectorOperator op, const T& wanted) {
  switch (op) {
    case SelectorOperator::kEqual:
      return actual == wanted;
    case SelectorOperator::kNotEqual:
      return actual != wanted;
    case SelectorOperator::kGreaterOrEqual:
      return actual >= wanted;
    case SelectorOperator::kLessOrEqual:
      return actual <= wanted;
    case SelectorOperator::kGreater:
      return actual > wanted;
    case SelectorOperator::kLess:
      return actual < wanted;
    case SelectorOperator::kContains:
      return false;  // refused when parsed for every key compared here
  }
  return false;
}

TermMatch toMatch(bool holds) { return holds ? TermMatch::kMatch : TermMatch::kNoMatch; }

/// = != ~ of a text value; `ignoreCase` for = and != of UUIDs and bus ids.
TermMatch compareText(const std::optional<std::string>& actual, const SelectorTerm& term,
                      bool ignoreCase) {
  if (!actual) return TermMatch::kUnknown;
  if (term.op == SelectorOperator::kContains) {
    return toMatch(containsIgnoringCase(*actual, term.value));
  }
  bool equal = *actual == term.value;
  if (term.key == SelectorKey::kPciBusId) {
    const std::optional<std::string> busId = canonicalPciBusId(*actual);
    equal = busId && *busId == term.value;
  } else if (ignoreCase) {
    equal = strings::toLower(*actual) == strings::toLower(term.value);
  }
  return toMatch(term.op == SelectorOperator::kEqual ? equal : !equal);
}

}  // namespace

std::string_view selectorKeyName(SelectorKey key) noexcept {
  for (const KeySpelling& spelling : kKeys) {
    if (spelling.key == key) return spelling.name;
  }
  return "?";
}

std::string selectorKeysLine() {
  std::string line = "the keys are ";
  for (std::size_t i = 0; i < kKeys.size(); ++i) {
    if (i > 0) line += ", ";
    line += kKeys[i].name;
  }
  return line;
}

UnitSelector UnitSelector::parse(std::string_view text) {
  if (strings::trim(text).empty()) {
    fail("no term given: write KEY OP VALUE terms separated by commas, e.g. name~H100; " +
         selectorKeysLine());
  }
  UnitSelector selector;
  std::vector<std::string> written;
  for (const std::string_view term : strings::split(text, ',')) {
    selector.terms_.push_back(parseTerm(term, text));
    written.push_back(selector.terms_.back().text);
  }
  // As messages show it: without the spaces around its terms.
  selector.text_ = strings::join(written, ",");
  return selector;
}

TermMatch UnitSelector::evaluate(const SelectorTerm& term, const GpuDevice& unit, Vendor vendor) {
  switch (term.key) {
    case SelectorKey::kName:
      return compareText(unit.name, term, /*ignoreCase=*/false);
    case SelectorKey::kUuid:
      return compareText(unit.uuid, term, /*ignoreCase=*/true);
    case SelectorKey::kPciBusId:
      return compareText(unit.pciBusId, term, /*ignoreCase=*/true);
    case SelectorKey::kMemoryTotal:
      if (!unit.memoryTotalMiB) return TermMatch::kUnknown;
      return toMatch(compare<std::uint64_t>(*unit.memoryTotalMiB, term.op, term.number));
    case SelectorKey::kNumaNode:
      if (!unit.numaNode) return TermMatch::kUnknown;
      return toMatch(compare<std::uint64_t>(*unit.numaNode, term.op, term.number));
    case SelectorKey::kComputeCapability:
      if (!unit.computeCapability) return TermMatch::kUnknown;
      return toMatch(compare(*unit.computeCapability, term.op, term.capability));
    case SelectorKey::kMig:
      return toMatch((unit.isMigInstance() == term.yes) == (term.op == SelectorOperator::kEqual));
    case SelectorKey::kVendor:
      if (term.op == SelectorOperator::kContains) {
        return toMatch(containsIgnoringCase(vendorName(vendor), term.value));
      }
      return toMatch((vendor == term.vendor) == (term.op == SelectorOperator::kEqual));
  }
  return TermMatch::kNoMatch;
}

bool UnitSelector::matches(const GpuDevice& unit, Vendor vendor) const {
  return std::all_of(terms_.begin(), terms_.end(), [&](const SelectorTerm& term) {
    return evaluate(term, unit, vendor) == TermMatch::kMatch;
  });
}

bool UnitSelector::onlyMigInstances() const noexcept {
  return std::any_of(terms_.begin(), terms_.end(), [](const SelectorTerm& term) {
    return term.key == SelectorKey::kMig && term.yes == (term.op == SelectorOperator::kEqual);
  });
}

SelectedUnits selectUnits(const UnitSelector& selector, std::vector<GpuDevice> units,
                          Vendor vendor) {
  SelectedUnits selected;
  // Per key a unit did not know, where nothing else ruled it out: the units, and the terms.
  std::map<SelectorKey, std::pair<std::vector<std::string>, std::vector<std::string>>> unknown;
  for (GpuDevice& unit : units) {
    bool ruledOut = false;
    std::vector<const SelectorTerm*> unknownTerms;
    for (const SelectorTerm& term : selector.terms()) {
      const TermMatch match = UnitSelector::evaluate(term, unit, vendor);
      if (match == TermMatch::kNoMatch) ruledOut = true;
      if (match == TermMatch::kUnknown) unknownTerms.push_back(&term);
    }
    if (!ruledOut && unknownTerms.empty()) {
      selected.units.push_back(std::move(unit));
      continue;
    }
    if (ruledOut) continue;
    for (const SelectorTerm* term : unknownTerms) {
      auto& [gpus, terms] = unknown[term->key];
      gpus.push_back("GPU " + unit.identifier);
      if (std::find(terms.begin(), terms.end(), term->text) == terms.end()) {
        terms.push_back(term->text);
      }
    }
  }
  for (const auto& [key, what] : unknown) {
    const auto& [gpus, terms] = what;
    const bool one = gpus.size() == 1;
    selected.notes.push_back(
        Notice::note("--select: " + strings::join(gpus, ", ") + (one ? " does" : " do") +
                     " not tell " + std::string(selectorKeyName(key)) + ", so " +
                     strings::quoteForMessage(strings::join(terms, ", ")) + " never matches " +
                     (one ? "it" : "them") +
                     (key == SelectorKey::kComputeCapability
                          ? " (NVML tells it; nvidia-smi and a --gpus list without NVML do not)"
                          : "")));
  }
  return selected;
}

}  // namespace flink::discovery
