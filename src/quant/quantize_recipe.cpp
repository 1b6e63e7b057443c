// The one entry point: per-role rules of every recipe (docs/spec.md §2, docs/recipes.md), and the
// recipe and role names as users type them.
#include <stdexcept>
#include <string>

#include "nibble/quant/quantizers.hpp"
#include "nibble/quant/recipe.hpp"
#include "shape_checks.hpp"

namespace nibble::quant {

namespace {
SrKey rounding_key(const QuantOptions& o, uint32_t stream, bool recipe_default_stochastic) {
  const bool sr = o.rounding == Rounding::by_recipe ? recipe_default_stochastic : o.rounding == Rounding::stochastic;
  return SrKey{sr, o.seed, stream};
}

void reject_stochastic(Recipe recipe, const QuantOptions& o, const char* why) {
  if (o.rounding == Rounding::stochastic) {
    throw std::invalid_argument(std::string("stochastic rounding is not offered for recipe ") + recipe_name(recipe) +
                                " (" + why + "); use rounding nearest or by-recipe");
  }
}

QuantizedTensor quantize_per_role(Recipe recipe, const float* x, int64_t rows, int64_t cols, const QuantOptions& o) {
  const bool dy = o.role == Role::dy;
  // Hybrid fp8: gradients need range more than precision.
  const ElementFormat fp8 = dy ? ElementFormat::e5m2 : ElementFormat::e4m3;
  switch (recipe) {
    case Recipe::bf16:
      reject_stochastic(recipe, o, "it is the round-to-nearest baseline");
      return quantize_bf16(x, rows, cols);
    case Recipe::fp8_current:
      return quantize_fp8_current(x, rows, cols, fp8, 0, rounding_key(o, kStreamFp8, false));
    case Recipe::fp8_delayed: {
      detail::require_input("fp8-delayed", x, rows, cols);
      const float amax = amax_of(x, rows * cols);
      // Without a history (one-shot tools) the steady state is modelled: history = this tensor's amax.
      const float s_enc = o.history ? o.history->encode_scale(element_max(fp8), amax)
                                    : per_tensor_encode_scale(element_max(fp8), amax, o.margin);
      const bool first = o.history && o.history->size() == 0;
      QuantizedTensor q = quantize_fp8_per_tensor(x, rows, cols, fp8, s_enc, rounding_key(o, kStreamFp8, false));
      if (o.history) o.history->record(amax, element_max(fp8));
      q.produced_by = std::string("cpu-reference fp8 per-tensor delayed scaling ") + element_format_name(fp8) +
                      (!o.history ? " (steady state: history = own amax)"
                       : !first   ? " (history)"
                       : o.history->first_step() == DelayedFirstStep::te ? " (first step: scale 1)"
                                                                         : " (first step: own amax)");
      return q;
    }
    case Recipe::fp8_block:
      reject_stochastic(recipe, o, "its blocks round to nearest");
      return o.role == Role::w ? quantize_fp8_block_128x128(x, rows, cols) : quantize_fp8_block_1x128(x, rows, cols);
    case Recipe::mxfp8:
      return quantize_mx(x, rows, cols, ElementFormat::e4m3, o.mx_scale_rule.value_or(default_mx_scale_rule(recipe)),
                         rounding_key(o, kStreamMx, false));
    case Recipe::mxfp4:
      return quantize_mx(x, rows, cols, ElementFormat::e2m1, o.mx_scale_rule.value_or(default_mx_scale_rule(recipe)),
                         rounding_key(o, kStreamMx, false));
    case Recipe::nvfp4:
      return quantize_nvfp4(x, rows, cols, o.role == Role::w ? 16 : 1, rounding_key(o, kStreamNvfp4, dy), o.nvfp4_rht);
    case Recipe::quartet:
      if (dy) {
        return quantize_quartet_backward(x, rows, cols, o.seed, o.hadamard_size, o.rotate,
                                         rounding_key(o, kStreamQuartetBackward, false));
      }
      reject_stochastic(recipe, o, "the forward pass uses QuEST round-to-nearest; stochastic applies to role dy");
      return quantize_quartet_forward(x, rows, cols, o.hadamard_size, o.rotate, o.forward_quantizer);
  }
  throw std::invalid_argument("unknown recipe value; valid recipes: " + recipe_name_list());
}
}  // namespace

QuantizedTensor quantize(Recipe recipe, const float* x, int64_t rows, int64_t cols, const QuantOptions& options) {
  QuantizedTensor q = quantize_per_role(recipe, x, rows, cols, options);
  q.produced_by += std::string(", role ") + role_name(options.role);
  return q;
}

std::vector<float> quantize_dequantize(Recipe recipe, const float* x, int64_t rows, int64_t cols,
                                       const QuantOptions& options) {
  return dequantize_original(quantize(recipe, x, rows, cols, options));
}

}  // namespace nibble::quant

// Recipe and role names as users type them.
namespace nibble::quant {

const char* recipe_name(Recipe r) {
  const auto i = static_cast<size_t>(r);
  return i < std::size(kRecipeNames) ? kRecipeNames[i].data() : "?";  // the names are literals: terminated
}

Recipe parse_recipe(std::string_view name) {
  for (Recipe r : kAllRecipes) {
    if (name == recipe_name(r)) return r;
  }
  throw std::invalid_argument("unknown recipe '" + std::string(name) + "'; valid recipes: " + recipe_name_list());
}

const char* role_name(Role r) {
  switch (r) {
    case Role::x: return "x";
    case Role::w: return "w";
    case Role::dy: return "dy";
  }
  return "?";
}

Role parse_role(std::string_view name) {
  if (name == "x") return Role::x;
  if (name == "w") return Role::w;
  if (name == "dy") return Role::dy;
  throw std::invalid_argument("unknown role '" + std::string(name) +
                              "'; valid roles: x (activation), w (weight), dy (gradient)");
}

MxScaleRule parse_mx_scale_rule(std::string_view name) {
  if (name == "te" || name == "round-up" || name == "round_up") return MxScaleRule::te;
  if (name == "ocp") return MxScaleRule::ocp;
  throw std::invalid_argument("unknown MX scale rule '" + std::string(name) +
                              "'; valid: te (Transformer Engine: E8M0 of amax * fl(1/fmax) rounded up, "
                              "mxfp8's default; alias round-up) or ocp (floor(log2 amax) - emax, mxfp4's default)");
}

const char* mx_scale_rule_name(MxScaleRule r) { return r == MxScaleRule::te ? "te" : "ocp"; }

}  // namespace nibble::quant
