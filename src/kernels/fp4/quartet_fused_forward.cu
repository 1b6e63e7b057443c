// Fused Quartet forward quantizer for Hopper: Hadamard + QuEST per 1x32 group and the exact E4M3
// re-encoding with one scale per row (docs/spec.md §4), in one pass over the input (quartet_fused.hpp).
//
// One CTA per row. Thread t owns the 32-groups t, t + blockDim, ... of its row (PER of them, in
// registers as 16 packed bytes + the E8M0 code): it loads each with 16-byte loads, rotates it with
// quant::rotate_block_forward and quantizes it with fp4::quest_group_packed (the expressions of
// quant::quest_group, see quartet_fused_group_math.cuh), optionally storing the MXFP4 planes. A CTA
// reduction gives the row's k_max / k_min over blocks holding a non-zero code; the E4M3 codes are
// then written from registers (lane pairs swapping halves so that each warp store covers whole
// sectors), 4 elements per byte-permute lookup of the closed-form table of
// reencode.hpp (the shift k_j - k_max + 6 of every block of an exact row is in [-8, 6]); blocks out
// of that range (violating rows only) take quant::reencode_e2m1_as_e4m3 per element, as the
// standalone re-encoder (reencode_mxfp4_e4m3.cu) does.
#include <stdexcept>
#include <string>

#include "fp4/fp4_kernel_io.cuh"
#include "nibble/kernels/quartet_fused.hpp"
#include "nibble/kernels/reencode.hpp"
#include "nibble/format/e8m0.hpp"
#include "nibble/quant/hadamard.hpp"
#include "fp4/mxfp4_row_reencode.cuh"
#include "fp4/quartet_fused_group_math.cuh"

