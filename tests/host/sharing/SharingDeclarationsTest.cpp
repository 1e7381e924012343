// The sharing declarations file: what is written is read back the same, lines that are not
// declarations are kept and never applied while the valid ones beside them are, a declaration
// names its GPU by UUID before index, declaring replaces and removing takes out, a symlink is
// refused, and a reader never waits on the writers' lock.
#include "host/sharing/SharingDeclarations.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "TestSupport.h"
#include "host/store/StoreError.h"
#include "process/FileDescriptor.h"

namespace {

namespace fs = std::filesystem;
using flink::sharing::Declaration;
using flink::sharing::declarationsOf;
using flink::sharing::declare;
using flink::sharing::formatDeclaration;
using flink::sharing::formatDeclarations;
using flink::sharing::memoryPerShare;
using flink::sharing::names;
using flink::sharing::parseDeclarations;
using flink::sharing::readDeclarations;
using flink::sharing::removeDeclarations;
using flink::sharing::sharesOfMemory;
using flink::sharing::sharingPathOf;
using flink::store::StoreError;
using flink::testing::readFile;
using flink::testing::TempDir;

constexpr const char* kUuid0 = "GPU-5c3e0000-0000-4000-8000-000000000000";
constexpr const char* kUuid1 = "GPU-9d3e0000-0000-4000-8000-000000000001";

Declaration mpsDeclaration() {
  Declaration declaration;
  declaration.gpu = "1";
  declaration.uuid = kUuid1;
  declaration.replicas = 3;
  declaration.memoryPerShareMiB = 40960;
  declaration.mpsPipeDirectory = "/run/nvidia-mps-1";
  declaration.since = 1796119160;
  declaration.uid = 0;
  return declaration;
}

TEST(SharingDeclarationsTest, ADeclarationIsOneTabSeparatedLineReadBackUnchanged) {
  const Declaration declaration = mpsDeclaration();
  EXPECT_EQ(formatDeclaration(declaration),
            std::string("shared\tgpu=1\tuuid=") + kUuid1 +
                "\treplicas=3\tmemory=40960\tmps=/run/nvidia-mps-1\tsince=1796119160\tuid=0");
  const auto parsed = parseDeclarations(formatDeclaration(declaration) + "\n");
  ASSERT_EQ(parsed.declarations.size(), 1u);
  EXPECT_EQ(parsed.declarations.front(), declaration);
  EXPECT_TRUE(parsed.declarations.front().isMps());
  EXPECT_TRUE(parsed.junk.empty());
}

TEST(SharingDeclarationsTest, MemoryWhenKnownAndMpsOnlyForMps) {
  Declaration declaration;
  declaration.gpu = "0";
  declaration.replicas = 4;
  declaration.since = 5;
  EXPECT_EQ(formatDeclaration(declaration), "shared\tgpu=0\treplicas=4\tsince=5");
  EXPECT_FALSE(parseDeclarations("shared\tgpu=0\treplicas=4\tsince=5").declarations.at(0).isMps());
}

TEST(SharingDeclarationsTest, TheFileOpensWithACommentAndAPipeDirectoryIsPercentEncoded) {
  flink::sharing::ParsedDeclarations parsed;
  Declaration declaration = mpsDeclaration();
  declaration.mpsPipeDirectory = "/run/mps one 100%";
  parsed.declarations.push_back(declaration);
  const std::string text = formatDeclarations(parsed);
  EXPECT_TRUE(text.starts_with("# ")) << text;
  EXPECT_NE(text.find("\tmps=/run/mps one 100%25\t"), std::string::npos) << text;
  EXPECT_EQ(parseDeclarations(text).declarations, parsed.declarations);
  EXPECT_EQ(formatDeclarations({}), "");
  // A path is a path: one with a control character (a tab, an escape sequence) decoded from the
  // file is no declaration, and so is a gpu= that is no GPU's identifier or a uuid= no UUID.
  for (const std::string line : {"shared\tgpu=1\treplicas=4\tmps=/run/mps%09one\tsince=5",
                                 "shared\tgpu=1\treplicas=4\tmps=/run/%1B[2J\tsince=5",
                                 "shared\tgpu=1%0Afake\treplicas=4\tsince=5",
                                 "shared\tgpu=1\tuuid=caf%E9\treplicas=4\tsince=5"}) {
    const auto junk = parseDeclarations(line + "\n");
    EXPECT_TRUE(junk.declarations.empty()) << line;
    EXPECT_EQ(junk.junk.size(), 1u) << line;
  }
}

TEST(SharingDeclarationsTest, LinesThatAreNotDeclarationsAreKeptAndNeverApplied) {
  const std::string text =
      "# a comment\n"
      "shared\tgpu=0\treplicas=4\tsince=5\n"
      "exclusive\tgpu=1\treplicas=4\tsince=5\n"            // another kind
      "shared\treplicas=4\tsince=5\n"                      // no gpu
      "shared\tgpu=2\treplicas=1\tsince=5\n"               // too few
      "shared\tgpu=2\treplicas=49\tsince=5\n"              // too many
      "shared\tgpu=2\treplicas=four\tsince=5\n"            // no number
      "shared\tgpu=2\treplicas=2.5\tsince=5\n"             // not whole
      "shared\tgpu=2\tsince=5\n"                           // no replicas
      "shared\tgpu=2\treplicas=4\n"                        // no since
      "shared\tgpu=2\treplicas=4\tsince=5\tmps=run/mps\n"  // relative
      "shared\tgpu=2\treplicas=4\tsince=5\tmemory=0\n"     // no memory
      "shared\tgpu=MIG-aa00\treplicas=4\tsince=5\n"        // a MIG instance
      "shared\tgpu=2\treplicas=4\tsince=5\tmps=%zz\n"      // a bad escape
      "shared\tgpu=3\treplicas=48\tsince=6\tfuture=yes\n"  // an unknown key is kept
      "\n";
  const auto parsed = parseDeclarations(text);
  ASSERT_EQ(parsed.declarations.size(), 2u);
  EXPECT_EQ(parsed.declarations[0].gpu, "0");
  EXPECT_EQ(parsed.declarations[1].replicas, 48u);
  EXPECT_EQ(parsed.declarations[1].extra, std::vector<std::string>{"future=yes"});
  ASSERT_EQ(parsed.junk.size(), 12u);
  EXPECT_EQ(parsed.junk[0].lineNumber, 3u);
  EXPECT_EQ(parsed.junk[0].text, "exclusive\tgpu=1\treplicas=4\tsince=5");
  EXPECT_EQ(declarationsOf(parsed, flink::discovery::UnitIndex::ofIdentifiers({"0", "2"}, {}))[1],
            nullptr);
  const std::string written = formatDeclarations(parsed);
  for (const auto& junk : parsed.junk) {
    EXPECT_NE(written.find(junk.text + "\n"), std::string::npos) << written;
  }
  EXPECT_EQ(parseDeclarations(written).declarations, parsed.declarations);
}

TEST(SharingDeclarationsTest, TheUuidDecidesOverTheIndex) {
  const Declaration declaration = mpsDeclaration();
  EXPECT_TRUE(names(declaration, "1", std::string(kUuid1)));
  EXPECT_TRUE(names(declaration, "01", std::nullopt));
  // Index 1 of another numbering (a container) is another GPU.
  EXPECT_FALSE(names(declaration, "1", std::string(kUuid0)));
  // The same GPU under another index.
  EXPECT_TRUE(names(declaration, "0", std::string(kUuid1)));
  std::string upper = kUuid1;
  for (std::size_t i = 4; i < upper.size(); ++i)
    upper[i] = static_cast<char>(std::toupper(upper[i]));
  EXPECT_TRUE(names(declaration, "0", upper));
}

TEST(SharingDeclarationsTest, TheLastLineForAGpuApplies) {
  const auto parsed =
      parseDeclarations("shared\tgpu=0\treplicas=4\tsince=5\nshared\tgpu=0\treplicas=8\tsince=6\n");
  const Declaration* found =
      declarationsOf(parsed, flink::discovery::UnitIndex::ofIdentifiers({"0"}, {}))[0];
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->replicas, 8u);
}

