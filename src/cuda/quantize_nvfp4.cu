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
// Element math (the same results as quant::nvfp4_encode_element, cheaper): the block's decode scale
// d and RN(1 / d) come from a per-CTA table over the 127 non-NaN UE4M3 codes; the scale code's
// quotient (amax / 6) / s from two reciprocal divisions (nvfp4_scale_quotient_by_recip) and the
// hardware E4M3 converter; RN(v / d) from div_rn_by_recip; its E2M1 code from three adds against
// magic constants (fp4::e2m1_magic_bits_sat); the codes are packed by byte permutes; the RHT's 1/4
// is folded into the amax and the divisor (rotate16_unnormalised). Groups outside the fast ranges
// (d 0, NaN, tiny or huge; amax tiny) take the reference expressions per element, out of line.
#include <cstdlib>
#include <string>
#include <type_traits>

#include "block_reduce.cuh"
#include "env_knobs.hpp"
#include "fp4_kernel_io.cuh"
#include "quartet_fused_group_math.cuh"
#include "nibble/cuda/e2m1_fast_math.hpp"
#include "nibble/cuda/fp8_hw_convert_math.hpp"
#include "nibble/cuda/quantize_nvfp4.hpp"
#include "nibble/quant/hadamard.hpp"
#include "nibble/quant/scale_rules.hpp"

namespace nibble::cuda {
namespace {

constexpr int kThreads = 128;           // 4 warps: 2 (rows) x 2 (columns)
constexpr int kChunkRows = 16, kChunkCols = 8;
constexpr int kWarpRows = 4 * kChunkRows, kWarpCols = 8 * kChunkCols;  // 64 x 64
constexpr int kCtaRows = 2 * kWarpRows, kCtaCols = 2 * kWarpCols;      // 128 x 128
constexpr int kPartner = 4;             // lane ^ 4: the other half of a row-wise 16-group
constexpr int kCodes = 128;             // UE4M3 codes 0 .. 0x7F (0x7F = NaN) of a non-negative scale

struct Copy {
  uint8_t* codes = nullptr;
  uint8_t* scales = nullptr;
  uint32_t* amax_bits = nullptr;  // = the copy's global_scale slot, reinterpreted during the launch
  bool rht = false;
};
struct Params {
  int64_t rows = 0, cols = 0;
  int block_rows = 1;
  quant::SrKey key;  // the reference path's
  fp4::SrDraw draw;  // the fast path's: the same generator with host-computed round keys
  Copy row, col;
};

// A thread's 16 x 8 chunk of x, staged in shared memory as 32-bit words, word-major over the CTA's
// threads: word q of chunk row i of thread t sits at stage[(i * kWords + q) * kThreads + t], so every
// warp access (one i, q for all lanes) reads 32 consecutive words, free of bank conflicts for row
// reads and column reads alike. A thread reads back only what it wrote: no barrier. Staging keeps the
// per-row and per-column loops rolled (a fully unrolled register version was 10-25 K instructions,
// beyond the instruction cache, and slower).
template <class In>
struct Chunk {
  using Elem = In;
  static constexpr int kUnroll = 1;  // the loops over a staged chunk stay rolled (see above)
  static constexpr int kWords = kChunkCols * static_cast<int>(sizeof(In)) / 4;  // per row: 4 (BF16), 8 (FP32)
  static constexpr int kStageWords = kChunkRows * kWords * kThreads;
  uint32_t* base;

