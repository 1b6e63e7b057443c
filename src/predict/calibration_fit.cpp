// Calibration of the performance model: observations (measured times of known shapes) in a data
// file, and one efficiency factor per recipe family fitted to them by least squares.
#include "nibble/io/json_file.hpp"
#include "nibble/results/aggregate.hpp"
#include "nibble/predict.hpp"
#include "nibble/workload/model_config.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>

namespace nibble::predict {

namespace {

namespace json_fields = io::json_fields;

// bf16-decoded: the BF16 GEMMs of the exact-decode emulations (mxfp8, nvfp4 before sm_100): the same
// kernels as bf16 on decoded operands, whose many zero low mantissa bits run them 6-8% faster on the
// H200 (docs/predict.md), so they get their own efficiency (borrowed from bf16 when unobserved).
const std::vector<std::string> kFamilies = {"bf16", "bf16-decoded", "fp8-tensor", "fp8-block", "fp8-rowwise",
                                            "mx-native", "fp4-native"};

// The execution a family denotes on the GPU its observations were measured on.
Execution execution_of_family(const std::string& family, const GpuSpec& gpu) {
  if (family == "bf16" || family == "bf16-decoded") return {family, "", gpu.bf16_tflops, 2};
  if (family == "fp8-tensor" || family == "fp8-rowwise") return {family, "", gpu.fp8_tflops, 1};
  if (family == "fp8-block") return {family, "", gpu.fp8_tflops, 1 + 4.0 / 128};
  if (family == "mx-native") return {family, "", gpu.fp8_tflops, 1 + 1.0 / 32};
  if (family == "fp4-native") {
    if (gpu.fp4_tflops <= 0)
      throw std::invalid_argument(fmt::format("calibration: family fp4-native observed on {}, which has no "
                                              "native FP4; check the observation's family", gpu.name));
    return {family, "", gpu.fp4_tflops, 0.5 + 1.0 / 32};
  }
  throw std::invalid_argument(fmt::format("calibration: family '{}' is not one of: bf16, bf16-decoded, "
                                          "fp8-tensor, fp8-block, fp8-rowwise, mx-native, fp4-native", family));
}

double observation_ms(const Observation& o, const Execution& e, const GpuSpec& gpu, double eff) {
  double ms = 0;
  for (const Shape& s : o.gemms) ms += gemm_ms(s, e, gpu, eff) * double(s.count);
  return ms;
}

// Sum of squared relative errors of one family's observations at efficiency `eff`.
double loss(const std::vector<const Observation*>& obs, const Execution& e, const GpuSpec& gpu, double eff) {
  double sum = 0;
  for (const Observation* o : obs) {
    const double r = observation_ms(*o, e, gpu, eff) / o->ms - 1;
    sum += r * r;
  }
  return sum;
}

// Golden-section search: the loss is unimodal in eff (time falls as 1/eff until memory-bound,
// where it is flat).
double minimize(const std::vector<const Observation*>& obs, const Execution& e, const GpuSpec& gpu) {
  double lo = 0.02, hi = 2.0;
  const double g = (std::sqrt(5.0) - 1) / 2;
  for (int i = 0; i < 200 && hi - lo > 1e-9; ++i) {
    const double a = hi - g * (hi - lo), b = lo + g * (hi - lo);
    if (loss(obs, e, gpu, a) < loss(obs, e, gpu, b)) hi = b;
    else lo = a;
  }
  return (lo + hi) / 2;
}

Shape shape_from_json(const nlohmann::json& j, const std::string& where) {
  json_fields::require_object(j, where);
  Shape s;
  for (auto [key, slot] : {std::pair{"m", &s.m}, std::pair{"k", &s.k}, std::pair{"n", &s.n}}) {
    if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<int64_t>() <= 0)
      throw std::invalid_argument(fmt::format("{}.{}: missing or not a positive integer", where, key));
    *slot = j[key].get<int64_t>();
  }
  s.count = json_fields::count_or(j, "count", 1, where);
  return s;
}

}  // namespace

