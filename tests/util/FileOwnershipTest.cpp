// Files in words: why a path cannot be opened, when a folder on its way is to blame; who else
// could replace what this user makes in a folder.
#include "util/FileOwnership.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "TestSupport.h"

namespace flink::files {
namespace {

namespace fs = std::filesystem;

TEST(FileOwnershipTest, AMissingFolderIsNamed) {
  testing::TempDir dir("flink-gpu-file-words");
  EXPECT_EQ(whyCannotOpen(dir.path() / "nodir/file", ENOENT),
            "the folder " + (dir.path() / "nodir").string() + " does not exist");
  EXPECT_EQ(whyCannotOpen(dir.path() / "a/b/file", ENOENT),
            "the folder " + (dir.path() / "a/b").string() + " does not exist");
}

TEST(FileOwnershipTest, AFileWhereAFolderShouldBeIsNamed) {
  testing::TempDir dir("flink-gpu-file-words");
  std::ofstream(dir.path() / "plain") << "x\n";
  EXPECT_EQ(whyCannotOpen(dir.path() / "plain/file", ENOTDIR),
            (dir.path() / "plain").string() + " is not a folder: it is a regular file");
  EXPECT_EQ(whyCannotOpen(dir.path() / "plain/deeper/file", ENOTDIR),
            (dir.path() / "plain").string() + " is not a folder: it is a regular file");
}

TEST(FileOwnershipTest, OtherwiseTheErrorItself) {
  testing::TempDir dir("flink-gpu-file-words");
  // The folder is there: the file itself is missing.
  EXPECT_EQ(whyCannotOpen(dir.path() / "file", ENOENT), std::strerror(ENOENT));
  EXPECT_EQ(whyCannotOpen(dir.path() / "file", EACCES), std::strerror(EACCES));
  EXPECT_EQ(whyCannotOpen("file", ENOENT), std::strerror(ENOENT));  // "." is there
}

/// The stat of a folder of `owner` with `mode`.
struct stat folderOf(uid_t owner, mode_t mode) {
  struct stat info {};
  info.st_mode = S_IFDIR | mode;
  info.st_uid = owner;
  return info;
}

TEST(FileOwnershipTest, OnlyThisUserAndRootControlAFolderThatOthersMayWriteOnlyWhenSticky) {
  const uid_t me = ::geteuid();
  const uid_t other = me == 1000 ? 1001 : 1000;
  for (const struct stat& safe : {folderOf(me, 0700), folderOf(me, 0755), folderOf(0, 01777),
                                  folderOf(me, 01777), folderOf(0, 01770), folderOf(0, 0755)}) {
    EXPECT_EQ(whyOthersMayReplaceIn(safe), std::nullopt) << modeText(safe.st_mode);
  }
  EXPECT_THAT(whyOthersMayReplaceIn(folderOf(me, 0777)),
              ::testing::Optional(::testing::HasSubstr("anyone may write it and it lacks the "
                                                       "sticky bit")));
  EXPECT_THAT(
      whyOthersMayReplaceIn(folderOf(0, 0775)),
      ::testing::Optional(::testing::HasSubstr("may write it and it lacks the sticky bit")));
  // Another user's, even private to them or sticky: they may rename anything in it.
  for (const mode_t mode : {mode_t{0700}, mode_t{01777}}) {
    EXPECT_THAT(whyOthersMayReplaceIn(folderOf(other, mode)),
                ::testing::Optional(::testing::HasSubstr("is neither this user nor root")));
  }
  struct stat link = folderOf(me, 0777);
  link.st_mode = S_IFLNK | 0777;
  EXPECT_EQ(whyOthersMayReplaceIn(link), "it is a symbolic link, not a folder");
}

/// A folder `name` in `parent` with `mode`.
fs::path folderIn(const fs::path& parent, const std::string& name, mode_t mode) {
  const fs::path folder = parent / name;
  fs::create_directory(folder);
  EXPECT_EQ(::chmod(folder.c_str(), mode), 0) << folder;
  return folder;
}

/// What openFolderOthersMayNotReplace says of `folder`, its descriptor closed; ok when the
/// descriptor it gave is the folder's.
struct Walked {
  std::optional<std::string> why;
  fs::path where;
  bool opened = false;
  int error = 0;
  bool ok = false;
};
Walked walk(const fs::path& folder,
            std::optional<std::string> (*rule)(const struct stat&) = whyOthersMayReplaceIn) {
  const FolderOnPath result = openFolderOthersMayNotReplace(folder, rule);
  Walked walked{result.why, result.where, result.opened, result.error, false};
  if (result.fd >= 0) {
    struct stat byFd {};
    struct stat byPath {};
    walked.ok = ::fstat(result.fd, &byFd) == 0 && ::stat(folder.c_str(), &byPath) == 0 &&
                byFd.st_ino == byPath.st_ino && byFd.st_dev == byPath.st_dev && !result.why;
    ::close(result.fd);
  }
  return walked;
}

TEST(FileOwnershipTest, AFolderIsOpenedWhenNoFolderOnItsPathMayBeReplacedByOthers) {
  testing::TempDir dir("flink-gpu-file-words");
  const fs::path sticky = folderIn(dir.path(), "sticky", 01777);
  const fs::path deep = folderIn(folderIn(sticky, "a", 0755), "b", 0700);
  for (const fs::path& folder : {deep, sticky / "a/./b/", sticky / "a/../a/b", fs::path("/")}) {
    const Walked walked = walk(folder);
    EXPECT_TRUE(walked.ok) << folder << ": " << walked.why.value_or("");
    EXPECT_EQ(walked.why, std::nullopt) << folder;
    EXPECT_EQ(walked.error, 0) << folder;
  }
  EXPECT_EQ(walk(deep).where, deep);
  // The folder's own rule is the caller's; those above it are judged by whyOthersMayReplaceIn.
  const auto never = +[](const struct stat&) -> std::optional<std::string> { return "never"; };
  EXPECT_EQ(walk(deep, never).why, "never");
  EXPECT_EQ(walk(deep, never).where, deep);
}

TEST(FileOwnershipTest, AFolderBelowOneThatOthersMayReplaceItInIsRefusedAndThatOneNamed) {
  testing::TempDir dir("flink-gpu-file-words");
  const fs::path open = folderIn(dir.path(), "open", 0777);
  const fs::path below = folderIn(folderIn(open, "a", 0755), "b", 0755);
  const Walked walked = walk(below);
  EXPECT_FALSE(walked.ok);
  EXPECT_EQ(walked.where, open);
  EXPECT_TRUE(walked.opened);
  EXPECT_THAT(walked.why, ::testing::Optional(::testing::StartsWith(
                              open.string() + " on its path: anyone may write it and it lacks "
                                              "the sticky bit")));
  // The folder itself is said without its name.
  EXPECT_THAT(walk(open).why, ::testing::Optional(::testing::StartsWith("anyone may write it")));

  // A symbolic link on the path, even to a folder that would do, is not followed.
  const fs::path fine = folderIn(folderIn(dir.path(), "fine", 0755), "a", 0755);
  fs::create_directory_symlink(dir.path() / "fine", dir.path() / "link");
  const Walked linked = walk(dir.path() / "link/a");
  EXPECT_FALSE(linked.ok);
  EXPECT_EQ(linked.where, dir.path() / "link");
  EXPECT_FALSE(linked.opened);
  EXPECT_THAT(linked.error, ::testing::AnyOf(ELOOP, ENOTDIR));  // O_DIRECTORY: ENOTDIR on Linux
  EXPECT_EQ(linked.why,
            (dir.path() / "link").string() + " on its path: it is a symbolic link, not a folder");
  EXPECT_EQ(walk(dir.path() / "link").why, "it is a symbolic link, not a folder");
  EXPECT_TRUE(walk(fine).ok);

  // Missing, a file on the way, relative.
  EXPECT_EQ(walk(dir.path() / "missing/a").error, ENOENT);
  EXPECT_EQ(walk(dir.path() / "missing/a").where, dir.path() / "missing");
  std::ofstream(dir.path() / "plain") << "x\n";
  EXPECT_EQ(walk(dir.path() / "plain/a").why,
            (dir.path() / "plain").string() + " on its path: it is a regular file, not a folder");
  EXPECT_EQ(walk("relative").why, "it is not an absolute path");
}

TEST(FileOwnershipTest, AFolderBelowOneOfAnotherUserIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to give a folder to another user";
  testing::TempDir dir("flink-gpu-file-words");
  const fs::path theirs = folderIn(dir.path(), "theirs", 0755);
  const fs::path below = folderIn(theirs, "a", 0755);
  ASSERT_EQ(::chown(theirs.c_str(), 65534, 65534), 0);
  const Walked walked = walk(below);
  EXPECT_FALSE(walked.ok);
  EXPECT_EQ(walked.where, theirs);
  EXPECT_THAT(walked.why, ::testing::Optional(::testing::MatchesRegex(
                              ".* on its path: its owner .* is neither this user nor root")));
}

}  // namespace
}  // namespace flink::files
