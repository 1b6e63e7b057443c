// MXFP4 -> E4M3 exact re-encoding (docs/spec.md §4) and its violation counters.
//
// One CTA per row. Thread t owns the 32-blocks t, t + blockDim, ... of its row (16-byte code loads,
// coalesced), so the four blocks of a 1x128 group sit in four adjacent lanes and their k_max is two
// shuffles away. Row sets need the whole row's k_max first: pass 1 keeps up to kMaxPer blocks per
// thread in registers, a CTA reduction gives k_max, pass 2 writes from registers. Rows longer than
// kMaxPer * kMaxThreads blocks (131072 columns) re-read their codes in pass 2 (from L2, normally).
// Element codes: blocks whose shift k_j - k_max + 6 lies in [-8, 6] (every block of an exact set)
// take the closed-form byte table of reencode.hpp through __byte_perm, 4 elements per instruction;
// any other block (violating sets, zero blocks far from k_max) calls quant::reencode_e2m1_as_e4m3
// per element, the CPU reference's own function.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "fp4/fp4_kernel_io.cuh"
#include "fp4/mxfp4_row_reencode.cuh"
#include "nibble/kernels/reencode.hpp"
#include "nibble/kernels/scale_layout.hpp"
#include "nibble/format/e8m0.hpp"
#include "nibble/quant/element_codecs.hpp"

namespace nibble::cuda {

// The byte table equals the reference on every code and every fast shift (checked by the compiler).
namespace {
constexpr bool fast_table_matches_reference() {
  for (int shift = kReencodeFastShiftMin; shift <= kReencodeFastShiftMax; ++shift) {
    const uint64_t t = e2m1_to_e4m3_magnitudes(shift);
    for (int code = 0; code < 16; ++code) {
      const uint8_t want = quant::reencode_e2m1_as_e4m3(static_cast<uint8_t>(code), shift - 6, 0);
      const uint8_t got = static_cast<uint8_t>(((t >> (8 * (code & 7))) & 0xFF) | ((code & 8) ? 0x80 : 0));
      if (got != want) return false;
    }
  }
  return true;
}
static_assert(fast_table_matches_reference(), "e2m1_to_e4m3_magnitudes must equal quant::reencode_e2m1_as_e4m3");

using row_reencode::block_exponent;
using row_reencode::cta_extremes;
using row_reencode::kMaxPer;
using row_reencode::kMaxThreads;
using row_reencode::kNoBlock;

enum class Pass : uint8_t { row, group128, count };

// Writes the 32 E4M3 codes of one block (two 16-byte stores): row_reencode::block_e4m3's results,
// written out here in this order because calling it changes this kernel's register allocation (same
// instruction count in cuobjdump, but a different schedule than the one timed on the GPU).
__device__ __forceinline__ void encode_block(const uint4& c, uint8_t sc, int k_max, uint8_t* __restrict__ out) {
  uint32_t o[8];
  if (sc == fmt::kE8M0Nan) {
#pragma unroll
    for (int i = 0; i < 8; ++i) o[i] = 0x7F7F7F7Fu;
  } else {
    const int kj = fmt::e8m0_exponent(sc);
    const int shift = kj - k_max + 6;
    const uint32_t w[4] = {c.x, c.y, c.z, c.w};
    if (shift >= kReencodeFastShiftMin && shift <= kReencodeFastShiftMax) {
      const uint64_t t = e2m1_to_e4m3_magnitudes(shift);
      const uint32_t lo = static_cast<uint32_t>(t), hi = static_cast<uint32_t>(t >> 32);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        o[2 * i] = row_reencode::lookup4(w[i] & 0xFFFFu, lo, hi);
        o[2 * i + 1] = row_reencode::lookup4(w[i] >> 16, lo, hi);
      }
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        uint32_t v = 0;
        for (int j = 0; j < 4; ++j) {
          const uint8_t e2m1 = static_cast<uint8_t>((w[i / 2] >> (16 * (i % 2) + 4 * j)) & 0xF);
          v |= static_cast<uint32_t>(quant::reencode_e2m1_as_e4m3(e2m1, kj, k_max)) << (8 * j);
        }
        o[i] = v;
      }
    }
  }
  uint4* dst = reinterpret_cast<uint4*>(out);
  dst[0] = make_uint4(o[0], o[1], o[2], o[3]);
  dst[1] = make_uint4(o[4], o[5], o[6], o[7]);
}

