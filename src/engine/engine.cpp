#include "nibble/engine.hpp"

#include <algorithm>
#include <fmt/format.h>

#include <functional>
#include <map>
#include <stdexcept>

#include "clock_monitor.hpp"
#include "cuda_stream_event.hpp"
#include "device_buffer.hpp"
#include "memory_check.hpp"
#include "layer_runner.hpp"
#include "nibble/results/path_notes.hpp"
#include "nibble/results/sweeps.hpp"
#include "nibble/kernels/check.hpp"
#include "nibble/predict/operand_memory.hpp"
#include "nibble/engine/timing.hpp"
#include "nibble/predict.hpp"
#include "nibble/quant/layer_shape_rule.hpp"

namespace nibble::engine {
// The recipes' layer plans this engine times.
using recipes::DeviceBuffer;
using recipes::LayerRunner;
using recipes::LayerShape;
using recipes::LayerSources;
using recipes::RunnerSettings;
using recipes::fill_random_bf16;
using recipes::make_layer_runner;
using recipes::OutOfMemory;

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
  std::vector<int64_t> group_tokens;  // grouped routed experts (workload::Gemm::group_tokens); t is their sum
};

// What the grouped path runs in this engine: every expert's quantizer and GEMM issued back to back on one
// stream inside one timed region (no host synchronisation between experts). The single-launch quantization
// of all experts is not implemented here, so the label says per-expert quantize launches.
const std::string kGroupedMoePath = bench::moe_path::grouped("per-expert quantize launches in one stream sequence");

// Block-linear layers and the lm_head from the workload's fprop rows (T = m, I = k, O = n).
std::vector<LinearLayer> linear_layers(const workload::Workload& w) {
  std::vector<LinearLayer> out;
  for (const auto& g : w.gemms) {
    if (g.pass != "fprop" || g.layer == "attn_scores" || g.layer == "attn_values") continue;
    LinearLayer l{g.layer + (g.role == "dense" || g.role.empty() ? "" : "/" + g.role), {g.m, g.k, g.n}, {},
                  g.group_tokens};
    // Per-expert entries of one name differ in their tokens (--token-imbalance): match the linear shape too.
    const auto same_linear = [&g](const workload::Gemm& h) {
      if (h.pass == "dgrad") return h.m == g.m && h.n == g.k && h.k == g.n;
      if (h.pass == "wgrad") return h.k == g.m && h.m == g.k && h.n == g.n;
      return h.m == g.m && h.k == g.k && h.n == g.n;
    };
    for (const auto& h : w.gemms) {
      if (h.layer == g.layer && h.role == g.role && same_linear(h)) l.by_pass[h.pass] = &h;
    }
    out.push_back(std::move(l));
  }
  return out;
}

// Free device memory now (cudaMemGetInfo).
int64_t free_device_bytes() {
  size_t free_b = 0, total_b = 0;
  NIBBLE_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  return static_cast<int64_t>(free_b);
}

// Throws OutOfMemory, before anything is allocated, when `need` bytes exceed the GPU's free memory.
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

// The result's identity: the GPU, the command, the model, before anything is timed.
bench::BenchResult result_header(const workload::Workload& workload, const EngineOptions& options, const GpuInfo& gpu,
                                 const std::string& nvml_driver) {
  bench::BenchResult result;
  result.gpu = to_bench_gpu(gpu, nvml_driver);
  result.predicted = false;
  result.command_line = options.command_line;
  result.grad_accum = options.grad_accum;
  result.date = bench::utc_now_iso8601();
  result.model = workload::to_json(workload);
  result.tokens = workload.tokens;
  result.layers = workload.layers;
  result.baseline_recipe = options.baseline;
  return result;
}

// Clocks warmed up, then the device-to-device copy that every row's bandwidth is compared with, and the
// SM clock reached under it.
void measure_copy_reference(bench::BenchResult& result, const TimingOptions& topt, cudaStream_t stream) {
  warm_up_clocks(300, stream);
  result.copy_bandwidth_gbs = measure_copy_bandwidth(size_t{1} << 30, topt, stream) / 1e9;
  GpuInfo after;
  query_gpu(after);
  result.gpu.sm_clock_mhz = after.sm_clock_mhz;
  result.notes.push_back(::fmt::format("device-to-device copy bandwidth measured in this run: {:.0f} GB/s (read + write)",
                                       result.copy_bandwidth_gbs));
}

