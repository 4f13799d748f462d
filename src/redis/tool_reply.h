// TOOLCHOICE and the tool calls of a generation's reply (INFER.GENERATE and INFER.RAG with TOOLS).
//   auto (default): the output is parsed into calls in the format the model's template teaches;
//   none: the output is text, never parsed;
//   required / <name>: decoding is constrained to one call (to any tool / that tool) whose arguments
//   satisfy the tool's parameter schema (chat/tool_call_grammar.h), then parsed like auto.
// A reply with calls carries `tool_calls` (an array of maps id, type "function", name, arguments),
// `finish tool_calls`, and as `text` the content without the calls' text; a STREAM's final entry is
// `finish tool_calls tokens <n> tool_calls <OpenAI-shaped JSON array>`.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/tool_calls.h"
#include "engine/reply_tool_calls.h"
#include "redis/module_api.h"

namespace infer::redis {

// TOOLCHOICE values at most this long (a tool name).
inline constexpr size_t kMaxToolChoiceBytes = 1024;

struct ToolChoice {
  enum class Kind { Auto, None, Required, Named } kind = Kind::Auto;
  std::string name;  // Named: the tool
  // Whether decoding is constrained to a call.
  bool constrains() const { return kind == Kind::Required || kind == Kind::Named; }
};

// TOOLCHOICE's value: auto, none, required (any case) or a tool's name. Returns "" or the error.
std::string parse_tool_choice(std::string_view value, ToolChoice* out);

// Background thread: the GBNF for a constraining `choice` over `tools`, in the format of the template
// source (nullptr: the model has no template of its own). Throws std::invalid_argument with a message
// for the user ("TOOLCHOICE get_time: no tool of that name").
std::string tool_choice_grammar(const std::string* template_source, const nlohmann::ordered_json& tools,
                                const ToolChoice& choice);

// Main thread: the calls as a reply array of maps {id, type, name, arguments}.
void reply_tool_calls(RedisModuleCtx* ctx, const std::vector<chat::ToolCall>& calls);

// The calls as OpenAI's JSON: [{"id", "type": "function", "function": {"name", "arguments"}}], with
// arguments as a JSON string (the STREAM's final entry).
std::string tool_calls_json(const std::vector<chat::ToolCall>& calls);

}  // namespace infer::redis
