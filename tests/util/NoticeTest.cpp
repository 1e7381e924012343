// A Notice's line: the one place the "note: " and "warning: " prefixes are written.
#include "util/Notice.h"

#include <gtest/gtest.h>

namespace flink {
namespace {

TEST(NoticeTest, EachKindHasItsPrefix) {
  EXPECT_EQ(Notice::note("ignoring unknown argument '--x'").line(),
            "note: ignoring unknown argument '--x'");
  EXPECT_EQ(
      Notice::warning("nvidia-smi exited with code 14 but listed 2 GPU(s); using them").line(),
      "warning: nvidia-smi exited with code 14 but listed 2 GPU(s); using them");
  EXPECT_EQ(Notice::detail("nvidia-smi: WARNING: infoROM is corrupted").line(),
            "nvidia-smi: WARNING: infoROM is corrupted");
}

TEST(NoticeTest, AGpuLeftOutIsPrintedAsAWarningAndKnownByItsKind) {
  const Notice lost = Notice::gpuLeftOut("NVML: GPU 1 left out: GPU is lost");
  EXPECT_EQ(lost.line(), "warning: NVML: GPU 1 left out: GPU is lost");
  EXPECT_EQ(lost.kind, Notice::Kind::kGpuLeftOut);
  EXPECT_NE(lost, Notice::warning("NVML: GPU 1 left out: GPU is lost"));
}

TEST(NoticeTest, LinesOfKeepsTheOrder) {
  EXPECT_EQ(linesOf({Notice::detail("a"), Notice::note("b"), Notice::warning("c")}),
            (std::vector<std::string>{"a", "note: b", "warning: c"}));
  EXPECT_TRUE(linesOf({}).empty());
}

}  // namespace
}  // namespace flink
