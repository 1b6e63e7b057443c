// FP4 quantization kernels on CodonFM-5B tensors: effective bandwidth (bytes read + written over the
// median time) next to a device-to-device copy of the same input measured in the same run.
//   gpu_quant_fp4_bench [--json FILE] [--iters N] [--only SUBSTRING] [--timing synced|queued]
//   (--only: kernels whose name contains it; --timing: see event_timing.hpp)
// Inputs rotate over 3 buffers (each larger than the 60 MB L2 for the big shapes), so no run reads
// what the previous one left in cache. Random BF16 normals, never zeros.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "event_timing.hpp"
#include "nibble/kernels/check.hpp"
#include "nibble/kernels/quantize_fp4.hpp"
#include "nibble/kernels/quantize_nvfp4.hpp"
#include "nibble/kernels/quartet.hpp"
#include "nibble/kernels/quartet_fused.hpp"
#include "nibble/kernels/reencode.hpp"
#include "nibble/format/philox.hpp"

namespace {

using namespace nibble;
constexpr int kBuffers = 3;

__global__ void fill_normal_bf16(uint16_t* x, int64_t n, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    // Box-Muller on two Philox words; magnitudes spread by a per-row-ish exponent.
    const float u1 = (fmt::random_bits(seed, 1, 2 * i) + 1.0f) * 2.3283064e-10f;
    const float u2 = fmt::random_bits(seed, 1, 2 * i + 1) * 2.3283064e-10f;
    const float v = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2) * exp2f(float(int(i >> 12) % 16 - 8)) + 1e-3f;
    x[i] = static_cast<uint16_t>(__float_as_uint(v) >> 16);
  }
}

using kernel_bench::Stats;

