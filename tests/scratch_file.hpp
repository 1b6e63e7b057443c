// A file with given contents under the system temporary folder, removed when the object goes: for
// tests that hand a reader a path. The name is unique per process and object (std::random_device, not
// the replayable test seeds: concurrent runs must not collide).
#pragma once
#include <unistd.h>

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
