// BenchResult <-> JSON. The writer emits every field under a stable name; the reader validates
// everything it needs and names the offending field, because `nibble report` and the planner load
// files that may be hand-edited, truncated or from another version.
#include "nibble/io/json_file.hpp"
#include "nibble/results/aggregate.hpp"
#include "nibble/results/result.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <stdexcept>

namespace nibble::bench {

namespace {

using nlohmann::json;

constexpr int kSchemaVersion = 1;

// NaN is not JSON; "not available" is written as null and read back as NaN.
json number_or_null(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

// A Timing under `prefix`: prefix_ms (the median), prefix_p10_ms, prefix_p90_ms, prefix_min_ms,
// prefix_max_ms, and n_runs.
void put_timing(json& j, const std::string& prefix, const Timing& t) {
  j[prefix + "_ms"] = t.median_ms;
  j[prefix + "_p10_ms"] = t.p10_ms;
  j[prefix + "_p90_ms"] = t.p90_ms;
  j[prefix + "_min_ms"] = t.min_ms;
  j[prefix + "_max_ms"] = t.max_ms;
  j["n_runs"] = t.n_runs;
}

json row_json(const Row& r) {
  json j = {{"layer", r.layer},
            {"pass", r.pass},
            {"m", r.m},
            {"k", r.k},
            {"n", r.n},
            {"count", r.count},
            {"per_model", r.per_model},
            {"flops", r.flops},
            {"recipe", r.recipe},
            {"mode", std::string(to_string(r.mode))},
            {"quant_ms", r.quant_ms},
            {"total_ms", r.total_ms},
            {"tflops", r.tflops},
            {"pct_of_peak", r.pct_of_peak},
            {"path", r.path},
            {"quant_bytes", r.quant_bytes},
            {"weight_quant_ms", r.weight_quant_ms},
            {"weight_quant_bytes", r.weight_quant_bytes},
            {"bound_ms", number_or_null(r.bound_ms)},
            {"error", r.error.empty() ? json(nullptr) : json(r.error)}};
  put_timing(j, "gemm", r.gemm);
  if (!r.ok()) {
    // A failed row measured nothing: its times are null, not 0 (read back as NaN; aggregation skips it).
    for (const char* k : {"gemm_ms", "gemm_p10_ms", "gemm_p90_ms", "gemm_min_ms", "gemm_max_ms", "quant_ms", "total_ms",
                          "tflops", "pct_of_peak", "quant_bytes", "weight_quant_ms", "weight_quant_bytes"}) {
      j[k] = nullptr;
    }
  }
  if (!r.predicted_path.empty()) j["predicted_path"] = r.predicted_path;
  if (!r.moe_path.empty()) j["moe_path"] = r.moe_path;
  if (!r.group_tokens.empty()) j["group_tokens"] = r.group_tokens;
  return j;
}

json summary_json(const RecipeSummary& s) {
  auto passes = [](const PassSums& p) {
    return json{{"fprop_ms", p.fprop_ms}, {"dgrad_ms", p.dgrad_ms}, {"wgrad_ms", p.wgrad_ms}};
  };
  json j = {{"recipe", s.recipe},
            {"mode", std::string(to_string(s.mode))},
            {"layer_ms", s.layer_ms},
            {"speedup_vs_bf16", number_or_null(s.speedup_vs_bf16)},
            {"speedup_vs_baseline", number_or_null(s.speedup_vs_baseline)},
            {"path", s.path},
            {"mixed_paths", s.mixed_paths},
            {"model_ms", s.model_ms},
            {"once_per_model_ms", s.once_per_model_ms},
            {"layer_tflops", s.layer_tflops},
            {"gemm_ms", passes(s.gemm)},
            {"quant_ms", passes(s.quant)},
            {"bound_layer_ms", number_or_null(s.bound_layer_ms)},
            {"forward_speedup_vs_bf16", number_or_null(s.forward_speedup_vs_bf16)},
            {"backward_speedup_vs_bf16", number_or_null(s.backward_speedup_vs_bf16)},
            {"quant_overhead_ms", number_or_null(s.quant_overhead_ms)},
            {"quant_bytes", s.quant_bytes},
            {"quant_vs_copy", number_or_null(s.quant_vs_copy)},
            {"sequence_layer_ms", number_or_null(s.sequence_layer_ms)},
            {"sequence_speedup_vs_bf16", number_or_null(s.sequence_speedup_vs_bf16)},
            {"weight_quant_ms", s.weight_quant_ms},
            {"weight_quant_share_ms", s.weight_quant_share_ms},
            {"blocks_ms", number_or_null(s.blocks_ms)},
            {"bf16_blocks", s.bf16_blocks},
            {"tokens_per_s", number_or_null(s.tokens_per_s)},
            {"model_speedup_vs_bf16", number_or_null(s.model_speedup_vs_bf16)},
            {"layer_ms_low", number_or_null(s.layer_ms_low)},
            {"layer_ms_high", number_or_null(s.layer_ms_high)},
            {"model_ms_low", number_or_null(s.model_ms_low)},
            {"model_ms_high", number_or_null(s.model_ms_high)},
            {"tokens_per_s_low", number_or_null(s.tokens_per_s_low)},
            {"tokens_per_s_high", number_or_null(s.tokens_per_s_high)},
            {"failed_rows", s.failed_rows}};
  if (!s.predicted_path.empty()) j["predicted_path"] = s.predicted_path;
  return j;
}

json sequence_json(const BenchResult& result, const SequenceTiming& q) {
  const double parts = sequence_parts_ms(result, q);
  json j = {{"layer", q.layer},
            {"t", q.t},
            {"i", q.i},
            {"o", q.o},
            {"recipe", q.recipe},
            {"mode", std::string(to_string(q.mode))},
            {"count", q.count},
            {"per_model", q.per_model},
            {"parts_ms", number_or_null(parts)},
            {"sequence_over_parts",
             number_or_null(std::isfinite(parts) && parts > 0 ? q.timing.median_ms / parts : kNaN)}};
  put_timing(j, "sequence", q.timing);
  return j;
}

// --- reading -------------------------------------------------------------------------------------
// The result schema writes null for a time that was not measured (number_or_null), so its number and
// string reads take null as "absent" or NaN; io::json_fields would refuse it as the wrong type.

const json& field(const json& obj, const char* name, const std::string& where) {
  auto it = obj.find(name);
  if (it == obj.end())
    throw std::invalid_argument(fmt::format("{}.{}: missing (the file is not a nibble bench result, "
                                            "or it is truncated)", where, name));
  return *it;
}

std::string get_string(const json& obj, const char* name, const std::string& where) {
  const json& v = field(obj, name, where);
  if (!v.is_string())
    throw std::invalid_argument(fmt::format("{}.{}: expected a string, got {}", where, name, v.dump()));
  return v.get<std::string>();
}

std::string get_string_or(const json& obj, const char* name, const std::string& where,
                          const std::string& fallback) {
  if (!obj.contains(name) || obj[name].is_null()) return fallback;
  return get_string(obj, name, where);
}

double get_number(const json& obj, const char* name, const std::string& where) {
  const json& v = field(obj, name, where);
  if (v.is_null()) return kNaN;
  if (!v.is_number())
    throw std::invalid_argument(fmt::format("{}.{}: expected a number, got {}", where, name, v.dump()));
  return v.get<double>();
}

double get_number_or(const json& obj, const char* name, const std::string& where, double fallback) {
  if (!obj.contains(name)) return fallback;
  return get_number(obj, name, where);
}

// An optional count (SM count, compute capability, runs): a whole number in [0, INT_MAX], else refused
// (a cast of a larger double to int would be undefined behaviour).
int get_count_or(const json& obj, const char* name, const std::string& where, int fallback) {
  if (!obj.contains(name)) return fallback;
  const double v = get_number(obj, name, where);
  if (!(v >= 0 && v <= static_cast<double>(std::numeric_limits<int>::max()) && v == std::floor(v)))
    throw std::invalid_argument(fmt::format("{}.{}: expected a whole number from 0 to {}, got {}", where, name,
                                            std::numeric_limits<int>::max(), obj[name].dump()));
  return static_cast<int>(v);
}

// The Timing put_timing wrote: the median is required, the spread defaults to it, n_runs to 0.
Timing get_timing(const json& obj, const std::string& prefix, const std::string& where) {
  Timing t;
  t.median_ms = get_number(obj, (prefix + "_ms").c_str(), where);
  t.p10_ms = get_number_or(obj, (prefix + "_p10_ms").c_str(), where, t.median_ms);
  t.p90_ms = get_number_or(obj, (prefix + "_p90_ms").c_str(), where, t.median_ms);
  t.min_ms = get_number_or(obj, (prefix + "_min_ms").c_str(), where, t.median_ms);
  t.max_ms = get_number_or(obj, (prefix + "_max_ms").c_str(), where, t.median_ms);
  t.n_runs = get_count_or(obj, "n_runs", where, 0);
  return t;
}

int64_t get_int(const json& obj, const char* name, const std::string& where) {
  const json& v = field(obj, name, where);
  if (!v.is_number_integer())
    throw std::invalid_argument(fmt::format("{}.{}: expected an integer, got {}", where, name, v.dump()));
  return v.get<int64_t>();
}

// per_model of a row or sequence; files without it get the layer name's default.
bool get_per_model(const json& j, const std::string& where, const std::string& layer) {
  return io::json_fields::flag_or(j, "per_model", is_once_per_model(layer), where);
}

Row row_from_json(const json& j, const std::string& where) {
  if (!j.is_object()) throw std::invalid_argument(fmt::format("{}: expected an object", where));
  Row r;
  r.layer = get_string(j, "layer", where);
  r.pass = get_string(j, "pass", where);
  if (r.pass != "fprop" && r.pass != "dgrad" && r.pass != "wgrad")
    throw std::invalid_argument(
        fmt::format("{}.pass: '{}' is not one of: fprop, dgrad, wgrad", where, r.pass));
  r.m = get_int(j, "m", where);
  r.k = get_int(j, "k", where);
  r.n = get_int(j, "n", where);
  r.count = get_int(j, "count", where);
  if (r.m <= 0 || r.k <= 0 || r.n <= 0 || r.count <= 0)
    throw std::invalid_argument(fmt::format(
        "{}: m, k, n and count must be positive (got {} x {} x {}, count {})", where, r.m, r.k, r.n,
        r.count));
  r.flops = get_number(j, "flops", where);
  r.per_model = get_per_model(j, where, r.layer);
  r.recipe = get_string(j, "recipe", where);
  try {
    r.mode = mode_from_string(get_string(j, "mode", where));
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("{}.{}", where, e.what()));
  }
  r.error = get_string_or(j, "error", where, "");
  r.gemm = get_timing(j, "gemm", where);
  r.quant_ms = get_number_or(j, "quant_ms", where, 0);
  r.total_ms = get_number(j, "total_ms", where);
  r.tflops = get_number_or(j, "tflops", where, kNaN);
  r.pct_of_peak = get_number_or(j, "pct_of_peak", where, kNaN);
  r.path = get_string(j, "path", where);
  check_path(r.path, where + ".path");
  r.predicted_path = get_string_or(j, "predicted_path", where, "");
  if (!r.predicted_path.empty()) check_path(r.predicted_path, where + ".predicted_path");
  r.quant_bytes = get_number_or(j, "quant_bytes", where, 0);
  r.weight_quant_ms = get_number_or(j, "weight_quant_ms", where, 0);
  r.weight_quant_bytes = get_number_or(j, "weight_quant_bytes", where, 0);
  if (r.ok() && !(r.weight_quant_ms >= 0 && r.weight_quant_bytes >= 0))
    throw std::invalid_argument(fmt::format("{}.weight_quant_ms / weight_quant_bytes: must not be negative", where));
  r.bound_ms = get_number_or(j, "bound_ms", where, kNaN);
  r.moe_path = get_string_or(j, "moe_path", where, "");
  if (j.contains("group_tokens")) {
    const json& g = j["group_tokens"];
    if (!g.is_array()) throw std::invalid_argument(where + ".group_tokens: expected an array of token counts");
    int64_t sum = 0;
    for (const json& v : g) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0)
        throw std::invalid_argument(where + ".group_tokens: every entry must be a whole number of tokens >= 0");
      sum += v.get<int64_t>();
    }
    const int64_t token_dim = r.pass == "wgrad" ? r.k : r.m;
    if (sum != token_dim)
      throw std::invalid_argument(fmt::format("{}.group_tokens: they sum to {}, but the row's token dimension ({}) is "
                                              "{}", where, sum, r.pass == "wgrad" ? "k" : "m", token_dim));
    r.group_tokens = g.get<std::vector<int64_t>>();
  }
  if (r.ok() && !(r.total_ms >= 0 && std::isfinite(r.total_ms)))
    throw std::invalid_argument(fmt::format(
        "{}.total_ms: {} is not a time; a failed row must carry an 'error' string", where,
        r.total_ms));
  return r;
}

