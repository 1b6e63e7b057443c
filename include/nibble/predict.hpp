// Layer: predict. A performance model of the benchmark for a named GPU: GEMM time by shape
// (roofline with wave quantization and a fitted efficiency per recipe family) plus quantization
// time by bytes moved. Every number it produces is labelled predicted.
#pragma once
#include "nibble/results/result.hpp"
#include "nibble/workload/gemm_list.hpp"

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace nibble::predict {

struct GpuSpec {
  std::string name;                 // database key: "H200 SXM"
  std::vector<std::string> device_names;  // what the CUDA runtime calls the part: "NVIDIA H100 80GB HBM3"
  std::string arch;                 // "hopper" | "blackwell"
  int compute_capability = 0;       // 90, 100, 103, 120
  int sm_count = 0;
  double boost_clock_mhz = 0;
  double memory_gb = 0;
  double memory_bandwidth_gbs = 0;  // datasheet
  double bf16_tflops = 0;           // dense peaks
  double fp8_tflops = 0;
  double fp4_tflops = 0;            // 0: no native FP4
  int tile_m = 128, tile_n = 256;   // output tile for wave quantization
  double copy_fraction = 0.883;     // achievable copy bandwidth / datasheet
  std::string source;
  double copy_bandwidth_gbs() const { return memory_bandwidth_gbs * copy_fraction; }
};

// data/gpus.json (workload::data_dir()). Errors name the file and field.
std::vector<GpuSpec> load_gpu_database();
std::vector<GpuSpec> load_gpu_database(const std::string& path);
// Case-insensitive, spaces/dashes/underscores ignored ("h200-sxm" finds "H200 SXM"); also the
// runtime's device names: an entry's device_names, else the name without "NVIDIA " / "GeForce " (with
// " SXM" appended when that alone matches nothing: "NVIDIA H200" is the SXM part). Throws
// std::invalid_argument listing the known GPUs.
const GpuSpec& find_gpu(const std::vector<GpuSpec>& gpus, std::string_view name);

// How a recipe's GEMM would execute on a GPU (docs/spec.md §4).
struct Execution {
  std::string family;       // efficiency key: bf16, bf16-decoded, fp8-tensor, fp8-block, fp8-rowwise, mx-native, fp4-native
  std::string path;         // the bench::path string it would report
  double peak_tflops = 0;   // dense peak of the tensor-core precision it runs on
  double operand_bytes = 2; // bytes per operand element the GEMM reads (2 bf16, 1 fp8, 0.5 fp4 + scales)
};
// Throws std::invalid_argument listing the known recipes.
Execution execution_for(std::string_view recipe, const GpuSpec& gpu);

struct Shape {
  int64_t m = 0, k = 0, n = 0, count = 1;
};

// One GEMM call under the roofline: max(flops / (peak * efficiency * wave * k-pipeline),
// bytes / copy bandwidth) + launch latency. `efficiency` is the fitted factor of the family.
double gemm_ms(const Shape& shape, const Execution& exec, const GpuSpec& gpu, double efficiency);

// The fixed cost of one kernel launch in the model (gemm_ms includes one).
double kernel_launch_ms();

// Quantizer launches one pass makes per expert (0 for bf16 and pre-quantized): step mode X and W in fprop,
// dY in dgrad, none in wgrad; per-gemm mode both operands of every GEMM. A per-expert MoE row pays them per
// expert, a grouped row once for all experts (the bytes are the same).
int quant_launches(std::string_view recipe, const std::string& pass, bench::Mode mode);

// A grouped MoE GEMM (workload::Gemm::group_tokens): its experts' GEMMs issued back to back (wave quantization
// per expert, one launch cost for all of them) and the bytes of every expert's quantization.
struct MoeGroupTime {
  double gemm_ms = 0;
  double quant_bytes = 0;
  double weight_quant_bytes = 0;
};

// Bytes the quantization attributed to one call of this GEMM moves (reads + writes), for the
// recipe, pass and mode (0 for bf16 and in pre-quantized mode): pass_quant_bytes of the layer this GEMM
// belongs to (predict/quant_traffic.hpp, the engine's account too), native formats on Blackwell.
double quant_bytes(std::string_view recipe, const std::string& pass, bench::Mode mode, const Shape& shape,
                   const GpuSpec& gpu);
// The weight's part of quant_bytes (predict/quant_traffic.hpp: pass_weight_quant_bytes).
double weight_quant_bytes(std::string_view recipe, const std::string& pass, bench::Mode mode, const Shape& shape,
                          const GpuSpec& gpu);

// Calibration: measured times of known shapes per family, and the efficiencies fitted to them.
MoeGroupTime grouped_moe_time(const workload::Gemm& gemm, const std::string& recipe, bench::Mode mode,
                              const Execution& exec, const GpuSpec& gpu, double efficiency, bool quantized);

struct Observation {
  std::string family;
  std::vector<Shape> gemms;  // summed (times count) to give `ms`
  double ms = 0;
  std::string what;
};
struct Calibration {
  std::string label;         // says where the numbers came from
  std::string gpu;           // the GPU the observations were measured on
  std::vector<Observation> observations;
  double quant_bandwidth_fraction = 0.95;  // quantizer throughput / copy bandwidth
  // Per recipe, when measured: the quantization kernels of the recipes differ widely (fused FP8
  // casts run near copy speed, the FP4/Quartet kernels far below), so one fraction cannot fit all.
  std::map<std::string, double> quant_fraction_by_recipe;
  double quant_fraction(const std::string& recipe) const {
    const auto it = quant_fraction_by_recipe.find(recipe);
    return it == quant_fraction_by_recipe.end() ? quant_bandwidth_fraction : it->second;
  }
  std::map<std::string, double> efficiency;  // filled by fit()
  std::vector<std::string> notes;            // e.g. families borrowed from another
};

// The measured `nibble bench --json` result the default calibration is fitted on, in data/calibration/
// (nibble bench on an H200 SXM, 2026-12-04: codonfm-5b, every recipe, pre-quantized + step).
inline constexpr const char* kMeasuredCalibrationFile = "h200-sxm-2026-12-04.json";

// Measured calibrations of GPUs other than the H200 (whose measurement is the default, above) in
// data/calibration/, by database name: a prediction for one of them is fitted on that GPU's own
// measurement (for the H100: nibble bench on an H100 SXM, 2026-12-05: codonfm-5b, every recipe,
// pre-quantized + step).
struct MeasuredCalibrationFile {
  const char* gpu;   // database name
  const char* file;  // in data/calibration/
};
inline constexpr MeasuredCalibrationFile kMeasuredCalibrationFiles[] = {
    {"H100 SXM", "h100-sxm-2026-12-05.json"},
};

// kMeasuredCalibrationFile when present, else data/calibration/h200-spec-reference.json, fitted.
Calibration default_calibration();
// The calibration measured on `gpu` (a database name) when data/calibration/ has one
// (kMeasuredCalibrationFiles), else default_calibration() (the H200's). Fitted once per GPU and process.
Calibration calibration_for(const std::string& gpu);
Calibration load_calibration(const std::string& path);  // fitted against its own GPU
// Least-squares (relative error) fit of one efficiency per family present in the observations;
// families without observations borrow: fp8-* and native families from fp8-tensor, else bf16.
void fit(Calibration& calibration, const GpuSpec& measured_on);
// Observations from every ok pre-quantized row of a measured result (one per row) plus the
// quantizer bandwidth fraction from its autocast rows; fitted. Calibrating on a new GPU is this one
// call on that GPU's measured JSON.
Calibration calibration_from_result(const bench::BenchResult& measured, const GpuSpec& gpu);
// Efficiency of a family (after fit); throws std::logic_error when calibration was never fitted.
double efficiency_of(const Calibration& calibration, const std::string& family);

struct PredictOptions {
  std::string baseline_recipe = "fp8-delayed";
  std::string command_line;
  const Calibration* calibration = nullptr;  // nullptr: calibration_for(the GPU)
  // Micro-batches per optimizer step: step-mode weight quantization counted once per grad_accum of them.
  int grad_accum = 1;
};

// The benchmark a GPU would produce, as a BenchResult with predicted = true, every row's path
// "predicted" and predicted_path what it would run; memory modelled. Errors: unknown GPU (lists
// the known ones), unknown recipe (lists them).
bench::BenchResult predict_bench(const workload::Workload& workload, const std::vector<std::string>& recipes,
                                 const std::vector<bench::Mode>& modes, const std::string& gpu_name,
                                 const PredictOptions& options = {});

// Relative errors of a prediction against a measurement, per (recipe, mode) layer_ms: for docs
// and `nibble predict --against`.
struct PredictionError {
  std::string recipe;
  bench::Mode mode;
  double predicted_ms = 0, measured_ms = 0, relative_error = 0;
};
// Throws std::invalid_argument when the two results are not of the same workload (workload_difference).
std::vector<PredictionError> compare_prediction(const bench::BenchResult& predicted,
                                                const bench::BenchResult& measured);

// How two results' workloads differ, in words ("" when they are the same): blocks, tokens per
// micro-batch, micro-batches per optimizer step, the routed experts' path and tokens (MoE), and the GEMM
// list (layer, pass, M, K, N, count) where both files record them. Times of different workloads cannot be
// compared row by row.
std::string workload_difference(const bench::BenchResult& a, const bench::BenchResult& b);

}  // namespace nibble::predict

