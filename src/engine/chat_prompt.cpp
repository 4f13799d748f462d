#include "engine/chat_prompt.h"

#include "chat/chat_template.h"
#include "tokenizer/chat_template.h"

namespace infer::engine {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kToolUse = "tool_use";

std::string built_in_names() {
  std::string out;
  for (int f = static_cast<int>(tokenizer::ChatFamily::ChatML); f <= static_cast<int>(tokenizer::ChatFamily::Zephyr);
       ++f)
    out += (out.empty() ? "" : ", ") + std::string(tokenizer::chat_family_name(static_cast<tokenizer::ChatFamily>(f)));
  return out;
}

std::string token_text(const tokenizer::Tokenizer& tok, tokenizer::TokenId id) {
  return id >= 0 && id < tok.n_vocab() ? tok.token_text(id) : std::string();
}

// "message 2" for errors (1-based, as people count turns).
std::string nth(size_t i) { return "message " + std::to_string(i + 1); }

Json normalize_content(const Json& content, size_t i) {
  if (content.is_string() || content.is_null()) return content;
  if (!content.is_array()) throw ChatError(nth(i) + ": content must be a string, null or an array of text parts");
  std::string text;
  for (const auto& part : content) {
    if (!part.is_object() || part.value("type", Json()) != "text" || !part.contains("text") || !part["text"].is_string())
      throw ChatError(nth(i) + ": only content parts {\"type\": \"text\", \"text\": ...} are supported");
    if (!text.empty()) text += '\n';
    text += part["text"].get<std::string>();
  }
  return text;
}

Json normalize_tool_calls(const Json& calls, size_t i) {
  if (!calls.is_array()) throw ChatError(nth(i) + ": tool_calls must be an array");
  Json out = Json::array();
  for (const auto& call : calls) {
    if (!call.is_object() || !call.contains("function") || !call["function"].is_object() ||
        !call["function"].contains("name") || !call["function"]["name"].is_string())
      throw ChatError(nth(i) + ": each tool call needs function.name (a string)");
    Json c = call;
    Json& args = c["function"]["arguments"];
    if (args.is_string()) {
      Json parsed = Json::parse(args.get<std::string>(), nullptr, false);
      if (parsed.is_object()) args = std::move(parsed);
    } else if (args.is_null()) {
      args = Json::object();
    }
    out.push_back(std::move(c));
  }
  return out;
}

// A built-in format's prompt: plain role/text turns only.
std::string render_built_in(tokenizer::ChatFamily family, const ChatRequest& req) {
  if (!req.tools.is_null())
    throw ChatError("tools need the model's own chat template; the built-in format " +
                    std::string(tokenizer::chat_family_name(family)) + " has none");
  std::vector<tokenizer::ChatMessage> messages;
  for (size_t i = 0; i < req.messages.size(); ++i) {
    const Json& m = req.messages[i];
    if (m.contains("tool_calls")) throw ChatError(nth(i) + ": tool calls need the model's own chat template");
    const Json& content = m.contains("content") ? m["content"] : Json();
    messages.push_back({m["role"].get<std::string>(), content.is_string() ? content.get<std::string>() : ""});
  }
  try {
    return tokenizer::apply_chat_template(family, messages, req.add_generation_prompt);
  } catch (const std::invalid_argument& e) {
    throw ChatError(e.what());
  }
}

}  // namespace

ModelChatTemplates::ModelChatTemplates(const tokenizer::Tokenizer& tok) {
  auto add = [this](std::string name, const std::string& source) {
    ChatTemplateEntry e;
    e.name = std::move(name);
    e.source = source;
    try {
      e.parsed = std::make_shared<const chat::ChatTemplate>(source);
    } catch (const std::exception& ex) {
      e.error = ex.what();
    }
    entries_.push_back(std::move(e));
  };
  if (!tok.chat_template().empty()) add("", tok.chat_template());
  for (const auto& [name, source] : tok.named_chat_templates())
    if (!source.empty()) add(name, source);
}

