// The fused forward quantizer (quartet_fused.hpp) == quant::quantize_quartet_forward followed by
// quant::reencode_mxfp4_as_e4m3(row), bit for bit: E4M3 codes, row scales, violating-row count, and
// the MXFP4 planes + trust mask. Fresh random BF16/FP32 data each run (normals times 2^U(-20, 20)
// per row), rows with all-zero groups, NaN, inf, exact E2M1 ties and huge in-row spreads (so some
// rows violate the spread-14 condition and must be counted); outputs poisoned with 0xA5 first.
// Also the one-add E2M1 encoder of e2m1_element_math.cuh against fmt::encode_e2m1 on all
// 2^32 float bit patterns (GPU) and on a dense CPU sample.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "../../src/kernels/fp4/quartet_fused_group_math.cuh"
#include "gpu_test_support.hpp"
#include "nibble/kernels/check.hpp"
#include "nibble/kernels/quartet.hpp"
#include "nibble/kernels/quartet_fused.hpp"
#include "nibble/format.hpp"
#include "nibble/quant/quantizers.hpp"
#include "nibble/quant/reencode.hpp"
#include "test_seed.hpp"

namespace {

using namespace nibble;

using test::DeviceBuffer;

// Float data exactly representable in BF16 (so the BF16 and FP32 inputs carry the same values).
std::vector<float> make_input(int64_t rows, int64_t cols, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-20, 20);
  std::vector<float> x(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    const float mag = fmt::pow2f(expo(rng));
    for (int64_t c = 0; c < cols; ++c) {
      float v = normal(rng) * mag;
      if (v == 0.0f) v = mag;
      x[static_cast<size_t>(r * cols + c)] = fmt::decode_bf16(fmt::encode_bf16(v));
    }
  }
  auto at = [&](int64_t r, int64_t c) -> float& { return x[static_cast<size_t>(r * cols + c)]; };
  if (rows >= 8 && cols >= 64) {
    for (int c = 0; c < 32; ++c) at(0, c) = 0.0f;                      // all-zero group
    at(1, 5) = fmt::bits_float(0x7fc00000u);                           // NaN group
    at(2, 40) = fmt::bits_float(0x7f800000u);                          // inf group
    for (int64_t c = 0; c < cols; ++c) at(3, c) = 0.0f;                // an all-zero row (k_max = 0)
    const float ties[] = {4.0f, 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, -0.25f, -2.5f, -3.5f, 1.0f, -1.0f};
    for (int c = 0; c < 32; ++c) at(4, c) = ties[c % 12];
    // Spread ~32 > 14: a violating row. Both magnitudes are fixed (not the row's random one): QuEST's
    // +1e-8 floors the scale at 2^-27, so a group far below that would quantize to all-zero codes and
    // no longer count as a violation.
    for (int64_t c = 0; c < cols; ++c) {
      const float v = normal(rng) * ((c >= 32 && c < 64) ? 0x1p-20f : 0x1p12f);
      at(5, c) = fmt::decode_bf16(fmt::encode_bf16(v == 0.0f ? 1.0f : v));
    }
    for (int c = 0; c < 32; ++c) at(6, c) *= 0x1p-12f;                 // spread ~12: exact, deep shifts
    for (int c = 0; c < 32; ++c) at(7, c) = fmt::decode_bf16(fmt::encode_bf16(1e-38f * (c + 1)));  // near k = -127
  }
  return x;
}

void expect_same(const char* what, const std::vector<uint8_t>& got, const std::vector<uint8_t>& want) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i] != want[i]) {
      ADD_FAILURE() << what << ": first mismatch at byte " << i << ": got 0x" << std::hex << int(got[i])
                    << ", expected 0x" << int(want[i]);
      return;
    }
  }
}

struct Case {
  int64_t rows, cols;
  int h;
  bool rotate;
  quant::ForwardQuantizer kind;
  bool fp32;
};