// Blackwell predictions from public measurements (data/calibration/blackwell-public.json): GEMM efficiencies
// per tensor-core family, and the interval around every time they predict, derived from how far the
// efficiencies carry from one public measurement to the next. The method is in docs/predict.md.
namespace nibble::predict {

// One public measurement: a whole training step's model TFLOP/s per GPU (or tokens/s), as published.
struct PublicPoint {
  std::string source;        // id of a PublicSource
  std::string gpu;           // as the source names it ("DGX-GB200")
  std::string database_gpu;  // the data/gpus.json entry whose peaks it is divided by
  bool peaks_proxy = false;  // database_gpu is a stand-in (another part's peaks)
  std::string recipe;        // nibble's recipe of the same scaling
  std::string model;
  std::string setup;
  double model_tflops = 0;   // 0 when the source gives only tokens/s
  double tokens_per_s = 0;
};
struct PublicSource {
  std::string id, title, url, where;
};
struct PublicData {
  std::vector<PublicSource> sources;
  std::vector<PublicPoint> points;
};

inline constexpr const char* kBlackwellPublicFile = "blackwell-public.json";
// data/calibration/blackwell-public.json; errors name the file and the field.
PublicData load_public_data();
PublicData load_public_data(const std::string& path);

// Efficiencies fitted on the public points:
//   utilisation u = model TFLOP/s / the recipe's dense peak on the point's database GPU;
//   transfer = nibble's measured fp8-tensor GEMM efficiency on the H100 / the geometric mean u of the H100 FP8
//              points (what a whole step loses to attention, communication and the rest, on a GPU nibble measured);
//   efficiency of a Blackwell family = transfer x the geometric mean u of its Blackwell points.
// Interval: every Blackwell point left out in turn, its u predicted from the others of its family; the
// factors actual time / predicted time (= predicted u / actual u), their extremes = [low, high] (low <= 1 <= high).
struct PublicFit {
  double transfer = 0;
  std::map<std::string, double> efficiency;       // by family: fp8-tensor, mx-native, fp4-native
  std::map<std::string, int> points_per_family;
  double low = 1, high = 1;                       // interval factors on a predicted time
  int left_out_points = 0;                        // points the interval is built from
  std::vector<std::string> notes;
};
// `exclude_source`: fit without that source's points (the held-back check). Throws std::invalid_argument when
// no H100 FP8 point or no Blackwell point with model TFLOP/s remains.
PublicFit fit_public(const PublicData& data, const std::vector<GpuSpec>& gpus, double h100_fp8_efficiency,
                     const std::string& exclude_source = "");

// The held-back check: for each source with model-TFLOP/s points, fit without it and predict each of its
// Blackwell points' model TFLOP/s; relative error = predicted / published - 1.
struct HeldBackError {
  std::string source, gpu, recipe, model;
  double published_tflops = 0, predicted_tflops = 0, relative_error = 0;
};
std::vector<HeldBackError> held_back_check(const PublicData& data, const std::vector<GpuSpec>& gpus,
                                           double h100_fp8_efficiency);

// The family a public recipe's GEMMs run on a Blackwell GPU (execution_for), for the fit's bookkeeping.
std::string blackwell_family(const std::string& recipe);

}  // namespace nibble::predict