TEST(SharingDeclarationsTest, SharesAreRoundedDownToAMiB) {
  EXPECT_EQ(memoryPerShare(143771, 4), 35942u);
  EXPECT_EQ(memoryPerShare(143771, 48), 2995u);
  EXPECT_EQ(sharesOfMemory(143771, 35942), 4u);
  EXPECT_EQ(sharesOfMemory(143771, 40960), 3u);
  EXPECT_EQ(sharesOfMemory(143771, 100000), 1u);
  EXPECT_EQ(sharesOfMemory(143771, 0), 0u);
}

class SharingFileTest : public ::testing::Test {
 protected:
  fs::path coordination() const { return dir_ / "coordination"; }
  fs::path sharing() const { return sharingPathOf(coordination()); }
  TempDir dir_{"flink-gpu-sharing-test"};
};

TEST_F(SharingFileTest, DeclaringReplacesAndRemovingTakesOut) {
  EXPECT_EQ(sharing(), dir_ / "coordination.sharing");
  EXPECT_FALSE(readDeclarations(coordination()).exists);
  EXPECT_TRUE(readDeclarations(coordination()).parsed.declarations.empty());

  Declaration first = mpsDeclaration();
  EXPECT_TRUE(declare(coordination(), first).empty());
  Declaration second = first;
  second.replicas = 8;
  second.mpsPipeDirectory.reset();
  const std::vector<Declaration> replaced = declare(coordination(), second);
  ASSERT_EQ(replaced.size(), 1u);
  EXPECT_EQ(replaced.front(), first);
  Declaration other;
  other.gpu = "0";
  other.uuid = kUuid0;
  other.replicas = 2;
  other.since = 7;
  declare(coordination(), other);

  const auto file = readDeclarations(coordination());
  EXPECT_TRUE(file.exists);
  ASSERT_EQ(file.parsed.declarations.size(), 2u);
  EXPECT_EQ(*declarationsOf(file.parsed, flink::discovery::UnitIndex::ofIdentifiers(
                                             {"1"}, {{"1", std::string(kUuid1)}}))[0],
            second);
  EXPECT_TRUE(readFile(sharing()).starts_with("# ")) << readFile(sharing());
  // Nothing is written into the coordination file.
  EXPECT_FALSE(fs::exists(coordination()));

  const std::vector<Declaration> removed =
      removeDeclarations(coordination(), std::string("0"), std::nullopt);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed.front(), other);
  EXPECT_TRUE(removeDeclarations(coordination(), std::string("5"), std::nullopt).empty());
  EXPECT_EQ(removeDeclarations(coordination(), std::nullopt, std::nullopt).size(), 1u);
  EXPECT_TRUE(readDeclarations(coordination()).parsed.declarations.empty());
}