void run_case(const Case& k, std::mt19937_64& rng) {
  SCOPED_TRACE(::testing::Message() << k.rows << "x" << k.cols << " h" << k.h << " rotate " << k.rotate << " quest "
                                    << (k.kind == quant::ForwardQuantizer::quest) << " fp32 " << k.fp32);
  const auto xf = make_input(k.rows, k.cols, rng);
  const size_t n = xf.size();
  const auto ref = quant::quantize_quartet_forward(xf.data(), k.rows, k.cols, k.h, k.rotate, k.kind);
  const auto ref8 = quant::reencode_mxfp4_as_e4m3(ref, quant::ReencodeSet::row);

  DeviceBuffer<float> x32(n);
  DeviceBuffer<uint16_t> x16(n);
  if (k.fp32) {
    x32.upload(xf);
  } else {
    std::vector<uint16_t> b(n);
    for (size_t i = 0; i < n; ++i) b[i] = fmt::encode_bf16(xf[i]);
    x16.upload(b);
  }
  DeviceBuffer<uint8_t> codes(n / 2), scales(n / 32), mask(n / 8), e4m3(n);
  DeviceBuffer<float> row_scales(static_cast<size_t>(k.rows));
  DeviceBuffer<int> violations(1);
  const cuda::QuartetForwardOptions o{k.h, k.rotate, k.kind};
  const char* path = cuda::quartet_forward_quantize_e4m3(
      k.fp32 ? static_cast<const void*>(x32.p) : static_cast<const void*>(x16.p),
      k.fp32 ? cuda::Fp4DenseType::fp32 : cuda::Fp4DenseType::bf16, k.rows, k.cols, o,
      {codes.p, scales.p, mask.p}, {e4m3.p, row_scales.p, violations.p}, nullptr);
  EXPECT_NE(std::string(path).find("fused"), std::string::npos) << path;

  expect_same("mxfp4 codes", codes.download(), ref.codes);
  expect_same("mxfp4 scales", scales.download(), ref.scale_codes);
  expect_same("mask", mask.download(), ref.mask);
  expect_same("e4m3 codes", e4m3.download(), ref8.codes);
  const auto rs = row_scales.download();
  ASSERT_EQ(ref8.set_scales.size(), rs.size());
  for (size_t r = 0; r < rs.size(); ++r) {
    ASSERT_EQ(fmt::float_bits(rs[r]), fmt::float_bits(ref8.set_scales[r])) << "row scale " << r;
  }
  EXPECT_EQ(violations.download()[0], ref8.violating_sets);
  if (k.rows >= 8 && k.cols >= 64) EXPECT_GE(ref8.violating_sets, 1) << "the spread row must violate";

  // E4M3 only (no MXFP4 planes): the same codes.
  DeviceBuffer<uint8_t> e4m3_only(n);
  cuda::quartet_forward_quantize_e4m3(k.fp32 ? static_cast<const void*>(x32.p) : static_cast<const void*>(x16.p),
                                      k.fp32 ? cuda::Fp4DenseType::fp32 : cuda::Fp4DenseType::bf16, k.rows, k.cols,
                                      o, {}, {e4m3_only.p, row_scales.p, nullptr}, nullptr);
  expect_same("e4m3 codes (no mxfp4 planes)", e4m3_only.download(), ref8.codes);
}

TEST(QuartetFusedForward, MatchesForwardThenRowReencode) {
  NIBBLE_REQUIRE_GPU();
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  // 4096 = 128 groups (PER 1), 32 = one group per row, 32768 = 1024 groups (PER 2), 16416 = odd count.
  const std::pair<int64_t, int64_t> shapes[] = {{64, 256}, {96, 320}, {40, 4096}, {9, 32}, {12, 32768}, {10, 16416}};
  for (const auto& [rows, cols] : shapes) {
    for (int h : {16, 32}) {
      for (bool rotate : {true, false}) {
        for (auto kind : {quant::ForwardQuantizer::quest, quant::ForwardQuantizer::absmax}) {
          run_case({rows, cols, h, rotate, kind, false}, rng);
          if (::testing::Test::HasFailure()) return;
        }
      }
    }
  }
  run_case({48, 512, 32, true, quant::ForwardQuantizer::quest, true}, rng);
}

