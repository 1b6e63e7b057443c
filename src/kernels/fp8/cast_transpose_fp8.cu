// Per-tensor FP8: fused cast + transpose + amax (fp8-current and fp8-delayed), the amax pass, and a
// single-launch (cooperative) variant of current scaling.
#include <cooperative_groups.h>

#include <algorithm>

#include "fp8/fp8_preconditions.hpp"
#include "fp8/fp8_tile_128x128.cuh"
#include "nibble/kernels/check.hpp"
#include "nibble/kernels/fp8_hw_convert_math.hpp"
#include "nibble/kernels/quantize_fp8.hpp"
#include "nibble/quant/scale_rules.hpp"

namespace nibble::cuda {
namespace {

using quant::ElementFormat;
namespace tile = fp8_tile;

// NaN payloads collapse to one pattern before the atomic so the stored amax is canonical; every
// NaN is above inf either way, so the order of the max is unchanged.
__device__ __forceinline__ uint32_t canonical_amax_bits(uint32_t b) { return b > 0x7f800000u ? 0x7fc00000u : b; }

__device__ __forceinline__ void record_block_amax(uint32_t mine, float* amax_record) {
  const uint32_t m = tile::block_max(mine);
  if (threadIdx.x == 0 && amax_record != nullptr) {
    atomicMax(reinterpret_cast<unsigned int*>(amax_record), canonical_amax_bits(m));
  }
}

// One 128x128 tile: row-wise copy from registers, column-wise copy through shared memory.
// Returns this thread's amax bits over its elements.
template <ElementFormat F, bool kSr>
__device__ __forceinline__ uint32_t cast_transpose_tile(tile::Smem& s, const uint16_t* __restrict__ x,
                                                        int64_t rows, int64_t cols, int64_t row0, int64_t col0,
                                                        float scale, Fp8Copies out, const quant::SrKey& sr) {
  uint4 v[tile::kRowsPerThread][2];
  tile::load_rows(x, rows, cols, row0, col0, v);
  const tile::RowPhase rp = tile::row_phase();
  const int64_t c = col0 + tile::kColsPerThread * rp.chunk;
  uint32_t am = 0;
#pragma unroll
  for (int k = 0; k < tile::kRowsPerThread; ++k) {
    am = max(am, tile::amax16_bits(v[k]));
    const int64_t r = row0 + rp.r0 + 32 * k;
    if (out.rowwise != nullptr && r < rows && c < cols) {
      float f[16];
      tile::unpack16(v[k], f);
      *reinterpret_cast<uint4*>(out.rowwise + r * cols + c) = tile::encode16<F, kSr>(f, scale, sr, r * cols + c);
    }
  }
  if (out.colwise != nullptr) {
    tile::park_rows(s, v);
    __syncthreads();
#pragma unroll
    for (int pass = 0; pass < tile::kColPasses; ++pass) {
      const tile::ColPhase cp = tile::col_phase(pass);
      uint32_t w[tile::kColRows];
      tile::read_column_pair(s, cp, w);
      const int64_t col = col0 + 2 * cp.word, r = row0 + tile::kColRows * cp.rc;
      if (col < cols && r < rows) {  // cols and rows are multiples of 16: both columns of the pair exist
        float f[tile::kColRows];
        tile::column_lo(w, f);
        *reinterpret_cast<uint4*>(out.colwise + col * rows + r) = tile::encode16<F, kSr>(f, scale, sr, col * rows + r);
        tile::column_hi(w, f);
        *reinterpret_cast<uint4*>(out.colwise + (col + 1) * rows + r) =
            tile::encode16<F, kSr>(f, scale, sr, (col + 1) * rows + r);
      }
    }
    __syncthreads();  // the tile buffer is reused by the next tile / the block reduction
  }
  return am;
}

// Where the cast kernel gets s_enc: a device scalar (delayed scaling, or a caller's scale), or the
// amax of the current-scaling pass (every block derives the same scale; block 0 publishes it).
enum class ScaleSource { given, from_amax };

template <ElementFormat F, bool kSr, ScaleSource kSrc>
__global__ void __launch_bounds__(tile::kThreads)
    cast_transpose_fp8_kernel(const uint16_t* __restrict__ x, int64_t rows, int64_t cols, const float* scale_in,
                              Fp8TensorScale publish, Fp8Copies out, float* amax_record, quant::SrKey sr) {
  __shared__ tile::Smem s;
  float scale;
  if constexpr (kSrc == ScaleSource::from_amax) {
    const float amax = quant::amax_from_bits(*reinterpret_cast<const uint32_t*>(scale_in));
    scale = quant::per_tensor_encode_scale(quant::element_max(F), amax);
    if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) {
      *publish.scale = scale;
      *publish.scale_inv = quant::per_tensor_decode_scale(scale);
    }
  } else {
    scale = *scale_in;
  }
  // After an amax pass (from_amax), the tiles run from the last one back: see quantize_fp8_current.
  const tile::TileCoord t = tile::block_tile(out.colwise != nullptr, kSrc == ScaleSource::from_amax);
  const int64_t row0 = t.tr * tile::kTile, col0 = t.tc * tile::kTile;
  const uint32_t am = cast_transpose_tile<F, kSr>(s, x, rows, cols, row0, col0, scale, out, sr);
  if (amax_record != nullptr) record_block_amax(am, amax_record);
}

// amax pass: 4 independent 16-byte loads in flight per thread, one atomic per block.
constexpr int kAmaxThreads = 256;
constexpr int kAmaxUnroll = 4;

__device__ __forceinline__ uint32_t amax8(uint4 v) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
  uint32_t m = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) m = max(m, max(tile::abs_bits(tile::bf16_lo(w[i])), tile::abs_bits(tile::bf16_hi(w[i]))));
  return m;
}

