// cuda::encode_e2m1_fast == fmt::encode_e2m1 on every one of the 2^32 float bit patterns (GPU), and
// on a dense CPU sample (every pattern within 2^12 ulps of each rounding threshold, both signs, the
// special values, a strided sweep of the whole space) so the CPU part fails without a GPU too.
// The GPU test also prints the speed of both encoders (not asserted: the lead records it).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "gpu_test_support.hpp"
#include "nibble/kernels/check.hpp"
#include "nibble/kernels/e2m1_fast_math.hpp"
#include "nibble/format.hpp"
#include "test_seed.hpp"

namespace {

using namespace nibble;

constexpr uint32_t kThresholds[] = {0x3E800000u, 0x3F400000u, 0x3FA00000u, 0x3FE00000u,
                                    0x40200000u, 0x40600000u, 0x40A00000u};

// Reports the first mismatch only (a broken encoder would otherwise print millions of lines).
bool same_on(uint32_t bits) {
  const float x = fmt::bits_float(bits);
  const uint8_t want = fmt::encode_e2m1(x), got = cuda::encode_e2m1_fast(x);
  if (got == want) return true;
  ADD_FAILURE() << "bits 0x" << std::hex << bits << " (" << x << "): fast 0x" << int(got) << ", reference 0x" << int(want);
  return false;
}

TEST(E2m1FastMath, CpuThresholdsSpecialsAndSweep) {
  for (uint32_t sign : {0u, 0x80000000u}) {
    for (uint32_t t : kThresholds) {
      for (uint32_t d = 0; d <= 4096; ++d) {
        if (!same_on(sign | (t + d)) || !same_on(sign | (t - d))) return;
      }
    }
    for (uint32_t s : {0u, 1u, 0x007fffffu, 0x00800000u, 0x7f7fffffu, 0x7f800000u, 0x7f800001u, 0x7fc00000u, 0x7fffffffu}) {
      if (!same_on(sign | s)) return;
    }
  }
  // Strided sweep with a fresh random offset, so every run covers different patterns.
  const uint32_t offset = static_cast<uint32_t>(nibble::testing::fresh_seed() % 101);
  for (uint64_t b = offset; b < (uint64_t{1} << 32); b += 101) {
    if (!same_on(static_cast<uint32_t>(b))) return;
  }
  EXPECT_EQ(cuda::encode_e2m1x2_fast(1.0f, -6.0f), 0xF2);
}

__global__ void compare_all(unsigned long long* mismatches, unsigned long long* first) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t b = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; b < (uint64_t{1} << 32); b += stride) {
    const float x = fmt::bits_float(static_cast<uint32_t>(b));
    if (cuda::encode_e2m1_fast(x) != fmt::encode_e2m1(x)) {
      atomicAdd(mismatches, 1ull);
      atomicMin(first, static_cast<unsigned long long>(b));
    }
  }
}

// Encodes every pattern and folds the codes into one word, so the timing is of the encoder alone.
template <bool kFast>
__global__ void encode_all(uint32_t* sink) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  uint32_t acc = 0;
  for (uint64_t b = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; b < (uint64_t{1} << 32); b += stride) {
    const float x = fmt::bits_float(static_cast<uint32_t>(b));
    acc = acc * 31u + (kFast ? cuda::encode_e2m1_fast(x) : fmt::encode_e2m1(x));
  }
  if (acc == 0x12345678u) *sink = acc;  // keeps the loop alive; practically never stores
}

TEST(E2m1FastMath, GpuExhaustiveAllFloatBitPatterns) {
  NIBBLE_REQUIRE_GPU();
  unsigned long long* d = nullptr;
  NIBBLE_CUDA_CHECK(cudaMalloc(&d, 2 * sizeof(unsigned long long)));
  const unsigned long long init[2] = {0ull, ~0ull};
  NIBBLE_CUDA_CHECK(cudaMemcpy(d, init, sizeof init, cudaMemcpyHostToDevice));
  compare_all<<<4096, 256>>>(d, d + 1);
  NIBBLE_CHECK_LAUNCH();
  unsigned long long got[2];
  NIBBLE_CUDA_CHECK(cudaMemcpy(got, d, sizeof got, cudaMemcpyDeviceToHost));
  EXPECT_EQ(got[0], 0ull) << "first mismatching pattern 0x" << std::hex << got[1] << " ("
                          << fmt::bits_float(static_cast<uint32_t>(got[1])) << ")";

  uint32_t* sink = reinterpret_cast<uint32_t*>(d);
  cudaEvent_t e0, e1, e2;
  NIBBLE_CUDA_CHECK(cudaEventCreate(&e0));
  NIBBLE_CUDA_CHECK(cudaEventCreate(&e1));
  NIBBLE_CUDA_CHECK(cudaEventCreate(&e2));
  encode_all<true><<<4096, 256>>>(sink);  // warm-up
  NIBBLE_CUDA_CHECK(cudaEventRecord(e0));
  encode_all<true><<<4096, 256>>>(sink);
  NIBBLE_CUDA_CHECK(cudaEventRecord(e1));
  encode_all<false><<<4096, 256>>>(sink);
  NIBBLE_CUDA_CHECK(cudaEventRecord(e2));
  NIBBLE_CUDA_CHECK(cudaEventSynchronize(e2));
  float fast_ms = 0, generic_ms = 0;
  NIBBLE_CUDA_CHECK(cudaEventElapsedTime(&fast_ms, e0, e1));
  NIBBLE_CUDA_CHECK(cudaEventElapsedTime(&generic_ms, e1, e2));
  std::printf("e2m1 encode of 2^32 floats: fast %.2f ms (%.1f Gelem/s), generic fmt::encode_e2m1 %.2f ms (%.1f Gelem/s)\n",
              fast_ms, 4294.967296 / fast_ms, generic_ms, 4294.967296 / generic_ms);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaEventDestroy(e2);
  cudaFree(d);
}

}  // namespace