// k_max / k_min of the 1x128 group held by this lane and its 3 neighbours (all lanes must call).
__device__ __forceinline__ void group_extremes(int k, int& gmax, int& gmin) {
  const int lo = k == kNoBlock ? 1000 : k;
  gmax = k;
  gmin = lo;
#pragma unroll
  for (int d = 1; d < 4; d <<= 1) {
    gmax = max(gmax, __shfl_xor_sync(0xffffffffu, gmax, d));
    gmin = min(gmin, __shfl_xor_sync(0xffffffffu, gmin, d));
  }
}

// The E8M0 scales of one row: the grid's row [cols/32], or its bytes in cuBLASLt's 128x4 tiles (base =
// block 0's byte; block b sits b / 4 tiles of 512 bytes further, at byte b % 4).
template <bool kGrid>
struct RowScales {
  const uint8_t* base;
  __device__ __forceinline__ static RowScales of(const uint8_t* scales, int64_t row, int64_t cols) {
    if constexpr (kGrid) {
      return {scales + row * (cols / 32)};
    } else {
      return {scales + scale_layout::tiled_index(cols, 32, row, 0)};
    }
  }
  __device__ __forceinline__ uint8_t at(int64_t b) const {
    if constexpr (kGrid) {
      return __ldg(base + b);
    } else {
      return __ldg(base + (b / 4) * (scale_layout::kTileRows * scale_layout::kTileCols) + b % 4);
    }
  }
};

template <int PER, Pass kPass, bool kGrid>
__global__ void __launch_bounds__(kMaxThreads)
    reencode_mxfp4_e4m3_kernel(const uint8_t* __restrict__ codes, const uint8_t* __restrict__ scales, int64_t rows,
                               int64_t cols, bool count_groups, uint8_t* __restrict__ out,
                               float* __restrict__ scales_out, ReencodeViolations* __restrict__ violations) {
  const int64_t row = blockIdx.x;
  const int64_t nb = cols / 32;
  const uint4* rc = reinterpret_cast<const uint4*>(codes + row * (cols / 2));
  const RowScales<kGrid> rs = RowScales<kGrid>::of(scales, row, cols);
  uint8_t* ro = out + row * cols;
  const int64_t chunk = static_cast<int64_t>(PER) * blockDim.x;
  const bool resident = nb <= chunk;
  const bool lane_leads_group = (threadIdx.x & 3) == 0;

  uint4 c[PER];
  uint8_t s[PER];
  int row_max = kNoBlock, row_min = 1000;
  for (int64_t base = 0; base < nb; base += chunk) {
#pragma unroll
    for (int i = 0; i < PER; ++i) {
      const int64_t b = base + i * blockDim.x + threadIdx.x;
      c[i] = b < nb ? __ldg(rc + b) : make_uint4(0, 0, 0, 0);
      s[i] = b < nb ? rs.at(b) : fmt::kE8M0Nan;
    }
#pragma unroll
    for (int i = 0; i < PER; ++i) {
      const int64_t b = base + i * blockDim.x + threadIdx.x;
      const int k = block_exponent(c[i], s[i]);
      row_max = max(row_max, k);
      row_min = k == kNoBlock ? row_min : min(row_min, k);
      if (!count_groups) continue;  // uniform across the CTA: the shuffles stay convergent
      int gmax, gmin;
      group_extremes(k, gmax, gmin);
      const bool any = gmax != kNoBlock;
      if (b < nb && lane_leads_group && any && gmax - gmin > quant::kReencodeMaxSpread && violations) {
        atomicAdd(&violations->group128_sets, 1);
      }
      if constexpr (kPass == Pass::group128) {
        const int kset = any ? gmax : 0;
        if (b < nb) {
          if (lane_leads_group) scales_out[scale_layout::vec128_index(rows, row, b * 32)] = fmt::pow2f(kset - 6);
          encode_block(c[i], s[i], kset, ro + b * 32);
        }
      }
    }
  }
  if constexpr (kPass == Pass::group128) return;

  cta_extremes(row_max, row_min);
  const bool any = row_max != kNoBlock;
  const int kset = any ? row_max : 0;
  if (threadIdx.x == 0) {
    if (any && row_max - row_min > quant::kReencodeMaxSpread && violations) atomicAdd(&violations->row_sets, 1);
    if constexpr (kPass == Pass::row) scales_out[scale_layout::outer_vec_index(row)] = fmt::pow2f(kset - 6);
  }
  if constexpr (kPass == Pass::row) {
    for (int64_t base = 0; base < nb; base += chunk) {
#pragma unroll
      for (int i = 0; i < PER; ++i) {
        const int64_t b = base + i * blockDim.x + threadIdx.x;
        if (b >= nb) continue;
        if (!resident) {  // the row did not fit in registers: read it again (L2-resident, normally)
          c[i] = __ldg(rc + b);
          s[i] = rs.at(b);
        }
        encode_block(c[i], s[i], kset, ro + b * 32);
      }
    }
  }
}