  // All 16-byte loads first (in flight together), then the shared-memory stores. Rows and columns
  // outside the tensor read as zeros (no effect on an amax; their codes are never stored).
  __device__ __forceinline__ void load(uint32_t* stage, const In* __restrict__ x, int64_t row0, int64_t col0, const Params& p) {
    base = stage + threadIdx.x;
    constexpr int kVec = kWords / 4;  // 16-byte loads per row
    uint4 raw[kChunkRows * kVec];
    const bool cols_in = col0 < p.cols;
#pragma unroll
    for (int i = 0; i < kChunkRows; ++i) {
      const bool in = cols_in && row0 + i < p.rows;
#pragma unroll
      for (int h = 0; h < kVec; ++h) {
        raw[i * kVec + h] =
            in ? __ldg(reinterpret_cast<const uint4*>(x + (row0 + i) * p.cols + col0) + h) : make_uint4(0, 0, 0, 0);
      }
    }
#pragma unroll
    for (int i = 0; i < kChunkRows * kVec; ++i) {
      base[(4 * i + 0) * kThreads] = raw[i].x;
      base[(4 * i + 1) * kThreads] = raw[i].y;
      base[(4 * i + 2) * kThreads] = raw[i].z;
      base[(4 * i + 3) * kThreads] = raw[i].w;
    }
  }
  __device__ __forceinline__ uint32_t word(int i, int q) const { return base[(i * kWords + q) * kThreads]; }
  // Element (i, k); k compile-time after unrolling for the BF16 half selection.
  __device__ __forceinline__ float at(int i, int k) const {
    if constexpr (sizeof(In) == 2) {
      const uint32_t w = word(i, k / 2);
      return fmt::bits_float(k % 2 == 0 ? w << 16 : w & 0xffff0000u);
    } else {
      return fmt::bits_float(word(i, k));
    }
  }
};

// The same 16 x 8 BF16 chunk held in registers (16 x 4 words), for the amax pass: it reads each word
// once, so staging it through shared memory only added traffic (ncu, session 16: the staged amax pass
// at 58% issue use with the L1/shared pipe 81% busy). Loops over it unroll fully (kUnroll), so every
// word index is a compile-time constant and the words stay in registers.
struct RegChunk {
  using Elem = uint16_t;
  static constexpr int kUnroll = kChunkRows;
  static constexpr int kWords = kChunkCols / 2;
  uint32_t w[kChunkRows][kWords];
  __device__ __forceinline__ void load(const uint16_t* __restrict__ x, int64_t row0, int64_t col0, const Params& p) {
    const bool cols_in = col0 < p.cols;
#pragma unroll
    for (int i = 0; i < kChunkRows; ++i) {
      const uint4 r = cols_in && row0 + i < p.rows ? __ldg(reinterpret_cast<const uint4*>(x + (row0 + i) * p.cols + col0))
                                                   : make_uint4(0, 0, 0, 0);
      w[i][0] = r.x;
      w[i][1] = r.y;
      w[i][2] = r.z;
      w[i][3] = r.w;
    }
  }
  __device__ __forceinline__ uint32_t word(int i, int q) const { return w[i][q]; }
  __device__ __forceinline__ float at(int i, int k) const {
    const uint32_t x = w[i][k / 2];
    return fmt::bits_float(k % 2 == 0 ? x << 16 : x & 0xffff0000u);
  }
};

// max |f v[j]| over N values as amax bits (quant::amax_combine_bits of abs_bits: NaN anywhere ->
// bits above inf's; max.NaN gives the canonical NaN, whose magnitude bits are above inf's too).
// f = the group's pending normalisation (1, or 1/4 after unnormalised butterflies): RN(f y) is
// monotone in |y|, so the max of the products is the product of the max, one multiply per group.
template <int N>
__device__ __forceinline__ float max_abs(const float* v) {
  float m = fabsf(v[0]);
#pragma unroll
  for (int j = 1; j < N; ++j) m = fp4::max_nan(m, fabsf(v[j]));
  return m;
}
template <int N>
__device__ __forceinline__ uint32_t amax_bits_of(const float* v, float f) {
  return quant::abs_bits(__fmul_rn(max_abs<N>(v), f));
}

// One butterfly stage of stride H over N values (a + b, a - b), indices compile-time.
template <int N, int H>
__device__ __forceinline__ void butterflies(float* v) {
#pragma unroll
  for (int i = 0; i < N; i += 2 * H) {
#pragma unroll
    for (int j = i; j < i + H; ++j) {
      const float a = v[j], b = v[j + H];
      v[j] = __fadd_rn(a, b);
      v[j + H] = __fsub_rn(a, b);
    }
  }
}

// quant::rotate_block_forward(v, {16, nvfp4_fixed}) WITHOUT its final multiply by 1/4: the signs
// (exact negations) and the butterflies of the reference, in its order. The callers fold the 1/4
// into what follows (kRhtNorm): the amax (max_abs above) and the division by the block scale, where
// RN(RN(y / 4) / d) == RN(y / (4 d)) whenever y / 4 is exact, and otherwise |y / 4| < 2^-126 and
// the code is 0 (or the sign-only -0) either way (d >= 2^-62 on that path).
constexpr float kRhtNorm = quant::hadamard_norm(16);  // 1/4, exact
static_assert(kRhtNorm == 0.25f, "RHT-16 normalisation is a power of two");
__device__ __forceinline__ void rotate16_first_stages(float* v) {  // signs, strides 1, 2, 4
#pragma unroll
  for (int j = 0; j < 16; ++j) v[j] = ((quant::kNvfp4RhtSignMask >> j) & 1u) ? -v[j] : v[j];
  butterflies<16, 1>(v);
  butterflies<16, 2>(v);
  butterflies<16, 4>(v);
}
__device__ __forceinline__ void rotate16_unnormalised(float* v) {
  rotate16_first_stages(v);
  butterflies<16, 8>(v);
}
// max |y_j| over the unnormalised rotation y of v, without the last stage's 16 outputs: for finite
// a, b, max(|RN(a + b)|, |RN(a - b)|) == RN(|a| + |b|) (RN is odd and monotone, and one of the two
// is |a| + |b| exactly before rounding), so the stride-8 stage and its maxima become 8 adds of
// magnitudes. An infinite result may hide the NaN of inf - inf in the real stage, so it redoes the
// stage; a NaN propagates either way. Clobbers v.
__device__ __forceinline__ float rotated_max_abs16(float* v) {
  rotate16_first_stages(v);
  float m = __fadd_rn(fabsf(v[0]), fabsf(v[8]));
#pragma unroll
  for (int j = 1; j < 8; ++j) m = fp4::max_nan(m, __fadd_rn(fabsf(v[j]), fabsf(v[j + 8])));
  if (fabsf(m) == INFINITY) {
    butterflies<16, 8>(v);
    m = max_abs<16>(v);
  }
  return m;
}
// The same on a row-wise group split over two lanes: this lane holds elements half*8 .. half*8+7.
// Butterflies of stride 1, 2, 4 stay in the lane; stride 8 pairs element j of both lanes (the low
// half keeps a + b, the high half a - b). Every lane of the warp must call it.
__device__ __forceinline__ void rotate16_split_unnormalised(float* v, int half) {
#pragma unroll
  for (int j = 0; j < 8; ++j) v[j] = ((quant::kNvfp4RhtSignMask >> (half * 8 + j)) & 1u) ? -v[j] : v[j];
  butterflies<8, 1>(v);
  butterflies<8, 2>(v);
  butterflies<8, 4>(v);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float o = __shfl_xor_sync(0xffffffffu, v[j], kPartner);
    v[j] = half == 0 ? __fadd_rn(v[j], o) : __fsub_rn(o, v[j]);
  }
}

// Per-copy constants: the global decode scale s, RN(1 / s) when the reciprocal scale quotient is
// exact for it (else 0), and the table of block decode scales d = decode_ue4m3(code) * s with
// RN(1 / d) (0 where d is outside div_rn_by_recip's range: the element falls back).
struct CopyScale {
  float s = 1.0f, rs = 0.0f;
  float f = 1.0f;  // the pending normalisation of the copy's values: kRhtNorm when rotated, else 1
};
__device__ __forceinline__ CopyScale copy_scale(const Copy& cp) {
  CopyScale c;
  c.s = quant::nvfp4_global_decode_scale(quant::amax_from_bits(*cp.amax_bits));
  c.f = cp.rht ? kRhtNorm : 1.0f;
  c.rs = (c.s >= kRecipDivMin && c.s <= kRecipDivMax) ? __frcp_rn(c.s) : 0.0f;
  return c;
}
// Entry: the divisor of the copy's (unnormalised) values, d / f (exact: f is 1 or 1/4), and its
// reciprocal when div_rn_by_recip is exact for it.
__device__ __forceinline__ float2 decode_entry(int code, const CopyScale& c) {
  const float d = (fmt::decode_ue4m3(static_cast<uint8_t>(code)) * c.s) / c.f;
  return make_float2(d, (d >= kRecipDivMin && d <= kRecipDivMax) ? __frcp_rn(d) : 0.0f);
}

// The reference expressions, out of line: the kernels call them only for rare groups, and inlining
// the generic encoders at each of a thread's 24 groups would multiply the code size.
__device__ __noinline__ uint8_t block_code_reference(float amax, float s) { return quant::nvfp4_block_scale_code(amax, s); }
struct Eight {
  float v[8];
};
__device__ __noinline__ uint32_t encode8_reference(Eight e, uint8_t sc, float s, quant::SrKey key, uint64_t first) {
  uint32_t w = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    w |= static_cast<uint32_t>(quant::nvfp4_encode_element(e.v[j], sc, s, key, first + static_cast<uint64_t>(j)) & 0xF) << (4 * j);
  }
  return w;
}

