// TOOLCHOICE parsing, its grammar, and the tool calls of a reply (see tool_reply.h).
#include "redis/tool_reply.h"

#include <cctype>
#include <stdexcept>

#include "chat/tool_call_grammar.h"

namespace infer::redis {
namespace {

bool same_word(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

chat::ToolCallFormat format_of(const std::string* template_source) {
  return template_source ? chat::detect_tool_call_format(*template_source) : chat::ToolCallFormat::None;
}

}  // namespace

std::string parse_tool_choice(std::string_view value, ToolChoice* out) {
  if (value.empty()) return "TOOLCHOICE must not be empty";
  if (value.size() > kMaxToolChoiceBytes)
    return "TOOLCHOICE of " + std::to_string(value.size()) + " bytes is longer than " +
           std::to_string(kMaxToolChoiceBytes);
  if (same_word(value, "auto")) {
    *out = {ToolChoice::Kind::Auto, ""};
  } else if (same_word(value, "none")) {
    *out = {ToolChoice::Kind::None, ""};
  } else if (same_word(value, "required")) {
    *out = {ToolChoice::Kind::Required, ""};
  } else {
    *out = {ToolChoice::Kind::Named, std::string(value)};
  }
  return "";
}

std::string tool_choice_grammar(const std::string* template_source, const nlohmann::ordered_json& tools,
                                const ToolChoice& choice) {
  const chat::ToolCallFormat format = format_of(template_source);
  const std::string shown = choice.kind == ToolChoice::Kind::Required ? "required" : choice.name;
  if (format == chat::ToolCallFormat::None)
    throw std::invalid_argument("TOOLCHOICE " + shown +
                                ": the model's chat template teaches no tool-call format this module knows");
  try {
    return chat::tool_call_grammar(format, tools, shown);
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    if (what.rfind("TOOLCHOICE", 0) == 0) throw;
    throw std::invalid_argument("TOOLCHOICE " + shown + ": " + what);
  }
}

void reply_tool_calls(RedisModuleCtx* ctx, const std::vector<chat::ToolCall>& calls) {
  rm::ReplyWithArray(ctx, static_cast<long>(calls.size()));
  for (const chat::ToolCall& call : calls) {
    rm::ReplyWithMap(ctx, 4);
    const std::pair<const char*, const std::string*> fields[] = {
        {"id", &call.id}, {"type", nullptr}, {"name", &call.name}, {"arguments", &call.arguments}};
    for (const auto& [name, value] : fields) {
      rm::ReplyWithCString(ctx, name);
      if (value) {
        rm::ReplyWithStringBuffer(ctx, value->data(), value->size());
      } else {
        rm::ReplyWithCString(ctx, "function");
      }
    }
  }
}

std::string tool_calls_json(const std::vector<chat::ToolCall>& calls) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const chat::ToolCall& call : calls)
    out.push_back({{"id", call.id},
                   {"type", "function"},
                   {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
  return out.dump();
}

}  // namespace infer::redis
