// The allocation file exec gives its command: its text, read back; the folders it trusts (those
// it reads in, those it makes its folder in); the private folder made for it, its modes, and what
// goes when the command has ended, also when the folder was swapped for another meanwhile.
#include "host/defaultdiscovery/AllocationFile.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "TestSupport.h"

namespace flink::defaultdiscovery {
namespace {

namespace fs = std::filesystem;
using flink::testing::readFile;
using flink::testing::TempDir;

mode_t modeOf(const fs::path& path) {
  struct stat info {};
  EXPECT_EQ(::lstat(path.c_str(), &info), 0) << path;
  return info.st_mode & 07777;
}

/// A folder `name` in `dir` with `mode`.
fs::path folderWithMode(const TempDir& dir, const std::string& name, mode_t mode) {
  const fs::path folder = dir / name;
  fs::create_directory(folder);
  EXPECT_EQ(::chmod(folder.c_str(), mode), 0);
  return folder;
}

void write(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

std::vector<fs::path> pathsOf(const std::vector<AllocationFolderBase>& bases) {
  std::vector<fs::path> paths;
  for (const AllocationFolderBase& base : bases) paths.push_back(base.path);
  return paths;
}

/// Bases of no variable, judged as /tmp is.
std::vector<AllocationFolderBase> shared(const std::vector<fs::path>& paths) {
  std::vector<AllocationFolderBase> bases;
  for (const fs::path& path : paths) {
    bases.push_back({.path = path, .variable = "", .privateOnly = false});
  }
  return bases;
}

/// Two units: a whole GPU of which everything is known, and an MPS share of a GPU of unknown
/// memory and name.
Allocation twoUnits() {
  Allocation allocation;
  allocation.ownerPid = 4242;
  allocation.units.push_back(AllocatedUnit{.index = "0",
                                           .uuid = "GPU-a0000000-1111-4222-8333-444400000000",
                                           .pciBusId = "00000000:19:00.0",
                                           .name = "NVIDIA H200",
                                           .memoryTotalMiB = 143771,
                                           .share = std::nullopt});
  allocation.units.push_back(
      AllocatedUnit{.index = "1",
                    .uuid = "GPU-a0000001-1111-4222-8333-444400000001",
                    .pciBusId = "00000000:3B:00.0",
                    .name = std::nullopt,
                    .memoryTotalMiB = std::nullopt,
                    .share = AllocatedShare{.index = 2,
                                            .count = 3,
                                            .memoryMiB = std::nullopt,
                                            .mpsPipeDirectory = "/run/mps",
                                            .mpsActiveThreadPercentage = 33}});
  allocation.cpus = std::vector<unsigned>{0, 1, 2, 3};
  return allocation;
}

TEST(AllocationFileTest, TheTextHasTheDocumentedMembersInOrderAndNullForWhatIsUnknown) {
  EXPECT_EQ(allocationText(twoUnits()), R"({
  "format": 1,
  "owner_pid": 4242,
  "units": [
    {
      "index": "0",
      "uuid": "GPU-a0000000-1111-4222-8333-444400000000",
      "pci.bus_id": "00000000:19:00.0",
      "name": "NVIDIA H200",
      "memory.total": 143771
    },
    {
      "index": "1",
      "uuid": "GPU-a0000001-1111-4222-8333-444400000001",
      "pci.bus_id": "00000000:3B:00.0",
      "name": null,
      "memory.total": null,
      "share": {
        "index": 2,
        "count": 3,
        "memory_mib": null,
        "mps_pipe_directory": "/run/mps",
        "mps_active_thread_percentage": 33
      }
    }
  ],
  "cpus": [
    0,
    1,
    2,
    3
  ]
}
)");
  Allocation unbound;
  unbound.ownerPid = 7;
  EXPECT_EQ(allocationText(unbound),
            "{\n  \"format\": 1,\n  \"owner_pid\": 7,\n  \"units\": [],\n  \"cpus\": null\n}\n");
}

TEST(AllocationFileTest, TheTextReadsBackAndWhatIsNoAllocationFileDoesNot) {
  EXPECT_EQ(parseAllocationText(allocationText(twoUnits())), twoUnits());
  Allocation unbound;
  unbound.ownerPid = 7;
  AllocatedUnit unknown;
  unknown.index = "0";
  unbound.units.push_back(unknown);
  EXPECT_EQ(parseAllocationText(allocationText(unbound)), unbound);
  // Members a later writer adds are ignored.
  EXPECT_EQ(parseAllocationText(R"({"format":1,"owner_pid":7,"units":[{"index":"0","new":1}],)"
                                R"("cpus":null,"more":[]})"),
            unbound);
  for (const char* text :
       {"", "not json", "[]", R"({"format":2,"owner_pid":7,"units":[],"cpus":null})",
        R"({"owner_pid":7,"units":[],"cpus":null})", R"({"format":1,"units":[],"cpus":null})",
        R"({"format":1,"owner_pid":-7,"units":[],"cpus":null})",
        R"({"format":1,"owner_pid":7,"units":{},"cpus":null})",
        R"({"format":1,"owner_pid":7,"units":[{"index":0}],"cpus":null})",
        R"({"format":1,"owner_pid":7,"units":[{"index":"0","uuid":5}],"cpus":null})",
        R"({"format":1,"owner_pid":7,"units":[{"index":"0","share":{"index":1}}],"cpus":null})",
        R"({"format":1,"owner_pid":7,"units":[],"cpus":["0"]})"}) {
    EXPECT_EQ(parseAllocationText(text), std::nullopt) << text;
  }
}

TEST(AllocationFileTest, OnlyThisUsersFoldersOfMode0700ArePrivate) {
  const TempDir dir("allocation-file");
  EXPECT_EQ(whyNotPrivateFolder(folderWithMode(dir, "private", 0700)), std::nullopt);
  EXPECT_THAT(whyNotPrivateFolder(folderWithMode(dir, "shared", 0755)),
              ::testing::Optional(::testing::HasSubstr("mode 0755")));
  EXPECT_THAT(whyNotPrivateFolder(folderWithMode(dir, "sticky", 01700)),
              ::testing::Optional(::testing::HasSubstr("mode 1700")));
  // A symlink to a private folder is not one: the link is what a path names.
  fs::create_directory_symlink(dir / "private", dir / "link");
  EXPECT_THAT(whyNotPrivateFolder(dir / "link"),
              ::testing::Optional(::testing::HasSubstr("a symbolic link")));
  write(dir / "file", "x");
  EXPECT_THAT(whyNotPrivateFolder(dir / "file"),
              ::testing::Optional(::testing::HasSubstr("a regular file")));
  EXPECT_NE(whyNotPrivateFolder(dir / "missing"), std::nullopt);
  if (::geteuid() != 0) {
    EXPECT_THAT(whyNotPrivateFolder("/"), ::testing::Optional(::testing::HasSubstr("owner")));
  }
}

TEST(AllocationFileTest, TheBasesAreTheRuntimeFolderTmpdirAndTmpEachWithItsRule) {
  const TempDir dir("allocation-file");
  const std::string runtime = (dir / "runtime").string();
  const std::string tmp = (dir / "tmp").string();
  EXPECT_EQ(allocationFolderBases(runtime.c_str(), tmp.c_str()),
            (std::vector<AllocationFolderBase>{
                {.path = runtime, .variable = "XDG_RUNTIME_DIR", .privateOnly = true},
                {.path = tmp, .variable = "TMPDIR", .privateOnly = false},
                {.path = "/tmp", .variable = "", .privateOnly = false}}));
  EXPECT_EQ(pathsOf(allocationFolderBases(nullptr, nullptr)), std::vector<fs::path>{"/tmp"});
  EXPECT_EQ(pathsOf(allocationFolderBases("", "")), std::vector<fs::path>{"/tmp"});
  EXPECT_EQ(pathsOf(allocationFolderBases("relative", "relative")), std::vector<fs::path>{"/tmp"});
  EXPECT_EQ(pathsOf(allocationFolderBases(nullptr, "/tmp")), std::vector<fs::path>{"/tmp"});
}

TEST(AllocationFileTest, TheFolderGoesInTheUsersRuntimeFolderOnlyWhenPrivate) {
  const TempDir dir("allocation-file");
  const fs::path runtime = folderWithMode(dir, "runtime", 0700);
  const fs::path tmp = folderWithMode(dir, "tmp", 0755);
  std::vector<std::string> warnings;
  {
    const AllocationFile file = AllocationFile::inNewFolder(
        allocationFolderBases(runtime.c_str(), tmp.c_str()), "{}\n", warnings);
    EXPECT_EQ(file.path().parent_path().parent_path(), runtime);
  }
  EXPECT_TRUE(fs::is_empty(runtime));
  // One that others may enter is passed over without a word: another user's, after su, is usual.
  ASSERT_EQ(::chmod(runtime.c_str(), 0755), 0);
  {
    const AllocationFile file = AllocationFile::inNewFolder(
        allocationFolderBases(runtime.c_str(), tmp.c_str()), "{}\n", warnings);
    EXPECT_EQ(file.path().parent_path().parent_path(), tmp);
  }
  EXPECT_TRUE(fs::is_empty(runtime));
  EXPECT_TRUE(fs::is_empty(tmp));
  EXPECT_EQ(warnings, std::vector<std::string>{});
}

/// Where inNewFolder makes the folder with $TMPDIR `tmpDir` (no runtime folder), the warnings it
/// gives, and that the folder goes with the file.
std::pair<fs::path, std::vector<std::string>> baseChosenFor(const fs::path& tmpDir) {
  std::vector<std::string> warnings;
  AllocationFile file =
      AllocationFile::inNewFolder(allocationFolderBases(nullptr, tmpDir.c_str()), "{}\n", warnings);
  const fs::path folder = file.path().parent_path();
  EXPECT_EQ(file.remove(), std::vector<std::string>{});
  EXPECT_FALSE(fs::exists(folder)) << folder;
  return {folder.parent_path(), warnings};
}

TEST(AllocationFileTest, ATmpdirThatOthersMayReplaceTheFolderInIsPassedOverForTmp) {
  const TempDir dir("allocation-file");
  // Sticky, as /tmp: others may write it, but rename only what is theirs.
  const fs::path sticky = folderWithMode(dir, "sticky", 01777);
  EXPECT_EQ(baseChosenFor(sticky), std::make_pair(sticky, std::vector<std::string>{}));
  // Anyone, or its group, may rename the folder away and put theirs in its place.
  for (const mode_t mode : {mode_t{0777}, mode_t{0775}}) {
    const fs::path open = folderWithMode(dir, "open-" + std::to_string(mode), mode);
    const auto [base, warnings] = baseChosenFor(open);
    EXPECT_EQ(base, "/tmp");
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_THAT(warnings[0], ::testing::StartsWith("TMPDIR " + open.string() +
                                                   " is not used for the allocation file: "));
    EXPECT_THAT(warnings[0], ::testing::HasSubstr("may write it and it lacks the sticky bit"));
    EXPECT_THAT(warnings[0], ::testing::HasSubstr("mode 07"));
    EXPECT_TRUE(fs::is_empty(open));
  }
  // A symlink, even to a folder that would do, is not followed.
  fs::create_directory_symlink(sticky, dir / "link");
  const auto [base, warnings] = baseChosenFor(dir / "link");
  EXPECT_EQ(base, "/tmp");
  EXPECT_THAT(warnings, ::testing::ElementsAre(::testing::HasSubstr("a symbolic link")));
  // One that is missing is no one's to judge: passed over without a word.
  EXPECT_EQ(baseChosenFor(dir / "missing"),
            std::make_pair(fs::path("/tmp"), std::vector<std::string>{}));
}

TEST(AllocationFileTest, ATmpdirOfAnotherUserIsPassedOverForTmp) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to give a folder to another user";
  const TempDir dir("allocation-file");
  // Even private to that user, or sticky: its owner may rename anything in it.
  for (const mode_t mode : {mode_t{0700}, mode_t{01777}}) {
    const fs::path theirs = folderWithMode(dir, "theirs-" + std::to_string(mode), mode);
    ASSERT_EQ(::chown(theirs.c_str(), 65534, 65534), 0);
    const auto [base, warnings] = baseChosenFor(theirs);
    EXPECT_EQ(base, "/tmp");
    EXPECT_THAT(warnings,
                ::testing::ElementsAre(::testing::HasSubstr("is neither this user nor root")));
    EXPECT_TRUE(fs::is_empty(theirs));
  }
  // Root's is root's own.
  const fs::path roots = folderWithMode(dir, "roots", 0755);
  EXPECT_EQ(baseChosenFor(roots), std::make_pair(roots, std::vector<std::string>{}));
}

TEST(AllocationFileTest, ATmpdirBelowAFolderThatOthersMayReplaceItInIsPassedOverForTmp) {
  const TempDir dir("allocation-file");
  // Whoever may rename a folder above $TMPDIR away may put a path of theirs in its place, with a
  // folder at exec's folder's name and a forged file in it: the base itself being root's or this
  // user's, 0755, is not enough.
  const fs::path open = folderWithMode(dir, "open", 0777);
  const fs::path below = open / "sub";
  fs::create_directory(below);
  ASSERT_EQ(::chmod(below.c_str(), 0755), 0);
  const auto [base, warnings] = baseChosenFor(below);
  EXPECT_EQ(base, "/tmp");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(
      warnings[0],
      ::testing::MatchesRegex("TMPDIR " + below.string() +
                              " is not used for the allocation "
                              "file: " +
                              open.string() +
                              " on its path: anyone may write it and "
                              "it lacks the sticky bit, so others may rename what is made in it "
                              "and put something else in its place \\(owner [^\n]*, mode 0777\\)"));
  EXPECT_TRUE(fs::is_empty(below));

  // A symlink in the middle of the path, even to a folder that would do, is not followed.
  const fs::path sticky = folderWithMode(dir, "sticky", 01777);
  fs::create_directory(sticky / "sub");
  fs::create_directory_symlink(sticky, dir / "link");
  const auto [linkBase, linkWarnings] = baseChosenFor(dir / "link" / "sub");
  EXPECT_EQ(linkBase, "/tmp");
  EXPECT_EQ(linkWarnings, std::vector<std::string>{
                              "TMPDIR " + (dir / "link" / "sub").string() +
                              " is not used for the allocation file: " + (dir / "link").string() +
                              " on its path: it is a symbolic link, not a folder"});
  EXPECT_TRUE(fs::is_empty(sticky / "sub"));

  // Below a sticky one, as /tmp: others may rename only what is theirs. Used.
  EXPECT_EQ(baseChosenFor(sticky / "sub"),
            std::make_pair(sticky / "sub", std::vector<std::string>{}));
  // Below a missing one: no one's to judge, passed over without a word.
  EXPECT_EQ(baseChosenFor(dir / "missing" / "sub"),
            std::make_pair(fs::path("/tmp"), std::vector<std::string>{}));
}

TEST(AllocationFileTest, ATmpdirBelowAFolderOfAnotherUserIsPassedOverForTmp) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to give a folder to another user";
  const TempDir dir("allocation-file");
  const fs::path theirs = folderWithMode(dir, "theirs", 0755);
  const fs::path below = theirs / "sub";
  fs::create_directory(below);
  ASSERT_EQ(::chmod(below.c_str(), 0755), 0);
  ASSERT_EQ(::chown(theirs.c_str(), 65534, 65534), 0);
  const auto [base, warnings] = baseChosenFor(below);
  EXPECT_EQ(base, "/tmp");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], ::testing::StartsWith("TMPDIR " + below.string() +
                                                 " is not used for the allocation file: " +
                                                 theirs.string() + " on its path: its owner "));
  EXPECT_THAT(warnings[0], ::testing::HasSubstr("is neither this user nor root (owner "));
  EXPECT_THAT(warnings[0], ::testing::EndsWith(", mode 0755)"));
  EXPECT_TRUE(fs::is_empty(below));
  // The runtime folder's ancestors are judged the same, and it is passed over without a word.
  const fs::path runtime = theirs / "runtime";
  fs::create_directory(runtime);
  ASSERT_EQ(::chmod(runtime.c_str(), 0700), 0);
  std::vector<std::string> quiet;
  const AllocationFile file =
      AllocationFile::inNewFolder(allocationFolderBases(runtime.c_str(), nullptr), "{}\n", quiet);
  EXPECT_EQ(file.path().parent_path().parent_path(), "/tmp");
  EXPECT_EQ(quiet, std::vector<std::string>{});
  EXPECT_TRUE(fs::is_empty(runtime));
}