TEST(QuartetFusedForward, ClearErrorsBeforeLaunch) {
  uint8_t* p = reinterpret_cast<uint8_t*>(uintptr_t{4096});
  float* f = reinterpret_cast<float*>(uintptr_t{4096});
  const cuda::Fp8RowOperand fp8{p, f, nullptr};
  auto call = [&](int64_t cols, int h, const cuda::Fp8RowOperand& o8) {
    cuda::quartet_forward_quantize_e4m3(p, cuda::Fp4DenseType::bf16, 4, cols, {h, true, quant::ForwardQuantizer::quest},
                                        {}, o8, nullptr);
  };
  EXPECT_THROW(call(48, 32, fp8), std::invalid_argument);           // cols % 32
  EXPECT_THROW(call(64, 64, fp8), std::invalid_argument);           // hadamard 64 not fused
  EXPECT_THROW(call(262144, 32, fp8), std::invalid_argument);       // row too long for one CTA
  EXPECT_THROW(call(64, 32, {nullptr, f, nullptr}), std::invalid_argument);
  EXPECT_THROW(call(64, 32, {p + 1, f, nullptr}), std::invalid_argument);  // misaligned codes
}

// ---- the one-add E2M1 encoder ------------------------------------------------------------------
bool same_on(uint32_t bits) {
  const float x = fmt::bits_float(bits);
  const uint8_t want = fmt::encode_e2m1(x), got = cuda::fp4::encode_e2m1_fadd(x);
  if (got == want) return true;
  ADD_FAILURE() << "bits 0x" << std::hex << bits << ": fadd 0x" << int(got) << ", reference 0x" << int(want);
  return false;
}

TEST(E2m1FaddEncoder, CpuThresholdsSpecialsAndSweep) {
  constexpr uint32_t kEdges[] = {0x3E800000u, 0x3F000000u, 0x3F400000u, 0x3F800000u, 0x3FA00000u, 0x3FE00000u,
                                 0x40000000u, 0x40200000u, 0x40600000u, 0x40800000u, 0x40A00000u, 0x40C00000u};
  for (uint32_t sign : {0u, 0x80000000u}) {
    for (uint32_t t : kEdges) {
      for (uint32_t d = 0; d <= 4096; ++d) {
        if (!same_on(sign | (t + d)) || !same_on(sign | (t - d))) return;
      }
    }
    for (uint32_t s : {0u, 1u, 0x007fffffu, 0x00800000u, 0x7f7fffffu, 0x7f800000u, 0x7f800001u, 0x7fc00000u}) {
      if (!same_on(sign | s)) return;
    }
  }
  const uint32_t offset = static_cast<uint32_t>(nibble::testing::fresh_seed() % 97);
  for (uint64_t b = offset; b < (uint64_t{1} << 32); b += 97) {
    if (!same_on(static_cast<uint32_t>(b))) return;
  }
}


// ---- the three-add magic E2M1 encoder (backward quantizer, nearest) ---------------------------
// e2m1_magic_bits(w, e2m1_magic(k)) carries RNE_E2M1(|w| 2^-k) in its low byte for |w| 2^-k <= 6
// and every k in [-127, kE2m1MagicMaxK]; with the sign from pack_codes_signs it must equal
// fmt::encode_e2m1(w * 2^-k), the reference's element encoder, bit for bit.
uint8_t magic_code(float w, int k) {
  const uint32_t mb = cuda::fp4::e2m1_magic_bits(w, cuda::fp4::e2m1_magic(k));
  return static_cast<uint8_t>((mb & 0x7u) | ((fmt::float_bits(w) >> 28) & 0x8u));
}

