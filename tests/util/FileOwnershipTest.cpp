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

}  // namespace
}  // namespace flink::files
