// One call's grammar per tool: the format's fixed text around the tool's name and an arguments rule from
// its JSON schema. Each tool's schema grammar is converted alone and its rule names prefixed, so the tools'
// grammars can sit side by side under one root.
#include "chat/tool_call_grammar.h"

#include <stdexcept>
#include <vector>

#include "grammar/gbnf_writer.h"
#include "grammar/json_schema.h"

namespace infer::chat {
namespace {

using ordered_json = nlohmann::ordered_json;

bool is_rule_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_rule_char(char c) { return is_rule_start(c) || (c >= '0' && c <= '9') || c == '-' || c == '_'; }

// `gbnf` with `prefix` before every rule name, defined or referenced. Literals, character classes,
// repetition counts and comments are copied as they are.
std::string prefix_rule_names(std::string_view gbnf, std::string_view prefix) {
  std::string out;
  out.reserve(gbnf.size() * 2);
  size_t i = 0;
  while (i < gbnf.size()) {
    char c = gbnf[i];
    if (c == '"' || c == '[') {
      const char close = c == '"' ? '"' : ']';
      size_t j = i + 1;
      while (j < gbnf.size() && gbnf[j] != close) j += gbnf[j] == '\\' ? 2 : 1;
      j = std::min(j + 1, gbnf.size());
      out.append(gbnf.substr(i, j - i));
      i = j;
    } else if (c == '{' || c == '#') {
      size_t j = gbnf.find(c == '{' ? '}' : '\n', i);
      j = j == std::string_view::npos ? gbnf.size() : j + 1;
      out.append(gbnf.substr(i, j - i));
      i = j;
    } else if (is_rule_start(c)) {
      size_t j = i;
      while (j < gbnf.size() && is_rule_char(gbnf[j])) ++j;
      out.append(prefix);
      out.append(gbnf.substr(i, j - i));
      i = j;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

struct Tool {
  std::string name;
  ordered_json parameters;
};

std::vector<Tool> read_tools(const ordered_json& tools) {
  if (!tools.is_array() || tools.empty()) throw std::invalid_argument("tools: expected a non-empty JSON array");
  std::vector<Tool> out;
  for (const auto& entry : tools) {
    const ordered_json* function = &entry;
    if (entry.is_object() && entry.contains("function")) function = &entry["function"];
    if (!function->is_object() || !function->contains("name") || !(*function)["name"].is_string())
      throw std::invalid_argument("tools: each tool needs a string \"name\" (or function.name)");
    Tool tool{(*function)["name"].get<std::string>(), ordered_json{{"type", "object"}}};
    if (tool.name.empty()) throw std::invalid_argument("tools: a tool's name is empty");
    if (function->contains("parameters")) {
      tool.parameters = (*function)["parameters"];
      if (!tool.parameters.is_object())
        throw std::invalid_argument("tool " + tool.name + ": parameters must be a JSON schema object");
      // Arguments are always an object: a schema without a type is narrowed to objects, any other type refused.
      auto type = tool.parameters.find("type");
      if (type == tool.parameters.end()) {
        tool.parameters["type"] = "object";
      } else if (*type != "object") {
        throw std::invalid_argument("tool " + tool.name + ": parameters must have type \"object\"");
      }
    }
    out.push_back(std::move(tool));
  }
  return out;
}

// Names written bare (not as a JSON string) must stay inside what the parser reads as a name.
std::string bare_name(ToolCallFormat format, const std::string& name) {
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
              c == '.';
    if (!ok)
      throw std::invalid_argument("tool " + name + ": the " + std::string(tool_call_format_name(format)) +
                                  " format needs names of letters, digits, '_', '-' and '.'");
  }
  return name;
}

// The fixed text before and after the arguments of one call to `name`.
std::pair<std::string, std::string> call_frame(ToolCallFormat format, const std::string& name) {
  const std::string quoted = ordered_json(name).dump();
  switch (format) {
    case ToolCallFormat::Hermes:
      return {"<tool_call>\n{\"name\": " + quoted + ", \"arguments\": ", "}\n</tool_call>"};
    case ToolCallFormat::Llama3: return {"{\"name\": " + quoted + ", \"parameters\": ", "}"};
    case ToolCallFormat::Mistral:
    case ToolCallFormat::Granite: return {"[{\"name\": " + quoted + ", \"arguments\": ", "}]"};
    case ToolCallFormat::CommandR: return {"[{\"tool_name\": " + quoted + ", \"parameters\": ", "}]"};
    case ToolCallFormat::Functionary: return {bare_name(format, name) + "\n", ""};  // after the prompt's ">>>"
    case ToolCallFormat::DeepSeek:
      return {"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>" + bare_name(format, name) +
                  "\n```json\n",
              "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"};
    case ToolCallFormat::GptOss:
      return {"<|channel|>commentary to=functions." + bare_name(format, name) + " <|constrain|>json<|message|>",
              "<|call|>"};
    case ToolCallFormat::None: break;
  }
  throw std::invalid_argument("tool calls: the model's chat template teaches no tool-call format");
}

}  // namespace

std::string tool_call_grammar(ToolCallFormat format, const ordered_json& tools_json, std::string_view choice) {
  if (format == ToolCallFormat::None)
    throw std::invalid_argument("tool calls: the model's chat template teaches no tool-call format");
  std::vector<Tool> tools = read_tools(tools_json);
  if (choice != "required") {
    std::erase_if(tools, [&](const Tool& tool) { return tool.name != choice; });
    if (tools.empty()) throw std::invalid_argument("TOOLCHOICE " + std::string(choice) + ": no tool of that name");
    tools.resize(1);
  }
  std::string root = "root ::=";
  std::string rules;
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string prefix = "tool" + std::to_string(i) + "-";
    std::string schema_gbnf;
    try {
      schema_gbnf = grammar::json_schema_to_gbnf(tools[i].parameters);
    } catch (const std::exception& e) {
      throw std::invalid_argument("tool " + tools[i].name + ": " + e.what());
    }
    auto [before, after] = call_frame(format, tools[i].name);
    std::string call = grammar::gbnf_literal(before) + " " + prefix + "root";
    if (!after.empty()) call += " " + grammar::gbnf_literal(after);
    root += (i == 0 ? " " : " | ") + call;
    rules += prefix_rule_names(schema_gbnf, prefix);
    if (!rules.empty() && rules.back() != '\n') rules += '\n';
  }
  return root + "\n" + rules;
}

}  // namespace infer::chat