// quant::nvfp4_block_scale_code(amax_from_bits(bits), s).
__device__ __forceinline__ uint8_t block_code(uint32_t bits, const CopyScale& c) {
  const float amax = quant::amax_from_bits(bits);
  if (c.rs != 0.0f && amax >= kScaleQuotientAmaxMin && bits < 0x7f800000u) {
    const float y = nvfp4_scale_quotient_by_recip(amax, c.s, c.rs);
    if (y < kScaleQuotientMax) return static_cast<uint8_t>(fp8x2_rn_hw<quant::ElementFormat::e4m3>(y, 0.0f) & 0xFFu);
  }
  return block_code_reference(amax, c.s);
}

// N codes (N = 8 or 16) of one block with code sc, packed (low nibble = element 0) into N / 8 words:
// quant::nvfp4_encode_element(v[j], sc, s, key, first + j) for each j (first % 4 == 0).
template <int N, bool kSr>
__device__ __forceinline__ void encode_block(const float* v, uint8_t sc, float2 dr, const CopyScale& cs,
                                             const quant::SrKey& key, const fp4::SrDraw& draw, uint64_t first,
                                             uint32_t* out) {
  const float d = dr.x, r = dr.y;
  if (r != 0.0f) {
    // RN(v / d); |v / d| >= 8 (or a NaN from an overflowing v r) saturates to code 7 in both encoders.
    if constexpr (kSr) {
#pragma unroll
      for (int j = 0; j < N / 8; ++j) out[j] = 0;
      fp4::for_each_random_word<N>(draw, first, [&](int j, uint32_t bits) {
        const uint32_t m = fp4::encode_e2m1_sr_fast(fabsf(div_rn_by_recip(v[j], d, r)), bits);
        out[j / 8] |= (((fmt::float_bits(v[j]) >> 28) & 0x8u) | m) << (4 * (j % 8));
      });
    } else {
      const fp4::E2m1Magic mg = fp4::e2m1_magic(0);
      uint32_t mb[N], sb[N];
#pragma unroll
      for (int j = 0; j < N; ++j) {
        mb[j] = fp4::e2m1_magic_bits_sat(div_rn_by_recip(v[j], d, r), mg);  // fminf(NaN, 6) = 6
        sb[j] = fmt::float_bits(v[j]);
      }
#pragma unroll
      for (int j = 0; j < N / 8; ++j) out[j] = fp4::pack8_codes_signs(mb + 8 * j, sb + 8 * j);
    }
  } else {
    quant::SrKey k = key;
    if constexpr (!kSr) k.enabled = false;  // the nearest kernel carries no generator
#pragma unroll
    for (int h = 0; h < N / 8; ++h) {
      Eight e;
#pragma unroll
      for (int j = 0; j < 8; ++j) e.v[j] = __fmul_rn(v[8 * h + j], cs.f);  // the reference's values
      out[h] = encode8_reference(e, sc, cs.s, k, first + static_cast<uint64_t>(8 * h));
    }
  }
}

