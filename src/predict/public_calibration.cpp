// Blackwell efficiencies and prediction intervals from public measurements
// (include/nibble/predict.hpp; method in docs/predict.md).
#include "nibble/predict.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "nibble/io/json_file.hpp"
#include "nibble/workload/model_config.hpp"

namespace nibble::predict {

namespace {

using nlohmann::json;
namespace json_fields = io::json_fields;
using json_fields::text;

double peak_for(const GpuSpec& gpu, const std::string& recipe) { return execution_for(recipe, gpu).peak_tflops; }

bool is_blackwell(const GpuSpec& gpu) { return gpu.compute_capability >= 100; }

double geomean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += std::log(x);
  return std::exp(s / static_cast<double>(v.size()));
}

struct Utilisation {
  const PublicPoint* point;
  const GpuSpec* gpu;
  double u;
};

std::vector<Utilisation> utilisations(const PublicData& data, const std::vector<GpuSpec>& gpus,
                                      const std::string& exclude_source) {
  std::vector<Utilisation> out;
  for (const PublicPoint& p : data.points) {
    if (p.source == exclude_source || !(p.model_tflops > 0)) continue;
    const GpuSpec& g = find_gpu(gpus, p.database_gpu);
    out.push_back({&p, &g, p.model_tflops / peak_for(g, p.recipe)});
  }
  return out;
}

}  // namespace

std::string blackwell_family(const std::string& recipe) {
  if (recipe == "fp8-current" || recipe == "fp8-delayed") return "fp8-tensor";
  if (recipe == "mxfp8" || recipe == "fp8-block") return "mx-native";
  if (recipe == "nvfp4" || recipe == "mxfp4" || recipe == "quartet") return "fp4-native";
  return recipe;  // bf16
}

PublicData load_public_data(const std::string& path) {
  const json j = io::read_json_file(path, "public calibration");
  PublicData d;
  const std::string file = fmt::format("public calibration '{}'", path);
  if (!j.contains("sources") || !j["sources"].is_array() || !j.contains("points") || !j["points"].is_array())
    throw std::invalid_argument(file + ": expected arrays 'sources' and 'points'");
  for (size_t i = 0; i < j["sources"].size(); ++i) {
    const json& s = j["sources"][i];
    const std::string w = fmt::format("{}: sources[{}]", file, i);
    d.sources.push_back({text(s, "id", w), text(s, "title", w), text(s, "url", w), text(s, "where", w)});
  }
  for (size_t i = 0; i < j["points"].size(); ++i) {
    const json& p = j["points"][i];
    const std::string w = fmt::format("{}: points[{}]", file, i);
    PublicPoint x;
    x.source = text(p, "source", w);
    if (std::none_of(d.sources.begin(), d.sources.end(), [&](const PublicSource& s) { return s.id == x.source; }))
      throw std::invalid_argument(fmt::format("{}.source: '{}' is not the id of an entry in 'sources'", w, x.source));
    x.gpu = text(p, "gpu", w);
    x.database_gpu = text(p, "database_gpu", w);
    x.peaks_proxy = json_fields::flag_or(p, "peaks_proxy", false, w);
    x.recipe = text(p, "recipe", w);
    x.model = text(p, "model", w);
    x.setup = json_fields::text_or(p, "setup", "", w);
    x.model_tflops = json_fields::number_or(p, "model_tflops_per_gpu", 0, w);
    x.tokens_per_s = json_fields::number_or(p, "tokens_per_s", 0, w);
    if (!(x.model_tflops > 0) && !(x.tokens_per_s > 0))
      throw std::invalid_argument(w + ": give model_tflops_per_gpu or tokens_per_s (a positive number)");
    d.points.push_back(std::move(x));
  }
  return d;
}

PublicData load_public_data() {
  return load_public_data((workload::data_dir() / "calibration" / kBlackwellPublicFile).string());
}

PublicFit fit_public(const PublicData& data, const std::vector<GpuSpec>& gpus, double h100_fp8_efficiency,
                     const std::string& exclude_source) {
  const auto us = utilisations(data, gpus, exclude_source);
  std::vector<double> hopper;
  std::map<std::string, std::vector<double>> by_family;
  for (const Utilisation& x : us) {
    if (!is_blackwell(*x.gpu)) {
      if (x.gpu->name == "H100 SXM" && blackwell_family(x.point->recipe) == "fp8-tensor") hopper.push_back(x.u);
      continue;
    }
    by_family[blackwell_family(x.point->recipe)].push_back(x.u);
  }
  if (hopper.empty())
    throw std::invalid_argument("public calibration: no H100 FP8 point with model_tflops_per_gpu left; the fit needs "
                                "one to tie the public numbers to nibble's measured H100 calibration");
  if (by_family.empty()) throw std::invalid_argument("public calibration: no Blackwell point with model_tflops_per_gpu left");
  PublicFit f;
  f.transfer = h100_fp8_efficiency / geomean(hopper);
  for (const auto& [family, u] : by_family) {
    f.efficiency[family] = f.transfer * geomean(u);
    f.points_per_family[family] = static_cast<int>(u.size());
  }
  // Leave one out: how far a family's efficiency carries to a point it was not fitted on.
  for (const Utilisation& x : us) {
    if (!is_blackwell(*x.gpu)) continue;
    std::vector<double> others;
    for (const Utilisation& y : us)
      if (&y != &x && is_blackwell(*y.gpu) && blackwell_family(y.point->recipe) == blackwell_family(x.point->recipe))
        others.push_back(y.u);
    if (others.empty()) continue;
    const double factor = geomean(others) / x.u;  // actual time / predicted time
    f.low = std::min(f.low, factor);
    f.high = std::max(f.high, factor);
    ++f.left_out_points;
  }
  f.notes.push_back(fmt::format(
      "Blackwell GEMM efficiencies from {} public whole-step measurements (data/calibration/{}), tied to the H100 "
      "measurement by a factor {:.2f}", us.size(), kBlackwellPublicFile, f.transfer));
  return f;
}

std::vector<HeldBackError> held_back_check(const PublicData& data, const std::vector<GpuSpec>& gpus,
                                           double h100_fp8_efficiency) {
  std::vector<HeldBackError> out;
  for (const PublicSource& s : data.sources) {
    const bool has_tflops = std::any_of(data.points.begin(), data.points.end(), [&](const PublicPoint& p) {
      return p.source == s.id && p.model_tflops > 0 && is_blackwell(find_gpu(gpus, p.database_gpu));
    });
    if (!has_tflops) continue;
    PublicFit f;
    try {
      f = fit_public(data, gpus, h100_fp8_efficiency, s.id);
    } catch (const std::invalid_argument&) {
      continue;  // nothing left to fit on without this source
    }
    for (const PublicPoint& p : data.points) {
      if (p.source != s.id || !(p.model_tflops > 0)) continue;
      const GpuSpec& g = find_gpu(gpus, p.database_gpu);
      const auto it = f.efficiency.find(blackwell_family(p.recipe));
      if (!is_blackwell(g) || it == f.efficiency.end()) continue;
      const double predicted = it->second / f.transfer * peak_for(g, p.recipe);
      out.push_back({s.id, p.gpu, p.recipe, p.model, p.model_tflops, predicted, predicted / p.model_tflops - 1});
    }
  }
  return out;
}

}  // namespace nibble::predict