const ChatTemplateEntry* ModelChatTemplates::find(std::string_view name) const {
  for (const auto& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

const ChatTemplateEntry* ModelChatTemplates::choose(std::string_view name, bool has_tools) const {
  if (!name.empty()) return name == "default" && !find("default") ? find("") : find(name);
  if (has_tools)
    if (const ChatTemplateEntry* t = find(kToolUse)) return t;
  return find("");
}

std::string ModelChatTemplates::names() const {
  std::string out;
  for (const auto& e : entries_) out += (out.empty() ? "" : ", ") + (e.name.empty() ? std::string("default") : e.name);
  return out;
}

Json parse_chat_json(std::string_view what, std::string_view text) {
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    // nlohmann's message starts "[json.exception.parse_error.101] parse error at line 1, column 5: ...".
    std::string msg = e.what();
    if (const size_t at = msg.find("] "); msg.rfind("[json.exception", 0) == 0 && at != std::string::npos)
      msg = msg.substr(at + 2);
    throw ChatError(std::string(what) + " is not valid JSON: " + msg + " (byte " + std::to_string(e.byte) + ")");
  }
}

Json normalize_messages(const Json& messages) {
  if (!messages.is_array()) throw ChatError("messages must be a JSON array of {role, content} objects");
  if (messages.empty()) throw ChatError("messages must hold at least one message");
  Json out = Json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& m = messages[i];
    if (!m.is_object()) throw ChatError(nth(i) + " is not an object");
    if (!m.contains("role") || !m["role"].is_string()) throw ChatError(nth(i) + " needs a role (a string)");
    const std::string role = m["role"].get<std::string>();
    if (role != "system" && role != "user" && role != "assistant" && role != "tool")
      throw ChatError(nth(i) + ": role '" + role + "' is not system, user, assistant or tool");
    Json n = m;
    if (m.contains("content")) n["content"] = normalize_content(m["content"], i);
    if (m.contains("tool_calls")) {
      if (role != "assistant") throw ChatError(nth(i) + ": only assistant messages carry tool_calls");
      n["tool_calls"] = normalize_tool_calls(m["tool_calls"], i);
    }
    if (!n.contains("content") && !n.contains("tool_calls")) throw ChatError(nth(i) + " needs content");
    for (const char* field : {"tool_call_id", "name"})
      if (m.contains(field) && !m[field].is_string()) throw ChatError(nth(i) + ": " + field + " must be a string");
    out.push_back(std::move(n));
  }
  return out;
}

std::string render_chat(const ModelChatTemplates& templates, const tokenizer::Tokenizer& tok, const ChatRequest& req,
                        const ChatTemplateEntry** used) {
  if (used) *used = nullptr;
  if (!req.tools.is_null() && !req.tools.is_array()) throw ChatError("tools must be a JSON array");
  if (!req.extra.is_object()) throw ChatError("template variables must be a JSON object");
  const ChatTemplateEntry* t = templates.choose(req.template_name, !req.tools.is_null());
  if (!t) {
    if (!req.template_name.empty()) {
      if (auto family = tokenizer::chat_family_from_name(req.template_name)) return render_built_in(*family, req);
      throw ChatError("unknown template '" + req.template_name + "': the model has " +
                      (templates.empty() ? std::string("no chat template") : "templates " + templates.names()) +
                      "; built-in formats: " + built_in_names());
    }
    throw ChatError(
        "the model has no chat template (tokenizer.chat_template); name a built-in format (" + built_in_names() + ")");
  }
  if (used) *used = t;
  const std::string label = t->name.empty() ? "the model's chat template" : "chat template '" + t->name + "'";
  if (!t->parsed) throw ChatError(label + " cannot be parsed: " + t->error);
  try {
    return t->parsed->render(req.messages, req.tools, req.add_generation_prompt, bos_text(tok), eos_text(tok),
                             req.extra);
  } catch (const chat::TemplateError& e) {
    throw ChatError(e.what());
  } catch (const std::exception& e) {
    throw ChatError(label + " failed: " + e.what());
  }
}

tokenizer::EncodeOptions chat_encode_options(const tokenizer::Tokenizer& tok, std::string_view rendered) {
  tokenizer::EncodeOptions o;
  o.parse_special = true;
  const std::string bos = bos_text(tok);
  o.add_special = bos.empty() || rendered.substr(0, bos.size()) != bos;
  return o;
}

std::string bos_text(const tokenizer::Tokenizer& tok) { return token_text(tok, tok.bos()); }
std::string eos_text(const tokenizer::Tokenizer& tok) { return token_text(tok, tok.eos()); }

}  // namespace infer::engine