// Columns 2q and 2q + 1 of the chunk (two 1x16 groups of x^T; BF16: one word per row holds both),
// unnormalised-rotated when the copy asks for it.
template <class C>
__device__ __forceinline__ void column_pair(const C& c, int q, bool rht, float* w0, float* w1) {
  using In = typename C::Elem;
#pragma unroll
  for (int i = 0; i < kChunkRows; ++i) {
    if constexpr (sizeof(In) == 2) {
      const uint32_t x = c.word(i, q);
      w0[i] = fmt::bits_float(x << 16);
      w1[i] = fmt::bits_float(x & 0xffff0000u);
    } else {
      w0[i] = fmt::bits_float(c.word(i, 2 * q));
      w1[i] = fmt::bits_float(c.word(i, 2 * q + 1));
    }
  }
  if (rht) {
    rotate16_unnormalised(w0);
    rotate16_unnormalised(w1);
  }
}
// Row i of the chunk (half of a row-wise 1x16 group), rotated when the copy asks for it. All lanes call.
template <class C>
__device__ __forceinline__ void row_half(const C& c, int i, bool rht, int half, float* v) {
#pragma unroll
  for (int k = 0; k < kChunkCols; ++k) v[k] = c.at(i, k);
  if (rht) rotate16_split_unnormalised(v, half);
}
__device__ __forceinline__ uint32_t pair_max(uint32_t a) { return max(a, __shfl_xor_sync(0xffffffffu, a, kPartner)); }