void fit(Calibration& c, const GpuSpec& gpu) {
  c.efficiency.clear();
  c.notes.clear();
  for (const std::string& family : kFamilies) {
    std::vector<const Observation*> obs;
    for (const auto& o : c.observations)
      if (o.family == family) obs.push_back(&o);
    if (!obs.empty()) c.efficiency[family] = minimize(obs, execution_of_family(family, gpu), gpu);
  }
  for (const auto& o : c.observations) execution_of_family(o.family, gpu);  // rejects unknown families
  if (!c.efficiency.count("bf16") && !c.efficiency.count("fp8-tensor"))
    throw std::invalid_argument(fmt::format("calibration '{}': needs observations of bf16 or fp8-tensor GEMMs",
                                            c.label));
  for (const std::string& family : kFamilies) {
    if (c.efficiency.count(family)) continue;
    // BF16 kinds borrow from bf16, the others from fp8-tensor; either falls back to the one fitted.
    const bool bf16_kind = family == "bf16" || family == "bf16-decoded";
    const bool use_bf16 = c.efficiency.count("bf16") && (bf16_kind || !c.efficiency.count("fp8-tensor"));
    const std::string from = use_bf16 ? "bf16" : "fp8-tensor";
    c.efficiency[family] = c.efficiency[from];
    c.notes.push_back(fmt::format("{}: no observation; efficiency borrowed from {}", family, from));
  }
}

double efficiency_of(const Calibration& c, const std::string& family) {
  auto it = c.efficiency.find(family);
  if (it == c.efficiency.end())
    throw std::logic_error(fmt::format("calibration '{}' has no efficiency for '{}': call fit() first", c.label, family));
  return it->second;
}

Calibration load_calibration(const std::string& path) {
  const nlohmann::json j = io::read_json_file(path, "calibration file");
  const std::string top = fmt::format("calibration '{}'", path);
  json_fields::require_object(j, top);
  Calibration c;
  c.label = json_fields::text_or(j, "label", path, top);
  c.gpu = json_fields::text_or(j, "gpu", "", top);
  c.quant_bandwidth_fraction = json_fields::number_or(j, "quant_bandwidth_fraction", 0.95, top);
  if (!(c.quant_bandwidth_fraction > 0 && std::isfinite(c.quant_bandwidth_fraction)))
    throw std::invalid_argument(fmt::format("{}.quant_bandwidth_fraction: {} must be a positive fraction of the "
                                            "copy bandwidth", top, c.quant_bandwidth_fraction));
  std::map<std::string, std::vector<Shape>> sets;
  const nlohmann::json shape_sets = j.contains("shape_sets") ? j["shape_sets"] : nlohmann::json::object();
  json_fields::require_object(shape_sets, top + ".shape_sets");
  for (auto& [name, list] : shape_sets.items()) {
    if (!list.is_array())
      throw std::invalid_argument(fmt::format("{}.shape_sets.{}: must be an array of {{m, k, n}} shapes", top, name));
    for (size_t i = 0; i < list.size(); ++i)
      sets[name].push_back(shape_from_json(list[i], fmt::format("{}: shape_sets.{}[{}]", path, name, i)));
  }
  if (!j.contains("observations") || !j["observations"].is_array())
    throw std::invalid_argument(fmt::format("calibration '{}': missing the \"observations\" array", path));
  for (size_t i = 0; i < j["observations"].size(); ++i) {
    const auto& o = j["observations"][i];
    const std::string where = fmt::format("{}: observations[{}]", path, i);
    json_fields::require_object(o, where);
    Observation ob;
    ob.family = json_fields::text_or(o, "family", "", where);
    ob.what = json_fields::text_or(o, "what", "", where);
    ob.ms = json_fields::number_or(o, "ms", 0.0, where);
    if (!(ob.ms > 0)) throw std::invalid_argument(where + ".ms: must be a positive time in ms");
    if (o.contains("shapes") && o["shapes"].is_string()) {
      auto it = sets.find(o["shapes"].get<std::string>());
      if (it == sets.end())
        throw std::invalid_argument(fmt::format("{}.shapes: no shape set named '{}'", where, o["shapes"].get<std::string>()));
      ob.gemms = it->second;
    } else if (o.contains("gemms") && o["gemms"].is_array()) {
      for (size_t g = 0; g < o["gemms"].size(); ++g)
        ob.gemms.push_back(shape_from_json(o["gemms"][g], fmt::format("{}.gemms[{}]", where, g)));
    } else {
      throw std::invalid_argument(where + ": needs \"shapes\" (a shape set name) or \"gemms\"");
    }
    c.observations.push_back(std::move(ob));
  }
  const auto gpus = load_gpu_database();
  fit(c, find_gpu(gpus, c.gpu));
  return c;
}

