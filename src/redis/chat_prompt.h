// CHAT role text ... → prompt text, for the chat-template families recognised by their markers in
// tokenizer.chat_template (ChatML `<|im_start|>`, Llama-3 `<|start_header_id|>`). A general Jinja
// renderer belongs in the tokenizer layer; until it exists, other templates are refused clearly.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace infer::redis {

// Renders the messages and the assistant turn opener. Returns false with `err` set when the model has
// no chat template or one of an unknown family.
bool render_chat(const tokenizer::Tokenizer& tok, const std::vector<std::pair<std::string, std::string>>& messages,
                 std::string* out, std::string* err);

}  // namespace infer::redis
