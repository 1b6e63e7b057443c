// NVFP4 quantizer (1x16 / 16x16, global amax, RHT-16 per copy, nearest or stochastic), row-wise and
// column-wise copies from one read per pass.
//
// A CTA owns a 64 x 64 tile held in shared memory as floats. Thread t loads the row group (row t/4,
// 16 columns at (t%4)*16: two 16-byte BF16 loads, four consecutive threads cover 128 bytes) and
// later reads the column group (column t/4, rows (t%4)*16 ..+16) back from shared memory, so four
// consecutive threads write 32 contiguous bytes of the transposed codes. The global scale needs the
// whole tensor's amax first: pass 1 (kEncode = false) reduces each copy's amax over the CTA and
// does one atomicMax per CTA per copy into the copy's global_scale slot (as uint32 bits, the
// order-independent amax of quant/amax.hpp); pass 2 re-reads x, rotates and encodes; a one-thread
// kernel finally turns the amax bits into the FP32 global scales.
#include "fp4_kernel_io.cuh"
#include "quartet_fused_group_math.cuh"
#include "nibble/cuda/e2m1_fast_math.hpp"
#include "nibble/cuda/quantize_nvfp4.hpp"
#include "nibble/quant/hadamard.hpp"
#include "nibble/quant/scale_rules.hpp"

namespace nibble::cuda {
namespace {

constexpr int kTile = 64;                // rows and columns of a CTA tile
constexpr int kThreads = 256;            // one row group and one column group per thread
constexpr int kStride = kTile + 1;       // shared-memory row stride (floats): column reads hit distinct banks
constexpr int kGroups = kTile / 16;      // 16-groups per tile edge
static_assert(kThreads == kTile * kGroups, "each thread owns exactly one row group and one column group");

struct Copy {
  uint8_t* codes = nullptr;
  uint8_t* scales = nullptr;
  uint32_t* amax_bits = nullptr;  // = the copy's global_scale slot, reinterpreted during the launch
  bool rht = false;
};
struct Params {
  int64_t rows = 0, cols = 0;
  int block_rows = 1;
  quant::SrKey key;
  Copy row, col;
};

__device__ __forceinline__ void rotate16(float* v) {
  quant::rotate_block_forward(v, quant::Rotation{16, quant::SignKind::nvfp4_fixed, 0});
}
__device__ __forceinline__ uint32_t group_amax_bits(const float* v) {
  uint32_t m = 0;
#pragma unroll
  for (int j = 0; j < 16; ++j) m = quant::amax_combine_bits(m, quant::abs_bits(v[j]));
  return m;
}
__device__ __forceinline__ float global_scale_of(const uint32_t* amax_bits) {
  return quant::nvfp4_global_decode_scale(quant::amax_from_bits(*amax_bits));
}

// 16 codes of one group, packed (low nibble = even element) into 8 bytes at `dst`: quant::
// nvfp4_encode_element(v[j], block_code, s_global, key, first_index + j) for each j. Fast path (the
// block's decode scale d = decode_ue4m3(block_code) * s_global in [kRecipDivMin, kRecipDivMax]):
// one reciprocal per group and RN(v / d) by div_rn_by_recip (no division or MUFU per element),
// nearest by the one-add encoder, stochastic by encode_e2m1_sr_fast with one Philox block per 4
// elements (what sr_bits(key, first_index + j) returns: first_index is a multiple of 16); the sign
// comes from v. Any other d (0, NaN, subnormal or huge) takes the reference expression per element.
template <bool kSr>
__device__ __forceinline__ void encode_group(const float* v, uint8_t block_code, float s_global, const quant::SrKey& key,
                                             uint64_t first_index, uint8_t* dst) {
  uint32_t w[2] = {0, 0};
  const float denom = fmt::decode_ue4m3(block_code) * s_global;
  if (denom >= kRecipDivMin && denom <= kRecipDivMax) {
    const float r = __frcp_rn(denom);
    // |q0| >= 8 (or inf): |v / d| > 5, saturated to code 7 by both encoders (magnitude 8 -> 7).
    auto magnitude = [&](float x) {
      const float q0 = __fmul_rn(x, r);
      return fabsf(q0) < 8.0f ? fabsf(div_rn_by_recip(x, denom, r)) : 8.0f;
    };
    auto sign = [&](float x) { return (fmt::float_bits(x) >> 28) & 0x8u; };
    if constexpr (kSr) {
      fp4::for_each_random_word<16>(key, first_index, [&](int j, uint32_t bits) {
        w[j / 8] |= (sign(v[j]) | fp4::encode_e2m1_sr_fast(magnitude(v[j]), bits)) << (4 * (j % 8));
      });
    } else {
      // RNE_E2M1 of a magnitude in [0, 6] by one float add (fp4::e2m1_magnitude_fadd); 8 -> 6 -> code 7.
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        w[j / 8] |= (sign(v[j]) | fp4::e2m1_magnitude_fadd(fminf(magnitude(v[j]), 6.0f))) << (4 * (j % 8));
      }
    }
  } else {
    quant::SrKey k = key;
    if constexpr (!kSr) k.enabled = false;  // the nearest kernel carries no generator
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const uint8_t c = quant::nvfp4_encode_element(v[j], block_code, s_global, k, first_index + j);
      w[j / 8] |= static_cast<uint32_t>(c & 0xF) << (4 * (j % 8));
    }
  }
  *reinterpret_cast<uint2*>(dst) = make_uint2(w[0], w[1]);
}

