// Files in words: why a path cannot be opened, when a folder on its way is to blame.
#include "util/FileOwnership.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

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

}  // namespace
}  // namespace flink::files
