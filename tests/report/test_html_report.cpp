// The HTML report's content: PREDICTED in every chart title of a prediction, no empty field, no column
// that is blank in every row, the model as a table, the prediction interval as whiskers, the detail
// collapsed. (Its layout in a real browser: check_html_in_browser.py beside this file.)
#include "results/handmade_result.hpp"
#include "nibble/report.hpp"
#include "test_seed.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <string>
#include <vector>

namespace nibble::report {
namespace {

using bench::BenchResult;
using bench::Mode;

BenchResult sample(const std::vector<Mode>& modes = {Mode::pre_quantized, Mode::step}) {
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  return bench::testing::handmade_result(rng, {"bf16", "fp8-delayed", "quartet"}, modes);
}

bool has(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

// The visible titles of the charts.
std::vector<std::string> chart_titles(const std::string& h) {
  std::vector<std::string> out;
  const std::regex title("<text class=\"chart-title\"[^>]*>([^<]*)</text>");
  for (auto it = std::sregex_iterator(h.begin(), h.end(), title); it != std::sregex_iterator(); ++it)
    out.push_back((*it)[1]);
  return out;
}

// The header cells of the table that follows `marker`.
std::vector<std::string> headers_after(const std::string& h, const std::string& marker) {
  const size_t start = h.find(marker);
  const size_t end = h.find("</table>", start);
  std::vector<std::string> out;
  if (start == std::string::npos || end == std::string::npos) return out;
  const std::string table = h.substr(start, end - start);
  const std::regex th("<th(?: class=l)?>([^<]*)</th>");
  for (auto it = std::sregex_iterator(table.begin(), table.end(), th); it != std::sregex_iterator(); ++it)
    out.push_back((*it)[1]);
  return out;
}

TEST(Html, PredictedInEveryChartTitleAndTheBanner) {
  BenchResult r = sample();
  const auto measured = chart_titles(to_html(r));
  ASSERT_GE(measured.size(), 3u);
  for (const auto& t : measured) EXPECT_FALSE(has(t, "PREDICTED")) << t;
  r.predicted = true;
  const std::string h = to_html(r);
  const auto titles = chart_titles(h);
  EXPECT_EQ(titles.size(), count(h, "<svg"));
  for (const auto& t : titles) EXPECT_TRUE(has(t, "PREDICTED for NVIDIA H200")) << t;
  EXPECT_TRUE(has(h, "<p class=banner>PREDICTED for NVIDIA H200 (no measurement)"));
  EXPECT_TRUE(has(h, "<h1>nibble bench: tiny on NVIDIA H200 \u2014 PREDICTED</h1>")) << h.substr(0, 3000);
}

// A prediction knows no driver, CUDA or cuBLASLt version: the run table leaves them out instead of
// printing empty fields; what it knows (the GPU, its SMs) stays.
TEST(Html, NoEmptyFields) {
  BenchResult r = sample();
  r.predicted = true;
  r.gpu.driver_version.clear();
  r.gpu.cuda_version.clear();
  r.gpu.cublaslt_version.clear();
  const std::string h = to_html(r);
  for (const char* absent : {"<th class=l>driver</th>", "<th class=l>CUDA</th>", "<th class=l>cuBLASLt</th>",
                             "<td></td>", "<td class=l></td>", "&middot;  &middot;", "driver  "})
    EXPECT_FALSE(has(h, absent)) << absent;
  EXPECT_TRUE(has(h, "<th class=l>SMs</th><td class=l>132</td>"));
  EXPECT_TRUE(has(h, "<th class=l>GPU</th><td class=l>NVIDIA H200 (PREDICTED, no measurement)</td>"));
  r.predicted = false;
  r.gpu.driver_version = "580.159.04";
  EXPECT_TRUE(has(to_html(r), "<th class=l>driver</th><td class=l>580.159.04</td>"));
}

// Pre-quantized rows quantize nothing: the quantization columns would be zero in every row and are left
// out; with the step mode they carry numbers and are shown.
TEST(Html, ColumnsBlankInEveryRowAreLeftOut) {
  const std::string gemms_only = to_html(sample({Mode::pre_quantized}));
  const auto per_pass = headers_after(gemms_only, "Time per block (ms)");
  ASSERT_FALSE(per_pass.empty());
  EXPECT_EQ(std::count(per_pass.begin(), per_pass.end(), "of it quant ms"), 0) << gemms_only;
  const auto gains = headers_after(gemms_only, "Speedups and the whole model");
  EXPECT_EQ(std::count(gains.begin(), gains.end(), "quant overhead ms"), 0);
  EXPECT_EQ(std::count(gains.begin(), gains.end(), "W-quant ms (counted)"), 0);
  const std::string both = to_html(sample());
  const auto per_pass_step = headers_after(both, "Time per block (ms)");
  EXPECT_EQ(std::count(per_pass_step.begin(), per_pass_step.end(), "of it quant ms"), 1);
  const auto gains_step = headers_after(both, "Speedups and the whole model");
  EXPECT_EQ(std::count(gains_step.begin(), gains_step.end(), "quant overhead ms"), 1);
  // No row failed: no error column in the per-GEMM table.
  const auto gemm = headers_after(both, "Every GEMM, one call (ms)");
  ASSERT_FALSE(gemm.empty());
  EXPECT_EQ(std::count(gemm.begin(), gemm.end(), "error"), 0);
  BenchResult failed = sample();
  failed.rows[1].error = "out of memory";
  const std::string f = to_html(failed);
  const auto gemm_failed = headers_after(f, "Every GEMM, one call (ms)");
  EXPECT_EQ(std::count(gemm_failed.begin(), gemm_failed.end(), "error"), 1);
  EXPECT_TRUE(has(f, "FAILED: out of memory"));
}

// The summary at the top: one row per recipe, at most 8 columns whatever the modes.
TEST(Html, SummaryHasOneRowPerRecipeAndAtMostEightColumns) {
  const BenchResult r = sample({Mode::pre_quantized, Mode::step, Mode::per_gemm});
  const std::string h = to_html(r);
  const size_t start = h.find("<table class=summary>");
  ASSERT_NE(start, std::string::npos);
  const std::string table = h.substr(start, h.find("</table>", start) - start);
  EXPECT_EQ(count(table, "<tr>"), 2u + 3u);  // group header, header, bf16, fp8-delayed, quartet
  const auto headers = headers_after(h, "<table class=summary>");
  EXPECT_LE(headers.size(), 8u);
  EXPECT_EQ(headers, (std::vector<std::string>{"recipe", "pre-quantized", "step", "per-gemm", "ms per block",
                                               "tokens/s", "path"}));
  const auto sums = bench::summarize(r);
  const auto* q = bench::find_summary(sums, "quartet", Mode::per_gemm);
  EXPECT_TRUE(has(table, fmt::format("<td>{:.2f}x</td>", q->model_speedup_vs_bf16))) << table;
}

// A prediction with an interval: each speedup bar gets a whisker (the recipe's time anywhere in the
// interval against bf16's), and the summary's times their range; without one, neither.
TEST(Html, PredictionIntervalAsWhiskers) {
  BenchResult r = sample();
  EXPECT_EQ(count(to_html(r), "class=\"whisker\""), 0u);
  r.predicted = true;
  r.interval = {0.7, 1.4, "leave one out"};
  const std::string h = to_html(r);
  EXPECT_EQ(count(h, "class=\"whisker\""), 4u);  // fp8-delayed and quartet, two modes each
  const auto sums = bench::summarize(r);
  const auto* s = bench::find_summary(sums, "quartet", Mode::step);
  const double v = s->model_speedup_vs_bf16;
  EXPECT_TRUE(has(h, fmt::format("[{:.3g}, {:.3g}]", v / 1.4, v / 0.7))) << h;
  EXPECT_TRUE(has(h, "Whiskers: the recipe&#39;s time anywhere in the prediction interval x0.70 .. x1.40"));
  auto ms = [](double v) { return v >= 100 ? fmt::format("{:.1f}", v) : fmt::format("{:.3f}", v); };
  EXPECT_TRUE(has(h, "<small>" + ms(s->layer_ms * 0.7) + " &ndash; " + ms(s->layer_ms * 1.4) + "</small>")) << h;
}

// The model as a small table: the fields it has, none of a dense model's zero expert counts, no JSON.
TEST(Html, ModelAsATable) {
  BenchResult r = sample();
  r.model = {{"model",
              {{"name", "tiny <b>"}, {"hidden", 512}, {"heads", 8}, {"ffn", 2048}, {"layers", 7}, {"experts", 0},
               {"top_k", 0}, {"gated", false}, {"tp", 1}}}};
  const std::string h = to_html(r);
  for (const char* shown : {"<th class=l>name</th><td class=l>tiny &lt;b&gt;</td>", "<th class=l>hidden</th><td class=l>512</td>",
                            "<th class=l>heads</th><td class=l>8</td>", "<th class=l>ffn</th><td class=l>2048</td>",
                            "<th class=l>tokens per micro-batch</th><td class=l>1024</td>"})
    EXPECT_TRUE(has(h, shown)) << shown;
  for (const char* absent : {"<th class=l>experts</th>", "<th class=l>gated MLP</th>", "<th class=l>tensor parallel</th>",
                             "\"hidden\""})
    EXPECT_FALSE(has(h, absent)) << absent;
}

// Per-GEMM and per-block detail is collapsed; the answer (chart, summary) is not.
TEST(Html, DetailCollapsed) {
  const std::string h = to_html(sample());
  for (const char* id : {"<details id=per-layer>", "<details id=gemms>", "<details id=memory>"})
    EXPECT_TRUE(has(h, id)) << id;
  const size_t gemm_table = h.find("Every GEMM, one call");
  EXPECT_GT(gemm_table, h.find("<details id=gemms>"));
  EXPECT_LT(h.find("<figure id=headline>"), h.find("<details"));
  EXPECT_LT(h.find("<section id=summary>"), h.find("<details"));
  EXPECT_FALSE(has(h, "<details open"));
}

}  // namespace
}  // namespace nibble::report
