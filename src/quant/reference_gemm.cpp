// Ground-truth GEMM over dequantized operands, accumulated in double.
#include "nibble/quant/reference_gemm.hpp"

#include <stdexcept>
#include <string>

namespace nibble::quant {

namespace {
// decode(code) * block_scale is exact in float for every recipe (a few significant bits times a
// power of two, or E2M1 times UE4M3); the per-tensor scales are applied once to the double sum.
std::vector<double> unscaled_values(const QuantizedTensor& q) {
  std::vector<double> v(static_cast<size_t>(q.rows * q.cols));
  for (int64_t r = 0; r < q.rows; ++r) {
    for (int64_t c = 0; c < q.cols; ++c) v[static_cast<size_t>(r * q.cols + c)] = q.unscaled_value_at(r, c);
  }
  return v;
}
}  // namespace

std::vector<double> reference_gemm_f64(const QuantizedTensor& a, const QuantizedTensor& b) {
  if (a.cols != b.cols) {
    throw std::invalid_argument("reference_gemm: A is " + std::to_string(a.rows) + "x" + std::to_string(a.cols) +
                                " and B is " + std::to_string(b.rows) + "x" + std::to_string(b.cols) +
                                "; both must be contiguous along the same K (A [M,K], B [N,K])");
  }
  const std::vector<double> av = unscaled_values(a), bv = unscaled_values(b);
  const double tensor_scales = static_cast<double>(a.tensor_scale) * static_cast<double>(b.tensor_scale);
  const int64_t m = a.rows, n = b.rows, k = a.cols;
  std::vector<double> c(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i) {
    const double* ar = av.data() + i * k;
    for (int64_t j = 0; j < n; ++j) {
      const double* br = bv.data() + j * k;
      double acc = 0.0;
      for (int64_t t = 0; t < k; ++t) acc += ar[t] * br[t];
      c[static_cast<size_t>(i * n + j)] = acc * tensor_scales;
    }
  }
  return c;
}

std::vector<float> reference_gemm(const QuantizedTensor& a, const QuantizedTensor& b) {
  const std::vector<double> c = reference_gemm_f64(a, b);
  return std::vector<float>(c.begin(), c.end());
}

}  // namespace nibble::quant
