// The option checks several commands share (usage.hpp).
#include "usage.hpp"

#include "nibble/predict.hpp"
#include "nibble/quant.hpp"
#include "nibble/quant/recipe_list.hpp"

namespace nibble::cli {

CLI::Validator recipe_check() {
  return CLI::Validator(
      [](std::string& name) -> std::string {
        if (quant::is_recipe_name(name)) return {};
        return "unknown recipe '" + name + "'; valid recipes: " + quant::recipe_name_list();
      },
      "RECIPE");
}

CLI::Validator gpu_check() {
  return value_check([](const std::string& name) { predict::find_gpu(predict::load_gpu_database(), name); }, "GPU");
}

CLI::Validator mx_scale_rule_check() {
  return value_check(
      [](const std::string& rule) {
        if (rule == "default") return;
        try {
          quant::parse_mx_scale_rule(rule);
        } catch (const std::invalid_argument& e) {
          throw std::invalid_argument(std::string(e.what()) + "; or default");
        }
      },
      "RULE");
}

}  // namespace nibble::cli
