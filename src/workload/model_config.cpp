// Validation and JSON of ModelConfig. Every error names the field, the value and the way to fix it,
// using both the config name and the CLI flag, because users meet it through either.
#include "nibble/workload/model_config.hpp"

#include <fmt/format.h>

#include <set>
#include <stdexcept>

namespace nibble::workload {
namespace {

struct Field {
  const char* key;   // JSON / ModelConfig name
  const char* flag;  // CLI flag that sets it
};

[[noreturn]] void fail(const std::string& msg) { throw std::invalid_argument(msg); }

void require_positive(int64_t v, Field f) {
  if (v <= 0) fail(fmt::format("{} must be > 0 (got {}): set it with {} or in the model config", f.key, v, f.flag));
}

void require_non_negative(int64_t v, Field f) {
  if (v < 0) fail(fmt::format("{} must be >= 0 (got {}; 0 means the default): fix {}", f.key, v, f.flag));
}

void require_tp_divides(int64_t value, Field f, int64_t tp) {
  if (value % tp != 0)
    fail(fmt::format("tp {} does not divide {} {}: tensor parallelism splits {} across ranks; choose a --tp that "
                     "divides {}", tp, f.key, value, f.key, value));
}

}  // namespace

void validate(const ModelConfig& m) {
  if (m.name.empty()) fail("name must not be empty: give the model a name");
  require_positive(m.hidden, {"hidden", "--hidden"});
  require_positive(m.ffn, {"ffn", "--ffn"});
  require_positive(m.heads, {"heads", "--heads"});
  require_positive(m.layers, {"layers", "--layers"});
  require_positive(m.vocab, {"vocab", "--vocab"});
  require_positive(m.tp, {"tp", "--tp"});
  require_positive(m.micro_batch, {"micro_batch", "--mbs"});
  require_positive(m.seq_len, {"seq_len", "--seq"});
  require_non_negative(m.kv_heads, {"kv_heads", "--kv-heads"});
  require_non_negative(m.head_dim, {"head_dim", "--head-dim"});
  require_non_negative(m.experts, {"experts", "--experts"});
  require_non_negative(m.top_k, {"top_k", "--top-k"});
  require_non_negative(m.moe_ffn, {"moe_ffn", "--moe-ffn"});
  require_non_negative(m.shared_experts, {"shared_experts", "shared_experts in the config"});
  require_non_negative(m.shared_ffn, {"shared_ffn", "shared_ffn in the config"});

  if (m.head_dim == 0 && m.hidden % m.heads != 0)
    fail(fmt::format("hidden {} is not divisible by heads {}: give head_dim (--head-dim) explicitly or choose "
                     "heads that divide hidden", m.hidden, m.heads));
  const int64_t kv = m.effective_kv_heads();
  if (kv > m.heads || m.heads % kv != 0)
    fail(fmt::format("kv_heads {} does not divide heads {}: grouped-query attention shares each key/value head "
                     "among heads/kv_heads query heads; choose --kv-heads dividing {}", kv, m.heads, m.heads));

  if (m.is_moe()) {
    // The expert tables hold one row per expert; published MoE models have at most a few hundred.
    constexpr int64_t kMaxExperts = 65536;
    if (m.experts > kMaxExperts || m.shared_experts > kMaxExperts)
      fail(fmt::format("experts {} (shared {}) is more than {}: nibble lists every expert's GEMMs; check the "
                       "config's expert count (--experts)", m.experts, m.shared_experts, kMaxExperts));
    if (m.top_k < 1 || m.top_k > m.experts)
      fail(fmt::format("top_k {} is out of range for {} experts: set --top-k between 1 and {}", m.top_k, m.experts,
                       m.experts));
  } else {
    if (m.top_k != 0)
      fail(fmt::format("top_k {} given without experts: set --experts for a mixture of experts or drop --top-k",
                       m.top_k));
    if (m.shared_experts != 0)
      fail(fmt::format("shared_experts {} given without routed experts: set --experts, or describe the shared "
                       "experts as the dense ffn", m.shared_experts));
  }

  require_tp_divides(m.heads, {"heads", "--heads"}, m.tp);
  require_tp_divides(kv, {"kv_heads", "--kv-heads"}, m.tp);
  if (m.is_moe()) {
    require_tp_divides(m.effective_moe_ffn(), {"moe_ffn", "--moe-ffn"}, m.tp);
    if (m.shared_experts > 0) require_tp_divides(m.effective_shared_ffn(), {"shared_ffn", "shared_ffn"}, m.tp);
  } else {
    require_tp_divides(m.ffn, {"ffn", "--ffn"}, m.tp);
  }

  int64_t tokens = 0;
  if (__builtin_mul_overflow(m.micro_batch, m.seq_len, &tokens))
    fail(fmt::format("micro_batch {} x seq_len {} overflows 64-bit tokens: reduce --mbs or --seq", m.micro_batch,
                     m.seq_len));
}

ModelConfig resolved(const ModelConfig& model) {
  ModelConfig m = model;
  m.kv_heads = model.effective_kv_heads();
  m.head_dim = model.effective_head_dim();
  if (model.is_moe()) m.moe_ffn = model.effective_moe_ffn();
  if (model.shared_experts > 0) m.shared_ffn = model.effective_shared_ffn();
  return m;
}

nlohmann::json to_json(const ModelConfig& m) {
  return nlohmann::json{
      {"name", m.name},         {"source", m.source},
      {"hidden", m.hidden},     {"ffn", m.ffn},
      {"heads", m.heads},       {"kv_heads", m.kv_heads},
      {"head_dim", m.head_dim}, {"layers", m.layers},
      {"vocab", m.vocab},       {"gated", m.gated},
      {"activation", m.activation}, {"experts", m.experts},
      {"top_k", m.top_k},       {"moe_ffn", m.moe_ffn},
      {"shared_experts", m.shared_experts}, {"shared_ffn", m.shared_ffn},
      {"tp", m.tp},             {"micro_batch", m.micro_batch},
      {"seq_len", m.seq_len},
  };
}

ModelConfig model_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) fail(fmt::format("{}: expected a JSON object describing a model", where));
  static const std::set<std::string> known = {
      "name", "source", "hidden", "ffn", "heads", "kv_heads", "head_dim", "layers", "vocab", "gated", "activation",
      "experts", "top_k", "moe_ffn", "shared_experts", "shared_ffn", "tp", "micro_batch", "seq_len"};
  for (const auto& [key, value] : j.items()) {
    if (!known.contains(key))
      fail(fmt::format("{}: unknown field '{}': the model fields are name, source, hidden, ffn, heads, kv_heads, "
                       "head_dim, layers, vocab, gated, activation, experts, top_k, moe_ffn, shared_experts, "
                       "shared_ffn, tp, micro_batch, seq_len", where, key));
  }
  ModelConfig m;
  auto integer = [&](const char* key, int64_t& out, bool required) {
    if (!j.contains(key)) {
      if (required) fail(fmt::format("{}: missing required field '{}' (an integer)", where, key));
      return;
    }
    const auto& v = j.at(key);
    if (!v.is_number_integer())
      fail(fmt::format("{}: field '{}' must be an integer, got {}", where, key, v.dump()));
    out = v.get<int64_t>();
  };
  auto text = [&](const char* key, std::string& out) {
    if (!j.contains(key)) return;
    if (!j.at(key).is_string()) fail(fmt::format("{}: field '{}' must be a string, got {}", where, key, j.at(key).dump()));
    out = j.at(key).get<std::string>();
  };
  text("name", m.name);
  text("source", m.source);
  text("activation", m.activation);
  integer("hidden", m.hidden, true);
  integer("ffn", m.ffn, true);
  integer("heads", m.heads, true);
  integer("layers", m.layers, true);
  integer("vocab", m.vocab, true);
  integer("kv_heads", m.kv_heads, false);
  integer("head_dim", m.head_dim, false);
  integer("experts", m.experts, false);
  integer("top_k", m.top_k, false);
  integer("moe_ffn", m.moe_ffn, false);
  integer("shared_experts", m.shared_experts, false);
  integer("shared_ffn", m.shared_ffn, false);
  integer("tp", m.tp, false);
  integer("micro_batch", m.micro_batch, false);
  integer("seq_len", m.seq_len, false);
  if (j.contains("gated")) {
    if (!j.at("gated").is_boolean())
      fail(fmt::format("{}: field 'gated' must be true or false, got {}", where, j.at("gated").dump()));
    m.gated = j.at("gated").get<bool>();
  }
  return m;
}

std::string describe(const ModelConfig& m) {
  const int64_t kv = m.effective_kv_heads();
  const std::string attention = kv == m.heads ? "MHA" : (kv == 1 ? "MQA" : fmt::format("GQA {} kv", kv));
  std::string mlp;
  if (m.is_moe()) {
    mlp = fmt::format("moe {} experts top-{}, expert ffn {}", m.experts, m.top_k, m.effective_moe_ffn());
    if (m.shared_experts > 0) mlp += fmt::format(" + {} shared (ffn {})", m.shared_experts, m.effective_shared_ffn());
  } else {
    mlp = fmt::format("ffn {}", m.ffn);
  }
  mlp += fmt::format(" ({}{})", m.gated ? "gated " : "", m.activation);
  return fmt::format("{}: hidden {}, {}, {} heads ({}, head_dim {}), {} layers, vocab {}; batch {} x {} = {} tokens; "
                     "tp {}",
                     m.name, m.hidden, mlp, m.heads, attention, m.effective_head_dim(), m.layers, m.vocab,
                     m.micro_batch, m.seq_len, m.tokens(), m.tp);
}

}  // namespace nibble::workload