__device__ __forceinline__ uint32_t amax_grid_stride(const uint4* __restrict__ x, int64_t nvec, int64_t first,
                                                     int64_t stride) {
  uint32_t m = 0;
  int64_t i = first;
  for (; i + (kAmaxUnroll - 1) * stride < nvec; i += kAmaxUnroll * stride) {
    uint4 v[kAmaxUnroll];
#pragma unroll
    for (int u = 0; u < kAmaxUnroll; ++u) v[u] = __ldg(x + i + u * stride);
#pragma unroll
    for (int u = 0; u < kAmaxUnroll; ++u) m = max(m, amax8(v[u]));
  }
  for (; i < nvec; i += stride) m = max(m, amax8(__ldg(x + i)));
  return m;
}

__device__ __forceinline__ void block_amax_atomic(uint32_t m, float* amax) {
  m = block::max_in_thread0<kAmaxThreads>(m);
  if (threadIdx.x == 0) atomicMax(reinterpret_cast<unsigned int*>(amax), canonical_amax_bits(m));
}

__global__ void __launch_bounds__(kAmaxThreads) amax_bf16_kernel(const uint4* __restrict__ x, int64_t nvec, float* amax) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  block_amax_atomic(amax_grid_stride(x, nvec, int64_t{blockIdx.x} * blockDim.x + threadIdx.x, stride), amax);
}

// Single launch: zero the amax, barrier, amax pass, barrier, cast pass over tiles (grid-stride).
// The input is read twice (it does not fit in L2), but there is one launch and no host round trip.
template <ElementFormat F, bool kSr>
__global__ void __launch_bounds__(tile::kThreads)
    current_scaling_fused_kernel(const uint16_t* __restrict__ x, int64_t rows, int64_t cols, Fp8TensorScale sc,
                                 Fp8Copies out, quant::SrKey sr) {
  namespace cg = cooperative_groups;
  __shared__ tile::Smem s;
  cg::grid_group grid = cg::this_grid();
  if (grid.thread_rank() == 0) *reinterpret_cast<uint32_t*>(sc.amax) = 0;
  grid.sync();
  const int64_t nvec = rows * cols / 8;
  const uint32_t m = amax_grid_stride(reinterpret_cast<const uint4*>(x), nvec, grid.thread_rank(), grid.size());
  {
    const uint32_t b = tile::block_max(m);
    if (threadIdx.x == 0) atomicMax(reinterpret_cast<unsigned int*>(sc.amax), canonical_amax_bits(b));
  }
  grid.sync();
  const float amax = quant::amax_from_bits(*reinterpret_cast<volatile uint32_t*>(sc.amax));
  const float scale = quant::per_tensor_encode_scale(quant::element_max(F), amax);
  if (grid.thread_rank() == 0) {
    *sc.scale = scale;
    *sc.scale_inv = quant::per_tensor_decode_scale(scale);
  }
  // The cast pass from the last tile back: the amax pass read the tensor's end last (see quantize_fp8_current).
  const int64_t tiles_c = (cols + tile::kTile - 1) / tile::kTile, tiles_r = (rows + tile::kTile - 1) / tile::kTile;
  const int64_t tiles = tiles_r * tiles_c;
  for (int64_t b = blockIdx.x; b < tiles; b += gridDim.x) {
    const tile::TileCoord t = tile::tile_coord(static_cast<uint32_t>(tiles - 1 - b),
                                               static_cast<uint32_t>(tiles_r), static_cast<uint32_t>(tiles_c),
                                               out.colwise != nullptr);
    cast_transpose_tile<F, kSr>(s, x, rows, cols, t.tr * tile::kTile, t.tc * tile::kTile, scale, out, sr);
  }
}

