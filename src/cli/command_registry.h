// Subcommands of the `infer` tool register themselves here, one file per subcommand (cmd_*.cpp), so
// that adding a command never touches main.cpp.
#pragma once
#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace infer::cli {

// Adds the subcommand to `app`; the callback it installs runs the command. A command reports failure by
// throwing (std::exception): main prints "infer: <what>" on stderr and exits 1.
using CommandSetup = std::function<void(CLI::App& app)>;

struct CommandRegistry {
  static std::vector<std::pair<std::string, CommandSetup>>& all();
};

// Usage, at namespace scope in cmd_x.cpp:  static infer::cli::RegisterCommand reg("x", setup_x);
struct RegisterCommand {
  RegisterCommand(std::string name, CommandSetup setup) {
    CommandRegistry::all().emplace_back(std::move(name), std::move(setup));
  }
};

}  // namespace infer::cli
