// A float32 .npy of n elements whose data is a hole (a sparse file): valid, present in full, and
// taking no disk space, so a tensor too large for the machine can be handed to a reader or the CLI.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "nibble/io/binary_file.hpp"

namespace nibble::io::testing {

inline void write_sparse_f32_npy(const std::filesystem::path& path, uint64_t n) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(n) + ",), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';  // NumPy pads the preamble to 64 bytes
  header += '\n';
  std::vector<uint8_t> bytes = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<uint8_t>(header.size() & 0xFF),
                                static_cast<uint8_t>(header.size() >> 8)};
  bytes.insert(bytes.end(), header.begin(), header.end());
  const uint64_t data_start = bytes.size();
  write_file_atomic(path, bytes);
  std::filesystem::resize_file(path, data_start + 4 * n);
}

}  // namespace nibble::io::testing
