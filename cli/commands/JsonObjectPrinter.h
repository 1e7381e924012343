// A JSON object printed member by member, for the commands whose JSON grows with the files they
// read (status, check): each member prints exactly as the whole document's compact dump would
// print it, so that the output is the same bytes without the document ever being whole in
// memory. nlohmann's ordered_json also copies its members (their nested values whole) each time
// an object's vector of members grows, which a document of 100,000 records pays many times over.
//
// A template over the JSON type, so that this header does not include nlohmann/json.hpp (only
// the commands that print JSON do).
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <string_view>

namespace flink::cli {

/// Prints `{"key":value,…}` to `out` as Json::dump(-1, ' ', true, replace) prints an object: no
/// blanks, ASCII only (JSON escapes C0 controls but not DEL or C1 ones, which a record may hold
/// and a terminal may read as an escape sequence), bytes that are not UTF-8 replaced.
template <typename Json>
class JsonObjectPrinter {
 public:
  explicit JsonObjectPrinter(std::ostream& out) : out_(out) { out_ << '{'; }
  JsonObjectPrinter(const JsonObjectPrinter&) = delete;
  JsonObjectPrinter& operator=(const JsonObjectPrinter&) = delete;

  /// A member of the value `value`.
  void member(std::string_view key, const Json& value) {
    name(key);
    print(value);
  }

  /// A member whose value is an array of `count` elements, element(i) each, made one at a time as
  /// it is printed.
  template <typename Element>
  void arrayMember(std::string_view key, std::size_t count, Element&& element) {
    name(key);
    out_ << '[';
    for (std::size_t i = 0; i < count; ++i) {
      if (i > 0) out_ << ',';
      print(element(i));
    }
    out_ << ']';
  }

  /// Closes the object and the line.
  void end() { out_ << "}\n"; }

 private:
  void name(std::string_view key) {
    if (!first_) out_ << ',';
    first_ = false;
    print(Json(std::string(key)));
    out_ << ':';
  }

  void print(const Json& value) {
    out_ << value.dump(-1, ' ', true, Json::error_handler_t::replace);
  }

  std::ostream& out_;
  bool first_ = true;
};

}  // namespace flink::cli