SequenceTiming sequence_from_json(const json& j, const std::string& where) {
  if (!j.is_object()) throw std::invalid_argument(fmt::format("{}: expected an object", where));
  SequenceTiming q;
  q.layer = get_string(j, "layer", where);
  q.t = get_int(j, "t", where);
  q.i = get_int(j, "i", where);
  q.o = get_int(j, "o", where);
  if (q.t <= 0 || q.i <= 0 || q.o <= 0)
    throw std::invalid_argument(
        fmt::format("{}: t, i and o must be positive (got {} x {} x {})", where, q.t, q.i, q.o));
  q.recipe = get_string(j, "recipe", where);
  try {
    q.mode = mode_from_string(get_string(j, "mode", where));
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("{}.{}", where, e.what()));
  }
  q.count = get_int(j, "count", where);
  if (q.count <= 0) throw std::invalid_argument(fmt::format("{}.count: {} must be positive", where, q.count));
  q.per_model = get_per_model(j, where, q.layer);
  q.timing = get_timing(j, "sequence", where);
  if (!(q.timing.median_ms > 0 && std::isfinite(q.timing.median_ms)))
    throw std::invalid_argument(fmt::format("{}.sequence_ms: {} is not a time", where, j["sequence_ms"].dump()));
  return q;
}

