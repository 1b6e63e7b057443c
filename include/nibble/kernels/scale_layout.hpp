// Where the scale of (row, k) of a GEMM operand lives in the scale buffer cuBLASLt reads, for every
// scale mode nibble uses. Quantization kernels write scales straight into these layouts, so the GEMM
// never converts them.
//
// Every operand is described the same way: a row-major [rows, k] matrix, contiguous along the GEMM's
// inner dimension k ("TN": A is [M, K], B is [N, K]). `row` is the outer index (M for A, N for B), `kk`
// an element index along k.
//
// Sources of the layouts:
// - The enum comments in cublasLt.h (CUDA 13.0, cublasLtMatmulMatrixScale_t): SCALAR_32F is one float
//   per tensor; OUTER_VEC_32F is a vector of M floats for A and N floats for B (element (i, j) of the
//   product is multiplied by a_scale[i] * b_scale[j]); VEC128_32F one float per 128 elements along the
//   inner dimension; BLK128x128_32F one float per 128x128 block.
// - The memory order of the two block modes is the "GEMM_READY" format that Transformer Engine hands to
//   cuBLASLt unchanged (transformer_engine/pytorch/tensor/float8_blockwise_tensor.py, get_scale_shape):
//   1x128 scales are a row-major [ceil(k/128), round_up(rows, 4)] array (rows contiguous: "outer-dim-
//   major", as PyTorch's _scaled_mm also demands), 128x128 scales a row-major
//   [ceil(rows/128), round_up(ceil(k/128), 4)] array (k-blocks contiguous, "near-inner-dim-major with
//   16-byte aligned strides"). The padding to 4 floats keeps every scale row 16-byte aligned.
// - VEC32_UE8M0 / VEC16_UE4M3 (sm_100 only, UNTESTED ON HARDWARE here): the 128x4 tiled layout of the
//   cuBLAS "block scaling factors layout" section (also described by cuDNN's "MXFP8 scale factor 128x4
//   layout" note): tiles of 128 rows x 4 scale columns, 512 bytes each, tiles row-major over
//   (row tile, column tile); inside a tile, offset = (r % 32) * 16 + (r / 32) * 4 + c.
// The GPU tests (tests/kernels/test_gemm_*.cu) give every block a different scale, so a wrong layout fails
// the comparison with the CPU reference.
#pragma once
#include <cstdint>

#include "nibble/format/host_device.hpp"

