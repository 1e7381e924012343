// The health file's line format: what is written is read back the same, bad lines are kept and
// reported, and a record names a GPU by UUID before index.
#include "host/health/HealthRecords.h"

#include <gtest/gtest.h>

namespace {

using flink::health::formatHealth;
using flink::health::formatHealthRecord;
using flink::health::HealthRecord;
using flink::health::names;
using flink::health::parseHealth;
using flink::health::RecordKind;

HealthRecord xidRecord() {
  HealthRecord record;
  record.kind = RecordKind::kUnhealthy;
  record.gpu = "1";
  record.uuid = "GPU-11111111-1111-4111-8111-111111111111";
  record.since = 1796119157;
  record.xid = 79;
  record.source = "watch";
  record.reason = "GPU has fallen off the bus";
  return record;
}

TEST(HealthRecordsTest, ARecordIsOneTabSeparatedLineReadBackUnchanged) {
  const HealthRecord record = xidRecord();
  EXPECT_EQ(formatHealthRecord(record),
            "unhealthy\tgpu=1\tuuid=GPU-11111111-1111-4111-8111-111111111111\tsince=1796119157"
            "\txid=79\tsource=watch\treason=GPU has fallen off the bus");
  const auto parsed = parseHealth(formatHealthRecord(record) + "\n");
  ASSERT_EQ(parsed.records.size(), 1u);
  EXPECT_EQ(parsed.records.front(), record);
  EXPECT_TRUE(parsed.junk.empty());
}

TEST(HealthRecordsTest, TheRecoveryActionOfWatchIsAFieldOfItsOwn) {
  HealthRecord verdict = xidRecord();
  verdict.recoveryAction = 1;
  const std::string line = formatHealthRecord(verdict);
  EXPECT_EQ(line,
            "unhealthy\tgpu=1\tuuid=GPU-11111111-1111-4111-8111-111111111111\tsince=1796119157"
            "\txid=79\trecovery_action=1\tsource=watch\treason=GPU has fallen off the bus");
  EXPECT_EQ(parseHealth(line).records.at(0), verdict);
  // A re-admission of watch names its source and the action the driver had asked.
  HealthRecord readmitted;
  readmitted.kind = RecordKind::kReadmitted;
  readmitted.gpu = "1";
  readmitted.since = 1796119200;
  readmitted.recoveryAction = 1;
  readmitted.source = "watch";
  EXPECT_EQ(parseHealth(formatHealthRecord(readmitted)).records.at(0), readmitted);
  // A value that is not a number makes the line junk, as a bad xid does.
  const auto bad = parseHealth("unhealthy\tgpu=1\tsince=5\trecovery_action=reset\n");
  EXPECT_TRUE(bad.records.empty());
  EXPECT_EQ(bad.junk.size(), 1u);
}

TEST(HealthRecordsTest, ReasonsWithTabsNewlinesAndPercentsSurvive) {
  HealthRecord record;
  record.kind = RecordKind::kDrained;
  record.gpu = "0";
  record.since = 5;
  record.uid = 1000;
  record.reason = "line\none\ttab 100%";
  const std::string line = formatHealthRecord(record);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_EQ(line, "drained\tgpu=0\tsince=5\tuid=1000\treason=line%0Aone%09tab 100%25");
  EXPECT_EQ(parseHealth(line).records.at(0), record);
}

TEST(HealthRecordsTest, BadLinesAreReportedAndWrittenBackAsTheyWere) {
  const std::string text =
      "# a comment\n"
      "drained\tgpu=0\tsince=5\n"
      "exploded\tgpu=1\tsince=5\n"             // unknown kind
      "drained\tsince=5\n"                     // no gpu
      "drained\tgpu=2\tsince=soon\n"           // not a number
      "drained\tgpu=3\tsince=5\treason=%zz\n"  // bad escape
      "drained\tgpu=4\tsince=6\tfuture=yes\n"  // an unknown key is kept
      "\n";
  const auto parsed = parseHealth(text);
  ASSERT_EQ(parsed.records.size(), 2u);
  EXPECT_EQ(parsed.records[1].extra, std::vector<std::string>{"future=yes"});
  ASSERT_EQ(parsed.junk.size(), 4u);
  EXPECT_EQ(parsed.junk[0].lineNumber, 3u);
  EXPECT_EQ(parsed.junk[0].text, "exploded\tgpu=1\tsince=5");
  const std::string written = formatHealth(parsed);
  for (const auto& junk : parsed.junk) {
    EXPECT_NE(written.find(junk.text + "\n"), std::string::npos) << written;
  }
  EXPECT_NE(written.find("drained\tgpu=4\tsince=6\tfuture=yes\n"), std::string::npos) << written;
  EXPECT_EQ(parseHealth(written).records, parsed.records);
}

TEST(HealthRecordsTest, TheUuidDecidesOverTheIndex) {
  const HealthRecord record = xidRecord();
  EXPECT_TRUE(names(record, "1", record.uuid));
  EXPECT_TRUE(names(record, "1", std::nullopt));
  // Index 1 of another numbering (a container) is another GPU.
  EXPECT_FALSE(names(record, "1", std::string("GPU-22222222-2222-4222-8222-222222222222")));
  // The same GPU under another index.
  EXPECT_TRUE(names(record, "0", record.uuid));
  EXPECT_FALSE(names(record, "0", std::nullopt));
  HealthRecord mig;
  mig.kind = RecordKind::kUnhealthy;
  mig.gpu = "MIG-aa000000-0000-4000-8000-000000000001";
  EXPECT_TRUE(names(mig, mig.gpu, mig.gpu));
  EXPECT_FALSE(names(mig, "1", record.uuid));
}

TEST(HealthRecordsTest, ARecordWrittenByHandNamesItsGpuAsAllocatorsDo) {
  // "01" is GPU 1, and a UUID in upper case is the same GPU: what `check` calls drained, no
  // allocator may hand out.
  HealthRecord byIndex;
  byIndex.gpu = "01";
  EXPECT_TRUE(names(byIndex, "1", std::nullopt));
  EXPECT_FALSE(names(byIndex, "10", std::nullopt));
  HealthRecord byUuid;
  byUuid.gpu = "GPU-AB000000-0000-4000-8000-00000000000C";
  EXPECT_TRUE(names(byUuid, "3", std::string("GPU-ab000000-0000-4000-8000-00000000000c")));
  HealthRecord withUuid;
  withUuid.gpu = "3";
  withUuid.uuid = "GPU-AB000000-0000-4000-8000-00000000000C";
  EXPECT_TRUE(names(withUuid, "3", std::string("GPU-ab000000-0000-4000-8000-00000000000c")));
}

}  // namespace
