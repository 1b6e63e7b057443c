// The hardware FP8 converter path (include/nibble/kernels/fp8_hw_convert_math.hpp) against the shared
// software encoders, on every one of the 2^32 float bit patterns: the kernels' nearest-even path is
// bit-exact only if this holds. The same for the four-codes-per-word encoder of the FP8 tile kernels
// (src/kernels/fp8/fp8_tile_128x128.cuh: packed NaN fix-up), with every float next to other floats, NaN and
// saturating values in the same word.
#include <gtest/gtest.h>

#include "gpu_test_support.hpp"
#include "nibble/kernels/fp8_hw_convert_math.hpp"
// Private to src/kernels (no public header carries it); the test reaches in on purpose.
#include "../../src/kernels/fp8/fp8_tile_128x128.cuh"
#include "test_quantize_fp8_support.hpp"

namespace {

using nibble::quant::ElementFormat;

struct Mismatch {
  unsigned long long count;
  uint32_t first_bits;
  uint32_t got;
  uint32_t want;
};

template <ElementFormat F>
__global__ void compare_all_floats(Mismatch* m) {
  const uint64_t stride = uint64_t{gridDim.x} * blockDim.x;
  for (uint64_t i = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < (uint64_t{1} << 32); i += stride) {
    const float x = __uint_as_float(static_cast<uint32_t>(i));
    const uint32_t got = nibble::cuda::fp8x2_rn_hw<F>(x, 1.0f) & 0xff;
    const uint32_t want = nibble::quant::encode_element(F, x, false, 0);
    if (got != want && atomicAdd(&m->count, 1ull) == 0) {
      m->first_bits = static_cast<uint32_t>(i);
      m->got = got;
      m->want = want;
    }
  }
}

template <ElementFormat F>
void check_exhaustive(const char* name) {
  nibble::testing::DeviceBuffer<Mismatch> m(1);
  NIBBLE_CUDA_CHECK(cudaMemset(m.ptr, 0, sizeof(Mismatch)));
  compare_all_floats<F><<<132 * 16, 256>>>(m.ptr);
  NIBBLE_CHECK_LAUNCH();
  const Mismatch h = m.download()[0];
  EXPECT_EQ(h.count, 0ull) << name << ": first mismatch at float bits 0x" << std::hex << h.first_bits << " ("
                           << __builtin_bit_cast(float, h.first_bits) << "): hardware 0x" << h.got << ", software 0x"
                           << h.want;
}

TEST(Fp8HwConvert, E4M3MatchesSoftwareOnAllFloats) {
  NIBBLE_REQUIRE_GPU();
  check_exhaustive<ElementFormat::e4m3>("e4m3");
}

TEST(Fp8HwConvert, E5M2MatchesSoftwareOnAllFloats) {
  NIBBLE_REQUIRE_GPU();
  check_exhaustive<ElementFormat::e5m2>("e5m2");
}

// Every float in every byte position of fp8x4_rn: word A = (x, x+1, x+2, x+3) by bit pattern (runs of
// NaN, inf, subnormals side by side); word B = (NaN, x, 1e30, x+1) (x beside NaN and saturation).
template <ElementFormat F>
__global__ void compare_all_floats_x4(Mismatch* m) {
  const uint64_t stride = uint64_t{gridDim.x} * blockDim.x;
  for (uint64_t i = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < (uint64_t{1} << 30); i += stride) {
    const uint32_t b0 = static_cast<uint32_t>(i) << 2;
    float x[4];
    for (int j = 0; j < 4; ++j) x[j] = __uint_as_float(b0 + j);
    const float nan = __uint_as_float(0xffc00001u), big = 1e30f;
    const uint32_t a = nibble::cuda::fp8_tile::fp8x4_rn<F>(x[0], x[1], x[2], x[3]);
    const uint32_t b = nibble::cuda::fp8_tile::fp8x4_rn<F>(nan, x[0], big, x[1]);
    const float in_b[4] = {nan, x[0], big, x[1]};
    for (int j = 0; j < 8; ++j) {
      const float v = j < 4 ? x[j] : in_b[j - 4];
      const uint32_t got = ((j < 4 ? a : b) >> (8 * (j % 4))) & 0xff;
      const uint32_t want = nibble::quant::encode_element(F, v, false, 0);
      if (got != want && atomicAdd(&m->count, 1ull) == 0) {
        m->first_bits = __float_as_uint(v);
        m->got = got;
        m->want = want;
      }
    }
  }
}

template <ElementFormat F>
void check_exhaustive_x4(const char* name) {
  nibble::testing::DeviceBuffer<Mismatch> m(1);
  NIBBLE_CUDA_CHECK(cudaMemset(m.ptr, 0, sizeof(Mismatch)));
  compare_all_floats_x4<F><<<132 * 16, 256>>>(m.ptr);
  NIBBLE_CHECK_LAUNCH();
  const Mismatch h = m.download()[0];
  EXPECT_EQ(h.count, 0ull) << name << " x4: first mismatch at float bits 0x" << std::hex << h.first_bits << " ("
                           << __builtin_bit_cast(float, h.first_bits) << "): packed 0x" << h.got << ", software 0x"
                           << h.want;
}

TEST(Fp8HwConvert, PackedE4M3MatchesSoftwareOnAllFloats) {
  NIBBLE_REQUIRE_GPU();
  check_exhaustive_x4<ElementFormat::e4m3>("e4m3");
}

TEST(Fp8HwConvert, PackedE5M2MatchesSoftwareOnAllFloats) {
  NIBBLE_REQUIRE_GPU();
  check_exhaustive_x4<ElementFormat::e5m2>("e5m2");
}

__global__ void pack_pair(uint32_t* o) { *o = nibble::cuda::fp8x2_rn_hw<ElementFormat::e4m3>(1.0f, 2.0f); }

TEST(Fp8HwConvert, FirstArgumentIsLowByte) {
  NIBBLE_REQUIRE_GPU();
  // 1.0 is 0x38 in E4M3 and 2.0 is 0x40: the pair (1, 2) must pack as 0x4038.
  nibble::testing::DeviceBuffer<uint32_t> out(1);
  out.poison(0xA5);
  pack_pair<<<1, 1>>>(out.ptr);
  NIBBLE_CHECK_LAUNCH();
  EXPECT_EQ(out.download()[0], 0x4038u);
}

__global__ void pack_quad(uint32_t* o) { *o = nibble::cuda::fp8_tile::fp8x4_rn<ElementFormat::e4m3>(1.0f, 2.0f, -1.0f, 448.0f); }

TEST(Fp8HwConvert, PackedFirstArgumentIsLowByte) {
  NIBBLE_REQUIRE_GPU();
  // 1 -> 0x38, 2 -> 0x40, -1 -> 0xB8, 448 -> 0x7E.
  nibble::testing::DeviceBuffer<uint32_t> out(1);
  out.poison(0xA5);
  pack_quad<<<1, 1>>>(out.ptr);
  NIBBLE_CHECK_LAUNCH();
  EXPECT_EQ(out.download()[0], 0x7EB84038u);
}

}  // namespace
