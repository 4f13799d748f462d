#include "tokenizer/chat_template.h"

#include <stdexcept>

namespace infer::tokenizer {
namespace {

constexpr std::pair<ChatFamily, std::string_view> kNames[] = {
    {ChatFamily::ChatML, "chatml"}, {ChatFamily::Llama3, "llama3"}, {ChatFamily::Llama2, "llama2"},
    {ChatFamily::Mistral, "mistral"}, {ChatFamily::MistralV1, "mistral-v1"}, {ChatFamily::MistralV3, "mistral-v3"},
    {ChatFamily::MistralV3Tekken, "mistral-v3-tekken"}, {ChatFamily::Gemma, "gemma"}, {ChatFamily::Phi3, "phi3"},
    {ChatFamily::Zephyr, "zephyr"},
};

std::string trim(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return std::string(s);
}

void check_roles(const std::vector<ChatMessage>& messages) {
  for (const auto& m : messages)
    if (m.role != "system" && m.role != "user" && m.role != "assistant")
      throw std::invalid_argument("chat message role '" + m.role + "' is not system, user or assistant");
}

// llama.cpp's "llama2 with system, stripped" variant: the first [INST] follows the BOS the tokenizer adds.
std::string render_llama2(const std::vector<ChatMessage>& messages) {
  std::string out = "[INST] ";
  bool inside_turn = true;
  for (const auto& m : messages) {
    if (!inside_turn) {
      out += "[INST] ";
      inside_turn = true;
    }
    const std::string text = trim(m.text);
    if (m.role == "system") {
      out += "<<SYS>>\n" + text + "\n<</SYS>>\n\n";
    } else if (m.role == "user") {
      out += text + " [/INST]";
    } else {
      out += text + "</s>";
      inside_turn = false;
    }
  }
  return out;
}

// Mistral's v1 / v3 / v3-tekken formats differ only in the spaces around [INST] and trimming.
std::string render_mistral_legacy(ChatFamily family, const std::vector<ChatMessage>& messages) {
  const std::string lead = family == ChatFamily::MistralV1 ? " " : "";
  const std::string trail = family == ChatFamily::MistralV3Tekken ? "" : " ";
  const bool trim_assistant = family == ChatFamily::MistralV3;
  std::string out;
  bool inside_turn = false;
  for (const auto& m : messages) {
    if (!inside_turn) {
      out += lead + "[INST]" + trail;
      inside_turn = true;
    }
    if (m.role == "system") {
      out += m.text + "\n\n";
    } else if (m.role == "user") {
      out += m.text + lead + "[/INST]";
    } else {
      out += trail + (trim_assistant ? trim(m.text) : m.text) + "</s>";
      inside_turn = false;
    }
  }
  return out;
}

std::string render_gemma(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  std::string out, system;
  for (const auto& m : messages) {
    if (m.role == "system") {  // Gemma has no system turn: prepend it to the next user turn
      system += trim(m.text);
      continue;
    }
    const std::string role = m.role == "assistant" ? "model" : m.role;
    out += "<start_of_turn>" + role + "\n";
    if (!system.empty() && role != "model") {
      out += system + "\n\n";
      system.clear();
    }
    out += trim(m.text) + "<end_of_turn>\n";
  }
  if (add_generation_prompt) out += "<start_of_turn>model\n";
  return out;
}

}  // namespace

std::optional<ChatFamily> detect_chat_family(std::string_view t) {
  const auto has = [&](std::string_view s) { return t.find(s) != std::string_view::npos; };
  if (has("<|im_start|>")) return ChatFamily::ChatML;
  if (has("[INST]")) {
    if (has("[SYSTEM_PROMPT]")) return ChatFamily::Mistral;
    if (has("' [INST] ' + system_message") || has("[AVAILABLE_TOOLS]")) {
      if (has(" [INST]")) return ChatFamily::MistralV1;
      if (has("\"[INST]\"")) return ChatFamily::MistralV3Tekken;
      return ChatFamily::MistralV3;
    }
    return ChatFamily::Llama2;
  }
  if (has("<|assistant|>") && has("<|end|>")) return ChatFamily::Phi3;
  if (has("<|user|>") && has("<|endoftext|>")) return ChatFamily::Zephyr;
  if (has("<start_of_turn>")) return ChatFamily::Gemma;
  if (has("<|start_header_id|>") && has("<|end_header_id|>")) return ChatFamily::Llama3;
  return std::nullopt;
}

ChatFamily require_chat_family(std::string_view template_text) {
  if (auto f = detect_chat_family(template_text)) return *f;
  if (template_text.empty()) throw std::runtime_error("unknown chat template: the model has none; choose a family by name");
  throw std::runtime_error(
      "unknown chat template (no marker of chatml, llama3, llama2, mistral, gemma, phi3 or zephyr); choose a family by name");
}

std::optional<ChatFamily> chat_family_from_name(std::string_view name) {
  for (const auto& [family, n] : kNames)
    if (n == name) return family;
  return std::nullopt;
}

std::string_view chat_family_name(ChatFamily family) {
  for (const auto& [f, n] : kNames)
    if (f == family) return n;
  return "unknown";
}

std::string apply_chat_template(ChatFamily family, const std::vector<ChatMessage>& messages,
                                bool add_generation_prompt) {
  check_roles(messages);
  std::string out;
  switch (family) {
    case ChatFamily::ChatML:
      for (const auto& m : messages) out += "<|im_start|>" + m.role + "\n" + m.text + "<|im_end|>\n";
      if (add_generation_prompt) out += "<|im_start|>assistant\n";
      return out;
    case ChatFamily::Llama3:
      for (const auto& m : messages)
        out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trim(m.text) + "<|eot_id|>";
      if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      return out;
    case ChatFamily::Llama2:
      return render_llama2(messages);
    case ChatFamily::Mistral:
      for (const auto& m : messages) {
        if (m.role == "system") out += "[SYSTEM_PROMPT] " + m.text + "[/SYSTEM_PROMPT]";
        else if (m.role == "user") out += "[INST] " + m.text + "[/INST]";
        else out += " " + m.text + "</s>";
      }
      return out;
    case ChatFamily::MistralV1:
    case ChatFamily::MistralV3:
    case ChatFamily::MistralV3Tekken:
      return render_mistral_legacy(family, messages);
    case ChatFamily::Gemma:
      return render_gemma(messages, add_generation_prompt);
    case ChatFamily::Phi3:
      for (const auto& m : messages) out += "<|" + m.role + "|>\n" + m.text + "<|end|>\n";
      if (add_generation_prompt) out += "<|assistant|>\n";
      return out;
    case ChatFamily::Zephyr:
      for (const auto& m : messages) out += "<|" + m.role + "|>\n" + m.text + "<|endoftext|>\n";
      if (add_generation_prompt) out += "<|assistant|>\n";
      return out;
  }
  throw std::invalid_argument("unknown chat family");
}

}  // namespace infer::tokenizer
