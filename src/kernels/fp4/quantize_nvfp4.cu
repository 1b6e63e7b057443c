// NVFP4 quantizer (1x16 / 16x16, global amax, RHT-16 per copy, nearest or stochastic), row-wise and
// column-wise copies from one read per pass, without a transposing shared-memory tile.
//
// Each thread owns a 16-row x 8-column chunk of x (one 16-byte BF16 load per row, staged in shared
// memory: see Chunk): a column of the chunk is a whole 1x16 group of the column-wise copy (x^T), and
// a row of the chunk is half a 1x16 group of the row-wise copy, whose other half sits in the partner
// lane (lane ^ 4). Lanes: rq = lane % 4 picks the 16-row group, cc = lane / 4 the 8-column chunk,
// so a warp covers 64 rows x 64 columns: each of its loads reads 4 rows x 128 bytes, each
// column-wise store writes 8 whole 32-byte sectors (4 lanes x 8 bytes of one column of x^T) and each
// row-wise store 4 rows x 32 bytes. The global scale needs the whole tensor's amax first: pass 1
// (nvfp4_amax_kernel) reduces each copy's amax over the CTA and does one atomicMax per CTA per copy
// into the copy's global_scale slot (as uint32 bits, the order-independent amax of quant/amax.hpp);
// pass 2 (nvfp4_encode_kernel) re-reads x, rotates and encodes; a one-thread kernel finally turns the
// amax bits into the FP32 global scales.
//
// Element math (Transformer Engine's order of operations, the same results as quant::nvfp4_encode_element):
// the block's element encode scale e = min(1 / (ue4m3 * S_dec), FLT_MAX) comes from a per-CTA table over
// the UE4M3 codes; the scale code is the hardware E4M3 converter of amax * (S_enc * fl(1/6)); an element
// is fl(v * e), its E2M1 code from three adds against magic constants (fp4::e2m1_magic_bits_sat) or
// fp4::encode_e2m1_sr_fast; the codes are packed by byte permutes. Rotated copies round the RHT output
// to BF16 (quant::nvfp4_rht_output); their amax is that of the unnormalised maximum (rht_output).
#include <stdexcept>
#include <string>
#include <type_traits>

#include "common/block_reduce.cuh"
#include "fp4/fp4_kernel_io.cuh"
#include "fp4/nvfp4_chunk.cuh"
#include "nibble/kernels/quantize_nvfp4.hpp"

