// Names of modes and paths, and the small helpers of the result model.
#include "nibble/results/result.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <ctime>
#include <stdexcept>

namespace nibble::bench {

namespace {
constexpr std::array<std::string_view, 5> kPaths = {path::native, path::emulated_exact_fp8,
                                                    path::emulated_exact_bf16,
                                                    path::emulated_approximate, path::predicted};
}  // namespace

std::string_view to_string(Mode mode) {
  switch (mode) {
    case Mode::pre_quantized: return "pre-quantized";
    case Mode::step: return "step";
    case Mode::per_gemm: return "per-gemm";
  }
  throw std::invalid_argument("mode: invalid enum value");
}

Mode mode_from_string(std::string_view text) {
  if (text == "pre-quantized") return Mode::pre_quantized;
  if (text == "step") return Mode::step;
  if (text == "per-gemm") return Mode::per_gemm;
  throw std::invalid_argument(
      fmt::format("mode '{}' is not one of: pre-quantized, step, per-gemm", text));
}

LinearShape linear_shape(const Row& row) {
  if (row.pass == "dgrad") return {row.m, row.n, row.k};
  if (row.pass == "wgrad") return {row.k, row.m, row.n};
  return {row.m, row.k, row.n};
}

bool is_valid_path(std::string_view text) {
  for (auto p : kPaths)
    if (text == p) return true;
  return false;
}

void check_path(std::string_view text, std::string_view field) {
  if (is_valid_path(text)) return;
  throw std::invalid_argument(fmt::format(
      "{}: path '{}' is not one of: native, emulated-exact (fp8), emulated-exact (bf16), "
      "emulated-approximate, predicted",
      field, text));
}

bool is_once_per_model(std::string_view layer) {
  return layer == "lm_head" || layer == "embedding";
}

void finish_row(Row& row, double peak_tflops) {
  row.total_ms = row.gemm.median_ms + row.quant_ms;
  row.tflops = row.total_ms > 0 ? row.flops / (row.total_ms * 1e-3) / 1e12 : kNaN;
  row.pct_of_peak = (peak_tflops > 0 && row.gemm.median_ms > 0)
                        ? 100.0 * row.flops / (row.gemm.median_ms * 1e-3) / 1e12 / peak_tflops
                        : kNaN;
}

void amortise_weight_quant(Row& row, int grad_accum) {
  if (grad_accum < 1)
    throw std::invalid_argument(fmt::format("grad_accum: {} must be at least 1 (micro-batches per optimizer step)",
                                            grad_accum));
  // A measured weight share may exceed the pass's median by the timing noise of two separate medians.
  constexpr double kNoise = 1.05;
  if (!(row.weight_quant_ms >= 0) || !(row.weight_quant_bytes >= 0) ||
      !(row.weight_quant_bytes <= row.quant_bytes * kNoise) || !(row.weight_quant_ms <= row.quant_ms * kNoise + 1e-6))
    throw std::invalid_argument(fmt::format(
        "{} {} {}: weight quantization ({} ms, {} bytes) must be a part of the row's quantization ({} ms, {} bytes)",
        row.layer, row.pass, row.recipe, row.weight_quant_ms, row.weight_quant_bytes, row.quant_ms, row.quant_bytes));
  const double keep = 1.0 - 1.0 / grad_accum;
  row.quant_ms = std::max(0.0, row.quant_ms - row.weight_quant_ms * keep);
  row.quant_bytes = std::max(0.0, row.quant_bytes - row.weight_quant_bytes * keep);
}

void fill_bounds(BenchResult& result) {
  if (!(result.copy_bandwidth_gbs > 0))
    throw std::invalid_argument(
        "copy_bandwidth_gbs: must be measured (> 0) before the quantization bounds can be computed");
  for (Row& r : result.rows) {
    if (!r.ok()) continue;
    double gemm_ms = r.gemm.median_ms;
    if (r.mode == Mode::step)
      for (const Row& p : result.rows)
        if (p.ok() && p.mode == Mode::pre_quantized && p.layer == r.layer && p.pass == r.pass &&
            p.recipe == r.recipe && p.m == r.m && p.k == r.k && p.n == r.n) {
          gemm_ms = p.gemm.median_ms;
          break;
        }
    r.bound_ms = gemm_ms + r.quant_bytes / (result.copy_bandwidth_gbs * 1e9) * 1e3;
  }
}

std::string utc_now_iso8601() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace nibble::bench
