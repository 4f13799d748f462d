// COMMAND DOCS argument trees from one line of syntax each, in the notation of docs/redis.md:
//   name:type    an argument (string, integer, double, key@N with N its key spec's index)
//   WORD         a token; followed by an argument or a group in the same sequence, it is that one's token
//   [ ... ]      optional        { a | b }  one of        ( ... )  a block        x...  repeated
// A group of several items is a block named after its first token. The trees live as long as the module
// (Redis keeps the pointers).
#pragma once
#include <stdexcept>
#include <string>

#include "redis/module_api.h"

namespace infer::redis {

// The argument tree (an array ending in a zeroed entry), or nullptr for an empty syntax; throws
// std::invalid_argument naming the position of a malformed one.
RedisModuleCommandArg* parse_command_syntax(const std::string& syntax);

}  // namespace infer::redis
