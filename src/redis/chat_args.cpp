#include "redis/chat_args.h"

#include <algorithm>

#include "redis/args.h"
#include "redis/generation_job.h"

namespace infer::redis {
namespace {

constexpr const char* kChatOptions[] = {"MESSAGES", "TOOLS", "CHATARGS", "TEMPLATE", "TOOLCHOICE"};

// Template variables the command itself sets: CHATARGS may not replace them.
constexpr const char* kReservedVariables[] = {"messages", "tools", "add_generation_prompt", "bos_token", "eos_token"};

}  // namespace

bool is_chat_option(const RedisModuleString* s) {
  return std::any_of(std::begin(kChatOptions), std::end(kChatOptions), [s](const char* k) { return is_word(s, k); });
}

ChatParse parse_chat_option(RedisModuleString** argv, int argc, int* i, ChatOptions* o, std::string* err,
                            const std::vector<std::string_view>& allowed) {
  RedisModuleString* w = argv[*i];
  const char* name = nullptr;
  for (std::string_view a : allowed)
    for (const char* k : kChatOptions)
      if (a == k && is_word(w, k)) name = k;
  if (!name) return ChatParse::NotOption;
  if (*i + 1 >= argc) return *err = needs_value(name), ChatParse::Error;
  RedisModuleString* v = argv[++*i];
  const std::string_view n(name);
  RedisModuleString** slot = n == "MESSAGES"   ? &o->messages
                             : n == "TOOLS"    ? &o->tools
                             : n == "CHATARGS" ? &o->chat_args
                             : n == "TEMPLATE" ? &o->template_name
                                               : &o->tool_choice;
  if (*slot) return *err = std::string(name) + " given twice", ChatParse::Error;
  const size_t limit = n == "CHATARGS"     ? kMaxChatArgsBytes
                       : n == "TEMPLATE"   ? kMaxTemplateNameBytes
                       : n == "TOOLCHOICE" ? kMaxToolChoiceBytes
                                           : kMaxChatJsonBytes;
  const size_t size = view(v).size();
  if (size > limit)
    return *err = std::string(name) + " of " + std::to_string(size) + " bytes is longer than " + std::to_string(limit),
           ChatParse::Error;
  if (size == 0) return *err = std::string(name) + " must not be empty", ChatParse::Error;
  *slot = v;
  return ChatParse::Parsed;
}

std::string check_tool_choice(const ChatOptions& o, const GenerationOptions& g) {
  if (!o.tool_choice) return "";
  if (!o.tools) return "TOOLCHOICE needs TOOLS";
  ToolChoice choice;
  if (std::string why = parse_tool_choice(view(o.tool_choice), &choice); !why.empty()) return why;
  if (choice.constrains() && g.constraint != OutputConstraint::None)
    return "TOOLCHOICE " + str(o.tool_choice) + " cannot be combined with FORMAT, JSONSCHEMA or GRAMMAR";
  return "";
}

size_t ChatInputs::hold(GenerationJob* job, const ChatOptions& o) {
  size_t bytes = 0;
  if (o.messages) {
    keyword = "MESSAGES";
    messages = job->hold(o.messages);
    bytes += messages.size();
  }
  if (o.tools) bytes += (tools = job->hold(o.tools)).size();
  if (o.chat_args) bytes += (chat_args = job->hold(o.chat_args)).size();
  if (o.template_name) template_name = str(o.template_name);
  if (o.tool_choice) parse_tool_choice(view(o.tool_choice), &tool_choice);  // checked by check_tool_choice
  return bytes;
}

std::string ChatInputs::render(const engine::Engine& engine, GenerationJob* job) const {
  engine::ChatRequest c;
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  if (!messages.empty()) {
    list = engine::parse_chat_json("MESSAGES", messages);
  } else {
    for (const auto& [role, text] : pairs) list.push_back({{"role", role}, {"content", text}});
  }
  if (!tools.empty()) {
    c.tools = engine::parse_chat_json("TOOLS", tools);
    if (!c.tools.is_array()) throw engine::ChatError("TOOLS must be a JSON array of tools");
  }
  if (!chat_args.empty()) {
    c.extra = engine::parse_chat_json("CHATARGS", chat_args);
    if (!c.extra.is_object()) throw engine::ChatError("CHATARGS must be a JSON object of template variables");
    for (const char* reserved : kReservedVariables)
      if (c.extra.contains(reserved))
        throw engine::ChatError(std::string("CHATARGS may not set '") + reserved + "': the command sets it");
  }
  c.template_name = template_name;
  std::string text;
  try {
    c.messages = engine::normalize_messages(list);
    text = engine::render_chat(engine.chat_templates(), engine.tokenizer(), c, &job->chat_template);
  } catch (const engine::ChatError& e) {
    throw engine::ChatError(keyword + ": " + e.what());
  }
  job->tools = std::move(c.tools);
  job->tool_choice = tool_choice;
  return text;
}

}  // namespace infer::redis
