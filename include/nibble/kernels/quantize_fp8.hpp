// FP8-family quantization kernels (sm_90): per-tensor cast+transpose+amax (current and delayed
// scaling), fp8-block (1x128 and 128x128), MXFP8 (32-blocks, OCP and round-up scale rules) and the
// exact MXFP8 -> BF16 decode used by the emulated GEMM.
//
// Conventions shared by every function here:
//  - x is a row-major [rows, cols] BF16 tensor given as raw bits (uint16_t), on the device.
//  - Every quantizer reads x once and writes up to two FP8 copies (codes are one byte each):
//      rowwise [rows, cols] (contiguous along cols)  and  colwise [cols, rows] (the transpose, what
//      the backward GEMMs need in Hopper's TN-only FP8 layout). A null pointer skips that copy.
//  - The per-element and per-block math is nibble::quant's (include/nibble/quant/*.hpp), the same
//    functions the CPU reference calls, so GPU results equal the reference bit for bit.
//  - Preconditions (divisibility, 16-byte alignment) are checked on the host before any launch and
//    throw std::invalid_argument naming the argument and the fix; CUDA errors throw CudaError.
//  - Stochastic rounding (SrKey::enabled) draws fmt::random_bits(seed, stream, index) with index =
//    row * cols + col of the copy being written (rowwise: (r, c) in [rows, cols]; colwise: (c, r) in
//    [cols, rows]), as nibble::quant's element codecs specify.
//  - Every call is asynchronous on `stream` and returns the name of the kernel path it ran.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "nibble/kernels/scale_layout.hpp"
#include "nibble/quant/element_codecs.hpp"
#include "nibble/quant/formats.hpp"

