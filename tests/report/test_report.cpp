// Renderings (terminal, CSV schema, self-contained HTML, comparison), then the files they are written to:
// atomic writes and the up-front writability check.
#include "results/handmade_result.hpp"
#include "nibble/results/aggregate.hpp"
#include "nibble/report.hpp"
#include "test_seed.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace nibble::report {
namespace {

using bench::BenchResult;
using bench::Mode;

BenchResult sample() {
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  return bench::testing::handmade_result(rng);
}

bool has(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

TEST(Terminal, ShowsTablesTotalsAndPaths) {
  BenchResult r = sample();
  const std::string t = render_terminal(r);
  for (const char* s : {"fprop [pre-quantized]", "dgrad [step]", "wgrad [step]", "bf16", "fp8-delayed",
                        "quartet", "emulated-exact (fp8)", "vs bf16", "quantization overhead",
                        "fprop vs dgrad", "memory per recipe", "non-GEMM work is eating the gain",
                        "T = 1024 tokens"})
    EXPECT_TRUE(has(t, s)) << s << "\n" << t;
  EXPECT_FALSE(has(t, "PREDICTED"));
  const auto sums = bench::summarize(r);
  const auto* q = bench::find_summary(sums, "quartet", Mode::step);
  EXPECT_TRUE(has(t, fmt::format("{:.2f}x", q->speedup_vs_bf16))) << t;
  // fprop vs dgrad: one line per layer shape, one column per recipe, in the order of the recipes.
  const auto asym = bench::fprop_dgrad_asymmetry(r);
  ASSERT_FALSE(asym.empty());
  const auto& a0 = asym.front();
  const std::string label = fmt::format("  {} {}x{}x{}", a0.layer, a0.shape.t, a0.shape.i, a0.shape.o);
  const size_t at = t.find(label, t.find("fprop vs dgrad"));
  ASSERT_NE(at, std::string::npos) << label << "\n" << t;
  const std::string line = t.substr(at, t.find('\n', at) - at);
  EXPECT_NE(line.find(fmt::format("{:.2f}", a0.dgrad_over_fprop)), std::string::npos) << line;
  // An emulated recipe is said to be emulated once, not once per mode.
  const std::string emulated = "quartet does not run natively here";
  ASSERT_TRUE(has(t, emulated)) << t;
  EXPECT_EQ(t.find(emulated), t.rfind(emulated)) << t;
}

TEST(Terminal, SequenceTableNextToTheSumOfParts) {
  BenchResult r = sample();
  const auto sums = bench::summarize(r);
  const std::string t = render_terminal(r);
  ASSERT_TRUE(has(t, "timed as one sequence")) << t;
  for (const auto& s : sums) {
    ASSERT_TRUE(std::isfinite(s.sequence_layer_ms));
    const std::string diff = fmt::format("{:+.1f}%", 100.0 * (s.sequence_layer_ms / s.layer_ms - 1));
    EXPECT_TRUE(has(t, diff)) << s.recipe << " " << diff << "\n" << t;
    if (bench::is_autocast(s.mode)) {
      ASSERT_TRUE(std::isfinite(s.bound_layer_ms));
      const std::string over = fmt::format("{:+.1f}%", 100.0 * (s.sequence_layer_ms / s.bound_layer_ms - 1));
      EXPECT_TRUE(has(t, diff + fmt::format("{:>9}{:>15}", fmt::format("{:.2f}x", s.sequence_speedup_vs_bf16), over)))
          << s.recipe << " " << over << "\n" << t;
    }
  }
  // A sequence more than 5% off its parts gets an interpretation line, with the direction.
  for (const auto& s : sums) {
    const double off = s.sequence_layer_ms / s.layer_ms - 1;
    const std::string line = fmt::format("{} ({}) timed as one sequence per linear layer takes {:+.0f}%", s.recipe,
                                         bench::to_string(s.mode), 100.0 * off);
    EXPECT_EQ(has(t, line), std::fabs(off) > 0.05) << line << "\n" << t;
  }
  r.sequences.clear();  // a prediction, or --no-sequences: no such table
  EXPECT_FALSE(has(render_terminal(r), "timed as one sequence"));
}

TEST(Terminal, PredictedBannerAndFailedRows) {
  BenchResult r = sample();
  r.predicted = true;
  r.gpu.name = "B200";
  for (auto& x : r.rows) {
    x.predicted_path = x.path;
    x.path = "predicted";
  }
  r.rows[2].error = "out of memory: 12 GiB needed";
  const std::string t = render_terminal(r);
  EXPECT_TRUE(has(t, "PREDICTED for B200 (no measurement)"));
  EXPECT_TRUE(has(t, "out of memory: 12 GiB needed"));
  EXPECT_TRUE(has(t, "FAILED"));
}

// The overhead lines say how fast the quantization kernels ran against the copy.
TEST(Terminal, QuantizationOverheadWithItsBandwidth) {
  const auto r = sample();
  const std::string t = render_terminal(r);
  int lines = 0;
  for (const auto& s : bench::summarize(r)) {
    if (!std::isfinite(s.quant_overhead_ms) || s.recipe == "bf16") continue;
    ASSERT_TRUE(std::isfinite(s.quant_vs_copy)) << s.recipe;
    EXPECT_TRUE(has(t, fmt::format("its quantization kernels move {:.0f} MB at {:.2f} of copy bandwidth\n",
                                   s.quant_bytes / 1e6, s.quant_vs_copy)))
        << s.recipe;
    ++lines;
  }
  EXPECT_GT(lines, 0);
  EXPECT_TRUE(has(to_html(r), "<th>quant vs copy</th>"));
}

// Per-gemm GEMMs run with Transformer Engine's settings: when their time differs from the pre-quantized
// GEMMs', the overhead line says what the GEMMs and the quantization each took; step lines never do.
TEST(Terminal, PerGemmOverheadSplitsGemmAndQuantization) {
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  BenchResult r = bench::testing::handmade_result(rng, {"bf16", "quartet"}, {Mode::pre_quantized, Mode::step, Mode::per_gemm});
  // Step GEMMs take the pre-quantized rows' times, per-gemm GEMMs 0.8 of them (fast accumulation): the
  // per-gemm GEMM total is then 20% under the pre-quantized one whatever the random draw (an independent
  // draw scaled by 0.8 could land within the 3% below which the line is not printed).
  for (auto& row : r.rows) {
    if (row.mode == Mode::step || row.mode == Mode::per_gemm) {
      for (const auto& p : r.rows)
        if (p.mode == Mode::pre_quantized && p.recipe == row.recipe && p.layer == row.layer && p.pass == row.pass)
          row.gemm.median_ms = (row.mode == Mode::per_gemm ? 0.8 : 1.0) * p.gemm.median_ms;
    }
    bench::finish_row(row, 0);
  }
  const std::string t = render_terminal(r);
  const auto sums = bench::summarize(r);
  const auto* pg = bench::find_summary(sums, "quartet", Mode::per_gemm);
  const auto* pre = bench::find_summary(sums, "quartet", Mode::pre_quantized);
  ASSERT_TRUE(pg && pre);
  EXPECT_TRUE(has(t, fmt::format("(its GEMMs, with Transformer Engine's settings, took {:.3f} ms, {:+.0f}% vs "
                                 "pre-quantized; its quantization {:.3f} ms)",
                                 pg->gemm.total_ms(), 100.0 * (pg->gemm.total_ms() / pre->gemm.total_ms() - 1),
                                 pg->quant.total_ms())))
      << t;
  EXPECT_EQ(t.find("its GEMMs, with"), t.rfind("its GEMMs, with")) << "only the per-gemm line carries it";
}

// Repeated sweeps: each sweep's per-layer time and speedup, and the spread between the sweeps.
TEST(Terminal, SweepTableShowsEachSweep) {
  BenchResult r = sample();
  EXPECT_FALSE(has(render_terminal(r), "sweeps (recipe order rotated"));  // one sweep: no table
  r.sweeps = 2;
  r.sweep_summaries.push_back({"quartet", Mode::step, {20.0, 21.0}, {1.50, 1.40}});
  const std::string t = render_terminal(r);
  EXPECT_TRUE(has(t, "per layer in each of the 2 sweeps (recipe order rotated every sweep")) << t;
  EXPECT_TRUE(has(t, "  quartet      step                 5.0%  20.000 (1.50x)  21.000 (1.40x)\n")) << t;
  const std::string h = to_html(r);
  EXPECT_TRUE(has(h, "<th>sweep 2 ms (vs bf16)</th>")) << h;
  EXPECT_TRUE(has(h, "<td>21.000 (1.40x)</td></tr>")) << h;
}

// Path notes that differ only in the layer read as one line per path, in the order they first appeared;
// a note naming no (recipe, layer) of the rows, or another recipe's, stays as it is.
TEST(Notes, PerLayerPathNotesGroupAcrossLayers) {
  BenchResult r = sample();
  r.notes = {"copy bandwidth measured in this run: 4200 GB/s",
             "quartet qkv: X: re-encoded per row, exact",
             "fp8-delayed qkv: amax history 1024",
             "quartet mlp_up: X: re-encoded per row, exact",
             "quartet lm_head: X: re-encoded per 1x128 group, exact",
             "quartet ghost: X: re-encoded per row, exact",
             "quartet qkv: X: re-encoded per row, exact",
             "fp8-delayed mlp_up: amax history 1024"};
  const std::vector<std::string> want = {"copy bandwidth measured in this run: 4200 GB/s",
                                         "quartet qkv, mlp_up: X: re-encoded per row, exact",
                                         "fp8-delayed qkv, mlp_up: amax history 1024",
                                         "quartet lm_head: X: re-encoded per 1x128 group, exact",
                                         "quartet ghost: X: re-encoded per row, exact"};
  EXPECT_EQ(grouped_notes(r), want);
  const std::string t = render_terminal(r);
  EXPECT_TRUE(has(t, "note: quartet qkv, mlp_up: X: re-encoded per row, exact\n")) << t;
  EXPECT_FALSE(has(t, "note: quartet mlp_up: X")) << t;
  EXPECT_TRUE(has(to_html(r), "<p class=note>note: fp8-delayed qkv, mlp_up: amax history 1024</p>"));
}

// The copy bandwidth next to the peak: from the memory clock and bus width when measured, from the
// database when predicted, left out when unknown.
TEST(Terminal, CopyBandwidthAgainstThePeak) {
  auto r = sample();
  r.copy_bandwidth_gbs = 3010;
  r.gpu.memory_bandwidth_gbs = 3352.3;
  EXPECT_TRUE(has(render_terminal(r),
                  "copy bandwidth measured 3.01 TB/s (0.90 of the 3.35 TB/s peak from the memory clock and bus width)\n"));
  r.predicted = true;
  EXPECT_TRUE(has(render_terminal(r), "copy bandwidth assumed 3.01 TB/s (0.90 of the 3.35 TB/s peak in the GPU database)\n"));
  r.gpu.memory_bandwidth_gbs = 0;
  EXPECT_TRUE(has(render_terminal(r), "copy bandwidth assumed 3.01 TB/s\n"));
}

TEST(Csv, HeaderIsTheSchemaAndOneLinePerRow) {
  BenchResult r = sample();
  r.rows[1].error = "cuBLASLt: no algorithm, \"heuristic\" empty";
  const std::string csv = to_csv(r);
  std::istringstream in(csv);
  std::string header, line;
  std::getline(in, header);
  EXPECT_EQ(header,
            "gpu,predicted,layer,pass,m,k,n,count,per_model,flops,recipe,mode,gemm_ms,gemm_p10_ms,"
            "gemm_p90_ms,gemm_min_ms,gemm_max_ms,n_runs,quant_ms,total_ms,tflops,pct_of_peak,path,"
            "predicted_path,quant_bytes,bound_ms,error,weight_quant_ms,weight_quant_bytes,grad_accum,"
            "recipe_tokens_per_s,recipe_tokens_per_s_low,recipe_tokens_per_s_high,moe_path,group_tokens");
  size_t lines = 0;
  while (std::getline(in, line)) ++lines;
  EXPECT_EQ(lines, r.rows.size());
  EXPECT_TRUE(has(csv, "\"cuBLASLt: no algorithm, \"\"heuristic\"\" empty\""));
  EXPECT_TRUE(has(csv, ",step,"));
  EXPECT_TRUE(has(csv, ",pre-quantized,"));
  // The failed row (line 2 after the header) measured nothing: gemm_ms .. quant_bytes are empty.
  std::istringstream again(csv);
  std::getline(again, line);
  std::getline(again, line);
  std::getline(again, line);
  std::vector<std::string> cells;
  std::string cell;
  std::istringstream fields(line.substr(0, line.find(",\"")));
  while (std::getline(fields, cell, ',')) cells.push_back(cell);
  ASSERT_GE(cells.size(), 25u) << line;
  for (size_t c : {12u, 13u, 14u, 15u, 16u, 18u, 19u, 20u, 21u, 24u}) EXPECT_EQ(cells[c], "") << "column " << c << ": " << line;
}

TEST(Html, SelfContainedWithCharts) {
  BenchResult r = sample();
  r.notes.push_back("a <script>alert(1)</script> note");
  r.notes.push_back("an attribute breaker \" ' & note");
  const std::string h = to_html(r);
  EXPECT_FALSE(has(h, "http://"));
  EXPECT_FALSE(has(h, "https://"));
  EXPECT_FALSE(has(h, "<script"));
  EXPECT_FALSE(has(h, " src="));
  EXPECT_FALSE(has(h, "<link"));
  EXPECT_TRUE(has(h, "&lt;script&gt;"));
  EXPECT_TRUE(has(h, "breaker &quot; &#39; &amp; note"));
  size_t svgs = 0;
  for (size_t p = h.find("<svg"); p != std::string::npos; p = h.find("<svg", p + 1)) ++svgs;
  EXPECT_EQ(svgs, 3u);  // stacked time, speedups, TFLOP/s per shape
  EXPECT_TRUE(has(h, "Speedup over bf16"));
  EXPECT_TRUE(has(h, "wgrad quant"));
  EXPECT_TRUE(has(h, "</html>"));
  // The terminal's interpretation lines, the same words, in the report too.
  EXPECT_TRUE(has(h, "<h2>What this means</h2>"));
  EXPECT_TRUE(has(h, "<li>" + interpretation_lines(bench::summarize(r)).front() + "</li>")) << h;
  EXPECT_TRUE(has(render_terminal(r), "  " + interpretation_lines(bench::summarize(r)).front() + "\n"));
  EXPECT_FALSE(has(h, "PREDICTED"));
  r.predicted = true;
  EXPECT_TRUE(has(to_html(r), "PREDICTED for NVIDIA H200 (no measurement)"));
}

TEST(Compare, SideBySideRatios) {
  BenchResult a = sample();
  BenchResult b = sample();
  b.gpu.name = "B200";
  b.predicted = true;
  const std::string c = render_comparison(a, b);
  const auto sa = bench::summarize(a);
  const auto sb = bench::summarize(b);
  const auto* x = bench::find_summary(sa, "quartet", Mode::step);
  const auto* y = bench::find_summary(sb, "quartet", Mode::step);
  EXPECT_TRUE(has(c, fmt::format("{:.3f}", y->layer_ms / x->layer_ms))) << c;
  EXPECT_TRUE(has(c, "PREDICTED"));
  EXPECT_TRUE(has(c, "B200"));
  // Both sides carry sequences (hand-made): their per-layer totals are compared too.
  EXPECT_TRUE(has(c, "timed as one sequence")) << c;
  EXPECT_TRUE(has(c, fmt::format("{:.3f}", y->sequence_layer_ms / x->sequence_layer_ms))) << c;
  // Each side's quantization against its own copy bandwidth, per autocast row.
  EXPECT_TRUE(has(c, "quantization kernels against each side's copy bandwidth")) << c;
  EXPECT_TRUE(has(c, fmt::format("{:<13}{:<14}{:>12}{:>12}\n", "quartet", "step", fmt::format("{:.2f}", x->quant_vs_copy),
                                 fmt::format("{:.2f}", y->quant_vs_copy))))
      << c;
  b.sequences.clear();  // a prediction has none: no such table
  EXPECT_FALSE(has(render_comparison(a, b), "timed as one sequence"));
  // Each measured side says what its clocks did; a predicted side has none to show.
  a.clocks = bench::summarize_clock_samples({{1500, 600, bench::clock_reason::kSwPowerCap}, {1980, 400, 0}}, "NVML");
  const std::string c2 = render_comparison(a, b);
  // wrapped to the terminal's width
  EXPECT_TRUE(has(c2, wrap_text("A GPU clocks during the run: " + bench::clock_record_text(a.clocks), "", "  "))) << c2;
  EXPECT_FALSE(has(c2, "B GPU clocks during the run"));
  b.predicted = false;
  EXPECT_TRUE(has(render_comparison(a, b), "B GPU clocks during the run: not recorded"));
  // Sweeps: named in the header when more than one, and a note when the two sides differ.
  EXPECT_FALSE(has(render_comparison(a, b), "sweep"));
  b.sweeps = 3;
  const std::string c3 = render_comparison(a, b);
  EXPECT_TRUE(has(c3, "\nB: B200  T=" + std::to_string(b.tokens) + " layers=" + std::to_string(b.layers) + " sweeps=3  ")) << c3;
  EXPECT_TRUE(has(c3, "note: A's rows are medians over 1 sweep(s), B's over 3 (nibble bench --repeat)")) << c3;
  a.sweeps = 3;
  EXPECT_FALSE(has(render_comparison(a, b), "note: A's rows are medians")) << render_comparison(a, b);
  // Where a config came from is not its identity; its dimensions are.
  const std::string differ = "note: the two results are for different models or batches";
  a.model = {{"model", {{"name", "tiny"}, {"hidden_size", 512}, {"source", "preset"}}}};
  b.model = {{"model", {{"name", "tiny"}, {"hidden_size", 512}, {"source", "config.json"}}}};
  EXPECT_FALSE(has(render_comparison(a, b), differ)) << render_comparison(a, b);
  b.model["model"]["hidden_size"] = 1024;
  EXPECT_TRUE(has(render_comparison(a, b), differ)) << render_comparison(a, b);
}

// The run's own timing variation: BF16's GEMMs timed in the pre-quantized and the step rows. When the
// fastest two recipes are closer than it, the interpretation says one run cannot order them.
TEST(Interpretation, FastestTwoWithinTheRunsTimingVariation) {
  BenchResult r = sample();
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  const double off = std::uniform_real_distribution<double>(0.02, 0.2)(rng);
  bool first = true;
  for (auto& row : r.rows) {
    if (row.recipe != "bf16" || row.mode != Mode::step) continue;
    for (const auto& pre : r.rows)
      if (pre.recipe == "bf16" && pre.mode == Mode::pre_quantized && pre.layer == row.layer && pre.pass == row.pass &&
          pre.m == row.m && pre.k == row.k && pre.n == row.n)
        row.gemm.median_ms = pre.gemm.median_ms * (first ? 1 - off : 1 + off / 2);  // the largest: -off
    first = false;
  }
  EXPECT_NEAR(bench::bf16_twin_spread(r), off, 1e-12);
  // Without BF16 step rows there is nothing to measure the variation with.
  BenchResult no_step = r;
  std::erase_if(no_step.rows, [](const bench::Row& row) { return row.recipe == "bf16" && row.mode == Mode::step; });
  EXPECT_TRUE(std::isnan(bench::bf16_twin_spread(no_step)));

  std::vector<bench::RecipeSummary> sums(3);
  sums[0].recipe = "bf16", sums[1].recipe = "fp8-delayed", sums[2].recipe = "fp8-current";
  for (auto& s : sums) s.mode = Mode::step, s.path = "native";
  sums[0].speedup_vs_bf16 = 1.0, sums[1].speedup_vs_bf16 = 1.70, sums[2].speedup_vs_bf16 = 1.66;  // 2.4% apart
  auto said = [&](double spread) {
    for (const auto& line : interpretation_lines(sums, {spread, {}, {}}))
      if (has(line, "fp8-delayed and fp8-current (step) differ by 2.4%") && has(line, "repeat it")) return true;
    return false;
  };
  EXPECT_TRUE(said(0.05));
  EXPECT_FALSE(said(0.02));
  EXPECT_FALSE(said(bench::kNaN));

  // With repeated sweeps the sweeps decide: the order held in every one, or it did not.
  bench::RunVariation v{0.05, {}, {}};
  v.sweeps.push_back({"fp8-delayed", Mode::step, {10, 10, 10}, {1.70, 1.72, 1.69}});
  v.sweeps.push_back({"fp8-current", Mode::step, {10, 10, 10}, {1.66, 1.65, 1.60}});
  auto lines = interpretation_lines(sums, v);
  auto find_line = [&](const std::string& needle) {
    for (const auto& line : lines)
      if (has(line, needle)) return line;
    return std::string();
  };
  EXPECT_EQ(find_line("fp8-delayed was faster than fp8-current (step) in every one of the 3 sweeps (by 2.4% to 5.6%)"),
            "fp8-delayed was faster than fp8-current (step) in every one of the 3 sweeps (by 2.4% to 5.6%): the order "
            "holds on this GPU.");
  EXPECT_EQ(find_line("repeat it"), "");  // the sweeps answered it
  v.sweeps[1].speedup_vs_bf16[1] = 1.75;  // fp8-current led in sweep 2
  lines = interpretation_lines(sums, v);
  EXPECT_NE(find_line("fp8-delayed and fp8-current (step) swapped places between sweeps (fp8-delayed led in 2 of 3;"),
            "");
}

// The GPU's clocks during the run (the engine's NVML samples): the header says what they did, and when they
// moved, a "what this means" line says so; a prediction shows neither.
TEST(Interpretation, ClocksThatMovedGetALineAndTheHeaderSaysWhatTheyDid) {
  BenchResult r = sample();
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  std::vector<bench::ClockSample> samples(200);
  const double capped = std::uniform_real_distribution<double>(0.3, 1.0)(rng);
  for (size_t i = 0; i < samples.size(); ++i) {
    samples[i].sm_clock_mhz = std::uniform_real_distribution<double>(1100, 1980)(rng);
    samples[i].power_w = std::uniform_real_distribution<double>(300, 700)(rng);
    samples[i].reasons = i < capped * samples.size() ? bench::clock_reason::kSwPowerCap : 0;
  }
  r.clocks = bench::summarize_clock_samples(samples, "NVML, every 50 ms");
  ASSERT_TRUE(bench::clocks_varied(r.clocks));
  const std::string text = bench::clock_record_text(r.clocks);
  const std::string t = render_terminal(r);
  EXPECT_TRUE(has(t, "GPU clocks during the run: " + text + "\n")) << t;
  EXPECT_TRUE(has(to_html(r), "GPU clocks during the run: " + text)) << text;
  auto clock_line = [](const std::vector<std::string>& lines) {
    for (const auto& line : lines)
      if (has(line, "clocks moved during this run")) return line;
    return std::string();
  };
  const std::string line = clock_line(interpretation_lines(bench::summarize(r), bench::run_variation(r)));
  EXPECT_TRUE(has(line, fmt::format("at its power cap in {:.0f}% of 200 samples", 100.0 * r.clocks.power_capped_fraction)))
      << line;
  EXPECT_TRUE(has(t, "  " + line + "\n"));
  // Steady clocks below any limit: no line. No samples: no line, and the header says why.
  for (auto& s : samples) s.sm_clock_mhz = 1980, s.reasons = 0;
  r.clocks = bench::summarize_clock_samples(samples, "NVML, every 50 ms");
  EXPECT_FALSE(bench::clocks_varied(r.clocks));
  EXPECT_EQ(clock_line(interpretation_lines(bench::summarize(r), bench::run_variation(r))), "");
  r.clocks = bench::summarize_clock_samples({}, "NVML not loaded (no driver)");
  EXPECT_TRUE(has(render_terminal(r), "GPU clocks during the run: not recorded: NVML not loaded (no driver)\n"));
  r.predicted = true;
  EXPECT_FALSE(has(render_terminal(r), "GPU clocks during the run"));
  EXPECT_FALSE(has(to_html(r), "GPU clocks during the run"));
}

// Files: atomic writes and the up-front writability check.
namespace fs = std::filesystem;

fs::path fresh_dir() {
  fs::path d = fs::temp_directory_path() / fmt::format("nibble_report_test_{}", std::random_device{}());
  fs::create_directories(d);
  return d;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(Files, AtomicWriteReplacesAndLeavesNoTemp) {
  const fs::path d = fresh_dir();
  const fs::path p = d / "out.json";
  std::ofstream(p) << "old poison content";
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  auto r = bench::testing::handmade_result(rng);
  write_json(p.string(), r);
  auto back = bench::read_result_file(p.string());
  EXPECT_EQ(back.rows.size(), r.rows.size());
  write_csv((d / "out.csv").string(), r);
  write_html((d / "out.html").string(), r);
  EXPECT_EQ(slurp(d / "out.csv"), to_csv(r));
  size_t files = 0;
  for (auto& e : fs::directory_iterator(d)) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 3u);  // no temporaries left behind
  fs::remove_all(d);
}

TEST(Files, WritabilityCheckedUpFront) {
  const fs::path d = fresh_dir();
  EXPECT_NO_THROW(check_writable((d / "a.json").string()));
  EXPECT_FALSE(fs::exists(d / "a.json"));
  EXPECT_TRUE(fs::is_empty(d));
  try {
    check_writable((d / "missing" / "a.json").string());
    ADD_FAILURE();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
  }
  EXPECT_THROW(check_writable(d.string()), std::runtime_error);
  EXPECT_THROW(check_output_paths({(d / "x").string(), "", (d / "x").string()}), std::runtime_error);
  EXPECT_NO_THROW(check_output_paths({(d / "x.json").string(), "", (d / "x.csv").string()}));
  EXPECT_THROW(write_file_atomic((d / "no" / "x").string(), "abc"), std::runtime_error);
  fs::remove_all(d);
}

}  // namespace
}  // namespace nibble::report
