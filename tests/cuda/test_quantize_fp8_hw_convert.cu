// The hardware FP8 converter path (include/nibble/cuda/fp8_hw_convert_math.hpp) against the shared
// software encoders, on every one of the 2^32 float bit patterns: the kernels' nearest-even path is
// bit-exact only if this holds.
#include <gtest/gtest.h>

#include "gpu_test_support.hpp"
#include "nibble/cuda/fp8_hw_convert_math.hpp"
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

}  // namespace
