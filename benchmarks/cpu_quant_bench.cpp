// Google Benchmark of the CPU reference quantizers on a 1024 x 4096 float tensor. The reference is
// for correctness, not speed; these numbers say how long tests and `nibble quantize` take.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "nibble/quant.hpp"

namespace {
constexpr int64_t kRows = 1024, kCols = 4096;

const std::vector<float>& input() {
  static const std::vector<float> x = [] {
    std::mt19937_64 g(std::random_device{}());
    std::normal_distribution<float> n(0.0f, 1.0f);
    std::vector<float> v(static_cast<size_t>(kRows * kCols));
    for (float& f : v) f = n(g);
    return v;
  }();
  return x;
}

void BM_quantize(benchmark::State& state, nibble::quant::Recipe recipe, nibble::quant::Role role) {
  const std::vector<float>& x = input();
  nibble::quant::QuantOptions o;
  o.role = role;
  for (auto _ : state) {
    nibble::quant::QuantizedTensor q = nibble::quant::quantize(recipe, x.data(), kRows, kCols, o);
    benchmark::DoNotOptimize(q.codes.data());
  }
  state.SetBytesProcessed(state.iterations() * kRows * kCols * static_cast<int64_t>(sizeof(float)));
  state.SetItemsProcessed(state.iterations() * kRows * kCols);
}

void BM_hadamard(benchmark::State& state) {
  std::vector<float> x = input();
  const nibble::quant::Rotation r{static_cast<int>(state.range(0)), nibble::quant::SignKind::seeded, 1};
  for (auto _ : state) {
    nibble::quant::hadamard_transform(x.data(), kRows, kCols, r, false);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * kRows * kCols * static_cast<int64_t>(sizeof(float)));
}

using nibble::quant::Recipe;
using nibble::quant::Role;
BENCHMARK_CAPTURE(BM_quantize, bf16, Recipe::bf16, Role::x)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_quantize, fp8_current_x, Recipe::fp8_current, Role::x)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_quantize, fp8_current_dy, Recipe::fp8_current, Role::dy)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_quantize, fp8_block_x, Recipe::fp8_block, Role::x)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_quantize, fp8_block_w, Recipe::fp8_block, Role::w)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_quantize, mxfp8_x, Recipe::mxfp8, Role::x)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_quantize, mxfp4_x, Recipe::mxfp4, Role::x)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_quantize, nvfp4_x, Recipe::nvfp4, Role::x)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_quantize, nvfp4_dy_stochastic, Recipe::nvfp4, Role::dy)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_quantize, quartet_x_quest, Recipe::quartet, Role::x)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_quantize, quartet_dy_backward, Recipe::quartet, Role::dy)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_hadamard)->Arg(16)->Arg(32)->Arg(128)->Unit(benchmark::kMillisecond);
}  // namespace

BENCHMARK_MAIN();
