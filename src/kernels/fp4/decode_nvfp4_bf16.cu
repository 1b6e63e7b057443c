// Exact NVFP4 -> BF16 decode for the BF16-emulated NVFP4 GEMM (docs/spec.md §4): one thread per 1x16 group,
// an 8-byte code load, one UE4M3 scale byte, two 16-byte BF16 stores. The global scale stays out
// (see quantize_nvfp4.hpp: the product of two E2M1/UE4M3 values is exact in BF16, times an FP32
// global scale it is not).
//
// Per element: the E2M1 value from a 16-entry shared table, one FP32 multiply by the block scale,
// and the product's high half: E2M1 (2 significant bits) times UE4M3 (4) has at most 6 significant
// bits and lies in [2^-10, 2688], so the FP32 product is exact and its low 16 bits are zero, which
// makes the truncation to BF16 the reference's fmt::encode_bf16 (round to nearest even) bit for bit.
// Signed zeros keep their sign (-0 * s = -0), as in the reference.
#include "fp4/fp4_kernel_io.cuh"
#include "nibble/kernels/quantize_nvfp4.hpp"
#include "nibble/format/minifloat.hpp"

namespace nibble::cuda {
namespace {

constexpr int kThreads = 256;
static_assert(kThreads >= 16, "the first 16 threads fill the E2M1 table");

__global__ void __launch_bounds__(kThreads)
    decode_nvfp4_bf16_kernel(const uint8_t* __restrict__ codes, const uint8_t* __restrict__ scales, int64_t groups,
                             int64_t groups_per_row, int block_rows, uint16_t* __restrict__ out) {
  __shared__ float e2m1[16];
  if (threadIdx.x < 16) e2m1[threadIdx.x] = fmt::decode_e2m1(static_cast<uint8_t>(threadIdx.x));
  __syncthreads();
  const int64_t gi = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (gi >= groups) return;
  const int64_t row = gi / groups_per_row, g = gi % groups_per_row;
  const uint2 packed = __ldg(reinterpret_cast<const uint2*>(codes) + gi);
  const float s = fmt::decode_ue4m3(__ldg(scales + (row / block_rows) * groups_per_row + g));
  uint32_t o[8];
  if (s != s) {
    // A NaN scale decodes the block as the canonical quiet NaN, as the CPU reference's x * NaN does
    // (the GPU's multiply would produce a different NaN payload).
#pragma unroll
    for (int i = 0; i < 8; ++i) o[i] = 0x7fc07fc0u;
  } else {
    const uint32_t w[2] = {packed.x, packed.y};
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint32_t b = w[i / 4] >> (8 * (i % 4));  // codes 2i (low nibble) and 2i + 1
      const float lo = e2m1[b & 0xF] * s, hi = e2m1[(b >> 4) & 0xF] * s;
      o[i] = __byte_perm(fmt::float_bits(lo), fmt::float_bits(hi), 0x7632);  // the two high halves
    }
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
  return block_rows == 16 ? "cuda decode_nvfp4_bf16 exact (16x16 scales), thread per 1x16 group, table + exact product"
                          : "cuda decode_nvfp4_bf16 exact (1x16 scales), thread per 1x16 group, table + exact product";
}

}  // namespace nibble::cuda