// CTA-wide max of two amax bit patterns; thread 0 gets the result.
__device__ __forceinline__ void cta_max2(uint32_t& a, uint32_t& b) {
  __shared__ uint32_t sa[kThreads / 32], sb[kThreads / 32];
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) {
    a = max(a, __shfl_xor_sync(0xffffffffu, a, d));
    b = max(b, __shfl_xor_sync(0xffffffffu, b, d));
  }
  if (threadIdx.x % 32 == 0) {
    sa[threadIdx.x / 32] = a;
    sb[threadIdx.x / 32] = b;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int i = 1; i < kThreads / 32; ++i) {
      a = max(a, sa[i]);
      b = max(b, sb[i]);
    }
  }
}

template <class In, bool kEncode, bool kSr = false>
__global__ void __launch_bounds__(kThreads) quantize_nvfp4_kernel(const In* __restrict__ x, Params p) {
  __shared__ float tile[kTile][kStride];
  __shared__ uint32_t row_block_amax[kGroups][kGroups], col_block_amax[kGroups][kGroups];  // 16x16 blocks
  const int t = threadIdx.x;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kTile, c0 = static_cast<int64_t>(blockIdx.x) * kTile;
  if (t < kGroups * kGroups) {
    (&row_block_amax[0][0])[t] = 0;
    (&col_block_amax[0][0])[t] = 0;
  }

  // Row group: row r0 + t/4, columns c0 + (t%4)*16 .. +16. Columns come in whole 16-groups (cols % 16
  // == 0), so a group is either entirely inside the tensor or entirely outside.
  const int tr = t / kGroups, tg = t % kGroups;
  const int64_t row = r0 + tr, rcol = c0 + tg * 16;
  const bool row_in = row < p.rows && rcol < p.cols;
  float v[16];
  if (row_in) {
    fp4::load_dense<16>(x + row * p.cols + rcol, v);
  } else {
#pragma unroll
    for (int j = 0; j < 16; ++j) v[j] = 0.0f;
  }
#pragma unroll
  for (int j = 0; j < 16; ++j) tile[tr][tg * 16 + j] = v[j];
  __syncthreads();

  // Column group: column c0 + t/4, rows r0 + (t%4)*16 .. +16 (rows % 16 == 0 when this copy exists).
  const int tc = t / kGroups, tq = t % kGroups;
  const int64_t col = c0 + tc, crow = r0 + tq * 16;
  const bool col_in = p.col.codes != nullptr && col < p.cols && crow < p.rows;
  float w[16];
#pragma unroll
  for (int j = 0; j < 16; ++j) w[j] = tile[tq * 16 + j][tc];

  const bool row_on = p.row.codes != nullptr && row_in;
  if (p.row.rht) rotate16(v);
  if (p.col.rht) rotate16(w);
  uint32_t ra = row_on ? group_amax_bits(v) : 0u;
  uint32_t ca = col_in ? group_amax_bits(w) : 0u;

  if constexpr (!kEncode) {
    cta_max2(ra, ca);
    if (t == 0) {
      if (p.row.codes) atomicMax(p.row.amax_bits, ra);
      if (p.col.codes) atomicMax(p.col.amax_bits, ca);
    }
    return;
  } else {
    // 16x16 blocks: the row copy's block (rows tr/16 of the tile, group tg) and the column copy's
    // block (columns tc/16, row group tq) take the max of their 16 groups.
    if (p.block_rows == 16) {
      if (row_on) atomicMax(&row_block_amax[tr / 16][tg], ra);
      if (col_in) atomicMax(&col_block_amax[tc / 16][tq], ca);
      __syncthreads();
      ra = row_block_amax[tr / 16][tg];
      ca = col_block_amax[tc / 16][tq];
    }
    if (row_on) {
      const float s = global_scale_of(p.row.amax_bits);
      const uint8_t sc = quant::nvfp4_block_scale_code(quant::amax_from_bits(ra), s);
      const int64_t gpr = p.cols / 16;  // scale-grid columns
      if (p.block_rows == 1) {
        p.row.scales[row * gpr + rcol / 16] = sc;
      } else if (tr % 16 == 0) {
        p.row.scales[(row / 16) * gpr + rcol / 16] = sc;
      }
      encode_group<kSr>(v, sc, s, p.key, static_cast<uint64_t>(row * p.cols + rcol), p.row.codes + row * (p.cols / 2) + rcol / 2);
    }
    if (col_in) {
      const float s = global_scale_of(p.col.amax_bits);
      const uint8_t sc = quant::nvfp4_block_scale_code(quant::amax_from_bits(ca), s);
      const int64_t gpr = p.rows / 16;  // x^T has p.rows columns
      if (p.block_rows == 1) {
        p.col.scales[col * gpr + crow / 16] = sc;
      } else if (tc % 16 == 0) {
        p.col.scales[(col / 16) * gpr + crow / 16] = sc;
      }
      encode_group<kSr>(w, sc, s, p.key, static_cast<uint64_t>(col * p.rows + crow), p.col.codes + col * (p.rows / 2) + crow / 2);
    }
  }
}