TEST(E2m1MagicEncoder, CpuEqualsReferenceOnTiesEdgesAndRandomValues) {
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  std::uniform_real_distribution<float> unit(0.0f, 6.0f);
  // Every E2M1 midpoint (the ties) and every grid point, plus one float either side of each.
  const float points[] = {0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 1.25f, 1.5f, 1.75f, 2.0f, 2.5f, 3.0f, 3.5f, 4.0f, 5.0f, 6.0f};
  int checked = 0;
  for (int k = -127; k <= cuda::fp4::kE2m1MagicMaxK; ++k) {
    const float sc = fmt::pow2f(k);
    auto check = [&](float v) {
      for (float sign : {1.0f, -1.0f}) {
        const float w = sign * v * sc;  // exact unless w is subnormal (then tiny: code 0 either way)
        const uint8_t want = fmt::encode_e2m1(w * fmt::pow2f(-k));
        const uint8_t got = magic_code(w, k);
        ++checked;
        if (got != want) {
          ADD_FAILURE() << "k " << k << " w " << w << " (bits 0x" << std::hex << fmt::float_bits(w) << "): magic 0x"
                        << int(got) << ", reference 0x" << int(want);
          return false;
        }
      }
      return true;
    };
    for (float p : points) {
      const uint32_t b = fmt::float_bits(p);
      if (!check(p)) return;
      if (p > 0.0f && !check(fmt::bits_float(b - 1))) return;
      if (p < 6.0f && !check(fmt::bits_float(b + 1))) return;
    }
    for (int i = 0; i < 200; ++i) {
      if (!check(unit(rng))) return;
    }
    // w itself subnormal or tiny against 2^k.
    if (!check(fmt::bits_float(1u))) return;
  }
  // Packing: 32 codes with their signs, low nibble = even element.
  uint32_t mb[32], sb[32];
  uint8_t want[32];
  for (int i = 0; i < 32; ++i) {
    const float w = (i % 3 == 0 ? -1.0f : 1.0f) * unit(rng);
    mb[i] = cuda::fp4::e2m1_magic_bits(w, cuda::fp4::e2m1_magic(0));
    sb[i] = fmt::float_bits(w);
    want[i] = fmt::encode_e2m1(w);
  }
  const uint4 p = cuda::fp4::pack_codes_signs(mb, sb);
  const uint32_t words[4] = {p.x, p.y, p.z, p.w};
  for (int i = 0; i < 32; ++i) EXPECT_EQ((words[i / 8] >> (4 * (i % 8))) & 0xFu, want[i]) << "element " << i;
  EXPECT_GT(checked, 100000);
}

// The branch-light stochastic E2M1 encoder of the SR kernels against fmt::encode_e2m1_sr: every
// float exponent, random and edge mantissas (0, 1, the half point, all ones), both signs, random
// random words and the words right at and around each element's threshold; plus zeros,
// subnormals, infinities and NaN.
TEST(E2m1SrEncoder, CpuEqualsReferenceEverywhere) {
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  int checked = 0;
  auto check = [&](float x, uint32_t r) {
    ++checked;
    const uint32_t got = cuda::fp4::encode_e2m1_sr_fast(x, r);
    const uint8_t want = fmt::encode_e2m1_sr(x, r);
    if (got != want) {
      ADD_FAILURE() << "x " << x << " (0x" << std::hex << fmt::float_bits(x) << ") r 0x" << r << ": fast 0x" << got
                    << ", reference 0x" << int(want);
      return false;
    }
    return true;
  };
  const uint32_t mantissas[] = {0u, 1u, 0x200000u, 0x400000u, 0x3fffffu, 0x7fffffu, 0x400001u};
  for (uint32_t e = 0; e <= 255; ++e) {
    for (int t = 0; t < 40; ++t) {
      const uint32_t m = t < 7 ? mantissas[t] : static_cast<uint32_t>(rng()) & 0x7fffffu;
      for (uint32_t sign : {0u, 0x80000000u}) {
        const float x = fmt::bits_float(sign | (e << 23) | m);
        // words around the threshold where the decision flips: find it by the reference's own P(up)
        uint32_t lo = 0, hi = 0xffffffffu;
        if (fmt::encode_e2m1_sr(x, 0) != fmt::encode_e2m1_sr(x, 0xffffffffu)) {
          while (hi - lo > 1) {  // largest r still rounding up is lo
            const uint32_t mid = lo + (hi - lo) / 2;
            (fmt::encode_e2m1_sr(x, mid) == fmt::encode_e2m1_sr(x, 0) ? lo : hi) = mid;
          }
        }
        for (uint32_t r : {0u, 1u, 0xffffffffu, lo, lo + 1, hi, hi - 1, static_cast<uint32_t>(rng())}) {
          if (!check(x, r)) return;
        }
      }
    }
  }
  EXPECT_GT(checked, 100000);
}