TEST(AllocationFileTest, AFolderSwappedDuringTheCommandIsEmptiedAndTheImpostorLeftAlone) {
  const TempDir dir("allocation-file");
  const fs::path sticky = folderWithMode(dir, "sticky", 01777);
  std::vector<std::string> warnings;
  AllocationFile file = AllocationFile::inNewFolder(shared({sticky}), "{}\n", warnings);
  const fs::path folder = file.path().parent_path();
  const AllocationFile nested = AllocationFile::besideEnclosing(file.path(), "{}\n");
  fs::create_directory(folder / "made-by-the-command");
  write(folder / "made-by-the-command" / "x", "x");
  // The folder renamed away, another put at its name with a file of its own.
  fs::rename(folder, dir / "moved");
  fs::create_directory(folder);
  write(folder / "allocation.json", "forged");
  const std::vector<std::string> left = file.remove();
  ASSERT_EQ(left.size(), 1u);
  EXPECT_THAT(left[0], ::testing::StartsWith("the allocation file's folder " + folder.string() +
                                             " was replaced during the command by a directory"));
  EXPECT_EQ(readFile(folder / "allocation.json"), "forged");
  EXPECT_TRUE(fs::is_empty(dir / "moved"));

  // Moved away, nothing in its place: emptied, and said.
  AllocationFile moved = AllocationFile::inNewFolder(shared({sticky}), "{}\n", warnings);
  const fs::path away = dir / "away";
  fs::rename(moved.path().parent_path(), away);
  EXPECT_THAT(moved.remove(), ::testing::ElementsAre(::testing::HasSubstr("was moved away")));
  EXPECT_TRUE(fs::is_empty(away));
  EXPECT_EQ(warnings, std::vector<std::string>{});
}