TEST_F(SharingFileTest, StaleDeclarationsAreThoseOfGpusTheHostDoesNotHave) {
  Declaration gone = mpsDeclaration();  // GPU 1 of kUuid1, which the host below does not have
  Declaration here;
  here.gpu = "0";
  here.uuid = kUuid0;
  here.replicas = 2;
  here.since = 7;
  declare(coordination(), gone);
  declare(coordination(), here);
  flink::discovery::GpuDevice gpu0;
  gpu0.identifier = "0";
  gpu0.uuid = kUuid0;
  const auto host = flink::discovery::UnitIndex::of({gpu0});
  flink::discovery::HostCoverage whole;
  whole.cannotTell.clear();
  whole.migListed = true;
  EXPECT_TRUE(flink::sharing::isStale(gone, host, whole));
  EXPECT_FALSE(flink::sharing::isStale(here, host, whole));

  // A look that cannot tell removes nothing.
  EXPECT_TRUE(flink::sharing::removeStaleDeclarations(coordination(), host,
                                                      flink::discovery::HostCoverage{})
                  .empty());
  EXPECT_EQ(readDeclarations(coordination()).parsed.declarations.size(), 2u);
  const std::vector<Declaration> removed =
      flink::sharing::removeStaleDeclarations(coordination(), host, whole);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed.front(), gone);
  const auto left = readDeclarations(coordination()).parsed.declarations;
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left.front(), here);
}

TEST_F(SharingFileTest, JunkStaysThroughEveryChange) {
  std::ofstream(sharing()) << "# hand-written\nshared\tgpu=0\treplicas=1\tsince=5\n";
  declare(coordination(), mpsDeclaration());
  removeDeclarations(coordination(), std::nullopt, std::nullopt);
  const auto file = readDeclarations(coordination());
  EXPECT_TRUE(file.parsed.declarations.empty());
  ASSERT_EQ(file.parsed.junk.size(), 1u);
  EXPECT_EQ(file.parsed.junk.front().text, "shared\tgpu=0\treplicas=1\tsince=5");
}

TEST_F(SharingFileTest, ASymlinkIsMovedAsideAndNeverFollowed) {
  if (::geteuid() != 0) GTEST_SKIP() << "no coordination file here: only root may move it aside";
  const fs::path target = dir_ / "elsewhere";
  std::ofstream(target) << "precious\n";
  fs::create_symlink(target, sharing());
  const auto read = readDeclarations(coordination());
  EXPECT_TRUE(read.parsed.declarations.empty());
  ASSERT_EQ(read.warnings.size(), 1u);
  EXPECT_NE(read.warnings[0].find("sharing declarations " + sharing().string() +
                                  " failed the trust rules (it is a symbolic link"),
            std::string::npos)
      << read.warnings[0];
  ASSERT_EQ(flink::testing::movedAside(sharing()).size(), 1u);
  EXPECT_TRUE(fs::is_symlink(flink::testing::movedAside(sharing()).front()));
  declare(coordination(), mpsDeclaration());
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(sharing())));
  EXPECT_EQ(readFile(target), "precious\n");
}

TEST_F(SharingFileTest, AReaderNeverWaitsOnTheWritersLock) {
  declare(coordination(), mpsDeclaration());
  fs::path lock = sharing();
  lock += ".lock";
  const flink::process::FileDescriptor held(::open(lock.c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(held.valid());
  ASSERT_EQ(::flock(held.get(), LOCK_EX | LOCK_NB), 0);
  EXPECT_EQ(readDeclarations(coordination()).parsed.declarations.size(), 1u);
}

TEST_F(SharingFileTest, AFileOverTheLimitIsRefused) {
  std::ofstream(sharing()) << std::string((4 << 20) + 1, '#');
  EXPECT_THROW(readDeclarations(coordination()), flink::store::StoreError);
}

}  // namespace
