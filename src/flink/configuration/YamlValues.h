// Configuration values as Flink's standard-YAML mode gives them to drivers, as text: SnakeYAML's
// YAML 1.1 resolution of plain scalars, then ConfigurationUtils.convertToString (a non-string
// value is written back with YamlParserUtils.toYAMLString, in flow style), and
// ConfigurationUtils.convertToList, which reads a list option given as text as YAML first.
//
// Not part of the public API. The YAML library stays out of this header: Configuration.cpp
// includes it.
#pragma once

#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace flink::yamlvalues {

/// The most digits (underscores aside) of one plain integer in base 2, 8, 16 or 60 that is
/// written back in decimal, and of all those of one reading (a configuration, a list read from
/// text) together; integers of at most kFreeConvertedDigits digits do not count. Converting is
/// quadratic in an integer's length: 20,000 hexadecimal digits take about 10 ms, and the 16 MiB a
/// configuration may hold, in values of that length, took 40 s. Flink takes any length; nothing a
/// driver reads needs such numbers.
inline constexpr std::size_t kMaxConvertedDigits = 20'000;
inline constexpr std::size_t kMaxConvertedDigitsInAll = 100'000;
inline constexpr std::size_t kFreeConvertedDigits = 16;

/// A plain integer in base 2, 8, 16 or 60 past those limits; what() says which, and how to keep
/// it as text (quotes).
class IntegerTooLong : public std::length_error {
 public:
  using std::length_error::length_error;
};

/// The most one reading of YAML expands to, an alias in full each time it is used: the map
/// entries and list elements it visits (for a list read from text, every node) and the bytes of
/// its keys and values. config.yaml's reader and a list read from text alike; Flink's YAML
/// reader refuses more than 50 aliases of collections.
inline constexpr std::size_t kMaxExpandedNodes = 200'000;
inline constexpr std::size_t kMaxExpandedBytes = 16 << 20;

/// A list read from text past those limits; what() says which.
class ListTooLarge : public std::length_error {
 public:
  using std::length_error::length_error;
};

/// The digits one reading has converted so far, against kMaxConvertedDigitsInAll.
class ConversionBudget {
 public:
  /// Counts an integer of `digits` digits in `base` ("hexadecimal"); throws IntegerTooLong when
  /// it is longer than kMaxConvertedDigits or brings the reading past kMaxConvertedDigitsInAll.
  void charge(std::size_t digits, const char* base);

 private:
  std::size_t spent_ = 0;
};

/// The text Flink's standard-YAML reading makes of a plain (unquoted, untagged) scalar, or
/// nullopt for a null (`~`, `null`, `Null`, `NULL`, empty). SnakeYAML resolves it as YAML 1.1
/// does, and convertToString writes a non-string back:
/// - booleans: `true`/`True`/`TRUE`/`yes`/`Yes`/`YES`/`on`/`On`/`ON` → "true", the `false`,
///   `no` and `off` forms → "false";
/// - integers in decimal: `0x10` → "16", `010` → "8", `0b11` → "3", `1_000` → "1000",
///   `+5` → "5", `1:30` (base 60) → "90"; a decimal one of any size, one in another base within
///   `budget` (shared by the values of one reading);
/// - floats as Java's Double.toString: `1.50` → "1.5", `1e3` → "1000.0", `1.0e-5` → "1.0E-5",
///   `.inf` → ".inf", `-.inf` → "-.inf", `.nan` → ".NaN";
/// - timestamps in UTC, as SnakeYAML writes a Date: `2001-12-14` → "2001-12-14T00:00:00Z",
///   `2001-12-14 21:59:43.10 -5` → "2001-12-15T02:59:43.100Z";
/// - anything else (a string) as written.
/// @throws IntegerTooLong for an integer in base 2, 8, 16 or 60 past the budget's limits.
std::optional<std::string> plainScalarText(std::string_view text, ConversionBudget& budget);

/// The plain scalars of one reading (a configuration, a list read from text), each resolved once
/// by its position in the text however many aliases use it: resolving a long integer is not
/// linear in its length, and an alias's uses then cost the length of its text, not of its source.
/// The long integers of the reading share one ConversionBudget.
class PlainScalars {
 public:
  struct Resolved {
    /// As plainScalarText gives it: nullopt for a null.
    std::optional<std::string> text;
    /// Whether YAML reads it as a string (resolvesToNonString's negation).
    bool isString = true;
  };
  /// The scalar `text` at offset `position` of the text (negative: none known; resolved, not
  /// kept). The reference stays valid until the next call for a scalar without a position.
  /// @throws IntegerTooLong as plainScalarText does.
  const Resolved& resolve(int position, std::string_view text);

 private:
  ConversionBudget integers_;
  std::unordered_map<int, Resolved> byPosition_;
  Resolved unplaced_;
};

/// Whether YAML 1.1 reads the plain scalar `text` as something other than a string (a null, a
/// boolean, an integer, a float, a timestamp, the merge key `<<`).
bool resolvesToNonString(std::string_view text);

/// A string as SnakeYAML writes it inside a flow collection: plain when YAML reads it back as
/// that same string, else in single quotes (a ' doubled), else (control characters, line breaks,
/// invalid UTF-8) in double quotes with escapes. `*` → "'*'", `123` → "'123'", `true` →
/// "'true'", `a b` → "a b", "" → "''".
std::string flowString(std::string_view value);

/// One element of a flow sequence: its text, and whether it is a string (then quoted as
/// flowString does) or already the text of a number, boolean, timestamp or collection.
struct FlowElement {
  std::string text;
  bool isString = true;
};

/// "[a, b]": the elements in flow style, as toYAMLString writes a list.
std::string flowSequence(const std::vector<FlowElement>& elements);

/// flowSequence of strings: how a list option is written as text in standard-YAML mode.
std::string flowSequenceOfStrings(const std::vector<std::string>& elements);

/// How many YAML documents `text` holds, counting at most two; with two, `secondLine` gets the
/// line (from 1) of the second one's first node. yaml-cpp 0.7's LoadAll loops forever on a ','
/// after the first document's root ("[a], b", ","); counted this way, that is a second
/// document, and YAML::Load then reads the first alone. Throws YAML::Exception for a syntax
/// error in the first two documents.
int countDocuments(const std::string& text, int& secondLine);

/// Flink's convertToList in standard-YAML mode for a list option given as text: the text read as
/// one YAML document; when that is a sequence, each element's text (a quoted scalar as written,
/// a plain one as plainScalarText gives it, a nested collection in flow style). nullopt when the
/// text is not a YAML sequence, is not valid YAML, or holds a null element: the caller then
/// splits it on ';' as the legacy format says, as Flink falls back. Throws only IntegerTooLong
/// (its integers share one ConversionBudget; an alias's once), ListTooLarge (past kMaxExpandedNodes
/// nodes or kMaxExpandedBytes of text, aliases expanded), and std::bad_alloc.
std::optional<std::vector<std::string>> readYamlList(const std::string& text);

}  // namespace flink::yamlvalues