namespace nibble::cuda {
namespace {

using row_reencode::block_e4m3;
using row_reencode::block_exponent;
using row_reencode::cta_extremes;
using row_reencode::kMaxPer;
using row_reencode::kMaxThreads;
using row_reencode::kNoBlock;

// Stores each lane's 32 E4M3 bytes (o, for the block at `out`) so that every warp store covers
// whole 32-byte sectors: lanes 2j and 2j+1 (blocks b, b+1 of the row, adjacent in memory) swap
// halves, then the first store writes block b (low half from lane 2j, high half from lane 2j+1)
// and the second block b+1. Storing its own two halves, a lane would write half sectors 32 bytes
// apart, twice the L2 store transactions. `mine`: this lane has a block; every lane of the warp
// must call this (it shuffles).
__device__ __forceinline__ void store_e4m3_paired(const uint32_t (&o)[8], bool mine, uint8_t* __restrict__ out) {
  const bool odd = (threadIdx.x & 1u) != 0;
  const bool pair = mine && __shfl_xor_sync(0xffffffffu, static_cast<int>(mine), 1) != 0;
  uint32_t recv[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) recv[j] = __shfl_xor_sync(0xffffffffu, odd ? o[j] : o[4 + j], 1);
  if (pair) {
    // Even lane: own low half at out, partner's low half at out + 32 (block b + 1).
    // Odd lane: partner's high half at out - 16 (block b - 1), own high half at out + 16.
    uint4* first = reinterpret_cast<uint4*>(odd ? out - 16 : out);
    uint4* second = reinterpret_cast<uint4*>(odd ? out + 16 : out + 32);
    *first = odd ? make_uint4(recv[0], recv[1], recv[2], recv[3]) : make_uint4(o[0], o[1], o[2], o[3]);
    *second = odd ? make_uint4(o[4], o[5], o[6], o[7]) : make_uint4(recv[0], recv[1], recv[2], recv[3]);
  } else if (mine) {
    uint4* dst = reinterpret_cast<uint4*>(out);
    dst[0] = make_uint4(o[0], o[1], o[2], o[3]);
    dst[1] = make_uint4(o[4], o[5], o[6], o[7]);
  }
}

template <int R, bool kQuest, int PER, class In>
__global__ void __launch_bounds__(kMaxThreads)
    quartet_forward_e4m3_kernel(const In* __restrict__ x, int64_t cols, Mxfp4Planes mx, Fp8RowOperand fp8) {
  const int64_t row = blockIdx.x;
  const int nb = static_cast<int>(cols / 32);
  uint4 c[PER];
  uint8_t s[PER];
  int k_max = kNoBlock, k_min = 1000;
  // Group i + 1's loads are issued before group i is computed, so they are in flight meanwhile.
  fp4::RawGroup<32, In> raw;
  if (static_cast<int>(threadIdx.x) < nb) fp4::fetch_raw(raw, x + (row * nb + threadIdx.x) * 32);
#pragma unroll
  for (int i = 0; i < PER; ++i) {
    const int b = i * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x);
    c[i] = make_uint4(0, 0, 0, 0);
    s[i] = fmt::kE8M0Nan;
    if (b >= nb) continue;  // then every later group of this thread is out of the row too
    const int64_t gi = row * nb + b;  // group index = element index / 32
    float v[32];
    fp4::unpack_raw(raw, v);
    const int next = b + static_cast<int>(blockDim.x);
    if (i + 1 < PER && next < nb) fp4::fetch_raw(raw, x + (row * nb + next) * 32);
    if constexpr (R > 0) {
      constexpr quant::Rotation rot{R, quant::SignKind::none, 0};
#pragma unroll
      for (int j = 0; j < 32 / R; ++j) quant::rotate_block_forward(v + j * R, rot);
    }
    uint32_t trusted;
    s[i] = kQuest ? fp4::quest_group_packed(v, c[i], trusted) : fp4::absmax_forward_group_packed(v, c[i], trusted);
    if (mx.codes != nullptr) reinterpret_cast<uint4*>(mx.codes)[gi] = c[i];
    if (mx.scales != nullptr) mx.scales[gi] = s[i];
    if (mx.mask != nullptr) reinterpret_cast<uint32_t*>(mx.mask)[gi] = trusted;
    const int k = block_exponent(c[i], s[i]);
    k_max = max(k_max, k);
    k_min = k == kNoBlock ? k_min : min(k_min, k);
  }
  cta_extremes(k_max, k_min);
  const bool any = k_max != kNoBlock;
  const int kset = any ? k_max : 0;  // a row without any non-zero code: k_max = 0, as the reference
  if (threadIdx.x == 0) {
    fp8.row_scales[scale_layout::outer_vec_index(row)] = fmt::pow2f(kset - 6);
    if (any && k_max - k_min > quant::kReencodeMaxSpread && fp8.violating_rows != nullptr) {
      atomicAdd(fp8.violating_rows, 1);
    }
  }
#pragma unroll
  for (int i = 0; i < PER; ++i) {
    const int b = i * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x);
    uint32_t o[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (b < nb) block_e4m3(c[i], s[i], kset, o);
    store_e4m3_paired(o, b < nb, fp8.codes + row * cols + static_cast<int64_t>(b) * 32);
  }
}

// At least 2 groups per thread, so that a thread has its next group's loads in flight while it computes.
constexpr int kMinGroupsPerThread = 2;

template <int R, bool kQuest, class In>
void launch(const In* x, int64_t rows, int64_t cols, Mxfp4Planes mx, Fp8RowOperand fp8, cudaStream_t stream) {
  const int64_t nb = cols / 32;
  // Groups per thread: kMinGroupsPerThread, more while the row would need over 512 threads.
  const int per = row_reencode::blocks_per_thread(nb, kMinGroupsPerThread);
  const int64_t want = (nb + per - 1) / per;
  const int threads = static_cast<int>(((want + 31) / 32) * 32);
  const dim3 grid(static_cast<unsigned>(rows));
  auto go = [&](auto kernel) { kernel<<<grid, threads, 0, stream>>>(x, cols, mx, fp8); };
  switch (per) {
    case 2: go(quartet_forward_e4m3_kernel<R, kQuest, 2, In>); break;
    case 4: go(quartet_forward_e4m3_kernel<R, kQuest, 4, In>); break;
    default: go(quartet_forward_e4m3_kernel<R, kQuest, kMaxPer, In>); break;
  }
  NIBBLE_CHECK_LAUNCH();
}

template <class In>
void dispatch(const In* x, int64_t rows, int64_t cols, const QuartetForwardOptions& o, Mxfp4Planes mx,
              Fp8RowOperand fp8, cudaStream_t stream) {
  const bool quest = o.quantizer == quant::ForwardQuantizer::quest;
  const int r = o.rotate ? o.hadamard_size : 0;
  if (quest) {
    if (r == 0) return launch<0, true>(x, rows, cols, mx, fp8, stream);
    if (r == 16) return launch<16, true>(x, rows, cols, mx, fp8, stream);
    return launch<32, true>(x, rows, cols, mx, fp8, stream);
  }
  if (r == 0) return launch<0, false>(x, rows, cols, mx, fp8, stream);
  if (r == 16) return launch<16, false>(x, rows, cols, mx, fp8, stream);
  return launch<32, false>(x, rows, cols, mx, fp8, stream);
}

}  // namespace