// amax bits over the whole chunk of a copy (its 8 columns, or its 16 row halves).
template <class C>
__device__ __forceinline__ uint32_t column_amax(const C& c, bool rht) {
  float m = 0.0f;
#pragma unroll C::kUnroll
  for (int q = 0; q < kChunkCols / 2; ++q) {
    float w0[kChunkRows], w1[kChunkRows];
    column_pair(c, q, false, w0, w1);
    if (rht) {
      m = fp4::max_nan(m, fp4::max_nan(rotated_max_abs16(w0), rotated_max_abs16(w1)));
    } else {
      m = fp4::max_nan(m, fp4::max_nan(max_abs<kChunkRows>(w0), max_abs<kChunkRows>(w1)));
    }
  }
  return quant::abs_bits(__fmul_rn(m, rht ? kRhtNorm : 1.0f));
}
template <class C>
__device__ __forceinline__ uint32_t row_amax(const C& c, bool rht, int half) {
  using In = typename C::Elem;
  if constexpr (sizeof(In) == 2) {
    if (!rht) {
      // Unrotated BF16: the max of the magnitudes' bit patterns, two per word (__vmaxu2): BF16 -> FP32
      // only appends zero bits, so (max BF16 magnitude bits) << 16 is abs_bits of the max, NaN included.
      uint32_t m = 0;
#pragma unroll C::kUnroll
      for (int i = 0; i < kChunkRows; ++i) {
#pragma unroll
        for (int q = 0; q < C::kWords; ++q) m = bf16x2::abs_max2(m, c.word(i, q));
      }
      return max(m >> 16, m & 0xffffu) << 16;  // == bf16x2::both_amax_bits(m); this form keeps the tested SASS
    }
  }
  float m = 0.0f;
#pragma unroll C::kUnroll
  for (int i = 0; i < kChunkRows; ++i) {
    float v[kChunkCols];
    row_half(c, i, rht, half, v);
    m = fp4::max_nan(m, max_abs<kChunkCols>(v));
  }
  return quant::abs_bits(__fmul_rn(m, rht ? kRhtNorm : 1.0f));
}

template <class In>
constexpr int kStageBytes = Chunk<In>::kStageWords * 4;  // 32 KB (BF16) or 64 KB (FP32), dynamic

