// Syntax errors name their place; hostile templates (they come from GGUF files) fail with TemplateError
// instead of crashing, hanging or exhausting memory; one parsed template renders on many threads at once.
#include <gtest/gtest.h>

#include <pthread.h>

#include <thread>
#include <vector>

#include "chat/chat_template.h"

namespace infer::chat {
namespace {

using nlohmann::ordered_json;

std::string error_of(const std::string& source, const TemplateLimits& limits = {}) {
  try {
    ChatTemplate tmpl(source);
    tmpl.set_limits(limits);
    tmpl.render(ordered_json::array(), nullptr, true, "<s>", "</s>");
  } catch (const TemplateError& e) {
    return e.what();
  }
  return "";
}

TEST(ChatTemplateErrors, SyntaxErrorNamesLineAndColumn) {
  EXPECT_EQ(error_of("hello\n  {{ 1 + }}"), "TemplateSyntaxError: line 2 column 10: unexpected end of print statement");
}

TEST(ChatTemplateErrors, UnclosedBlockIsASyntaxError) {
  EXPECT_EQ(error_of("{% if true %}x").rfind("TemplateSyntaxError: ", 0), 0u);
  EXPECT_EQ(error_of("{% for x in y %}x{% endif %}").rfind("TemplateSyntaxError: ", 0), 0u);
}

TEST(ChatTemplateErrors, UnknownTagIsASyntaxError) {
  EXPECT_EQ(error_of("{% include 'other.jinja' %}"),
            "TemplateSyntaxError: line 1 column 4: Encountered unknown tag 'include'.");
}

TEST(ChatTemplateErrors, UnterminatedCommentAndStringAreSyntaxErrors) {
  EXPECT_EQ(error_of("a {# never closed"), "TemplateSyntaxError: line 1 column 3: Missing end of comment tag");
  EXPECT_EQ(error_of("{{ 'open }}").rfind("TemplateSyntaxError: ", 0), 0u);
}

TEST(ChatTemplateErrors, ToolsLeftUndefinedWhenNull) {
  ChatTemplate tmpl("{{ tools is defined }}|{{ enable_thinking }}|{{ messages|length }}");
  EXPECT_EQ(tmpl.render(ordered_json::array({{{"role", "user"}, {"content", "x"}}}), nullptr, true, "", "",
                        {{"enable_thinking", false}}),
            "False|False|1");
  EXPECT_EQ(tmpl.render(ordered_json::array(), ordered_json::array(), true, "", ""), "True||0");
}

TEST(ChatTemplateLimits, DeeplyNestedExpressionFailsToParse) {
  std::string source = "{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}";
  EXPECT_NE(error_of(source).find("nests deeper than"), std::string::npos);
  std::string blocks;
  for (int k = 0; k < 5000; ++k) blocks += "{% if true %}";
  EXPECT_NE(error_of(blocks).find("nests deeper than"), std::string::npos);
}

TEST(ChatTemplateLimits, EndlessMacroRecursionStops) {
  EXPECT_EQ(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}").rfind("RecursionError: ", 0), 0u);
}

TEST(ChatTemplateLimits, EndlessLoopStopsAtTheStepLimit) {
  TemplateLimits limits;
  limits.max_steps = 100000;
  EXPECT_EQ(error_of("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}", limits),
            "TemplateRuntimeError: the template did more than 100000 steps of work");
}

TEST(ChatTemplateLimits, DefaultStepLimitStopsNestedLoops) {
  EXPECT_EQ(error_of("{% for a in range(100000) %}{% for b in range(100000) %}{{ b }}{% endfor %}{% endfor %}")
                .rfind("TemplateRuntimeError: the template did more than", 0),
            0u);
}

TEST(ChatTemplateLimits, OutputStopsAtTheSizeLimit) {
  TemplateLimits limits;
  limits.max_output_bytes = 1 << 20;
  EXPECT_EQ(error_of("{% for i in range(10000) %}{{ 'x' * 1000 }}{% endfor %}", limits),
            "TemplateRuntimeError: the template's output exceeds 1048576 bytes");
  EXPECT_EQ(error_of("{{ 'x' * 100000000000 }}").rfind("MemoryError: ", 0), 0u);
  EXPECT_EQ(error_of("{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}")
                .rfind("TemplateRuntimeError: the template's output exceeds", 0),
            0u);
}

TEST(ChatTemplateLimits, SelfNestingValuesStopAtTheDepthLimit) {
  EXPECT_EQ(error_of("{% set ns = namespace(l=[]) %}{% for i in range(5000) %}{% set ns.l = [ns.l] %}{% endfor %}"
                     "{{ ns.l }}")
                .rfind("RecursionError: ", 0),
            0u);
  EXPECT_EQ(error_of("{% set ns = namespace() %}{% set ns.self = ns %}{{ ns }}").rfind("RecursionError: ", 0), 0u);
}

TEST(ChatTemplateLimits, HugeNumbersDoNotEscapeAsOtherExceptions) {
  EXPECT_EQ(error_of("{{ 99999999999999999999999 * 99999999999999999999 }}{{ 1e999 }}"), "");
  EXPECT_EQ(error_of("{{ 9223372036854775807 + 1 }}").rfind("OverflowError: ", 0), 0u);
  EXPECT_EQ(error_of("{{ [1].99999999999999999999999 }}"), "");
}

TEST(ChatTemplateThreads, OneTemplateRendersOnManyThreadsAtOnce) {
  ChatTemplate tmpl(
      "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}<{{ m.role }}>{{ m.content }}"
      "{% endfor %}{{ ns.n }}");
  std::vector<std::thread> threads;
  std::vector<std::string> results(8);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      ordered_json messages = ordered_json::array();
      for (int k = 0; k <= t; ++k) messages.push_back({{"role", "user"}, {"content", std::to_string(t)}});
      for (int rep = 0; rep < 200; ++rep) results[std::size_t(t)] = tmpl.render(messages, nullptr, false, "", "");
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t) {
    std::string want;
    for (int k = 0; k <= t; ++k) want += "<user>" + std::to_string(t);
    EXPECT_EQ(results[std::size_t(t)], want + std::to_string(t + 1));
  }
}

}  // namespace
}  // namespace infer::chat

