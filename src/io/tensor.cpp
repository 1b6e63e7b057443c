// Tensor helpers: dtype facts, checked element counts, conversion to float32.
#include "nibble/io/tensor.hpp"

#include <bit>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "nibble/format/bf16.hpp"

namespace nibble::io {

static_assert(std::endian::native == std::endian::little,
              "nibble's file readers copy little-endian bytes directly; a big-endian host needs byte swaps");

size_t dtype_size(DType d) {
  switch (d) {
    case DType::f32: return 4;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::f64: return 8;
    case DType::u8:
    case DType::i8:
    case DType::boolean: return 1;
  }
  throw std::logic_error("dtype_size: unknown DType");
}

std::string_view dtype_name(DType d) {
  switch (d) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::f64: return "f64";
    case DType::u8: return "u8";
    case DType::i8: return "i8";
    case DType::boolean: return "bool";
  }
  throw std::logic_error("dtype_name: unknown DType");
}

bool is_floating(DType d) {
  return d == DType::f32 || d == DType::f16 || d == DType::bf16 || d == DType::f64;
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

std::string shape_string(std::span<const int64_t> shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

int64_t checked_numel(std::span<const int64_t> shape, size_t elem_size, uint64_t max_bytes,
                      std::string_view what) {
  // Divide instead of multiply so a hostile shape cannot overflow on the way to the check.
  uint64_t n = 1;
  const uint64_t max_elems = max_bytes / elem_size;
  for (int64_t s : shape) {
    if (s < 0) {
      throw std::invalid_argument(std::string(what) + ": shape " + shape_string(shape) +
                                  " has a negative dimension; the header is corrupt");
    }
    const auto d = static_cast<uint64_t>(s);
    if (d != 0 && n > max_elems / d) {
      throw std::invalid_argument(std::string(what) + ": shape " + shape_string(shape) + " needs more than " +
                                  std::to_string(max_bytes) +
                                  " bytes; the header is corrupt");
    }
    n *= d;
  }
  // A zero dimension makes the product 0 even if other dimensions are absurd; that is still
  // a valid (empty) tensor, as NumPy agrees.
  return static_cast<int64_t>(n);
}

std::vector<float> to_float32(const Tensor& t) {
  const auto n = static_cast<size_t>(t.numel());
  if (t.bytes.size() != n * dtype_size(t.dtype)) {
    throw std::invalid_argument("tensor '" + t.name + "': holds " + std::to_string(t.bytes.size()) +
                                " bytes but shape " + shape_string(t.shape) + " of " +
                                std::string(dtype_name(t.dtype)) + " needs " +
                                std::to_string(n * dtype_size(t.dtype)));
  }
  std::vector<float> out(n);
  const uint8_t* p = t.bytes.data();
  switch (t.dtype) {
    case DType::f32:
      if (n) std::memcpy(out.data(), p, n * 4);
      break;
    case DType::f16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = decode_f16(h);
      }
      break;
    case DType::bf16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = fmt::decode_bf16(h);
      }
      break;
    case DType::f64:
      for (size_t i = 0; i < n; ++i) {
        double v;
        std::memcpy(&v, p + 8 * i, 8);
        out[i] = static_cast<float>(v);  // round to nearest; out-of-range -> inf
      }
      break;
    case DType::u8:
    case DType::boolean:
      for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(p[i]);
      break;
    case DType::i8:
      for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(static_cast<int8_t>(p[i]));
      break;
  }
  return out;
}

static Tensor make_tensor(std::string name, DType dtype, std::vector<int64_t> shape, const void* data,
                          size_t count) {
  Tensor t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.shape = std::move(shape);
  const int64_t n = checked_numel(t.shape, dtype_size(dtype), std::numeric_limits<int64_t>::max(), t.name);
  if (static_cast<size_t>(n) != count) {
    throw std::invalid_argument("tensor '" + t.name + "': shape " + shape_string(t.shape) + " has " +
                                std::to_string(n) + " elements but " + std::to_string(count) +
                                " values were given");
  }
  t.bytes.resize(count * dtype_size(dtype));
  if (count) std::memcpy(t.bytes.data(), data, t.bytes.size());
  return t;
}

Tensor make_f32_tensor(std::string name, std::vector<int64_t> shape, std::span<const float> values) {
  return make_tensor(std::move(name), DType::f32, std::move(shape), values.data(), values.size());
}

Tensor make_u8_tensor(std::string name, std::vector<int64_t> shape, std::span<const uint8_t> values) {
  return make_tensor(std::move(name), DType::u8, std::move(shape), values.data(), values.size());
}

MatrixShape as_matrix(std::span<const int64_t> shape, std::string_view what) {
  if (shape.empty()) {
    throw std::invalid_argument(std::string(what) + " is a scalar (shape ()); nibble quantizes tensors of rank 1 or "
                                "more: save it as a 1-D array");
  }
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i) rows *= shape[i];  // the readers checked the product fits
  const int64_t cols = shape.back();
  if (rows == 0 || cols == 0) {
    throw std::invalid_argument(std::string(what) + " is empty (shape " + shape_string(shape) +
                                ", no elements): there is nothing to quantize; pass a tensor with data");
  }
  return {rows, cols};
}

MatrixShape as_matrix(const Tensor& t) {
  return as_matrix(t.shape, t.name.empty() ? std::string("the tensor") : "tensor '" + t.name + "'");
}

}  // namespace nibble::io