namespace nibble::cuda {

// The FP8 copies a quantizer writes; either may be null.
struct Fp8Copies {
  uint8_t* rowwise = nullptr;  // [rows, cols]
  uint8_t* colwise = nullptr;  // [cols, rows]
};

// ---- per-tensor FP8 (fp8-current, fp8-delayed) --------------------------------------------------
// Device-side per-tensor scalars (one float each).
struct Fp8TensorScale {
  float* amax = nullptr;       // amax of the input (written by the current-scaling quantizers)
  float* scale = nullptr;      // s_enc: code = encode(x * s_enc)
  float* scale_inv = nullptr;  // s_dec = 1 / s_enc: what the GEMM multiplies by
};

// amax = max |x| over n BF16 values (NaN propagates, quant::amax semantics). Sets *amax, does not
// accumulate. n must be a multiple of 8 and x 16-byte aligned.
const char* amax_bf16(const uint16_t* x, int64_t n, float* amax, cudaStream_t stream);

// The fused kernel: cast with a given device-side s_enc, row-wise and column-wise copies, and (if
// amax_record is non-null) atomically max-combine this tensor's amax into *amax_record (one atomic
// per block). rows and cols must be multiples of 16. format: e4m3 or e5m2.
const char* cast_transpose_fp8(const uint16_t* x, int64_t rows, int64_t cols, quant::ElementFormat format,
                               const float* scale_enc, Fp8Copies out, float* amax_record,
                               const quant::SrKey& sr, cudaStream_t stream);

// Current scaling: amax of x, s_enc = quant::per_tensor_encode_scale(fmax, amax), then the cast.
//  two_launch:    amax kernel, then the cast kernel (which derives the scale from the amax itself).
//  single_launch: one cooperative kernel (amax, grid barrier, cast); needs cooperative launch.
enum class Fp8CurrentPath : uint8_t { two_launch, single_launch };
const char* quantize_fp8_current(const uint16_t* x, int64_t rows, int64_t cols, quant::ElementFormat format,
                                 Fp8TensorScale scale, Fp8Copies out, Fp8CurrentPath path,
                                 const quant::SrKey& sr, cudaStream_t stream);

// Delayed scaling. The device holds a ring of `window` past amaxes (zero-initialised by the caller)
// and the current scale pair (initialise scale = scale_inv = 1).
struct Fp8DelayedState {
  float* amax_history = nullptr;  // [window]; slot step % window holds step's amax
  int window = 1024;
  float* scale = nullptr;
  float* scale_inv = nullptr;
};
// Step `step`: one pass that casts with *state.scale and records this step's amax into its slot.
const char* quantize_fp8_delayed(const uint16_t* x, int64_t rows, int64_t cols, quant::ElementFormat format,
                                 const Fp8DelayedState& state, int64_t step, Fp8Copies out,
                                 const quant::SrKey& sr, cudaStream_t stream);
// After step `step`: s_enc = per_tensor_encode_scale(fmax, max over the history, margin) and
// s_dec = 1 / s_enc when that max is finite and > 0; otherwise the previous pair stays (as in
// quant::AmaxHistory and Transformer Engine). The slot step + 1 will use is cleared (it held an amax
// now out of window).
const char* update_fp8_delayed_scale(const Fp8DelayedState& state, int64_t step, quant::ElementFormat format,
                                     int margin, cudaStream_t stream);

// ---- fp8-block (E4M3, FP32 decode scales 2^-k, k = quant::fp8_block_scale_exponent) -------------
enum class BlockScaleLayout : uint8_t {
  cublaslt,  // what the GEMM reads: VEC128_32F (1x128) / BLK128x128_32F (128x128), scale_layout.hpp
  grid,      // plain row-major block grid, as the CPU reference stores it
};
// 1x128 blocks for X and dY. Row-wise copy: block (r, c/128), scales of the [rows, cols] operand.
// Column-wise copy: blocks of 128 rows of one column, i.e. 1x128 along the transposed tensor's
// inner dimension (what wgrad needs); scales of the [cols, rows] operand. grid layout: row scales
// [rows, ceil(cols/128)], column scales [cols, ceil(rows/128)]. rows, cols multiples of 16; the last
// block of a row or column may be partial (its amax covers the elements that exist).
const char* quantize_fp8_block_1x128(const uint16_t* x, int64_t rows, int64_t cols, Fp8Copies out,
                                     float* scale_inv_rowwise, float* scale_inv_colwise,
                                     BlockScaleLayout layout, const quant::SrKey& sr, cudaStream_t stream);
// 128x128 blocks for W. Row-wise copy [rows, cols] and column-wise copy [cols, rows] share each
// block's scale; grid layout: [ceil(rows/128), ceil(cols/128)] and its transpose.
const char* quantize_fp8_block_128x128(const uint16_t* x, int64_t rows, int64_t cols, Fp8Copies out,
                                       float* scale_inv_rowwise, float* scale_inv_colwise,
                                       BlockScaleLayout layout, const quant::SrKey& sr, cudaStream_t stream);

// ---- mxfp8 (E4M3 elements, E8M0 scales per 32 elements) ----------------------------------------
// MxScaleLayout (grid or cuBLASLt's 128x4 tiles): scale_layout.hpp.
// Row-wise copy: 1x32 blocks along cols; column-wise copy: 32x1 blocks (1x32 along the transposed
// tensor). rows and cols must be multiples of 32.
const char* quantize_mxfp8(const uint16_t* x, int64_t rows, int64_t cols, quant::MxScaleRule rule, Fp8Copies out,
                           uint8_t* scales_rowwise, uint8_t* scales_colwise, MxScaleLayout layout,
                           const quant::SrKey& sr, cudaStream_t stream);

// Exact decode of a row-major mxfp8 tensor [rows, cols] with scales in `layout` (grid [rows, cols/32]
// or the 128x4 tiles quantize_mxfp8 writes) to BF16: out[r, c] = BF16(decode_e4m3(code) * 2^k) (exact
// unless the product leaves BF16's normal range; NaN scale -> NaN). transpose_out writes [cols, rows]
// instead. rows and cols multiples of 32.
const char* decode_mxfp8_bf16(const uint8_t* codes, const uint8_t* scales, int64_t rows, int64_t cols,
                              uint16_t* out, bool transpose_out, MxScaleLayout layout, cudaStream_t stream);

}  // namespace nibble::cuda
