// Each subcommand lives in its own cmd_<name>.cpp and registers itself here at static-init time,
// so adding a command touches one new file and nothing else.
#pragma once
#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace nibble::cli {

struct Command {
  std::string name;
  std::string description;
  // Adds the subcommand's options to `sub` and returns the action to run when it is chosen.
  std::function<std::function<int()>(CLI::App& sub)> setup;
};

std::vector<Command>& command_registry();

// The command line as the user typed it, "nibble <args>", with arguments that need it single-quoted
// (set by main before parsing; results record it, e.g. the bench JSON's command_line).
std::string& invocation();
std::string quote_argument(const std::string& arg);

inline bool register_command(Command c) {
  command_registry().push_back(std::move(c));
  return true;
}

}  // namespace nibble::cli