// A measured H200 result (nibble bench --json, kept in data/calibration/) when present;
// otherwise the docs/spec.md §8 reference numbers.
Calibration default_calibration() {
  static const Calibration c = [] {
    const auto measured = workload::data_dir() / "calibration" / kMeasuredCalibrationFile;
    if (std::ifstream(measured).good()) {
      const bench::BenchResult r = bench::read_result_file(measured.string());
      return calibration_from_result(r, find_gpu(load_gpu_database(), r.gpu.name));
    }
    return load_calibration((workload::data_dir() / "calibration" / "h200-spec-reference.json").string());
  }();
  return c;
}

Calibration calibration_for(const std::string& gpu) {
  static std::map<std::string, Calibration> fitted;  // the CLI is single-threaded; tests call it in turn
  if (const auto it = fitted.find(gpu); it != fitted.end()) return it->second;
  for (const auto& m : kMeasuredCalibrationFiles) {
    if (gpu != m.gpu) continue;
    const auto path = workload::data_dir() / "calibration" / m.file;
    if (!std::ifstream(path).good()) break;
    const bench::BenchResult r = bench::read_result_file(path.string());
    const auto gpus = load_gpu_database();
    const GpuSpec& spec = find_gpu(gpus, r.gpu.name);
    if (spec.name != gpu)
      throw std::logic_error(fmt::format("data/calibration/{} was measured on {}, not on {}", m.file, spec.name, gpu));
    return fitted.emplace(gpu, calibration_from_result(r, spec)).first->second;
  }
  return fitted.emplace(gpu, default_calibration()).first->second;
}

Calibration calibration_from_result(const bench::BenchResult& measured, const GpuSpec& gpu) {
  if (measured.predicted)
    throw std::invalid_argument("the calibration result is itself a prediction (no measured time in it); calibrate on "
                                "a measured `nibble bench --json` file");
  Calibration c;
  c.label = fmt::format("measured: {} {} ({})", measured.gpu.name, measured.date, measured.command_line);
  c.gpu = gpu.name;
  double bytes = 0, seconds = 0;
  std::map<std::string, std::pair<double, double>> per_recipe;  // model bytes, measured seconds
  std::set<std::string> skipped;
  for (const auto& r : measured.rows) {
    if (!r.ok()) continue;
    std::string family;
    try {
      family = execution_for(r.recipe, gpu).family;
    } catch (const std::invalid_argument&) {
      skipped.insert(r.recipe);  // a recipe variant the model does not know: not a calibration point
      continue;
    }
    // The exact-decode emulations (mxfp8, nvfp4) fit their own family, bf16-decoded (see kFamilies),
    // so they neither pull the BF16 baseline's efficiency up nor inherit it.
    if (r.mode == bench::Mode::pre_quantized && r.gemm.median_ms > 0)
      c.observations.push_back({family, {{r.m, r.k, r.n, 1}}, r.gemm.median_ms,
                                fmt::format("{} {} {} {}x{}x{}", r.recipe, r.layer, r.pass, r.m, r.k, r.n)});
    if (bench::is_autocast(r.mode) && r.quant_ms > 0) {
      // The model's byte count (what a prediction divides by the bandwidth), not the engine's.
      const double b = quant_bytes(r.recipe, r.pass, r.mode, Shape{r.m, r.k, r.n, 1}, gpu) * double(r.count);
      const double t = r.quant_ms * 1e-3 * double(r.count);
      bytes += b;
      seconds += t;
      per_recipe[r.recipe].first += b;
      per_recipe[r.recipe].second += t;
    }
  }
  const double copy = measured.copy_bandwidth_gbs > 0 ? measured.copy_bandwidth_gbs : gpu.copy_bandwidth_gbs();
  if (seconds > 0) c.quant_bandwidth_fraction = bytes / seconds / (copy * 1e9);
  for (const auto& [recipe, bt] : per_recipe)
    if (bt.second > 0 && bt.first > 0) c.quant_fraction_by_recipe[recipe] = bt.first / bt.second / (copy * 1e9);
  fit(c, gpu);
  for (const auto& r : skipped) c.notes.push_back(fmt::format("recipe '{}' skipped: not in the model", r));
  return c;
}

}  // namespace nibble::predict
