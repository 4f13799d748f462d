// Chat prompt formats of the common model families, rendered in C++ (no Jinja). The family is
// detected from the GGUF's tokenizer.chat_template text by marker substrings (as llama.cpp does) or
// chosen by name for models without a template. BOS is not written: the tokenizer adds it.
//
// Families and their turn format (role = "system" | "user" | "assistant"):
//   chatml   <|im_start|>{role}\n{text}<|im_end|>\n              prompt: <|im_start|>assistant\n
//   llama3   <|start_header_id|>{role}<|end_header_id|>\n\n{trimmed text}<|eot_id|>
//                                                     prompt: <|start_header_id|>assistant<|end_header_id|>\n\n
//   llama2   [INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST]{assistant}</s>[INST] ... (texts trimmed)
//   mistral  [SYSTEM_PROMPT] {system}[/SYSTEM_PROMPT][INST] {user}[/INST] {assistant}</s>   (v7)
//   mistral-v1         " [INST] {system}\n\n{user} [/INST] {assistant}</s>"
//   mistral-v3         "[INST] {system}\n\n{user}[/INST] {trimmed assistant}</s>"
//   mistral-v3-tekken  "[INST]{system}\n\n{user}[/INST]{assistant}</s>"
//   gemma    <start_of_turn>{user|model}\n{trimmed text}<end_of_turn>\n; system text is put in front of
//            the next user turn;                      prompt: <start_of_turn>model\n
//   phi3     <|{role}|>\n{text}<|end|>\n              prompt: <|assistant|>\n
//   zephyr   <|{role}|>\n{text}<|endoftext|>\n        prompt: <|assistant|>\n
// llama2 and mistral end a prompt with [/INST], so add_generation_prompt adds nothing there.
// Thread-safety: pure functions.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace infer::tokenizer {

enum class ChatFamily { ChatML, Llama3, Llama2, Mistral, MistralV1, MistralV3, MistralV3Tekken, Gemma, Phi3, Zephyr };

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string text;
};

// Family of a Jinja template text; nullopt when no known marker is present.
std::optional<ChatFamily> detect_chat_family(std::string_view template_text);
// Same, but throws std::runtime_error("unknown chat template ...") when nothing matches.
ChatFamily require_chat_family(std::string_view template_text);
// Family by its name above ("chatml", "llama3", ...); nullopt for other names.
std::optional<ChatFamily> chat_family_from_name(std::string_view name);
std::string_view chat_family_name(ChatFamily family);

// The prompt text for `messages`; throws std::invalid_argument for a role other than the three.
std::string apply_chat_template(ChatFamily family, const std::vector<ChatMessage>& messages,
                                bool add_generation_prompt);

}  // namespace infer::tokenizer