namespace nibble::cuda {

// How an operand's scales are stored. `none` is for BF16 operands (no scale at all).
enum class ScaleMode : uint8_t {
  none,
  per_tensor,   // CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F
  outer_vec,    // CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F: one float per row
  vec128,       // CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F: one float per 1x128 block along k
  blk128x128,   // CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F: one float per 128x128 block
  vec32_ue8m0,  // CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0 (MXFP8, sm_100; untested on hardware)
  vec16_ue4m3,  // CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3 (NVFP4, sm_100; untested on hardware)
};

// How a tensor's E8M0 (MX) scales are stored by the quantizers that write them.
enum class MxScaleLayout : uint8_t {
  grid,        // row-major block grid: rowwise [rows, cols/32], colwise [cols, rows/32] (CPU reference)
  tiled128x4,  // cuBLASLt VEC32_UE8M0's 128x4 tiles (tiled_index below); padding bytes are zero
};

namespace scale_layout {

inline constexpr int64_t kBlock = 128;       // VEC128 / BLK128x128 block edge
inline constexpr int64_t kPadFloats = 4;     // block-mode scale rows padded to 16 bytes
inline constexpr int64_t kTileRows = 128;    // VEC32/VEC16 tile: 128 rows x 4 scale columns
inline constexpr int64_t kTileCols = 4;

NIBBLE_HD constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
NIBBLE_HD constexpr int64_t round_up(int64_t a, int64_t m) { return ceil_div(a, m) * m; }

// Elements along k that share one scale in the block-vector modes.
NIBBLE_HD constexpr int64_t vector_length(ScaleMode mode) {
  return mode == ScaleMode::vec32_ue8m0 ? 32 : mode == ScaleMode::vec16_ue4m3 ? 16 : kBlock;
}

// --- OUTER_VEC_32F: scale[row]. -----------------------------------------------------------------
NIBBLE_HD constexpr int64_t outer_vec_index(int64_t row) { return row; }
NIBBLE_HD constexpr int64_t outer_vec_count(int64_t rows) { return rows; }

// --- VEC128_32F: row-major [ceil(k/128), round_up(rows, 4)]; rows are contiguous. ----------------
NIBBLE_HD constexpr int64_t vec128_stride(int64_t rows) { return round_up(rows, kPadFloats); }
NIBBLE_HD constexpr int64_t vec128_index(int64_t rows, int64_t row, int64_t kk) {
  return (kk / kBlock) * vec128_stride(rows) + row;
}
NIBBLE_HD constexpr int64_t vec128_count(int64_t rows, int64_t k) {
  return ceil_div(k, kBlock) * vec128_stride(rows);
}

// --- BLK128x128_32F: row-major [ceil(rows/128), round_up(ceil(k/128), 4)]; k-blocks contiguous. ---
NIBBLE_HD constexpr int64_t blk128_stride(int64_t k) { return round_up(ceil_div(k, kBlock), kPadFloats); }
NIBBLE_HD constexpr int64_t blk128_index(int64_t k, int64_t row, int64_t kk) {
  return (row / kBlock) * blk128_stride(k) + kk / kBlock;
}
NIBBLE_HD constexpr int64_t blk128_count(int64_t rows, int64_t k) {
  return ceil_div(rows, kBlock) * blk128_stride(k);
}

// --- VEC32_UE8M0 / VEC16_UE4M3 (one byte per scale, 128x4 tiles). UNTESTED ON HARDWARE. ----------
// Offset of the scale of tile row r (0..127), scale column c (0..3) inside its 512-byte tile; a template
// so kernels that stage one tile keep their 32-bit indices.
template <class I>
NIBBLE_HD constexpr I tile_offset(I r, I c) {
  return (r % 32) * 16 + (r / 32) * 4 + c;
}
NIBBLE_HD constexpr int64_t tiled_index(int64_t k, int64_t vec, int64_t row, int64_t kk) {
  const int64_t c = kk / vec;                                     // scale column
  const int64_t tiles_per_row = ceil_div(ceil_div(k, vec), kTileCols);
  const int64_t tile = (row / kTileRows) * tiles_per_row + c / kTileCols;
  return tile * (kTileRows * kTileCols) + tile_offset(row % kTileRows, c % kTileCols);
}
NIBBLE_HD constexpr int64_t tiled_count(int64_t rows, int64_t k, int64_t vec) {
  return round_up(rows, kTileRows) * round_up(ceil_div(k, vec), kTileCols);
}

// --- Any mode. ------------------------------------------------------------------------------------
// Index (in scale elements, not bytes) of the scale that multiplies element (row, kk).
NIBBLE_HD constexpr int64_t scale_index(ScaleMode mode, int64_t rows, int64_t k, int64_t row, int64_t kk) {
  switch (mode) {
    case ScaleMode::per_tensor: return 0;
    case ScaleMode::outer_vec: return outer_vec_index(row);
    case ScaleMode::vec128: return vec128_index(rows, row, kk);
    case ScaleMode::blk128x128: return blk128_index(k, row, kk);
    case ScaleMode::vec32_ue8m0:
    case ScaleMode::vec16_ue4m3: return tiled_index(k, vector_length(mode), row, kk);
    case ScaleMode::none: break;
  }
  return 0;
}

// Number of scale elements the buffer must hold (padding included).
NIBBLE_HD constexpr int64_t scale_count(ScaleMode mode, int64_t rows, int64_t k) {
  switch (mode) {
    case ScaleMode::none: return 0;
    case ScaleMode::per_tensor: return 1;
    case ScaleMode::outer_vec: return outer_vec_count(rows);
    case ScaleMode::vec128: return vec128_count(rows, k);
    case ScaleMode::blk128x128: return blk128_count(rows, k);
    case ScaleMode::vec32_ue8m0:
    case ScaleMode::vec16_ue4m3: return tiled_count(rows, k, vector_length(mode));
  }
  return 0;
}

// Bytes of one scale element: FP32 for the Hopper modes, one byte for E8M0 / UE4M3.
NIBBLE_HD constexpr int64_t scale_element_bytes(ScaleMode mode) {
  return mode == ScaleMode::vec32_ue8m0 || mode == ScaleMode::vec16_ue4m3 ? 1 : 4;
}
NIBBLE_HD constexpr int64_t scale_bytes(ScaleMode mode, int64_t rows, int64_t k) {
  return scale_count(mode, rows, k) * scale_element_bytes(mode);
}

static_assert(vec128_index(200, 3, 130) == 1 * 200 + 3, "1x128 scales: rows contiguous");
static_assert(vec128_count(201, 256) == 2 * 204, "1x128 scale rows padded to 4 floats");
static_assert(blk128_index(1000, 300, 900) == 2 * 8 + 7, "128x128 scales: k-blocks contiguous");
static_assert(tiled_index(128, 32, 33, 64) == 1 * 16 + 1 * 4 + 2, "128x4 tile interleave");

}  // namespace scale_layout
}  // namespace nibble::cuda