// gpu_info.clocks_during_run: the summary of the clock monitor's samples (clock_record.hpp).
json clocks_json(const ClockRecord& c) {
  json j = {{"available", c.available}, {"source", c.source}};
  if (!c.available) return j;
  j["samples"] = c.samples;
  j["sm_clock_mhz_min"] = c.sm_clock_mhz_min;
  j["sm_clock_mhz_median"] = c.sm_clock_mhz_median;
  j["sm_clock_mhz_max"] = c.sm_clock_mhz_max;
  j["power_w_max"] = c.power_w_max;
  j["power_capped_fraction"] = c.power_capped_fraction;
  j["thermal_fraction"] = c.thermal_fraction;
  return j;
}
ClockRecord clocks_from_json(const json& j) {
  const std::string w = "gpu_info.clocks_during_run";
  if (!j.is_object()) throw std::invalid_argument(fmt::format("{}: expected an object, got {}", w, j.dump()));
  ClockRecord c;
  const json& a = field(j, "available", w);
  if (!a.is_boolean()) throw std::invalid_argument(fmt::format("{}.available: expected true or false, got {}", w, a.dump()));
  c.available = a.get<bool>();
  c.source = get_string_or(j, "source", w, "");
  if (!c.available) return c;
  c.samples = get_count_or(j, "samples", w, 0);
  c.sm_clock_mhz_min = get_number(j, "sm_clock_mhz_min", w);
  c.sm_clock_mhz_median = get_number(j, "sm_clock_mhz_median", w);
  c.sm_clock_mhz_max = get_number(j, "sm_clock_mhz_max", w);
  c.power_w_max = get_number_or(j, "power_w_max", w, 0);
  c.power_capped_fraction = get_number(j, "power_capped_fraction", w);
  c.thermal_fraction = get_number_or(j, "thermal_fraction", w, 0);
  for (const double f : {c.power_capped_fraction, c.thermal_fraction})
    if (!(f >= 0 && f <= 1))
      throw std::invalid_argument(fmt::format("{}: a fraction of samples must lie in [0, 1], got {}", w, f));
  if (!(c.samples > 0 && c.sm_clock_mhz_min <= c.sm_clock_mhz_median && c.sm_clock_mhz_median <= c.sm_clock_mhz_max))
    throw std::invalid_argument(fmt::format("{}: available with {} samples and SM clock min/median/max {}/{}/{}: "
                                            "expected samples > 0 and min <= median <= max",
                                            w, c.samples, c.sm_clock_mhz_min, c.sm_clock_mhz_median,
                                            c.sm_clock_mhz_max));
  return c;
}

}  // namespace

