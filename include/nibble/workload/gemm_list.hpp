// The GEMMs of one training step (docs/spec.md §5): M x K x N with C[M,N] = A[M,K] B[K,N],
// fprop M=T,K=I,N=O; dgrad M=T,K=O,N=I; wgrad M=I,K=T,N=O; FLOPs = 2MKN.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "nibble/workload/expert_tokens.hpp"
#include "nibble/workload/model_config.hpp"

namespace nibble::workload {

struct Gemm {
  std::string layer;   // qkv, attn_out, mlp_up, mlp_down, lm_head, attn_scores, attn_values
  std::string pass;    // fprop, dgrad, wgrad
  int64_t m = 0, k = 0, n = 0;
  int64_t count = 1;   // GEMMs of this shape per layer (experts, batch*heads for attention)
  std::string role;    // dense | expert | shared_expert | lm_head | attention: which part of the block
  bool per_model = false;  // true: runs once per model step (lm_head), not once per layer
  // A grouped MoE GEMM (MoePath::grouped): the experts' token counts (padded), one GEMM per expert issued as
  // one unit; the token dimension (m in fprop/dgrad, k in wgrad) is their sum and count is 1. Empty otherwise.
  std::vector<int64_t> group_tokens = {};
  // 2*m*k*n*count; exact (derive_workload rejects shapes whose product overflows int64).
  int64_t flops_exact() const;
  double flops() const { return static_cast<double>(flops_exact()); }
};

// Block linear layers are the ones a low-precision recipe quantizes; lm_head and the attention
// score/value GEMMs stay in higher precision in every recipe of docs/spec.md §2/§3.
bool is_block_linear(std::string_view layer);

struct WorkloadOptions {
  bool lm_head = false;    // add the LM head (once per model, O = vocab / tp)
  bool attention = false;  // add the BF16 attention score/value batched GEMMs
  double token_imbalance = 1;            // MoE: max / mean tokens per expert (expert_tokens.hpp)
  // MoE: one entry per expert token count (the GEMM list of docs/spec.md §5, `nibble shapes`), or grouped
  // entries (`nibble bench`'s default).
  MoePath moe_path = MoePath::per_expert;
};

struct FlopTotals {
  int64_t fprop = 0, dgrad = 0, wgrad = 0;
  int64_t total() const { return fprop + dgrad + wgrad; }
};

struct Workload {
  ModelConfig model;           // resolved and validated
  int64_t tokens = 0;          // T = micro_batch * seq_len
  int64_t layers = 0;
  std::vector<Gemm> gemms;     // one layer's GEMMs, then the per-model ones (lm_head)
  std::vector<std::string> notes;  // what the derivation does not model, rounding it did
  MoePath moe_path = MoePath::per_expert;  // MoE models only
  ExpertTokens expert_tokens;      // MoE models only (tokens empty for a dense model)
  bool is_moe() const { return !expert_tokens.tokens.empty(); }

  FlopTotals layer_totals() const;  // GEMMs with per_model == false, one layer
  FlopTotals model_totals() const;  // layers x layer_totals + per-model GEMMs
};

// Throws std::invalid_argument (naming the field and the fix) for an invalid model, and
// std::overflow_error when a FLOP count does not fit in int64.
Workload derive_workload(const ModelConfig& model, const WorkloadOptions& options = {});

// The JSON of `nibble shapes --format json`: tokens, layers, model, gemms[{layer, pass, m, k, n,
// count, flops, role, per_model, block_linear[, group_tokens]}], moe{path, token distribution} (MoE only), totals{per_layer{fprop,dgrad,wgrad,total}, per_model{...}}, notes.
nlohmann::json to_json(const Workload& workload);
std::string to_csv(const Workload& workload);
std::string to_table(const Workload& workload);

}  // namespace nibble::workload
