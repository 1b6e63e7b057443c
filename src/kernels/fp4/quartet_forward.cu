// Quartet forward quantizer: Hadamard (no signs) along cols fused with QuEST (or absmax) per 1x32
// group, writing packed E2M1 codes, E8M0 scales and the bit-packed trust mask in one pass.
//
// One thread owns one rotation block (max(32, size) elements): it loads the block with 16-byte
// loads, rotates it in registers with the CPU reference's own quant::rotate_block_forward and
// quantizes it with fp4::quest_group_packed / absmax_forward_group_packed: quant::quest_group's
// expressions in the same order, with the one-add E2M1 encoder (e2m1_element_math.cuh), so
// results stay bit-identical while the per-element integer work drops from ~25 ops to ~6.
#include "fp4/fp4_kernel_io.cuh"
#include "fp4/quartet_fused_group_math.cuh"
#include "nibble/quant/element_codecs.hpp"
#include "nibble/quant/hadamard.hpp"

namespace nibble::cuda {
namespace {

constexpr int kThreads = 256;

template <int R, bool kQuest, class In>
__global__ void __launch_bounds__(kThreads)
    quartet_forward_kernel(const In* __restrict__ x, int64_t rows, int64_t cols,
                           uint8_t* __restrict__ codes, uint8_t* __restrict__ scales, uint8_t* __restrict__ mask) {
  constexpr int N = R > 32 ? R : 32;  // elements per thread: whole rotation blocks, whole groups
  const int64_t per_row = cols / N;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (item >= rows * per_row) return;
  const int64_t row = item / per_row;
  const int64_t col0 = (item % per_row) * N;
  const int64_t base = row * cols + col0;

  float v[N];
  fp4::load_dense<N>(x + base, v);
  if constexpr (R > 0) {
    constexpr quant::Rotation rot{R, quant::SignKind::none, 0};
#pragma unroll
    for (int b = 0; b < N / R; ++b) quant::rotate_block_forward(v + b * R, rot);
  }
#pragma unroll
  for (int g = 0; g < N / 32; ++g) {
    uint4 packed;
    uint32_t trusted;
    const uint8_t s = kQuest ? fp4::quest_group_packed(v + 32 * g, packed, trusted)
                             : fp4::absmax_forward_group_packed(v + 32 * g, packed, trusted);
    const int64_t gi = (base + 32 * g) / 32;
    reinterpret_cast<uint4*>(codes)[gi] = packed;
    scales[gi] = s;
    if (mask != nullptr) reinterpret_cast<uint32_t*>(mask)[gi] = trusted;
  }
}

template <int R, class In>
void launch_forward(const In* x, int64_t rows, int64_t cols, bool quest, Mxfp4Planes out, cudaStream_t stream) {
  constexpr int N = R > 32 ? R : 32;
  const unsigned grid = fp4::blocks_for(rows * (cols / N), kThreads);
  if (quest) {
    quartet_forward_kernel<R, true, In><<<grid, kThreads, 0, stream>>>(x, rows, cols, out.codes, out.scales, out.mask);
  } else {
    quartet_forward_kernel<R, false, In><<<grid, kThreads, 0, stream>>>(x, rows, cols, out.codes, out.scales, out.mask);
  }
  NIBBLE_CHECK_LAUNCH();
}

template <class In>
void dispatch_forward(const In* x, int64_t rows, int64_t cols, const QuartetForwardOptions& o, Mxfp4Planes out,
                      cudaStream_t stream) {
  const bool quest = o.quantizer == quant::ForwardQuantizer::quest;
  if (!o.rotate) return launch_forward<0>(x, rows, cols, quest, out, stream);
  switch (o.hadamard_size) {
    case 16: return launch_forward<16>(x, rows, cols, quest, out, stream);
    case 32: return launch_forward<32>(x, rows, cols, quest, out, stream);
    case 64: return launch_forward<64>(x, rows, cols, quest, out, stream);
    default: return launch_forward<128>(x, rows, cols, quest, out, stream);
  }
}

}  // namespace

const char* quartet_forward_quantize(const void* x, Fp4DenseType type, int64_t rows, int64_t cols,
                                     const QuartetForwardOptions& options, Mxfp4Planes out,
                                     cudaStream_t stream) {
  constexpr const char* fn = "quartet_forward_quantize";
  fp4::check_shape(fn, rows, cols);
  if (options.rotate) fp4::check_hadamard_size(fn, options.hadamard_size, 128);
  const int n = options.rotate && options.hadamard_size > 32 ? options.hadamard_size : 32;
  fp4::check_multiple(fn, "cols", cols, n, "one thread quantizes whole 32-groups and rotation blocks along cols");
  fp4::check_not_null(fn, "x", x);
  fp4::check_not_null(fn, "out.codes", out.codes);
  fp4::check_not_null(fn, "out.scales", out.scales);
  fp4::check_grid_scales(fn, "out", out);
  fp4::check_aligned(fn, "x", x);
  fp4::check_aligned(fn, "out.codes", out.codes);
  fp4::check_aligned(fn, "out.mask", out.mask, 4);
  if (type == Fp4DenseType::bf16) {
    dispatch_forward(static_cast<const uint16_t*>(x), rows, cols, options, out, stream);
  } else {
    dispatch_forward(static_cast<const float*>(x), rows, cols, options, out, stream);
  }
  const bool quest = options.quantizer == quant::ForwardQuantizer::quest;
  if (!options.rotate) return quest ? "cuda quartet_forward quest (no rotation), thread per 1x32 group"
                                    : "cuda quartet_forward absmax, prescale 0.75 (no rotation), thread per 1x32 group";
  return quest ? "cuda quartet_forward hadamard+quest fused, thread per rotation block"
               : "cuda quartet_forward hadamard+absmax fused, prescale 0.75, thread per rotation block";
}

}  // namespace nibble::cuda
