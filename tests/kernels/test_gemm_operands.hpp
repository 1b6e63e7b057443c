// Test support for the GEMM tests: host quantizers that write codes and scales in cuBLASLt's layouts
// (with the nibble/format codecs), the MXFP4 -> E4M3 exact re-encoding of docs/spec.md §4, device
// upload, the double-accumulation reference and the comparison with its error bounds.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "nibble/kernels/check.hpp"
#include "nibble/kernels/gemm.hpp"
#include "nibble/kernels/scale_layout.hpp"
#include "nibble/format.hpp"
#include "test_seed.hpp"

namespace nibble::testing {

namespace nc = nibble::cuda;
namespace sl = nibble::cuda::scale_layout;
namespace nf = nibble::fmt;

// Gaussian data, each 32-block scaled by 2^u with u uniform in [-spread, spread]: block and row scales
// matter, and no element is zero.
inline std::vector<float> random_matrix(int64_t rows, int64_t k, int spread, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> binade(-spread, spread);
  std::vector<float> x(static_cast<size_t>(rows * k));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < k; b += 32) {
      const float s = nf::pow2f(binade(rng));
      for (int64_t j = b; j < std::min(k, b + 32); ++j) {
        float v = normal(rng);
        if (v == 0.0f) v = 0.5f;
        x[r * k + j] = v * s;
      }
    }
  }
  return x;
}

struct HostOperand {
  int64_t rows = 0, k = 0;
  nc::DType dtype = nc::DType::bf16;
  nc::ScaleMode mode = nc::ScaleMode::none;
  std::vector<uint8_t> bytes;   // codes (1 byte each) or BF16 (2 bytes each), row-major
  std::vector<float> scales;    // cuBLASLt layout
  std::vector<double> deq;      // exact decoded values, row-major: what the reference multiplies
};

inline HostOperand to_bf16(const std::vector<float>& x, int64_t rows, int64_t k) {
  HostOperand h{rows, k, nc::DType::bf16, nc::ScaleMode::none, {}, {}, {}};
  h.bytes.resize(x.size() * 2);
  h.deq.resize(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const uint16_t b = nf::encode_bf16(x[i]);
    std::memcpy(&h.bytes[2 * i], &b, 2);
    h.deq[i] = nf::decode_bf16(b);
  }
  return h;
}

// FP8 with one scale per group of the mode: s = amax / fmax (a different value in every block, so a
// wrong layout shows), code = RNE(x / s), value = decode(code) * s.
inline HostOperand quantize_fp8(const std::vector<float>& x, int64_t rows, int64_t k, nc::DType dtype,
                                nc::ScaleMode mode) {
  HostOperand h{rows, k, dtype, mode, {}, {}, {}};
  const float fmax = dtype == nc::DType::e4m3 ? nf::kE4M3Max : nf::kE5M2Max;
  const int64_t rb = mode == nc::ScaleMode::blk128x128 ? 128 : mode == nc::ScaleMode::per_tensor ? rows : 1;
  const int64_t kb = (mode == nc::ScaleMode::vec128 || mode == nc::ScaleMode::blk128x128) ? 128 : k;
  h.scales.assign(static_cast<size_t>(sl::scale_count(mode, rows, k)), 1.0f);  // padding: 1.0
  h.bytes.resize(x.size());
  h.deq.resize(x.size());
  for (int64_t r0 = 0; r0 < rows; r0 += rb) {
    for (int64_t k0 = 0; k0 < k; k0 += kb) {
      float amax = 0.0f;
      for (int64_t r = r0; r < std::min(rows, r0 + rb); ++r)
        for (int64_t j = k0; j < std::min(k, k0 + kb); ++j) amax = std::max(amax, std::fabs(x[r * k + j]));
      const float s = amax > 0.0f ? amax / fmax : 1.0f;
      h.scales[static_cast<size_t>(sl::scale_index(mode, rows, k, r0, k0))] = s;
      for (int64_t r = r0; r < std::min(rows, r0 + rb); ++r) {
        for (int64_t j = k0; j < std::min(k, k0 + kb); ++j) {
          const size_t i = static_cast<size_t>(r * k + j);
          const uint8_t c = dtype == nc::DType::e4m3 ? nf::encode_e4m3(x[i] / s) : nf::encode_e5m2(x[i] / s);
          h.bytes[i] = c;
          h.deq[i] = static_cast<double>(dtype == nc::DType::e4m3 ? nf::decode_e4m3(c) : nf::decode_e5m2(c)) * s;
        }
      }
    }
  }
  return h;
}

