// Fuzzes the legacy flink-conf.yaml reader with arbitrary bytes. Besides "no crash, no sanitizer
// report", it checks the reader's promises on every input: it never throws; every key and value
// is non-empty, trimmed, one line and free of '#'; every warning names the file and a line that
// exists; and writing the result back as "key: value" lines (with or without CRLF, a byte order
// mark and comments) reads back the same configuration without warnings. Each value is also put
// through the list formats, which must read back what they wrote: the legacy ';' form, and the
// flow form "[a, b]" of a standard-YAML configuration, whose reading of the value as YAML first
// must throw nothing but the documented IllegalConfigurationException.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "flink/configuration/Configuration.h"
#include "flink/configuration/ConfigurationFileParsers.h"
#include "flink/util/Exceptions.h"

namespace {

constexpr const char* kFileName = "flink-conf.yaml";

void check(bool condition) {
  if (!condition) std::abort();
}

flink::Configuration parse(std::string_view text, std::vector<std::string>& warnings) {
  try {
    return flink::parseLegacyConfiguration(text, kFileName, warnings);
  } catch (...) {
    std::abort();  // documented to throw nothing
  }
}

bool trimmedOneLine(std::string_view text) {
  return !text.empty() && static_cast<unsigned char>(text.front()) > ' ' &&
         static_cast<unsigned char>(text.back()) > ' ' &&
         text.find_first_of("#\r\n") == std::string_view::npos;
}

std::size_t lineCount(std::string_view text) {
  std::size_t lines = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n' || (text[i] == '\r' && (i + 1 == text.size() || text[i + 1] != '\n'))) {
      ++lines;
    }
  }
  return lines + 1;
}

void checkWarning(const std::string& warning, std::size_t lines) {
  const std::string prefix = std::string(kFileName) + ":";
  check(warning.starts_with(prefix));
  std::size_t end = prefix.size();
  std::size_t line = 0;
  while (end < warning.size() && warning[end] >= '0' && warning[end] <= '9') {
    line = line * 10 + static_cast<std::size_t>(warning[end] - '0');
    ++end;
  }
  check(end > prefix.size() && line >= 1 && line <= lines);
  check(warning.compare(end, 2, ": ") == 0);
  check(warning.ends_with(", line skipped") || warning.ends_with("; the later value is used"));
}

bool validUtf8(const std::string& text) {
  for (std::size_t at = 0; at < text.size();) {
    const auto lead = static_cast<unsigned char>(text[at]);
    const std::size_t length = lead < 0x80             ? 1
                               : (lead & 0xE0) == 0xC0 ? 2
                               : (lead & 0xF0) == 0xE0 ? 3
                               : (lead & 0xF8) == 0xF0 ? 4
                                                       : 0;
    if (length == 0 || at + length > text.size()) return false;
    char32_t code = length == 1 ? lead : lead & (0x7F >> length);
    for (std::size_t i = 1; i < length; ++i) {
      const auto next = static_cast<unsigned char>(text[at + i]);
      if ((next & 0xC0) != 0x80) return false;
      code = (code << 6) | (next & 0x3F);
    }
    static constexpr char32_t kMinimum[] = {0, 0, 0x80, 0x800, 0x10000};
    if (code < kMinimum[length] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
      return false;
    }
    at += length;
  }
  return true;
}

void checkListRoundTrip(const std::string& value) {
  using List = std::vector<std::string>;
  List list;
  try {
    list = flink::detail::parseConfigValue<List>("k", value);
  } catch (const flink::IllegalConfigurationException&) {
    return;  // malformed quoting is a documented outcome
  }
  const std::string text = flink::detail::formatConfigValue(list);
  check(flink::detail::parseConfigValue<List>("k", text) == list);

  // YAML is Unicode: only lists of valid UTF-8 can be written in flow form and read back.
  if (std::all_of(list.begin(), list.end(), validUtf8)) {
    const std::string flow = flink::detail::formatStandardYamlList(list);
    check(flink::detail::parseStandardYamlList("k", flow) == list);
  }
  try {
    flink::detail::parseStandardYamlList("k", value);
  } catch (const flink::IllegalConfigurationException&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> warnings;
  const flink::Configuration configuration = parse(text, warnings);

  const std::size_t lines = lineCount(text);
  for (const std::string& warning : warnings) checkWarning(warning, lines);

  // Not at the very start: a key may begin with a second byte order mark, which must stay.
  std::string plain = "\n";
  std::string dressed = "\xEF\xBB\xBF# written back\r\n";
  for (const auto& [key, value] : configuration.toMap()) {
    check(trimmedOneLine(key) && trimmedOneLine(value));
    check(key.find(": ") == std::string::npos);  // the first ": " ends the key
    check(text.find(key) != std::string_view::npos && text.find(value) != std::string_view::npos);
    checkListRoundTrip(value);
    plain += key + ": " + value + "\n";
    dressed += "  " + key + ":  \t" + value + "  # comment\r\n\r\n";
  }

  for (const std::string& written : {plain, dressed}) {
    std::vector<std::string> rereadWarnings;
    check(parse(written, rereadWarnings) == configuration);
    check(rereadWarnings.empty());
  }
  return 0;
}
