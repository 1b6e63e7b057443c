// The model options shared by every command that starts from a model (`nibble shapes`, `nibble bench`),
// so they accept exactly the same flags. Precedence: --model preset, then --hf-config, then flags.
#pragma once
#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "nibble/workload/gemm_list.hpp"
#include "nibble/workload/model_config.hpp"

namespace nibble::workload {

inline constexpr const char* kDefaultPreset = "codonfm-5b";

struct ModelCliOptions {
  std::string preset;      // empty: codonfm-5b unless --hf-config is given
  std::string hf_config;
  std::optional<int64_t> hidden, ffn, heads, kv_heads, head_dim, layers, vocab;
  std::optional<bool> gated;
  std::optional<int64_t> experts, top_k, moe_ffn, shared_experts, shared_ffn, tp, micro_batch, seq_len;
};

void add_model_options(CLI::App& app, ModelCliOptions& options);
void add_workload_options(CLI::App& app, WorkloadOptions& options);  // --lm-head, --attention

// Checks of a number option, with the message a user reads ("--mbs: 0 is not a positive number"); the
// commands' other number options use them too.
CLI::Validator positive_number();
CLI::Validator non_negative_number();

// Applies preset -> hf config -> flags and validates; throws std::invalid_argument naming the field.
ModelConfig resolve_model(const ModelCliOptions& options);

// Whether the command line named a model at all (--model, --hf-config or any size or batch flag).
bool any_model_option(const ModelCliOptions& options);

}  // namespace nibble::workload
