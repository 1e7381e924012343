// GlobalConfiguration: finding the configuration folder, reading config.yaml and the legacy
// flink-conf.yaml, `-D` overrides, and the list options that config.yaml lists turn into.
#include "flink/configuration/GlobalConfiguration.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "TestSupport.h"
#include "flink/configuration/ConfigOptions.h"
#include "flink/configuration/ConfigurationFileParsers.h"
#include "flink/configuration/YamlValues.h"

namespace flink {
namespace {

namespace fs = std::filesystem;
using testing::ScopedEnvironment;
using testing::TempDir;
using Strings = std::vector<std::string>;

Configuration yaml(const std::string& text) {
  return parseStandardYamlConfiguration(text, "config.yaml");
}

Configuration legacy(const std::string& text, Strings& warnings) {
  return parseLegacyConfiguration(text, "flink-conf.yaml", warnings);
}

Configuration entries(std::initializer_list<std::pair<const char*, const char*>> pairs) {
  Configuration configuration;
  for (const auto& [key, value] : pairs) configuration.setString(key, value);
  return configuration;
}

/// The message of the IllegalConfigurationException that `parse` throws (fails the test if it
/// throws nothing).
template <typename Parse>
std::string errorOf(Parse parse) {
  try {
    parse();
  } catch (const IllegalConfigurationException& e) {
    return e.what();
  }
  ADD_FAILURE() << "no IllegalConfigurationException";
  return {};
}

std::string yamlError(const std::string& text) {
  return errorOf([&] { yaml(text); });
}

/// The message of the IllegalConfigurationException that reading the list option
/// external-resources, given as `text` in a standard-YAML configuration, throws.
std::string listError(const std::string& text);

void write(const fs::path& path, const std::string& text) {
  testing::writeScript(path, text, fs::perms::owner_read | fs::perms::owner_write);
}

const auto kResources = ConfigOptions::key("external-resources").stringType().asList();

std::string listError(const std::string& text) {
  Configuration config;
  config.setStandardYaml(true);
  config.setString("external-resources", text);
  return errorOf([&] { config.get(kResources.noDefaultValue()); });
}

// --- config.yaml -----------------------------------------------------------

TEST(StandardYamlTest, NestedMapsFlattenWithDots) {
  EXPECT_EQ(
      yaml("external-resource:\n"
           "  gpu:\n"
           "    amount: 2\n"
           "    param:\n"
           "      discovery-script.path: /opt/flink/discover.sh\n"),
      entries({{"external-resource.gpu.amount", "2"},
               {"external-resource.gpu.param.discovery-script.path", "/opt/flink/discover.sh"}}));
  EXPECT_EQ(yaml("external-resource: {gpu: {amount: 2}}"),
            entries({{"external-resource.gpu.amount", "2"}}));
}

TEST(StandardYamlTest, FlatDottedKeysWorkAndMixWithNestedOnes) {
  EXPECT_EQ(yaml("taskmanager.numberOfTaskSlots: 4\n"
                 "external-resource.gpu.amount: 1\n"
                 "external-resource:\n"
                 "  gpu.param.discovery-script.args: --x\n"
                 "  fpga:\n"
                 "    amount: 3\n"),
            entries({{"taskmanager.numberOfTaskSlots", "4"},
                     {"external-resource.gpu.amount", "1"},
                     {"external-resource.gpu.param.discovery-script.args", "--x"},
                     {"external-resource.fpga.amount", "3"}}));
}

TEST(StandardYamlTest, ScalarsAreTheTextFlinkMakesOfThem) {
  // SnakeYAML's YAML 1.1 resolution, then ConfigurationUtils.convertToString: a plain number or
  // boolean is written back as Java writes it; quoted scalars and strings stay as written.
  const Configuration config = yaml(
      "flag: True\n"
      "count: 2\n"
      "timeout: 10 s\n"
      "hex: 0x10\n"
      "quoted-hex: '0x10'\n"
      "ratio: 1.50\n"
      "quoted: 'a # not a comment'\n"
      "double-quoted: \"tab\\there\"\n"
      "path: /opt/flink # a comment\n"
      "block: |\n"
      "  line one\n"
      "  line two\n");
  EXPECT_EQ(config, entries({{"flag", "true"},
                             {"count", "2"},
                             {"timeout", "10 s"},
                             {"hex", "16"},
                             {"quoted-hex", "0x10"},
                             {"ratio", "1.5"},
                             {"quoted", "a # not a comment"},
                             {"double-quoted", "tab\there"},
                             {"path", "/opt/flink"},
                             {"block", "line one\nline two\n"}}));
}

TEST(StandardYamlTest, ValuesFollowYaml11AsFlinkReadsThem) {
  const Configuration config = yaml(
      "yes: yes\non: on\noff: off\nno: No\n"
      "octal: 010\nunderscores: 1_000\nbinary: 0b101\nplus: +7\nnegative-hex: -0x1F\n"
      "big: 123456789012345678901234567890\nsexagesimal: 1:30\nminus-zero: -0\nnegative: -1_234\n"
      "float: 1.50\nexponent: 1e3\nsmall: 0.00001\nlarge: 12345678.9\ninf: -.inf\nnan: .NaN\n"
      "date: 2001-12-14\ntime: 2001-12-14 21:59:43.10 -5\n"
      "string: 1.2.3\nversion: v1.50\n");
  EXPECT_EQ(config, entries({{"yes", "true"},
                             {"on", "true"},
                             {"off", "false"},
                             {"no", "false"},
                             {"octal", "8"},
                             {"underscores", "1000"},
                             {"binary", "5"},
                             {"plus", "7"},
                             {"negative-hex", "-31"},
                             {"big", "123456789012345678901234567890"},
                             {"sexagesimal", "90"},
                             {"minus-zero", "0"},
                             {"negative", "-1234"},
                             {"float", "1.5"},
                             {"exponent", "1000.0"},
                             {"small", "1.0E-5"},
                             {"large", "1.23456789E7"},
                             {"inf", "-.inf"},
                             {"nan", ".NaN"},
                             {"date", "2001-12-14T00:00:00Z"},
                             {"time", "2001-12-15T02:59:43.100Z"},
                             {"string", "1.2.3"},
                             {"version", "v1.50"}}));
  // What a driver reads: `amount: 0x2` is two GPUs in Flink.
  const Configuration amount = yaml("external-resource.gpu.amount: 0x2\n");
  EXPECT_EQ(
      amount.get(ConfigOptions::key("external-resource.gpu.amount").longType().noDefaultValue()),
      2);
}

TEST(StandardYamlTest, ListsBecomeTheirFlowForm) {
  const Configuration config = yaml(
      "external-resources: [gpu, fpga]\n"
      "block:\n"
      "  - a\n"
      "  - 'b;c'\n"
      "  - \"it's\"\n"
      "  - ''\n"
      "empty: []\n");
  // toYAMLString's flow form, quoted where YAML needs it.
  EXPECT_EQ(config.getString("external-resources"), "[gpu, fpga]");
  EXPECT_EQ(config.getString("block"), "[a, b;c, it's, '']");
  EXPECT_EQ(config.getString("empty"), "[]");
  EXPECT_EQ(config.get(kResources.noDefaultValue()), (Strings{"gpu", "fpga"}));
  const auto block = ConfigOptions::key("block").stringType().asList().noDefaultValue();
  EXPECT_EQ(config.get(block), (Strings{"a", "b;c", "it's", ""}));
  const auto empty = ConfigOptions::key("empty").stringType().asList().noDefaultValue();
  EXPECT_EQ(config.get(empty), Strings{});
}

TEST(StandardYamlTest, EmptyOrCommentOnlyFileIsAnEmptyConfiguration) {
  EXPECT_EQ(yaml(""), Configuration{});
  EXPECT_EQ(yaml("# nothing set yet\n\n"), Configuration{});
  EXPECT_EQ(yaml("---\n"), Configuration{});
  EXPECT_EQ(yaml("empty-map: {}\n"), Configuration{});
}

TEST(StandardYamlTest, ByteOrderMarkIsAccepted) {
  EXPECT_EQ(yaml("\xEF\xBB\xBFkey: value\n"), entries({{"key", "value"}}));
}

TEST(StandardYamlTest, RootMustBeAMap) {
  EXPECT_EQ(yamlError("just text\n"),
            "config.yaml:1: the document must be a map of configuration keys.");
  EXPECT_EQ(yamlError("\n- a\n- b\n"),
            "config.yaml:2: the document must be a map of configuration keys.");
}

TEST(StandardYamlTest, NullValuesAreErrorsNamingFileLineAndKey) {
  EXPECT_EQ(yamlError("a: 1\nexternal-resource.gpu.amount:\n"),
            "config.yaml:2: key 'external-resource.gpu.amount' has no value (null).");
  EXPECT_EQ(yamlError("a:\n  b: ~\n"), "config.yaml:2: key 'a.b' has no value (null).");
  EXPECT_EQ(yamlError("a: null\n"), "config.yaml:1: key 'a' has no value (null).");
  EXPECT_EQ(yamlError("a: [x, ~]\n"), "config.yaml:1: the list of key 'a' holds a null element.");
  EXPECT_EQ(yamlError("a: 1\n~: 2\n"), "config.yaml:2: a key is null.");
  EXPECT_EQ(yamlError("a:\n  '': 2\n"), "config.yaml:2: a key under 'a' is empty.");
  // Quoted, "null" is text.
  EXPECT_EQ(yaml("a: 'null'\n"), entries({{"a", "null"}}));
}

TEST(StandardYamlTest, KeySetTwiceAfterFlatteningIsAnError) {
  EXPECT_EQ(yamlError("external-resource.gpu.amount: 1\n"
                      "external-resource:\n"
                      "  gpu:\n"
                      "    amount: 2\n"),
            "config.yaml:4: key 'external-resource.gpu.amount' is set twice (first on line 1).");
  EXPECT_EQ(yamlError("a: 1\nb: 2\na: 3\n"),
            "config.yaml:3: key 'a' is set twice (first on line 1).");
}

TEST(StandardYamlTest, ListsOfMapsOrListsAreErrors) {
  EXPECT_EQ(yamlError("a:\n  - x\n  - k: v\n"),
            "config.yaml:3: the list of key 'a' holds a map; only lists of plain values are "
            "supported.");
  EXPECT_EQ(yamlError("a: [[x, y]]\n"),
            "config.yaml:1: the list of key 'a' holds a list; nested lists are not supported.");
  EXPECT_EQ(yamlError("[a, b]: 1\n"), "config.yaml:1: a key is not a plain value.");
}

TEST(StandardYamlTest, SyntaxErrorNamesFileLineAndColumn) {
  const std::string message = yamlError("a: 1\nb: [unclosed\nc: 3\n");
  EXPECT_EQ(message.rfind("config.yaml:", 0), 0u) << message;
  EXPECT_NE(message.find("config.yaml:3:"), std::string::npos) << message;

  const std::string badIndent = yamlError("a:\n  b: 1\n c: 2\n");
  EXPECT_EQ(badIndent.rfind("config.yaml:3:", 0), 0u) << badIndent;
}

TEST(StandardYamlTest, SecondDocumentIsAnError) {
  EXPECT_EQ(yamlError("a: 1\n---\nb: 2\n"),
            "config.yaml:3: a second YAML document; a configuration file holds one.");
}

TEST(StandardYamlTest, TextAfterTheRootIsAnErrorNotAHang) {
  // yaml-cpp's LoadAll loops forever on these; they count as a second document.
  EXPECT_EQ(yamlError("[gpu], x\n"),
            "config.yaml:1: a second YAML document; a configuration file holds one.");
  EXPECT_EQ(yamlError(",\n"),
            "config.yaml:1: a second YAML document; a configuration file holds one.");
  Configuration config;
  config.setString("external-resources", "[gpu, fpga], tpu");
  EXPECT_EQ(config.get(kResources.noDefaultValue()), Strings{"[gpu, fpga], tpu"});
}

TEST(StandardYamlTest, UnclosedQuotedValueIsASyntaxError) {
  // yaml-cpp alone would read everything after the quote as the value of `args`.
  const std::string args = "external-resource.gpu.param.discovery-script.args";
  EXPECT_EQ(
      yamlError(args + ": '0,1,2\n"
                       "external-resource.gpu.amount: 2\n"
                       "external-resource.gpu.driver-factory.class: "
                       "org.apache.flink.externalresource.gpu.GPUDriverFactory\n"),
      "config.yaml:1:52: the quoted value of key '" + args + "' is never closed (a ' is missing).");
  EXPECT_EQ(yamlError("a: 1\nb: \"0,1,2\nc: 3\n"),
            "config.yaml:2:4: the quoted value of key 'b' is never closed (a \" is missing).");
  // An escaped quote does not close the value.
  EXPECT_EQ(yamlError("a: 'it''s\n"),
            "config.yaml:1:4: the quoted value of key 'a' is never closed (a ' is missing).");
  EXPECT_EQ(yamlError("a: \"say \\\"hi\\\"\n"),
            "config.yaml:1:4: the quoted value of key 'a' is never closed (a \" is missing).");
  // Nested, behind an anchor or a tag, and in a list.
  EXPECT_EQ(yamlError("a:\n  b: 1\n  c: 'x\n"),
            "config.yaml:3:6: the quoted value of key 'a.c' is never closed (a ' is missing).");
  EXPECT_EQ(yamlError("a: &x !!str 'v\nb: *x\n"),
            "config.yaml:1:13: the quoted value of key 'a' is never closed (a ' is missing).");
  EXPECT_EQ(yamlError("a: &x\n  # a comment\n  \"v\nb: 2\n"),
            "config.yaml:3:3: the quoted value of key 'a' is never closed (a \" is missing).");
  EXPECT_EQ(yamlError("a:\n  - x\n  - 'y\n  - z\n"),
            "config.yaml:3:5: a quoted element of the list of key 'a' is never closed (a ' is "
            "missing).");
  // After a byte order mark and with CRLF line ends.
  EXPECT_EQ(yamlError("\xEF\xBB\xBF"
                      "a: 1\r\nb: 'x\r\nc: 3\r\n"),
            "config.yaml:2:4: the quoted value of key 'b' is never closed (a ' is missing).");
  // A document that is one unclosed quoted scalar.
  EXPECT_EQ(yamlError("'a: 1\nb: 2\n"),
            "config.yaml:1:1: a quoted value is never closed (a ' is missing).");
}

TEST(StandardYamlTest, UnclosedQuotedKeyIsASyntaxError) {
  EXPECT_EQ(yamlError("a: 1\n'b: 2\nc: 3\n"),
            "config.yaml:2:1: a quoted key is never closed (a ' is missing).");
  EXPECT_EQ(yamlError("a:\n  x: 1\n  \"b: 2\n  c: 3\n"),
            "config.yaml:3:3: a quoted key under 'a' is never closed (a \" is missing).");
  // Closed quoted keys are fine.
  EXPECT_EQ(yaml("'a.b': \"x\"\n\"c\": 'y'\n"), entries({{"a.b", "x"}, {"c", "y"}}));
}

TEST(StandardYamlTest, ClosedQuotedValuesOverSeveralLinesAreRead) {
  EXPECT_EQ(yaml("a: 'one\n  two'\n"
                 "b: \"x \\\" y\n  z\"\n"
                 "c: 'it''s'\n"
                 "d: \"back\\\\\"\n"
                 "e: '#not a comment'\n"
                 "f: [\"p; q\", 'r']\n"),
            entries({{"a", "one two"},
                     {"b", "x \" y z"},
                     {"c", "it's"},
                     {"d", "back\\"},
                     {"e", "#not a comment"},
                     {"f", "[p; q, r]"}}));
}

TEST(StandardYamlTest, AnchorsAndAliasesAreExpanded) {
  EXPECT_EQ(yaml("base: &b {x: 1, y: 'two'}\n"
                 "copy: *b\n"
                 "list: &l [p, q]\n"
                 "again: *l\n"
                 "one: &o 'v'\n"
                 "same: *o\n"),
            entries({{"base.x", "1"},
                     {"base.y", "two"},
                     {"copy.x", "1"},
                     {"copy.y", "two"},
                     {"list", "[p, q]"},
                     {"again", "[p, q]"},
                     {"one", "v"},
                     {"same", "v"}}));
}

/// a0: &a0 {x: 1, y: 2}, then aN: &aN {p: *aN-1, q: *aN-1}: 2^21 keys once flattened.
std::string aliasBomb(int levels, const std::string& leaf) {
  std::string text = "a0: &a0 " + leaf + "\n";
  for (int n = 1; n <= levels; ++n) {
    const std::string previous = "*a" + std::to_string(n - 1);
    text += "a" + std::to_string(n) + ": &a" + std::to_string(n) + " {p: " + previous +
            ", q: " + previous + "}\n";
  }
  return text;
}

TEST(StandardYamlTest, AliasBombIsAnError) {
  const std::string keys = yamlError(aliasBomb(20, "{x: 1, y: 2}"));
  EXPECT_EQ(keys.rfind("config.yaml:", 0), 0u) << keys;
  EXPECT_NE(keys.find(": the configuration is too large once flattened (at key 'a1"),
            std::string::npos)
      << keys;
  EXPECT_NE(keys.find("): more than 100000 keys; an alias (*name) counts in full each time it "
                      "is used."),
            std::string::npos)
      << keys;
  // Empty maps add no keys, but are still visited.
  const std::string visits = yamlError(aliasBomb(30, "{}"));
  EXPECT_NE(visits.find("more than 200000 map entries and list elements"), std::string::npos)
      << visits;
  // A long value repeated.
  const std::string bytes = yamlError(aliasBomb(20, "'" + std::string(4000, 'v') + "'"));
  EXPECT_NE(bytes.find("more than 16 MiB of keys and values"), std::string::npos) << bytes;
  const std::string list = yamlError(aliasBomb(20, "[" + std::string(2000, '1') + ", 2]"));
  EXPECT_NE(list.find("more than 16 MiB of keys and values"), std::string::npos) << list;
}

/// Reads `text` as config.yaml and expects each key of `values` to have its value.
void expectValues(const std::string& text,
                  const std::vector<std::pair<std::string, std::string>>& values) {
  const Configuration config = yaml(text);
  for (const auto& [key, value] : values) EXPECT_EQ(config.getString(key), value) << key;
}

TEST(StandardYamlTest, AFloatPastWhatADoubleHoldsIsInfinityOrZeroAsInJava) {
  // Java's Double.valueOf: Infinity past Double.MAX_VALUE (written .inf), 0.0 below the smallest.
  expectValues("big: 1e400\nneg: -1.5E+309\nhuge: 1e99999999999999999999\nlong: 1" +
                   std::string(400, '0') + ".0\ntiny: 1e-400\nnegtiny: -1e-400\nsmall: 0." +
                   std::string(400, '0') + "1\nmax: 1.7e308\n",
               {{"big", ".inf"},
                {"neg", "-.inf"},
                {"huge", ".inf"},
                {"long", ".inf"},
                {"tiny", "0.0"},
                {"negtiny", "-0.0"},
                {"small", "0.0"},
                {"max", "1.7E308"}});
}

TEST(StandardYamlTest, FloatsAreWrittenAsJavasDoubleToString) {
  // At least two digits, and where one would do, the two closest: Double.MIN_VALUE is 4.9E-324.
  // SnakeYAML tries a float only on a scalar starting with a sign, a digit or a point: _1 stays.
  expectValues(
      "min: 4.9e-324\nhalf: 2.5e-324\nten: 4.94e-323\nbig: 1e23\ntwo: 2.0\nsmall: 3e-5\n"
      "seven: 1e7\nthird: 0.3333333333333333\nunder: _1\nplus: +_1\npoint5: 0.5\nmilli: 1e-3\n"
      "negtenth: -0.1\n",
      {{"min", "4.9E-324"},
       {"half", "4.9E-324"},
       {"ten", "4.9E-323"},
       {"big", "1.0E23"},
       {"two", "2.0"},
       {"small", "3.0E-5"},
       {"seven", "1.0E7"},
       {"third", "0.3333333333333333"},
       {"under", "_1"},
       {"plus", "1.0"},
       {"point5", "0.5"},
       {"milli", "0.001"},
       {"negtenth", "-0.1"}});
}

TEST(StandardYamlTest, AHugeIntegerInAnotherBaseIsAnErrorNotAHang) {
  // Written back in decimal as Flink does, up to kMaxConvertedDigits digits: 16^20000 - 1 has
  // 24,083 decimal digits and ends in 5.
  const std::string most =
      yaml("x: 0x" + std::string(yamlvalues::kMaxConvertedDigits, 'f')).getString("x").value_or("");
  EXPECT_EQ(most.size(), 24083u);
  EXPECT_EQ(most.back(), '5');
  // One digit more (underscores do not count) is refused at once, naming the key, its line and
  // the way out; converting the 16 MiB a configuration may hold would take hours.
  const std::string digits(yamlvalues::kMaxConvertedDigits + 1, '1');
  const std::string hex = yamlError("a: 1\nx: 0x_" + digits + "\n");
  EXPECT_EQ(hex.rfind("config.yaml:2: the value of key 'x' is a plain hexadecimal integer of 20001 "
                      "digits, more than the 20000 this reader writes back in decimal as Flink "
                      "does; quote it to keep it as text.",
                      0),
            0u)
      << hex;
  EXPECT_NE(yamlError("x: 0b" + digits).find("binary integer of 20001 digits"), std::string::npos);
  EXPECT_NE(yamlError("x: [0" + digits + "]").find("key 'x' is a plain octal integer"),
            std::string::npos);
  // Many values under the limit each: the configuration's long ones share one budget (a 16 MiB
  // file of 20,000-digit values took 40 s), and short ones do not count.
  std::string many;
  for (int i = 0; i < 5; ++i)
    many += "k" + std::to_string(i) + ": 0x" + std::string(20000, 'f') + "\n";
  EXPECT_EQ(yaml(many).keySet().size(), 5u);
  const std::string sixth = yamlError(many + "k5: [1, 0b" + std::string(17, '1') + "]\n");
  EXPECT_NE(sixth.find("config.yaml:6: the value of key 'k5' is a plain binary integer of 17 "
                       "digits, which brings the long integers in bases other than 10 past 100000 "
                       "digits in all"),
            std::string::npos)
      << sixth;
  std::string small;
  for (int i = 0; i < 20000; ++i)
    small += "s" + std::to_string(i) + ": 0x" + std::string(16, 'f') + "\n";
  EXPECT_EQ(yaml(small).getString("s19999"), "18446744073709551615");
  // An alias of a long integer is converted, and counted, once: 20,000 digits and four more
  // values of 20,000 are the whole budget.
  EXPECT_EQ(yaml("a: &n 0x" + std::string(20000, 'f') + "\nb: *n\nc: *n\nd: *n\ne: *n\nf: *n\n" +
                 many.substr(0, many.size() / 5 * 4))
                .keySet()
                .size(),
            10u);
  // Quoted, it is text, of any length.
  EXPECT_EQ(yaml("x: '0x" + digits + "'").getString("x"), "0x" + digits);
  // A list option given as text reads it as YAML: the same limit, as a configuration error.
  std::string elements;
  for (int i = 0; i < 6; ++i) elements += "0x" + std::string(20000, '1') + ", ";
  const std::string list = listError("[" + elements + "0x" + digits + "]");
  EXPECT_NE(list.find("Invalid value for configuration key 'external-resources': an element of "
                      "the list is a plain hexadecimal integer of 20000 digits, which brings"),
            std::string::npos)
      << list;
}

TEST(StandardYamlTest, NestingIsLimited) {
  std::string deep;
  for (int n = 0; n < 64; ++n) deep += "{k" + std::to_string(n) + ": ";
  EXPECT_EQ(yaml(deep + "v" + std::string(64, '}')).keySet().size(), 1u);
  const std::string tooDeep = yamlError("x: " + deep + "v" + std::string(64, '}'));
  EXPECT_EQ(tooDeep.rfind("config.yaml:1: key 'x.k0.k1.", 0), 0u) << tooDeep;
  EXPECT_NE(tooDeep.find("' is nested more than 64 maps deep."), std::string::npos) << tooDeep;
  // An alias inside the map it names.
  const std::string cycle = yamlError("a: &a {b: *a}\n");
  EXPECT_EQ(cycle.rfind("config.yaml:1: key 'a.b.b.b.", 0), 0u) << cycle;
  EXPECT_NE(cycle.find("' is nested more than 64 maps deep."), std::string::npos) << cycle;
}

TEST(StandardYamlTest, MergeKeysAddTheEntriesOfTheMapsTheyName) {
  EXPECT_EQ(yaml("base: &base {x: 1, y: 2, sub: {z: 3}}\n"
                 "other: &other {y: 20, w: 40}\n"
                 "one:\n"
                 "  <<: *base\n"
                 "  x: 10\n"
                 "both:\n"
                 "  x: 100\n"
                 "  <<: [*other, *base]\n"
                 "inline: {<<: {a: b}, c: d}\n"),
            entries({{"base.x", "1"},
                     {"base.y", "2"},
                     {"base.sub.z", "3"},
                     {"other.y", "20"},
                     {"other.w", "40"},
                     // The map's own keys win, wherever they are.
                     {"one.x", "10"},
                     {"one.y", "2"},
                     {"one.sub.z", "3"},
                     // An earlier merged map wins over a later one.
                     {"both.x", "100"},
                     {"both.y", "20"},
                     {"both.w", "40"},
                     {"both.sub.z", "3"},
                     {"inline.a", "b"},
                     {"inline.c", "d"}}));
  // A merged map's own merge keys, at the root too.
  EXPECT_EQ(yaml("a: &a {x: 1}\n"
                 "b: &b {<<: *a, y: 2}\n"
                 "<<: *b\n"
                 "y: 3\n"),
            entries({{"a.x", "1"}, {"b.x", "1"}, {"b.y", "2"}, {"x", "1"}, {"y", "3"}}));
  // A quoted '<<' is an ordinary key.
  EXPECT_EQ(yaml("a: {'<<': 1}\n"), entries({{"a.<<", "1"}}));
}

TEST(StandardYamlTest, BadMergeKeysAreErrors) {
  EXPECT_EQ(yamlError("a:\n  <<: 1\n"),
            "config.yaml:2: the merge key '<<' under 'a' must be given a map or a list of maps.");
  EXPECT_EQ(yamlError("<<: [{x: 1}, y]\n"),
            "config.yaml:1: the merge key '<<' must be given a map or a list of maps.");
  // Merged keys are taken per map: `x` is not `x.y`, but both flatten to the same key.
  EXPECT_EQ(yamlError("b: &b {x: {y: 3}}\na:\n  <<: *b\n  x.y: 2\n"),
            "config.yaml:1: key 'a.x.y' is set twice (first on line 4).");
  const std::string cycle = yamlError("a: &a {x: 1, <<: *a}\n");
  EXPECT_EQ(cycle, "config.yaml:1: the merge key '<<' under 'a' nests merges more than 64 deep.");
}

// --- flink-conf.yaml -------------------------------------------------------

TEST(LegacyConfigurationTest, ReadsKeyValueLinesAndDropsComments) {
  Strings warnings;
  const Configuration config = legacy(
      "# Flink's own format\n"
      "\n"
      "jobmanager.rpc.address: localhost   # where the job manager is\n"
      "  taskmanager.numberOfTaskSlots :   4\n"
      "external-resources: gpu;fpga\n"
      "password: abc#def\n"
      "url: http://host:8081/x\n"
      "   # indented comment\n",
      warnings);
  EXPECT_EQ(config, entries({{"jobmanager.rpc.address", "localhost"},
                             {"taskmanager.numberOfTaskSlots", "4"},
                             {"external-resources", "gpu;fpga"},
                             {"password", "abc"},
                             {"url", "http://host:8081/x"}}));
  EXPECT_EQ(warnings, Strings{});
  EXPECT_EQ(config.get(kResources.noDefaultValue()), (Strings{"gpu", "fpga"}));
}

TEST(LegacyConfigurationTest, CrlfLoneCrAndByteOrderMark) {
  Strings warnings;
  EXPECT_EQ(legacy("\xEF\xBB\xBF"
                   "a: 1\r\nb: 2 # c\r\n\r\nc: 3\rd: 4",
                   warnings),
            entries({{"a", "1"}, {"b", "2"}, {"c", "3"}, {"d", "4"}}));
  EXPECT_EQ(warnings, Strings{});
  // Line numbers count \r\n once and a lone \r as a line end, as Java's readLine does.
  legacy("a: 1\r\n\r\nbad\rb: 2\nworse\n", warnings);
  EXPECT_EQ(warnings, (Strings{
                          "flink-conf.yaml:3: not a key-value pair (no ': ' between a key and a "
                          "value), line skipped",
                          "flink-conf.yaml:5: not a key-value pair (no ': ' between a key and a "
                          "value), line skipped",
                      }));
}

TEST(LegacyConfigurationTest, BadLinesAreSkippedWithWarningsAndTheRestIsRead) {
  Strings warnings;
  const Configuration config = legacy(
      "good: 1\n"               // 1
      "key:value\n"             // 2: no space after ':'
      "no separator here\n"     // 3
      ": value\n"               // 4: empty key
      "empty:\n"                // 5: empty value
      "empty2:    # comment\n"  // 6: empty value once the comment is gone
      "x: # only a comment\n"   // 7: same
      "also-good: 2\n",         // 8
      warnings);
  EXPECT_EQ(config, entries({{"good", "1"}, {"also-good", "2"}}));
  const std::string notAPair = "not a key-value pair (no ': ' between a key and a value)";
  EXPECT_EQ(warnings, (Strings{
                          "flink-conf.yaml:2: " + notAPair + ", line skipped",
                          "flink-conf.yaml:3: " + notAPair + ", line skipped",
                          "flink-conf.yaml:4: empty key, line skipped",
                          "flink-conf.yaml:5: key 'empty' has no value, line skipped",
                          "flink-conf.yaml:6: key 'empty2' has no value, line skipped",
                          "flink-conf.yaml:7: key 'x' has no value, line skipped",
                      }));
}

TEST(LegacyConfigurationTest, LaterDuplicateWinsWithAWarning) {
  Strings warnings;
  const Configuration config = legacy("a: 1\nb: 2\na: 3\na: 4\n", warnings);
  EXPECT_EQ(config, entries({{"a", "4"}, {"b", "2"}}));
  EXPECT_EQ(warnings, (Strings{
                          "flink-conf.yaml:3: key 'a' repeats line 1; the later value is used",
                          "flink-conf.yaml:4: key 'a' repeats line 3; the later value is used",
                      }));
}

TEST(LegacyConfigurationTest, IsNotReadAsYaml) {
  Strings warnings;
  // Nesting, lists and quotes mean nothing here: the text after ": " is the value.
  EXPECT_EQ(legacy("a: [x, y]\nb: 'q'\nc: d: e\n  nested: 1\n", warnings),
            entries({{"a", "[x, y]"}, {"b", "'q'"}, {"c", "d: e"}, {"nested", "1"}}));
  EXPECT_EQ(warnings, Strings{});
}

// --- loadConfiguration -----------------------------------------------------

TEST(GlobalConfigurationTest, ReadsConfigYaml) {
  TempDir dir;
  write(dir / "config.yaml", "external-resources: [gpu]\nexternal-resource.gpu.amount: 2\n");
  const LoadedConfiguration loaded = GlobalConfiguration::loadConfiguration(dir.path());
  EXPECT_EQ(loaded.file, dir / "config.yaml");
  EXPECT_EQ(loaded.configuration,
            entries({{"external-resources", "[gpu]"}, {"external-resource.gpu.amount", "2"}}));
  EXPECT_EQ(loaded.warnings, Strings{});
}

TEST(GlobalConfigurationTest, ReadsTheLegacyFileWhenItIsTheOnlyOne) {
  TempDir dir;
  write(dir / "flink-conf.yaml", "a: 1\nbroken\n");
  const LoadedConfiguration loaded = GlobalConfiguration::loadConfiguration(dir.path());
  EXPECT_EQ(loaded.file, dir / "flink-conf.yaml");
  EXPECT_EQ(loaded.configuration, entries({{"a", "1"}}));
  EXPECT_EQ(loaded.warnings,
            Strings{(dir / "flink-conf.yaml").string() +
                    ":2: not a key-value pair (no ': ' between a key and a value), line skipped"});
}

/// A Flink installation in a temporary folder: conf/ with both files, lib/ with `distJar` (none
/// when empty). $FLINK_HOME and $FLINK_GPU_CONF_FILE are unset for the test's scope.
class BothFilesTest : public ::testing::Test {
 protected:
  void install(const std::string& distJar) {
    fs::create_directories(home() / "conf");
    fs::create_directories(home() / "lib");
    write(conf() / "config.yaml", "a: from-yaml\n");
    write(conf() / "flink-conf.yaml", "a: from-legacy\nb: 2\n");
    if (!distJar.empty()) write(home() / "lib" / distJar, "");
    write(home() / "lib" / "flink-table-api-java-uber-1.19.1.jar", "");
  }
  fs::path home() const { return dir_ / "flink"; }
  fs::path conf() const { return home() / "conf"; }
  std::string bothWarning(const std::string& read, const std::string& ignored,
                          const std::string& why) const {
    return "Both " + (conf() / "config.yaml").string() + " and " +
           (conf() / "flink-conf.yaml").string() + " are present; " + read + " read, " + ignored +
           " ignored: " + why;
  }