TEST(AllocationFileTest, ANewFolderIs0700ItsFile0600AndBothGoWithEverythingInThem) {
  const TempDir dir("allocation-file");
  ::mode_t previous = ::umask(0);  // mode 0700 and 0600 whatever the umask
  std::vector<std::string> warnings;
  AllocationFile file = AllocationFile::inNewFolder(shared({dir / "missing", dir.path()}),
                                                    allocationText(twoUnits()), warnings);
  ::umask(previous);
  const fs::path folder = file.path().parent_path();
  EXPECT_EQ(folder.parent_path(), dir.path());
  EXPECT_THAT(folder.filename().string(), ::testing::StartsWith("flink-gpu-exec."));
  EXPECT_EQ(file.path().filename(), "allocation.json");
  EXPECT_EQ(modeOf(folder), 0700u);
  EXPECT_EQ(modeOf(file.path()), 0600u);
  EXPECT_EQ(readFile(file.path()), allocationText(twoUnits()));
  EXPECT_EQ(readAllocationFile(file.path()), twoUnits());

  // A nested exec's file beside it: removed alone by its own owner, and with the folder.
  {
    AllocationFile nested = AllocationFile::besideEnclosing(file.path(), "{}\n");
    EXPECT_EQ(nested.path().parent_path(), folder);
    EXPECT_THAT(nested.path().filename().string(), ::testing::MatchesRegex("allocation-.*\\.json"));
    EXPECT_EQ(modeOf(nested.path()), 0600u);
    EXPECT_EQ(readFile(nested.path()), "{}\n");
    const fs::path path = nested.path();
    nested.remove();
    EXPECT_FALSE(fs::exists(path));
    EXPECT_TRUE(fs::exists(file.path()));
  }
  const AllocationFile left = AllocationFile::besideEnclosing(file.path(), "{}\n");
  fs::create_directory(folder / "made-by-the-command");
  write(folder / "made-by-the-command" / "x", "x");

  AllocationFile moved = std::move(file);
  EXPECT_TRUE(file.path().empty());  // NOLINT(bugprone-use-after-move): what a move leaves
  file.remove();
  EXPECT_TRUE(fs::exists(moved.path()));
  moved.remove();
  EXPECT_FALSE(fs::exists(folder));
  EXPECT_TRUE(moved.path().empty());
}

