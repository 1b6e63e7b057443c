// FP8-family quantization kernels at CodonFM-5B shapes: effective bandwidth
// (bytes read + bytes written) / median time, next to a device-to-device copy of the same input
// measured in the same run. Usage: gpu_quant_fp8_bench [--json FILE] [--reps N] [--timing synced|queued]
// (--timing: see event_timing.hpp)
// (printf, not fmt: fmt 9's consteval format strings do not compile under nvcc in C++20.)
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "event_timing.hpp"
#include "nibble/kernels/check.hpp"
#include "nibble/kernels/quantize_fp8.hpp"
#include "nibble/kernels/scale_layout.hpp"

namespace {

namespace nc = nibble::cuda;
namespace nq = nibble::quant;

// Random BF16 normals-ish (hash -> sum of uniforms) with a per-32 magnitude spread; never zero.
__global__ void fill_bf16(uint16_t* x, int64_t n, uint32_t seed) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 0x9E3779B1u ^ seed;
    h ^= h >> 15; h *= 0x2C1B3C6Du; h ^= h >> 12; h *= 0x297A2D39u; h ^= h >> 15;
    const float u = (static_cast<float>(h & 0xffff) - 32767.5f) / 16384.0f;
    const int e = static_cast<int>((static_cast<uint32_t>(i / 32) * 2654435761u) >> 28) - 8;
    x[i] = static_cast<uint16_t>(__float_as_uint(ldexpf(u, e)) >> 16) | 1;
  }
}

