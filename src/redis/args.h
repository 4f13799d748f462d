// Small helpers shared by the command handlers: argument reading and error replies.
// Main thread only (they read RedisModuleStrings owned by the command's argv).
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "redis/module_api.h"

namespace infer::redis {

// View of a Redis string; valid while the string is (argv: for the handler's duration).
std::string_view view(const RedisModuleString* s);
inline std::string str(const RedisModuleString* s) { return std::string(view(s)); }

// Case-insensitive keyword match.
bool is_word(const RedisModuleString* s, std::string_view word);

// Integer/real parsing with range checks. On failure `err` gets "<what> must be ...".
bool parse_int(const RedisModuleString* s, long long min, long long max, std::string_view what, long long* out,
               std::string* err);
bool parse_real(const RedisModuleString* s, double min, double max, std::string_view what, double* out,
                std::string* err);

// The one form of every "a keyword is missing its value" error: "<keyword> needs <what>", where
// `what` says what is missing ("a value", "a key", "a key and an element name: ...").
std::string needs_value(std::string_view keyword, std::string_view what = "a value");

// The single-valued keywords a command has seen: a second one is a mistake, never a silent override.
class GivenOnce {
 public:
  // False (err: "<keyword> given twice") when `keyword` was given before; records it otherwise.
  bool first(std::string_view keyword, std::string* err);

 private:
  std::vector<std::string_view> seen_;  // the callers' string literals
};

// Replies "-ERR <msg>" / "-<code> <msg>" (code: BUSY, TIMEOUT, WRONGTYPE ...), as one line.
int reply_error(RedisModuleCtx* ctx, const std::string& msg);
int reply_coded_error(RedisModuleCtx* ctx, const char* code, const std::string& msg);

// Refuses commands that would block inside MULTI/EXEC, Lua or a module's RM_Call (spec §3.1).
// Returns true (after replying) when the context denies blocking.
bool refuse_if_cannot_block(RedisModuleCtx* ctx, const char* command);

}  // namespace infer::redis