// How the rows were timed, in the result's notes.
void add_method_notes(bench::BenchResult& result, const EngineOptions& options) {
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
}

// A layer's BF16 sources X, W, dY on the device, random, with what allocating them took from the free
// memory.
struct LayerSourceBuffers {
  std::vector<DeviceBuffer> buffers;
  LayerSources sources;
  int64_t bytes = 0;
};

// Throws OutOfMemory, before or while allocating, when the sources do not fit.
LayerSourceBuffers allocate_sources(const LayerShape& s, const std::string& layer_name, cudaStream_t stream) {
  refuse_unless_it_fits(layer_name + "'s BF16 sources X, W, dY", (s.t * s.i + s.o * s.i + s.t * s.o) * 2);
  LayerSourceBuffers out;
  const int64_t free_before = free_device_bytes();
  out.buffers.emplace_back(s.t * s.i * 2, "X");
  out.buffers.emplace_back(s.o * s.i * 2, "W");
  out.buffers.emplace_back(s.t * s.o * 2, "dY");
  out.bytes = free_before - free_device_bytes();
  auto* x = out.buffers[0].as<uint16_t>();
  auto* w = out.buffers[1].as<uint16_t>();
  auto* dy = out.buffers[2].as<uint16_t>();
  fill_random_bf16(x, s.t * s.i, 1, 1.0f, stream);
  fill_random_bf16(w, s.o * s.i, 2, 0.02f, stream);
  fill_random_bf16(dy, s.t * s.o, 3, 1e-3f, stream);
  out.sources = {x, w, dy};
  return out;
}

// A layer whose sources do not fit: every row it would have, with the refusal as its error.
void add_refused_layer(bench::BenchResult& result, const LinearLayer& layer, const EngineOptions& options,
                       const std::string& error) {
  for (const auto& r : options.recipes)
    for (auto m : options.modes)
      for (const auto& [p, g] : layer.by_pass) {
        auto row = bench::row_from_gemm(*g, r, m);
        row.error = error;
        result.rows.push_back(std::move(row));
      }
}

// Memory per recipe: the model a prediction reports too, from the rows and the paths they ran, next to
// what the device held for the largest layer.
void add_memory_accounting(bench::BenchResult& result, const EngineOptions& options,
                           const std::map<std::string, int64_t>& measured_bytes) {
  for (const auto& recipe : options.recipes) {
    try {
      bench::MemoryUsage mu = predict::recipe_memory(recipe, result.rows);
      const auto it = measured_bytes.find(recipe);
      mu.measured_bytes = it == measured_bytes.end() ? 0 : it->second;
      result.memory.push_back(mu);
    } catch (const std::exception& e) {
      result.notes.push_back("memory accounting of " + recipe + " not available: " + e.what());
    }
  }
}

// One layer under one recipe: the recipe its GEMMs run (the LM head stays in BF16 in every recipe,
// docs/spec.md §3: it is timed in BF16 and says so), and why the recipe cannot run the layer, if it cannot.
struct LayerRecipe {
  const LinearLayer& layer;
  const std::string& recipe;
  bool high_precision_layer;
  std::string run_recipe;
  // A layer the recipe's blocks do not divide: the same refusal (and words) as a prediction's, in
  // every mode. (The BF16 LM head is left to cuda::gemm, which refuses only its GEMMs with K % 8 != 0.)
  std::string shape_error;

  LayerRecipe(const LinearLayer& l, const std::string& r)
      : layer(l), recipe(r), high_precision_layer(l.name == "lm_head"), run_recipe(high_precision_layer ? "bf16" : r),
        shape_error(high_precision_layer ? std::string()
                                         : quant::layer_shape_error(r, l.name, l.shape.t, l.shape.i, l.shape.o)) {}
};

