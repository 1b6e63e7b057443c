// Where models come from: Hugging Face config.json and the shipped presets (below).
//
// Hugging Face config.json -> ModelConfig. Families name the same quantity differently (Mixtral's
// num_local_experts, Qwen2-MoE's num_experts, GPT-2's n_embd), so each field has a list of accepted
// keys, and errors name the first one.
#include <fmt/format.h>

#include <cstdlib>
#include <initializer_list>
#include <set>
#include <stdexcept>

#include "nibble/io/json_file.hpp"
#include "nibble/workload/model_config.hpp"

// Shipped presets: data/presets/<name>.json, one model per file with its source written in it. The
// data folder is found at run time so an installed or moved binary still finds it.
namespace nibble::workload {
namespace fs = std::filesystem;

fs::path data_dir() {
  if (const char* env = std::getenv("NIBBLE_DATA_DIR"); env != nullptr && *env != '\0') {
    if (!fs::is_directory(env))
      throw std::runtime_error(fmt::format("NIBBLE_DATA_DIR={} is not a folder: point it at nibble's data/ folder "
                                           "(the one holding presets/) or unset it", env));
    return env;
  }
  std::vector<fs::path> tried;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path dir = exe.parent_path();
    // Build tree (binary in build-*/), install tree (bin/ next to share/nibble/data), or data beside it.
    for (const fs::path& c : {dir / "data", dir.parent_path() / "data", dir.parent_path() / "share" / "nibble" / "data"}) {
      tried.push_back(c);
      if (fs::is_directory(c / "presets")) return c;
    }
  }
#ifdef NIBBLE_DATA_DIR
  tried.emplace_back(NIBBLE_DATA_DIR);
  if (fs::is_directory(fs::path(NIBBLE_DATA_DIR) / "presets")) return NIBBLE_DATA_DIR;
#endif
  std::string places;
  for (const auto& p : tried) places += (places.empty() ? "" : ", ") + p.string();
  throw std::runtime_error(fmt::format("cannot find nibble's data folder (tried {}): set NIBBLE_DATA_DIR to the "
                                       "folder holding presets/", places.empty() ? "nothing" : places));
}

std::vector<std::string> list_presets() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(data_dir() / "presets"))
    if (entry.is_regular_file() && entry.path().extension() == ".json") names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

ModelConfig load_preset(std::string_view name) {
  const auto names = list_presets();
  if (std::find(names.begin(), names.end(), name) == names.end())
    throw std::invalid_argument(fmt::format("unknown preset '{}': known presets are {} (or describe the model with "
                                            "--hf-config / flags)", name, fmt::join(names, ", ")));
  const fs::path path = data_dir() / "presets" / (std::string(name) + ".json");
  const nlohmann::json j = io::read_json_file(path.string(), "preset file");
  ModelConfig m = model_from_json(j, "preset " + path.string());
  if (m.name != name)
    throw std::invalid_argument(fmt::format("preset file {} says name '{}': the name must match the file name '{}'",
                                            path.string(), m.name, name));
  validate(m);
  return m;
}

}  // namespace nibble::workload

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
