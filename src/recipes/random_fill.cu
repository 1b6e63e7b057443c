#include <cmath>

#include "device_buffer.hpp"
#include "nibble/format/bf16.hpp"
#include "nibble/format/philox.hpp"

namespace nibble::recipes {
namespace {

__global__ void fill_normal_bf16_kernel(uint16_t* out, int64_t n, uint64_t seed, float stddev) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
    // Box-Muller on two 32-bit draws; u1 in (0, 1] so the log is finite.
    const uint32_t a = fmt::random_bits(seed, 0x46494c4cu, 2 * static_cast<uint64_t>(i));
    const uint32_t b = fmt::random_bits(seed, 0x46494c4cu, 2 * static_cast<uint64_t>(i) + 1);
    const float u1 = (static_cast<float>(a >> 8) + 1.0f) * (1.0f / 16777216.0f);
    const float u2 = static_cast<float>(b >> 8) * (1.0f / 16777216.0f);
    const float z = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
    out[i] = fmt::encode_bf16(z * stddev);
  }
}

}  // namespace

void fill_random_bf16(uint16_t* out, int64_t n, uint64_t seed, float stddev, cudaStream_t stream) {
  if (n <= 0) return;
  int device = 0, sms = 0;
  NIBBLE_CUDA_CHECK(cudaGetDevice(&device));
  NIBBLE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  fill_normal_bf16_kernel<<<sms * 8, 256, 0, stream>>>(out, n, seed, stddev);
  NIBBLE_CHECK_LAUNCH();
}

}  // namespace nibble::recipes
