// The model flags shared by `nibble shapes` and `nibble bench`: one definition, so both commands take
// the same model the same way.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>

#include "nibble/workload/model_cli.hpp"
#include "nibble/workload/model_config.hpp"

namespace nibble::workload {
namespace {

// A config.json says nothing about the batch; this is the default a user can see in the output.
constexpr int64_t kHfDefaultMicroBatch = 1;
constexpr int64_t kHfDefaultSeqLen = 4096;

// A preset's source ends with the batch it comes with ("...; batch 1 x 8192 (its training context), an
// illustrative default"). Once --mbs or --seq sets the batch, that clause would contradict the output's
// header, so the batch the flags gave replaces it.
std::string with_flag_batch(const std::string& source, int64_t micro_batch, int64_t seq_len) {
  const size_t clause = source.find("; batch ");
  const std::string base = clause == std::string::npos ? source : source.substr(0, clause);
  return fmt::format("{}{}batch {} x {}", base, base.empty() ? "" : "; ", micro_batch, seq_len);
}

// A CLI11 check of a number: `accept` decides; text that is not a number fails here too.
CLI::Validator number_check(bool (*accept)(double), const char* wanted) {
  return CLI::Validator(
      [accept, wanted](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size()) return "'" + text + "' is not a number";
        return accept(v) ? std::string() : text + " is not " + wanted;
      },
      "NUMBER");
}

}  // namespace

CLI::Validator positive_number() {
  return number_check([](double v) { return v > 0; }, "a positive number");
}

CLI::Validator non_negative_number() {
  return number_check([](double v) { return v >= 0; }, "a number >= 0");
}

void add_model_options(CLI::App& app, ModelCliOptions& o) {
  // A value no model can have fails the parse (a usage error), before any file is read.
  const CLI::Validator known_preset(
      [](std::string& name) -> std::string {
        const auto names = list_presets();
        if (std::find(names.begin(), names.end(), name) != names.end()) return {};
        return fmt::format("unknown preset '{}': known presets are {} (or describe the model with --hf-config / "
                           "flags)", name, fmt::join(names, ", "));
      },
      "PRESET");
  app.add_option("--model", o.preset,
                 fmt::format("model preset from data/presets/ (default {} unless --hf-config is given)", kDefaultPreset))
      ->check(known_preset);
  app.add_option("--hf-config", o.hf_config, "Hugging Face config.json; overrides the preset's architecture");
  const auto positive = [&app](const char* name, std::optional<int64_t>& field, const char* help) {
    app.add_option(name, field, help)->check(positive_number());
  };
  const auto count = [&app](const char* name, std::optional<int64_t>& field, const char* help) {
    app.add_option(name, field, help)->check(non_negative_number());
  };
  positive("--hidden", o.hidden, "hidden size H");
  positive("--ffn", o.ffn, "MLP inner size F (dense)");
  positive("--heads", o.heads, "attention (query) heads");
  positive("--kv-heads", o.kv_heads, "key/value heads (GQA/MQA); default = heads");
  positive("--head-dim", o.head_dim, "head dimension; default = hidden / heads");
  positive("--layers", o.layers, "transformer blocks");
  positive("--vocab", o.vocab, "vocabulary size (LM head out_features)");
  app.add_flag_function("--gated,!--no-gated", [&o](int64_t count) { o.gated = count > 0; },
                        "gated MLP (SwiGLU/GeGLU): the up projection is gate+up, 2F wide");
  count("--experts", o.experts, "routed experts (mixture of experts); 0 = dense");
  positive("--top-k", o.top_k, "experts per token");
  positive("--moe-ffn", o.moe_ffn, "inner size of one routed expert; default = ffn");
  count("--shared-experts", o.shared_experts, "shared experts every token passes through");
  positive("--shared-ffn", o.shared_ffn, "inner size of one shared expert; default = moe-ffn");
  positive("--tp", o.tp, "tensor-parallel degree (shapes of one rank)");
  positive("--mbs", o.micro_batch, "micro batch (sequences)");
  positive("--seq", o.seq_len, "sequence length (tokens per sequence)");
}

void add_workload_options(CLI::App& app, WorkloadOptions& o) {
  app.add_flag("--lm-head", o.lm_head, "add the LM head GEMMs (once per model)");
  app.add_flag("--attention", o.attention, "add the BF16 attention score/value batched GEMMs");
  app.add_option("--token-imbalance", o.token_imbalance,
                 "MoE: max / mean tokens per expert, >= 1 (1: even). In whole 128-token units, one hot expert gets "
                 "about R x mean tokens, the others share the rest evenly (docs/workload.md)")
      ->check(CLI::Range(1.0, 1e9))
      ->capture_default_str();
}

bool any_model_option(const ModelCliOptions& o) {
  return !o.preset.empty() || !o.hf_config.empty() || o.hidden || o.ffn || o.heads || o.kv_heads || o.head_dim ||
         o.layers || o.vocab || o.gated || o.experts || o.top_k || o.moe_ffn || o.shared_experts || o.shared_ffn ||
         o.tp || o.micro_batch || o.seq_len;
}

ModelConfig resolve_model(const ModelCliOptions& o) {
  ModelConfig m;
  if (!o.preset.empty()) {
    m = load_preset(o.preset);
  } else if (o.hf_config.empty()) {
    m = load_preset(kDefaultPreset);
  } else {
    m.micro_batch = kHfDefaultMicroBatch;
    m.seq_len = kHfDefaultSeqLen;
  }
  if (!o.hf_config.empty()) {
    const bool default_batch = o.preset.empty();
    m = load_hf_config(o.hf_config, m);
    if (default_batch && !o.micro_batch && !o.seq_len)
      m.source += fmt::format(" (batch {} x {} is a default: set --mbs/--seq)", m.micro_batch, m.seq_len);
  }

  std::vector<std::string> changed;
  auto apply = [&changed](const auto& flag, auto& field, const char* name) {
    if (flag) {
      field = *flag;
      changed.emplace_back(name);
    }
  };
  apply(o.hidden, m.hidden, "--hidden");
  apply(o.ffn, m.ffn, "--ffn");
  apply(o.heads, m.heads, "--heads");
  apply(o.kv_heads, m.kv_heads, "--kv-heads");
  apply(o.head_dim, m.head_dim, "--head-dim");
  apply(o.layers, m.layers, "--layers");
  apply(o.vocab, m.vocab, "--vocab");
  apply(o.gated, m.gated, "--gated");
  apply(o.experts, m.experts, "--experts");
  apply(o.top_k, m.top_k, "--top-k");
  apply(o.moe_ffn, m.moe_ffn, "--moe-ffn");
  apply(o.shared_experts, m.shared_experts, "--shared-experts");
  apply(o.shared_ffn, m.shared_ffn, "--shared-ffn");
  // The architecture changed: the output must not carry the preset's name as if it were that model.
  if (!changed.empty()) m.name += " (modified)";
  apply(o.tp, m.tp, "--tp");
  apply(o.micro_batch, m.micro_batch, "--mbs");
  apply(o.seq_len, m.seq_len, "--seq");
  if (o.micro_batch || o.seq_len) m.source = with_flag_batch(m.source, m.micro_batch, m.seq_len);
  if (!changed.empty()) m.source += fmt::format("{}with flags {}", m.source.empty() ? "" : "; ", fmt::join(changed, " "));
  validate(m);
  return m;
}

}  // namespace nibble::workload