namespace nibble::cuda {
namespace {

using namespace nvfp4;

// Pass 1: each copy's amax (after its rotation), one atomicMax per CTA per copy. C: Chunk<In> (staged in
// shared memory) or RegChunk (BF16 in registers).
template <class C>
__global__ void __launch_bounds__(kThreads, 4) nvfp4_amax_kernel(const typename C::Elem* __restrict__ x, Params p) {
  extern __shared__ uint32_t stage[];
  // Lets a programmatic dependent (the encode pass) start its CTAs once every CTA of this grid has begun; it waits for this grid's end before it reads the amax. A no-op otherwise.
  asm volatile("griddepcontrol.launch_dependents;");
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kCtaRows + (warp / 2) * kWarpRows + (lane % 4) * kChunkRows;
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * kCtaCols + (warp % 2) * kWarpCols + (lane / 4) * kChunkCols;
  C c;
  if constexpr (!std::is_same_v<C, RegChunk>) {
    c.load(stage, x, row0, col0, p);
  } else {
    c.load(x, row0, col0, p);
  }
  const uint32_t ra = p.row.codes ? row_amax(c, p.row.rht, (lane / 4) % 2) : 0u;
  const uint32_t ca = p.col.codes ? column_amax(c, p.col.rht) : 0u;
  const block::MaxPair m = block::max_pair_in_thread0<kThreads>({ra, ca});
  if (threadIdx.x == 0) {
    if (p.row.codes) atomicMax(p.row.amax_bits, m.a);
    if (p.col.codes) atomicMax(p.col.amax_bits, m.b);
  }
}

// Pass 2: both copies' scales and codes.
// Occupancy on the H200: the nearest kernel runs 3-5% faster at 5 CTAs/SM (capped at 102 registers)
// than at 4; the stochastic one is 5% slower at 5, 3-4% slower with its row loop unrolled 4 times, and
// unchanged at 3 CTAs/SM or unrolled 2 times.
template <bool kSr>
constexpr int kEncodeMinBlocks = kSr ? 4 : 5;

template <class In, bool kSr>
__global__ void __launch_bounds__(kThreads, kEncodeMinBlocks<kSr>) nvfp4_encode_kernel(const In* __restrict__ x, Params p) {
  __shared__ float table[2][kCodes];  // [row copy, column copy][UE4M3 code] -> element encode scale
  extern __shared__ uint32_t stage[];
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  // Tiles in reverse launch order: a tensor larger than L2 leaves the tiles the amax pass read last in L2;
  // walking back from them turns up to an L2's worth of this second read into hits.
  const unsigned ty = gridDim.y - 1 - blockIdx.y;
  const unsigned tx = gridDim.x - 1 - blockIdx.x;
  const int64_t row0 = static_cast<int64_t>(ty) * kCtaRows + (warp / 2) * kWarpRows + (lane % 4) * kChunkRows;
  const int64_t col0 = static_cast<int64_t>(tx) * kCtaCols + (warp % 2) * kWarpCols + (lane / 4) * kChunkCols;
  const int half = (lane / 4) % 2;  // which half of a row-wise 16-group this lane holds
  const bool cols_in = col0 < p.cols;
  const bool block16 = p.block_rows == 16;
  // The chunk first: it does not depend on pass 1. Launched as pass 1's programmatic dependent, this CTA
  // may start while pass 1 still runs; griddepcontrol.wait then holds it until pass 1
  // has finished and its amax is visible (without that launch attribute the wait returns at once).
  Chunk<In> c;
  c.load(stage, x, row0, col0, p);
  asm volatile("griddepcontrol.wait;" ::: "memory");
  const CopyScale rs = p.row.codes ? copy_scale(p.row.amax_bits) : CopyScale{};
  const CopyScale cs = p.col.codes ? copy_scale(p.col.amax_bits) : CopyScale{};
  static_assert(kThreads == kCodes, "one table entry per thread and copy");
  table[0][threadIdx.x] = encode_scale_entry(static_cast<int>(threadIdx.x), rs);
  table[1][threadIdx.x] = encode_scale_entry(static_cast<int>(threadIdx.x), cs);
  __syncthreads();

  // Column-wise copy: column col0 + k of x is row col0 + k of x^T; its group covers rows row0 .. +16
  // (rows % 16 == 0 whenever this copy exists, so a group is wholly inside or outside).
  if (p.col.codes) {
    const bool in = cols_in && row0 < p.rows;
    const int64_t gpr = p.rows / 16;  // x^T has p.rows columns
    uint32_t blk = 0;
    if (block16) blk = pair_max(column_amax(c, p.col.rht));  // 16 columns x 16 rows of x
    // Column col0 + k: scale, codes (x^T row col0 + k, columns row0 .. +16).
    auto encode_column = [&](const float* w, int k) {
      const uint8_t sc = block_code(block16 ? blk : amax_bits_of<kChunkRows>(w), cs);
      const int64_t col = col0 + k;
      uint32_t out[2];
      encode_block<16, kSr>(w, sc, table[1][sc], p.col_draw, static_cast<uint64_t>(col * p.rows + row0), out);
      if (in) {
        if (!block16) {
          p.col.scales[col * gpr + row0 / 16] = sc;
        } else if (k == 0 && half == 0) {
          p.col.scales[(col / 16) * gpr + row0 / 16] = sc;
        }
        *reinterpret_cast<uint2*>(p.col.codes + col * (p.rows / 2) + row0 / 2) = make_uint2(out[0], out[1]);
      }
    };
#pragma unroll 1
    for (int q = 0; q < kChunkCols / 2; ++q) {
      float w0[kChunkRows], w1[kChunkRows];
      column_pair(c, q, p.col.rht, w0, w1);
      encode_column(w0, 2 * q);
      encode_column(w1, 2 * q + 1);
    }
  }

  // Row-wise copy: row row0 + i, columns col0 .. +8 (this lane's half of the group). Rows go in
  // pairs so that no scale code is computed twice: of the two partner lanes, half 0 computes row i's
  // code and half 1 row i + 1's (each first receives the partner's half-amax of its row), then they
  // swap codes: two shuffles and one block_code per lane per two rows (instead of four shuffles and two codes).
  if (p.row.codes) {
    const int64_t gpr = p.cols / 16;
    const uint8_t blk = block16 ? block_code(pair_max(row_amax(c, p.row.rht, half)), rs) : 0;  // 16 rows x 16 columns
#pragma unroll 1
    for (int i = 0; i < kChunkRows; i += 2) {
      float v[2][kChunkCols];
      row_half(c, i, p.row.rht, half, v[0]);
      row_half(c, i + 1, p.row.rht, half, v[1]);
      uint8_t sc[2] = {blk, blk};
      if (!block16) {
        const uint32_t a0 = amax_bits_of<kChunkCols>(v[0]), a1 = amax_bits_of<kChunkCols>(v[1]);
        const uint32_t theirs = __shfl_xor_sync(0xffffffffu, half == 0 ? a1 : a0, kPartner);
        const uint8_t mine = block_code(max(half == 0 ? a0 : a1, theirs), rs);
        const uint8_t other = static_cast<uint8_t>(__shfl_xor_sync(0xffffffffu, mine, kPartner));
        sc[0] = half == 0 ? mine : other;
        sc[1] = half == 0 ? other : mine;
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int64_t row = row0 + i + r;
        uint32_t out[1];
        encode_block<8, kSr>(v[r], sc[r], table[0][sc[r]], p.draw, static_cast<uint64_t>(row * p.cols + col0), out);
        if (cols_in && row < p.rows) {
          if (!block16) {
            if (half == 0) p.row.scales[row * gpr + col0 / 16] = sc[r];
          } else if (i + r == 0 && half == 0) {
            p.row.scales[(row0 / 16) * gpr + col0 / 16] = sc[r];
          }
          *reinterpret_cast<uint32_t*>(p.row.codes + row * (p.cols / 2) + col0 / 2) = out[0];
        }
      }
    }
  }
}

// amax bits -> FP32 global decode scale, in place (after pass 2 has read the bits).
__global__ void finalize_global_scales(uint32_t* row_bits, uint32_t* col_bits) {
  if (row_bits) *reinterpret_cast<float*>(row_bits) = quant::nvfp4_global_decode_scale(quant::amax_from_bits(*row_bits));
  if (col_bits) *reinterpret_cast<float*>(col_bits) = quant::nvfp4_global_decode_scale(quant::amax_from_bits(*col_bits));
}

// Pass 1 (amax) and pass 2 (encode; the stochastic kernel only when the key asks for it).
// The amax pass holds a BF16 chunk in registers (RegChunk): it reads each word once, so staging it in
// shared memory buys nothing (bit-identical, and the whole quantizer within -1.5% to +0.7% of the staged
// pass on an H100). FP32 chunks are staged.
// The encode pass is launched as the amax pass's programmatic dependent: its CTAs load their chunks while
// the amax pass finishes, then wait for it (bit-identical, 1-3% faster on 130 MB tensors, H100).
template <class In>
void launch_passes(const In* x, dim3 grid, const Params& p, cudaStream_t stream) {
  constexpr int smem = kStageBytes<In>;
  auto encode = p.key.enabled ? nvfp4_encode_kernel<In, true> : nvfp4_encode_kernel<In, false>;
  if constexpr (smem > 48 * 1024) {  // above the default dynamic limit: opt in (FP32 chunks)
    NIBBLE_CUDA_CHECK(cudaFuncSetAttribute(nvfp4_amax_kernel<Chunk<In>>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    NIBBLE_CUDA_CHECK(cudaFuncSetAttribute(encode, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  }
  if constexpr (sizeof(In) == 2) {
    nvfp4_amax_kernel<RegChunk><<<grid, kThreads, 0, stream>>>(x, p);
  } else {
    nvfp4_amax_kernel<Chunk<In>><<<grid, kThreads, smem, stream>>>(x, p);
  }
  NIBBLE_CHECK_LAUNCH();
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  NIBBLE_CUDA_CHECK(cudaLaunchKernelEx(&cfg, encode, x, p));
  NIBBLE_CHECK_LAUNCH();
}

void check_copy(const char* fn, const char* name, const Nvfp4Planes& c) {
  if (c.codes == nullptr) return;
  const std::string n(name);
  fp4::check_not_null(fn, (n + ".scales").c_str(), c.scales);
  fp4::check_not_null(fn, (n + ".global_scale").c_str(), c.global_scale);
  fp4::check_aligned(fn, (n + ".codes").c_str(), c.codes, 8);
  fp4::check_aligned(fn, (n + ".global_scale").c_str(), c.global_scale, 4);
}

}  // namespace

const char* quantize_nvfp4(const void* x, Fp4DenseType type, int64_t rows, int64_t cols, const Nvfp4Options& options,
                           Nvfp4Planes rowwise, Nvfp4Planes colwise, cudaStream_t stream) {
  constexpr const char* fn = "quantize_nvfp4";
  fp4::check_shape(fn, rows, cols);
  if (options.block_rows != 1 && options.block_rows != 16) {
    throw std::invalid_argument(std::string(fn) + ": options.block_rows = " + std::to_string(options.block_rows) +
                                " is not supported; use 1 (activations, gradients) or 16 (weights)");
  }
  if (rowwise.codes == nullptr && colwise.codes == nullptr) {
    throw std::invalid_argument(std::string(fn) + ": neither rowwise.codes nor colwise.codes is set; request at least one copy");
  }
  fp4::check_multiple(fn, "cols", cols, 16, "NVFP4 blocks are 16 wide along cols");
  if (options.block_rows == 16) fp4::check_multiple(fn, "rows", rows, 16, "16x16 weight blocks");
  if (colwise.codes != nullptr) fp4::check_multiple(fn, "rows", rows, 16, "the column-wise copy has 1x16 blocks along rows");
  fp4::check_not_null(fn, "x", x);
  fp4::check_aligned(fn, "x", x);
  check_copy(fn, "rowwise", rowwise);
  check_copy(fn, "colwise", colwise);
  if (rowwise.codes && colwise.codes && rowwise.global_scale == colwise.global_scale) {
    throw std::invalid_argument(std::string(fn) + ": rowwise.global_scale and colwise.global_scale are the same address; "
                                "each copy has its own global scale, pass two floats");
  }

  Params p;
  p.rows = rows;
  p.cols = cols;
  p.block_rows = static_cast<int>(options.block_rows);
  p.key = options.rounding;
  p.draw = options.rounding;
  quant::SrKey col_key = options.rounding;
  if (options.colwise_seed) col_key.seed = *options.colwise_seed;
  p.col_draw = col_key;
  p.row = {rowwise.codes, rowwise.scales, reinterpret_cast<uint32_t*>(rowwise.global_scale), options.rowwise_rht};
  p.col = {colwise.codes, colwise.scales, reinterpret_cast<uint32_t*>(colwise.global_scale), options.colwise_rht};
  if (p.row.codes) NIBBLE_CUDA_CHECK(cudaMemsetAsync(p.row.amax_bits, 0, sizeof(uint32_t), stream));
  if (p.col.codes) NIBBLE_CUDA_CHECK(cudaMemsetAsync(p.col.amax_bits, 0, sizeof(uint32_t), stream));
  const dim3 grid(fp4::blocks_for(cols, kCtaCols), fp4::blocks_for(rows, kCtaRows));
  if (grid.y > 65535u) {
    throw std::invalid_argument(std::string(fn) + ": rows = " + std::to_string(rows) + " needs more than 65535 row tiles of " +
                                std::to_string(kCtaRows) + "; split the tensor");
  }
  if (type == Fp4DenseType::bf16) {
    launch_passes(static_cast<const uint16_t*>(x), grid, p, stream);
  } else {
    launch_passes(static_cast<const float*>(x), grid, p, stream);
  }
  finalize_global_scales<<<1, 1, 0, stream>>>(p.row.codes ? p.row.amax_bits : nullptr, p.col.codes ? p.col.amax_bits : nullptr);
  NIBBLE_CHECK_LAUNCH();
  // The path names the amax pass's chunk (registers for BF16 input, staged for FP32).
  const bool reg = type == Fp4DenseType::bf16;
  if (options.block_rows == 16) {
    return reg ? "cuda quantize_nvfp4 16x16, register amax pass + chunk encode pass"
               : "cuda quantize_nvfp4 16x16, staged amax pass + chunk encode pass";
  }
  return reg ? "cuda quantize_nvfp4 1x16, register amax pass + chunk encode pass"
             : "cuda quantize_nvfp4 1x16, staged amax pass + chunk encode pass";
}

}  // namespace nibble::cuda
