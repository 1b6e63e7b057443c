// A file with given contents (ScratchFile) or a fresh folder (TempDir) under the system temporary
// folder, removed when the object goes: for tests that hand a reader a path or check what a writer
// leaves; and a sparse .npy too large to hold (write_sparse_f32_npy). The name is unique per process and
// object (std::random_device, not the replayable test seeds: concurrent runs must not collide).
#pragma once
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

namespace nibble::testing {

class ScratchFile {
 public:
  ScratchFile(const std::string& suffix, const std::string& contents)
      : path_(std::filesystem::temp_directory_path() /
              ("nibble-test-" + std::to_string(::getpid()) + "-" + std::to_string(std::random_device{}()) + suffix)) {
    std::ofstream(path_, std::ios::binary) << contents;
  }
  ~ScratchFile() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace nibble::testing

// A fresh directory per test, removed afterwards, so file tests never see each other's output.
namespace nibble::io::testing {

class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("nibble-io-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }
  // Number of entries in the directory: checks that failed writes leave nothing behind.
  size_t entries() const {
    size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(path_)) ++n;
    return n;
  }

 private:
  std::filesystem::path path_;
};

// A float32 .npy of n elements whose data is a hole (a sparse file): valid, present in full, and
// taking no disk space, so a tensor too large for the machine can be handed to a reader or the CLI.
inline void write_sparse_f32_npy(const std::filesystem::path& path, uint64_t n) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(n) + ",), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';  // NumPy pads the preamble to 64 bytes
  header += '\n';
  std::string bytes = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<char>(header.size() & 0xFF),
                       static_cast<char>(header.size() >> 8)};
  bytes += header;
  std::ofstream(path, std::ios::binary) << bytes;
  std::filesystem::resize_file(path, bytes.size() + 4 * n);
}

}  // namespace nibble::io::testing
