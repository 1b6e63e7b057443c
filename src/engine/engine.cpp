#include "nibble/engine.hpp"

#include <algorithm>
#include <fmt/format.h>

#include <map>
#include <stdexcept>

#include "clock_monitor.hpp"
#include "device_buffer.hpp"
#include "memory_check.hpp"
#include "layer_runner.hpp"
#include "nibble/results/path_notes.hpp"
#include "nibble/results/row_from_gemm.hpp"
#include "nibble/results/sweeps.hpp"
#include "nibble/kernels/check.hpp"
#include "nibble/predict/operand_memory.hpp"
#include "nibble/engine/timing.hpp"
#include "nibble/predict.hpp"
#include "nibble/quant/layer_shape_rule.hpp"

namespace nibble::engine {
namespace {

using bench::Mode;
using cuda::Pass;

Pass pass_of(const std::string& p) {
  if (p == "fprop") return Pass::fprop;
  if (p == "dgrad") return Pass::dgrad;
  return Pass::wgrad;
}

std::string version_string(int v) { return ::fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

// nvml_driver: the NVIDIA driver's version from NVML ("" without NVML: the CUDA driver API version then
// stands in, labelled as such).
bench::GpuInfo to_bench_gpu(const GpuInfo& g, const std::string& nvml_driver) {
  bench::GpuInfo out;
  out.name = g.name;
  out.sm_count = g.sm_count;
  out.compute_capability = g.cc_major * 10 + g.cc_minor;
  out.sm_clock_mhz = g.sm_clock_mhz;
  out.memory_clock_mhz = g.memory_clock_mhz;
  out.memory_bandwidth_gbs = bench::peak_memory_bandwidth_gbs(g.memory_clock_mhz, g.memory_bus_bits);
  out.driver_version = nvml_driver.empty() ? version_string(g.driver_version) + " (CUDA driver API)" : nvml_driver;
  out.cuda_version = version_string(g.runtime_version);
  out.cublaslt_version = ::fmt::format("{}.{}.{}", g.cublaslt_version / 10000, (g.cublaslt_version / 100) % 100,
                                     g.cublaslt_version % 100);
  return out;
}

// Peak dense rate of the tensor-core precision a recipe's GEMM runs on, from the GPU database.
double peak_for(const std::string& recipe, const std::string& gpu_name) {
  try {
    static const auto db = predict::load_gpu_database();
    const auto& spec = predict::find_gpu(db, gpu_name);  // the runtime's name, e.g. "NVIDIA H100 80GB HBM3"
    return predict::execution_for(recipe, spec).peak_tflops;
  } catch (const std::exception&) {
    return 0;  // unknown GPU: pct_of_peak stays NaN
  }
}

struct LinearLayer {
  std::string name;
  LayerShape shape;
  std::map<std::string, const workload::Gemm*> by_pass;
};

// Block-linear layers and the lm_head from the workload's fprop rows (T = m, I = k, O = n).
std::vector<LinearLayer> linear_layers(const workload::Workload& w) {
  std::vector<LinearLayer> out;
  for (const auto& g : w.gemms) {
    if (g.pass != "fprop" || g.layer == "attn_scores" || g.layer == "attn_values") continue;
    LinearLayer l{g.layer + (g.role == "dense" || g.role.empty() ? "" : "/" + g.role), {g.m, g.k, g.n}, {}};
    for (const auto& h : w.gemms) {
      if (h.layer == g.layer && h.role == g.role) l.by_pass[h.pass] = &h;
    }
    out.push_back(std::move(l));
  }
  return out;
}

// Throws OutOfMemory, before anything is allocated, when `need` bytes exceed the GPU's free memory.
// Free device memory now (cudaMemGetInfo).
int64_t free_device_bytes() {
  size_t free_b = 0, total_b = 0;
  NIBBLE_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  return static_cast<int64_t>(free_b);
}

void refuse_unless_it_fits(const std::string& what, int64_t need) {
  size_t free_b = 0, total_b = 0;
  NIBBLE_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  const std::string refusal = memory_refusal(what, need, free_b, total_b);
  if (!refusal.empty()) throw OutOfMemory(refusal);
}

// The layer's passes back to back as a training step runs them: per pass its quantization (autocast
// modes, where the pass quantizes anything) then its GEMM.
bench::Timing time_as_sequence(LayerRunner& runner, const LinearLayer& layer, Mode mode, const TimingOptions& topt,
                               cudaStream_t stream) {
  std::vector<Pass> passes;
  for (const char* name : {"fprop", "dgrad", "wgrad"})
    if (layer.by_pass.count(name) != 0) passes.push_back(pass_of(name));
  std::vector<bool> quantizes;
  for (Pass p : passes) quantizes.push_back(bench::is_autocast(mode) && runner.quant_bytes(p, mode) > 0);
  int64_t step = 1;
  const TimingStats t = time_on_gpu(
      [&](cudaStream_t st, int) {
        for (size_t i = 0; i < passes.size(); ++i) {
          if (quantizes[i]) runner.quantize(passes[i], mode, step, st);
          runner.gemm(passes[i], st);
        }
        ++step;
      },
      topt, stream);
  return {t.median_ms, t.p10_ms, t.p90_ms, t.min_ms, t.max_ms, t.runs};
}

}  // namespace

bool gpu_available() {
  int n = 0;
  const bool ok = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  cudaGetLastError();
  return ok;
}

bench::BenchResult run_bench(const workload::Workload& workload, const EngineOptions& options) {
  GpuInfo gpu;
  if (!query_gpu(gpu)) throw std::runtime_error("no CUDA device found: use --gpu NAME to predict instead");
  cudaStream_t stream = nullptr;
  NIBBLE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  int device = 0;
  NIBBLE_CUDA_CHECK(cudaGetDevice(&device));
  ClockMonitor clocks(device);  // samples the SM clock, power and throttle reasons until the sweep ends

  bench::BenchResult result;
  result.gpu = to_bench_gpu(gpu, clocks.driver_version());
  result.predicted = false;
  result.command_line = options.command_line;
  result.date = bench::utc_now_iso8601();
  result.model = workload::to_json(workload);
  result.tokens = workload.tokens;
  result.layers = workload.layers;
  result.baseline_recipe = options.baseline;

  TimingOptions topt{options.warmup, options.warmup_ms, options.iters, options.flush_l2};
  warm_up_clocks(300, stream);
  result.copy_bandwidth_gbs = measure_copy_bandwidth(size_t{1} << 30, topt, stream) / 1e9;
  GpuInfo after;
  query_gpu(after);
  result.gpu.sm_clock_mhz = after.sm_clock_mhz;
  result.notes.push_back(::fmt::format("device-to-device copy bandwidth measured in this run: {:.0f} GB/s (read + write)",
                                     result.copy_bandwidth_gbs));
  result.notes.push_back(
      "timing: CUDA events, " + std::to_string(options.warmup) + " warm-up runs" +
      (options.warmup_ms > 0 ? ::fmt::format(" then at least {:g} ms of the row's own work", options.warmup_ms) : "") +
      " and " + std::to_string(options.iters) + " timed runs per row, L2 flushed between runs, median reported; "
      "quantization and GEMM are timed separately and summed" +
      (options.time_sequences ? "; each linear layer's passes are also timed back to back as one sequence" : ""));
  if (options.te_settings_for_per_gemm) {
    result.notes.push_back("per-gemm mode uses Transformer Engine's benchmark settings: E4M3 only, fast accumulation, "
                           "every GEMM timed as a forward-layer call (fp8-block wgrad: dY^T in 128x128 blocks, not the "
                           "recipe's 1x128)");
  }

  const auto layers = linear_layers(workload);
  // Per recipe, the most device memory one block linear layer held: its BF16 sources plus the runner's
  // buffers (quantized operands, emulation buffers, GEMM output), measured after preparing it.
  std::map<std::string, int64_t> measured_bytes;
  const double total_steps = static_cast<double>(layers.size() * options.recipes.size());
  double done = 0;
  for (const auto& layer : layers) {
    const auto& s = layer.shape;
    std::vector<DeviceBuffer> src;
    LayerSources sources;
    int64_t sources_bytes = 0;  // measured: what allocating the BF16 sources took from the free memory
    try {
      refuse_unless_it_fits(layer.name + "'s BF16 sources X, W, dY", (s.t * s.i + s.o * s.i + s.t * s.o) * 2);
      const int64_t free_before_sources = free_device_bytes();
      src.emplace_back(s.t * s.i * 2, "X");
      src.emplace_back(s.o * s.i * 2, "W");
      src.emplace_back(s.t * s.o * 2, "dY");
      sources_bytes = free_before_sources - free_device_bytes();
      fill_random_bf16(src[0].as<uint16_t>(), s.t * s.i, 1, 1.0f, stream);
      fill_random_bf16(src[1].as<uint16_t>(), s.o * s.i, 2, 0.02f, stream);
      fill_random_bf16(src[2].as<uint16_t>(), s.t * s.o, 3, 1e-3f, stream);
      sources = {src[0].as<uint16_t>(), src[1].as<uint16_t>(), src[2].as<uint16_t>()};
    } catch (const OutOfMemory& e) {
      for (const auto& r : options.recipes)
        for (auto m : options.modes)
          for (const auto& [p, g] : layer.by_pass) {
            auto row = bench::row_from_gemm(*g, r, m);
            row.error = e.what();
            result.rows.push_back(std::move(row));
          }
      continue;
    }
    for (const auto& recipe : options.recipes) {
      // The LM head stays in BF16 in every recipe (SPEC section 3): it is timed in BF16 and says so.
      const bool high_precision_layer = layer.name == "lm_head";
      const std::string run_recipe = high_precision_layer ? "bf16" : recipe;
      // A layer the recipe's blocks do not divide: the same refusal (and words) as a prediction's, in
      // every mode. (The BF16 LM head is left to cuda::gemm, which refuses only its GEMMs with K % 8 != 0.)
      const std::string shape_error =
          high_precision_layer ? std::string() : quant::layer_shape_error(recipe, layer.name, s.t, s.i, s.o);
      bench::PathNotes path_notes;  // each mode's runner's path
      for (Mode mode : options.modes) {
        RunnerSettings rs;
        const bool te = mode == Mode::per_gemm && options.te_settings_for_per_gemm;
        rs.e4m3_only = te;
        rs.fast_accumulation_everywhere = te;
        rs.te_forward_layouts = te;
        rs.autotune = options.autotune;
        std::unique_ptr<LayerRunner> runner;
        std::string setup_error;
        try {
          if (!shape_error.empty()) throw std::invalid_argument(shape_error);
          // The quantized operands (codes, scales, transposed copies) are the least the runner
          // allocates: refuse the rows before allocating when they cannot fit.
          const auto lm = predict::linear_layer_memory(run_recipe, s.t, s.i, s.o);
          refuse_unless_it_fits(layer.name + "'s " + run_recipe + " operands",
                                lm.activation.bytes.total() + lm.weight.bytes.total() + lm.gradient.bytes.total());
          const int64_t free_before_runner = free_device_bytes();
          runner = make_layer_runner(run_recipe, s, sources, rs, stream);
          runner->prepare(stream);
          NIBBLE_CUDA_CHECK(cudaStreamSynchronize(stream));
          if (!high_precision_layer) {
            int64_t& m = measured_bytes[recipe];
            m = std::max(m, sources_bytes + free_before_runner - free_device_bytes());
          }
        } catch (const std::exception& e) {
          setup_error = e.what();
          runner.reset();
          cudaGetLastError();
        }
        bool rows_ok = runner != nullptr;
        for (const char* pass_name : {"fprop", "dgrad", "wgrad"}) {
          auto it = layer.by_pass.find(pass_name);
          if (it == layer.by_pass.end()) continue;
          bench::Row row = bench::row_from_gemm(*it->second, recipe, mode);
          if (!runner) {
            row.error = setup_error;
            result.rows.push_back(std::move(row));
            continue;
          }
          const Pass pass = pass_of(pass_name);
          try {
            int64_t step = 1;
            if (bench::is_autocast(mode)) {
              const double qbytes = runner->quant_bytes(pass, mode);
              if (qbytes > 0) {
                const auto q = time_on_gpu(
                    [&](cudaStream_t st, int) { runner->quantize(pass, mode, step++, st); }, topt, stream);
                row.quant_ms = q.median_ms;
              }
              row.quant_bytes = qbytes;
            }
            cuda::ExecutionPath path = cuda::ExecutionPath::native;
            const auto g = time_on_gpu([&](cudaStream_t st, int) { path = runner->gemm(pass, st); }, topt, stream);
            row.gemm = {g.median_ms, g.p10_ms, g.p90_ms, g.min_ms, g.max_ms, g.runs};
            row.path = std::string(cuda::to_string(path));
            bench::finish_row(row, peak_for(run_recipe, gpu.name));
          } catch (const std::exception& e) {
            row.error = e.what();
            cudaGetLastError();
          }
          rows_ok = rows_ok && row.ok();
          result.rows.push_back(std::move(row));
        }
        if (options.time_sequences && rows_ok) {
          const bench::Row first = bench::row_from_gemm(*layer.by_pass.begin()->second, recipe, mode);
          try {
            result.sequences.push_back({first.layer, s.t, s.i, s.o, recipe, mode, first.count, first.per_model,
                                        time_as_sequence(*runner, layer, mode, topt, stream)});
          } catch (const std::exception& e) {
            result.notes.push_back(recipe + " " + layer.name + " " + std::string(bench::to_string(mode)) +
                                   ": not timed as one sequence (" + e.what() + ")");
            cudaGetLastError();
          }
        }
        if (runner) path_notes.add(mode, runner->note());
      }
      for (const std::string& line : path_notes.lines(recipe, layer.name)) {
        // Layers of one name (an MoE block's expert and shared mlp_up) usually run the same path: one line.
        if (std::find(result.notes.begin(), result.notes.end(), line) == result.notes.end()) result.notes.push_back(line);
      }
      if (high_precision_layer && recipe != "bf16") {
        result.notes.push_back(layer.name + " runs in BF16 under " + recipe + " (high-precision layer)");
      }
      done += 1;
      if (options.progress) options.progress(done / total_steps, layer.name + " " + recipe);
    }
  }
  // Memory per recipe: the model a prediction reports too, from the rows and the paths they ran, next to
  // what the device held for the largest layer.
  for (const auto& recipe : options.recipes) {
    try {
      bench::MemoryUsage mu = predict::recipe_memory(recipe, result.rows);
      mu.measured_bytes = measured_bytes[recipe];
      result.memory.push_back(mu);
    } catch (const std::exception& e) {
      result.notes.push_back("memory accounting of " + recipe + " not available: " + e.what());
    }
  }
  bench::fill_bounds(result);
  result.clocks = clocks.stop();
  cudaStreamDestroy(stream);
  return result;
}

bench::BenchResult run_bench_sweeps(const workload::Workload& workload, const EngineOptions& options, int sweeps) {
  if (sweeps < 1) throw std::invalid_argument(::fmt::format("sweeps: {} must be at least 1", sweeps));
  std::vector<bench::BenchResult> results;
  for (int k = 0; k < sweeps; ++k) {
    EngineOptions o = options;
    o.recipes = bench::sweep_order(options.recipes, k);  // sweep 0 in the order asked: the tables' order
    if (options.progress && sweeps > 1)
      o.progress = [&options, k, sweeps](double f, const std::string& what) {
        options.progress((k + f) / sweeps, ::fmt::format("sweep {}/{} {}", k + 1, sweeps, what));
      };
    results.push_back(run_bench(workload, o));
  }
  return bench::merge_sweeps(results);
}

}  // namespace nibble::engine
