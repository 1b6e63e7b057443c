// Model -> GEMM list (docs/spec.md §5), and its renderings (at the end). Each linear layer
// (in_features I, out_features O, tokens T) contributes fprop {T, I, O}, dgrad {T, O, I} and wgrad
// {I, T, O}; everything else here is deciding I, O, T and count for each layer of the block.
#include <fmt/format.h>

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "nibble/workload/gemm_list.hpp"

namespace nibble::workload {
namespace {

int64_t checked_mul(int64_t a, int64_t b, const std::string& what) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out))
    throw std::overflow_error(fmt::format("{} overflows a 64-bit integer ({} x {}): the shape is too large to count "
                                          "in FLOPs; reduce the batch or the model sizes", what, a, b));
  return out;
}

int64_t checked_add(int64_t a, int64_t b, const std::string& what) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out))
    throw std::overflow_error(fmt::format("{} overflows a 64-bit FLOP count: reduce the batch, layers or model sizes",
                                          what));
  return out;
}

int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

struct Linear {
  std::string layer;
  std::string role;
  int64_t tokens, in, out, count;
  bool per_model = false;
  std::vector<int64_t> group_tokens = {};
};

void append_passes(std::vector<Gemm>& gemms, const Linear& l) {
  const Gemm fprop{l.layer, "fprop", l.tokens, l.in, l.out, l.count, l.role, l.per_model};
  const Gemm dgrad{l.layer, "dgrad", l.tokens, l.out, l.in, l.count, l.role, l.per_model};
  const Gemm wgrad{l.layer, "wgrad", l.in, l.tokens, l.out, l.count, l.role, l.per_model};
  for (Gemm g : {fprop, dgrad, wgrad}) {
    g.group_tokens = l.group_tokens;
    (void)g.flops_exact();  // reject overflowing shapes here, once, rather than wrap later
    gemms.push_back(g);
  }
}

void add_totals(FlopTotals& t, const Gemm& g, int64_t times) {
  const int64_t f = checked_mul(g.flops_exact(), times, "FLOPs of " + g.layer + " " + g.pass);
  int64_t& slot = g.pass == "fprop" ? t.fprop : (g.pass == "dgrad" ? t.dgrad : t.wgrad);
  slot = checked_add(slot, f, "total FLOPs of " + g.pass);
  (void)checked_add(checked_add(t.fprop, t.dgrad, "total FLOPs"), t.wgrad, "total FLOPs");
}

}  // namespace

int64_t Gemm::flops_exact() const {
  const std::string what = fmt::format("FLOPs of {} {} ({} x {} x {} x {})", layer, pass, m, k, n, count);
  return checked_mul(checked_mul(checked_mul(checked_mul(2, m, what), k, what), n, what), count, what);
}

bool is_block_linear(std::string_view layer) {
  return layer == "qkv" || layer == "attn_out" || layer == "mlp_up" || layer == "mlp_down";
}

FlopTotals Workload::layer_totals() const {
  FlopTotals t;
  for (const Gemm& g : gemms)
    if (!g.per_model) add_totals(t, g, 1);
  return t;
}

FlopTotals Workload::model_totals() const {
  FlopTotals t;
  for (const Gemm& g : gemms) add_totals(t, g, g.per_model ? 1 : layers);
  return t;
}

