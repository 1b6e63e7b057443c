// A transformer as the GEMMs see it: sizes, attention layout, MLP kind, mixture of experts, batch and
// tensor-parallel degree, and where models come from (shipped presets, data/presets/<name>.json, and
// Hugging Face config.json). Nothing here knows about precision recipes.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace nibble::workload {

struct ModelConfig {
  std::string name = "custom";
  std::string source;             // where the numbers came from (preset file, config.json, flags)
  int64_t hidden = 0;             // H, the residual width
  int64_t ffn = 0;                // F, dense MLP inner width
  int64_t heads = 0;              // query heads
  int64_t kv_heads = 0;           // key/value heads (GQA/MQA); 0 = heads (multi-head)
  int64_t head_dim = 0;           // 0 = hidden / heads
  int64_t layers = 0;             // transformer blocks
  int64_t vocab = 0;              // LM head out_features
  bool gated = false;             // SwiGLU/GeGLU: the up projection is fused gate+up, O = 2F
  std::string activation = "gelu";
  int64_t experts = 0;            // routed experts; 0 = dense MLP
  int64_t top_k = 0;              // experts per token
  int64_t moe_ffn = 0;            // inner width of one routed expert; 0 = ffn
  int64_t shared_experts = 0;     // experts every token passes through (dense MLPs)
  int64_t shared_ffn = 0;         // inner width of one shared expert; 0 = moe_ffn
  int64_t tp = 1;                 // tensor-parallel degree (one rank's GEMMs are derived)
  int64_t micro_batch = 1;
  int64_t seq_len = 0;

  int64_t tokens() const { return micro_batch * seq_len; }  // T; validate() guards the overflow
  bool is_moe() const { return experts > 0; }
  // The values actually used once the 0 = "derive it" defaults are applied.
  int64_t effective_kv_heads() const { return kv_heads > 0 ? kv_heads : heads; }
  int64_t effective_head_dim() const { return head_dim > 0 ? head_dim : (heads > 0 ? hidden / heads : 0); }
  int64_t effective_moe_ffn() const { return moe_ffn > 0 ? moe_ffn : ffn; }
  int64_t effective_shared_ffn() const { return shared_ffn > 0 ? shared_ffn : effective_moe_ffn(); }

  bool operator==(const ModelConfig&) const = default;
};

// Throws std::invalid_argument naming the field and the fix when the configuration cannot describe a
// transformer (non-positive sizes, heads not dividing hidden without head_dim, kv_heads not dividing
// heads, tp not dividing heads / kv_heads / ffn, top_k out of range, tokens overflowing int64).
void validate(const ModelConfig& model);

// The same model with every 0 = "derive it" default written out (kv_heads, head_dim, and for MoE
// models moe_ffn and shared_ffn): what `nibble shapes --format json` reports as `model`. Derives the
// same GEMMs as `model`.
ModelConfig resolved(const ModelConfig& model);

// JSON with the field names above (the `model` object of `nibble shapes --format json`, and the body
// of a preset file). from_json rejects unknown keys so a typo in a preset cannot pass silently; the
// fields hidden, ffn, heads, layers, vocab are required. `where` names the document in errors.
nlohmann::json to_json(const ModelConfig& model);
ModelConfig model_from_json(const nlohmann::json& j, const std::string& where);

// One line a human reads at the top of a table: "llama-3-8b: hidden 4096, ffn 14336 (gated silu), ...".
std::string describe(const ModelConfig& model);

// Where models come from.
// The data folder: $NIBBLE_DATA_DIR if set, else ../data or ./data next to the running executable
// (build tree and install tree), else the source tree's data/ compiled in. Throws std::runtime_error
// listing the places tried.
std::filesystem::path data_dir();

std::vector<std::string> list_presets();  // sorted preset names
// Throws std::invalid_argument listing the known presets when `name` is not one of them.
ModelConfig load_preset(std::string_view name);

// Reads the fields of the common families (llama, mistral, mixtral, qwen2, qwen2_moe, esm, bert,
// gemma); errors name the missing field. Batch fields (micro_batch, seq_len) are not in config.json
// and keep the defaults of `base`.
ModelConfig load_hf_config(const std::string& path, const ModelConfig& base = {});
ModelConfig hf_config_from_json(const nlohmann::json& j, const std::string& where, const ModelConfig& base = {});

}  // namespace nibble::workload
