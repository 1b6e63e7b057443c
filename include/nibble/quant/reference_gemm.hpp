// The ground truth for every GEMM path: C[M, N] = (sum_k A[m, k] * B[n, k]) * tensor_scale_a * tensor_scale_b,
// A, B = decode(code) * block_scale (exact in float), and the sum over the DEQUANTIZED
// values (quantized domain: rotations and prescales are not undone), products and sums in double.
// A is [M, K] and B is [N, K], both contiguous along K ("TN"). Throws std::invalid_argument when the
// K dimensions differ.
#pragma once
#include <vector>

#include "nibble/quant/quantized_tensor.hpp"

namespace nibble::quant {

std::vector<double> reference_gemm_f64(const QuantizedTensor& a, const QuantizedTensor& b);
std::vector<float> reference_gemm(const QuantizedTensor& a, const QuantizedTensor& b);

}  // namespace nibble::quant
