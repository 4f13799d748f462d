// Chat templates: detection from real template texts' markers and the exact rendering per family.
#include <gtest/gtest.h>
#include <gmock/gmock.h>

#include "gguf/file.h"
#include "support/data_dirs.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace infer::tokenizer {
namespace {

const std::vector<ChatMessage> kChat = {
    {"system", "Be brief."}, {"user", "Hi "}, {"assistant", "Hello."}, {"user", "Why?"}};

TEST(ChatTemplate, DetectsFamiliesByMarkers) {
  EXPECT_EQ(detect_chat_family("{% for m in messages %}<|im_start|>{{ m.role }}"), ChatFamily::ChatML);
  EXPECT_EQ(detect_chat_family("<|start_header_id|>' + role + '<|end_header_id|>"), ChatFamily::Llama3);
  EXPECT_EQ(detect_chat_family("{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"), ChatFamily::Llama2);
  EXPECT_EQ(detect_chat_family("[SYSTEM_PROMPT]{{ system }}[/SYSTEM_PROMPT][INST]"), ChatFamily::Mistral);
  EXPECT_EQ(detect_chat_family("{{ ' [INST] ' + system_message }}"), ChatFamily::MistralV1);
  EXPECT_EQ(detect_chat_family("[AVAILABLE_TOOLS]{{ '[INST] ' + m }}"), ChatFamily::MistralV3);
  EXPECT_EQ(detect_chat_family("[AVAILABLE_TOOLS]{{ \"[INST]\" + m }}"), ChatFamily::MistralV3Tekken);
  EXPECT_EQ(detect_chat_family("<start_of_turn>{{ role }}"), ChatFamily::Gemma);
  EXPECT_EQ(detect_chat_family("<|user|>{{ c }}<|end|><|assistant|>"), ChatFamily::Phi3);
  EXPECT_EQ(detect_chat_family("<|user|>{{ c }}<|endoftext|>"), ChatFamily::Zephyr);
  EXPECT_EQ(detect_chat_family("{{ messages }}"), std::nullopt);
  EXPECT_THROW(require_chat_family("{{ messages }}"), std::runtime_error);
  try {
    require_chat_family("");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("unknown chat template"));
  }
}

TEST(ChatTemplate, DetectsQwen2TemplateFromRealVocab) {
  INFER_REQUIRE_DIR(test::vectors_dir());
  const auto file = gguf::File::open(test::vectors_dir() + "/ggml-vocab-qwen2.gguf");
  const auto tok = Tokenizer::from_gguf(*file);
  EXPECT_EQ(require_chat_family(tok->chat_template()), ChatFamily::ChatML);
}

TEST(ChatTemplate, DetectsPhi3TemplateFromRealVocab) {
  INFER_REQUIRE_DIR(test::vectors_dir());
  const auto file = gguf::File::open(test::vectors_dir() + "/ggml-vocab-phi-3.gguf");
  const auto tok = Tokenizer::from_gguf(*file);
  EXPECT_EQ(require_chat_family(tok->chat_template()), ChatFamily::Phi3);
}

// Gemma 3 and Phi-4-mini templates carry their markers inside Jinja expressions, next to others'
// words (a system "prefix", a tool list) that must not pull them into another family.
TEST(ChatTemplate, DetectsGemma3AndPhi4MiniStyleTemplates) {
  EXPECT_EQ(detect_chat_family("{% set prefix = system ~ '\\n\\n' %}{% for m in messages %}<start_of_turn>"
                               "{{ 'model' if m.role == 'assistant' else m.role }}\n{{ prefix if loop.first }}"
                               "{{ m.content | trim }}<end_of_turn>{% endfor %}"),
            ChatFamily::Gemma);
  EXPECT_EQ(detect_chat_family("{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% if m.tools %}<|tool|>"
                               "{{ m.tools }}<|/tool|>{% endif %}<|end|>{% endfor %}"
                               "{% if add_generation_prompt %}<|assistant|>{% endif %}"),
            ChatFamily::Phi3);
}

