// `infer`: the command-line tool (inspect, tokenize, generate, bench, synth, ...).
#include <algorithm>
#include <cstdio>
#include <exception>

#include "cli/command_registry.h"

namespace infer::cli {
std::vector<std::pair<std::string, CommandSetup>>& CommandRegistry::all() {
  static std::vector<std::pair<std::string, CommandSetup>> commands;
  return commands;
}
}  // namespace infer::cli

int main(int argc, char** argv) {
  CLI::App app{"infer: LLM inference tools of redis-infer"};
  app.require_subcommand(1);
  // --help shows each option's default (subcommands inherit this from the app).
  app.option_defaults()->always_capture_default();
  auto& commands = infer::cli::CommandRegistry::all();
  std::sort(commands.begin(), commands.end(), [](auto& a, auto& b) { return a.first < b.first; });
  for (auto& [name, setup] : commands) setup(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "infer: %s\n", e.what());
    return 1;
  }
  return 0;
}