// One sweep's timing of layers x recipes x modes on one stream; rows and notes go to `result`.
struct Sweep {
  const EngineOptions& options;
  const std::string& gpu_name;
  const TimingOptions topt;
  cudaStream_t stream;
  bench::BenchResult& result;
  // Per recipe, the most device memory one block linear layer held: its BF16 sources plus the runner's
  // buffers (quantized operands, emulation buffers, GEMM output), measured after preparing it.
  std::map<std::string, int64_t> measured_bytes;

  // Every mode of one layer under one recipe, then the layer's path notes.
  void time_recipe(const LinearLayer& layer, const LayerSourceBuffers& src, const std::string& recipe) {
    const LayerRecipe lr(layer, recipe);
    bench::PathNotes path_notes;  // each mode's runner's path
    for (Mode mode : options.modes) {
      std::string setup_error;
      const std::unique_ptr<LayerRunner> runner = prepare_runner(lr, src, mode, setup_error);
      const bool rows_ok = time_rows(lr, mode, runner.get(), setup_error);
      if (options.time_sequences && rows_ok) time_sequence(lr, mode, *runner);
      if (runner) path_notes.add(mode, runner->note());
    }
    for (const std::string& line : path_notes.lines(recipe, layer.name)) {
      // Layers of one name (an MoE block's expert and shared mlp_up) usually run the same path: one line.
      if (std::find(result.notes.begin(), result.notes.end(), line) == result.notes.end()) result.notes.push_back(line);
    }
    if (lr.high_precision_layer && recipe != "bf16") {
      result.notes.push_back(layer.name + " runs in BF16 under " + recipe + " (high-precision layer)");
    }
  }

  // The layer's runner for one mode, prepared (operands quantized once, buffers allocated), or null with
  // `setup_error` saying why not.
  std::unique_ptr<LayerRunner> prepare_runner(const LayerRecipe& lr, const LayerSourceBuffers& src, Mode mode,
                                              std::string& setup_error) {
    const auto& s = lr.layer.shape;
    RunnerSettings rs;
    const bool te = mode == Mode::per_gemm && options.te_settings_for_per_gemm;
    rs.e4m3_only = te;
    rs.fast_accumulation_everywhere = te;
    rs.te_forward_layouts = te;
    rs.autotune = options.autotune;
    std::unique_ptr<LayerRunner> runner;
    try {
      if (!lr.shape_error.empty()) throw std::invalid_argument(lr.shape_error);
      // The quantized operands (codes, scales, transposed copies) are the least the runner
      // allocates: refuse the rows before allocating when they cannot fit.
      const auto lm = predict::linear_layer_memory(lr.run_recipe, s.t, s.i, s.o);
      refuse_unless_it_fits(lr.layer.name + "'s " + lr.run_recipe + " operands",
                            lm.activation.bytes.total() + lm.weight.bytes.total() + lm.gradient.bytes.total());
      const int64_t free_before_runner = free_device_bytes();
      runner = make_layer_runner(lr.run_recipe, s, src.sources, rs, stream);
      runner->prepare(stream);
      NIBBLE_CUDA_CHECK(cudaStreamSynchronize(stream));
      if (!lr.high_precision_layer) {
        int64_t& m = measured_bytes[lr.recipe];
        m = std::max(m, src.bytes + free_before_runner - free_device_bytes());
      }
    } catch (const std::exception& e) {
      setup_error = e.what();
      runner.reset();
      cudaGetLastError();
    }
    return runner;
  }

  // One row per pass of the layer (the setup error on each, without a runner); whether all were timed.
  bool time_rows(const LayerRecipe& lr, Mode mode, LayerRunner* runner, const std::string& setup_error) {
    bool rows_ok = runner != nullptr;
    for (const char* pass_name : {"fprop", "dgrad", "wgrad"}) {
      auto it = lr.layer.by_pass.find(pass_name);
      if (it == lr.layer.by_pass.end()) continue;
      bench::Row row = bench::row_from_gemm(*it->second, lr.recipe, mode);
      if (runner == nullptr) {
        row.error = setup_error;
      } else {
        time_pass(*runner, pass_of(pass_name), mode, lr.run_recipe, row);
        rows_ok = rows_ok && row.ok();
      }
      result.rows.push_back(std::move(row));
    }
    return rows_ok;
  }