// MXFP4 quantization (OCP rule: X = 2^(floor(log2 amax) - 2) per 1x32 block), then the exact
// re-encoding into E4M3 of docs/spec.md §4 with one power-of-two scale per row (outer_vec) or per
// 1x128 group (vec128). `mxfp4_deq` receives the MXFP4 values; the re-encoded operand's deq must
// equal them exactly, which this function checks and throws otherwise.
inline HostOperand mxfp4_reencoded(const std::vector<float>& x, int64_t rows, int64_t k, nc::ScaleMode mode) {
  if (k % 32 != 0) throw std::invalid_argument("mxfp4_reencoded: k % 32 != 0");
  HostOperand h{rows, k, nc::DType::e4m3, mode, {}, {}, {}};
  const int64_t group = mode == nc::ScaleMode::vec128 ? 128 : k;
  h.scales.assign(static_cast<size_t>(sl::scale_count(mode, rows, k)), 1.0f);
  h.bytes.assign(x.size(), 0);
  h.deq.assign(x.size(), 0.0);
  std::vector<int> exps(static_cast<size_t>(k / 32));
  std::vector<uint8_t> e2m1(static_cast<size_t>(k));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < k / 32; ++b) {
      float amax = 0.0f;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[r * k + b * 32 + j]));
      const int e = amax > 0.0f ? nf::floor_log2(amax) - 2 : -127;
      exps[b] = e;
      for (int j = 0; j < 32; ++j) e2m1[b * 32 + j] = nf::encode_e2m1(x[r * k + b * 32 + j] / nf::pow2f(e));
    }
    for (int64_t g0 = 0; g0 < k; g0 += group) {
      int kmax = -1000;
      for (int64_t b = g0 / 32; b < (g0 + group) / 32; ++b) {
        bool nonzero = false;
        for (int j = 0; j < 32; ++j) nonzero = nonzero || (e2m1[b * 32 + j] & 7) != 0;
        if (nonzero) kmax = std::max(kmax, exps[b]);
      }
      if (kmax == -1000) kmax = 0;  // all-zero group: any scale is exact
      h.scales[static_cast<size_t>(sl::scale_index(mode, rows, k, r, g0))] = nf::pow2f(kmax - 6);
      for (int64_t j = g0; j < g0 + group; ++j) {
        const float v = nf::decode_e2m1(e2m1[j]);
        const size_t i = static_cast<size_t>(r * k + j);
        const uint8_t c = nf::encode_e4m3(v * nf::pow2f(exps[j / 32] - kmax + 6));
        h.bytes[i] = c;
        h.deq[i] = static_cast<double>(v) * std::ldexp(1.0, exps[j / 32]);
        const double back = static_cast<double>(nf::decode_e4m3(c)) * std::ldexp(1.0, kmax - 6);
        if (back != h.deq[i]) {
          throw std::logic_error("re-encoding not exact at row " + std::to_string(r) + " col " + std::to_string(j) +
                                 ": spread " + std::to_string(kmax - exps[j / 32]) + " binades exceeds 14?");
        }
      }
    }
  }
  return h;
}

class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) { NIBBLE_CUDA_CHECK(cudaMalloc(&ptr_, std::max<size_t>(bytes, 16))); }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  void upload(const void* src, size_t n) { NIBBLE_CUDA_CHECK(cudaMemcpy(ptr_, src, n, cudaMemcpyHostToDevice)); }
  void poison() { NIBBLE_CUDA_CHECK(cudaMemset(ptr_, 0xFF, bytes_)); }  // 0xFFFF / 0xFFFFFFFF are NaN

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

