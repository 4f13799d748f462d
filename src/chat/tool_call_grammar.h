// The grammar that constrains a reply to one tool call (TOOLCHOICE required or a tool's name): the call
// written the way the model's format spells it, its arguments valid for the tool's `parameters` schema.
//
// Where a format's own marker is a control token (Mistral's [TOOL_CALLS], Granite's <|tool_call|>, Command
// R7B's <|START_ACTION|>), the grammar writes the bare JSON array that parse_tool_calls also accepts, since
// constrained decoding never samples control tokens. DeepSeek and gpt-oss have no such bare form: their
// markers are written as text.
//
// Thread-safety: pure function.
#pragma once
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "chat/tool_calls.h"

namespace infer::chat {

// GBNF (start rule `root`) whose language is exactly one call in `format` to one of `tools` (an
// OpenAI-style array of {"type": "function", "function": {"name", "parameters"}}, or of bare {"name",
// "parameters"}), with arguments valid for that tool's `parameters` (absent: any object). `choice`
// "required" allows any tool; otherwise it is the one tool's name. Throws std::invalid_argument for an
// unknown name, an empty or malformed tool list, parameters that are not an object schema, a schema the
// converter refuses (its message, prefixed with the tool's name), or the format None.
std::string tool_call_grammar(ToolCallFormat format, const nlohmann::ordered_json& tools, std::string_view choice);

}  // namespace infer::chat