// The saturating form (MX quantizer, OCP scale: |x| 2^-k reaches [6, 8)): every value of a finite
// group, i.e. |w| 2^-k < 8, must encode as fmt::encode_e2m1(w * 2^-k), 6 and above to code 7.
TEST(E2m1MagicEncoder, SaturatingCpuEqualsReferenceBelowEight) {
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  std::uniform_real_distribution<float> unit(0.0f, 8.0f);
  const float points[] = {0.0f, 0.25f, 0.75f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f, 6.5f, 7.0f, 7.5f, 7.999999f};
  int checked = 0;
  for (int k = -127; k <= cuda::fp4::kE2m1MagicMaxK; ++k) {
    const cuda::fp4::E2m1Magic mg = cuda::fp4::e2m1_magic(k);
    auto check = [&](float v) {
      for (float sign : {1.0f, -1.0f}) {
        const float w = sign * v * fmt::pow2f(k);
        const uint8_t want = fmt::encode_e2m1(w * fmt::pow2f(-k));
        const uint32_t mb = cuda::fp4::e2m1_magic_bits_sat(w, mg);
        const uint8_t got = static_cast<uint8_t>((mb & 0x7u) | ((fmt::float_bits(w) >> 28) & 0x8u));
        ++checked;
        if (got != want) {
          ADD_FAILURE() << "k " << k << " w " << w << ": saturating magic 0x" << std::hex << int(got)
                        << ", reference 0x" << int(want);
          return false;
        }
      }
      return true;
    };
    for (float p : points) {
      if (!check(p)) return;
      if (p > 0.0f && !check(fmt::bits_float(fmt::float_bits(p) - 1))) return;
      if (!check(fmt::bits_float(fmt::float_bits(p) + 1))) return;
    }
    for (int i = 0; i < 100; ++i) {
      if (!check(unit(rng))) return;
    }
  }
  EXPECT_GT(checked, 50000);
}

__global__ void compare_all(unsigned long long* mismatches) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t b = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; b < (uint64_t{1} << 32); b += stride) {
    const uint32_t bits = static_cast<uint32_t>(b);
    const float x = fmt::bits_float(bits);
    const uint8_t want = fmt::encode_e2m1(x);
    bool bad = cuda::fp4::encode_e2m1_fadd(x) != want;
    // The unclamped magnitude path (backward quantizer) on every non-negative float below 7.
    if (bits < 0x40E00000u) bad |= cuda::fp4::e2m1_magnitude_fadd(x) != want;
    if (bad) atomicAdd(mismatches, 1ull);
  }
}

TEST(E2m1FaddEncoder, GpuExhaustiveAllFloatBitPatterns) {
  NIBBLE_REQUIRE_GPU();
  DeviceBuffer<unsigned long long> d(1);
  NIBBLE_CUDA_CHECK(cudaMemset(d.p, 0, sizeof(unsigned long long)));
  compare_all<<<4096, 256>>>(d.p);
  NIBBLE_CHECK_LAUNCH();
  EXPECT_EQ(d.download()[0], 0ull);
}


// ---- the BF16-pair three-add encoder (MXFP4 of BF16 input, nearest) -------------------------------
// Reference for element x of a group with scale 2^k: fmt::encode_e2m1(x 2^-k) (satfinite, sign kept;
// clamped to +-8 first so that no product overflows: every magnitude from 6 up is code 7 either way).
__host__ __device__ uint8_t bf16_reference_code(uint16_t x, int k) {
  const float v = fmt::decode_bf16(x) * fmt::pow2f(-k);
  return fmt::encode_e2m1(v > 8.0f ? 8.0f : (v < -8.0f ? -8.0f : v));
}
// Non-finite patterns never reach the encoder (their group's scale is NaN): test their sign as zero.
__host__ __device__ uint16_t finite_or_signed_zero(uint32_t p) {
  return static_cast<uint16_t>(((p >> 7) & 0xffu) == 0xffu ? p & 0x8000u : p);
}

// IEEE round-to-nearest-even to BF16 (8-bit significand, subnormals down to 2^-133), as a model of
// add.rn.bf16x2 / fma.rn.bf16x2 / min.bf16x2 on one lane; sums of BF16 values are exact in double
// here or far below half an ulp of the constant they are added to.
double bf16_rne(double v) {
  if (v == 0.0) return v;
  int e = 0;
  std::frexp(v, &e);                         // |v| in [2^(e-1), 2^e)
  const double q = std::ldexp(1.0, std::max(e - 8, -133));
  return std::nearbyint(v / q) * q;          // default rounding mode: to nearest, ties to even
}
double bf16_half(uint32_t pair) { return fmt::decode_bf16(static_cast<uint16_t>(pair & 0xffffu)); }
uint16_t bf16_bits_of(double v) { return static_cast<uint16_t>(fmt::float_bits(static_cast<float>(v)) >> 16); }