// Pass 1: each copy's amax (after its rotation), one atomicMax per CTA per copy. C: Chunk<In> (staged in
// shared memory) or RegChunk (BF16 in registers).
template <class C>
__global__ void __launch_bounds__(kThreads, 4) nvfp4_amax_kernel(const typename C::Elem* __restrict__ x, Params p) {
  extern __shared__ uint32_t stage[];
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
// Occupancy measured on the H200 (docs/perf, session 17): the nearest kernel runs 3-5% faster at
// 5 CTAs/SM (capped at 102 registers) than at 4; the stochastic one is 5% slower at 5, 3-4% slower
// with its row loop unrolled 4 times, and unchanged at 3 CTAs/SM or unrolled 2 times (runs 5, 7, 9).
template <bool kSr>
constexpr int kEncodeMinBlocks = kSr ? 4 : 5;

template <class In, bool kSr>
__global__ void __launch_bounds__(kThreads, kEncodeMinBlocks<kSr>) nvfp4_encode_kernel(const In* __restrict__ x, Params p) {
  __shared__ float2 table[2][kCodes];  // [row copy, column copy][UE4M3 code] -> (d, RN(1 / d))
  extern __shared__ uint32_t stage[];
  const CopyScale rs = p.row.codes ? copy_scale(p.row) : CopyScale{};
  const CopyScale cs = p.col.codes ? copy_scale(p.col) : CopyScale{};
  static_assert(kThreads == kCodes, "one table entry per thread and copy");
  table[0][threadIdx.x] = decode_entry(static_cast<int>(threadIdx.x), rs);
  table[1][threadIdx.x] = decode_entry(static_cast<int>(threadIdx.x), cs);
  __syncthreads();

  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kCtaRows + (warp / 2) * kWarpRows + (lane % 4) * kChunkRows;
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * kCtaCols + (warp % 2) * kWarpCols + (lane / 4) * kChunkCols;
  const int half = (lane / 4) % 2;  // which half of a row-wise 16-group this lane holds
  const bool cols_in = col0 < p.cols;
  const bool block16 = p.block_rows == 16;
  Chunk<In> c;
  c.load(stage, x, row0, col0, p);

  // Column-wise copy: column col0 + k of x is row col0 + k of x^T; its group covers rows row0 .. +16
  // (rows % 16 == 0 whenever this copy exists, so a group is wholly inside or outside).
  if (p.col.codes) {
    const bool in = cols_in && row0 < p.rows;
    const int64_t gpr = p.rows / 16;  // x^T has p.rows columns
    uint32_t blk = 0;
    if (block16) blk = pair_max(column_amax(c, p.col.rht));  // 16 columns x 16 rows of x
    // Column col0 + k: scale, codes (x^T row col0 + k, columns row0 .. +16).
    auto encode_column = [&](const float* w, int k) {
      const uint8_t sc = block_code(block16 ? blk : amax_bits_of<kChunkRows>(w, cs.f), cs);
      const int64_t col = col0 + k;
      uint32_t out[2];
      encode_block<16, kSr>(w, sc, table[1][sc], cs, p.key, p.draw, static_cast<uint64_t>(col * p.rows + row0), out);
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
  // swap codes: two shuffles and one block_code per lane per two rows (was four shuffles, two codes).
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
        const uint32_t a0 = amax_bits_of<kChunkCols>(v[0], rs.f), a1 = amax_bits_of<kChunkCols>(v[1], rs.f);
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
        encode_block<8, kSr>(v[r], sc[r], table[0][sc[r]], rs, p.key, p.draw, static_cast<uint64_t>(row * p.cols + col0),
                             out);
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

// The amax pass of BF16 input: its chunk staged in shared memory as the encode pass does, or in
// registers (RegChunk: NIBBLE_NVFP4_AMAX=registers, or kRegisterAmaxDefault; it becomes the default once a
// GPU run has validated and timed it, docs/kernels-fp4.md, session 20). FP32 chunks are always staged.
constexpr bool kRegisterAmaxDefault = false;
bool amax_in_registers() {
  static const bool on = knobs::is("NIBBLE_NVFP4_AMAX", "registers", kRegisterAmaxDefault);
  return on;
}

// Pass 1 (amax) and pass 2 (encode; the stochastic kernel only when the key asks for it).
template <class In>
void launch_passes(const In* x, dim3 grid, const Params& p, cudaStream_t stream) {
  constexpr int smem = kStageBytes<In>;
  auto encode = p.key.enabled ? nvfp4_encode_kernel<In, true> : nvfp4_encode_kernel<In, false>;
  if constexpr (smem > 48 * 1024) {  // above the default dynamic limit: opt in (FP32 chunks)
    NIBBLE_CUDA_CHECK(cudaFuncSetAttribute(nvfp4_amax_kernel<Chunk<In>>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    NIBBLE_CUDA_CHECK(cudaFuncSetAttribute(encode, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  }
  if constexpr (sizeof(In) == 2) {
    if (amax_in_registers()) {
      nvfp4_amax_kernel<RegChunk><<<grid, kThreads, 0, stream>>>(x, p);
    } else {
      nvfp4_amax_kernel<Chunk<In>><<<grid, kThreads, smem, stream>>>(x, p);
    }
  } else {
    nvfp4_amax_kernel<Chunk<In>><<<grid, kThreads, smem, stream>>>(x, p);
  }
  NIBBLE_CHECK_LAUNCH();
  encode<<<grid, kThreads, smem, stream>>>(x, p);
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
  // The path names the amax pass's chunk (registers only for BF16 input, when chosen).
  const bool reg = type == Fp4DenseType::bf16 && amax_in_registers();
  if (options.block_rows == 16) {
    return reg ? "cuda quantize_nvfp4 16x16, register amax pass + chunk encode pass"
               : "cuda quantize_nvfp4 16x16, staged amax pass + chunk encode pass";
  }
  return reg ? "cuda quantize_nvfp4 1x16, register amax pass + chunk encode pass"
             : "cuda quantize_nvfp4 1x16, staged amax pass + chunk encode pass";
}

}  // namespace nibble::cuda
