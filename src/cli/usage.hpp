// The CLI's one exit-code convention: a command line that asks for something invalid is a usage error
// (exit 2, like CLI11's own parse errors: unknown flag, missing argument, value out of range); a valid
// command that fails (a missing or unreadable file, data it cannot use) exits 1. Both print
// "nibble: error: ..." (main.cpp).
#pragma once
#include <CLI/CLI.hpp>

#include <stdexcept>
#include <string>

namespace nibble::cli {

// Thrown by a command for a bad combination or value of its options found after parsing.
struct UsageError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// A CLI11 check from a parser that throws std::invalid_argument (quant::parse_recipe, ...): a bad value
// fails the parse (exit 2) with the parser's own message, which lists the valid values.
template <class Parse>
CLI::Validator value_check(Parse parse, std::string description) {
  return CLI::Validator(
      [parse](std::string& value) -> std::string {
        try {
          parse(value);
          return {};
        } catch (const std::invalid_argument& e) {
          return e.what();
        }
      },
      std::move(description));
}

// The checks several commands' options share; each message lists the valid values.
CLI::Validator recipe_check();         // a recipe name (quant/recipe_list.hpp)
CLI::Validator gpu_check();            // a GPU of the performance model's database (data/gpus.json)
CLI::Validator mx_scale_rule_check();  // --mx-scale-rule: default, or a rule quant::parse_mx_scale_rule knows

}  // namespace nibble::cli
