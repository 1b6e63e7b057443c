// Names of modes and paths, and the small helpers of the result model: the row of a workload GEMM
// (row_from_gemm, result.hpp), the execution-path notes of one (recipe, layer) (path_notes.hpp) and the BF16
// layer plan of `nibble bench --keep-bf16`.
#include "nibble/results/path_notes.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <ctime>
#include <stdexcept>
#include <string>

#include "nibble/results/result.hpp"

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

// Shape fields copied the same way by the engine and the predictor.
Row row_from_gemm(const workload::Gemm& gemm, std::string recipe, Mode mode) {
  Row r;
  r.layer = gemm.layer;
  r.pass = gemm.pass;
  r.m = gemm.m;
  r.k = gemm.k;
  r.n = gemm.n;
  r.count = gemm.count;
  r.flops = 2.0 * static_cast<double>(gemm.m) * static_cast<double>(gemm.k) * static_cast<double>(gemm.n);
  r.per_model = gemm.per_model;
  r.group_tokens = gemm.group_tokens;
  // Routed experts: the path the workload asked for (the engine replaces it with what it ran).
  if (gemm.role == "expert")
    r.moe_path = gemm.group_tokens.empty() ? std::string(moe_path::per_expert)
                                           : moe_path::grouped(moe_path::one_quantize_launch);
  r.recipe = std::move(recipe);
  r.mode = mode;
  return r;
}

// One note line per (recipe, layer) and path, naming the modes only when they differ.
void PathNotes::add(Mode mode, const std::string& path) {
  if (path.empty()) return;
  auto same = std::find_if(paths_.begin(), paths_.end(), [&](const auto& p) { return p.first == path; });
  if (same == paths_.end()) {
    paths_.push_back({path, {mode}});
  } else if (std::find(same->second.begin(), same->second.end(), mode) == same->second.end()) {
    same->second.push_back(mode);
  }
}

std::vector<std::string> PathNotes::lines(const std::string& recipe, const std::string& layer) const {
  std::vector<std::string> out;
  for (const auto& [path, modes] : paths_) {
    std::string which;
    if (paths_.size() > 1) {
      for (Mode m : modes) which += (which.empty() ? "[" : ", ") + std::string(to_string(m));
      which += "] ";
    }
    out.push_back(recipe + " " + layer + ": " + which + path);
  }
  return out;
}

}  // namespace nibble::bench

// The BF16 layer plan of `nibble bench --keep-bf16` (include/nibble/results/result.hpp: LayerPlan).
namespace nibble::bench {

namespace {

constexpr const char* kForm = "use first:K,last:L[,lm_head], e.g. first:2,last:2";

int64_t parse_count(std::string_view field, std::string_view part, std::string_view value) {
  int64_t v = -1;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (value.empty() || ec != std::errc() || end != value.data() + value.size() || v < 0)
    throw std::invalid_argument(fmt::format("{}: '{}' needs a whole number of blocks >= 0 after the colon; {}", field,
                                            part, kForm));
  return v;
}

}  // namespace

LayerPlan parse_layer_plan(std::string_view spec, int64_t layers, std::string_view field) {
  LayerPlan plan;
  if (spec.empty()) throw std::invalid_argument(fmt::format("{}: empty; {}", field, kForm));
  bool seen_first = false, seen_last = false;
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t comma = spec.find(',', start);
    const std::string_view part = spec.substr(start, comma == std::string_view::npos ? spec.npos : comma - start);
    start = comma == std::string_view::npos ? spec.size() + 1 : comma + 1;
    const size_t colon = part.find(':');
    const std::string_view key = part.substr(0, colon);
    const std::string_view value = colon == std::string_view::npos ? std::string_view() : part.substr(colon + 1);
    auto once = [&](bool& seen) {
      if (seen) throw std::invalid_argument(fmt::format("{}: '{}' is given twice; give each key once", field, key));
      seen = true;
      if (colon == std::string_view::npos)
        throw std::invalid_argument(fmt::format("{}: '{}' needs a count ({}:K); {}", field, key, key, kForm));
    };
    if (key == "first") {
      once(seen_first);
      plan.bf16_first = parse_count(field, part, value);
    } else if (key == "last") {
      once(seen_last);
      plan.bf16_last = parse_count(field, part, value);
    } else if (key == "lm_head") {
      if (colon != std::string_view::npos)
        throw std::invalid_argument(fmt::format("{}: 'lm_head' takes no count; {}", field, kForm));
      if (plan.bf16_lm_head) throw std::invalid_argument(fmt::format("{}: 'lm_head' is given twice", field));
      plan.bf16_lm_head = true;
    } else {
      throw std::invalid_argument(fmt::format("{}: unknown key '{}' in '{}'; the keys are first, last and lm_head ({})",
                                              field, key, spec, kForm));
    }
  }
  if (plan.bf16_blocks() > layers)
    throw std::invalid_argument(fmt::format(
        "{}: first:{} + last:{} = {} blocks kept in BF16, but the model has {} layers; keep at most {} in all",
        field, plan.bf16_first, plan.bf16_last, plan.bf16_blocks(), layers, layers));
  return plan;
}

std::string to_string(const LayerPlan& plan) {
  std::string out;
  auto add = [&](const std::string& part) { out += (out.empty() ? "" : ",") + part; };
  if (plan.bf16_first > 0) add(fmt::format("first:{}", plan.bf16_first));
  if (plan.bf16_last > 0) add(fmt::format("last:{}", plan.bf16_last));
  if (plan.bf16_lm_head) add("lm_head");
  return out;
}

}  // namespace nibble::bench
