// Hugging Face config.json -> ModelConfig. Families name the same quantity differently (Mixtral's
// num_local_experts, Qwen2-MoE's num_experts, GPT-2's n_embd), so each field has a list of accepted
// keys, and errors name the first one.
#include <fmt/format.h>

#include <initializer_list>
#include <set>
#include <stdexcept>

#include "nibble/io/json_file.hpp"
#include "nibble/workload/model_sources.hpp"

namespace nibble::workload {
namespace {

[[noreturn]] void fail(const std::string& msg) { throw std::invalid_argument(msg); }

const nlohmann::json* find_key(const nlohmann::json& j, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    auto it = j.find(k);
    if (it != j.end() && !it->is_null()) return &*it;
  }
  return nullptr;
}

int64_t integer_of(const nlohmann::json& v, const char* key, const std::string& where) {
  if (!v.is_number_integer()) fail(fmt::format("{}: field '{}' must be an integer, got {}", where, key, v.dump()));
  return v.get<int64_t>();
}

int64_t required(const nlohmann::json& j, std::initializer_list<const char*> keys, const std::string& where,
                 const char* meaning) {
  if (const auto* v = find_key(j, keys)) return integer_of(*v, *keys.begin(), where);
  std::string also;
  for (auto it = keys.begin() + 1; it != keys.end(); ++it) also += fmt::format("{}'{}'", also.empty() ? "" : ", ", *it);
  fail(fmt::format("{}: missing field '{}' ({}){}: add it to the config.json or describe the model with flags", where,
                   *keys.begin(), meaning, also.empty() ? "" : "; also accepted: " + also));
}

int64_t optional(const nlohmann::json& j, std::initializer_list<const char*> keys, const std::string& where) {
  const auto* v = find_key(j, keys);
  return v ? integer_of(*v, *keys.begin(), where) : 0;
}

// Families whose MLP is always gated (SwiGLU / GeGLU), whatever hidden_act says.
bool gated_family(const std::string& model_type) {
  static const std::set<std::string> gated = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3",
                                              "qwen3_moe", "gemma", "gemma2", "gemma3_text", "phi3", "olmo",
                                              "olmo2", "olmoe", "granite", "cohere", "internlm2", "yi"};
  return gated.contains(model_type);
}

}  // namespace

ModelConfig hf_config_from_json(const nlohmann::json& root, const std::string& where, const ModelConfig& base) {
  if (!root.is_object()) fail(fmt::format("{}: expected a JSON object (a Hugging Face config.json)", where));
  // Multimodal configs nest the language model under text_config.
  const nlohmann::json& j =
      (!root.contains("hidden_size") && root.contains("text_config") && root["text_config"].is_object())
          ? root["text_config"] : root;
  if (find_key(j, {"kv_lora_rank", "q_lora_rank"}) != nullptr)
    fail(fmt::format("{}: multi-head latent attention (kv_lora_rank, DeepSeek-V2/V3 style) is not modelled: describe "
                     "an equivalent model with flags", where));
  // j.value() would throw nlohmann's type_error (a message naming no field) for a non-string.
  if (j.contains("model_type") && !j["model_type"].is_null() && !j["model_type"].is_string())
    fail(fmt::format("{}: field 'model_type' must be a string such as \"llama\", got {}", where, j["model_type"].dump()));
  const std::string model_type = j.contains("model_type") && j["model_type"].is_string() ? j["model_type"].get<std::string>() : std::string{};

  ModelConfig m;
  m.micro_batch = base.micro_batch;
  m.seq_len = base.seq_len;
  m.tp = base.tp;
  if (const auto* n = find_key(root, {"_name_or_path"}); n && n->is_string() && !n->get<std::string>().empty())
    m.name = n->get<std::string>();
  else
    m.name = model_type.empty() ? "hf-config" : model_type;
  m.source = "Hugging Face config " + where;

  m.hidden = required(j, {"hidden_size", "n_embd", "d_model"}, where, "the hidden size");
  m.heads = required(j, {"num_attention_heads", "n_head"}, where, "the number of attention heads");
  m.layers = required(j, {"num_hidden_layers", "n_layer"}, where, "the number of transformer blocks");
  m.vocab = required(j, {"vocab_size"}, where, "the vocabulary size");
  if (const auto* f = find_key(j, {"intermediate_size", "n_inner", "ffn_dim"}))
    m.ffn = integer_of(*f, "intermediate_size", where);
  else if (j.contains("n_embd"))
    m.ffn = 4 * m.hidden;  // GPT-2 writes n_inner: null for the 4x default
  else
    m.ffn = required(j, {"intermediate_size", "n_inner", "ffn_dim"}, where, "the MLP inner size");
  m.kv_heads = optional(j, {"num_key_value_heads"}, where);
  if (m.kv_heads == m.heads) m.kv_heads = 0;
  m.head_dim = optional(j, {"head_dim"}, where);
  // Keep head_dim only where it differs from hidden/heads, so --hidden/--heads overrides stay consistent.
  if (m.head_dim > 0 && m.heads > 0 && m.hidden % m.heads == 0 && m.head_dim == m.hidden / m.heads) m.head_dim = 0;

  if (const auto* a = find_key(j, {"hidden_act", "hidden_activation", "activation_function"}); a && a->is_string())
    m.activation = a->get<std::string>();
  m.gated = gated_family(model_type) || m.activation == "silu" || m.activation == "swish";

  m.experts = optional(j, {"num_local_experts", "num_experts", "n_routed_experts"}, where);
  if (m.experts > 0) {
    m.top_k = required(j, {"num_experts_per_tok", "moe_topk"}, where, "experts per token");
    m.moe_ffn = optional(j, {"moe_intermediate_size"}, where);
    if (const int64_t shared = optional(j, {"shared_expert_intermediate_size"}, where); shared > 0) {
      m.shared_experts = 1;  // Qwen2-MoE: one shared expert of this width
      m.shared_ffn = shared;
    } else if (const int64_t n_shared = optional(j, {"n_shared_experts"}, where); n_shared > 0) {
      m.shared_experts = n_shared;
    }
  }
  return m;
}

ModelConfig load_hf_config(const std::string& path, const ModelConfig& base) {
  const nlohmann::json j =
      io::read_json_file(path, "Hugging Face config.json given to --hf-config", io::OpenError::invalid_argument);
  return hf_config_from_json(j, path, base);
}

}  // namespace nibble::workload
