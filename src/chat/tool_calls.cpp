// Tool-call parsing: one small scanner per format over the generated text. Each scanner walks the text
// once, copying what is not a call into the content; a call that does not parse whole is copied too.
#include "chat/tool_calls.h"

#include <cstdint>
#include <optional>

#include <nlohmann/json.hpp>

namespace infer::chat {
namespace {

using ordered_json = nlohmann::ordered_json;
constexpr size_t npos = std::string_view::npos;

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

size_t skip_space(std::string_view text, size_t pos) {
  while (pos < text.size() && is_space(text[pos])) ++pos;
  return pos;
}

std::string_view trim(std::string_view text) {
  size_t begin = skip_space(text, 0);
  size_t end = text.size();
  while (end > begin && is_space(text[end - 1])) --end;
  return text.substr(begin, end - begin);
}

bool only_space(std::string_view text) { return trim(text).empty(); }

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         c == '.';
}

// One past the end of the JSON object or array that opens at `pos`, or npos where it does not close.
// Only brackets and strings matter here; the value is validated by parsing the span afterwards.
size_t json_container_end(std::string_view text, size_t pos) {
  if (pos >= text.size() || (text[pos] != '{' && text[pos] != '[')) return npos;
  int depth = 0;
  bool in_string = false;
  for (size_t i = pos; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return npos;
}

std::optional<ordered_json> parse_json(std::string_view text) {
  ordered_json value = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return std::nullopt;
  return value;
}

// Arguments as compact object text: an object, or a string holding one (some models quote them).
std::optional<std::string> arguments_text(const ordered_json& value) {
  if (value.is_object()) return value.dump();
  if (value.is_string()) {
    auto inner = parse_json(value.get<std::string>());
    if (inner && inner->is_object()) return inner->dump();
  }
  return std::nullopt;
}

// The key names one format uses in its call objects.
struct CallKeys {
  const char* name;
  const char* arguments;
  const char* id = nullptr;  // the model's own id, kept where present
};

// A call from one JSON object, or nullopt when it lacks a name or object arguments. Missing arguments
// are an empty object: models leave them out for tools without parameters.
std::optional<ToolCall> call_from_object(const ordered_json& object, const CallKeys& keys) {
  if (!object.is_object()) return std::nullopt;
  auto name = object.find(keys.name);
  if (name == object.end() || !name->is_string() || name->get<std::string>().empty()) return std::nullopt;
  ToolCall call;
  call.name = name->get<std::string>();
  // The format's own key first; the other common spelling as models mix them up.
  auto args = object.find(keys.arguments);
  if (args == object.end()) args = object.find("arguments");
  if (args == object.end()) args = object.find("parameters");
  if (args == object.end()) {
    call.arguments = "{}";
  } else if (auto text = arguments_text(*args)) {
    call.arguments = *text;
  } else {
    return std::nullopt;
  }
  if (keys.id) {
    auto id = object.find(keys.id);
    if (id != object.end() && id->is_string()) call.id = id->get<std::string>();
  }
  return call;
}

// Calls from a JSON array of call objects; nullopt unless every element is a call.
std::optional<std::vector<ToolCall>> calls_from_array(std::string_view json_text, const CallKeys& keys) {
  auto array = parse_json(json_text);
  if (!array || !array->is_array() || array->empty()) return std::nullopt;
  std::vector<ToolCall> calls;
  for (const auto& element : *array) {
    auto call = call_from_object(element, keys);
    if (!call) return std::nullopt;
    calls.push_back(std::move(*call));
  }
  return calls;
}

// The reply under construction: content pieces and calls, in order.
struct Reply {
  std::string content;
  std::vector<ToolCall> calls;
};

// A JSON object starting at `pos` (after whitespace): the call and one past its end.
struct ObjectCall {
  ToolCall call;
  size_t end;
};
std::optional<ObjectCall> object_call_at(std::string_view text, size_t pos, const CallKeys& keys) {
  pos = skip_space(text, pos);
  size_t end = json_container_end(text, pos);
  if (end == npos || text[pos] != '{') return std::nullopt;
  auto object = parse_json(text.substr(pos, end - pos));
  if (!object) return std::nullopt;
  auto call = call_from_object(*object, keys);
  if (!call) return std::nullopt;
  return ObjectCall{std::move(*call), end};
}

// A JSON array of calls starting at `pos` (after whitespace): the calls and one past its end.
struct ArrayCalls {
  std::vector<ToolCall> calls;
  size_t end;
};
std::optional<ArrayCalls> array_calls_at(std::string_view text, size_t pos, const CallKeys& keys) {
  pos = skip_space(text, pos);
  size_t end = json_container_end(text, pos);
  if (end == npos || text[pos] != '[') return std::nullopt;
  auto calls = calls_from_array(text.substr(pos, end - pos), keys);
  if (!calls) return std::nullopt;
  return ArrayCalls{std::move(*calls), end};
}

bool starts_with_at(std::string_view text, size_t pos, std::string_view prefix) {
  return text.substr(pos, prefix.size()) == prefix;
}

// Where calls may start: after a leading <think>...</think> block, whose text is reasoning, not calls.
size_t after_reasoning(std::string_view text) {
  size_t start = skip_space(text, 0);
  if (!starts_with_at(text, start, "<think>")) return 0;
  size_t close = text.find("</think>", start);
  return close == npos ? text.size() : close + 8;
}

// The formats whose calls follow a marker and whose body one function reads: the scanner copies text up
// to each marker into the content, tries the body, and on failure copies the marker and moves on.
template <typename ReadBody>
Reply scan_markers(std::string_view text, std::string_view marker, size_t from, ReadBody read_body) {
  Reply reply;
  reply.content.append(text.substr(0, from));
  size_t pos = from;
  while (pos < text.size()) {
    size_t at = text.find(marker, pos);
    if (at == npos) break;
    reply.content.append(text.substr(pos, at - pos));
    size_t body = at + marker.size();
    size_t end = read_body(text, body, reply.calls);
    if (end == npos) {
      reply.content.append(marker);
      pos = body;
    } else {
      pos = end;
    }
  }
  if (pos < text.size()) reply.content.append(text.substr(pos));
  return reply;
}

// --- Hermes: <tool_call>{"name": ..., "arguments": ...}</tool_call> ---------------------------------

// An argument written as text (the XML forms below): JSON where it is a number, boolean, null, array or
// object, else the text itself as a string.
ordered_json xml_argument_value(std::string_view text) {
  if (text.starts_with('\n')) text.remove_prefix(1);
  if (text.ends_with('\n')) text.remove_suffix(1);
  auto value = parse_json(text);
  if (value && !value->is_string()) return *value;
  return std::string(text);
}

// Text between `open` and `close` at `pos` (after whitespace): the inside and one past `close`.
std::optional<std::pair<std::string_view, size_t>> tagged_at(std::string_view text, size_t pos, std::string_view open,
                                                             std::string_view close) {
  pos = skip_space(text, pos);
  if (!starts_with_at(text, pos, open)) return std::nullopt;
  size_t end = text.find(close, pos + open.size());
  if (end == npos) return std::nullopt;
  return std::make_pair(text.substr(pos + open.size(), end - pos - open.size()), end + close.size());
}

// The XML bodies other <tool_call> templates teach: <function=N><parameter=K>\nV\n</parameter></function>
// (Qwen 3.5, Nemotron, StepFun) and N<arg_key>K</arg_key><arg_value>V</arg_value> (GLM 4.7, Laguna).
// The call and one past its body (before </tool_call>).
std::optional<ObjectCall> xml_call_at(std::string_view text, size_t pos) {
  pos = skip_space(text, pos);
  ordered_json args = ordered_json::object();
  ToolCall call;
  if (starts_with_at(text, pos, "<function=")) {
    size_t name_end = text.find('>', pos);
    if (name_end == npos) return std::nullopt;
    call.name = std::string(trim(text.substr(pos + 10, name_end - pos - 10)));
    pos = name_end + 1;
    while (true) {
      size_t at = skip_space(text, pos);
      if (starts_with_at(text, at, "</function>")) {
        pos = at + 11;
        break;
      }
      if (!starts_with_at(text, at, "<parameter=")) return std::nullopt;
      size_t key_end = text.find('>', at);
      size_t value_end = key_end == npos ? npos : text.find("</parameter>", key_end);
      if (value_end == npos) return std::nullopt;
      args[std::string(trim(text.substr(at + 11, key_end - at - 11)))] =
          xml_argument_value(text.substr(key_end + 1, value_end - key_end - 1));
      pos = value_end + 12;
    }
  } else {
    size_t name_end = pos;
    while (name_end < text.size() && is_name_char(text[name_end])) ++name_end;
    call.name = std::string(text.substr(pos, name_end - pos));
    pos = name_end;
    while (auto key = tagged_at(text, pos, "<arg_key>", "</arg_key>")) {
      auto value = tagged_at(text, key->second, "<arg_value>", "</arg_value>");
      if (!value) return std::nullopt;
      args[std::string(trim(key->first))] = xml_argument_value(value->first);
      pos = value->second;
    }
    // A bare word is a call only when the tag closes right after it.
    if (!starts_with_at(text, skip_space(text, pos), "</tool_call>")) return std::nullopt;
  }
  if (call.name.empty()) return std::nullopt;
  call.arguments = args.dump();
  return ObjectCall{std::move(call), pos};
}

// <tool_calls> holding a JSON array of calls (Apriel) or call objects one after another (MiniMax M1).
Reply parse_tool_calls_block(std::string_view text) {
  constexpr std::string_view close = "</tool_calls>";
  return scan_markers(text, "<tool_calls>", after_reasoning(text),
                      [&](std::string_view t, size_t body, std::vector<ToolCall>& calls) -> size_t {
                        std::vector<ToolCall> found;
                        size_t pos = skip_space(t, body);
                        if (auto array = array_calls_at(t, pos, {"name", "arguments", "id"})) {
                          found = std::move(array->calls);
                          pos = array->end;
                        } else {
                          while (auto object = object_call_at(t, pos, {"name", "arguments", "id"})) {
                            found.push_back(std::move(object->call));
                            pos = object->end;
                          }
                        }
                        pos = skip_space(t, pos);
                        if (found.empty() || !starts_with_at(t, pos, close)) return npos;
                        for (auto& call : found) calls.push_back(std::move(call));
                        return pos + close.size();
                      });
}

Reply parse_hermes(std::string_view text) {
  constexpr std::string_view close = "</tool_call>";
  if (text.find("<tool_calls>") != npos) return parse_tool_calls_block(text);
  return scan_markers(text, "<tool_call>", after_reasoning(text),
                      [&](std::string_view t, size_t body, std::vector<ToolCall>& calls) -> size_t {
                        auto found = object_call_at(t, body, {"name", "arguments"});
                        if (!found) found = xml_call_at(t, body);
                        if (!found) return npos;
                        size_t after = skip_space(t, found->end);
                        if (starts_with_at(t, after, close)) after += close.size();
                        else if (after != t.size() && !starts_with_at(t, after, "<tool_call>")) return npos;
                        calls.push_back(std::move(found->call));
                        return after;
                      });
}

// --- Llama 3.x: a reply that is JSON call objects, or code after <|python_tag|> -----------------------

// One or more call objects, separated by whitespace or ';', filling `text` from `pos` to its end.
std::optional<std::vector<ToolCall>> llama_json_calls(std::string_view text, size_t pos) {
  std::vector<ToolCall> calls;
  pos = skip_space(text, pos);
  while (pos < text.size()) {
    auto found = object_call_at(text, pos, {"name", "parameters"});
    if (!found) return std::nullopt;
    calls.push_back(std::move(found->call));
    pos = skip_space(text, found->end);
    if (pos < text.size() && text[pos] == ';') pos = skip_space(text, pos + 1);
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

// A built-in tool call as the Llama 3.1 template writes it: name.call(key="value", ...).
std::optional<ToolCall> llama_builtin_call(std::string_view text) {
  text = trim(text);
  size_t dot = text.find(".call(");
  if (dot == npos || dot == 0 || text.back() != ')') return std::nullopt;
  for (size_t i = 0; i < dot; ++i)
    if (!is_name_char(text[i])) return std::nullopt;
  ordered_json args = ordered_json::object();
  size_t pos = dot + 6;
  size_t end = text.size() - 1;
  while (true) {
    pos = skip_space(text, pos);
    if (pos == end) break;
    size_t eq = text.find('=', pos);
    if (eq == npos || eq > end) return std::nullopt;
    std::string key(trim(text.substr(pos, eq - pos)));
    size_t value_start = skip_space(text, eq + 1);
    if (value_start >= end || text[value_start] != '"') return std::nullopt;
    size_t value_end = text.find('"', value_start + 1);
    if (value_end == npos || value_end >= end) return std::nullopt;
    args[key] = std::string(text.substr(value_start + 1, value_end - value_start - 1));
    pos = skip_space(text, value_end + 1);
    if (pos < end && text[pos] == ',') ++pos;
    else if (pos != end) return std::nullopt;
  }
  return ToolCall{"", std::string(text.substr(0, dot)), args.dump()};
}

Reply parse_llama3(std::string_view text) {
  constexpr std::string_view tag = "<|python_tag|>";
  size_t at = text.find(tag);
  if (at == npos) {
    if (auto calls = llama_json_calls(text, 0)) return {"", std::move(*calls)};
    return {std::string(text), {}};
  }
  Reply reply{std::string(text.substr(0, at)), {}};
  size_t body = at + tag.size();
  if (auto calls = llama_json_calls(text, body)) {
    reply.calls = std::move(*calls);
  } else if (auto builtin = llama_builtin_call(text.substr(body))) {
    reply.calls.push_back(std::move(*builtin));
  } else if (!only_space(text.substr(body))) {
    // The code interpreter: the tag followed by plain Python.
    reply.calls.push_back({"", "python", ordered_json{{"code", std::string(trim(text.substr(body)))}}.dump()});
  } else {
    reply.content.append(text.substr(at));
  }
  return reply;
}

// --- Mistral: [TOOL_CALLS] then a JSON array, or name[CALL_ID]id[ARGS]{...} --------------------------
Reply parse_mistral(std::string_view text) {
  const CallKeys keys{"name", "arguments", "id"};
  if (auto bare = array_calls_at(text, 0, keys); bare && only_space(text.substr(bare->end)))
    return {"", std::move(bare->calls)};
  return scan_markers(text, "[TOOL_CALLS]", 0,
                      [&](std::string_view t, size_t body, std::vector<ToolCall>& calls) -> size_t {
                        if (auto array = array_calls_at(t, body, keys)) {
                          for (auto& call : array->calls) calls.push_back(std::move(call));
                          return array->end;
                        }
                        size_t name_end = skip_space(t, body);
                        size_t name_start = name_end;
                        while (name_end < t.size() && is_name_char(t[name_end])) ++name_end;
                        if (name_end == name_start) return npos;
                        ToolCall call{"", std::string(t.substr(name_start, name_end - name_start)), ""};
                        size_t pos = name_end;
                        if (starts_with_at(t, pos, "[CALL_ID]")) {
                          size_t id_start = pos + 9;
                          size_t id_end = t.find("[ARGS]", id_start);
                          if (id_end == npos) return npos;
                          call.id = std::string(trim(t.substr(id_start, id_end - id_start)));
                          pos = id_end;
                        }
                        if (!starts_with_at(t, pos, "[ARGS]")) return npos;
                        pos = skip_space(t, pos + 6);
                        size_t end = json_container_end(t, pos);
                        if (end == npos) return npos;
                        auto args = parse_json(t.substr(pos, end - pos));
                        if (!args || !args->is_object()) return npos;
                        call.arguments = args->dump();
                        calls.push_back(std::move(call));
                        return end;
                      });
}

// --- Functionary v3.2: >>>recipient\n then content (recipient all) or JSON arguments -------------------

// The recipient line at `pos` ("name\n"): one past the newline and the name, or nullopt.
std::optional<std::pair<size_t, std::string_view>> recipient_at(std::string_view text, size_t pos) {
  size_t end = pos;
  while (end < text.size() && is_name_char(text[end])) ++end;
  if (end == pos || end >= text.size() || text[end] != '\n') return std::nullopt;
  return std::make_pair(end + 1, text.substr(pos, end - pos));
}

Reply parse_functionary(std::string_view text) {
  constexpr std::string_view arrow = ">>>";
  // The prompt ends with ">>>", so the reply's first segment starts without one.
  size_t first = starts_with_at(text, 0, arrow) ? arrow.size() : 0;
  if (!recipient_at(text, first)) return {std::string(text), {}};
  // Segment starts: the first, then every ">>>" that opens a recipient line.
  std::vector<size_t> starts{first};
  for (size_t at = text.find(arrow, first); at != npos; at = text.find(arrow, at + 1))
    if (recipient_at(text, at + arrow.size())) starts.push_back(at + arrow.size());
  Reply reply;
  for (size_t i = 0; i < starts.size(); ++i) {
    size_t head = starts[i] == first ? 0 : starts[i] - arrow.size();
    size_t end = i + 1 < starts.size() ? starts[i + 1] - arrow.size() : text.size();
    auto [body, recipient] = *recipient_at(text, starts[i]);
    std::string_view segment = text.substr(body, end - body);
    if (recipient == "all") {
      reply.content.append(segment);
      continue;
    }
    size_t open = skip_space(segment, 0);
    size_t close = json_container_end(segment, open);
    std::optional<ordered_json> args;
    if (close != npos && segment[open] == '{' && only_space(segment.substr(close)))
      args = parse_json(segment.substr(open, close - open));
    if (args && args->is_object()) {
      reply.calls.push_back({"", std::string(recipient), args->dump()});
    } else if (recipient == "python" && !only_space(segment)) {
      reply.calls.push_back({"", "python", ordered_json{{"code", std::string(trim(segment))}}.dump()});
    } else {
      reply.content.append(text.substr(head, end - head));
    }
  }
  return reply;
}

// --- Command R: Action: ```json [...] ``` (R+) or <|START_ACTION|>[...]<|END_ACTION|> (R7B) -----------
Reply parse_command_r(std::string_view text) {
  const CallKeys keys{"tool_name", "parameters"};
  if (auto bare = array_calls_at(text, 0, keys); bare && only_space(text.substr(bare->end)))
    return {"", std::move(bare->calls)};
  if (text.find("<|START_ACTION|>") != npos) {
    return scan_markers(text, "<|START_ACTION|>", 0,
                        [&](std::string_view t, size_t body, std::vector<ToolCall>& calls) -> size_t {
                          auto array = array_calls_at(t, body, keys);
                          if (!array) return npos;
                          for (auto& call : array->calls) calls.push_back(std::move(call));
                          size_t after = skip_space(t, array->end);
                          constexpr std::string_view end_action = "<|END_ACTION|>";
                          return starts_with_at(t, after, end_action) ? after + end_action.size() : array->end;
                        });
  }
  return scan_markers(text, "Action:", 0,
                      [&](std::string_view t, size_t body, std::vector<ToolCall>& calls) -> size_t {
                        size_t pos = skip_space(t, body);
                        bool fenced = starts_with_at(t, pos, "```");
                        if (fenced) {
                          pos += 3;
                          if (starts_with_at(t, pos, "json")) pos += 4;
                        }
                        auto array = array_calls_at(t, pos, keys);
                        if (!array) return npos;
                        size_t after = skip_space(t, array->end);
                        if (fenced) {
                          if (!starts_with_at(t, after, "```")) return npos;
                          after += 3;
                        } else {
                          after = array->end;
                        }
                        for (auto& call : array->calls) calls.push_back(std::move(call));
                        return after;
                      });
}

// --- Granite 3.x: <|tool_call|>[{"name": ..., "arguments": ...}] ---------------------------------------
Reply parse_granite(std::string_view text) {
  const CallKeys keys{"name", "arguments"};
  if (auto bare = array_calls_at(text, 0, keys); bare && only_space(text.substr(bare->end)))
    return {"", std::move(bare->calls)};
  return scan_markers(text, "<|tool_call|>", 0,
                      [&](std::string_view t, size_t body, std::vector<ToolCall>& calls) -> size_t {
                        auto array = array_calls_at(t, body, keys);
                        if (!array) return npos;
                        for (auto& call : array->calls) calls.push_back(std::move(call));
                        return array->end;
                      });
}

// --- DeepSeek -----------------------------------------------------------------------------------------
constexpr std::string_view kDsCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kDsCallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kDsCallBegin = "<｜tool▁call▁begin｜>";
constexpr std::string_view kDsCallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kDsSep = "<｜tool▁sep｜>";
constexpr std::string_view kDsml = "<｜DSML｜";

// One <｜tool▁call▁begin｜>...<｜tool▁call▁end｜> body: "function<sep>name\n```json\n{...}\n```" (R1) or
// "name<sep>{...}" (V3.1).
std::optional<ToolCall> deepseek_call(std::string_view body) {
  size_t sep = body.find(kDsSep);
  if (sep == npos) return std::nullopt;
  std::string_view head = trim(body.substr(0, sep));
  std::string_view rest = body.substr(sep + kDsSep.size());
  std::string_view name;
  std::string_view args;
  if (head == "function") {
    size_t newline = rest.find('\n');
    if (newline == npos) return std::nullopt;
    name = trim(rest.substr(0, newline));
    args = trim(rest.substr(newline + 1));
    if (args.starts_with("```json")) args.remove_prefix(7);
    else if (args.starts_with("```")) args.remove_prefix(3);
    if (args.ends_with("```")) args.remove_suffix(3);
  } else {
    name = head;
    args = rest;
  }
  args = trim(args);
  auto value = parse_json(args);
  if (name.empty() || !value || !value->is_object()) return std::nullopt;
  return ToolCall{"", std::string(name), value->dump()};
}

// The DSML block of V3.2 and V4: <｜DSML｜invoke name="N"> with one <｜DSML｜parameter name="K"
// string="true|false">V</｜DSML｜parameter> per argument (strings as is, anything else as JSON).
std::optional<ToolCall> dsml_invoke(std::string_view block) {
  constexpr std::string_view name_attr = "invoke name=\"";
  if (!block.starts_with(name_attr)) return std::nullopt;
  size_t name_end = block.find('"', name_attr.size());
  if (name_end == npos) return std::nullopt;
  ToolCall call{"", std::string(block.substr(name_attr.size(), name_end - name_attr.size())), ""};
  ordered_json args = ordered_json::object();
  const std::string param_open = std::string(kDsml) + "parameter name=\"";
  const std::string param_close = "</" + std::string(kDsml.substr(1)) + "parameter>";
  for (size_t at = block.find(param_open); at != npos; at = block.find(param_open, at)) {
    size_t key_start = at + param_open.size();
    size_t key_end = block.find('"', key_start);
    if (key_end == npos) return std::nullopt;
    size_t tag_end = block.find('>', key_end);
    size_t value_end = block.find(param_close, tag_end);
    if (tag_end == npos || value_end == npos) return std::nullopt;
    std::string_view attrs = block.substr(key_end, tag_end - key_end);
    std::string_view value = block.substr(tag_end + 1, value_end - tag_end - 1);
    std::string key(block.substr(key_start, key_end - key_start));
    if (attrs.find("string=\"false\"") != npos) {
      auto parsed = parse_json(value);
      if (!parsed) return std::nullopt;
      args[key] = std::move(*parsed);
    } else {
      args[key] = std::string(value);
    }
    at = value_end + param_close.size();
  }
  call.arguments = args.dump();
  return call;
}

Reply parse_dsml(std::string_view text, size_t start) {
  // The block is <｜DSML｜function_calls> (V3.2) or <｜DSML｜tool_calls> (V4).
  size_t open_end = text.find('>', start);
  if (open_end == npos) return {std::string(text), {}};
  std::string_view block_name = text.substr(start + kDsml.size(), open_end - start - kDsml.size());
  const std::string close = "</" + std::string(kDsml.substr(1)) + std::string(block_name) + ">";
  const std::string invoke_close = "</" + std::string(kDsml.substr(1)) + "invoke>";
  size_t block_end = text.find(close, open_end);
  std::string_view block = text.substr(open_end + 1, (block_end == npos ? text.size() : block_end) - open_end - 1);
  Reply reply{std::string(text.substr(0, start)), {}};
  const std::string invoke_open = std::string(kDsml) + "invoke";
  for (size_t at = block.find(invoke_open); at != npos; at = block.find(invoke_open, at)) {
    size_t end = block.find(invoke_close, at);
    if (end == npos) return {std::string(text), {}};
    auto call = dsml_invoke(block.substr(at + kDsml.size(), end - at - kDsml.size()));
    if (!call) return {std::string(text), {}};
    reply.calls.push_back(std::move(*call));
    at = end + invoke_close.size();
  }
  if (reply.calls.empty() || block_end == npos) return {std::string(text), {}};
  reply.content.append(text.substr(block_end + close.size()));
  return reply;
}

Reply parse_deepseek(std::string_view text) {
  size_t from = after_reasoning(text);
  size_t dsml = text.find(std::string(kDsml) + "function_calls>", from);
  if (dsml == npos) dsml = text.find(std::string(kDsml) + "tool_calls>", from);
  if (dsml != npos) return parse_dsml(text, dsml);

  size_t start = text.find(kDsCallsBegin, from);
  size_t first_call = start == npos ? text.find(kDsCallBegin, from) : start + kDsCallsBegin.size();
  if (first_call == npos) return {std::string(text), {}};
  Reply reply{std::string(text.substr(0, start == npos ? first_call : start)), {}};
  size_t pos = first_call;
  while (true) {
    pos = skip_space(text, pos);
    if (!starts_with_at(text, pos, kDsCallBegin)) break;
    size_t body = pos + kDsCallBegin.size();
    size_t end = text.find(kDsCallEnd, body);
    if (end == npos) break;
    auto call = deepseek_call(text.substr(body, end - body));
    if (!call) break;
    reply.calls.push_back(std::move(*call));
    pos = end + kDsCallEnd.size();
  }
  if (reply.calls.empty()) return {std::string(text), {}};
  size_t after = skip_space(text, pos);
  if (starts_with_at(text, after, kDsCallsEnd)) pos = after + kDsCallsEnd.size();
  reply.content.append(text.substr(pos));
  return reply;
}

// --- gpt-oss (harmony): a message addressed "to=functions.NAME", its body the arguments ---------------
Reply parse_gpt_oss(std::string_view text) {
  constexpr std::string_view to = "to=functions.";
  constexpr std::string_view message = "<|message|>";
  constexpr std::string_view call_end = "<|call|>";
  Reply reply;
  size_t pos = 0;
  for (size_t at = text.find(to); at != npos; at = text.find(to, at + 1)) {
    if (at < pos) continue;
    // The call's header starts at the <|start|> or <|channel|> that precedes the recipient.
    size_t header = at;
    for (std::string_view opener : {"<|start|>", "<|channel|>"}) {
      size_t found = text.rfind(opener, at);
      if (found != npos && found >= pos && text.substr(found, at - found).find(message) == npos) {
        header = std::min(header, found);
      }
    }
    size_t name_start = at + to.size();
    size_t name_end = name_start;
    while (name_end < text.size() && is_name_char(text[name_end])) ++name_end;
    if (name_end == name_start) continue;
    // The body follows <|message|>; where control tokens are not kept, the first '{' on the header line.
    size_t body = text.find(message, name_end);
    size_t brace = text.find('{', name_end);
    if (body != npos && (brace == npos || body < brace)) {
      body += message.size();
    } else if (brace != npos && brace - name_end < 64 &&
               text.substr(name_end, brace - name_end).find('\n') == npos) {
      body = brace;
    } else {
      continue;
    }
    body = skip_space(text, body);
    size_t end = json_container_end(text, body);
    if (end == npos || text[body] != '{') continue;
    auto args = parse_json(text.substr(body, end - body));
    if (!args || !args->is_object()) continue;
    reply.content.append(text.substr(pos, header - pos));
    reply.calls.push_back({"", std::string(text.substr(name_start, name_end - name_start)), args->dump()});
    size_t after = skip_space(text, end);
    pos = starts_with_at(text, after, call_end) ? after + call_end.size() : end;
  }
  reply.content.append(text.substr(pos));
  return reply;
}

// Ids for calls without the model's own: 9 letters/digits from an FNV-1a hash of the reply and the index.
std::string generated_id(std::string_view text, size_t index) {
  uint64_t hash = 14695981039346656037ull;
  auto mix = [&](unsigned char byte) {
    hash ^= byte;
    hash *= 1099511628211ull;
  };
  for (char c : text) mix(static_cast<unsigned char>(c));
  for (int shift = 0; shift < 64; shift += 8) mix(static_cast<unsigned char>(index >> shift));
  constexpr std::string_view alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  std::string id;
  for (int i = 0; i < 9; ++i) {
    hash = hash * 6364136223846793005ull + 1442695040888963407ull;  // spread the bits per character
    id += alphabet[(hash >> 33) % alphabet.size()];
  }
  return id;
}

}  // namespace

ToolCallFormat detect_tool_call_format(std::string_view source) {
  auto has = [&](std::string_view marker) { return source.find(marker) != npos; };
  if (has("<tool_call>")) return ToolCallFormat::Hermes;
  if (has("[TOOL_CALLS]")) return ToolCallFormat::Mistral;
  if (has("<|tool_call|>")) return ToolCallFormat::Granite;
  if (has("tool▁call▁begin") || has("｜DSML｜")) return ToolCallFormat::DeepSeek;
  if (has("<tool_calls>")) return ToolCallFormat::Hermes;
  if (has("<|START_ACTION|>") || (has("Action:") && has("tool_name"))) return ToolCallFormat::CommandR;
  if (has(">>>") && has("recipient")) return ToolCallFormat::Functionary;
  if (has("to=functions.") || has("<|call|>")) return ToolCallFormat::GptOss;
  if (has("<|python_tag|>") || has("\"parameters\": dictionary")) return ToolCallFormat::Llama3;
  return ToolCallFormat::None;
}

std::string_view tool_call_format_name(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::None: return "none";
    case ToolCallFormat::Hermes: return "hermes";
    case ToolCallFormat::Llama3: return "llama3";
    case ToolCallFormat::Mistral: return "mistral";
    case ToolCallFormat::Functionary: return "functionary";
    case ToolCallFormat::CommandR: return "command-r";
    case ToolCallFormat::Granite: return "granite";
    case ToolCallFormat::DeepSeek: return "deepseek";
    case ToolCallFormat::GptOss: return "gpt-oss";
  }
  return "none";
}

ParsedReply parse_tool_calls(ToolCallFormat format, std::string_view text) {
  Reply reply;
  switch (format) {
    case ToolCallFormat::None: return {std::string(text), {}};
    case ToolCallFormat::Hermes: reply = parse_hermes(text); break;
    case ToolCallFormat::Llama3: reply = parse_llama3(text); break;
    case ToolCallFormat::Mistral: reply = parse_mistral(text); break;
    case ToolCallFormat::Functionary: reply = parse_functionary(text); break;
    case ToolCallFormat::CommandR: reply = parse_command_r(text); break;
    case ToolCallFormat::Granite: reply = parse_granite(text); break;
    case ToolCallFormat::DeepSeek: reply = parse_deepseek(text); break;
    case ToolCallFormat::GptOss: reply = parse_gpt_oss(text); break;
  }
  if (reply.calls.empty()) return {std::string(text), {}};
  ParsedReply parsed{std::string(trim(reply.content)), std::move(reply.calls)};
  for (size_t i = 0; i < parsed.tool_calls.size(); ++i) {
    std::string& id = parsed.tool_calls[i].id;
    if (!id.empty()) continue;
    id = format == ToolCallFormat::Mistral ? generated_id(text, i) : "call_" + generated_id(text, i);
  }
  return parsed;
}

}  // namespace infer::chat
