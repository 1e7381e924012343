// The discovery-script protocol's parser: Flink's rules (first line, split on commas, trim, drop
// blanks) plus ours (only device identifiers are GPUs).
#include "flink/externalresource/gpu/ScriptOutput.h"

#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "flink/util/Exceptions.h"

namespace flink::externalresource::gpu {
namespace {

using Ids = std::vector<std::string>;

TEST(ScriptOutputTest, CommaSeparatedIndicesTrimmedBlankPartsDropped) {
  EXPECT_EQ(parseScriptOutput("0,1\n").identifiers, (Ids{"0", "1"}));
  EXPECT_EQ(parseScriptOutput(" 0 , \t1 ,, ,2,\r\n").identifiers, (Ids{"0", "1", "2"}));
  EXPECT_EQ(parseScriptOutput("3").identifiers, (Ids{"3"}));
}

TEST(ScriptOutputTest, EmptyOrBlankOutputMeansNoGpus) {
  EXPECT_TRUE(parseScriptOutput("").identifiers.empty());
  EXPECT_TRUE(parseScriptOutput("  \n").identifiers.empty());
  EXPECT_TRUE(parseScriptOutput(",,").identifiers.empty());
}

TEST(ScriptOutputTest, OnlyTheFirstLineCountsAndFurtherLinesAreCounted) {
  const ScriptOutput output = parseScriptOutput("0,1\n2,3\n\nwhatever\n");
  EXPECT_EQ(output.identifiers, (Ids{"0", "1"}));
  EXPECT_EQ(output.ignoredLines, 2u);
  EXPECT_EQ(parseScriptOutput("0,1\n\n  \n").ignoredLines, 0u);
}

TEST(ScriptOutputTest, SixteenGpusKeepTheirIndices) {
  const ScriptOutput output = parseScriptOutput("0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n");
  ASSERT_EQ(output.identifiers.size(), 16u);
  EXPECT_EQ(output.identifiers[10], "10");
  EXPECT_EQ(output.identifiers[15], "15");
}

TEST(ScriptOutputTest, DuplicatesAreDroppedInOrderAndReported) {
  const ScriptOutput output = parseScriptOutput("1,0,1,1,2,0");
  EXPECT_EQ(output.identifiers, (Ids{"1", "0", "2"}));
  EXPECT_EQ(output.duplicates, (Ids{"1", "0"}));
  // Leading zeros name the same device: "01" is GPU 1.
  EXPECT_EQ(parseScriptOutput("01,1,000").identifiers, (Ids{"1", "0"}));
}

TEST(ScriptOutputTest, UuidFormsThatCudaVisibleDevicesAccepts) {
  const char* line =
      "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6,MIG-4b9e1b0a-7f3c-5a2e-9d1c-0e6f2a8b7c3d,"
      "MIG-GPU-8932f937-d72c-4106-c12f-20bd9faed9f6/1/0,GPU-8932f937";
  EXPECT_EQ(
      parseScriptOutput(line).identifiers,
      (Ids{"GPU-8932f937-d72c-4106-c12f-20bd9faed9f6", "MIG-4b9e1b0a-7f3c-5a2e-9d1c-0e6f2a8b7c3d",
           "MIG-GPU-8932f937-d72c-4106-c12f-20bd9faed9f6/1/0", "GPU-8932f937"}));
}

TEST(ScriptOutputTest, TextThatIsNotADeviceIsRejectedQuotingTheLine) {
  for (const char* bad :
       {"No devices were found", "[N/A]", "0,[N/A]",
        "WARNING: infoROM is corrupted at gpu 0000:0B:00.0", "-1", "1.5.0", "1.", "0x1", "GPU-",
        "GPU-xyz", "MIG-GPU-abc/1", "MIG-GPU-abc/x/0", "gpu0", "1234567890", "0 1", "null"}) {
    try {
      parseScriptOutput(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const FlinkException& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("\"") + bad + "\""), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("not a list of GPUs"), std::string::npos) << e.what();
    }
  }
}

TEST(ScriptOutputTest, ControlCharactersAreEscapedInTheMessage) {
  try {
    parseScriptOutput(std::string("0,\x1b[31mred\x1b[0m"));
    FAIL();
  } catch (const FlinkException& e) {
    EXPECT_EQ(std::string(e.what()).find('\x1b'), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("\\x1b"), std::string::npos);
  }
}

TEST(ScriptOutputTest, AByteOrderMarkIsNotPartOfTheFirstGpu) {
  EXPECT_EQ(parseScriptOutput("\xEF\xBB\xBF"
                              "0,1\n")
                .identifiers,
            (Ids{"0", "1"}));
}

// --- Spark's JSON form ------------------------------------------------------------------------

/// The message of the FlinkException that parsing `text` throws.
std::string errorOf(std::string_view text) {
  try {
    parseScriptOutput(text);
  } catch (const FlinkException& e) {
    return e.what();
  }
  ADD_FAILURE() << "accepted '" << text << "'";
  return {};
}

bool contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

TEST(ScriptOutputTest, SparksJsonForm) {
  const ScriptOutput output = parseScriptOutput(R"({"name": "gpu", "addresses": ["0", "1"]})"
                                                "\n");
  EXPECT_EQ(output.identifiers, (Ids{"0", "1"}));
  EXPECT_EQ(output.resourceName, "gpu");
  EXPECT_EQ(output.ignoredLines, 0u);
  EXPECT_TRUE(output.duplicates.empty());
  // The line form has no name.
  EXPECT_FALSE(parseScriptOutput("0,1\n").resourceName);
}

TEST(ScriptOutputTest, SparksJsonFormOverSeveralLines) {
  const ScriptOutput output = parseScriptOutput(
      "  \n{\n  \"name\": \"gpu\",\n  \"addresses\": [\n    \" 007 \",\n"
      "    \"GPU-8932f937-d72c-4106-c12f-20bd9faed9f6\",\n    \"7\"\n  ]\n}\n\n");
  EXPECT_EQ(output.identifiers, (Ids{"7", "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6"}));
  EXPECT_EQ(output.duplicates, (Ids{"7"}));
  EXPECT_EQ(output.ignoredLines, 0u);
}

TEST(ScriptOutputTest, SparksJsonFormNameIsOptionalOtherMembersIgnored) {
  const ScriptOutput output =
      parseScriptOutput(R"({"addresses": ["2"], "vendor": "nvidia.com", "count": 1})");
  EXPECT_EQ(output.identifiers, (Ids{"2"}));
  EXPECT_FALSE(output.resourceName);
  // Recorded as printed, for the caller to warn about.
  EXPECT_EQ(parseScriptOutput(R"({"name": "fpga", "addresses": []})").resourceName, "fpga");
}

TEST(ScriptOutputTest, SparksJsonFormEmptyAddressesMeanNoGpus) {
  const ScriptOutput output = parseScriptOutput(R"({"name": "gpu", "addresses": []})");
  EXPECT_TRUE(output.identifiers.empty());
  EXPECT_EQ(output.resourceName, "gpu");
}

TEST(ScriptOutputTest, SparksJsonFormAfterAByteOrderMark) {
  EXPECT_EQ(parseScriptOutput("\xEF\xBB\xBF \t{\"addresses\": [\"0\", \"1\"]}").identifiers,
            (Ids{"0", "1"}));
}

TEST(ScriptOutputTest, SparksJsonFormNumbersAreNotAddresses) {
  const std::string message = errorOf(R"({"name": "gpu", "addresses": [0, 1]})");
  EXPECT_TRUE(contains(message, "Spark's resource discovery form")) << message;
  EXPECT_TRUE(contains(message, "\"addresses\" holds 0, which is not a string")) << message;
}

TEST(ScriptOutputTest, SparksJsonFormWithoutAddresses) {
  const std::string message = errorOf(R"({"name": "gpu"})");
  EXPECT_EQ(message,
            "a JSON object (Spark's resource discovery form) without \"addresses\": "
            "{\"name\":\"gpu\"}");
  EXPECT_TRUE(contains(errorOf(R"({"name": "gpu", "addresses": "0,1"})"),
                       "\"addresses\" is not an array of strings: \"0,1\""));
  EXPECT_TRUE(contains(errorOf(R"({"name": "gpu", "addresses": null})"),
                       "\"addresses\" is not an array of strings: null"));
  EXPECT_TRUE(contains(errorOf(R"({"name": 1, "addresses": []})"), "\"name\" is not a string: 1"));
}

TEST(ScriptOutputTest, SparksJsonFormAddressesMustBeDevices) {
  for (const char* bad : {R"({"addresses": ["0", "gpu0"]})", R"({"addresses": [""]})",
                          R"({"addresses": ["No devices were found"]})"}) {
    const std::string message = errorOf(bad);
    EXPECT_TRUE(contains(message, "which is not a list of GPUs: address \"")) << message;
    EXPECT_TRUE(contains(message, "is not a device index")) << message;
  }
}

TEST(ScriptOutputTest, SparksJsonFormWithTrailingGarbage) {
  for (const char* bad : {R"({"addresses": ["0"]} x)", "{\"addresses\": [\"0\"]}\n0,1\n",
                          R"({"addresses": ["0"]}{"addresses": ["1"]})"}) {
    const std::string message = errorOf(bad);
    EXPECT_TRUE(
        message.starts_with("output starting with '{', which is not valid JSON for "
                            "Spark's resource discovery form"))
        << message;
    EXPECT_TRUE(contains(message, "expected end of input")) << message;
  }
  // Whitespace after the object is fine, Java's included.
  EXPECT_EQ(parseScriptOutput("{\"addresses\": [\"0\"]} \r\n\f\n").identifiers, (Ids{"0"}));
}

TEST(ScriptOutputTest, SparksJsonFormThatIsNotJson) {
  const std::string message = errorOf("{\"name\": \"gpu\", \"addresses\": [\"0\",]}");
  EXPECT_TRUE(
      message.starts_with("output starting with '{', which is not valid JSON for Spark's "
                          "resource discovery form (e.g. {\"name\": \"gpu\", "
                          "\"addresses\": [\"0\"]}): parse error at line 1, column "))
      << message;
  EXPECT_TRUE(message.ends_with("(byte 35 of the object)")) << message;
  EXPECT_FALSE(contains(message, "[json.exception")) << message;
  // Bytes that are not UTF-8, and control characters, are escaped in the message.
  const std::string binary = errorOf("{\"addresses\": [\"\x1b\xff\"]}");
  EXPECT_FALSE(contains(binary, "\x1b")) << binary;
  EXPECT_TRUE(contains(errorOf("{"), "not valid JSON"));
}

TEST(ScriptOutputTest, SparksJsonFormWithANumberTooLargeIsAnErrorNotACrash) {
  // Found by the fuzzer: valid syntax that nlohmann-json refuses with out_of_range, not
  // parse_error.
  const std::string message = errorOf("{\"addresses\": [\"0\"], \"x\": 666666666E1666}");
  EXPECT_TRUE(message.starts_with("output starting with '{', which is not valid JSON")) << message;
  EXPECT_TRUE(contains(message, "number overflow")) << message;
}

}  // namespace
}  // namespace flink::externalresource::gpu
