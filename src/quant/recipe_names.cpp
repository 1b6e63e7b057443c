// Recipe and role names as users type them.
#include <stdexcept>
#include <string>

#include "nibble/quant/recipe.hpp"

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
