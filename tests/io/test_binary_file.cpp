// Atomic output: nothing appears under the final name until commit, and an abandoned or failed
// write leaves no file at all.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "nibble/io/tensor.hpp"

#include "nibble/io/binary_file.hpp"
#include "sparse_npy.hpp"
#include "scratch_file.hpp"

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

// A sparse file holds twice this machine's memory without using the disk: reading it must be
// refused with the numbers before any allocation (an allocation of that size would fail or be
// killed), while small reads of the same file still work.
TEST(BinaryFile, RefusesReadsLargerThanTheMachineBeforeAllocating) {
  const uint64_t ram = host_memory_bytes();
  ASSERT_GT(ram, 0u);
  const uint64_t big = 2 * ram;
  TempDir dir;
  write_file_atomic(dir / "sparse.bin", std::vector<uint8_t>{5, 6, 7, 8});
  std::filesystem::resize_file(dir / "sparse.bin", big + 64);
  try {
    (void)read_file_range(dir / "sparse.bin", 64, big);
    FAIL() << "expected a refusal";
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(std::to_string(big) + " bytes"), std::string::npos) << m;
    EXPECT_NE(m.find("GiB of RAM"), std::string::npos) << m;
    EXPECT_NE(m.find("sparse.bin"), std::string::npos) << m;
  }
  EXPECT_EQ(read_file_range(dir / "sparse.bin", 0, 4), (std::vector<uint8_t>{5, 6, 7, 8}));
  EXPECT_NO_THROW(require_host_memory(ram, "all of it"));
  EXPECT_THROW(require_host_memory(ram + 1, "one byte more"), std::runtime_error);

  // The same through the .npy reader: a valid header whose data (float32, rounded up past 2x RAM)
  // is all present in the file.
  const uint64_t n = big / 4 + 1;
  nibble::io::testing::write_sparse_f32_npy(dir / "huge.npy", n);
  try {
    (void)read_npy(dir / "huge.npy");
    FAIL() << "expected a refusal";
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(std::to_string(4 * n) + " bytes"), std::string::npos) << m;
    EXPECT_NE(m.find("GiB of RAM"), std::string::npos) << m;
  }
}
