// The BF16 layer plan of `nibble bench --keep-bf16` (include/nibble/results/result.hpp: LayerPlan).
#include "nibble/results/result.hpp"

#include <fmt/format.h>

#include <charconv>
#include <stdexcept>
#include <string>

namespace nibble::bench {

namespace {

constexpr const char* kForm = "use first:K,last:L[,lm_head], e.g. first:2,last:2";

int64_t parse_count(std::string_view field, std::string_view part, std::string_view value) {
  int64_t v = -1;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (value.empty() || ec != std::errc() || end != value.data() + value.size() || v < 0)
    throw std::invalid_argument(fmt::format("{}: '{}' needs a whole number of blocks >= 0 after the colon; {}", field,
                                            part, kForm));
  return v;
}

}  // namespace

LayerPlan parse_layer_plan(std::string_view spec, int64_t layers, std::string_view field) {
  LayerPlan plan;
  if (spec.empty()) throw std::invalid_argument(fmt::format("{}: empty; {}", field, kForm));
  bool seen_first = false, seen_last = false;
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t comma = spec.find(',', start);
    const std::string_view part = spec.substr(start, comma == std::string_view::npos ? spec.npos : comma - start);
    start = comma == std::string_view::npos ? spec.size() + 1 : comma + 1;
    const size_t colon = part.find(':');
    const std::string_view key = part.substr(0, colon);
    const std::string_view value = colon == std::string_view::npos ? std::string_view() : part.substr(colon + 1);
    auto once = [&](bool& seen) {
      if (seen) throw std::invalid_argument(fmt::format("{}: '{}' is given twice; give each key once", field, key));
      seen = true;
      if (colon == std::string_view::npos)
        throw std::invalid_argument(fmt::format("{}: '{}' needs a count ({}:K); {}", field, key, key, kForm));
    };
    if (key == "first") {
      once(seen_first);
      plan.bf16_first = parse_count(field, part, value);
    } else if (key == "last") {
      once(seen_last);
      plan.bf16_last = parse_count(field, part, value);
    } else if (key == "lm_head") {
      if (colon != std::string_view::npos)
        throw std::invalid_argument(fmt::format("{}: 'lm_head' takes no count; {}", field, kForm));
      if (plan.bf16_lm_head) throw std::invalid_argument(fmt::format("{}: 'lm_head' is given twice", field));
      plan.bf16_lm_head = true;
    } else {
      throw std::invalid_argument(fmt::format("{}: unknown key '{}' in '{}'; the keys are first, last and lm_head ({})",
                                              field, key, spec, kForm));
    }
  }
  if (plan.bf16_blocks() > layers)
    throw std::invalid_argument(fmt::format(
        "{}: first:{} + last:{} = {} blocks kept in BF16, but the model has {} layers; keep at most {} in all",
        field, plan.bf16_first, plan.bf16_last, plan.bf16_blocks(), layers, layers));
  return plan;
}

std::string to_string(const LayerPlan& plan) {
  std::string out;
  auto add = [&](const std::string& part) { out += (out.empty() ? "" : ",") + part; };
  if (plan.bf16_first > 0) add(fmt::format("first:{}", plan.bf16_first));
  if (plan.bf16_last > 0) add(fmt::format("last:{}", plan.bf16_last));
  if (plan.bf16_lm_head) add("lm_head");
  return out;
}

}  // namespace nibble::bench
