// Choosing units by what they are: `--select name~H100,memory.total>=40000`, a list of terms that
// must all hold, each KEY OP VALUE. Pure: it reads a GpuDevice and nothing else. The default
// discovery keeps the units a selector matches as its candidates (defaultdiscovery::
// HostUnitsOptions::select); what does not match is simply no candidate.
//
// Keys and what they compare (docs/default-discovery.md#choosing-gpus-by-what-they-are):
//
//   name, uuid, pci.bus_id   text: = and != exact (uuid and pci.bus_id ignoring case, a bus id in
//                            any of its spellings), ~ contains, ignoring case
//   vendor                   text, one of nvidia, amd, intel: =, != (ignoring case), ~
//   memory.total, numa_node  numbers (MiB; a NUMA node): = != >= <= > <
//   compute_capability       MAJOR.MINOR, compared as versions (10.0 > 9.0 > 8.9): = != >= <= > <
//   mig                      yes or no, whether the unit is a MIG instance: = and !=
//
// A key a unit does not know (a GPU nvidia-smi listed has no compute capability, one from --gpus
// has no name) never matches, whatever the operator: `!=` does not match an unknown value either.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "host/enumeration/GpuEnumerator.h"
#include "host/enumeration/Vendor.h"
#include "util/Notice.h"

namespace flink::discovery {

/// A selector's text cannot be read. what() quotes the term at fault, says what is wrong and how
/// to write it ("--select: unknown key 'nme' in 'nme~H100'; the keys are name, uuid, …").
class SelectorError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

enum class SelectorKey {
  kName,
  kUuid,
  kPciBusId,
  kMemoryTotal,
  kComputeCapability,
  kVendor,
  kNumaNode,
  kMig,
};

/// "name", "pci.bus_id", …: the key as a selector writes it.
std::string_view selectorKeyName(SelectorKey key) noexcept;

enum class SelectorOperator {
  kEqual,           ///< =
  kNotEqual,        ///< !=
  kContains,        ///< ~, ignoring case
  kGreaterOrEqual,  ///< >=
  kLessOrEqual,     ///< <=
  kGreater,         ///< >
  kLess,            ///< <
};

/// One term, read: its key, its operator, and its value in the form its key compares.
struct SelectorTerm {
  /// The term as written ("name~H100"), without the spaces around it, for messages.
  std::string text;
  SelectorKey key = SelectorKey::kName;
  SelectorOperator op = SelectorOperator::kEqual;
  /// The value as written, without the spaces around it; for pci.bus_id with = or != its canonical
  /// form (canonicalPciBusId).
  std::string value;
  /// memory.total, numa_node.
  std::uint64_t number = 0;
  /// compute_capability.
  ComputeCapability capability;
  /// mig: yes.
  bool yes = false;
  /// vendor.
  Vendor vendor = Vendor::kNvidia;
};

/// What one term says of one unit.
enum class TermMatch {
  kMatch,
  kNoMatch,
  kUnknown,  ///< the unit does not know the term's key: never a match
};

/// A parsed `--select`: every term must hold.
class UnitSelector {
 public:
  /// Reads `text`: terms separated by commas, each KEY OP VALUE with OP one of = != ~ >= <= > <.
  /// Spaces around a term, its key and its value are dropped (Flink splits discovery-script.args
  /// on spaces, but exec and the in-process driver pass a selector whole); a space within a value
  /// is kept.
  /// @throws SelectorError for an empty selector or term, a term without an operator, an unknown
  ///         key (the message lists the keys), an operator that is none (`==`, `=>`) or that
  ///         does not apply to the key (an order of text, ~ of a number), and a value of the
  ///         wrong kind (not a number, not yes/no, not MAJOR.MINOR, no vendor, no PCI bus id).
  static UnitSelector parse(std::string_view text);

  /// The selector as given ("name~H100,mig=no"), without the spaces around its terms, for
  /// messages.
  const std::string& text() const noexcept { return text_; }
  const std::vector<SelectorTerm>& terms() const noexcept { return terms_; }

  /// What `term` says of `unit`, made by `vendor`.
  static TermMatch evaluate(const SelectorTerm& term, const GpuDevice& unit, Vendor vendor);

  /// Whether every term holds for `unit` (made by `vendor`); a key the unit does not know makes
  /// it no match.
  bool matches(const GpuDevice& unit, Vendor vendor = Vendor::kNvidia) const;

  /// Whether some term matches MIG instances alone (mig=yes, mig!=no): without --mig, which
  /// makes them units, nothing matches it.
  bool onlyMigInstances() const noexcept;

 private:
  std::string text_;
  std::vector<SelectorTerm> terms_;
};

/// The units a selector keeps, and what to say of the others.
struct SelectedUnits {
  std::vector<GpuDevice> units;
  /// One note per key that some unit did not know where every other term held ("note: --select:
  /// GPU 2, GPU 3 do not tell compute_capability, so compute_capability>=9.0 never matches them
  /// (NVML tells it; nvidia-smi and a --gpus list without NVML do not)"). The discovery program
  /// prints them as notes, flink-gpu exec as warnings.
  std::vector<Notice> notes;
};

/// The units of `units` that `selector` matches, in their order.
SelectedUnits selectUnits(const UnitSelector& selector, std::vector<GpuDevice> units,
                          Vendor vendor = Vendor::kNvidia);

/// The sentence that starts each error: the keys, in the order the documentation lists them.
std::string selectorKeysLine();

}  // namespace flink::discovery