json to_json(const BenchResult& result) {
  json gemms = json::array();
  for (const Row& r : result.rows) gemms.push_back(row_json(r));
  json summary = json::array();
  for (const RecipeSummary& s : summarize(result)) summary.push_back(summary_json(s));
  json memory = json::array();
  for (const MemoryUsage& m : result.memory)
    memory.push_back({{"recipe", m.recipe},
                      {"operand_bytes", m.operand_bytes},
                      {"saved_bytes", m.saved_bytes},
                      {"peak_bytes", m.peak_bytes},
                      {"measured_bytes", m.measured_bytes > 0 ? json(m.measured_bytes) : json(nullptr)}});
  json asym = json::array();
  for (const Asymmetry& a : fprop_dgrad_asymmetry(result))
    asym.push_back({{"layer", a.layer},
                    {"recipe", a.recipe},
                    {"mode", std::string(to_string(a.mode))},
                    {"fprop_ms", a.fprop_ms},
                    {"dgrad_ms", a.dgrad_ms},
                    {"dgrad_over_fprop", number_or_null(a.dgrad_over_fprop)}});
  json sequences = json::array();
  for (const SequenceTiming& q : result.sequences) sequences.push_back(sequence_json(result, q));
  json sweep_summaries = json::array();
  for (const SweepSummary& w : result.sweep_summaries) {
    json layer = json::array(), speedup = json::array();
    for (double v : w.layer_ms) layer.push_back(number_or_null(v));
    for (double v : w.speedup_vs_bf16) speedup.push_back(number_or_null(v));
    sweep_summaries.push_back({{"recipe", w.recipe},
                               {"mode", std::string(to_string(w.mode))},
                               {"layer_ms", layer},
                               {"speedup_vs_bf16", speedup}});
  }
  const GpuInfo& g = result.gpu;
  return {{"schema", "nibble-bench"},
          {"schema_version", kSchemaVersion},
          {"nibble_version", result.nibble_version},
          {"gpu", g.name},
          {"predicted", result.predicted},
          {"gpu_info",
           {{"name", g.name},
            {"sm_count", g.sm_count},
            {"compute_capability", g.compute_capability},
            {"sm_clock_mhz", g.sm_clock_mhz},
            {"memory_clock_mhz", g.memory_clock_mhz},
            {"memory_bandwidth_gbs", g.memory_bandwidth_gbs},
            {"driver_version", g.driver_version},
            {"cuda_version", g.cuda_version},
            {"cublaslt_version", g.cublaslt_version},
            {"clocks_during_run", clocks_json(result.clocks)}}},
          {"command_line", result.command_line},
          {"date", result.date},
          {"model", result.model},
          {"tokens", result.tokens},
          {"layers", result.layers},
          {"baseline_recipe", result.baseline_recipe},
          {"copy_bandwidth_gbs", result.copy_bandwidth_gbs},
          {"summary", summary},
          {"gemms", gemms},
          {"memory", memory},
          {"fprop_dgrad", asym},
          {"sequences", sequences},
          {"sweeps", result.sweeps},
          {"sweep_summaries", sweep_summaries},
          {"grad_accum", result.grad_accum},
          {"layer_plan",
           {{"bf16_first", result.layer_plan.bf16_first},
            {"bf16_last", result.layer_plan.bf16_last},
            {"bf16_lm_head", result.layer_plan.bf16_lm_head}}},
          {"moe_comparison",
           [&] {
             json a = json::array();
             for (const MoeComparison& c : result.moe_comparison)
               a.push_back({{"recipe", c.recipe}, {"mode", std::string(to_string(c.mode))},
                            {"grouped_ms", number_or_null(c.grouped_ms)},
                            {"per_expert_ms", number_or_null(c.per_expert_ms)},
                            {"ratio", number_or_null(c.ratio)}});
             return a;
           }()},
          {"prediction_interval",
           result.interval.present()
               ? json{{"low", result.interval.low}, {"high", result.interval.high}, {"method", result.interval.method}}
               : json(nullptr)},
          {"notes", result.notes}};
}

