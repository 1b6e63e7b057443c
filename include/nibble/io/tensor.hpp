// A tensor as files hold it: a name, a dtype, a C-order shape and the raw little-endian bytes.
// The readers keep bytes as they are; to_float32() is the one place element types become floats.
// Below: the two tensor file formats, NumPy .npy and Hugging Face .safetensors, and the IEEE half
// conversion F16 tensors need.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nibble/format/host_device.hpp"

namespace nibble::io {

enum class DType : uint8_t { f32, f16, bf16, f64, u8, i8, boolean };

size_t dtype_size(DType d);
// Short lower-case names used in messages and tables: "f32", "f16", "bf16", "f64", "u8", "i8", "bool".
std::string_view dtype_name(DType d);
bool is_floating(DType d);

struct Tensor {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;   // C order; empty = a scalar
  std::vector<uint8_t> bytes;   // numel * dtype_size, little-endian
  int64_t numel() const;
};

// Number of elements of `shape`, checked: every dimension >= 0 and numel * elem_size fits in
// `max_bytes`. Throws std::invalid_argument naming `what` (the file or tensor) otherwise.
int64_t checked_numel(std::span<const int64_t> shape, size_t elem_size, uint64_t max_bytes,
                      std::string_view what);

// Every element as a float32. Exact for f32, f16, bf16, u8, i8 and bool; f64 rounds to nearest
// (values beyond float range become +-inf, which the caller sees rather than a silent clamp).
std::vector<float> to_float32(const Tensor& t);

Tensor make_f32_tensor(std::string name, std::vector<int64_t> shape, std::span<const float> values);
Tensor make_u8_tensor(std::string name, std::vector<int64_t> shape, std::span<const uint8_t> values);

// A tensor as the matrix a GEMM sees, as frameworks flatten it: the last dimension is cols (C order,
// blocks run along cols, the GEMM's inner dimension) and every leading dimension folds into rows, so
// 1-D (n,) is 1 x n and (a, b, n) is a*b x n. A scalar (rank 0) or a tensor with no element throws
// std::invalid_argument naming `what` (the file or tensor) and its shape.
struct MatrixShape {
  int64_t rows = 0;
  int64_t cols = 0;
};
MatrixShape as_matrix(std::span<const int64_t> shape, std::string_view what);
MatrixShape as_matrix(const Tensor& t);  // `what` is "tensor '<name>'"

std::string shape_string(std::span<const int64_t> shape);  // "(3, 4)", "(5,)", "()"

}  // namespace nibble::io

// NumPy .npy files, versions 1.0, 2.0 and 3.0. Supported dtypes: '<f4', '<f2', '<f8' and the
// one-byte '|u1' (also '<u1'), '|i1', '|b1'; C order only. Everything a header claims is checked
// against the bytes actually present before any allocation; every rejection names the problem and
// what to do about it.
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

// Hugging Face .safetensors: an 8-byte little-endian header length N, N bytes of JSON
// {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}},
// then the data buffer. Checked as the reference implementation checks it: offsets in range,
// non-overlapping and covering the buffer without holes, and end - begin == numel * dtype size.
// F32, F16, BF16, F64, U8, I8 and BOOL tensors load; other valid dtypes (I64, F8_E4M3, ...) are
// listed as skipped rather than failing the file, so a checkpoint with integer buffers still reads.
namespace nibble::io {

// The reference implementation refuses headers above 100 MB; so do we.
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

struct SafetensorsEntry {
  std::string name;
  std::string dtype_tag;          // as written in the file, e.g. "BF16"
  std::optional<DType> dtype;     // empty when nibble does not load this dtype
  std::vector<int64_t> shape;
  uint64_t begin = 0;             // offsets relative to the start of the data buffer
  uint64_t end = 0;
};

struct SafetensorsIndex {
  std::vector<SafetensorsEntry> entries;  // in data-offset order
  uint64_t data_start = 0;                // absolute file offset of the data buffer
};

// Validates a header against a data buffer of `data_size` bytes. `source` names the file in messages.
std::vector<SafetensorsEntry> parse_safetensors_header(std::string_view json, uint64_t data_size,
                                                       std::string_view source);

// Reads only the header of a file (cheap for multi-gigabyte checkpoints).
SafetensorsIndex read_safetensors_index(const std::filesystem::path& path);
// Loads one entry of an index; throws std::invalid_argument for an entry whose dtype is not loaded.
Tensor read_safetensors_tensor(const std::filesystem::path& path, const SafetensorsIndex& index,
                               const SafetensorsEntry& entry);

struct SafetensorsContents {
  std::vector<Tensor> tensors;
  std::vector<std::string> skipped;  // "name (dtype I64 is not loaded)"
};
SafetensorsContents parse_safetensors(std::span<const uint8_t> bytes, std::string_view source);
SafetensorsContents read_safetensors(const std::filesystem::path& path);

// Writes tensors in the given order, data contiguous, header padded with spaces to 8 bytes.
// Tensor names must be unique, non-empty and not "__metadata__".
std::vector<uint8_t> encode_safetensors(std::span<const Tensor> tensors);
void write_safetensors(const std::filesystem::path& path, std::span<const Tensor> tensors);

// "F32" for DType::f32 and so on.
std::string_view safetensors_dtype_tag(DType d);

}  // namespace nibble::io

// IEEE binary16 (half) <-> float32. Decode is exact (every half is a float); encode rounds to
// nearest even, overflows to infinity as IEEE does, and keeps NaN a quiet NaN. The io layer needs
// half only to read and write F16 tensors, so it lives here rather than among the training formats.
namespace nibble::io {

NIBBLE_HD constexpr float decode_f16(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t man = h & 0x3FFu;
  if (exp == 0x1F) return fmt::bits_float(sign | 0x7F800000u | (man << 13));  // inf, NaN (payload kept)
  if (exp != 0) return fmt::bits_float(sign | ((exp + 112u) << 23) | (man << 13));
  if (man == 0) return fmt::bits_float(sign);
  // Subnormal half = man * 2^-24; normalise it into a float32 normal.
  int e = -14;
  while (!(man & 0x400u)) {
    man <<= 1;
    --e;
  }
  return fmt::bits_float(sign | (static_cast<uint32_t>(e + 127) << 23) | ((man & 0x3FFu) << 13));
}

NIBBLE_HD constexpr uint16_t encode_f16(float x) {
  const uint32_t b = fmt::float_bits(x);
  const uint16_t sign = static_cast<uint16_t>((b >> 16) & 0x8000u);
  const uint32_t a = b & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u | ((a >> 13) & 0x3FFu));
  if (a >= 0x47800000u) return static_cast<uint16_t>(sign | 0x7C00u);  // >= 65536 (or inf): inf
  const int fe = static_cast<int>(a >> 23);
  const uint32_t sig = (a & 0x7FFFFFu) | (fe ? 0x800000u : 0u);
  // Half keeps 11 significant bits at exponent >= -14 and a fixed 2^-24 step below.
  const int shift = fe >= 113 ? 13 : 13 + (113 - fe);
  if (shift > 31) return sign;
  const uint32_t q = sig >> shift;
  const uint32_t rem = sig & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  uint32_t r = q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
  // For normals, q carries the implicit bit; adding the biased exponent lets a mantissa carry
  // roll into the exponent (and 65504 + carry into inf) for free.
  if (fe >= 113) r = (static_cast<uint32_t>(fe - 112) << 10) + (r - 0x400u);
  return static_cast<uint16_t>(sign | r);
}

}  // namespace nibble::io