// cuda::div_rn_by_recip == v / d (bit for bit) wherever the NVFP4 quantizer uses it: d = every
// positive UE4M3 block scale times global scales from 2^-40 to 2^40 (random mantissas, plus the
// exact powers of two and all-ones mantissas), |v / d| < 8, v on and within 64 ulps of d times every
// E2M1 rounding threshold and value, random quotients in [2^-40, 8), and every mantissa of v in the
// binade of 2d. Runs on the CPU (no GPU needed), with the host's FMA.
TEST(E2m1FastMath, CpuReciprocalDivisionIsCorrectlyRounded) {
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  const float points[] = {0.25f, 0.5f, 0.75f, 1.0f, 1.25f, 1.5f, 1.75f, 2.0f, 2.5f, 3.0f, 3.5f, 4.0f, 5.0f, 6.0f};
  int64_t checked = 0, bad = 0;
  auto check = [&](float v, float d, float r) {
    if (!(std::fabs(v * r) < 8.0f)) return;
    ++checked;
    const float want = v / d, got = cuda::div_rn_by_recip(v, d, r);
    if (fmt::float_bits(std::fabs(want)) != fmt::float_bits(std::fabs(got)) && bad++ < 5) {
      ADD_FAILURE() << "v " << std::hexfloat << v << " / d " << d << ": got " << got << ", want " << want;
    }
  };
  std::vector<float> globals;
  for (int e = -40; e <= 40; e += 4) {
    globals.push_back(fmt::pow2f(e));
    globals.push_back(fmt::bits_float(fmt::float_bits(fmt::pow2f(e)) | 0x7fffffu));
    globals.push_back(fmt::bits_float(fmt::float_bits(fmt::pow2f(e)) | static_cast<uint32_t>(rng() & 0x7fffffu)));
  }
  for (int code = 1; code < 0x7f; ++code) {
    for (float s : globals) {
      const float d = fmt::decode_ue4m3(static_cast<uint8_t>(code)) * s;
      if (!(d >= cuda::kRecipDivMin && d <= cuda::kRecipDivMax)) continue;
      const float r = 1.0f / d;
      for (float p : points) {
        const uint32_t c = fmt::float_bits(p * d);
        for (uint32_t k = 0; k <= 64; ++k) {
          check(fmt::bits_float(c + k), d, r);
          check(-fmt::bits_float(c - k), d, r);
        }
      }
      for (int i = 0; i < 64; ++i) {
        const float q = fmt::pow2f(-40 + static_cast<int>(rng() % 43)) * (1.0f + static_cast<float>(rng() % 8388608) / 8388608.0f);
        check(q * d, d, r);
      }
    }
  }
  // Every mantissa of v in [2d, 4d) for a few denominators (quotients in [2, 4): the E2M1 step 1).
  for (float d : {0.7f * 1e-3f, 1.0f / 3.0f, 448.0f * 0x1p-30f, fmt::bits_float(0x3fffffffu)}) {
    const float r = 1.0f / d;
    const uint32_t lo = fmt::float_bits(2.0f * d), hi = fmt::float_bits(4.0f * d);
    for (uint32_t b = lo; b < hi; b += 1) check(fmt::bits_float(b), d, r);
  }
  EXPECT_EQ(bad, 0) << "of " << checked << " quotients";
  EXPECT_GT(checked, 30000000);
}