// Blocks per thread at least, for a row of nb blocks: the smallest power of two (up to 4) that keeps the
// row's CTA at 256 threads or fewer. On an H100, rows of 512 blocks (16384 columns) re-encode 3-5% faster
// from grid scales and 7-9% faster from tiled scales with 2 blocks per thread (256 threads) than with 1
// (512 threads); rows of 128 blocks are as fast or faster with 1.
int min_blocks_per_thread(int64_t nb) { return std::min(4, row_reencode::blocks_per_thread(nb, 1, 256)); }

template <Pass kPass>
void launch(Mxfp4ConstPlanes in, int64_t rows, int64_t cols, bool count_groups, uint8_t* out, float* scales_out,
            ReencodeViolations* violations, cudaStream_t stream) {
  const int64_t nb = cols / 32;
  // Smallest blocks-per-thread from min_blocks_per_thread() that keeps the row resident; one warp at
  // least, 512 threads at most.
  const int per = row_reencode::blocks_per_thread(nb, min_blocks_per_thread(nb));
  const int64_t want = (nb + per - 1) / per;
  const int threads = static_cast<int>(want >= kMaxThreads ? kMaxThreads : ((want + 31) / 32) * 32);
  const dim3 grid(static_cast<unsigned>(rows));
  auto go = [&](auto kernel) {
    kernel<<<grid, threads, 0, stream>>>(in.codes, in.scales, rows, cols, count_groups, out, scales_out, violations);
  };
  auto pick = [&](auto grid_scales) {
    constexpr bool kGrid = decltype(grid_scales)::value;
    switch (per) {
      case 1: go(reencode_mxfp4_e4m3_kernel<1, kPass, kGrid>); break;
      case 2: go(reencode_mxfp4_e4m3_kernel<2, kPass, kGrid>); break;
      case 4: go(reencode_mxfp4_e4m3_kernel<4, kPass, kGrid>); break;
      default: go(reencode_mxfp4_e4m3_kernel<kMaxPer, kPass, kGrid>); break;
    }
  };
  if (in.scale_layout == MxScaleLayout::grid) {
    pick(std::true_type{});
  } else {
    pick(std::false_type{});
  }
  NIBBLE_CHECK_LAUNCH();
}