  // A pass's quantization (autocast modes, where the pass quantizes anything) and GEMM, timed apart, into
  // `row`; an exception becomes the row's error.
  void time_pass(LayerRunner& runner, Pass pass, Mode mode, const std::string& run_recipe, bench::Row& row) {
    time_runners({{&runner, 1}}, pass, mode, run_recipe, row);
  }

  // Each (runner, repeats) pair's work issued `repeats` times back to back, in order, as one timed
  // sequence per part of the pass (activation/gradient quantization, the weight's part of it, the GEMM):
  // one pair for a layer, one pair per distinct expert token count for grouped experts.
  void time_runners(const std::vector<std::pair<LayerRunner*, int64_t>>& runs, Pass pass, Mode mode,
                    const std::string& run_recipe, bench::Row& row) {
    try {
      int64_t step = 1;
      auto each = [&](const std::function<void(LayerRunner&, cudaStream_t)>& f) {
        return [&runs, f](cudaStream_t st, int) {
          for (const auto& [runner, repeats] : runs)
            for (int64_t e = 0; e < repeats; ++e) f(*runner, st);
        };
      };
      if (bench::is_autocast(mode)) {
        double qbytes = 0, wbytes = 0;
        for (const auto& [runner, repeats] : runs) {
          qbytes += runner->quant_bytes(pass, mode) * static_cast<double>(repeats);
          wbytes += runner->weight_quant_bytes(pass, mode) * static_cast<double>(repeats);
        }
        if (qbytes > 0)
          row.quant_ms =
              time_on_gpu(each([&](LayerRunner& r, cudaStream_t st) { r.quantize(pass, mode, step++, st); }), topt,
                          stream).median_ms;
        row.quant_bytes = qbytes;
        // The weight's part, timed apart, so gradient accumulation can count it once per optimizer step.
        row.weight_quant_bytes = wbytes;
        if (wbytes > 0)
          row.weight_quant_ms = std::min(  // a part of the pass, whatever the noise
              time_on_gpu(each([&](LayerRunner& r, cudaStream_t st) { r.quantize_weight(step++, st); }), topt, stream)
                  .median_ms,
              row.quant_ms);
        bench::amortise_weight_quant(row, options.grad_accum);
      }
      cuda::ExecutionPath path = cuda::ExecutionPath::native;
      const auto g =
          time_on_gpu(each([&](LayerRunner& r, cudaStream_t st) { path = r.gemm(pass, st); }), topt, stream);
      row.gemm = {g.median_ms, g.p10_ms, g.p90_ms, g.min_ms, g.max_ms, g.runs};
      row.path = std::string(cuda::to_string(path));
      bench::finish_row(row, peak_for(run_recipe, gpu_name));
    } catch (const std::exception& e) {
      row.error = e.what();
      cudaGetLastError();
    }
  }