TEST(AllocationFileTest, NoFolderThatTakesOneIsAnErrorNamingThemAll) {
  const TempDir dir("allocation-file");
  try {
    std::vector<std::string> warnings;
    AllocationFile::inNewFolder(shared({dir / "a", dir / "b"}), "{}\n", warnings);
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr((dir / "a").string() + ": No such file"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr((dir / "b").string() + ": No such file"));
  }
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(AllocationFileTest, ANestedFileGoesOnlyIntoAPrivateFolder) {
  const TempDir dir("allocation-file");
  const fs::path open = folderWithMode(dir, "open", 0755);
  write(open / "allocation.json", allocationText(twoUnits()));
  EXPECT_THROW(AllocationFile::besideEnclosing(open / "allocation.json", "{}\n"),
               std::runtime_error);
  EXPECT_THROW(AllocationFile::besideEnclosing("relative/allocation.json", "{}\n"),
               std::runtime_error);
  EXPECT_EQ(std::distance(fs::directory_iterator(open), fs::directory_iterator()), 1);
  // A symlink to a private folder is not followed.
  const fs::path folder = folderWithMode(dir, "private", 0700);
  write(folder / "allocation.json", allocationText(twoUnits()));
  fs::create_directory_symlink(folder, dir / "link");
  try {
    AllocationFile::besideEnclosing(dir / "link" / "allocation.json", "{}\n");
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("a symbolic link"));
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(folder), fs::directory_iterator()), 1);
}

