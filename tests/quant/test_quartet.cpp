// Quartet: QuEST against an independent double definition, trust masks, the backward quantizer's
// range and unbiasedness, and the dgrad epilogue.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "nibble/quant.hpp"
#include "test_seed.hpp"

using namespace nibble::quant;
namespace fmt = nibble::fmt;

TEST(Quest, MatchesDefinitionAndMaskMeansUnclipped) {
  const uint64_t seed = testdata::fresh_seed();
  const int64_t rows = 64, cols = 256;
  const std::vector<float> x = testdata::with_outliers(rows, cols, seed);
  const QuantizedTensor q = quantize_quartet_forward(x.data(), rows, cols, 32, false);
  int64_t untrusted = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < cols / 32; ++b) {
      const float* g = x.data() + r * cols + b * 32;
      double mean = 0, ss = 0;
      for (int i = 0; i < 32; ++i) mean += g[i];
      mean /= 32;
      for (int i = 0; i < 32; ++i) ss += (g[i] - mean) * (g[i] - mean);
      const double sigma = std::sqrt(ss / 32);
      const int k = static_cast<int>(std::floor(std::log2(0.48707976 * sigma + 1e-8)));
      const int got_k = fmt::e8m0_exponent(q.scale_codes[static_cast<size_t>(r * (cols / 32) + b)]);
      ASSERT_NEAR(got_k, k, 0) << "seed " << seed << " (float vs double may differ only at exact binade edges)";
      const double s = std::exp2(got_k);
      for (int i = 0; i < 32; ++i) {
        const double v = g[i] / s;
        const bool trusted = std::fabs(v) < 6.0;
        EXPECT_EQ(q.trusted(r, b * 32 + i), trusted);
        untrusted += !trusted;
        const float want = fmt::decode_e2m1(fmt::encode_e2m1(static_cast<float>(std::max(-6.0, std::min(6.0, v)))));
        EXPECT_EQ(fmt::decode_e2m1(q.code_at(r, b * 32 + i)), want);
        EXPECT_LE(std::fabs(q.value_at(r, b * 32 + i)), 6.0 * s);
      }
    }
  }
  EXPECT_GT(untrusted, 0) << "outliers must be clipped and masked";
}

TEST(Quest, AllZeroGroupIsZeroAndTrusted) {
  std::vector<float> x(64, 0.0f);
  for (int i = 32; i < 64; ++i) x[i] = 0.3f * (i - 40);
  const QuantizedTensor q = quantize_quartet_forward(x.data(), 1, 64, 32, true);
  // After the rotation the first group is still all zeros.
  EXPECT_EQ(fmt::e8m0_exponent(q.scale_codes[0]), fmt::floor_log2(1e-8f));
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(q.code_at(0, i), 0);
    EXPECT_TRUE(q.trusted(0, i));
  }
  for (float v : dequantize(q)) EXPECT_FALSE(std::isnan(v));
}

TEST(Quest, NanOrInfGroupIsNanAndUntrusted) {
  std::vector<float> x = testdata::gaussian(1, 64, testdata::fresh_seed());
  x[5] = INFINITY;
  x[40] = NAN;
  const QuantizedTensor q = quantize_quartet_forward(x.data(), 1, 64, 32, false);
  EXPECT_EQ(q.scale_codes[0], fmt::kE8M0Nan);
  EXPECT_EQ(q.scale_codes[1], fmt::kE8M0Nan);
  for (int i = 0; i < 64; ++i) EXPECT_FALSE(q.trusted(0, i));
  for (float v : dequantize(q)) EXPECT_TRUE(std::isnan(v));
}

TEST(Quest, ForwardRoundTripWithRotation) {
  const int64_t rows = 16, cols = 128;
  const std::vector<float> x = testdata::gaussian(rows, cols, testdata::fresh_seed());
  for (int h : {16, 32, 64, 128}) {
    const QuantizedTensor q = quantize_quartet_forward(x.data(), rows, cols, h, true);
    EXPECT_EQ(q.rotation.size, h);
    const std::vector<float> back = dequantize_original(q);
    double err = 0, ref = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      err += (back[i] - x[i]) * double(back[i] - x[i]);
      ref += double(x[i]) * x[i];
    }
    EXPECT_LT(err / ref, 0.08) << "hadamard " << h;  // QuEST clips at 6 * 2^floor(log2(0.487 sigma)): 1.5-2.9 sigma
  }
}

TEST(QuartetBackward, NeverSaturatesAndDecodesToThreeQuarters) {
  const int64_t rows = 32, cols = 256;
  const std::vector<float> x = testdata::with_outliers(rows, cols, testdata::fresh_seed());
  const QuantizedTensor q = quantize_quartet_backward(x.data(), rows, cols, 11, 32, true, SrKey{});
  EXPECT_EQ(q.prescale, 0.75f);
  EXPECT_EQ(q.rotation.signs, SignKind::seeded);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < cols / 32; ++b) {
      // scale = 2^(floor(log2 amax) - 2) of the rotated group
      std::vector<float> g(x.begin() + r * cols + b * 32, x.begin() + r * cols + b * 32 + 32);
      rotate_block_forward(g.data(), q.rotation);
      const int k = fmt::e8m0_exponent(q.scale_codes[static_cast<size_t>(r * (cols / 32) + b)]);
      EXPECT_EQ(k, fmt::floor_log2(amax_of(g.data(), 32)) - 2);
      for (int i = 0; i < 32; ++i) {
        const double v = 0.75 * g[i] / std::exp2(k);
        EXPECT_LT(std::fabs(v), 6.0) << "the 3/4 prescale keeps every element below the E2M1 max";
        EXPECT_EQ(fmt::decode_e2m1(q.code_at(r, b * 32 + i)), fmt::decode_e2m1(fmt::encode_e2m1(static_cast<float>(v))));
      }
    }
  }
}

