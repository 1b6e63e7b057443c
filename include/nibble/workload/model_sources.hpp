// Where models come from: shipped presets (data/presets/<name>.json) and Hugging Face config.json.
#pragma once
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "nibble/workload/model_config.hpp"

namespace nibble::workload {

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