// cuda::nvfp4_scale_quotient_by_recip == (amax / 6) / s (the quotient of quant::nvfp4_block_scale_code)
// bit for bit wherever the NVFP4 quantizer uses it (amax in [2^-36, FLT_MAX], s in the reciprocal
// range, a result below kScaleQuotientMax), and the UE4M3 code equal where a tiny quotient is off by
// one ulp. Global scales as the kernel sees them (amax_tensor / 2688 with amax_tensor >= amax) and
// arbitrary ones; amaxes at every exponent with random, all-ones and E4M3-tie mantissas. CPU only.
TEST(E2m1FastMath, CpuScaleQuotientMatchesTheDivisions) {
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  int64_t checked = 0, bad = 0;
  auto check = [&](float amax, float s) {
    if (!(amax >= cuda::kScaleQuotientAmaxMin && amax <= 0x1.fffffep127f)) return;
    if (!(s >= cuda::kRecipDivMin && s <= cuda::kRecipDivMax)) return;
    const float rs = 1.0f / s;
    const float got = cuda::nvfp4_scale_quotient_by_recip(amax, s, rs);
    if (!(got < cuda::kScaleQuotientMax)) return;  // the kernel divides instead
    ++checked;
    const float want = (amax / 6.0f) / s;
    const bool same = want >= 0x1p-40f ? fmt::float_bits(got) == fmt::float_bits(want)
                                       : fmt::encode_ue4m3(got) == fmt::encode_ue4m3(want);
    if (!same && bad++ < 5) ADD_FAILURE() << std::hexfloat << "amax " << amax << " s " << s << ": got " << got << ", want " << want;
  };
  for (int e = -36; e <= 127; ++e) {
    const float base = fmt::pow2f(e);
    std::vector<float> amaxes = {base, fmt::bits_float(fmt::float_bits(base) | 0x7fffffu)};
    for (int i = 0; i < 48; ++i) amaxes.push_back(fmt::bits_float(fmt::float_bits(base) | static_cast<uint32_t>(rng() & 0x7fffffu)));
    for (int m = 0; m < 16; ++m) amaxes.push_back(fmt::bits_float(fmt::float_bits(base) | (static_cast<uint32_t>(m) << 19) | 0x40000u));
    for (float a : amaxes) {
      for (int k = 0; k < 24; ++k) {
        const float tensor = a * fmt::pow2f(static_cast<int>(rng() % 40)) * (1.0f + static_cast<float>(rng() % 1024) / 1024.0f);
        check(a, tensor / 2688.0f);
        check(a, fmt::pow2f(static_cast<int>(rng() % 160) - 60) * (1.0f + static_cast<float>(rng() % 8388608) / 8388608.0f));
      }
      check(a, a / 2688.0f);
      check(a, 1.0f);
    }
  }
  EXPECT_EQ(bad, 0) << "of " << checked << " quotients";
  EXPECT_GT(checked, 300000);
}

// The NVFP4 amax pass's shortcut for the rotation's last butterfly (quantize_nvfp4.cu,
// rotated_max_abs16): for finite a, b with a finite result, max(|RN(a + b)|, |RN(a - b)|) ==
// RN(|a| + |b|) bit for bit. Random pairs over every exponent (subnormals and zeros included, both
// signs, near-equal magnitudes where a - b cancels) on the host's round-to-nearest arithmetic.
TEST(E2m1FastMath, CpuLastButterflyMaxIsTheMagnitudeSum) {
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  int64_t checked = 0, bad = 0;
  auto check = [&](float a, float b) {
    const float want = std::max(std::fabs(a + b), std::fabs(a - b));
    const float got = std::fabs(a) + std::fabs(b);
    if (!std::isfinite(got)) return;  // the kernel redoes the stage for an infinite sum
    ++checked;
    if (fmt::float_bits(want) != fmt::float_bits(got) && bad++ < 5) {
      ADD_FAILURE() << std::hexfloat << "a " << a << " b " << b << ": max " << want << ", |a| + |b| " << got;
    }
  };
  auto random_float = [&]() { return fmt::bits_float(static_cast<uint32_t>(rng()) & 0xff7fffffu); };  // finite
  for (int i = 0; i < 2000000; ++i) {
    const float a = random_float();
    check(a, random_float());
    const float near = fmt::bits_float(fmt::float_bits(a) + static_cast<uint32_t>(rng() % 64));  // a - b cancels
    check(a, near);
    check(a, -near);
    check(a, std::ldexp(random_float(), -static_cast<int>(rng() % 30)));
  }
  for (float a : {0.0f, -0.0f, 0x1p-149f, -0x1p-149f, 0x1.fffffep127f}) {
    for (float b : {0.0f, -0.0f, 0x1p-149f, 1.0f, -1.0f}) check(a, b);
  }
  EXPECT_EQ(bad, 0) << "of " << checked;
  EXPECT_GT(checked, 7000000);
}
