// The benchmark's result model: what one `nibble bench` run (measured or predicted) produced.
// Plain data so the engine, the predictor, the report renderers and the precision planner share
// one vocabulary; field names here are the JSON field names (see docs/bench-output.md).
#pragma once
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "nibble/results/clock_record.hpp"
#include "nibble/workload/gemm_list.hpp"

namespace nibble::bench {

// The median of a sample (the mean of the two middle values for an even count; NaN when empty), shared by
// the clock record and the merge of repeated sweeps.
inline double median(std::vector<double> v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// How a GEMM was timed (docs/spec.md §6).
//   pre_quantized: operands quantized outside the timed region; GEMM alone.
//   step:          autocast, step-faithful attribution (fprop quantizes X and W plus the transposed
//                  copies backward needs, dgrad quantizes dY, wgrad reuses the copies).
//   per_gemm:      autocast, every GEMM re-quantizes both operands (Transformer Engine's way).
enum class Mode { pre_quantized, step, per_gemm };

std::string_view to_string(Mode mode);  // "pre-quantized" | "step" | "per-gemm"
Mode mode_from_string(std::string_view text);  // throws std::invalid_argument listing the valid names
inline bool is_autocast(Mode mode) { return mode != Mode::pre_quantized; }

// Execution paths, exactly these strings. A user must never be told "FP4" when the GEMM ran
// something else, so every row carries one of them.
namespace path {
inline constexpr std::string_view native = "native";
inline constexpr std::string_view emulated_exact_fp8 = "emulated-exact (fp8)";
inline constexpr std::string_view emulated_exact_bf16 = "emulated-exact (bf16)";
inline constexpr std::string_view emulated_approximate = "emulated-approximate";
inline constexpr std::string_view predicted = "predicted";
}  // namespace path
bool is_valid_path(std::string_view text);
// Throws std::invalid_argument naming `field` and listing the valid paths.
void check_path(std::string_view text, std::string_view field);

// Peak DRAM bandwidth in GB/s from the memory clock (MHz) and bus width (bits), at two transfers per
// clock (HBM, GDDR6X as the driver reports its clock): H100 SXM 2619 MHz x 5120 bits -> 3352 GB/s.
// 0 when either is unknown.
constexpr double peak_memory_bandwidth_gbs(double memory_clock_mhz, int bus_bits) {
  return memory_clock_mhz > 0 && bus_bits > 0 ? 2.0 * memory_clock_mhz * bus_bits / 8.0 / 1000.0 : 0.0;
}

struct GpuInfo {
  std::string name;               // "NVIDIA H200" (measured) or the database key (predicted)
  int sm_count = 0;
  int compute_capability = 0;     // 90 for sm_90
  double sm_clock_mhz = 0;        // max SM clock
  double memory_clock_mhz = 0;
  double memory_bandwidth_gbs = 0;  // peak HBM bandwidth: the database's (predicted), or peak_memory_bandwidth_gbs (measured)
  std::string driver_version;     // "580.159.04" (NVML); without NVML the CUDA driver API's "13.0 (CUDA driver API)"
  std::string cuda_version;       // runtime, "12.9"
  std::string cublaslt_version;   // "12.9.1"
};

// Spread of repeated timed runs of one GEMM (milliseconds per single call).
struct Timing {
  double median_ms = 0;
  double p10_ms = 0;
  double p90_ms = 0;
  double min_ms = 0;
  double max_ms = 0;
  int n_runs = 0;
};

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// One (GEMM, recipe, mode). Times are for ONE call of the GEMM; `count` says how many times the
// GEMM occurs in its layer (aggregation multiplies). A failed row (e.g. out of memory) keeps its
// shape and recipe, sets `error`, and is skipped by aggregation, so one bad shape does not end a run.
struct Row {
  // The GEMM (docs/spec.md §5 convention: C[M,N] = A[M,K] B[K,N]).
  std::string layer;   // linear layer name from the workload: "qkv", "attn_out", "lm_head", ...
  std::string pass;    // "fprop" | "dgrad" | "wgrad"
  int64_t m = 0, k = 0, n = 0;
  int64_t count = 1;   // calls of this shape per layer (workload::Gemm::count)
  double flops = 0;    // 2 m k n of ONE call (note: workload::Gemm::flops() includes count)
  bool per_model = false;  // once per model step (lm_head), not once per layer

  std::string recipe;  // "bf16", "fp8-delayed", ..., "quartet"
  Mode mode = Mode::pre_quantized;

  Timing gemm;                 // the GEMM alone
  double quant_ms = 0;         // quantization attributed to this GEMM (0 in pre-quantized mode)
  double total_ms = 0;         // gemm.median_ms + quant_ms
  double tflops = 0;           // flops / total_ms
  double pct_of_peak = 0;      // 100 * (flops / gemm.median_ms) / the recipe's dense peak on this GPU
  std::string path;            // one of nibble::bench::path
  std::string predicted_path;  // when path == "predicted": the path the GPU would run; else empty
  double quant_bytes = 0;      // bytes the quantization attributed to this GEMM reads + writes
  // The weight's share of the quantization above when it runs once per optimizer step rather than once per
  // micro-batch (step mode's fprop: W and its transposed copy): ONE quantization of the weight, time and bytes.
  // quant_ms and quant_bytes hold weight_quant_* / grad_accum of it (amortise_weight_quant), the activation
  // and gradient quantization in full.
  double weight_quant_ms = 0;
  double weight_quant_bytes = 0;
  // Floor of an autocast measurement: pre-quantized GEMM time + quant_bytes / copy bandwidth.
  double bound_ms = kNaN;
  std::string error;           // empty when the row succeeded
  // MoE routed-expert rows only (empty otherwise): how the experts ran, "grouped: <quantization>, <GEMMs>" or
  // "per-expert launches" (the moe_path namespace below), and for a grouped row the experts' token counts
  // (padded), whose sum is the row's token dimension.
  std::string moe_path;
  std::vector<int64_t> group_tokens;

  bool ok() const { return error.empty(); }
};

// The MoE execution paths a row's moe_path names. The grouped path's text says what ran as one unit.
namespace moe_path {
inline constexpr std::string_view per_expert = "per-expert launches";
// CUDA 13.0's cuBLASLt has no grouped GEMM for the block-scaled and per-tensor-scaled FP8/FP4 modes
// (cublasGemmGroupedBatchedEx takes no scales; cuBLASLt batches need one shape): the experts' GEMMs are
// issued back to back on one stream, no host synchronisation between them.
inline constexpr std::string_view grouped_gemms = "per-expert GEMMs in one stream sequence";
inline constexpr std::string_view grouped_prefix = "grouped: ";
inline constexpr std::string_view one_quantize_launch = "one quantize launch per operand";
// "grouped: <quantization>, per-expert GEMMs in one stream sequence".
inline std::string grouped(std::string_view quantization) {
  return std::string(grouped_prefix) + std::string(quantization) + ", " + std::string(grouped_gemms);
}
}  // namespace moe_path

// `nibble bench --moe both`: the routed experts' time of one block under each MoE path, per (recipe, mode):
// the sums of total_ms x count over the rows with a moe_path. ratio = grouped_ms / per_expert_ms.
struct MoeComparison {
  std::string recipe;
  Mode mode = Mode::pre_quantized;
  double grouped_ms = kNaN;
  double per_expert_ms = kNaN;
  double ratio = kNaN;
};

// One linear layer's passes timed back to back as one unit, the way a training step runs them: per
// pass, its quantization (autocast modes) then its GEMM, for fprop, dgrad and wgrad. The rows time
// the same work piece by piece (quantization and GEMM apart); the sequence adds what the pieces do to
// each other: clock state, launch gaps, operands still in L2. Times are for one call of each pass.
struct SequenceTiming {
  std::string layer;
  int64_t t = 0, i = 0, o = 0;  // the linear layer: Y[T,O] = X[T,I] W[O,I]^T (tells MoE experts from shared ones)
  std::string recipe;
  Mode mode = Mode::pre_quantized;
  int64_t count = 1;        // calls per transformer block, as the layer's rows
  bool per_model = false;   // once per model step (lm_head), as the layer's rows
  Timing timing;            // the whole sequence
};

// The linear layer (T, I, O) a row's GEMM belongs to, from its pass and shape (docs/spec.md §5: fprop
// M=T,K=I,N=O; dgrad M=T,K=O,N=I; wgrad M=I,K=T,N=O).
struct LinearShape {
  int64_t t = 0, i = 0, o = 0;
  bool operator==(const LinearShape&) const = default;
};
LinearShape linear_shape(const Row& row);

// Memory a recipe needs for one layer's linear GEMMs.
// Modelled the same way for a measurement and a prediction (predict::recipe_memory); a measurement
// adds what the device actually held.
struct MemoryUsage {
  std::string recipe;
  int64_t operand_bytes = 0;  // the largest linear layer's quantized operands, all copies and emulation buffers
  int64_t saved_bytes = 0;    // copies kept from fprop for backward, over the block's linear layers
  int64_t peak_bytes = 0;     // modelled: saved_bytes + the largest layer's operands that are not saved
  // Measured (0 = not measured): the most device memory (cudaMemGetInfo) one linear layer held with its
  // BF16 sources and this recipe's quantized operands, emulation buffers and GEMM output allocated.
  int64_t measured_bytes = 0;
};

// One recipe and mode over repeated sweeps (results/sweeps.hpp): each sweep's per-layer time and speedup
// over the BF16 of the same sweep, in sweep order.
struct SweepSummary {
  std::string recipe;
  Mode mode = Mode::pre_quantized;
  std::vector<double> layer_ms;
  std::vector<double> speedup_vs_bf16;
};

// Which transformer blocks keep BF16 whatever the recipe (`nibble bench --keep-bf16 first:K,last:L`), as
// low-precision pretraining recipes keep the first and last blocks in BF16. The LM head runs BF16 in every
// recipe already (docs/spec.md §3); lm_head records that the plan asked for it.
struct LayerPlan {
  int64_t bf16_first = 0;
  int64_t bf16_last = 0;
  bool bf16_lm_head = false;
  int64_t bf16_blocks() const { return bf16_first + bf16_last; }
  bool operator==(const LayerPlan&) const = default;
};
// Parses "first:K,last:L[,lm_head]" (keys in any order, each at most once) against a model of `layers` blocks.
// Throws std::invalid_argument naming `field`, the bad part and the fix.
LayerPlan parse_layer_plan(std::string_view spec, int64_t layers, std::string_view field = "--keep-bf16");
std::string to_string(const LayerPlan& plan);  // "first:2,last:2" (empty for no BF16 blocks and no lm_head)

// A multiplicative interval around every predicted time, from how far the model missed public measurements
// of this architecture (docs/predict.md): time x low .. time x high. NaN when the prediction has none (a
// measured run, or a GPU the model was calibrated on).
struct PredictionInterval {
  double low = kNaN;
  double high = kNaN;
  std::string method;  // how low and high were derived, for the reader
  bool present() const { return low > 0 && high >= low; }
};

struct BenchResult {
  std::string nibble_version = "0.1.0";
  GpuInfo gpu;
  bool predicted = false;            // true: numbers come from the performance model, not a GPU
  std::string command_line;
  std::string date;                  // ISO 8601 UTC, e.g. "2025-06-01T12:00:00Z"
  nlohmann::json model = nlohmann::json::object();  // the workload JSON (workload::to_json)
  int64_t tokens = 0;                // T = micro_batch * seq_len
  int64_t layers = 0;                // transformer blocks; per-model totals multiply by this
  std::string baseline_recipe = "fp8-delayed";
  double copy_bandwidth_gbs = 0;     // device copy bandwidth (read + write) measured in this run
  std::vector<Row> rows;
  std::vector<MemoryUsage> memory;
  std::vector<SequenceTiming> sequences;  // measured runs only (a prediction has none)
  std::vector<std::string> notes;    // free text the engine wants a reader to see
  ClockRecord clocks;                // the GPU's clocks during a measured run (JSON gpu_info.clocks_during_run)
  int sweeps = 1;                    // sweeps merged into this result (`nibble bench --repeat`)
  std::vector<SweepSummary> sweep_summaries;  // sweeps > 1 only
  // Micro-batches per optimizer step: step-mode weight quantization is counted once per grad_accum of them.
  int grad_accum = 1;
  LayerPlan layer_plan;              // blocks kept in BF16 (aggregation's model totals honour it)
  PredictionInterval interval;       // predictions for GPUs without a measured calibration
  std::vector<MoeComparison> moe_comparison;  // `--moe both` only
};

// Layers that occur once per model rather than once per transformer block; used when a file has
// no per_model field.
bool is_once_per_model(std::string_view layer);  // "lm_head", "embedding"

// The derived fields of a row from its measured ones: total_ms = gemm.median_ms + quant_ms,
// tflops = flops / total_ms, pct_of_peak = flops / gemm.median_ms against `peak_tflops` (the
// recipe's dense peak on this GPU; 0 leaves pct_of_peak NaN).
void finish_row(Row& row, double peak_tflops);

// Counts a row's weight quantization once per `grad_accum` micro-batches: quant_ms and quant_bytes, which
// hold one full weight quantization (weight_quant_ms, weight_quant_bytes) plus the activation and gradient
// quantization, keep 1 / grad_accum of the weight's share. Call before finish_row. Throws
// std::invalid_argument when grad_accum < 1 or the weight share exceeds the row's quantization.
void amortise_weight_quant(Row& row, int grad_accum);

// bound_ms of every autocast row: the time of its GEMMs on pre-quantized operands + quant_bytes /
// copy_bandwidth_gbs. Step rows run the pre-quantized rows' GEMMs, so they take the pre-quantized
// row of the same (layer, pass, recipe, shape) (their own gemm time when none exists); per-gemm rows
// run other GEMMs (Transformer Engine's settings: E4M3 only, fast accumulation, forward-layer
// layouts), so they take their own gemm time, measured apart from their quantization.
// Pre-quantized rows get bound_ms = their GEMM time. Needs copy_bandwidth_gbs > 0.
void fill_bounds(BenchResult& result);

// The current time in the `date` field's format.
std::string utc_now_iso8601();

// JSON (stable field names; see docs/bench-output.md). from_json validates and throws
// std::invalid_argument naming the bad field (e.g. "gemms[3].mode: 'fast' is not one of ...").
nlohmann::json to_json(const BenchResult& result);
BenchResult result_from_json(const nlohmann::json& j);
// Reads a result file written by write_result_json / `nibble bench --json`.
BenchResult read_result_file(const std::string& path);

// A benchmark row for one workload GEMM: shape, count, per_model and per-call flops from `gemm`; recipe and
// mode as given; times zero. The engine and the predictor both start from it, so measured and predicted
// results line up row for row.
Row row_from_gemm(const workload::Gemm& gemm, std::string recipe, Mode mode);

}  // namespace nibble::bench
