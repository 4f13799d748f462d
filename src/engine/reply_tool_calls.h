// The tool calls in a finished generation, read in the format the chat template teaches (chat/tool_calls.h).
// Thread-safety: pure function of its arguments; any thread.
#pragma once
#include <optional>
#include <string>

#include "chat/tool_calls.h"
#include "engine/engine.h"
#include "tokenizer/tokenizer.h"

namespace infer::engine {

// The calls in `result` when its template source (nullptr: no template of the model's own) teaches a
// format and the output holds calls; nullopt otherwise. Generated text leaves control tokens out, and
// some formats mark calls with them (Llama's <|python_tag|>, Mistral's [TOOL_CALLS]): for those, when the
// text holds no call, `result.ids` are read again with control tokens written out.
std::optional<chat::ParsedReply> parse_result_tool_calls(const tokenizer::Tokenizer& tok,
                                                         const std::string* template_source, const Result& result);

}  // namespace infer::engine
