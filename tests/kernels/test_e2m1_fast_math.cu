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
