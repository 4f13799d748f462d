#include "redis/chat_prompt.h"

namespace infer::redis {

bool render_chat(const tokenizer::Tokenizer& tok, const std::vector<std::pair<std::string, std::string>>& messages,
                 std::string* out, std::string* err) {
  const std::string& tpl = tok.chat_template();
  if (tpl.empty()) {
    *err = "the model has no chat template; use PROMPT";
    return false;
  }
  std::string s;
  if (tpl.find("<|im_start|>") != std::string::npos) {
    for (const auto& [role, text] : messages) s += "<|im_start|>" + role + "\n" + text + "<|im_end|>\n";
    s += "<|im_start|>assistant\n";
  } else if (tpl.find("<|start_header_id|>") != std::string::npos) {
    s = "<|begin_of_text|>";
    for (const auto& [role, text] : messages)
      s += "<|start_header_id|>" + role + "<|end_header_id|>\n\n" + text + "<|eot_id|>";
    s += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  } else {
    *err = "the model's chat template is of a family this module cannot render; use PROMPT";
    return false;
  }
  *out = std::move(s);
  return true;
}

}  // namespace infer::redis