TEST(ChatTemplate, FamiliesByName) {
  for (auto f : {ChatFamily::ChatML, ChatFamily::Llama3, ChatFamily::Llama2, ChatFamily::Mistral, ChatFamily::MistralV1,
                 ChatFamily::MistralV3, ChatFamily::MistralV3Tekken, ChatFamily::Gemma, ChatFamily::Phi3,
                 ChatFamily::Zephyr})
    EXPECT_EQ(chat_family_from_name(chat_family_name(f)), f);
  EXPECT_EQ(chat_family_from_name("vicuna"), std::nullopt);
}

TEST(ChatTemplate, RendersChatML) {
  EXPECT_EQ(apply_chat_template(ChatFamily::ChatML, kChat, true),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi <|im_end|>\n"
            "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nWhy?<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(apply_chat_template(ChatFamily::ChatML, {{"user", "x"}}, false), "<|im_start|>user\nx<|im_end|>\n");
}

TEST(ChatTemplate, RendersLlama3) {
  EXPECT_EQ(apply_chat_template(ChatFamily::Llama3, kChat, true),
            "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nWhy?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, RendersLlama2) {
  EXPECT_EQ(apply_chat_template(ChatFamily::Llama2, kChat, true),
            "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST]Hello.</s>[INST] Why? [/INST]");
}

TEST(ChatTemplate, RendersMistral) {
  EXPECT_EQ(apply_chat_template(ChatFamily::Mistral, kChat, true),
            "[SYSTEM_PROMPT] Be brief.[/SYSTEM_PROMPT][INST] Hi [/INST] Hello.</s>[INST] Why?[/INST]");
}

TEST(ChatTemplate, RendersMistralLegacyFormats) {
  const std::vector<ChatMessage> chat = {{"system", "S"}, {"user", "Hi"}, {"assistant", " Hello. "}, {"user", "Why?"}};
  EXPECT_EQ(apply_chat_template(ChatFamily::MistralV1, chat, true),
            " [INST] S\n\nHi [/INST]  Hello. </s> [INST] Why? [/INST]");
  EXPECT_EQ(apply_chat_template(ChatFamily::MistralV3, chat, true), "[INST] S\n\nHi[/INST] Hello.</s>[INST] Why?[/INST]");
  EXPECT_EQ(apply_chat_template(ChatFamily::MistralV3Tekken, chat, true),
            "[INST]S\n\nHi[/INST] Hello. </s>[INST]Why?[/INST]");
}

TEST(ChatTemplate, RendersGemmaWithSystemFoldedIntoUser) {
  EXPECT_EQ(apply_chat_template(ChatFamily::Gemma, kChat, true),
            "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n"
            "<start_of_turn>user\nWhy?<end_of_turn>\n<start_of_turn>model\n");
}

TEST(ChatTemplate, RendersGemmaModelTurnsWithoutSystem) {
  EXPECT_EQ(apply_chat_template(ChatFamily::Gemma, {{"user", " Hi\n"}, {"assistant", "Hello."}}, false),
            "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n");
}

TEST(ChatTemplate, RendersPhi3WithSystemTurn) {
  EXPECT_EQ(apply_chat_template(ChatFamily::Phi3, kChat, true),
            "<|system|>\nBe brief.<|end|>\n<|user|>\nHi <|end|>\n<|assistant|>\nHello.<|end|>\n"
            "<|user|>\nWhy?<|end|>\n<|assistant|>\n");
  EXPECT_EQ(apply_chat_template(ChatFamily::Phi3, {{"user", "x"}}, false), "<|user|>\nx<|end|>\n");
}

TEST(ChatTemplate, RendersPhi3AndZephyr) {
  EXPECT_EQ(apply_chat_template(ChatFamily::Phi3, {{"user", "Hi"}}, true), "<|user|>\nHi<|end|>\n<|assistant|>\n");
  EXPECT_EQ(apply_chat_template(ChatFamily::Zephyr, {{"user", "Hi"}}, true),
            "<|user|>\nHi<|endoftext|>\n<|assistant|>\n");
}

TEST(ChatTemplate, RejectsUnknownRoles) {
  EXPECT_THROW(apply_chat_template(ChatFamily::ChatML, {{"tool", "x"}}, true), std::invalid_argument);
}

}  // namespace
}  // namespace infer::tokenizer
