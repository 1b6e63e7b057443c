// Exact NVFP4 -> BF16 decode for the BF16-emulated NVFP4 GEMM (SPEC 4): one thread per 1x16 group,
// an 8-byte code load, one UE4M3 scale byte, two 16-byte BF16 stores. The global scale stays out
// (see quantize_nvfp4.hpp: the product of two E2M1/UE4M3 values is exact in BF16, times an FP32
// global scale it is not).
#include "fp4_kernel_io.cuh"
#include "nibble/cuda/quantize_nvfp4.hpp"
#include "nibble/format/minifloat.hpp"

namespace nibble::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    decode_nvfp4_bf16_kernel(const uint8_t* __restrict__ codes, const uint8_t* __restrict__ scales, int64_t groups,
                             int64_t groups_per_row, int block_rows, uint16_t* __restrict__ out) {
  const int64_t gi = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (gi >= groups) return;
  const int64_t row = gi / groups_per_row, g = gi % groups_per_row;
  const uint2 packed = __ldg(reinterpret_cast<const uint2*>(codes) + gi);
  const float s = fmt::decode_ue4m3(__ldg(scales + (row / block_rows) * groups_per_row + g));
  // A NaN scale decodes the block as the canonical quiet NaN, as the CPU reference's x * NaN does
  // (the GPU's multiply would produce a different NaN payload).
  const bool nan_block = s != s;
  const uint32_t w[2] = {packed.x, packed.y};
  uint32_t o[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const uint32_t lo = (w[i / 4] >> (8 * (i % 4))) & 0xF, hi = (w[i / 4] >> (8 * (i % 4) + 4)) & 0xF;
    o[i] = static_cast<uint32_t>(fmt::encode_bf16(fmt::decode_e2m1(static_cast<uint8_t>(lo)) * s)) |
           (static_cast<uint32_t>(fmt::encode_bf16(fmt::decode_e2m1(static_cast<uint8_t>(hi)) * s)) << 16);
    if (nan_block) o[i] = 0x7fc07fc0u;
  }
  uint4* dst = reinterpret_cast<uint4*>(out + gi * 16);
  dst[0] = make_uint4(o[0], o[1], o[2], o[3]);
  dst[1] = make_uint4(o[4], o[5], o[6], o[7]);
}

}  // namespace

const char* decode_nvfp4_bf16(Nvfp4ConstPlanes q, int64_t rows, int64_t cols, int64_t block_rows, uint16_t* out,
                              cudaStream_t stream) {
  constexpr const char* fn = "decode_nvfp4_bf16";
  fp4::check_shape(fn, rows, cols);
  if (block_rows != 1 && block_rows != 16) {
    throw std::invalid_argument(std::string(fn) + ": block_rows = " + std::to_string(block_rows) +
                                " is not supported; use 1 (activations, gradients) or 16 (weights)");
  }
  fp4::check_multiple(fn, "cols", cols, 16, "NVFP4 blocks are 16 wide along cols");
  fp4::check_multiple(fn, "rows", rows, block_rows, "the scale grid has one row per block_rows rows");
  fp4::check_not_null(fn, "q.codes", q.codes);
  fp4::check_not_null(fn, "q.scales", q.scales);
  fp4::check_not_null(fn, "out", out);
  fp4::check_aligned(fn, "q.codes", q.codes, 8);
  fp4::check_aligned(fn, "out", out);
  const int64_t groups = rows * cols / 16;
  decode_nvfp4_bf16_kernel<<<fp4::blocks_for(groups, kThreads), kThreads, 0, stream>>>(
      q.codes, q.scales, groups, cols / 16, static_cast<int>(block_rows), out);
  NIBBLE_CHECK_LAUNCH();
  return block_rows == 16 ? "cuda decode_nvfp4_bf16 exact (16x16 scales), thread per 1x16 group"
                          : "cuda decode_nvfp4_bf16 exact (1x16 scales), thread per 1x16 group";
}

}  // namespace nibble::cuda