namespace infer::chat {
namespace {

// Worker threads (Redis's, the engine's) may have small stacks; sanitizers multiply the frames' size.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr std::size_t kSmallStack = 16u << 20;
#else
constexpr std::size_t kSmallStack = 1u << 20;
#endif

// Renders `source` on a thread with a `stack_bytes` stack; returns the error ("" when it rendered).
std::string error_on_small_stack(const std::string& source, std::size_t stack_bytes) {
  struct Job {
    std::string source, error;
  } job{source, ""};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, stack_bytes);
  pthread_t thread;
  pthread_create(
      &thread, &attr,
      [](void* p) -> void* {
        auto* j = static_cast<Job*>(p);
        j->error = error_of(j->source);
        return nullptr;
      },
      &job);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
  return job.error;
}

TEST(ChatTemplateLimits, DeepestRecursionFitsInASmallThreadStack) {
  // Each nesting limit reached at its deepest, on a 1 MiB stack: macro calls, render depth (a recursive
  // call inside nested blocks), and the parser's nesting.
  EXPECT_EQ(error_on_small_stack("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", kSmallStack),
            "RecursionError: macro calls nest deeper than 200");
  std::string blocks, ends;
  for (int k = 0; k < 40; ++k) {
    blocks += "{% for i in [1] %}{% if true %}";
    ends += "{% endif %}{% endfor %}";
  }
  EXPECT_EQ(error_on_small_stack("{% macro f(n) %}" + blocks + "{{ f(n + 1) }}" + ends + "{% endmacro %}{{ f(0) }}",
                                 kSmallStack),
            "RecursionError: the template nests deeper than 500 levels while rendering");
  std::string nested = "1";
  for (int k = 0; k < 1000; ++k) nested = "(" + nested + " + 1)";
  EXPECT_NE(error_on_small_stack(blocks + "{{ " + nested + " }}" + ends, kSmallStack).find("nests deeper than 200"),
            std::string::npos);
}

}  // namespace
}  // namespace infer::chat