TEST(AllocationFileTest, OnlyAFileThisUserMayTrustIsRead) {
  const TempDir dir("allocation-file");
  const std::string text = allocationText(twoUnits());
  const fs::path open = folderWithMode(dir, "open", 0755);
  write(open / "allocation.json", text);
  EXPECT_EQ(readAllocationFile(open / "allocation.json"), std::nullopt);

  const fs::path folder = folderWithMode(dir, "private", 0700);
  write(folder / "allocation.json", text);
  EXPECT_EQ(readAllocationFile(folder / "allocation.json"), twoUnits());
  // A symlink, a second link, a folder, junk, a relative path: not read.
  fs::create_symlink(folder / "allocation.json", folder / "link.json");
  EXPECT_EQ(readAllocationFile(folder / "link.json"), std::nullopt);
  fs::create_directory_symlink(folder, dir / "link");
  EXPECT_EQ(readAllocationFile(dir / "link" / "allocation.json"), std::nullopt);
  fs::create_hard_link(folder / "allocation.json", folder / "hard.json");
  EXPECT_EQ(readAllocationFile(folder / "hard.json"), std::nullopt);
  fs::create_directory(folder / "dir.json");
  EXPECT_EQ(readAllocationFile(folder / "dir.json"), std::nullopt);
  write(folder / "junk.json", "junk");
  EXPECT_EQ(readAllocationFile(folder / "junk.json"), std::nullopt);
  EXPECT_EQ(readAllocationFile(fs::relative(folder / "junk.json")), std::nullopt);
  EXPECT_EQ(readAllocationFile(folder / "missing.json"), std::nullopt);
}

}  // namespace
}  // namespace flink::defaultdiscovery
