// Whole-file and ranged reads with sizes checked before anything is allocated, and atomic writes:
// output goes to "<path>.tmp-<pid>" and is renamed into place only once complete, so a failed run
// never leaves a file that looks finished.
#pragma once
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace nibble::io {

// Size of a regular file in bytes; throws std::runtime_error naming the path if it cannot be read.
uint64_t file_size_of(const std::filesystem::path& path);

// Physical memory of this machine in bytes (sysconf), 0 when it cannot be read.
uint64_t host_memory_bytes();
// Refuses, before anything is allocated, work that needs more bytes than this machine's physical
// memory: throws std::runtime_error "<what> needs N bytes (X GiB) but this machine has Y GiB of RAM".
// No-op when the machine's memory is unknown.
void require_host_memory(uint64_t bytes, const std::string& what);

// Exactly `count` bytes at `offset`; throws std::runtime_error if the file is shorter, or (before
// allocating) if `count` is more than this machine's memory.
std::vector<uint8_t> read_file_range(const std::filesystem::path& path, uint64_t offset, uint64_t count);
std::vector<uint8_t> read_whole_file(const std::filesystem::path& path);

// One output file written atomically. write() fills "<path>.tmp-<pid>"; commit() renames it into
// place. Destroying an uncommitted StagedFile deletes the temporary, so an exception anywhere
// between staging and commit leaves no output behind. Staging several files and committing them
// together keeps a multi-output command all-or-nothing up to the renames.
class StagedFile {
 public:
  explicit StagedFile(std::filesystem::path final_path);
  StagedFile(const StagedFile&) = delete;
  StagedFile& operator=(const StagedFile&) = delete;
  StagedFile(StagedFile&& other) noexcept;
  StagedFile& operator=(StagedFile&&) = delete;
  ~StagedFile();

  void write(std::span<const uint8_t> bytes);
  void commit();
  const std::filesystem::path& final_path() const { return final_; }
  const std::filesystem::path& temp_path() const { return temp_; }

 private:
  std::filesystem::path final_;
  std::filesystem::path temp_;
  bool written_ = false;
  bool committed_ = false;
};

void write_file_atomic(const std::filesystem::path& path, std::span<const uint8_t> bytes);

}  // namespace nibble::io
