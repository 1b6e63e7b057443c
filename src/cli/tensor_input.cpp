// Checks shared by `nibble quantize` and `nibble error` (tensor_input.hpp).
#include "tensor_input.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace nibble::cli {

void require_floating(io::DType dtype, std::string_view what) {
  if (io::is_floating(dtype)) return;
  throw std::invalid_argument(::fmt::format("{} holds {}, not floating-point values; nibble quantizes f32, f16, bf16 "
                                          "and f64 tensors: convert it with a.astype(numpy.float32)",
                                          what, io::dtype_name(dtype)));
}

std::vector<float> quantizable_values(const io::Tensor& t, std::string_view what) {
  require_floating(t.dtype, what);
  io::as_matrix(t.shape, what);  // rank >= 1 and at least one element
  std::vector<float> x = io::to_float32(t);
  if (std::none_of(x.begin(), x.end(), [](float v) { return std::isfinite(v); })) {
    throw std::invalid_argument(::fmt::format("{} {} has no finite value (all {} elements are NaN or inf): there is "
                                            "nothing to measure; check how the tensor was produced",
                                            what, io::shape_string(t.shape), x.size()));
  }
  if (t.dtype == io::DType::f64) {
    std::fprintf(stderr, "nibble: note: %.*s is f64: rounded to float32 before quantizing (values beyond float32's "
                         "range become inf)\n", static_cast<int>(what.size()), what.data());
  }
  return x;
}

}  // namespace nibble::cli