  TempDir dir_;
  ScopedEnvironment flinkHome_{"FLINK_HOME", std::nullopt};
  ScopedEnvironment confFile_{"FLINK_GPU_CONF_FILE", std::nullopt};
};

TEST_F(BothFilesTest, WithoutAHintConfigYamlIsReadAndTheWarningSaysWhy) {
  install("");
  const LoadedConfiguration loaded = GlobalConfiguration::loadConfiguration(conf());
  EXPECT_EQ(loaded.file, conf() / "config.yaml");
  EXPECT_TRUE(loaded.standardYaml);
  EXPECT_EQ(loaded.configuration, entries({{"a", "from-yaml"}}));
  ASSERT_EQ(loaded.warnings.size(), 1u);
  EXPECT_EQ(loaded.warnings[0].rfind(
                bothWarning("config.yaml", "flink-conf.yaml", "no Flink distribution"), 0),
            0u)
      << loaded.warnings[0];
  EXPECT_NE(loaded.warnings[0].find("$FLINK_GPU_CONF_FILE"), std::string::npos);
}

TEST_F(BothFilesTest, Flink119And120ReadFlinkConfYamlWhenItIsThere) {
  for (const std::string jar : {"flink-dist-1.19.1.jar", "flink-dist-1.20.0.jar"}) {
    fs::remove_all(home());
    install(jar);
    const LoadedConfiguration loaded = GlobalConfiguration::loadConfiguration(conf());
    EXPECT_EQ(loaded.file, conf() / "flink-conf.yaml");
    EXPECT_FALSE(loaded.standardYaml);
    EXPECT_EQ(loaded.configuration, entries({{"a", "from-legacy"}, {"b", "2"}}));
    const std::string version = jar.substr(11, 4);
    EXPECT_EQ(loaded.warnings,
              Strings{bothWarning("flink-conf.yaml", "config.yaml",
                                  "Flink " + version + " (" + (home() / "lib" / jar).string() +
                                      ") reads flink-conf.yaml when it is there")});
  }
}

TEST_F(BothFilesTest, Flink2ReadsOnlyConfigYaml) {
  install("flink-dist-2.0.0.jar");
  const LoadedConfiguration loaded = GlobalConfiguration::loadConfiguration(conf());
  EXPECT_EQ(loaded.file, conf() / "config.yaml");
  EXPECT_EQ(loaded.warnings,
            Strings{bothWarning("config.yaml", "flink-conf.yaml",
                                "Flink 2.0 (" + (home() / "lib/flink-dist-2.0.0.jar").string() +
                                    ") reads only config.yaml")});
}

TEST_F(BothFilesTest, TheDistributionIsAlsoFoundThroughFlinkHome) {
  // The folder is elsewhere ($FLINK_CONF_DIR=/etc/flink, say); $FLINK_HOME names the Flink.
  install("flink-dist_2.12-1.19.0.jar");
  const fs::path elsewhere = dir_ / "etc" / "flink";
  fs::create_directories(elsewhere);
  fs::copy(conf(), elsewhere);
  flinkHome_.set(home().string());
  const LoadedConfiguration loaded = GlobalConfiguration::loadConfiguration(elsewhere);
  EXPECT_EQ(loaded.file, elsewhere / "flink-conf.yaml");
}

TEST_F(BothFilesTest, TheEnvironmentOrTheCallerForcesEither) {
  install("flink-dist-1.19.1.jar");
  confFile_.set("config.yaml");
  LoadedConfiguration loaded = GlobalConfiguration::loadConfiguration(conf());
  EXPECT_EQ(loaded.file, conf() / "config.yaml");
  EXPECT_EQ(loaded.warnings,
            Strings{bothWarning("config.yaml", "flink-conf.yaml", "as $FLINK_GPU_CONF_FILE asks")});
  // The caller's choice wins over the environment.
  loaded = GlobalConfiguration::loadConfiguration(conf(), {}, ConfigurationFileChoice::kLegacy);
  EXPECT_EQ(loaded.file, conf() / "flink-conf.yaml");
  EXPECT_EQ(loaded.warnings,
            Strings{bothWarning("flink-conf.yaml", "config.yaml", "as asked for")});

  confFile_.set("flink.yaml");
  EXPECT_NE(errorOf([&] {
              GlobalConfiguration::loadConfiguration(conf());
            }).find("$FLINK_GPU_CONF_FILE is 'flink.yaml'"),
            std::string::npos);

  // Asking for a file that is not there is an error, not a quiet read of the other.
  fs::remove(conf() / "flink-conf.yaml");
  confFile_.set("flink-conf.yaml");
  EXPECT_THROW(GlobalConfiguration::loadConfiguration(conf()), FileNotFoundException);
}

TEST(FlinkDistributionTest, VersionComesFromTheFlinkDistJar) {
  TempDir dir;
  EXPECT_EQ(GlobalConfiguration::flinkDistributionVersion(dir.path()), std::nullopt);
  fs::create_directories(dir / "lib");
  write(dir / "lib/flink-dist-SNAPSHOT.jar", "");
  EXPECT_EQ(GlobalConfiguration::flinkDistributionVersion(dir.path()), std::nullopt);
  write(dir / "lib/flink-dist-1.20-SNAPSHOT.jar", "");
  const auto found = GlobalConfiguration::flinkDistributionVersion(dir.path());
  ASSERT_TRUE(found);
  EXPECT_EQ(found->first, std::make_pair(1, 20));
  EXPECT_EQ(found->second, dir / "lib/flink-dist-1.20-SNAPSHOT.jar");
}

TEST(GlobalConfigurationTest, FolderWithNeitherFileIsAnErrorNamingItAndBothFiles) {
  TempDir dir;
  try {
    GlobalConfiguration::loadConfiguration(dir.path());
    FAIL() << "no error";
  } catch (const FileNotFoundException& e) {
    EXPECT_EQ(std::string(e.what()), "The configuration folder '" + dir.path().string() +
                                         "' holds neither config.yaml nor flink-conf.yaml.");
  }
}

TEST(GlobalConfigurationTest, MissingFolderOrAFileInsteadAreErrors) {
  TempDir dir;
  try {
    GlobalConfiguration::loadConfiguration(dir / "missing");
    FAIL() << "no error";
  } catch (const FileNotFoundException& e) {
    EXPECT_EQ(std::string(e.what()),
              "The configuration folder '" + (dir / "missing").string() +
                  "' does not exist; it should hold config.yaml or flink-conf.yaml.");
  }
  write(dir / "file", "a: 1\n");
  try {
    GlobalConfiguration::loadConfiguration(dir / "file");
    FAIL() << "no error";
  } catch (const FileNotFoundException& e) {
    EXPECT_NE(std::string(e.what()).find("'" + (dir / "file").string() + "' is not a folder"),
              std::string::npos)
        << e.what();
  }
}

TEST(GlobalConfigurationTest, UnreadableFilesAreErrorsNamingThePath) {
  TempDir dir;
  fs::create_directory(dir / "config.yaml");  // a folder where the file should be
  try {
    GlobalConfiguration::loadConfiguration(dir.path());
    FAIL() << "no error";
  } catch (const FlinkException& e) {
    EXPECT_EQ(std::string(e.what()), "Cannot read the configuration file '" +
                                         (dir / "config.yaml").string() + "': Is a directory");
  }
  fs::remove(dir / "config.yaml");
  // A dangling link is reported, not passed over for flink-conf.yaml.
  fs::create_symlink(dir / "nowhere.yaml", dir / "config.yaml");
  write(dir / "flink-conf.yaml", "a: 1\n");
  try {
    GlobalConfiguration::loadConfiguration(dir.path());
    FAIL() << "no error";
  } catch (const FileNotFoundException& e) {
    EXPECT_EQ(std::string(e.what()), "Cannot read the configuration file '" +
                                         (dir / "config.yaml").string() +
                                         "': No such file or directory");
  }
}

TEST(GlobalConfigurationTest, YamlErrorsNameTheFileAndLine) {
  TempDir dir;
  write(dir / "config.yaml", "a: 1\nb:\n");
  const std::string message = errorOf([&] { GlobalConfiguration::loadConfiguration(dir.path()); });
  EXPECT_EQ(message, (dir / "config.yaml").string() + ":2: key 'b' has no value (null).");

  write(dir / "config.yaml", "a: 1\nb: {\n");
  const std::string syntax = errorOf([&] { GlobalConfiguration::loadConfiguration(dir.path()); });
  EXPECT_EQ(syntax.rfind((dir / "config.yaml").string() + ":", 0), 0u) << syntax;
}

TEST(GlobalConfigurationTest, DynamicPropertiesWinOverTheFile) {
  TempDir dir;
  write(dir / "config.yaml", "external-resource.gpu.amount: 1\nkept: yes\n");
  // `yes` is YAML 1.1's true; a -D value is a string, taken as it is.
  const Configuration dynamic =
      parseDynamicProperties({"external-resource.gpu.amount=4", "added=x"});
  const LoadedConfiguration loaded = GlobalConfiguration::loadConfiguration(dir.path(), dynamic);
  EXPECT_EQ(loaded.configuration,
            entries({{"external-resource.gpu.amount", "4"}, {"kept", "true"}, {"added", "x"}}));
}

// --- -D and the folder -----------------------------------------------------

TEST(DynamicPropertiesTest, SplitAtTheFirstEqualsLaterWins) {
  EXPECT_EQ(parseDynamicProperties({" a.b =1", "c=x=y", "empty=", "a.b=2", "sp= v "}),
            entries({{"a.b", "2"}, {"c", "x=y"}, {"empty", ""}, {"sp", " v "}}));
  EXPECT_EQ(parseDynamicProperties({}), Configuration{});
}

TEST(DynamicPropertiesTest, BadArgumentsAreQuoted) {
  EXPECT_EQ(errorOf([] {
              parseDynamicProperties({"a=1", "novalue"});
            }),
            "Invalid dynamic property 'novalue': expected key=value.");
  EXPECT_EQ(errorOf([] { parseDynamicProperties({" =1"}); }),
            "Invalid dynamic property ' =1': the key before '=' is empty.");
}

TEST(ConfigurationDirectoryTest, ExplicitThenFlinkConfDirThenFlinkHome) {
  ScopedEnvironment confDir("FLINK_CONF_DIR", "/etc/flink");
  ScopedEnvironment home("FLINK_HOME", "/opt/flink");
  EXPECT_EQ(GlobalConfiguration::resolveConfigurationDirectory(fs::path("/mine")), "/mine");
  EXPECT_EQ(GlobalConfiguration::resolveConfigurationDirectory(std::nullopt), "/etc/flink");
  {
    ScopedEnvironment unset("FLINK_CONF_DIR", std::nullopt);
    EXPECT_EQ(GlobalConfiguration::resolveConfigurationDirectory(std::nullopt), "/opt/flink/conf");
  }
  {
    ScopedEnvironment empty("FLINK_CONF_DIR", "");
    EXPECT_EQ(GlobalConfiguration::resolveConfigurationDirectory(std::nullopt), "/opt/flink/conf");
  }
  EXPECT_STREQ(std::getenv("FLINK_CONF_DIR"), "/etc/flink");  // restored
}

TEST(ConfigurationDirectoryTest, NoneGivenIsAnErrorNamingWhatWasTried) {
  ScopedEnvironment confDir("FLINK_CONF_DIR", std::nullopt);
  ScopedEnvironment home("FLINK_HOME", "");
  EXPECT_EQ(errorOf([] { GlobalConfiguration::resolveConfigurationDirectory(std::nullopt); }),
            "No configuration folder: none was given, and neither $FLINK_CONF_DIR nor "
            "$FLINK_HOME is set (the folder would be $FLINK_HOME/conf).");
  EXPECT_THROW(GlobalConfiguration::resolveConfigurationDirectory(fs::path()),
               IllegalConfigurationException);
}

// --- list options ----------------------------------------------------------

TEST(ListOptionTest, BuilderMakesListOptions) {
  const ConfigOption<Strings> withDefault = kResources.defaultValues({"gpu"});
  EXPECT_EQ(withDefault.key(), "external-resources");
  EXPECT_EQ(withDefault.defaultValue(), Strings{"gpu"});
  Configuration config;
  EXPECT_EQ(config.get(withDefault), Strings{"gpu"});
  config.set(withDefault, {"gpu", "fpga"});
  EXPECT_EQ(config.getString("external-resources"), "[gpu, fpga]");  // standard YAML's form
  EXPECT_EQ(config.get(withDefault), (Strings{"gpu", "fpga"}));
  config.setStandardYaml(false);
  config.set(withDefault, {"gpu", "fpga"});
  EXPECT_EQ(config.getString("external-resources"), "gpu;fpga");  // the legacy form
  EXPECT_EQ(config.get(withDefault), (Strings{"gpu", "fpga"}));
  EXPECT_FALSE(kResources.noDefaultValue().hasDefaultValue());
}

TEST(ListOptionTest, FormatQuotesWhatNeedsItAndParseReadsItBack) {
  const std::vector<std::pair<Strings, std::string>> cases = {
      {{}, ""},
      {{"a"}, "a"},
      {{"a", "b c"}, "a;b c"},
      {{"a;b", "c"}, "'a;b';c"},
      {{"it's"}, "'it''s'"},
      {{"say \"hi\""}, "'say \"hi\"'"},
      {{"", "x", ""}, "'';x;''"},
      {{" padded "}, "' padded '"},
      {{"''"}, "''''''"},
  };
  for (const auto& [list, text] : cases) {
    EXPECT_EQ(detail::formatConfigValue(list), text);
    EXPECT_EQ(detail::parseConfigValue<Strings>("k", text), list) << text;
  }
}

TEST(ListOptionTest, ParseReadsWhatFlinkReads) {
  const auto parse = [](const std::string& text) {
    return detail::parseConfigValue<Strings>("k", text);
  };
  EXPECT_EQ(parse(" gpu ; fpga "), (Strings{"gpu", "fpga"}));
  EXPECT_EQ(parse("\"a;b\" ; 'c'"), (Strings{"a;b", "c"}));
  EXPECT_EQ(parse("a;;b"), (Strings{"a", "", "b"}));
  EXPECT_EQ(parse("a; ;b"), (Strings{"a", "", "b"}));
  EXPECT_EQ(parse(";a;"), (Strings{"a"}));
  EXPECT_EQ(parse("   "), Strings{});
  EXPECT_EQ(parse("a'b"), Strings{"a'b"});  // a quote inside an unquoted element is text
  EXPECT_EQ(parse("'x''y\"z'"), Strings{"x'y\"z"});
}

TEST(ListOptionTest, ListTextIsReadAsYamlInStandardModeAndSplitOnSemicolonsInLegacy) {
  // What Flink writes when it regenerates config.yaml for TaskManagers, and a common -D form.
  const auto list = kResources.noDefaultValue();
  Configuration config;
  for (const std::string text : {"[gpu, fpga]", " [ gpu , 'fpga' ] ", "- gpu\n- fpga"}) {
    config.setString("external-resources", text);
    EXPECT_EQ(config.get(list), (Strings{"gpu", "fpga"})) << text;
  }
  // Each element as Flink turns it into a string; quoted ones as written.
  config.setString("external-resources", "['*', '123', 'true', 0x10, yes, [a, b], {k: v}]");
  EXPECT_EQ(config.get(list), (Strings{"*", "123", "true", "16", "true", "[a, b]", "{k: v}"}));
  // Not a YAML sequence, or one with a null element: the legacy split, as Flink falls back.
  config.setString("external-resources", "gpu;fpga");
  EXPECT_EQ(config.get(list), (Strings{"gpu", "fpga"}));
  config.setString("external-resources", "gpu");
  EXPECT_EQ(config.get(list), Strings{"gpu"});
  config.setString("external-resources", "[gpu, ~]");
  EXPECT_EQ(config.get(list), Strings{"[gpu, ~]"});
  config.setString("external-resources", "[gpu");
  EXPECT_EQ(config.get(list), Strings{"[gpu"});

  // A flink-conf.yaml's configuration: only the ';' split, so a YAML list is one name.
  config.setStandardYaml(false);
  config.setString("external-resources", "[gpu, fpga]");
  EXPECT_EQ(config.get(list), Strings{"[gpu, fpga]"});
  config.setString("external-resources", "gpu;fpga");
  EXPECT_EQ(config.get(list), (Strings{"gpu", "fpga"}));
  // The view a driver gets keeps the rules.
  EXPECT_FALSE(config.withPrefixRemoved("external-").isStandardYaml());
}

TEST(ListOptionTest, AListTextWhoseAliasesExpandPastTheLimitsIsAnErrorAtOnce) {
  // 359 bytes that expand to ten million elements: refused as config.yaml's reader refuses it
  // (Flink's refuses more than 50 aliases of collections), not read for half a minute.
  std::string bomb = "[&a0 [x, x, x, x, x, x, x, x, x, x]";
  for (int level = 1; level < 8; ++level) {
    bomb += ", &a" + std::to_string(level) + " [";
    for (int i = 0; i < 10; ++i) bomb += (i ? ", *a" : "*a") + std::to_string(level - 1);
    bomb += "]";
  }
  bomb += ", ~]";
  const std::string nodes = listError(bomb);
  EXPECT_NE(nodes.find("Invalid value for configuration key 'external-resources': read as a YAML "
                       "list, it expands to more than 200000 elements and entries"),
            std::string::npos)
      << nodes;
  // A long scalar used many times: the text's limit.
  std::string uses;
  for (int i = 0; i < 20; ++i) uses += "*s, ";
  EXPECT_NE(listError("[&s " + std::string(1 << 20, 'v') + ", " + uses + "gpu]")
                .find("it expands to more than 16 MiB of text"),
            std::string::npos);
  Configuration config;
  config.setStandardYaml(true);
  // An alias of a long integer is converted, and counted, once, as in config.yaml.
  std::string aliased = "[&n 0x" + std::string(20000, 'f');
  for (int i = 0; i < 10; ++i) aliased += ", *n";
  config.setString("external-resources", aliased + ", gpu]");
  const std::vector<std::string> list = config.get(kResources.noDefaultValue());
  ASSERT_EQ(list.size(), 12u);
  EXPECT_EQ(list[10], list[0]);
  EXPECT_EQ(list[11], "gpu");
}

TEST(ListOptionTest, FlowFormQuotesWhereYamlNeedsIt) {
  EXPECT_EQ(detail::formatStandardYamlList({"*", "123", "true"}), "['*', '123', 'true']");
  EXPECT_EQ(detail::formatStandardYamlList({"gpu", "a b", "nvidia.com/gpu"}),
            "[gpu, a b, nvidia.com/gpu]");
  EXPECT_EQ(detail::formatStandardYamlList({"", " x", "a, b", "it's", "k: v", "#c", "-"}),
            "['', ' x', 'a, b', it's, 'k: v', '#c', '-']");
  EXPECT_EQ(detail::formatStandardYamlList({"tab\there", "~", "null", "1.5", "2001-12-14"}),
            "[\"tab\\there\", '~', 'null', '1.5', '2001-12-14']");
  EXPECT_EQ(detail::formatStandardYamlList({}), "[]");
}

TEST(ListOptionTest, MalformedQuotingNamesKeyAndValue) {
  const auto list = ConfigOptions::key("external-resources").stringType().asList().noDefaultValue();
  Configuration config;
  config.setString("external-resources", "gpu;'fpga");
  EXPECT_EQ(errorOf([&] { config.get(list); }),
            "Invalid value 'gpu;'fpga' for configuration key 'external-resources': expected a "
            "list separated by ';', but the quote at position 4 is not closed.");
  config.setString("external-resources", "'gpu' x;fpga");
  EXPECT_EQ(errorOf([&] { config.get(list); }),
            "Invalid value ''gpu' x;fpga' for configuration key 'external-resources': expected a "
            "list separated by ';', but position 6 follows a closing quote.");
}

TEST(ListOptionTest, RoundTripsEveryList) {
  // Elements built from the characters that matter to the format.
  const std::string alphabet = "a ;'\"\t";
  std::vector<std::string> elements = {""};
  for (char c1 : alphabet) {
    elements.push_back(std::string(1, c1));
    for (char c2 : alphabet) elements.push_back(std::string{c1, c2});
  }
  for (const std::string& first : elements) {
    for (const std::string& second : elements) {
      const Strings list = {first, second};
      const std::string text = detail::formatConfigValue(list);
      ASSERT_EQ(detail::parseConfigValue<Strings>("k", text), list) << "text: [" << text << "]";
      const std::string flow = detail::formatStandardYamlList(list);
      ASSERT_EQ(detail::parseStandardYamlList("k", flow), list) << "flow: " << flow;
    }
  }
}

}  // namespace
}  // namespace flink
