// The MoE token distribution of include/nibble/workload/expert_tokens.hpp.
#include "nibble/workload/expert_tokens.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace nibble::workload {

namespace {

constexpr const char* kRule =
    "whole units of align tokens: the hot expert receives round(R * mean / align) units (at least an even split's "
    "largest count, at most T / align), the other experts share the remaining units as evenly as possible, larger "
    "counts first; a partial last unit goes to one expert, padded alone to a multiple of align";

// "2048, 878 x5, 877 x2": runs of equal counts collapsed.
std::string runs(const std::vector<int64_t>& v) {
  std::string out;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j < v.size() && v[j] == v[i]) ++j;
    out += fmt::format("{}{}{}", out.empty() ? "" : ", ", v[i], j - i > 1 ? fmt::format(" x{}", j - i) : "");
    i = j;
  }
  return out;
}

int64_t checked_mul(int64_t a, int64_t b) {
  if (a > 0 && b > std::numeric_limits<int64_t>::max() / a)
    throw std::invalid_argument(fmt::format("tokens x top_k: {} x {} overflows 64 bits", a, b));
  return a * b;
}

}  // namespace

std::string_view to_string(MoePath path) { return path == MoePath::grouped ? "grouped" : "per-expert"; }

MoePath moe_path_from_string(std::string_view text, std::string_view field) {
  if (text == "grouped") return MoePath::grouped;
  if (text == "per-expert") return MoePath::per_expert;
  throw std::invalid_argument(fmt::format("{}: '{}' is not one of: grouped, per-expert", field, text));
}

int64_t ExpertTokens::max() const { return tokens.empty() ? 0 : *std::max_element(tokens.begin(), tokens.end()); }

double ExpertTokens::mean() const {
  return tokens.empty() ? 0.0 : static_cast<double>(routed) / static_cast<double>(tokens.size());
}

int64_t ExpertTokens::padded_total() const { return std::accumulate(padded.begin(), padded.end(), int64_t{0}); }

void check_token_imbalance(double r, int64_t experts, int64_t top_k) {
  if (!std::isfinite(r) || r < 1)
    throw std::invalid_argument(fmt::format(
        "--token-imbalance {}: must be at least 1 (R = max / mean tokens per expert; 1 is an even split)", r));
  if (experts >= 1 && top_k >= 1 && r * static_cast<double>(top_k) > static_cast<double>(experts) * (1 + 1e-12))
    throw std::invalid_argument(fmt::format(
        "--token-imbalance {}: at most experts / top_k = {} / {} = {:g} for this model: each token picks {} distinct "
        "experts, so one expert receives at most all T tokens, {:g} times the mean; lower it",
        r, experts, top_k, static_cast<double>(experts) / static_cast<double>(top_k), top_k,
        static_cast<double>(experts) / static_cast<double>(top_k)));
}

ExpertTokens distribute_expert_tokens(int64_t tokens, int64_t top_k, int64_t experts, double imbalance,
                                      int64_t align) {
  if (experts < 1) throw std::invalid_argument(fmt::format("experts: {} must be at least 1", experts));
  if (top_k < 1 || top_k > experts)
    throw std::invalid_argument(fmt::format("top_k: {} must be between 1 and experts ({})", top_k, experts));
  if (tokens < 1) throw std::invalid_argument(fmt::format("tokens: {} must be at least 1", tokens));
  if (align < 1) throw std::invalid_argument(fmt::format("align: {} must be at least 1", align));
  check_token_imbalance(imbalance, experts, top_k);
  ExpertTokens d;
  d.imbalance = imbalance;
  d.routed = checked_mul(tokens, top_k);
  d.align = align;
  const int64_t units = d.routed / align, partial = d.routed % align;
  const long double target = static_cast<long double>(imbalance) * static_cast<long double>(d.routed) /
                             static_cast<long double>(experts);  // R * mean, in tokens
  const int64_t even_max = (units + experts - 1) / experts;      // the largest count of an even split
  int64_t hot = std::llround(target / static_cast<long double>(align));
  hot = std::min(hot, std::max(tokens / align, even_max));  // one expert receives at most T tokens
  hot = std::clamp(std::max<int64_t>(hot, even_max), int64_t{0}, units);
  std::vector<int64_t> u{hot};
  if (experts > 1) {
    // hot >= even_max, so no other expert exceeds it.
    const int64_t rest = units - hot, base = rest / (experts - 1), extra = rest % (experts - 1);
    for (int64_t e = 0; e < experts - 1; ++e) u.push_back(base + (e < extra ? 1 : 0));
  }
  for (int64_t n : u) d.tokens.push_back(n * align);
  d.padded = d.tokens;
  if (partial > 0) {
    // The hot expert when that brings it nearer R * mean without passing T; else the first expert with the
    // fewest units (the order stays non-increasing: it ends below the experts that have one unit more).
    const auto hot_tokens = static_cast<long double>(d.tokens[0]);
    const bool to_hot = d.tokens[0] + partial <= tokens &&
                        std::fabs(hot_tokens + partial - target) < std::fabs(hot_tokens - target);
    const auto fewest = std::min_element(u.begin(), u.end());  // the first of the smallest
    d.partial_expert = to_hot ? 0 : static_cast<int64_t>(fewest - u.begin());
    d.tokens[d.partial_expert] += partial;
    d.padded[d.partial_expert] += align;
  }
  return d;
}

std::string describe(const ExpertTokens& d) {
  std::string out = fmt::format("experts: {}; max/mean {:.2f} (--token-imbalance {:g}; {} routed tokens in {}-token units)",
                                runs(d.tokens), d.achieved_imbalance(), d.imbalance, d.routed, d.align);
  if (d.partial_expert >= 0) {
    const auto e = static_cast<size_t>(d.partial_expert);
    out += fmt::format("; {} is not a multiple of {}: the last {} tokens go to expert {}, padded alone from {} to {} "
                       "rows (+{} rows computed)",
                       d.routed, d.align, d.routed % d.align, e, d.tokens[e], d.padded[e], d.padded[e] - d.tokens[e]);
  }
  return out;
}

nlohmann::json to_json(const ExpertTokens& d) {
  return {{"imbalance", d.imbalance},       {"achieved_imbalance", d.achieved_imbalance()},
          {"routed_tokens", d.routed},      {"mean_tokens", d.mean()},
          {"max_tokens", d.max()},          {"align", d.align},
          {"tokens", d.tokens},             {"padded_tokens", d.padded},
          {"partial_expert", d.partial_expert >= 0 ? nlohmann::json(d.partial_expert) : nlohmann::json()},
          {"distribution", describe(d)},    {"rule", kRule}};
}

}  // namespace nibble::workload