BenchResult result_from_json(const json& j) {
  if (!j.is_object()) throw std::invalid_argument("result: expected a JSON object at the top level");
  if (j.contains("schema") && j["schema"] != "nibble-bench")
    throw std::invalid_argument(fmt::format(
        "schema: {} is not \"nibble-bench\"; this file is not a nibble bench result", j["schema"].dump()));
  if (j.contains("schema_version") && j["schema_version"].is_number_integer() &&
      j["schema_version"].get<int64_t>() > kSchemaVersion)
    throw std::invalid_argument(fmt::format(
        "schema_version: {} is newer than this nibble understands ({}); upgrade nibble",
        j["schema_version"].dump(), kSchemaVersion));
  const std::string top = "result";
  BenchResult r;
  r.gpu.name = get_string(j, "gpu", top);
  const json& pred = field(j, "predicted", top);
  if (!pred.is_boolean())
    throw std::invalid_argument(fmt::format("result.predicted: expected true or false, got {}", pred.dump()));
  r.predicted = pred.get<bool>();
  r.nibble_version = get_string_or(j, "nibble_version", top, "");
  if (j.contains("gpu_info") && j["gpu_info"].is_object()) {
    const json& g = j["gpu_info"];
    const std::string w = "gpu_info";
    r.gpu.sm_count = get_count_or(g, "sm_count", w, 0);
    r.gpu.compute_capability = get_count_or(g, "compute_capability", w, 0);
    r.gpu.sm_clock_mhz = get_number_or(g, "sm_clock_mhz", w, 0);
    r.gpu.memory_clock_mhz = get_number_or(g, "memory_clock_mhz", w, 0);
    r.gpu.memory_bandwidth_gbs = get_number_or(g, "memory_bandwidth_gbs", w, 0);
    r.gpu.driver_version = get_string_or(g, "driver_version", w, "");
    r.gpu.cuda_version = get_string_or(g, "cuda_version", w, "");
    r.gpu.cublaslt_version = get_string_or(g, "cublaslt_version", w, "");
    if (g.contains("clocks_during_run")) {
      r.clocks = clocks_from_json(g["clocks_during_run"]);
    } else if (!r.predicted) {
      r.clocks.source = "this file has no gpu_info.clocks_during_run (written before nibble recorded clocks)";
    }
  }
  r.command_line = get_string_or(j, "command_line", top, "");
  r.date = get_string_or(j, "date", top, "");
  if (j.contains("model")) r.model = j["model"];
  r.tokens = get_int(j, "tokens", top);
  r.layers = get_int(j, "layers", top);
  if (r.layers <= 0)
    throw std::invalid_argument(fmt::format("result.layers: {} must be positive", r.layers));
  r.baseline_recipe = get_string_or(j, "baseline_recipe", top, "");
  r.copy_bandwidth_gbs = get_number_or(j, "copy_bandwidth_gbs", top, 0);
  const json& gemms = field(j, "gemms", top);
  if (!gemms.is_array()) throw std::invalid_argument("result.gemms: expected an array of rows");
  for (size_t i = 0; i < gemms.size(); ++i)
    r.rows.push_back(row_from_json(gemms[i], fmt::format("gemms[{}]", i)));
  if (j.contains("memory") && j["memory"].is_array()) {
    for (size_t i = 0; i < j["memory"].size(); ++i) {
      const json& m = j["memory"][i];
      const std::string w = fmt::format("memory[{}]", i);
      if (!m.is_object()) throw std::invalid_argument(w + ": expected an object");
      MemoryUsage u{get_string(m, "recipe", w), get_int(m, "operand_bytes", w), get_int(m, "saved_bytes", w),
                    get_int(m, "peak_bytes", w)};
      if (m.contains("measured_bytes") && !m["measured_bytes"].is_null()) {
        u.measured_bytes = get_int(m, "measured_bytes", w);
        if (u.measured_bytes < 0)
          throw std::invalid_argument(fmt::format("{}.measured_bytes: {} must not be negative", w, u.measured_bytes));
      }
      r.memory.push_back(u);
    }
  }
  if (j.contains("sequences")) {
    const json& seqs = j["sequences"];
    if (!seqs.is_array()) throw std::invalid_argument("result.sequences: expected an array");
    for (size_t i = 0; i < seqs.size(); ++i)
      r.sequences.push_back(sequence_from_json(seqs[i], fmt::format("sequences[{}]", i)));
  }
  r.sweeps = static_cast<int>(get_count_or(j, "sweeps", top, 1));
  if (r.sweeps < 1) throw std::invalid_argument(fmt::format("result.sweeps: {} must be at least 1", r.sweeps));
  if (j.contains("sweep_summaries")) {
    const json& ws = j["sweep_summaries"];
    if (!ws.is_array()) throw std::invalid_argument("result.sweep_summaries: expected an array");
    for (size_t i = 0; i < ws.size(); ++i) {
      const std::string w = fmt::format("sweep_summaries[{}]", i);
      if (!ws[i].is_object()) throw std::invalid_argument(w + ": expected an object");
      SweepSummary x{get_string(ws[i], "recipe", w), mode_from_string(get_string(ws[i], "mode", w)), {}, {}};
      for (const char* name : {"layer_ms", "speedup_vs_bf16"}) {
        const json& a = field(ws[i], name, w);
        if (!a.is_array() || a.size() != static_cast<size_t>(r.sweeps))
          throw std::invalid_argument(
              fmt::format("{}.{}: expected an array of {} numbers (one per sweep)", w, name, r.sweeps));
        auto& out = std::string_view(name) == "layer_ms" ? x.layer_ms : x.speedup_vs_bf16;
        for (const json& v : a) {
          if (!v.is_null() && !v.is_number())
            throw std::invalid_argument(fmt::format("{}.{}: expected numbers or null, got {}", w, name, v.dump()));
          out.push_back(v.is_null() ? kNaN : v.get<double>());
        }
      }
      r.sweep_summaries.push_back(std::move(x));
    }
  }
  r.grad_accum = static_cast<int>(get_count_or(j, "grad_accum", top, 1));
  if (r.grad_accum < 1)
    throw std::invalid_argument(fmt::format("result.grad_accum: {} must be at least 1", r.grad_accum));
  if (j.contains("layer_plan") && !j["layer_plan"].is_null()) {
    const json& p = j["layer_plan"];
    const std::string w = "layer_plan";
    if (!p.is_object()) throw std::invalid_argument("result.layer_plan: expected an object");
    r.layer_plan.bf16_first = get_count_or(p, "bf16_first", w, 0);
    r.layer_plan.bf16_last = get_count_or(p, "bf16_last", w, 0);
    if (p.contains("bf16_lm_head")) {
      if (!p["bf16_lm_head"].is_boolean())
        throw std::invalid_argument("layer_plan.bf16_lm_head: expected true or false");
      r.layer_plan.bf16_lm_head = p["bf16_lm_head"].get<bool>();
    }
    if (r.layer_plan.bf16_first < 0 || r.layer_plan.bf16_last < 0 || r.layer_plan.bf16_blocks() > r.layers)
      throw std::invalid_argument(fmt::format(
          "layer_plan: bf16_first {} + bf16_last {} must be non-negative and at most layers ({})",
          r.layer_plan.bf16_first, r.layer_plan.bf16_last, r.layers));
  }
  if (j.contains("prediction_interval") && !j["prediction_interval"].is_null()) {
    const json& p = j["prediction_interval"];
    const std::string w = "prediction_interval";
    if (!p.is_object()) throw std::invalid_argument("result.prediction_interval: expected an object or null");
    r.interval.low = get_number(p, "low", w);
    r.interval.high = get_number(p, "high", w);
    r.interval.method = get_string_or(p, "method", w, "");
    if (!r.interval.present())
      throw std::invalid_argument(fmt::format("prediction_interval: low {} and high {} must satisfy 0 < low <= high",
                                              r.interval.low, r.interval.high));
  }
  if (j.contains("moe_comparison") && !j["moe_comparison"].is_null()) {
    const json& a = j["moe_comparison"];
    if (!a.is_array()) throw std::invalid_argument("result.moe_comparison: expected an array");
    for (size_t i = 0; i < a.size(); ++i) {
      const std::string w = fmt::format("moe_comparison[{}]", i);
      if (!a[i].is_object()) throw std::invalid_argument(w + ": expected an object");
      MoeComparison c;
      c.recipe = get_string(a[i], "recipe", w);
      try {
        c.mode = mode_from_string(get_string(a[i], "mode", w));
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(fmt::format("{}.{}", w, e.what()));
      }
      c.grouped_ms = get_number_or(a[i], "grouped_ms", w, kNaN);
      c.per_expert_ms = get_number_or(a[i], "per_expert_ms", w, kNaN);
      c.ratio = get_number_or(a[i], "ratio", w, kNaN);
      r.moe_comparison.push_back(c);
    }
  }
  if (j.contains("notes") && j["notes"].is_array())
    for (const json& n : j["notes"])
      if (n.is_string()) r.notes.push_back(n.get<std::string>());
  return r;
}

BenchResult read_result_file(const std::string& path) {
  const json j = io::read_json_file(path, "result file");
  try {
    return result_from_json(j);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("result file '{}': {}", path, e.what()));
  }
}

}  // namespace nibble::bench
