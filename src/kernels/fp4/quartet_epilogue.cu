// Quartet post-GEMM epilogue: out = inverse_rotation((G * scale) masked by the forward trust mask),
// the rotation running along rows. One thread owns one rotation block (max(32, size) elements):
// 16-byte loads of G, one 32-bit mask word per 32 elements, the shared quant::rotate_block_inverse,
// 16-byte stores. Expression order as quant::quartet_dgrad_epilogue: keep ? g * scale : 0, then the
// inverse transform, then (BF16 out) one round-to-nearest-even.
#include "fp4/fp4_kernel_io.cuh"
#include "nibble/quant/hadamard.hpp"

namespace nibble::cuda {
namespace {

constexpr int kThreads = 256;

template <int N, class Out>
__device__ __forceinline__ void store_dense(Out* __restrict__ p, const float* v) {
  if constexpr (sizeof(Out) == 2) {
#pragma unroll
    for (int i = 0; i < N / 8; ++i) {
      uint32_t w[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        w[j] = static_cast<uint32_t>(fmt::encode_bf16(v[8 * i + 2 * j])) |
               (static_cast<uint32_t>(fmt::encode_bf16(v[8 * i + 2 * j + 1])) << 16);
      }
      reinterpret_cast<uint4*>(p)[i] = make_uint4(w[0], w[1], w[2], w[3]);
    }
  } else {
#pragma unroll
    for (int i = 0; i < N / 4; ++i) {
      reinterpret_cast<float4*>(p)[i] = make_float4(v[4 * i], v[4 * i + 1], v[4 * i + 2], v[4 * i + 3]);
    }
  }
}

template <int R, class In, class Out>
__global__ void __launch_bounds__(kThreads)
    quartet_epilogue_kernel(const In* __restrict__ g, int64_t rows, int64_t cols, const uint8_t* __restrict__ mask,
                            float scale, Out* __restrict__ out) {
  constexpr int N = R > 32 ? R : 32;
  const int64_t per_row = cols / N;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (item >= rows * per_row) return;
  const int64_t base = (item / per_row) * cols + (item % per_row) * N;
  float v[N];
  fp4::load_dense<N>(g + base, v);
#pragma unroll
  for (int w = 0; w < N / 32; ++w) {
    const uint32_t m = __ldg(reinterpret_cast<const uint32_t*>(mask) + base / 32 + w);
#pragma unroll
    for (int j = 0; j < 32; ++j) v[32 * w + j] = ((m >> j) & 1u) ? v[32 * w + j] * scale : 0.0f;
  }
  if constexpr (R > 0) {
    constexpr quant::Rotation rot{R, quant::SignKind::none, 0};
#pragma unroll
    for (int b = 0; b < N / R; ++b) quant::rotate_block_inverse(v + b * R, rot);
  }
  store_dense<N>(out + base, v);
}

template <int R, class In, class Out>
void launch(const In* g, int64_t rows, int64_t cols, const uint8_t* mask, float scale, Out* out, cudaStream_t stream) {
  constexpr int N = R > 32 ? R : 32;
  quartet_epilogue_kernel<R, In, Out><<<fp4::blocks_for(rows * (cols / N), kThreads), kThreads, 0, stream>>>(
      g, rows, cols, mask, scale, out);
  NIBBLE_CHECK_LAUNCH();
}

template <class In, class Out>
void dispatch(const In* g, int64_t rows, int64_t cols, const uint8_t* mask, const QuartetEpilogueOptions& o, Out* out,
              cudaStream_t stream) {
  if (!o.rotate) return launch<0>(g, rows, cols, mask, o.scale, out, stream);
  switch (o.hadamard_size) {
    case 16: return launch<16>(g, rows, cols, mask, o.scale, out, stream);
    case 32: return launch<32>(g, rows, cols, mask, o.scale, out, stream);
    case 64: return launch<64>(g, rows, cols, mask, o.scale, out, stream);
    default: return launch<128>(g, rows, cols, mask, o.scale, out, stream);
  }
}

template <class In>
void dispatch_out(const In* g, int64_t rows, int64_t cols, const uint8_t* mask, const QuartetEpilogueOptions& o,
                  void* out, Fp4DenseType out_type, cudaStream_t stream) {
  if (out_type == Fp4DenseType::bf16) {
    dispatch(g, rows, cols, mask, o, static_cast<uint16_t*>(out), stream);
  } else {
    dispatch(g, rows, cols, mask, o, static_cast<float*>(out), stream);
  }
}

}  // namespace

const char* quartet_epilogue(const void* g, Fp4DenseType g_type, int64_t rows, int64_t cols, const uint8_t* mask,
                             const QuartetEpilogueOptions& options, void* out, Fp4DenseType out_type,
                             cudaStream_t stream) {
  constexpr const char* fn = "quartet_epilogue";
  fp4::check_shape(fn, rows, cols);
  if (options.rotate) fp4::check_hadamard_size(fn, options.hadamard_size, 128);
  const int n = options.rotate && options.hadamard_size > 32 ? options.hadamard_size : 32;
  fp4::check_multiple(fn, "cols", cols, n, "one thread owns whole rotation blocks and 32-bit mask words");
  fp4::check_not_null(fn, "g", g);
  fp4::check_not_null(fn, "mask", mask);
  fp4::check_not_null(fn, "out", out);
  fp4::check_aligned(fn, "g", g);
  fp4::check_aligned(fn, "out", out);
  fp4::check_aligned(fn, "mask", mask, 4);
  if (g_type == Fp4DenseType::bf16) {
    dispatch_out(static_cast<const uint16_t*>(g), rows, cols, mask, options, out, out_type, stream);
  } else {
    dispatch_out(static_cast<const float*>(g), rows, cols, mask, options, out, out_type, stream);
  }
  return options.rotate ? "cuda quartet_epilogue scale+mask+inverse hadamard fused, thread per rotation block"
                        : "cuda quartet_epilogue scale+mask (no rotation), thread per 32 elements";
}

}  // namespace nibble::cuda
