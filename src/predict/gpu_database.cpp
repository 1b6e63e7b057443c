// The GPU database (data/gpus.json): datasheet peaks, bandwidth, SMs, with sources.
#include "nibble/io/json_file.hpp"
#include "nibble/predict.hpp"
#include "nibble/workload/model_config.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cctype>
#include <stdexcept>

namespace nibble::predict {

namespace {

namespace json_fields = io::json_fields;

double positive(const nlohmann::json& g, const char* key, const std::string& where, bool allow_zero = false) {
  const double v = json_fields::number(g, key, where);
  if (v < 0 || (!allow_zero && v == 0))
    throw std::invalid_argument(fmt::format("{}.{}: {} must be {}", where, key, v, allow_zero ? ">= 0" : "> 0"));
  return v;
}

std::string squash(std::string_view s) {
  std::string out;
  for (char c : s)
    if (c != ' ' && c != '-' && c != '_') out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::vector<GpuSpec> load_gpu_database(const std::string& path) {
  const nlohmann::json j = io::read_json_file(path, "GPU database");
  if (!j.contains("gpus") || !j["gpus"].is_array())
    throw std::invalid_argument(fmt::format("GPU database '{}': missing the \"gpus\" array", path));
  std::vector<GpuSpec> out;
  for (size_t i = 0; i < j["gpus"].size(); ++i) {
    const auto& g = j["gpus"][i];
    const std::string where = fmt::format("{}: gpus[{}]", path, i);
    json_fields::require_object(g, where);
    GpuSpec s;
    s.name = json_fields::text_or(g, "name", "", where);
    if (s.name.empty()) throw std::invalid_argument(where + ".name: missing");
    if (g.contains("device_names")) {
      const auto& names = g["device_names"];
      if (!names.is_array())
        throw std::invalid_argument(where + ".device_names: must be an array of strings (the CUDA runtime's names)");
      for (size_t k = 0; k < names.size(); ++k) {
        if (!names[k].is_string() || names[k].get<std::string>().empty())
          throw std::invalid_argument(fmt::format("{}.device_names[{}]: must be a non-empty string", where, k));
        s.device_names.push_back(names[k].get<std::string>());
      }
    }
    s.arch = json_fields::text_or(g, "arch", "", where);
    s.compute_capability = json_fields::whole_number(g, "compute_capability", 1000, where);
    s.sm_count = json_fields::whole_number(g, "sm_count", 1 << 20, where);
    s.boost_clock_mhz = positive(g, "boost_clock_mhz", where);
    s.memory_gb = positive(g, "memory_gb", where);
    s.memory_bandwidth_gbs = positive(g, "memory_bandwidth_gbs", where);
    s.bf16_tflops = positive(g, "bf16_tflops", where);
    s.fp8_tflops = positive(g, "fp8_tflops", where);
    s.fp4_tflops = positive(g, "fp4_tflops", where, true);
    s.tile_m = json_fields::whole_number(g, "tile_m", 1 << 16, where);
    s.tile_n = json_fields::whole_number(g, "tile_n", 1 << 16, where);
    s.copy_fraction = positive(g, "copy_fraction", where);
    s.source = json_fields::text_or(g, "source", "", where);
    if (s.source.empty()) throw std::invalid_argument(where + ".source: every entry must cite its datasheet");
    out.push_back(s);
  }
  return out;
}

std::vector<GpuSpec> load_gpu_database() { return load_gpu_database((workload::data_dir() / "gpus.json").string()); }

const GpuSpec& find_gpu(const std::vector<GpuSpec>& gpus, std::string_view name) {
  for (const auto& g : gpus)
    if (squash(g.name) == squash(name)) return g;
  for (const auto& g : gpus)
    for (const auto& d : g.device_names)
      if (squash(d) == squash(name)) return g;
  // What the CUDA runtime reports: "NVIDIA H200" is the SXM part ("NVIDIA H200 NVL" the NVL one).
  std::string_view bare = name;
  if (bare.rfind("NVIDIA ", 0) == 0) bare.remove_prefix(7);
  if (bare.rfind("GeForce ", 0) == 0) bare.remove_prefix(8);
  for (const std::string& candidate : {std::string(bare), std::string(bare) + " SXM"})
    for (const auto& g : gpus)
      if (squash(g.name) == squash(candidate)) return g;
  std::string known;
  for (const auto& g : gpus) known += (known.empty() ? "" : ", ") + g.name;
  throw std::invalid_argument(fmt::format("GPU '{}' is not in the database; known GPUs: {}", name, known));
}

}  // namespace nibble::predict
