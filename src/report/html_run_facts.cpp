// The model and the run as small fact tables: only what the result knows (a prediction has no driver,
// a dense model no experts).
#include "html_parts.hpp"
#include "html_table.hpp"
#include "svg_charts.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace nibble::report::html {

using bench::BenchResult;
using svg::escape_xml;

namespace {

// A field of the model's JSON as text: numbers and strings as they are, true as "yes"; false, null and
// absent fields as "" (left out).
std::string field_text(const nlohmann::json& c, const char* key) {
  if (!c.is_object() || !c.contains(key)) return "";
  const auto& v = c[key];
  if (v.is_string()) return escape_xml(v.get<std::string>());
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "";
  if (v.is_number()) return v.dump();
  return "";
}

std::string tb_per_s(double gbs) { return gbs > 0 ? fmt::format("{:.2f} TB/s", gbs / 1000) : ""; }

}  // namespace

std::string model_name(const BenchResult& r) {
  const auto& m = r.model;
  for (const nlohmann::json* c : {m.is_object() && m.contains("model") ? &m["model"] : nullptr, &m})
    if (c && c->is_object() && c->contains("name") && (*c)["name"].is_string()) return (*c)["name"].get<std::string>();
  return "model";
}

std::string model_facts(const BenchResult& r) {
  const auto& m = r.model;
  const nlohmann::json c = m.is_object() && m.contains("model") ? m["model"] : nlohmann::json::object();
  const std::string name = escape_xml(model_name(r));
  const bool moe = c.is_object() && c.contains("experts") && c["experts"].is_number() && c["experts"].get<double>() > 0;
  const bool tp = c.is_object() && c.contains("tp") && c["tp"].is_number() && c["tp"].get<double>() > 1;
  std::vector<std::pair<std::string, std::string>> facts{
      {"name", name},
      {"layers", fmt::format("{}", r.layers)},
      {"hidden", field_text(c, "hidden")},
      {"heads", field_text(c, "heads")},
      {"kv heads", field_text(c, "kv_heads")},
      {"head dim", field_text(c, "head_dim")},
      {"ffn", field_text(c, "ffn")},
      {"gated MLP", field_text(c, "gated")},
      {"activation", field_text(c, "activation")},
      {"vocab", field_text(c, "vocab")},
      {"experts", moe ? field_text(c, "experts") : ""},
      {"experts per token", moe ? field_text(c, "top_k") : ""},
      {"expert ffn", moe ? field_text(c, "moe_ffn") : ""},
      {"shared experts", moe ? field_text(c, "shared_experts") : ""},
      {"tensor parallel", tp ? field_text(c, "tp") : ""},
      {"micro-batch", field_text(c, "micro_batch")},
      {"sequence length", field_text(c, "seq_len")},
      {"tokens per micro-batch", fmt::format("{}", r.tokens)},
      {"source", field_text(c, "source")},
  };
  return facts_table(facts, "Model");
}

std::string run_facts(const BenchResult& r) {
  const auto& g = r.gpu;
  std::vector<std::pair<std::string, std::string>> facts{
      {"GPU", escape_xml(g.name) + (r.predicted ? " (PREDICTED, no measurement)" : "")},
      {"SMs", g.sm_count > 0 ? fmt::format("{}", g.sm_count) : ""},
      {"compute capability", g.compute_capability > 0 ? fmt::format("sm_{}", g.compute_capability) : ""},
      {"peak memory bandwidth", tb_per_s(g.memory_bandwidth_gbs)},
      {"copy bandwidth",
       r.copy_bandwidth_gbs > 0 ? tb_per_s(r.copy_bandwidth_gbs) + (r.predicted ? " (assumed)" : " (measured)") : ""},
      {"driver", escape_xml(g.driver_version)},
      {"CUDA", escape_xml(g.cuda_version)},
      {"cuBLASLt", escape_xml(g.cublaslt_version)},
      {"date", escape_xml(r.date)},
      {"command", r.command_line.empty() ? "" : "<code>" + escape_xml(r.command_line) + "</code>"},
      {"baseline", escape_xml(r.baseline_recipe)},
      {"sweeps", r.sweeps > 1 ? fmt::format("{} (each row the median over the sweeps)", r.sweeps) : ""},
      {"gradient accumulation", r.grad_accum > 1 ? fmt::format("{} micro-batches per step", r.grad_accum) : ""},
      {"kept in BF16", r.layer_plan.bf16_blocks() > 0 ? escape_xml(bench::to_string(r.layer_plan)) : ""},
      {"prediction interval", r.interval.present() ? escape_xml(r.interval.method) : ""},
  };
  std::string out = facts_table(facts, "Run");
  if (!r.predicted) out += "<p class=note>" + escape_xml(bench::clock_header(r.clocks)) + "</p>\n";
  return out;
}

}  // namespace nibble::report::html
