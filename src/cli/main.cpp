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
#include "usage.hpp"

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

namespace {
constexpr int kUsageExit = 2;  // usage.hpp

// The deepest subcommand the command line reached (the root when none).
const CLI::App* deepest_command(const CLI::App& app) {
  const CLI::App* at = &app;
  while (!at->get_subcommands().empty()) at = at->get_subcommands().front();
  return at;
}

// "nibble law fit": the deepest subcommand's path, for the hint after an error.
std::string command_path(const CLI::App& app) {
  std::string path = "nibble";
  for (const CLI::App* at = &app; !at->get_subcommands().empty();) {
    at = at->get_subcommands().front();
    path += " " + at->get_name();
  }
  return path;
}

// A parse error in nibble's words. CLI11 reports a missing or mistyped command as "A subcommand is
// required"; say which word was not a command and which commands there are.
std::string parse_error_message(const CLI::App& root, const CLI::Error& e) {
  const CLI::App* at = deepest_command(root);
  std::string message = e.what();
  const auto commands = at->get_subcommands([](const CLI::App*) { return true; });
  if (e.get_name() == "RequiredError" && message.rfind("A subcommand", 0) == 0 && !commands.empty()) {
    std::string names;
    for (const CLI::App* c : commands) names += (names.empty() ? "" : ", ") + c->get_name();
    const auto extra = at->remaining();
    message = extra.empty() ? "a command is needed: one of " + names
                            : "unknown command '" + extra.front() + "'; the commands are " + names;
  }
  return "nibble: error: " + message + "\nrun '" + command_path(root) + " --help' for the options\n";
}
}  // namespace

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
  // CLI11's parse errors in nibble's words: the prefix every error carries and where the options are listed.
  app.failure_message([](const CLI::App* root, const CLI::Error& e) { return parse_error_message(*root, e); });
  // One try for parsing and running: a check run by the parser (a GPU name read from the database) may fail
  // like a command does.
  try {
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      // --help and --version print and exit 0; every other parse error is a usage error.
      return app.exit(e) == 0 ? 0 : kUsageExit;
    }
    return action ? action() : 0;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "nibble: error: %s\nrun '%s --help' for the options\n", e.what(), command_path(app).c_str());
    return kUsageExit;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "nibble: error: out of host memory (an allocation failed): the input or the shape is too "
                         "large for this machine; use a smaller tensor, batch or model\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nibble: error: %s\n", e.what());
    return 1;
  }
}