TEST(QuartetBackward, StochasticGemmIsUnbiasedAfter16Over9) {
  // E[Q(a) . Q(b)] * 16/9 = a . b when both operands are rounded independently and stochastically.
  const int64_t k = 256;
  const uint64_t seed = testdata::fresh_seed();
  const std::vector<float> a = testdata::gaussian(1, k, seed, 0.0f), b = testdata::gaussian(1, k, seed + 1, 0.0f);
  double exact = 0;
  for (int64_t i = 0; i < k; ++i) exact += double(a[i]) * b[i];
  const int trials = 400;
  double sum = 0, sum2 = 0;
  for (int t = 0; t < trials; ++t) {
    const QuantizedTensor qa = quantize_quartet_backward(a.data(), 1, k, 5, 32, true, SrKey{true, seed + 2 * t, kStreamQuartetBackward});
    const QuantizedTensor qb = quantize_quartet_backward(b.data(), 1, k, 5, 32, true, SrKey{true, seed + 2 * t + 1, kStreamQuartetBackward});
    const double c = reference_gemm_f64(qa, qb)[0] * (16.0 / 9.0);
    sum += c;
    sum2 += c * c;
  }
  const double mean = sum / trials, sd = std::sqrt(sum2 / trials - mean * mean);
  EXPECT_NEAR(mean, exact, 5 * sd / std::sqrt(double(trials)) + 1e-6) << "seed " << seed;
}

TEST(QuartetBackward, DgradEpilogueMasksRescalesAndUnrotates) {
  const int64_t rows = 4, cols = 64;
  const std::vector<float> g = testdata::gaussian(rows, cols, testdata::fresh_seed());
  std::vector<uint8_t> mask((rows * cols + 7) / 8, 0xFF);
  mask[3] = 0x0F;  // elements 28..31 untrusted
  const Rotation rot{32, SignKind::none, 0};
  const std::vector<float> out = quartet_dgrad_epilogue(g.data(), rows, cols, mask, rot);
  std::vector<float> back = out;
  hadamard_transform(back.data(), rows, cols, rot, false);  // re-rotate to compare with G * 16/9
  for (int64_t i = 0; i < rows * cols; ++i) {
    const float want = (i >= 28 && i < 32) ? 0.0f : g[i] * kQuartetGemmRescale;
    // two rotations' rounding, relative to the row's magnitude
    EXPECT_NEAR(back[i], want, 4e-6f * amax_of(g.data() + (i / cols) * cols, cols)) << i;
  }
  EXPECT_THROW(quartet_dgrad_epilogue(g.data(), rows, cols, std::vector<uint8_t>(3), rot), std::invalid_argument);
}

// Upstream's absmax ablation: scale 2^(floor(log2 amax) - 2) / 0.75, stored as E2M1((0.75 x) 2^-k)
// with the E8M0 of 2^k and prescale 0.75; nothing clips and every element is trusted.
TEST(QuartetAbsmax, UpstreamScaleNoClipNoMask) {
  const int64_t rows = 6, cols = 64;
  std::vector<float> x = testdata::gaussian(rows, cols, testdata::fresh_seed(), 0.0f);
  x[3] = 40.0f * x[4];                        // an outlier the OCP rule would clip
  for (int i = 64; i < 96; ++i) x[i] = 0.0f;  // a zero group
  const QuantizedTensor q = quantize_quartet_forward(x.data(), rows, cols, 32, false, ForwardQuantizer::absmax);
  EXPECT_EQ(q.prescale, 0.75f);
  EXPECT_NE(q.produced_by.find("absmax, prescale 0.75"), std::string::npos) << q.produced_by;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < cols / 32; ++b) {
      const float* g = x.data() + r * cols + b * 32;
      float amax = 0.0f;
      for (int i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(g[i]));
      const uint8_t sc = q.scale_codes[static_cast<size_t>(r * (cols / 32) + b)];
      if (amax == 0.0f) {
        EXPECT_EQ(sc, 0);
      } else {
        EXPECT_EQ(static_cast<int>(sc) - 127, std::ilogb(amax) - 2);
      }
      for (int i = 0; i < 32; ++i) {
        const int64_t c = b * 32 + i, idx = r * cols + c;
        EXPECT_TRUE((q.mask[static_cast<size_t>(idx / 8)] >> (idx % 8)) & 1) << "no trust mask";
        const double v = q.value_at(r, c);  // 0.75 x on the E2M1 grid of 2^k
        if (amax == 0.0f) {                  // a zero group: no exponent (ilogb(0) is INT_MIN)
          EXPECT_EQ(v, 0.0);
          continue;
        }
        const double step = std::ldexp(0.5, std::ilogb(amax) - 2) * (std::fabs(0.75 * g[i]) >= std::ldexp(4.0, std::ilogb(amax) - 2) ? 4 : 1);
        EXPECT_LE(std::fabs(v - 0.75 * g[i]), step) << "never clips";
        EXPECT_LE(std::fabs(v), 6.0 * std::ldexp(1.0, std::ilogb(amax) - 2));
      }
    }
  }
  // The element codes are the backward quantizer's (nearest, unrotated).
  const QuantizedTensor bwd = quantize_quartet_backward(x.data(), rows, cols, 0, 32, false, SrKey{});
  EXPECT_EQ(q.codes, bwd.codes);
  EXPECT_EQ(q.scale_codes, bwd.scale_codes);
}