Workload derive_workload(const ModelConfig& model, const WorkloadOptions& options) {
  validate(model);
  Workload w;
  w.model = model;
  w.tokens = model.tokens();
  w.layers = model.layers;
  const int64_t T = w.tokens;
  const int64_t H = model.hidden;
  const int64_t tp = model.tp;
  const int64_t hd = model.effective_head_dim();
  const int64_t kv = model.effective_kv_heads();
  // Q is heads*head_dim wide, which equals H only when head_dim = H/heads (Gemma-style models differ).
  const int64_t q_width = checked_mul(model.heads, hd, "heads x head_dim");
  const int64_t qkv_out =
      checked_add(q_width, checked_mul(2, checked_mul(kv, hd, "kv_heads x head_dim"), "2 x kv width"), "qkv width");
  const int64_t up_mult = model.gated ? 2 : 1;  // fused gate+up for SwiGLU/GeGLU

  if (!model.is_moe() && options.token_imbalance != 1)
    throw std::invalid_argument(fmt::format(
        "--token-imbalance {}: the model has no routed experts (a dense model); drop the option or give --experts",
        options.token_imbalance));
  std::vector<Linear> linears;
  // Column-parallel QKV and MLP up split O; row-parallel attention output and MLP down split I.
  linears.push_back({"qkv", "dense", T, H, qkv_out / tp, 1});
  if (options.attention) {
    // Per (sequence, head) batched GEMMs, read as linear layers so the three passes follow the same
    // convention: scores S = Q K^T is "X = Q (seq x head_dim), W = K (seq x head_dim)", values
    // O = P V is "X = P (seq x seq), W = V^T (head_dim x seq)"; wgrad then yields dK^T and dV.
    const int64_t batch_heads = checked_mul(model.micro_batch, model.heads / tp, "micro_batch x heads");
    linears.push_back({"attn_scores", "attention", model.seq_len, hd, model.seq_len, batch_heads});
    linears.push_back({"attn_values", "attention", model.seq_len, model.seq_len, hd, batch_heads});
  }
  linears.push_back({"attn_out", "dense", T, q_width / tp, H, 1});
  if (model.is_moe()) {
    const ExpertTokens d = distribute_expert_tokens(T, model.top_k, model.experts, options.token_imbalance);
    w.expert_tokens = d;
    w.moe_path = options.moe_path;
    const int64_t eff = model.effective_moe_ffn();
    if (options.moe_path == MoePath::grouped) {
      const int64_t total = d.padded_total();
      linears.push_back({"mlp_up", "expert", total, H, up_mult * eff / tp, 1, false, d.padded});
      linears.push_back({"mlp_down", "expert", total, eff / tp, H, 1, false, d.padded});
    } else {
      // One entry per distinct (padded) token count, largest first; experts that receive no token run nothing.
      std::vector<int64_t> counts = d.padded;
      std::sort(counts.rbegin(), counts.rend());
      for (size_t i = 0; i < counts.size();) {
        size_t j = i;
        while (j < counts.size() && counts[j] == counts[i]) ++j;
        if (counts[i] > 0) {
          const auto n = static_cast<int64_t>(j - i);
          linears.push_back({"mlp_up", "expert", counts[i], H, up_mult * eff / tp, n});
          linears.push_back({"mlp_down", "expert", counts[i], eff / tp, H, n});
        }
        i = j;
      }
    }
    w.notes.push_back(fmt::format("MoE routed tokens, {}; {}", describe(d),
                                  options.moe_path == MoePath::grouped
                                      ? "grouped: each expert layer is one grouped unit over all experts"
                                      : "per-expert: one GEMM per expert, launched one after another"));
    w.notes.push_back("MoE: every layer is taken as an MoE layer; the router GEMM (hidden x experts) is not listed");
    if (model.shared_experts > 0) {
      const int64_t sf = model.effective_shared_ffn();
      linears.push_back({"mlp_up", "shared_expert", T, H, up_mult * sf / tp, model.shared_experts});
      linears.push_back({"mlp_down", "shared_expert", T, sf / tp, H, model.shared_experts});
    }
  } else {
    linears.push_back({"mlp_up", "dense", T, H, up_mult * model.ffn / tp, 1});
    linears.push_back({"mlp_down", "dense", T, model.ffn / tp, H, 1});
  }
  if (options.lm_head) {
    // Column-parallel over the vocabulary; frameworks pad the vocabulary to a multiple of tp.
    const int64_t vocab_per_rank = ceil_div(model.vocab, tp);
    linears.push_back({"lm_head", "lm_head", T, H, vocab_per_rank, 1, true});
    if (model.vocab % tp != 0)
      w.notes.push_back(fmt::format("lm_head: vocab {} padded to {} for tp {}", model.vocab, vocab_per_rank * tp, tp));
  }
  if (options.attention)
    w.notes.push_back("attention score/value GEMMs stay BF16 in every recipe and are counted dense (causal masking "
                      "and FlashAttention tiling are not modelled)");
  if (tp > 1)
    w.notes.push_back(fmt::format("shapes are one tensor-parallel rank's of tp {}; sequence parallelism does not "
                                  "change them", tp));

  for (const Linear& l : linears) append_passes(w.gemms, l);
  (void)w.model_totals();  // the model-level sums must fit as well
  return w;
}

}  // namespace nibble::workload