// Dispatches format x rounding to a callable that receives the template arguments.
template <typename Fn>
void dispatch_fp8(ElementFormat f, bool sr, Fn&& fn) {
  if (f == ElementFormat::e4m3) {
    sr ? fn.template operator()<ElementFormat::e4m3, true>() : fn.template operator()<ElementFormat::e4m3, false>();
  } else {
    sr ? fn.template operator()<ElementFormat::e5m2, true>() : fn.template operator()<ElementFormat::e5m2, false>();
  }
}

dim3 tile_grid(int64_t rows, int64_t cols) {
  return dim3(static_cast<unsigned>((cols + tile::kTile - 1) / tile::kTile),
              static_cast<unsigned>((rows + tile::kTile - 1) / tile::kTile));
}

void check_cast_args(const char* fn, const uint16_t* x, int64_t rows, int64_t cols, ElementFormat f, Fp8Copies out) {
  fp8_check::tile_io(fn, x, rows, cols, out);
  fp8_check::fp8_format(fn, f);
  if ((rows + tile::kTile - 1) / tile::kTile > 65535) {
    throw std::invalid_argument(std::string(fn) + ": rows = " + std::to_string(rows) +
                                " needs more than 65535 row tiles; split the tensor along rows");
  }
}

}  // namespace

const char* amax_bf16(const uint16_t* x, int64_t n, float* amax, cudaStream_t stream) {
  constexpr const char* fn = "amax_bf16";
  check_not_null(fn, "x", x);
  check_not_null(fn, "amax", amax);
  if (n <= 0) throw std::invalid_argument("amax_bf16: n must be positive");
  check_multiple(fn, "n", n, 8, "16-byte loads");
  check_aligned(fn, "x", x);
  NIBBLE_CUDA_CHECK(cudaMemsetAsync(amax, 0, sizeof(float), stream));
  int sms = 0, dev = 0;
  NIBBLE_CUDA_CHECK(cudaGetDevice(&dev));
  NIBBLE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const int64_t nvec = n / 8;
  // Enough blocks to fill every SM several times; more only adds atomics.
  const int64_t want = (nvec + kAmaxThreads * kAmaxUnroll - 1) / (kAmaxThreads * kAmaxUnroll);
  const int blocks = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(want, int64_t{sms} * 8)));
  amax_bf16_kernel<<<blocks, kAmaxThreads, 0, stream>>>(reinterpret_cast<const uint4*>(x), nvec, amax);
  NIBBLE_CHECK_LAUNCH();
  return "amax_bf16 (grid-stride, 4x16B loads in flight, one atomic per block)";
}

const char* cast_transpose_fp8(const uint16_t* x, int64_t rows, int64_t cols, ElementFormat format,
                               const float* scale_enc, Fp8Copies out, float* amax_record, const quant::SrKey& sr,
                               cudaStream_t stream) {
  constexpr const char* fn = "cast_transpose_fp8";
  check_cast_args(fn, x, rows, cols, format, out);
  check_not_null(fn, "scale_enc", scale_enc);
  if (amax_record == nullptr && out.rowwise == nullptr && out.colwise == nullptr) {
    throw std::invalid_argument("cast_transpose_fp8: nothing to do (no output copy and no amax_record)");
  }
  dispatch_fp8(format, sr.enabled, [&]<ElementFormat F, bool kSr>() {
    cast_transpose_fp8_kernel<F, kSr, ScaleSource::given>
        <<<tile_grid(rows, cols), tile::kThreads, 0, stream>>>(x, rows, cols, scale_enc, Fp8TensorScale{}, out,
                                                                amax_record, sr);
  });
  NIBBLE_CHECK_LAUNCH();
  return "cast_transpose_fp8 (fused cast + transpose + amax, 128x128 tiles)";
}

