// NumPy .npy files, versions 1.0, 2.0 and 3.0. Supported dtypes: '<f4', '<f2', '<f8' and the
// one-byte '|u1' (also '<u1'), '|i1', '|b1'; C order only. Everything a header claims is checked
// against the bytes actually present before any allocation; every rejection names the problem and
// what to do about it.
#pragma once
#include <cstdint>
#include <filesystem>
#include <span>
#include <string_view>
#include <vector>

#include "nibble/io/tensor.hpp"

namespace nibble::io {

// NumPy itself refuses headers above 10000 bytes unless told otherwise; we allow more for very
// high-rank shapes but still bound what a hostile header can make us parse.
inline constexpr uint64_t kNpyMaxHeaderBytes = 1 << 16;

// Parses a complete .npy image. `source` names the file in messages. The tensor's name is empty.
Tensor parse_npy(std::span<const uint8_t> bytes, std::string_view source);
// Reads a file, checking the header's claimed size against the file size before reading the data.
Tensor read_npy(const std::filesystem::path& path);
// dtype and shape only (bytes empty), with the same checks, without reading the data: lets a
// command refuse a tensor too large for the machine before allocating anything.
Tensor read_npy_header(const std::filesystem::path& path);

// The .npy image of `t` (version 1.0, or 2.0 when the header would not fit 1.0's 16-bit length).
std::vector<uint8_t> encode_npy(const Tensor& t);
// Writes atomically (see binary_file.hpp).
void write_npy(const std::filesystem::path& path, const Tensor& t);

}  // namespace nibble::io
