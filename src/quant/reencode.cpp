// Exact emulation encoders (docs/spec.md §4): MXFP4 -> E4M3 with one power-of-two scale per set, and
// decode to BF16 for the BF16 emulation of mxfp8 / nvfp4; and the reference GEMM every GEMM path is
// checked against.
#include "nibble/quant/reencode.hpp"

#include <stdexcept>
#include <string>

#include "nibble/format/bf16.hpp"
#include "nibble/format/e8m0.hpp"
#include "nibble/quant/element_codecs.hpp"

namespace nibble::quant {

namespace {
void require_mxfp4(const QuantizedTensor& q, ReencodeSet set) {
  if (q.element != ElementFormat::e2m1 || q.scale_format != ScaleFormat::e8m0 || q.block_rows != 1 ||
      q.block_cols != 32) {
    throw std::invalid_argument(std::string("reencode_mxfp4_as_e4m3: the tensor holds ") + element_format_name(q.element) +
                                " codes with " + scale_format_name(q.scale_format) +
                                " scales; it needs MXFP4 (e2m1 codes, e8m0 1x32 scales: recipe mxfp4 or quartet)");
  }
  if (set == ReencodeSet::group_1x128 && q.cols % 128 != 0) {
    throw std::invalid_argument("reencode_mxfp4_as_e4m3: cols " + std::to_string(q.cols) +
                                " is not divisible by 128; use the per-row set");
  }
}

// Runs over every set, calling emit(row, first_col, last_col, k_max, violated).
template <class Emit>
int64_t for_each_set(const QuantizedTensor& q, ReencodeSet set, Emit emit) {
  const int64_t set_cols = set == ReencodeSet::row ? q.cols : 128;
  const int64_t grid = q.cols / 32;
  int64_t violations = 0;
  for (int64_t r = 0; r < q.rows; ++r) {
    for (int64_t c0 = 0; c0 < q.cols; c0 += set_cols) {
      int k_max = -1000, k_min = 1000;
      for (int64_t b = c0 / 32; b < (c0 + set_cols) / 32; ++b) {
        const uint8_t sc = q.scale_codes[static_cast<size_t>(r * grid + b)];
        if (sc == fmt::kE8M0Nan) continue;
        bool nonzero = false;
        for (int64_t c = b * 32; c < (b + 1) * 32 && !nonzero; ++c) nonzero = (q.code_at(r, c) & 0x7) != 0;
        if (!nonzero) continue;
        const int k = fmt::e8m0_exponent(sc);
        k_max = k > k_max ? k : k_max;
        k_min = k < k_min ? k : k_min;
      }
      const bool any = k_max != -1000;
      const bool violated = any && k_max - k_min > kReencodeMaxSpread;
      violations += violated ? 1 : 0;
      emit(r, c0, c0 + set_cols, any ? k_max : 0, violated);
    }
  }
  return violations;
}
}  // namespace

float E4M3Reencoding::value_at(int64_t r, int64_t c) const {
  const int64_t per_row = set == ReencodeSet::row ? 1 : cols / 128;
  const int64_t s = r * per_row + (set == ReencodeSet::row ? 0 : c / 128);
  return fmt::decode_e4m3(codes[static_cast<size_t>(r * cols + c)]) * set_scales[static_cast<size_t>(s)];
}

E4M3Reencoding reencode_mxfp4_as_e4m3(const QuantizedTensor& q, ReencodeSet set) {
  require_mxfp4(q, set);
  E4M3Reencoding out;
  out.rows = q.rows;
  out.cols = q.cols;
  out.set = set;
  out.codes.assign(static_cast<size_t>(q.rows * q.cols), 0);
  const int64_t grid = q.cols / 32;
  out.violating_sets = for_each_set(q, set, [&](int64_t r, int64_t c0, int64_t c1, int k_max, bool) {
    out.set_scales.push_back(fmt::pow2f(k_max - 6));
    for (int64_t c = c0; c < c1; ++c) {
      const uint8_t sc = q.scale_codes[static_cast<size_t>(r * grid + c / 32)];
      out.codes[static_cast<size_t>(r * q.cols + c)] =
          sc == fmt::kE8M0Nan ? 0x7F : reencode_e2m1_as_e4m3(q.code_at(r, c), fmt::e8m0_exponent(sc), k_max);
    }
  });
  out.sets = static_cast<int64_t>(out.set_scales.size());
  return out;
}

int64_t count_reencode_violations(const QuantizedTensor& q, ReencodeSet set) {
  require_mxfp4(q, set);
  return for_each_set(q, set, [](int64_t, int64_t, int64_t, int, bool) {});
}

std::vector<uint16_t> decode_to_bf16_unscaled(const QuantizedTensor& q) {
  std::vector<uint16_t> out(static_cast<size_t>(q.rows * q.cols));
  for (int64_t r = 0; r < q.rows; ++r) {
    for (int64_t c = 0; c < q.cols; ++c) {
      const float v = q.unscaled_value_at(r, c);
      const uint16_t h = fmt::encode_bf16(v);
      const float back = fmt::decode_bf16(h);
      if (back != v && !(v != v && back != back)) {
        throw std::runtime_error("decode_to_bf16_unscaled: element (" + std::to_string(r) + ", " + std::to_string(c) +
                                 ") = " + std::to_string(v) + " is not exact in BF16; this tensor (" + q.produced_by +
                                 ") cannot use the exact BF16 emulation");
      }
      out[static_cast<size_t>(r * q.cols + c)] = h;
    }
  }
  return out;
}

}  // namespace nibble::quant

// Ground-truth GEMM over dequantized operands, accumulated in double.
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
