// Tool calls of a finished generation (see reply_tool_calls.h).
#include "engine/reply_tool_calls.h"

namespace infer::engine {

std::optional<chat::ParsedReply> parse_result_tool_calls(const tokenizer::Tokenizer& tok,
                                                         const std::string* template_source, const Result& result) {
  const chat::ToolCallFormat format =
      template_source ? chat::detect_tool_call_format(*template_source) : chat::ToolCallFormat::None;
  if (format == chat::ToolCallFormat::None) return std::nullopt;
  chat::ParsedReply parsed = chat::parse_tool_calls(format, result.text);
  if (!parsed.tool_calls.empty()) return parsed;
  // Hermes and Functionary markers are ordinary text.
  if (format == chat::ToolCallFormat::Hermes || format == chat::ToolCallFormat::Functionary) return std::nullopt;
  std::string with_control;
  bool any_control = false;
  for (int32_t id : result.ids) {
    std::string kept = tok.token_to_piece(id, /*remove_special=*/false);
    if (!any_control && kept != tok.token_to_piece(id, /*remove_special=*/true)) any_control = true;
    with_control += kept;
  }
  if (!any_control) return std::nullopt;
  parsed = chat::parse_tool_calls(format, with_control);
  if (parsed.tool_calls.empty()) return std::nullopt;
  return parsed;
}

}  // namespace infer::engine