// The encoder's magnitude code of BF16 x under the model (what e2m1_magic_bf16x2 computes per lane).
uint32_t bf16_model_code(uint16_t x, int k) {
  const cuda::fp4::Bf16Magic m = cuda::fp4::bf16_magic(k);
  const double a = std::min(std::fabs(static_cast<double>(fmt::decode_bf16(x))), bf16_half(m.sat));
  const double y0 = bf16_rne(a + bf16_half(m.m0));
  const double x1 = bf16_rne(bf16_rne(a + bf16_half(m.m1)) * 0.5 + bf16_half(m.h1));
  const double x2 = bf16_rne(bf16_rne(a + bf16_half(m.m2)) * 0.25 + bf16_half(m.h2));
  const uint16_t lo = std::min({bf16_bits_of(y0), bf16_bits_of(x1), bf16_bits_of(x2)});
  return lo & 0x7u;
}

TEST(E2m1MagicEncoder, Bf16PairsCpuModelEqualsReferenceOnEveryBf16AndScale) {
  static_assert(cuda::fp4::kBf16x2Half == 0x3f003f00u && cuda::fp4::kBf16x2Quarter == 0x3e803e80u, "0.5, 0.25");
  int64_t checked = 0;
  for (int k = cuda::fp4::kBf16MagicMinK; k <= cuda::fp4::kE2m1MagicMaxK; ++k) {
    for (uint32_t p = 0; p < 0x10000u; ++p) {
      const uint16_t x = finite_or_signed_zero(p);
      const uint32_t got = bf16_model_code(x, k) | ((x >> 12) & 0x8u);
      ++checked;
      if (got != bf16_reference_code(x, k)) {
        FAIL() << "k " << k << " x 0x" << std::hex << x << ": model 0x" << got << ", reference 0x"
               << int(bf16_reference_code(x, k));
      }
    }
  }
  EXPECT_EQ(checked, int64_t{0x10000} * (cuda::fp4::kE2m1MagicMaxK - cuda::fp4::kBf16MagicMinK + 1));
}

// The same on the GPU's own BF16 instructions and the packer: 8 consecutive patterns per thread,
// every finite BF16 for every k in range, each nibble against the reference.
__global__ void bf16_magic_all(int k0, unsigned long long* mismatches, unsigned int* first_bad) {
  const int k = k0 + static_cast<int>(blockIdx.y);
  const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;  // patterns 8 t .. 8 t + 7
  if (t >= 0x10000u / 8) return;
  uint16_t x[8];
  for (int e = 0; e < 8; ++e) x[e] = finite_or_signed_zero(8 * t + e);
  uint32_t w[4], c[4];
  const cuda::fp4::Bf16Magic mg = cuda::fp4::bf16_magic(k);
  for (int j = 0; j < 4; ++j) {
    w[j] = x[2 * j] | (static_cast<uint32_t>(x[2 * j + 1]) << 16);
    c[j] = cuda::fp4::e2m1_magic_bf16x2(w[j] & 0x7fff7fffu, mg);
  }
  const uint32_t got = cuda::fp4::pack8_bf16_codes_signs(c, w);
  for (int e = 0; e < 8; ++e) {
    if (((got >> (4 * e)) & 0xFu) != bf16_reference_code(x[e], k)) {
      if (atomicAdd(mismatches, 1ull) == 0ull) *first_bad = (static_cast<unsigned int>(k + 1000) << 16) | x[e];
    }
  }
}

TEST(E2m1MagicEncoder, Bf16PairsGpuExhaustiveEveryBf16AndScale) {
  NIBBLE_REQUIRE_GPU();
  DeviceBuffer<unsigned long long> d(1);
  DeviceBuffer<unsigned int> first(1);
  NIBBLE_CUDA_CHECK(cudaMemset(d.p, 0, sizeof(unsigned long long)));
  NIBBLE_CUDA_CHECK(cudaMemset(first.p, 0, sizeof(unsigned int)));
  const int ks = cuda::fp4::kE2m1MagicMaxK - cuda::fp4::kBf16MagicMinK + 1;
  bf16_magic_all<<<dim3(0x10000 / 8 / 256, ks), 256>>>(cuda::fp4::kBf16MagicMinK, d.p, first.p);
  NIBBLE_CHECK_LAUNCH();
  const unsigned int f = first.download()[0];
  EXPECT_EQ(d.download()[0], 0ull) << "first: k " << static_cast<int>(f >> 16) - 1000 << " x 0x" << std::hex << (f & 0xffffu);
}

}  // namespace
