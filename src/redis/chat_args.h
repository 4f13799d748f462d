// The chat options INFER.GENERATE and INFER.RAG share: MESSAGES <json>, TOOLS <json>, CHATARGS <json>,
// TEMPLATE <name>, TOOLCHOICE auto|none|required|<name> (tool_reply.h). The handler only records them (O(1), sizes checked); their JSON is parsed and the
// template rendered off the main thread by ChatInputs::render (engine/chat_prompt.h does the work).
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/chat_prompt.h"
#include "engine/engine.h"
#include "redis/module_api.h"
#include "redis/tool_reply.h"

namespace infer::redis {

struct GenerationJob;

// MESSAGES and TOOLS at most this long: the template's own output limit (chat::TemplateLimits).
inline constexpr size_t kMaxChatJsonBytes = 64u << 20;
// CHATARGS at most this long: a few template switches (enable_thinking ...).
inline constexpr size_t kMaxChatArgsBytes = 64u << 10;
// TEMPLATE names at most this long (GGUF keys tokenizer.chat_template.<name>).
inline constexpr size_t kMaxTemplateNameBytes = 256;

// The chat options as given (the handler's argv: valid during the handler only).
struct ChatOptions {
  RedisModuleString* messages = nullptr;
  RedisModuleString* tools = nullptr;
  RedisModuleString* chat_args = nullptr;
  RedisModuleString* template_name = nullptr;
  RedisModuleString* tool_choice = nullptr;
};

// True when s is MESSAGES, TOOLS, CHATARGS, TEMPLATE or TOOLCHOICE.
bool is_chat_option(const RedisModuleString* s);

enum class ChatParse { NotOption, Parsed, Error };
// Parses the chat option at argv[*i] (of those `allowed` names: e.g. {"TOOLS", "CHATARGS"}) and leaves
// *i on its value; checks sizes and repeats. Error: err says why.
ChatParse parse_chat_option(RedisModuleString** argv, int argc, int* i, ChatOptions* o, std::string* err,
                            const std::vector<std::string_view>& allowed);

struct GenerationOptions;
// What TOOLCHOICE cannot go with, checked once the command is parsed: it needs TOOLS, and a constraining
// choice (required, a name) excludes FORMAT, JSONSCHEMA and GRAMMAR. "" or the error.
std::string check_tool_choice(const ChatOptions& o, const GenerationOptions& g);

// A chat held by the job for the background: CHAT pairs or MESSAGES, with TOOLS, CHATARGS, TEMPLATE.
struct ChatInputs {
  std::string keyword = "CHAT";  // how rendering errors start: "CHAT: ...", "MESSAGES: ..."
  std::vector<std::pair<std::string_view, std::string_view>> pairs;  // CHAT role text ...
  std::string_view messages;   // MESSAGES' JSON (empty when CHAT)
  std::string_view tools;      // TOOLS' JSON ("" when absent)
  std::string_view chat_args;  // CHATARGS' JSON ("" when absent)
  std::string template_name;   // "" when absent
  ToolChoice tool_choice;      // auto when absent

  // Holds the options' strings in `job` (main thread) and returns how many bytes were held.
  size_t hold(GenerationJob* job, const ChatOptions& o);
  // Background thread: parses the JSON and renders the chat through the model's template (or a built-in
  // format); records the tools, the tool choice and the template used on the job. Throws engine::ChatError: bad JSON
  // names its option ("TOOLS is not valid JSON: ..."), anything else starts with `keyword`.
  std::string render(const engine::Engine& engine, GenerationJob* job) const;
};

}  // namespace infer::redis
