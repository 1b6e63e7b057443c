// The model flags shared by `nibble shapes` and `nibble bench`: one definition, so both commands take
// the same model the same way.
#include <fmt/format.h>

#include "nibble/workload/model_cli.hpp"
#include "nibble/workload/model_config.hpp"

namespace nibble::workload {
namespace {

// A config.json says nothing about the batch; this is the default a user can see in the output.
constexpr int64_t kHfDefaultMicroBatch = 1;
constexpr int64_t kHfDefaultSeqLen = 4096;

}  // namespace

void add_model_options(CLI::App& app, ModelCliOptions& o) {
  app.add_option("--model", o.preset,
                 fmt::format("model preset from data/presets/ (default {} unless --hf-config is given)", kDefaultPreset));
  app.add_option("--hf-config", o.hf_config, "Hugging Face config.json; overrides the preset's architecture");
  app.add_option("--hidden", o.hidden, "hidden size H");
  app.add_option("--ffn", o.ffn, "MLP inner size F (dense)");
  app.add_option("--heads", o.heads, "attention (query) heads");
  app.add_option("--kv-heads", o.kv_heads, "key/value heads (GQA/MQA); default = heads");
  app.add_option("--head-dim", o.head_dim, "head dimension; default = hidden / heads");
  app.add_option("--layers", o.layers, "transformer blocks");
  app.add_option("--vocab", o.vocab, "vocabulary size (LM head out_features)");
  app.add_flag_function("--gated,!--no-gated", [&o](int64_t count) { o.gated = count > 0; },
                        "gated MLP (SwiGLU/GeGLU): the up projection is gate+up, 2F wide");
  app.add_option("--experts", o.experts, "routed experts (mixture of experts); 0 = dense");
  app.add_option("--top-k", o.top_k, "experts per token");
  app.add_option("--moe-ffn", o.moe_ffn, "inner size of one routed expert; default = ffn");
  app.add_option("--shared-experts", o.shared_experts, "shared experts every token passes through");
  app.add_option("--shared-ffn", o.shared_ffn, "inner size of one shared expert; default = moe-ffn");
  app.add_option("--tp", o.tp, "tensor-parallel degree (shapes of one rank)");
  app.add_option("--mbs", o.micro_batch, "micro batch (sequences)");
  app.add_option("--seq", o.seq_len, "sequence length (tokens per sequence)");
}

void add_workload_options(CLI::App& app, WorkloadOptions& o) {
  app.add_flag("--lm-head", o.lm_head, "add the LM head GEMMs (once per model)");
  app.add_flag("--attention", o.attention, "add the BF16 attention score/value batched GEMMs");
  app.add_option("--token-imbalance", o.token_imbalance,
                 "MoE: max / mean tokens per expert, >= 1 (1: even). In whole 128-token units, one hot expert gets "
                 "about R x mean tokens, the others share the rest evenly (docs/workload.md)")
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
  if (!changed.empty()) m.source += fmt::format("{}with flags {}", m.source.empty() ? "" : "; ", fmt::join(changed, " "));
  validate(m);
  return m;
}

}  // namespace nibble::workload
