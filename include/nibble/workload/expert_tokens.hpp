// How an MoE layer's routed tokens spread over its experts (`nibble bench --token-imbalance R`), and
// which of the two MoE execution paths runs them (`--moe grouped|per-expert`).
//
// The rule, deterministic, in whole units of `align` tokens (128, the largest token block any recipe
// needs), so that no expert's GEMM carries padding and the routed total stays exact. R = max / mean tokens
// per expert, mean = T * top_k / E; U = floor(T * top_k / align) whole units. The hot expert receives
// round(R * mean / align) units, at least the ceil(U / E) of an even split and at most T / align (rounded
// down, unless the even split itself needs more); the other E - 1 experts share the remaining units as
// evenly as possible (counts differ by one unit at most, the larger ones first). R = 1 is the even split in
// units. The realised max / mean is what the units allow (Qwen1.5-MoE, 60 experts top-4 at 4096 tokens:
// 384 x 8, 256 x 52, max / mean 1.41) and is reported. Only when T * top_k is not a multiple of align does
// a partial unit remain: its tokens go to one expert (the hot one when that brings it nearer R * mean
// without passing T, else the first of those with the fewest units), and that expert alone is padded up to
// the next multiple of align; the padded rows are computed and counted. Every token picks top_k distinct
// experts, so R is at most E / top_k.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nibble::workload {

// The token unit: the largest block any recipe needs along the tokens (fp8-block's 128; quant::layer_multiple).
inline constexpr int64_t kExpertTokenAlign = 128;

// grouped:    one quantization launch per operand for all experts and the experts' GEMMs issued as one
//             unit (workload::Gemm::group_tokens holds the per-expert token counts).
// per_expert: every expert's quantization and GEMM are separate launches, one expert after another.
enum class MoePath { grouped, per_expert };
std::string_view to_string(MoePath path);  // "grouped" | "per-expert"
// Throws std::invalid_argument naming `field` and the valid names.
MoePath moe_path_from_string(std::string_view text, std::string_view field = "--moe");

struct ExpertTokens {
  double imbalance = 1;            // R as asked
  int64_t routed = 0;              // T * top_k
  int64_t align = kExpertTokenAlign;
  std::vector<int64_t> tokens;     // per expert, hot expert first, non-increasing; sums to routed
  std::vector<int64_t> padded;     // the GEMM rows: tokens, except the partial expert's rounded up to align
  int64_t partial_expert = -1;     // the expert holding the partial unit (padded alone), -1 when none
  int64_t max() const;
  double mean() const;             // routed / experts
  double achieved_imbalance() const { return mean() > 0 ? static_cast<double>(max()) / mean() : 1.0; }
  int64_t padded_total() const;
};

// Throws std::invalid_argument naming --token-imbalance when R is not finite, below 1, or above
// experts / top_k (the most one expert can receive).
void check_token_imbalance(double imbalance, int64_t experts, int64_t top_k);

// The distribution above; throws as check_token_imbalance, and for experts < 1, top_k outside
// [1, experts], tokens < 1, align < 1.
ExpertTokens distribute_expert_tokens(int64_t tokens, int64_t top_k, int64_t experts, double imbalance,
                                      int64_t align = kExpertTokenAlign);

// One line for tables and notes: "experts: 2048, 896 x6, 768; max/mean 2.00 (--token-imbalance 2; 8192
// routed tokens in 128-token units)", plus the partial unit's padding when there is one.
std::string describe(const ExpertTokens& d);
// {imbalance, achieved_imbalance, routed_tokens, mean_tokens, max_tokens, align, tokens[], padded_tokens[],
//  partial_expert (null when none), distribution (describe's text), rule}
nlohmann::json to_json(const ExpertTokens& d);

}  // namespace nibble::workload