// The current-scaling cast pass walks the tiles from the last one back. The amax pass's grid-stride loop
// reads the tensor's end last, so the cast pass's first tiles are still in L2: up to an L2's worth of the
// second read become hits, per call (on an H100, 0.919 -> 0.959 of a copy's speed on a 15872 x 4096
// activation; the 4096 x 16384 weight, one group of 32 tile rows walked column by column, starts elsewhere
// and gains nothing).

const char* quantize_fp8_current(const uint16_t* x, int64_t rows, int64_t cols, ElementFormat format,
                                 Fp8TensorScale scale, Fp8Copies out, Fp8CurrentPath path, const quant::SrKey& sr,
                                 cudaStream_t stream) {
  constexpr const char* fn = "quantize_fp8_current";
  check_cast_args(fn, x, rows, cols, format, out);
  check_not_null(fn, "scale.amax", scale.amax);
  check_not_null(fn, "scale.scale", scale.scale);
  check_not_null(fn, "scale.scale_inv", scale.scale_inv);
  if (path == Fp8CurrentPath::two_launch) {
    amax_bf16(x, rows * cols, scale.amax, stream);
    dispatch_fp8(format, sr.enabled, [&]<ElementFormat F, bool kSr>() {
      cast_transpose_fp8_kernel<F, kSr, ScaleSource::from_amax>
          <<<tile_grid(rows, cols), tile::kThreads, 0, stream>>>(x, rows, cols, scale.amax, scale, out, nullptr, sr);
    });
    NIBBLE_CHECK_LAUNCH();
    return "fp8-current two launches (amax pass, then cast+transpose deriving the scale on device)";
  }
  int dev = 0, sms = 0, coop = 0;
  NIBBLE_CUDA_CHECK(cudaGetDevice(&dev));
  NIBBLE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  NIBBLE_CUDA_CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev));
  if (!coop) {
    throw std::runtime_error("quantize_fp8_current: this device does not support cooperative launch; "
                             "use Fp8CurrentPath::two_launch");
  }
  dispatch_fp8(format, sr.enabled, [&]<ElementFormat F, bool kSr>() {
    auto* kernel = current_scaling_fused_kernel<F, kSr>;
    int per_sm = 0;
    NIBBLE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, tile::kThreads, 0));
    if (per_sm < 1) throw std::runtime_error("quantize_fp8_current: fused kernel cannot be resident (occupancy 0)");
    const int64_t tiles = int64_t{tile_grid(rows, cols).x} * tile_grid(rows, cols).y;
    const int blocks = static_cast<int>(std::min<int64_t>(tiles, int64_t{per_sm} * sms));
    const uint16_t* xa = x;
    int64_t ra = rows, ca = cols;
    Fp8TensorScale sa = scale;
    Fp8Copies oa = out;
    quant::SrKey ka = sr;
    void* args[] = {&xa, &ra, &ca, &sa, &oa, &ka};
    NIBBLE_CUDA_CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(kernel), dim3(blocks), dim3(tile::kThreads),
                                                  args, 0, stream));
  });
  NIBBLE_CHECK_LAUNCH();
  return "fp8-current single cooperative launch (amax, grid barrier, cast+transpose)";
}

const char* quantize_fp8_delayed(const uint16_t* x, int64_t rows, int64_t cols, ElementFormat format,
                                 const Fp8DelayedState& state, int64_t step, Fp8Copies out, const quant::SrKey& sr,
                                 cudaStream_t stream) {
  constexpr const char* fn = "quantize_fp8_delayed";
  check_not_null(fn, "state.amax_history", state.amax_history);
  if (state.window <= 0) throw std::invalid_argument("quantize_fp8_delayed: state.window must be positive (default 1024)");
  if (step < 0) throw std::invalid_argument("quantize_fp8_delayed: step must be >= 0");
  cast_transpose_fp8(x, rows, cols, format, state.scale, out, state.amax_history + step % state.window, sr, stream);
  return "fp8-delayed single pass (cast+transpose with the history's scale, amax recorded into the history)";
}

}  // namespace nibble::cuda
