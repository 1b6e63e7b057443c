// Recipes as data (docs/spec.md §2): names, per-call options, and the one entry point `quantize`.
#pragma once
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>

#include "nibble/quant/amax_history.hpp"
#include "nibble/quant/quantizers.hpp"
#include "nibble/quant/recipe_list.hpp"

namespace nibble::quant {

enum class Recipe : uint8_t { bf16, fp8_delayed, fp8_current, fp8_block, mxfp8, nvfp4, mxfp4, quartet };
enum class Role : uint8_t { x, w, dy };

// Every recipe, in the order of the enum; their names (as users type them, "fp8-current") are
// kRecipeNames of recipe_list.hpp, in the same order.
inline constexpr Recipe kAllRecipes[] = {Recipe::bf16,  Recipe::fp8_delayed, Recipe::fp8_current,
                                         Recipe::fp8_block, Recipe::mxfp8, Recipe::nvfp4,
                                         Recipe::mxfp4, Recipe::quartet};
static_assert(std::size(kAllRecipes) == std::size(kRecipeNames), "one name per recipe");

Recipe parse_recipe(std::string_view name);  // throws std::invalid_argument listing the valid names
const char* recipe_name(Recipe r);
Role parse_role(std::string_view name);      // "x" | "w" | "dy"
const char* role_name(Role r);

enum class Rounding : uint8_t { by_recipe, nearest, stochastic };

// The MX scale rule a recipe uses unless told otherwise: mxfp8 follows Transformer Engine's
// MXFP8BlockScaling (te), mxfp4 the OCP MX rule. The CPU reference, the CUDA engine, the CLI and the
// Python layer all take their default from here.
constexpr MxScaleRule default_mx_scale_rule(Recipe r) {
  return r == Recipe::mxfp8 ? MxScaleRule::te : MxScaleRule::ocp;
}
MxScaleRule parse_mx_scale_rule(std::string_view name);  // "te" | "ocp"; "round-up" = te
const char* mx_scale_rule_name(MxScaleRule r);             // "te" | "ocp"

struct QuantOptions {
  Role role = Role::x;
  uint64_t seed = 0x6e6962626c65ull;  // "nibble"; stochastic rounding and seeded Hadamard signs
  // by_recipe: stochastic for nvfp4 role dy, nearest everywhere else (quartet backward included).
  Rounding rounding = Rounding::by_recipe;
  // mxfp8, mxfp4; unset = default_mx_scale_rule(recipe).
  std::optional<MxScaleRule> mx_scale_rule = std::nullopt;
  // quartet
  int hadamard_size = 32;
  bool rotate = true;
  ForwardQuantizer forward_quantizer = ForwardQuantizer::quest;
  // nvfp4: the 16-point RHT (fixed signs) belongs to wgrad operands only; off for plain quantization.
  bool nvfp4_rht = false;
  // fp8-delayed: history to use and update (its DelayedFirstStep decides the first step); null =
  // one-shot, modelling the steady state with history = this tensor's own amax (so a one-shot
  // delayed quantization equals current scaling with the margin applied).
  AmaxHistory* history = nullptr;
  int margin = 0;  // fp8-delayed margin when history is null (else the history's margin)
};

// The single entry point: applies the per-role rules of docs/spec.md §2 (hybrid E5M2 for dy in the fp8
// per-tensor recipes; 128x128 w blocks in fp8-block; 16x16 w blocks and stochastic dy in nvfp4;
// quartet x/w = Hadamard + QuEST with mask, dy = random-sign Hadamard + backward quantizer).
// Throws std::invalid_argument for shapes the recipe's blocks do not divide.
QuantizedTensor quantize(Recipe recipe, const float* x, int64_t rows, int64_t cols,
                         const QuantOptions& options = {});

// Quantize then decode to the original domain (what `nibble quantize` writes).
std::vector<float> quantize_dequantize(Recipe recipe, const float* x, int64_t rows, int64_t cols,
                                       const QuantOptions& options = {});

}  // namespace nibble::quant