template <class T>
T* device_alloc(size_t count) {
  T* p = nullptr;
  NIBBLE_CUDA_CHECK(cudaMalloc(&p, count * sizeof(T)));
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  int iters = 30;
  std::string only;
  kernel_bench::Timing timing = kernel_bench::Timing::synced;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
    else if (!std::strcmp(argv[i], "--iters") && i + 1 < argc) iters = std::max(20, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    else if (!std::strcmp(argv[i], "--timing") && i + 1 < argc && kernel_bench::parse_timing(argv[i + 1], timing)) ++i;
    else {
      std::fprintf(stderr, "usage: %s [--json FILE] [--iters N>=20] [--only SUBSTRING] [--timing synced|queued]\n", argv[0]);
      return 2;
    }
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::fprintf(stderr, "gpu_quant_fp4_bench: no CUDA device\n");
    return 1;
  }
  cudaDeviceProp prop{};
  NIBBLE_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  nlohmann::json out = {{"gpu", prop.name}, {"iters", iters}, {"timing", kernel_bench::timing_name(timing)}, {"results", nlohmann::json::array()}};
  std::printf("%-34s %-14s %9s %9s %9s %9s %7s\n", "kernel", "shape", "median_ms", "GB/s", "copy_GB/s", "ratio", "p90/p10");

  struct Shape { const char* name; int64_t rows, cols; };
  const Shape shapes[] = {{"act 15872x4096", 15872, 4096}, {"act 15872x16384", 15872, 16384}, {"weight 4096x16384", 4096, 16384}};
  for (const Shape& s : shapes) {
    const int64_t n = s.rows * s.cols;
    uint16_t* x[kBuffers];
    for (int b = 0; b < kBuffers; ++b) {
      x[b] = device_alloc<uint16_t>(n);
      fill_normal_bf16<<<1024, 256>>>(x[b], n, 1234 + b);
      NIBBLE_CHECK_LAUNCH();
    }
    uint8_t* copy_dst = device_alloc<uint8_t>(n * 2 + kernel_bench::kCopySlack);
    uint8_t* codes = device_alloc<uint8_t>(n / 2);
    uint8_t* codes2 = device_alloc<uint8_t>(n / 2);
    uint8_t* scales = device_alloc<uint8_t>(n / 16);  // NVFP4's 1x16 scales; MXFP4 uses n / 32
    uint8_t* scales2 = device_alloc<uint8_t>(n / 16);
    float* globals = device_alloc<float>(2);
    uint8_t* mask = device_alloc<uint8_t>(n / 8);
    uint16_t* out16 = device_alloc<uint16_t>(n);
    uint8_t* e4m3 = device_alloc<uint8_t>(n);
    float* row_scales = device_alloc<float>(s.rows);
    int* violations = device_alloc<int>(1);
    NIBBLE_CUDA_CHECK(cudaMemset(mask, 0xB7, n / 8));
    NIBBLE_CUDA_CHECK(cudaDeviceSynchronize());

    const void* sources[kBuffers];
    for (int b = 0; b < kBuffers; ++b) sources[b] = x[b];
    const auto reference = kernel_bench::time_copy_reference(iters, timing, copy_dst, sources, kBuffers, n * 2);
    const Stats copy = reference.best;
    std::printf("%-34s %-14s %9.4f  (fastest of the placements:", "d2d copy (reference)", s.name, copy.median_ms);
    for (double ms : reference.placement_ms) std::printf(" %.4f", ms);
    std::printf(" ms)\n");
    const double copy_gbs = 2.0 * n * 2 / (copy.median_ms * 1e6);

    std::string path;
    // prepare (untimed, once): writes the planes a consumer row reads (re-encoding, decoding), so the row
    // measures the data it is meant for whatever ran before it, and also under --only.
    auto run = [&](const char* kernel, double bytes, const std::function<const char*(int)>& work,
                   const std::function<void()>& prepare = {}) {
      if (!only.empty() && std::string(kernel).find(only) == std::string::npos) return;
      if (prepare) {
        prepare();
        NIBBLE_CUDA_CHECK(cudaDeviceSynchronize());
      }
      const Stats st = kernel_bench::time_calls([&](int i) { path = work(i); }, iters, timing);
      const double gbs = bytes / (st.median_ms * 1e6);
      std::printf("%-34s %-14s %9.4f %9.1f %9.1f %9.3f %7.2f\n", kernel, s.name, st.median_ms, gbs, copy_gbs,
                  gbs / copy_gbs, st.p90_ms / st.p10_ms);
      out["results"].push_back({{"kernel", kernel}, {"path", path}, {"shape", s.name}, {"rows", s.rows}, {"cols", s.cols},
                                {"bytes", bytes}, {"median_ms", st.median_ms}, {"p10_ms", st.p10_ms}, {"p90_ms", st.p90_ms},
                                {"gbps", gbs}, {"copy_median_ms", copy.median_ms}, {"copy_gbps", copy_gbs},
                                {"copy_placement_ms", reference.placement_ms},
                                {"ratio_to_copy", gbs / copy_gbs}});
    };
    const double nb = static_cast<double>(n);
    const double mxfp4_out = nb / 2 + nb / 32;
    run("mxfp4 ocp", 2 * nb + mxfp4_out, [&](int i) {
      return cuda::quantize_mxfp4(x[i % kBuffers], cuda::Fp4DenseType::bf16, s.rows, s.cols, quant::MxScaleRule::ocp, {},
                                  {codes, scales, nullptr}, nullptr);
    });
    // Both MXFP4 copies a training step needs from one read (64x128 tile), instead of writing and reading a
    // BF16 transpose (4n bytes more) and running "mxfp4 ocp" twice.
    run("mxfp4 ocp row+col (64x128 tile)", 2 * nb + 2 * mxfp4_out, [&](int i) {
      return cuda::quantize_mxfp4_rowcol(x[i % kBuffers], cuda::Fp4DenseType::bf16, s.rows, s.cols,
                                         quant::MxScaleRule::ocp, {}, {codes, scales, nullptr},
                                         {codes2, scales2, nullptr}, nullptr);
    });
    // The same with cuBLASLt's 128x4 scale tiles (staged, stored in 8- and 2-byte pieces of whole tiles
    // instead of the grid's 4- and 2-byte runs spread over 64 + 128 rows): the engine's layout.
    const auto tiled = cuda::MxScaleLayout::tiled128x4;
    run("mxfp4 ocp row+col (64x128 tile, tiled scales)", 2 * nb + 2 * mxfp4_out, [&](int i) {
      return cuda::quantize_mxfp4_rowcol(x[i % kBuffers], cuda::Fp4DenseType::bf16, s.rows, s.cols,
                                         quant::MxScaleRule::ocp, {}, {codes, scales, nullptr, tiled},
                                         {codes2, scales2, nullptr, tiled}, nullptr);
    });
    run("mxfp4 ocp col only (64x128 tile)", 2 * nb + mxfp4_out, [&](int i) {
      return cuda::quantize_mxfp4_rowcol(x[i % kBuffers], cuda::Fp4DenseType::bf16, s.rows, s.cols,
                                         quant::MxScaleRule::ocp, {}, {nullptr, nullptr, nullptr},
                                         {codes2, scales2, nullptr}, nullptr);
    });
    run("quartet fwd h32+quest (+mask)", 2 * nb + mxfp4_out + nb / 8, [&](int i) {
      return cuda::quartet_forward_quantize(x[i % kBuffers], cuda::Fp4DenseType::bf16, s.rows, s.cols, {},
                                            {codes, scales, mask}, nullptr);
    });
    // Re-encoding an MXFP4 operand for the FP8 GEMM (reads codes + scales, writes E4M3 + row scales), as the
    // mxfp4 recipe does: from the row+col tile's row-wise copy of x[0], written in the scale layout each row
    // reads (prepare), so the tiled row never reads grid bytes as tiles; then the fused kernel that does both
    // in one pass (with and without the MXFP4 planes).
    auto mxfp4_rows_of_x0 = [&](cuda::MxScaleLayout layout) {
      return [&, layout] {
        (void)cuda::quantize_mxfp4_rowcol(x[0], cuda::Fp4DenseType::bf16, s.rows, s.cols, quant::MxScaleRule::ocp, {},
                                          {codes, scales, nullptr, layout}, {nullptr, nullptr, nullptr}, nullptr);
      };
    };
    run("reencode mxfp4->e4m3 row", mxfp4_out + nb + 4.0 * s.rows, [&](int) {
      return cuda::reencode_mxfp4_e4m3({codes, scales, nullptr}, s.rows, s.cols, cuda::ReencodeGranularity::row, e4m3,
                                       row_scales, nullptr, nullptr);
    }, mxfp4_rows_of_x0(cuda::MxScaleLayout::grid));
    run("reencode mxfp4->e4m3 row (tiled scales)", mxfp4_out + nb + 4.0 * s.rows, [&](int) {
      return cuda::reencode_mxfp4_e4m3({codes, scales, nullptr, tiled}, s.rows, s.cols, cuda::ReencodeGranularity::row,
                                       e4m3, row_scales, nullptr, nullptr);
    }, mxfp4_rows_of_x0(tiled));
    run("quartet fwd fused -> mxfp4+mask+e4m3 row", 2 * nb + mxfp4_out + nb / 8 + nb + 4.0 * s.rows, [&](int i) {
      return cuda::quartet_forward_quantize_e4m3(x[i % kBuffers], cuda::Fp4DenseType::bf16, s.rows, s.cols, {},
                                                 {codes, scales, mask}, {e4m3, row_scales, violations}, nullptr);
    });
    run("quartet fwd fused -> mask+e4m3 row", 2 * nb + nb / 8 + nb + 4.0 * s.rows, [&](int i) {
      return cuda::quartet_forward_quantize_e4m3(x[i % kBuffers], cuda::Fp4DenseType::bf16, s.rows, s.cols, {},
                                                 {nullptr, nullptr, mask}, {e4m3, row_scales, violations}, nullptr);
    });
    cuda::QuartetBackwardOptions bo;
    bo.sign_seed = 42;
    run("quartet bwd rowwise rn", 2 * nb + mxfp4_out, [&](int i) {
      return cuda::quartet_backward_quantize(x[i % kBuffers], cuda::Fp4DenseType::bf16, s.rows, s.cols, bo,
                                             {codes, scales, nullptr}, {}, nullptr);
    });
    run("quartet bwd row+col rn", 2 * nb + 2 * mxfp4_out, [&](int i) {
      return cuda::quartet_backward_quantize(x[i % kBuffers], cuda::Fp4DenseType::bf16, s.rows, s.cols, bo,
                                             {codes, scales, nullptr}, {codes2, scales2, nullptr}, nullptr);
    });
    cuda::QuartetBackwardOptions bs = bo;
    bs.rounding = quant::SrKey{true, 7, quant::kStreamQuartetBackward};
    run("quartet bwd row+col sr", 2 * nb + 2 * mxfp4_out, [&](int i) {
      return cuda::quartet_backward_quantize(x[i % kBuffers], cuda::Fp4DenseType::bf16, s.rows, s.cols, bs,
                                             {codes, scales, nullptr}, {codes2, scales2, nullptr}, nullptr);
    });
    run("quartet bwd from mxfp4 (transposed)", mxfp4_out * 2, [&](int) {
      return cuda::quartet_backward_quantize_mxfp4_transposed({codes, scales, nullptr}, s.rows, s.cols, bo,
                                                              {codes2, scales2, nullptr}, nullptr);
    }, [&] {  // its input: the backward quantizer's row-wise copy of x[0]
      (void)cuda::quartet_backward_quantize(x[0], cuda::Fp4DenseType::bf16, s.rows, s.cols, bo, {codes, scales, nullptr},
                                            {}, nullptr);
    });
    run("quartet epilogue bf16->bf16", 4 * nb + nb / 8, [&](int i) {
      return cuda::quartet_epilogue(x[i % kBuffers], cuda::Fp4DenseType::bf16, s.rows, s.cols, mask, {}, out16,
                                    cuda::Fp4DenseType::bf16, nullptr);
    });
    run("decode mxfp4->bf16", mxfp4_out + 2 * nb, [&](int) {
      return cuda::decode_mxfp4_bf16({codes, scales, nullptr}, s.rows, s.cols, out16, nullptr);
    }, mxfp4_rows_of_x0(cuda::MxScaleLayout::grid));
    // NVFP4: the amax pass and the encode pass each read x (4n bytes in), each copy writes its codes,
    // UE4M3 scales (n/16 for 1x16, n/256 for 16x16) and one FP32 global scale; the engine's roles:
    // X (1x16, RHT on the column-wise copy), dY (the same, stochastic rounding), W (16x16, no RHT).
    cuda::Nvfp4Options nx;
    cuda::Nvfp4Options ndy = nx;
    ndy.rounding = quant::SrKey{true, 7, quant::kStreamNvfp4};
    cuda::Nvfp4Options nw;
    nw.block_rows = 16;
    nw.colwise_rht = false;
    const cuda::Nvfp4Planes nv_row{codes, scales, globals}, nv_col{codes2, scales2, globals + 1};
    run("nvfp4 1x16 row+col (rht col)", 4 * nb + 2 * (nb / 2 + nb / 16), [&](int i) {
      return cuda::quantize_nvfp4(x[i % kBuffers], cuda::Fp4DenseType::bf16, s.rows, s.cols, nx, nv_row, nv_col, nullptr);
    });
    run("nvfp4 1x16 row+col sr (rht col)", 4 * nb + 2 * (nb / 2 + nb / 16), [&](int i) {
      return cuda::quantize_nvfp4(x[i % kBuffers], cuda::Fp4DenseType::bf16, s.rows, s.cols, ndy, nv_row, nv_col, nullptr);
    });
    run("nvfp4 1x16 rowwise only", 4 * nb + nb / 2 + nb / 16, [&](int i) {
      return cuda::quantize_nvfp4(x[i % kBuffers], cuda::Fp4DenseType::bf16, s.rows, s.cols, nx, nv_row, {}, nullptr);
    });
    run("nvfp4 16x16 row+col", 4 * nb + 2 * (nb / 2 + nb / 256), [&](int i) {
      return cuda::quantize_nvfp4(x[i % kBuffers], cuda::Fp4DenseType::bf16, s.rows, s.cols, nw, nv_row, nv_col, nullptr);
    });
    // Decode a 1x16 row-wise copy of x[0] (written first: the 16x16 row left 16x16 scales in the planes).
    run("decode nvfp4->bf16", nb / 2 + nb / 16 + 2 * nb, [&](int) {
      return cuda::decode_nvfp4_bf16({codes, scales}, s.rows, s.cols, 1, out16, nullptr);
    }, [&] { (void)cuda::quantize_nvfp4(x[0], cuda::Fp4DenseType::bf16, s.rows, s.cols, nx, nv_row, {}, nullptr); });
    for (int b = 0; b < kBuffers; ++b) cudaFree(x[b]);
    for (void* p : {static_cast<void*>(copy_dst), static_cast<void*>(codes), static_cast<void*>(codes2),
                    static_cast<void*>(scales), static_cast<void*>(scales2), static_cast<void*>(mask),
                    static_cast<void*>(out16), static_cast<void*>(e4m3), static_cast<void*>(row_scales),
                    static_cast<void*>(violations), static_cast<void*>(globals)}) cudaFree(p);
  }
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    f << out.dump(2) << "\n";
    if (!f) { std::fprintf(stderr, "gpu_quant_fp4_bench: cannot write %s\n", json_path.c_str()); return 1; }
  }
  return 0;
}
