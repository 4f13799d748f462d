// A conversation turned into prompt tokens the way the model's own chat template says, for every front
// end (the Redis commands, `infer generate --chat`):
//   1. ModelChatTemplates parses the GGUF's templates once per model load: tokenizer.chat_template (the
//      default) and every tokenizer.chat_template.<name> (e.g. `tool_use`); one that does not parse is
//      kept as its error, which is what a chat on it reports.
//   2. render_chat renders OpenAI-shaped messages (checked by normalize_messages), tools and extra
//      template variables through the chosen template, with bos_token/eos_token the vocabulary's texts.
//      A model without a template falls back to a built-in format of tokenizer/chat_template.h, chosen
//      by name.
//   3. encode_chat tokenises the rendering with special tokens parsed, adding BOS only when the text
//      does not already start with it (what llama-server does).
// Thread-safety: ModelChatTemplates is immutable after construction; everything here may run
// concurrently. Rendering is work that grows with its input: hosts keep it off latency-critical threads.
#pragma once
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace infer::chat {
class ChatTemplate;
}

namespace infer::engine {

// What a chat request cannot do, in words for the user (the template's own message for a template that
// fails: "raise_exception: System role not supported").
class ChatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ChatTemplateEntry {
  std::string name;    // "" for tokenizer.chat_template, else the <name> of tokenizer.chat_template.<name>
  std::string source;  // the template text
  std::shared_ptr<const chat::ChatTemplate> parsed;  // null when it did not parse
  std::string error;   // why it did not parse
};

class ModelChatTemplates {
 public:
  ModelChatTemplates() = default;  // no templates
  // Parses the tokenizer's templates (an empty default template counts as none).
  explicit ModelChatTemplates(const tokenizer::Tokenizer& tok);

  // The template named `name` ("" the default); nullptr when the model has none of that name.
  const ChatTemplateEntry* find(std::string_view name) const;
  // The template a request uses: `name` when given (a model template, else nullptr: the caller tries a
  // built-in format), else `tool_use` when the request has tools and the model has that variant, else
  // the default one (nullptr when the model has none).
  const ChatTemplateEntry* choose(std::string_view name, bool has_tools) const;
  // The names of the model's templates ("default" for the unnamed one), for error messages.
  std::string names() const;
  bool empty() const { return entries_.empty(); }

 private:
  std::vector<ChatTemplateEntry> entries_;
};

struct ChatRequest {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();  // normalize_messages' output
  nlohmann::ordered_json tools;  // an array, or null when the request has none (undefined in the template)
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();  // more template variables
  std::string template_name;     // "" to let ModelChatTemplates::choose pick
  bool add_generation_prompt = true;
};

// `text` parsed as JSON; throws ChatError "<what> is not valid JSON: ... at line L, column C ..." (with
// the byte position) otherwise.
nlohmann::ordered_json parse_chat_json(std::string_view what, std::string_view text);

// Checks OpenAI chat messages and puts them in the shape templates read: an array of objects whose
// role is system, user, assistant or tool; content a string, null, or an array of {type: "text", text}
// parts (joined with "\n" into one string); an assistant's tool_calls an array of {function: {name,
// arguments}} whose arguments, when a string holding a JSON object, become that object (templates
// print them with tojson). Throws ChatError naming the message and field.
nlohmann::ordered_json normalize_messages(const nlohmann::ordered_json& messages);

// The prompt text of `req` (see the header comment); `used` (optional) gets the model template used,
// nullptr for a built-in format. Throws ChatError.
std::string render_chat(const ModelChatTemplates& templates, const tokenizer::Tokenizer& tok, const ChatRequest& req,
                        const ChatTemplateEntry** used = nullptr);

// Encode options for a rendered chat: special tokens parsed; BOS (add_special) only when the text does
// not start with the vocabulary's BOS text.
tokenizer::EncodeOptions chat_encode_options(const tokenizer::Tokenizer& tok, std::string_view rendered);

// The vocabulary's BOS / EOS token text ("" when it has none): the template's bos_token / eos_token.
std::string bos_text(const tokenizer::Tokenizer& tok);
std::string eos_text(const tokenizer::Tokenizer& tok);

}  // namespace infer::engine