using nibble::kernel_bench::Stats;

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  int reps = 30;
  nibble::kernel_bench::Timing timing = nibble::kernel_bench::Timing::synced;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json" && i + 1 < argc) json_path = argv[++i];
    else if (a == "--reps" && i + 1 < argc) reps = std::max(20, std::atoi(argv[++i]));
    else if (a == "--timing" && i + 1 < argc && nibble::kernel_bench::parse_timing(argv[i + 1], timing)) ++i;
    else { std::fprintf(stderr, "usage: %s [--json FILE] [--reps N>=20] [--timing synced|queued]\n", argv[0]); return 2; }
  }
  try {
    cudaDeviceProp prop{};
    NIBBLE_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    struct Shape { const char* name; int64_t rows, cols; };
    const Shape shapes[] = {{"act 15872x4096", 15872, 4096}, {"act 15872x16384", 15872, 16384}, {"weight 4096x16384", 4096, 16384}};
    const int64_t max_n = 15872LL * 16384;
    uint16_t* in[2];
    uint8_t *row, *col;
    float *sc_row, *sc_col, *scal;
    uint16_t* dec;
    for (auto& p : in) NIBBLE_CUDA_CHECK(cudaMalloc(&p, max_n * 2));
    NIBBLE_CUDA_CHECK(cudaMalloc(&row, max_n));
    NIBBLE_CUDA_CHECK(cudaMalloc(&col, max_n));
    NIBBLE_CUDA_CHECK(cudaMalloc(&dec, max_n * 2 + nibble::kernel_bench::kCopySlack));  // + room to move the copy
    NIBBLE_CUDA_CHECK(cudaMalloc(&sc_row, max_n / 32 * 4 + 4096));
    NIBBLE_CUDA_CHECK(cudaMalloc(&sc_col, max_n / 32 * 4 + 4096));
    NIBBLE_CUDA_CHECK(cudaMalloc(&scal, 4096 * sizeof(float)));
    NIBBLE_CUDA_CHECK(cudaMemset(scal, 0, 4096 * sizeof(float)));
    fill_bf16<<<1024, 256>>>(in[0], max_n, 1);
    fill_bf16<<<1024, 256>>>(in[1], max_n, 2);
    NIBBLE_CHECK_LAUNCH();
    const float one = 1.0f;
    NIBBLE_CUDA_CHECK(cudaMemcpy(scal + 8, &one, 4, cudaMemcpyHostToDevice));
    NIBBLE_CUDA_CHECK(cudaMemcpy(scal + 9, &one, 4, cudaMemcpyHostToDevice));
    const nc::Fp8TensorScale ts{scal, scal + 1, scal + 2};
    const nc::Fp8DelayedState ds{scal + 16, 1024, scal + 8, scal + 9};
    const nq::SrKey rn{};

    nlohmann::json out;
    out["device"] = prop.name;
    out["reps"] = reps;
    out["timing"] = nibble::kernel_bench::timing_name(timing);
    out["results"] = nlohmann::json::array();
    std::printf("%-20s %-44s %9s %9s %9s %9s %7s\n", "shape", "kernel", "median_us", "p10_us", "p90_us", "TB/s", "vs_copy");
    for (const Shape& s : shapes) {
      const int64_t n = s.rows * s.cols;
      const void* sources[2] = {in[0], in[1]};
      const auto reference = nibble::kernel_bench::time_copy_reference(reps, timing, dec, sources, 2, n * 2);
      const Stats copy = reference.best;
      const double copy_tbs = 2.0 * n * 2 / (copy.median_ms * 1e-3) / 1e12;
      auto report = [&](const char* kernel, const char* path, double bytes, const Stats& t) {
        const double tbs = bytes / (t.median_ms * 1e-3) / 1e12;
        std::printf("%-20s %-44s %9.1f %9.1f %9.1f %9.2f %7.2f\n", s.name, kernel, t.median_ms * 1e3,
                   t.p10_ms * 1e3, t.p90_ms * 1e3, tbs, tbs / copy_tbs);
        out["results"].push_back({{"shape", s.name}, {"rows", s.rows}, {"cols", s.cols}, {"kernel", kernel}, {"path", path},
                                  {"bytes", bytes}, {"median_ms", t.median_ms}, {"p10_ms", t.p10_ms}, {"p90_ms", t.p90_ms},
                                  {"tb_per_s", tbs}, {"copy_tb_per_s", copy_tbs}, {"ratio_to_copy", tbs / copy_tbs}});
      };
      report("d2d copy (reference)", "cudaMemcpyAsync, fastest destination placement", 2.0 * n * 2, copy);
      out["results"].back()["copy_placement_ms"] = reference.placement_ms;
      const char* path = nullptr;
      auto run = [&](const std::string& kernel, double bytes, const std::function<void(int)>& fn) {
        const Stats t = nibble::kernel_bench::time_calls(fn, reps, timing);
        report(kernel.c_str(), path != nullptr ? path : "", bytes, t);
      };
      const double rw2 = 2.0 * n + 2.0 * n;  // read bf16, write two fp8 copies
      run("amax", 2.0 * n, [&](int i) { path = nc::amax_bf16(in[i & 1], n, scal, nullptr); });
      run("fp8 cast+transpose+amax (delayed, e4m3)", rw2, [&](int i) {
        path = nc::quantize_fp8_delayed(in[i & 1], s.rows, s.cols, nq::ElementFormat::e4m3, ds, i, {row, col}, rn, nullptr);
      });
      run("fp8 current 2 launches (e5m2)", rw2 + 2.0 * n, [&](int i) {
        path = nc::quantize_fp8_current(in[i & 1], s.rows, s.cols, nq::ElementFormat::e5m2, ts, {row, col},
                                        nc::Fp8CurrentPath::two_launch, rn, nullptr);
      });
      run("fp8 current single launch (e4m3)", rw2 + 2.0 * n, [&](int i) {
        path = nc::quantize_fp8_current(in[i & 1], s.rows, s.cols, nq::ElementFormat::e4m3, ts, {row, col},
                                        nc::Fp8CurrentPath::single_launch, rn, nullptr);
      });
      run("fp8 cast rowwise only + amax", 3.0 * n, [&](int i) {
        path = nc::cast_transpose_fp8(in[i & 1], s.rows, s.cols, nq::ElementFormat::e4m3, scal + 8, {row, nullptr}, scal + 3, rn, nullptr);
      });
      const double blk_scales = 4.0 * (n / 128) * 2;
      run("fp8-block 1x128 row+col", rw2 + blk_scales, [&](int i) {
        path = nc::quantize_fp8_block_1x128(in[i & 1], s.rows, s.cols, {row, col}, sc_row, sc_col, nc::BlockScaleLayout::cublaslt, rn, nullptr);
      });
      run("fp8-block 1x128 rowwise only", 3.0 * n + blk_scales / 2, [&](int i) {
        path = nc::quantize_fp8_block_1x128(in[i & 1], s.rows, s.cols, {row, nullptr}, sc_row, nullptr, nc::BlockScaleLayout::cublaslt, rn, nullptr);
      });
      run("fp8-block 128x128 row+col", rw2, [&](int i) {
        path = nc::quantize_fp8_block_128x128(in[i & 1], s.rows, s.cols, {row, col}, sc_row, sc_col, nc::BlockScaleLayout::cublaslt, rn, nullptr);
      });
      const double mx_scales = 2.0 * n / 32;
      run("mxfp8 ocp row+col", rw2 + mx_scales, [&](int i) {
        path = nc::quantize_mxfp8(in[i & 1], s.rows, s.cols, nq::MxScaleRule::ocp, {row, col}, reinterpret_cast<uint8_t*>(sc_row),
                                  reinterpret_cast<uint8_t*>(sc_col), nc::MxScaleLayout::grid, rn, nullptr);
      });
      // The same kernel writing cuBLASLt's 128x4 scale tiles (a 128x128 data tile's scales are one 512-byte
      // run per copy, whole sectors; the grid layout's are 4-byte runs): how much the grid's stores cost.
      run("mxfp8 ocp row+col (tiled128x4 scales)", rw2 + mx_scales, [&](int i) {
        path = nc::quantize_mxfp8(in[i & 1], s.rows, s.cols, nq::MxScaleRule::ocp, {row, col}, reinterpret_cast<uint8_t*>(sc_row),
                                  reinterpret_cast<uint8_t*>(sc_col), nc::MxScaleLayout::tiled128x4, rn, nullptr);
      });
      run("mxfp8 ocp rowwise only", 3.0 * n + mx_scales / 2, [&](int i) {
        path = nc::quantize_mxfp8(in[i & 1], s.rows, s.cols, nq::MxScaleRule::ocp, {row, nullptr}, reinterpret_cast<uint8_t*>(sc_row),
                                  nullptr, nc::MxScaleLayout::grid, rn, nullptr);
      });
      for (auto layout : {nc::MxScaleLayout::grid, nc::MxScaleLayout::tiled128x4}) {
        const std::string scales = layout == nc::MxScaleLayout::grid ? "" : " (tiled128x4 scales)";
        run("decode mxfp8->bf16" + scales, 3.0 * n + mx_scales / 2, [&](int) {
          path = nc::decode_mxfp8_bf16(row, reinterpret_cast<uint8_t*>(sc_row), s.rows, s.cols, dec, false, layout, nullptr);
        });
        run("decode mxfp8->bf16 transposed" + scales, 3.0 * n + mx_scales / 2, [&](int) {
          path = nc::decode_mxfp8_bf16(row, reinterpret_cast<uint8_t*>(sc_row), s.rows, s.cols, dec, true, layout, nullptr);
        });
      }
    }
    if (!json_path.empty()) {
      std::ofstream(json_path) << out.dump(2) << "\n";
      std::printf("wrote %s\n", json_path.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_quant_fp8_bench: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
