// Tool calls out of generated text, in the format a model's chat template teaches it.
//
// Each family writes calls its own way (the shipped templates in shared/chat-templates show them):
//   Hermes       <tool_call>{"name": N, "arguments": {...}}</tool_call>      (Hermes 2/3, Qwen 2.5/3, Granite 4),
//                and the XML bodies other <tool_call> templates teach:
//                <function=N><parameter=K>V</parameter></function>           (Qwen 3.5, Nemotron, StepFun)
//                N<arg_key>K</arg_key><arg_value>V</arg_value>             (GLM 4.7, Laguna)
//                <tool_calls>[{"name": N, "arguments": {...}, "id": I}]</tool_calls> (Apriel),
//                <tool_calls>{...}\n{...}</tool_calls>                     (MiniMax M1)
//   Llama3       {"name": N, "parameters": {...}}, or after <|python_tag|>  (Llama 3.1-3.3)
//   Mistral      [TOOL_CALLS][{"name": N, "arguments": {...}, "id": I}]     (Nemo)
//                [TOOL_CALLS]N[CALL_ID]I[ARGS]{...}, [CALL_ID] optional    (Small 3.2, Ministral 3)
//   Functionary  >>>N\n{...} after the prompt's own `>>>`; recipient `all` is content (v3.2)
//   CommandR     Action:\n```json\n[{"tool_name": N, "parameters": {...}}]``` (Command R+),
//                <|START_ACTION|>[...]<|END_ACTION|>                       (Command R7B)
//   Granite      <|tool_call|>[{"name": N, "arguments": {...}}]             (Granite 3.x)
//   DeepSeek     <｜tool▁call▁begin｜>function<｜tool▁sep｜>N\n```json\n{...}\n```<｜tool▁call▁end｜> (R1),
//                <｜tool▁call▁begin｜>N<｜tool▁sep｜>{...}<｜tool▁call▁end｜>             (V3.1),
//                <｜DSML｜invoke name="N"><｜DSML｜parameter name="K" string="true|false">V</...> (V3.2, V4)
//   GptOss       <|channel|>commentary to=functions.N <|constrain|>json<|message|>{...}<|call|> (harmony)
// A call is recognised only whole: a name and a JSON object of arguments. A malformed or unfinished call is
// left in the content as it was generated, so nothing the model wrote is lost.
//
// Markers that are control tokens (e.g. [TOOL_CALLS], <|tool_call|>) are only seen where the generated
// text keeps control tokens; for the JSON-array formats a reply that is nothing but such an array is taken
// as calls without its marker too.
//
// Everything here is pure: thread-safe, no state.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace infer::chat {

enum class ToolCallFormat { None, Hermes, Llama3, Mistral, Functionary, CommandR, Granite, DeepSeek, GptOss };

// The format a template teaches, from the call markers in its source; None for a template without tool
// calls. Hermes for templates that teach <tool_call> even when they also mention other markers.
ToolCallFormat detect_tool_call_format(std::string_view template_source);

// "hermes", "llama3", "mistral", "functionary", "command-r", "granite", "deepseek", "gpt-oss", "none".
std::string_view tool_call_format_name(ToolCallFormat format);

struct ToolCall {
  std::string id;         // the model's own id where its format has one, else generated (see below)
  std::string name;
  std::string arguments;  // a JSON object, compact, keys in the order the model wrote them
};

struct ParsedReply {
  std::string content;              // the text outside calls; trimmed of surrounding whitespace when
                                    // calls were found, else the generated text unchanged
  std::vector<ToolCall> tool_calls;  // in the order generated
};

// Splits `generated_text` into content and calls. Generated ids are "call_" plus 9 letters/digits
// (Mistral: the 9 alone, as its templates require), a hash of the text and the call's index, so the same
// reply always gets the same ids and different replies rarely share one. None returns the text as content.
ParsedReply parse_tool_calls(ToolCallFormat format, std::string_view generated_text);

}  // namespace infer::chat
