// The recipes' names as users type them (docs/spec.md §2), in the order of quant::Recipe: the one
// list that the quant layer, the predictor, the CLI and the Python module read. Header-only, so
// layers that do not link the quantizers (predict) can use it.
#pragma once
#include <algorithm>
#include <iterator>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace nibble::quant {

inline constexpr std::string_view kRecipeNames[] = {"bf16",  "fp8-delayed", "fp8-current", "fp8-block",
                                                    "mxfp8", "nvfp4",       "mxfp4",       "quartet"};

inline std::vector<std::string> recipe_names() { return {std::begin(kRecipeNames), std::end(kRecipeNames)}; }

// "bf16, fp8-delayed, ..., quartet": for error messages and help texts.
inline std::string recipe_name_list() {
  std::string s;
  for (std::string_view n : kRecipeNames) {
    if (!s.empty()) s += ", ";
    s += n;
  }
  return s;
}

inline bool is_recipe_name(std::string_view name) {
  return std::find(std::begin(kRecipeNames), std::end(kRecipeNames), name) != std::end(kRecipeNames);
}

// Throws std::invalid_argument "<where>: unknown recipe 'x'; valid recipes: ..." unless name is a recipe:
// the one check and wording that every layer taking a recipe name uses.
inline void require_recipe_name(std::string_view name, std::string_view where) {
  if (is_recipe_name(name)) return;
  throw std::invalid_argument(std::string(where) + ": unknown recipe '" + std::string(name) +
                              "'; valid recipes: " + recipe_name_list());
}

}  // namespace nibble::quant