const char* quartet_forward_quantize_e4m3(const void* x, Fp4DenseType type, int64_t rows, int64_t cols,
                                          const QuartetForwardOptions& options, Mxfp4Planes mxfp4,
                                          Fp8RowOperand fp8, cudaStream_t stream) {
  constexpr const char* fn = "quartet_forward_quantize_e4m3";
  fp4::check_shape(fn, rows, cols);
  fp4::check_multiple(fn, "cols", cols, 32, "one thread quantizes whole 1x32 groups along cols");
  if (cols > static_cast<int64_t>(kMaxPer) * kMaxThreads * 32) {
    throw std::invalid_argument(std::string(fn) + ": cols = " + std::to_string(cols) +
                                " exceeds 131072 (one CTA holds a row's groups in registers); use "
                                "quartet_forward_quantize followed by reencode_mxfp4_e4m3");
  }
  if (options.rotate && options.hadamard_size != 16 && options.hadamard_size != 32) {
    throw std::invalid_argument(std::string(fn) + ": hadamard_size " + std::to_string(options.hadamard_size) +
                                " is not supported by the fused kernel (one thread holds one 32-group); use 16 or "
                                "32, or quartet_forward_quantize followed by reencode_mxfp4_e4m3");
  }
  fp4::check_not_null(fn, "x", x);
  fp4::check_not_null(fn, "fp8.codes", fp8.codes);
  fp4::check_not_null(fn, "fp8.row_scales", fp8.row_scales);
  fp4::check_aligned(fn, "x", x);
  fp4::check_aligned(fn, "fp8.codes", fp8.codes);
  fp4::check_aligned(fn, "fp8.row_scales", fp8.row_scales, 4);
  fp4::check_aligned(fn, "mxfp4.codes", mxfp4.codes);
  fp4::check_grid_scales(fn, "mxfp4", mxfp4);
  fp4::check_aligned(fn, "mxfp4.mask", mxfp4.mask, 4);
  fp4::check_aligned(fn, "fp8.violating_rows", fp8.violating_rows, 4);
  if (fp8.violating_rows != nullptr) {
    NIBBLE_CUDA_CHECK(cudaMemsetAsync(fp8.violating_rows, 0, sizeof(int), stream));
  }
  if (type == Fp4DenseType::bf16) {
    dispatch(static_cast<const uint16_t*>(x), rows, cols, options, mxfp4, fp8, stream);
  } else {
    dispatch(static_cast<const float*>(x), rows, cols, options, mxfp4, fp8, stream);
  }
  const bool quest = options.quantizer == quant::ForwardQuantizer::quest;
  return quest ? "cuda quartet_forward_e4m3 fused hadamard+quest -> mxfp4 + exact e4m3 row scales (outer_vec), CTA per row"
               : "cuda quartet_forward_e4m3 fused hadamard+absmax (prescale 0.75) -> mxfp4 + exact e4m3 row scales (outer_vec), CTA per row";
}

}  // namespace nibble::cuda
