// GEMM time by shape: a roofline whose compute side models how a GEMM library tiles the output
// (wave quantization over the SMs, padding of edge tiles, split-K for skinny shapes) and whose
// memory side is the operand and output bytes over the achievable copy bandwidth.
#include "nibble/predict.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace nibble::predict {

namespace {
// Fixed cost of a launch plus the first tile's prologue; visible only on small GEMMs.
constexpr double kLaunchMs = 0.004;
// K-loop fill and drain, in elements of K: a tile with short K spends relatively longer loading
// its first stages and writing its epilogue.
constexpr double kPipelineK = 96;
// Smaller tiles reuse each loaded operand fewer times; their throughput falls off slowly with
// area. (area / largest area)^0.12: a quarter-size tile runs at ~85%.
constexpr double kTileAreaExponent = 0.12;

// The fastest compute time over the tilings a library would consider, at efficiency 1.
double best_compute_seconds(double m, double k, double n, const Execution& exec, const GpuSpec& gpu) {
  const double per_sm_flops = exec.peak_tflops * 1e12 / gpu.sm_count;
  const double max_area = double(gpu.tile_m) * gpu.tile_n;
  double best = std::numeric_limits<double>::infinity();
  for (double tm : {64.0, 128.0, 256.0}) {
    if (tm > gpu.tile_m) continue;
    for (double tn : {64.0, 128.0, 256.0}) {
      if (tn > gpu.tile_n) continue;
      const double tiles = std::ceil(m / tm) * std::ceil(n / tn);
      for (double split : {1.0, 2.0, 4.0, 8.0, 16.0}) {
        if (split > 1 && (k / split < 256 || tiles * split > 4.0 * gpu.sm_count)) continue;
        const double kk = std::ceil(k / split);
        const double waves = std::ceil(tiles * split / gpu.sm_count);
        const double tile_rate = per_sm_flops * std::pow(tm * tn / max_area, kTileAreaExponent) * kk / (kk + kPipelineK);
        // Split-K writes fp32 partial outputs and reads them back to reduce: a cost that grows
        // with the split, so doubling K is never free.
        const double reduce = split > 1 ? 2.0 * split * m * n * 4.0 / (gpu.copy_bandwidth_gbs() * 1e9) : 0.0;
        best = std::min(best, waves * 2 * tm * tn * kk / tile_rate + reduce);
      }
    }
  }
  return best;
}
}  // namespace

double kernel_launch_ms() { return kLaunchMs; }

double gemm_ms(const Shape& s, const Execution& exec, const GpuSpec& gpu, double efficiency) {
  const double m = double(s.m), k = double(s.k), n = double(s.n);
  const double compute_ms = best_compute_seconds(m, k, n, exec, gpu) / efficiency * 1e3;
  const double bytes = (m * k + k * n) * exec.operand_bytes + m * n * 2;  // bf16 output
  const double memory_ms = bytes / (gpu.copy_bandwidth_gbs() * 1e9) * 1e3;
  return std::max(compute_ms, memory_ms) + kLaunchMs;
}

}  // namespace nibble::predict