struct DeviceOperand {
  DeviceBuffer data;
  DeviceBuffer scale;
  nc::GemmOperand view;
  explicit DeviceOperand(const HostOperand& h)
      : data(h.bytes.size()), scale(h.scales.size() * sizeof(float)) {
    data.upload(h.bytes.data(), h.bytes.size());
    if (!h.scales.empty()) scale.upload(h.scales.data(), h.scales.size() * sizeof(float));
    view = nc::GemmOperand{data.get(), h.dtype, h.rows, h.k, h.mode, h.scales.empty() ? nullptr : scale.get()};
  }
};

struct Reference {
  std::vector<double> c;        // alpha * A * B^T, double accumulation
  std::vector<double> abs_sum;  // |alpha| * sum_k |a||b|: scale of the accumulation error
};
inline Reference reference(const HostOperand& a, const HostOperand& b, double alpha) {
  Reference ref;
  const int64_t m = a.rows, n = b.rows, k = a.k;
  ref.c.resize(static_cast<size_t>(m * n));
  ref.abs_sum.resize(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0.0, t = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        const double prod = a.deq[i * k + p] * b.deq[j * k + p];
        s += prod;
        t += std::fabs(prod);
      }
      ref.c[i * n + j] = alpha * s;
      ref.abs_sum[i * n + j] = std::fabs(alpha) * t;
    }
  }
  return ref;
}

struct Comparison {
  double rel_frobenius = 0.0;  // ||got - ref|| / ||ref||
  double worst_bound_ratio = 0.0;  // max over elements of |got - ref| / bound
  double mismatch_fraction = 0.0;  // elements whose BF16 output differs from RN_bf16(ref)
  int64_t non_finite = 0;          // unwritten (poisoned) or overflowed elements
};

// Per element: |got - ref| <= out_rel * |ref| + acc_rel * abs_sum, where out_rel covers the output
// rounding (one BF16 ulp, at most 2^-7 relative: the accumulation error can tip a value that sits
// near a rounding midpoint the other way) and acc_rel the accumulation.
inline Comparison compare(const std::vector<uint8_t>& out, nc::OutputDType dtype, const Reference& ref,
                          double acc_rel) {
  Comparison cmp;
  double num = 0.0, den = 0.0;
  int64_t mismatches = 0;
  const double out_rel = dtype == nc::OutputDType::bf16 ? std::ldexp(1.0, -7) : std::ldexp(1.0, -23);
  for (size_t i = 0; i < ref.c.size(); ++i) {
    double got;
    if (dtype == nc::OutputDType::bf16) {
      uint16_t b;
      std::memcpy(&b, &out[2 * i], 2);
      got = nf::decode_bf16(b);
      if (b != nf::encode_bf16(static_cast<float>(ref.c[i]))) ++mismatches;
    } else {
      float f;
      std::memcpy(&f, &out[4 * i], 4);
      got = f;
    }
    if (!std::isfinite(got)) {
      ++cmp.non_finite;
      continue;
    }
    const double err = std::fabs(got - ref.c[i]);
    const double bound = out_rel * std::fabs(ref.c[i]) + acc_rel * ref.abs_sum[i] + 1e-30;
    cmp.worst_bound_ratio = std::max(cmp.worst_bound_ratio, err / bound);
    num += err * err;
    den += ref.c[i] * ref.c[i];
  }
  cmp.rel_frobenius = std::sqrt(num / den);
  cmp.mismatch_fraction = static_cast<double>(mismatches) / static_cast<double>(ref.c.size());
  return cmp;
}

// Relative Frobenius distance between two host matrices.
inline double rel_distance(const std::vector<double>& x, const std::vector<double>& ref) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    num += (x[i] - ref[i]) * (x[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / den);
}

}  // namespace nibble::testing
