// Atomic output: nothing appears under the final name until commit, and an abandoned or failed
// write leaves no file at all.
#include <gtest/gtest.h>

#include <filesystem>

#include "nibble/io/binary_file.hpp"
#include "temp_dir.hpp"

using namespace nibble::io;
using nibble::io::testing::TempDir;

TEST(StagedFile, CommitRenamesIntoPlace) {
  TempDir dir;
  const std::vector<uint8_t> bytes = {7, 1, 9, 200};
  StagedFile f(dir / "out.bin");
  f.write(bytes);
  EXPECT_FALSE(std::filesystem::exists(dir / "out.bin"));
  EXPECT_TRUE(std::filesystem::exists(f.temp_path()));
  EXPECT_NE(f.temp_path().string().find("out.bin.tmp-"), std::string::npos);
  f.commit();
  EXPECT_EQ(read_whole_file(dir / "out.bin"), bytes);
  EXPECT_EQ(dir.entries(), 1u);
}

TEST(StagedFile, AbandonedWriteLeavesNothing) {
  TempDir dir;
  {
    StagedFile f(dir / "out.bin");
    f.write(std::vector<uint8_t>{1, 2, 3});
  }
  EXPECT_EQ(dir.entries(), 0u);
}

TEST(StagedFile, MissingDirectoryFailsCleanly) {
  TempDir dir;
  EXPECT_THROW(write_file_atomic(dir / "no" / "such" / "dir.bin", std::vector<uint8_t>{1}), std::runtime_error);
  EXPECT_EQ(dir.entries(), 0u);
}

TEST(BinaryFile, RangeChecks) {
  TempDir dir;
  write_file_atomic(dir / "f.bin", std::vector<uint8_t>{1, 2, 3, 4, 5});
  EXPECT_EQ(read_file_range(dir / "f.bin", 1, 3), (std::vector<uint8_t>{2, 3, 4}));
  EXPECT_THROW(read_file_range(dir / "f.bin", 3, 3), std::runtime_error);
  EXPECT_THROW(read_file_range(dir / "f.bin", UINT64_MAX, 2), std::runtime_error);
  EXPECT_THROW(file_size_of(dir.path()), std::runtime_error);  // a directory is not a tensor file
}
