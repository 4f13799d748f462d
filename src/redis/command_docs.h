// COMMAND DOCS of every INFER.* command: its complexity and the syntax its argument tree is parsed from
// (command_syntax.h), beside the grammar docs/redis.md and docs/vector.md give. One row per command;
// create_commands() looks each command up here.
#pragma once
#include <span>

namespace infer::redis {

struct CommandDoc {
  const char* name;
  const char* complexity;
  const char* syntax;  // the arguments after the command name
};

std::span<const CommandDoc> command_docs();
// The row of `name` ("infer.generate"), or nullptr.
const CommandDoc* find_command_doc(const char* name);

}  // namespace infer::redis
