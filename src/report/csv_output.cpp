// CSV: one row per (GEMM, recipe, mode); columns are the JSON row names so tools can join them.
#include "nibble/report.hpp"
#include "nibble/results/aggregate.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

namespace nibble::report {

namespace {

// RFC 4180: quote fields holding a comma, quote or newline; double inner quotes.
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string num(double v) { return std::isfinite(v) ? fmt::format("{}", v) : ""; }

}  // namespace

std::string to_csv(const bench::BenchResult& r) {
  std::string out =
      "gpu,predicted,layer,pass,m,k,n,count,per_model,flops,recipe,mode,gemm_ms,gemm_p10_ms,"
      "gemm_p90_ms,gemm_min_ms,gemm_max_ms,n_runs,quant_ms,total_ms,tflops,pct_of_peak,path,"
      "predicted_path,quant_bytes,bound_ms,error,weight_quant_ms,weight_quant_bytes,grad_accum,"
      "recipe_tokens_per_s,recipe_tokens_per_s_low,recipe_tokens_per_s_high,moe_path,group_tokens\n";
  const auto sums = bench::summarize(r);
  for (const bench::Row& x : r.rows) {
    const bench::RecipeSummary* s = bench::find_summary(sums, x.recipe, x.mode);
    const double tps = s ? s->tokens_per_s : bench::kNaN;
    // A failed row measured nothing: its times are empty (null), as in the JSON.
    auto t = [&](double v) { return x.ok() ? num(v) : std::string(); };
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                       csv_field(r.gpu.name), r.predicted ? "true" : "false", csv_field(x.layer),
                       x.pass, x.m, x.k, x.n, x.count, x.per_model ? "true" : "false", num(x.flops),
                       csv_field(x.recipe), bench::to_string(x.mode), t(x.gemm.median_ms),
                       t(x.gemm.p10_ms), t(x.gemm.p90_ms), t(x.gemm.min_ms), t(x.gemm.max_ms),
                       x.gemm.n_runs, t(x.quant_ms), t(x.total_ms), t(x.tflops),
                       t(x.pct_of_peak), csv_field(x.path), csv_field(x.predicted_path),
                       t(x.quant_bytes), num(x.bound_ms), csv_field(x.error), t(x.weight_quant_ms),
                       t(x.weight_quant_bytes), r.grad_accum, num(tps), num(s ? s->tokens_per_s_low : bench::kNaN),
                       num(s ? s->tokens_per_s_high : bench::kNaN), csv_field(x.moe_path),
                       fmt::format("{}", fmt::join(x.group_tokens, " ")));
  }
  return out;
}

}  // namespace nibble::report
