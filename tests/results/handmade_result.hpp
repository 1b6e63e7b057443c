// A small BenchResult built by hand with random (never zero) times, for aggregation and schema tests.
#pragma once
#include "nibble/results/result.hpp"

#include <random>
#include <string>
#include <vector>

namespace nibble::bench::testing {

struct Shape {
  std::string layer;
  std::string pass;
  int64_t m, k, n, count;
};

// Two linear layers of a block (three passes each) plus an lm_head fprop.
inline std::vector<Shape> handmade_shapes() {
  return {{"qkv", "fprop", 1024, 512, 1536, 1},      {"qkv", "dgrad", 1024, 1536, 512, 1},
          {"qkv", "wgrad", 512, 1024, 1536, 1},      {"mlp_up", "fprop", 1024, 512, 2048, 2},
          {"mlp_up", "dgrad", 1024, 2048, 512, 2},   {"mlp_up", "wgrad", 512, 1024, 2048, 2},
          {"lm_head", "fprop", 1024, 512, 4000, 1}};
}

inline Row make_row(const Shape& s, const std::string& recipe, Mode mode, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> ms(0.05, 2.0);
  Row r;
  r.layer = s.layer;
  r.pass = s.pass;
  r.m = s.m;
  r.k = s.k;
  r.n = s.n;
  r.count = s.count;
  r.per_model = s.layer == "lm_head";
  r.flops = 2.0 * double(s.m) * double(s.k) * double(s.n);
  r.recipe = recipe;
  r.mode = mode;
  r.gemm.median_ms = ms(rng);
  r.gemm.p10_ms = r.gemm.median_ms * 0.98;
  r.gemm.p90_ms = r.gemm.median_ms * 1.03;
  r.gemm.min_ms = r.gemm.median_ms * 0.97;
  r.gemm.max_ms = r.gemm.median_ms * 1.10;
  r.gemm.n_runs = 25;
  r.quant_ms = (is_autocast(mode) && recipe != "bf16") ? ms(rng) * 0.3 : 0.0;
  r.total_ms = r.gemm.median_ms + r.quant_ms;
  r.tflops = r.flops / (r.total_ms * 1e-3) / 1e12;
  r.pct_of_peak = 42.5;
  r.path = recipe == "quartet" ? std::string(path::emulated_exact_fp8) : std::string(path::native);
  r.quant_bytes = r.quant_ms > 0 ? 3.0e6 : 0.0;
  r.bound_ms = r.gemm.median_ms + r.quant_bytes / 4.24e12 * 1e3;
  return r;
}

// One SequenceTiming per (linear layer, recipe, mode) of the rows, timed at a random multiple of
// the sum of its parts (a sequence may be faster or slower than its separately timed pieces).
inline void add_sequences(BenchResult& b, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> factor(0.9, 1.2);
  for (const Row& r : b.rows) {
    if (r.pass != "fprop") continue;
    double parts = 0;
    for (const Row& x : b.rows)
      if (x.layer == r.layer && x.recipe == r.recipe && x.mode == r.mode && linear_shape(x) == linear_shape(r))
        parts += x.total_ms;
    SequenceTiming q;
    q.layer = r.layer;
    q.t = r.m;
    q.i = r.k;
    q.o = r.n;
    q.recipe = r.recipe;
    q.mode = r.mode;
    q.count = r.count;
    q.per_model = r.per_model;
    q.timing.median_ms = parts * factor(rng);
    q.timing.p10_ms = q.timing.median_ms * 0.99;
    q.timing.p90_ms = q.timing.median_ms * 1.02;
    q.timing.min_ms = q.timing.median_ms * 0.98;
    q.timing.max_ms = q.timing.median_ms * 1.05;
    q.timing.n_runs = 20;
    b.sequences.push_back(q);
  }
}

inline BenchResult handmade_result(std::mt19937_64& rng,
                                   const std::vector<std::string>& recipes = {"bf16", "fp8-delayed",
                                                                              "quartet"},
                                   const std::vector<Mode>& modes = {Mode::pre_quantized,
                                                                     Mode::step}) {
  BenchResult b;
  b.gpu.name = "NVIDIA H200";
  b.gpu.sm_count = 132;
  b.gpu.driver_version = "560.35.03";
  b.command_line = "nibble bench --model tiny";
  b.date = utc_now_iso8601();
  b.model = {{"name", "tiny"}, {"hidden_size", 512}};
  b.tokens = 1024;
  b.layers = 7;
  b.baseline_recipe = "fp8-delayed";
  b.copy_bandwidth_gbs = 4240;
  for (Mode mode : modes)
    for (const auto& recipe : recipes)
      for (const auto& s : handmade_shapes()) b.rows.push_back(make_row(s, recipe, mode, rng));
  for (const auto& recipe : recipes) b.memory.push_back({recipe, 1000, 2000, 5000});
  add_sequences(b, rng);
  return b;
}

}  // namespace nibble::bench::testing