  // Grouped routed experts under every recipe and mode: one runner (and one set of BF16 sources) per distinct
  // expert token count; each row's quantization and GEMM times are of all experts' work issued back to back.
  void time_grouped(const LinearLayer& layer) {
    std::vector<std::pair<int64_t, int64_t>> parts;  // (tokens, experts with that many)
    for (int64_t t : layer.group_tokens) {
      if (t <= 0) continue;  // an expert without tokens runs nothing
      auto it = std::find_if(parts.begin(), parts.end(), [t](const auto& p) { return p.first == t; });
      if (it == parts.end()) parts.push_back({t, 1});
      else ++it->second;
    }
    std::vector<LinearLayer> subs;
    subs.reserve(parts.size());
    for (const auto& [t, n] : parts) subs.push_back({layer.name, {t, layer.shape.i, layer.shape.o}, layer.by_pass, {}});
    std::vector<LayerSourceBuffers> srcs;
    try {
      for (const LinearLayer& sub : subs) srcs.push_back(allocate_sources(sub.shape, layer.name, stream));
    } catch (const OutOfMemory& e) {
      add_refused_layer(result, layer, options, e.what());
      return;
    }
    for (const std::string& recipe : options.recipes) {
      const LayerRecipe lr(layer, recipe);
      for (Mode mode : options.modes) {
        std::string setup_error = lr.shape_error;
        std::vector<std::unique_ptr<LayerRunner>> runners;
        if (setup_error.empty())
          for (size_t p = 0; p < subs.size() && setup_error.empty(); ++p) {
            const LayerRecipe sub_lr(subs[p], recipe);
            runners.push_back(prepare_runner(sub_lr, srcs[p], mode, setup_error));
          }
        std::vector<std::pair<LayerRunner*, int64_t>> runs;
        if (setup_error.empty())
          for (size_t p = 0; p < runners.size(); ++p) runs.push_back({runners[p].get(), parts[p].second});
        for (const char* pass_name : {"fprop", "dgrad", "wgrad"}) {
          const auto it = layer.by_pass.find(pass_name);
          if (it == layer.by_pass.end()) continue;
          bench::Row row = bench::row_from_gemm(*it->second, recipe, mode);
          row.moe_path = kGroupedMoePath;
          if (!setup_error.empty()) row.error = setup_error;
          else time_runners(runs, pass_of(pass_name), mode, lr.run_recipe, row);
          result.rows.push_back(std::move(row));
        }
      }
    }
    result.notes.push_back(layer.name + ": " + kGroupedMoePath + " (not timed as one sequence of passes)");
  }

  // The layer's passes back to back as one sequence; a failure becomes a note.
  void time_sequence(const LayerRecipe& lr, Mode mode, LayerRunner& runner) {
    const auto& s = lr.layer.shape;
    const bench::Row first = bench::row_from_gemm(*lr.layer.by_pass.begin()->second, lr.recipe, mode);
    try {
      result.sequences.push_back({first.layer, s.t, s.i, s.o, lr.recipe, mode, first.count, first.per_model,
                                  time_as_sequence(runner, lr.layer, mode, topt, stream)});
    } catch (const std::exception& e) {
      result.notes.push_back(lr.recipe + " " + lr.layer.name + " " + std::string(bench::to_string(mode)) +
                             ": not timed as one sequence (" + e.what() + ")");
      cudaGetLastError();
    }
  }
};

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
  const Stream stream;
  int device = 0;
  NIBBLE_CUDA_CHECK(cudaGetDevice(&device));
  ClockMonitor clocks(device);  // samples the SM clock, power and throttle reasons until the sweep ends

  bench::BenchResult result = result_header(workload, options, gpu, clocks.driver_version());
  const TimingOptions topt{options.warmup, options.warmup_ms, options.iters, options.flush_l2};
  measure_copy_reference(result, topt, stream.get());
  add_method_notes(result, options);

  const auto layers = linear_layers(workload);
  Sweep sweep{options, gpu.name, topt, stream.get(), result, {}};
  const double total_steps = static_cast<double>(layers.size() * options.recipes.size());
  double done = 0;
  for (const auto& layer : layers) {
    if (!layer.group_tokens.empty()) {
      sweep.time_grouped(layer);
      done += static_cast<double>(options.recipes.size());
      if (options.progress) options.progress(done / total_steps, layer.name + " grouped");
      continue;
    }
    LayerSourceBuffers src;
    try {
      src = allocate_sources(layer.shape, layer.name, stream.get());
    } catch (const OutOfMemory& e) {
      add_refused_layer(result, layer, options, e.what());
      continue;
    }
    for (const auto& recipe : options.recipes) {
      sweep.time_recipe(layer, src, recipe);
      done += 1;
      if (options.progress) options.progress(done / total_steps, layer.name + " " + recipe);
    }
  }
  add_memory_accounting(result, options, sweep.measured_bytes);
  bench::fill_bounds(result);
  result.clocks = clocks.stop();
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
