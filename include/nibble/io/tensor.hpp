// A tensor as files hold it: a name, a dtype, a C-order shape and the raw little-endian bytes.
// The readers keep bytes as they are; to_float32() is the one place element types become floats.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

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

// A 1-D tensor is one row; a 2-D tensor is rows x cols (C order, blocks run along cols, the GEMM's
// inner dimension). Anything else throws std::invalid_argument naming the tensor and its shape.
struct MatrixShape {
  int64_t rows = 0;
  int64_t cols = 0;
};
MatrixShape as_matrix(const Tensor& t);

std::string shape_string(std::span<const int64_t> shape);  // "(3, 4)", "(5,)", "()"

}  // namespace nibble::io