// Sets both counters to -1 (not counted), then the counted ones to 0.
void reset_counters(ReencodeViolations* v, bool rows_counted, bool groups_counted, cudaStream_t stream) {
  if (v == nullptr) return;
  NIBBLE_CUDA_CHECK(cudaMemsetAsync(v, 0xFF, sizeof(ReencodeViolations), stream));
  if (rows_counted) NIBBLE_CUDA_CHECK(cudaMemsetAsync(&v->row_sets, 0, sizeof(int), stream));
  if (groups_counted) NIBBLE_CUDA_CHECK(cudaMemsetAsync(&v->group128_sets, 0, sizeof(int), stream));
}

void check_input(const char* fn, Mxfp4ConstPlanes in, int64_t rows, int64_t cols) {
  fp4::check_shape(fn, rows, cols);
  fp4::check_multiple(fn, "cols", cols, 32, "MXFP4 blocks are 1x32 along cols");
  fp4::check_not_null(fn, "in.codes", in.codes);
  fp4::check_not_null(fn, "in.scales", in.scales);
  fp4::check_aligned(fn, "in.codes", in.codes);
}

}  // namespace

const char* reencode_mxfp4_e4m3(Mxfp4ConstPlanes in, int64_t rows, int64_t cols, ReencodeGranularity g,
                                uint8_t* e4m3_out, float* scales_out, ReencodeViolations* violations,
                                cudaStream_t stream) {
  constexpr const char* fn = "reencode_mxfp4_e4m3";
  check_input(fn, in, rows, cols);
  if (g == ReencodeGranularity::group128) {
    fp4::check_multiple(fn, "cols", cols, 128, "group128 sets are 1x128 along cols; use the row granularity");
  }
  fp4::check_not_null(fn, "e4m3_out", e4m3_out);
  fp4::check_not_null(fn, "scales_out", scales_out);
  fp4::check_aligned(fn, "e4m3_out", e4m3_out);
  fp4::check_aligned(fn, "scales_out", scales_out, 4);
  const bool groups = cols % 128 == 0;
  if (g == ReencodeGranularity::row) {
    reset_counters(violations, true, groups, stream);
    launch<Pass::row>(in, rows, cols, groups, e4m3_out, scales_out, violations, stream);
    return groups ? "cuda reencode_mxfp4_e4m3 row scales (outer_vec), CTA per row, 1x128 violations counted"
                  : "cuda reencode_mxfp4_e4m3 row scales (outer_vec), CTA per row";
  }
  reset_counters(violations, false, true, stream);
  launch<Pass::group128>(in, rows, cols, true, e4m3_out, scales_out, violations, stream);
  return "cuda reencode_mxfp4_e4m3 1x128 scales (vec128), CTA per row";
}

const char* count_reencode_violations_mxfp4(Mxfp4ConstPlanes in, int64_t rows, int64_t cols,
                                            ReencodeViolations* violations, cudaStream_t stream) {
  constexpr const char* fn = "count_reencode_violations_mxfp4";
  check_input(fn, in, rows, cols);
  fp4::check_not_null(fn, "violations", violations);
  const bool groups = cols % 128 == 0;
  reset_counters(violations, true, groups, stream);
  launch<Pass::count>(in, rows, cols, groups, nullptr, nullptr, violations, stream);
  return "cuda count_reencode_violations_mxfp4, CTA per row";
}

ReencodeGranularity choose_reencode_granularity(const ReencodeViolations& counts) {
  if (counts.row_sets == 0) return ReencodeGranularity::row;
  if (counts.group128_sets == 0) return ReencodeGranularity::group128;
  if (counts.group128_sets < 0) {
    throw std::runtime_error("MXFP4 operand is not exactly representable in E4M3 with one scale per row (" +
                             std::to_string(counts.row_sets) +
                             " rows have an E8M0 spread > 14) and 1x128 groups were not counted (cols not a "
                             "multiple of 128, or counters not requested); use the exact BF16 emulation");
  }
  throw std::runtime_error("MXFP4 operand is not exactly representable in E4M3: spread > 14 inside a 1x128 group (" +
                           std::to_string(counts.group128_sets) +
                           " groups have non-zero blocks more than 14 binades below the group's largest); use the "
                           "exact BF16 emulation");
}

}  // namespace nibble::cuda