// The three renderings of a GEMM list: JSON (read by later tools), CSV, and a terminal table.
namespace nibble::workload {
namespace {

nlohmann::json totals_json(const FlopTotals& t) {
  return {{"fprop", t.fprop}, {"dgrad", t.dgrad}, {"wgrad", t.wgrad}, {"total", t.total()}};
}

std::string tflop(int64_t flops) { return fmt::format("{:.2f}", static_cast<double>(flops) * 1e-12); }

}  // namespace

nlohmann::json to_json(const Workload& w) {
  nlohmann::json gemms = nlohmann::json::array();
  for (const Gemm& g : w.gemms) {
    gemms.push_back({{"layer", g.layer}, {"pass", g.pass}, {"m", g.m}, {"k", g.k}, {"n", g.n},
                     {"count", g.count}, {"flops", g.flops_exact()}, {"role", g.role},
                     {"per_model", g.per_model}, {"block_linear", is_block_linear(g.layer)}});
    if (!g.group_tokens.empty()) gemms.back()["group_tokens"] = g.group_tokens;
  }
  const FlopTotals layer = w.layer_totals();
  FlopTotals per_model_only;
  for (const Gemm& g : w.gemms) {
    if (!g.per_model) continue;
    int64_t& slot = g.pass == "fprop" ? per_model_only.fprop : (g.pass == "dgrad" ? per_model_only.dgrad : per_model_only.wgrad);
    slot += g.flops_exact();  // bounded by model_totals(), which derive_workload checked
  }
  nlohmann::json out = {{"tokens", w.tokens},
          {"layers", w.layers},
          {"model", to_json(resolved(w.model))},
          {"gemms", gemms},
          {"totals", {{"per_layer", totals_json(layer)},
                      {"once_per_model", totals_json(per_model_only)},
                      {"per_model", totals_json(w.model_totals())}}},
          {"notes", w.notes}};
  if (w.is_moe()) {
    out["moe"] = to_json(w.expert_tokens);
    out["moe"]["path"] = to_string(w.moe_path);
  }
  return out;
}

std::string to_csv(const Workload& w) {
  std::string out = "layer,pass,m,k,n,count,flops,role,per_model\n";
  for (const Gemm& g : w.gemms)
    out += fmt::format("{},{},{},{},{},{},{},{},{}\n", g.layer, g.pass, g.m, g.k, g.n, g.count, g.flops_exact(), g.role,
                       g.per_model ? 1 : 0);
  return out;
}

std::string to_table(const Workload& w) {
  const FlopTotals layer = w.layer_totals();
  const FlopTotals model = w.model_totals();
  std::string out = describe(w.model) + "\n";
  if (!w.model.source.empty()) out += "source: " + w.model.source + "\n";
  out += "\n";
  out += fmt::format("{:<12} {:<14} {:<6} {:>8} {:>8} {:>8} {:>6} {:>10} {:>7}\n", "layer", "role", "pass", "M", "K",
                     "N", "count", "GFLOP", "share");
  const double layer_total = static_cast<double>(layer.total());
  for (const Gemm& g : w.gemms) {
    const std::string share =
        g.per_model ? "model" : fmt::format("{:.1f}%", 100.0 * g.flops() / (layer_total > 0 ? layer_total : 1.0));
    out += fmt::format("{:<12} {:<14} {:<6} {:>8} {:>8} {:>8} {:>6} {:>10.1f} {:>7}\n", g.layer, g.role, g.pass, g.m,
                       g.k, g.n, g.count, g.flops() * 1e-9, share);
  }
  out += "\n";
  out += fmt::format("{:<34} {:>10} {:>10} {:>10} {:>10}\n", "TFLOP", "fprop", "dgrad", "wgrad", "total");
  out += fmt::format("{:<34} {:>10} {:>10} {:>10} {:>10}\n", "per layer", tflop(layer.fprop), tflop(layer.dgrad),
                     tflop(layer.wgrad), tflop(layer.total()));
  out += fmt::format("{:<34} {:>10} {:>10} {:>10} {:>10}\n",
                     fmt::format("per model ({} layers{})", w.layers,
                                 std::any_of(w.gemms.begin(), w.gemms.end(), [](const Gemm& g) { return g.per_model; })
                                     ? " + lm_head" : ""),
                     tflop(model.fprop), tflop(model.dgrad), tflop(model.wgrad), tflop(model.total()));
  if (!w.notes.empty()) out += "\n";
  for (const std::string& note : w.notes) out += "note: " + note + "\n";
  return out;
}

}  // namespace nibble::workload
