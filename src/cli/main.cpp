// nibble: low-precision (FP8/FP4) transformer training toolkit. Entry point; subcommands register
// themselves in cmd_*.cpp.
#include <algorithm>
#include <cctype>
#include <cstring>
#include <cstdio>
#include <exception>
#include <functional>
#include <new>

#include "command_registry.hpp"

namespace nibble::cli {
std::vector<Command>& command_registry() {
  static std::vector<Command> commands;
  return commands;
}
std::string& invocation() {
  static std::string line = "nibble";
  return line;
}
std::string quote_argument(const std::string& arg) {
  const bool plain = !arg.empty() && std::all_of(arg.begin(), arg.end(), [](unsigned char c) {
    return std::isalnum(c) || std::strchr("-_.,/=:+@%", c) != nullptr;
  });
  if (plain) return arg;
  std::string q = "'";
  for (char c : arg) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}
}  // namespace nibble::cli

int main(int argc, char** argv) {
  using namespace nibble::cli;
  CLI::App app{"nibble: which precision recipe should I train in, and how fast is it?"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "nibble 0.1.0");
  auto& commands = command_registry();
  std::sort(commands.begin(), commands.end(),
            [](const Command& a, const Command& b) { return a.name < b.name; });
  std::function<int()> action;
  for (auto& c : commands) {
    CLI::App* sub = app.add_subcommand(c.name, c.description);
    auto run = c.setup(*sub);
    sub->callback([&action, run] { action = run; });
  }
  for (int i = 1; i < argc; ++i) invocation() += " " + quote_argument(argv[i]);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return action ? action() : 0;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "nibble: error: out of host memory (an allocation failed): the input or the shape is too "
                         "large for this machine; use a smaller tensor, batch or model\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nibble: error: %s\n", e.what());
    return 1;
  }
}
