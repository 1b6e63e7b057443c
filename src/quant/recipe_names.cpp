// Recipe and role names as users type them.
#include <stdexcept>
#include <string>

#include "nibble/quant/recipe.hpp"

namespace nibble::quant {

const char* recipe_name(Recipe r) {
  switch (r) {
    case Recipe::bf16: return "bf16";
    case Recipe::fp8_delayed: return "fp8-delayed";
    case Recipe::fp8_current: return "fp8-current";
    case Recipe::fp8_block: return "fp8-block";
    case Recipe::mxfp8: return "mxfp8";
    case Recipe::nvfp4: return "nvfp4";
    case Recipe::mxfp4: return "mxfp4";
    case Recipe::quartet: return "quartet";
  }
  return "?";
}

Recipe parse_recipe(std::string_view name) {
  for (Recipe r : kAllRecipes) {
    if (name == recipe_name(r)) return r;
  }
  throw std::invalid_argument("unknown recipe '" + std::string(name) + "'; valid recipes: " + kRecipeNameList);
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

}  // namespace nibble::quant