// amax bits -> FP32 global decode scale, in place (after pass 2 has read the bits).
__global__ void finalize_global_scales(uint32_t* row_bits, uint32_t* col_bits) {
  if (row_bits) *reinterpret_cast<float*>(row_bits) = quant::nvfp4_global_decode_scale(quant::amax_from_bits(*row_bits));
  if (col_bits) *reinterpret_cast<float*>(col_bits) = quant::nvfp4_global_decode_scale(quant::amax_from_bits(*col_bits));
}

// Pass 1 (amax) and pass 2 (encode; the stochastic kernel only when the key asks for it).
template <class In>
void launch_passes(const In* x, dim3 grid, const Params& p, cudaStream_t stream) {
  quantize_nvfp4_kernel<In, false><<<grid, kThreads, 0, stream>>>(x, p);
  NIBBLE_CHECK_LAUNCH();
  if (p.key.enabled) {
    quantize_nvfp4_kernel<In, true, true><<<grid, kThreads, 0, stream>>>(x, p);
  } else {
    quantize_nvfp4_kernel<In, true, false><<<grid, kThreads, 0, stream>>>(x, p);
  }
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
  p.row = {rowwise.codes, rowwise.scales, reinterpret_cast<uint32_t*>(rowwise.global_scale), options.rowwise_rht};
  p.col = {colwise.codes, colwise.scales, reinterpret_cast<uint32_t*>(colwise.global_scale), options.colwise_rht};
  if (p.row.codes) NIBBLE_CUDA_CHECK(cudaMemsetAsync(p.row.amax_bits, 0, sizeof(uint32_t), stream));
  if (p.col.codes) NIBBLE_CUDA_CHECK(cudaMemsetAsync(p.col.amax_bits, 0, sizeof(uint32_t), stream));
  const dim3 grid(fp4::blocks_for(cols, kTile), fp4::blocks_for(rows, kTile));
  if (grid.y > 65535u) {
    throw std::invalid_argument(std::string(fn) + ": rows = " + std::to_string(rows) + " needs more than 65535 row tiles; split the tensor");
  }
  if (type == Fp4DenseType::bf16) {
    launch_passes(static_cast<const uint16_t*>(x), grid, p, stream);
  } else {
    launch_passes(static_cast<const float*>(x), grid, p, stream);
  }
  finalize_global_scales<<<1, 1, 0, stream>>>(p.row.codes ? p.row.amax_bits : nullptr, p.col.codes ? p.col.amax_bits : nullptr);
  NIBBLE_CHECK_LAUNCH();
  return options.block_rows == 16 ? "cuda quantize_nvfp4 16x16, amax pass + 64x64 tile encode pass"
                                  : "cuda quantize_nvfp4 1x16, amax pass + 64x64 tile encode pass";
}

}  // namespace nibble::cuda
