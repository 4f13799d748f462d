// Chat templates: the Jinja2 language as Hugging Face transformers renders a model's
// `tokenizer.chat_template` (trim_blocks and lstrip_blocks on, loop controls, the immutable sandbox,
// raise_exception(), strftime_now(), tojson as json.dumps with ensure_ascii=False).
//
// Thread rules: a `ChatTemplate` is parsed once (e.g. per model load); `render` is const and may run on
// many threads at once. Hostile templates (they come from GGUF files) fail with `TemplateError` when they
// nest too deep, loop too long or print too much; they never crash or hang. At the deepest the default
// limits allow, a render uses under 1 MiB of the calling thread's stack.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace infer::chat {

// A template that does not parse ("line 3 column 7: ...") or fails while rendering, with Jinja2's message,
// e.g. "UndefinedError: 'functions' is undefined", "raise_exception: System role not supported".
struct TemplateError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Work limits for one render; the defaults suit every real template by orders of magnitude.
struct TemplateLimits {
  std::size_t max_output_bytes = 64u << 20;   // the rendering itself
  std::uint64_t max_steps = 5'000'000;         // statements, expressions and elements built
  int max_call_depth = 200;                    // nested macro calls
  int max_depth = 500;                         // nested statements, expressions and calls while rendering
};

// The local time strftime_now() formats: seconds since the Unix epoch, as the local clock reads.
using ClockFn = std::function<std::int64_t()>;

class ChatTemplate {
 public:
  explicit ChatTemplate(std::string_view source);  // throws TemplateError with line and column
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  // Variables: messages, tools (left undefined when tools.is_null()), add_generation_prompt, bos_token,
  // eos_token, then every key of `extra` (e.g. enable_thinking). Throws TemplateError with Jinja2's message.
  std::string render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                     bool add_generation_prompt, const std::string& bos_token, const std::string& eos_token,
                     const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;

  // Tests and the CLI's --now fix the clock strftime_now() reads (default: the system's local time).
  void set_clock(ClockFn clock);
  void set_limits(const TemplateLimits& limits);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace infer::chat
