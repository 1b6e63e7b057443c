// Aggregation of benchmark rows: pure functions from a BenchResult to sums, speedups and overheads.
// No I/O; every number a report prints comes from here, so it is tested once on hand-made results.
#pragma once
#include "nibble/results/result.hpp"

#include <string>
#include <vector>

namespace nibble::bench {

struct PassSums {
  double fprop_ms = 0;
  double dgrad_ms = 0;
  double wgrad_ms = 0;
  double backward_ms() const { return dgrad_ms + wgrad_ms; }
  double total_ms() const { return fprop_ms + dgrad_ms + wgrad_ms; }
};

// One (recipe, mode): where its time goes and what it buys. Times of the "layer" fields cover one
// transformer block (rows of once-per-model layers such as lm_head are excluded); model_ms is
// blocks_ms (layer_ms * layers, or the result's layer plan's mix of this recipe and bf16) plus the
// once-per-model rows. Unavailable comparisons are NaN.
struct RecipeSummary {
  std::string recipe;
  Mode mode = Mode::pre_quantized;
  std::string path;            // the path of the rows (by FLOPs when they differ; see mixed_paths)
  std::string predicted_path;  // when path == "predicted"
  bool mixed_paths = false;    // rows of this recipe ran different paths
  PassSums gemm;               // per layer, GEMM time only
  PassSums quant;              // per layer, attributed quantization time (autocast modes)
  PassSums ms;                 // per layer, gemm + quant
  double layer_ms = 0;         // gemm + quant over one layer
  double once_per_model_ms = 0;  // lm_head etc., once
  double model_ms = 0;         // layer_ms * layers + once_per_model_ms
  double layer_flops = 0;
  double layer_tflops = 0;     // layer_flops / layer_ms
  double bound_layer_ms = kNaN;   // sum of the rows' bound_ms, when every row has one
  double speedup_vs_bf16 = kNaN;      // same-mode bf16 layer_ms / this layer_ms
  double speedup_vs_baseline = kNaN;  // same-mode baseline layer_ms / this layer_ms
  // Forward and backward speedups over bf16 (fprop sums; dgrad + wgrad sums), same mode: the
  // scaling-law planner's sp_fw and sp_bw.
  double forward_speedup_vs_bf16 = kNaN;
  double backward_speedup_vs_bf16 = kNaN;
  // The block's linear layers each timed as one sequence (SequenceTiming), summed like layer_ms; NaN
  // unless every linear layer of the block that has rows here has a sequence.
  double sequence_layer_ms = kNaN;
  // Same-mode bf16 sequence_layer_ms / this one.
  double sequence_speedup_vs_bf16 = kNaN;
  // Autocast layer_ms minus the same recipe's pre-quantized layer_ms, when both ran.
  double quant_overhead_ms = kNaN;
  // Bytes the layer's quantization reads and writes (sum of the rows' quant_bytes x count).
  double quant_bytes = 0;
  // The quantization's effective bandwidth, quant_bytes / quant.total_ms(), as a fraction of the run's
  // copy bandwidth: 1 = every quantization kernel at copy speed. NaN without quantization time or a copy
  // bandwidth.
  double quant_vs_copy = kNaN;
  // Weight quantization of one layer (step mode's fprop): one full quantization of its weights, and the share
  // of it quant and layer_ms hold, weight_quant_ms / the result's grad_accum (the rest is amortised over the
  // optimizer step's other micro-batches).
  double weight_quant_ms = 0;
  double weight_quant_share_ms = 0;
  // The model's transformer blocks under the result's layer plan: the blocks it keeps in BF16 at the same
  // mode's bf16 layer_ms, the others at this recipe's. NaN when blocks are kept and no bf16 ran.
  double blocks_ms = kNaN;
  int64_t bf16_blocks = 0;           // of the result's layers, kept in BF16 by the plan
  // Training throughput of the transformer blocks: tokens per micro-batch / blocks_ms. Embeddings, the LM head
  // and the optimizer are excluded.
  double tokens_per_s = kNaN;
  double model_speedup_vs_bf16 = kNaN;  // same-mode bf16 blocks_ms / this blocks_ms (honours the layer plan)
  // The result's prediction interval applied (NaN without one): layer_ms, model_ms and tokens_per_s bounds.
  double layer_ms_low = kNaN, layer_ms_high = kNaN;
  double model_ms_low = kNaN, model_ms_high = kNaN;
  double tokens_per_s_low = kNaN, tokens_per_s_high = kNaN;
  // Rows with an error. The sums skip them, so a recipe with failures looks faster than it is:
  // its speedups are left NaN rather than overstated.
  int failed_rows = 0;
};

// A linear layer's total per (recipe, mode): time per pass, one layer.
struct LinearLayerSum {
  std::string layer;
  std::string recipe;
  Mode mode = Mode::pre_quantized;
  PassSums ms;                 // gemm + quant
  LinearShape shape;           // tells two layers of one name apart (MoE experts and shared experts)
};

// fprop versus dgrad of one linear layer: the same weights, different shapes and layouts, so the
// times differ ("a dgrad is not the same as fprop").
struct Asymmetry {
  std::string layer;
  std::string recipe;
  Mode mode = Mode::pre_quantized;
  double fprop_ms = 0;          // one call, total (gemm + quant)
  double dgrad_ms = 0;
  double dgrad_over_fprop = kNaN;
  LinearShape shape;  // the layer's T, I, O (an MoE's experts and shared expert share a name, not a shape)
};

// The separately timed parts of a sequence: the total_ms of its layer's rows (same recipe and mode),
// one call of each pass; NaN when a row failed or is missing.
double sequence_parts_ms(const BenchResult& result, const SequenceTiming& sequence);

// Sums over rows that succeeded, weighted by each row's count.
std::vector<RecipeSummary> summarize(const BenchResult& result);
std::vector<LinearLayerSum> per_linear_layer(const BenchResult& result);
std::vector<Asymmetry> fprop_dgrad_asymmetry(const BenchResult& result);

// This run's timing variation, measured in the run itself: BF16 quantizes nothing, so its GEMMs in the
// pre-quantized rows and in the step rows are the same work timed twice (per-gemm mode may change their
// layouts, so it does not count). The largest |step / pre-quantized - 1| of their GEMM medians over the
// rows that succeeded; NaN when no GEMM was timed both ways.
// (On a power-capped GPU the clock moves between rows: docs/timing-noise.md.)
double bf16_twin_spread(const BenchResult& result);

// What may move this run's timings besides the recipes themselves: the BF16 twin spread above and the GPU's
// clocks during the run (both NaN / unavailable for a prediction).
struct RunVariation {
  double timing_spread = kNaN;
  ClockRecord clocks;
  std::vector<SweepSummary> sweeps;  // each sweep's per-layer result when the run repeated its sweep
};
RunVariation run_variation(const BenchResult& result);

// The summary for (recipe, mode), or nullptr.
const RecipeSummary* find_summary(const std::vector<RecipeSummary>& summaries,
                                  std::string_view recipe, Mode mode);

// The recipes and modes present, in first-appearance order (bf16 first when present).
std::vector<std::string> recipes_in(const BenchResult& result);
std::vector<Mode> modes_in(const BenchResult& result);

// The routed experts' time of one block per (recipe, mode) in `grouped` and `per_expert` (two results of one
// model and recipes, measured or predicted the same way), as MoeComparison; pairs that failed stay NaN.
double moe_expert_ms(const BenchResult& result, const std::string& recipe, Mode mode);  // NaN on a failed row
std::vector<MoeComparison> compare_moe_paths(const BenchResult& grouped, const BenchResult& per_expert);

// docs/spec.md §7: training speedup from forward and backward speedups,
// sp_tr = 1 / (1/(3 sp_fw) + 2/(3 sp_bw)).
double training_speedup(double forward_speedup, double backward_speedup);

}  // namespace nibble::bench
