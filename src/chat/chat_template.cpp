// ChatTemplate: parse once, render many times (see chat_template.h).
#include "chat/chat_template.h"

#include "chat/jinja_ast.h"
#include "chat/jinja_interpreter.h"

namespace infer::chat {

struct ChatTemplate::Impl {
  jinja::Body body;
  ClockFn clock;
  TemplateLimits limits;
};

namespace {
// Errors from the standard library (a number out of range, memory) reach callers as TemplateError too.
template <class F>
auto guarded(F&& f) {
  try {
    return f();
  } catch (const TemplateError&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw TemplateError("MemoryError: the template needs more memory than is available");
  } catch (const std::exception& e) {
    throw TemplateError(std::string("TemplateRuntimeError: ") + e.what());
  }
}
}  // namespace

ChatTemplate::ChatTemplate(std::string_view source) : impl_(std::make_unique<Impl>()) {
  impl_->body = guarded([&] { return jinja::parse_template(source); });
}
ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                 bool add_generation_prompt, const std::string& bos_token,
                                 const std::string& eos_token, const nlohmann::ordered_json& extra) const {
  using jinja::Value;
  std::vector<std::pair<std::string, Value>> variables;
  variables.emplace_back("messages", Value::from_json(messages));
  if (!tools.is_null()) variables.emplace_back("tools", Value::from_json(tools));
  variables.emplace_back("add_generation_prompt", Value::boolean(add_generation_prompt));
  variables.emplace_back("bos_token", Value::string(bos_token));
  variables.emplace_back("eos_token", Value::string(eos_token));
  if (extra.is_object())
    for (auto it = extra.begin(); it != extra.end(); ++it) variables.emplace_back(it.key(), Value::from_json(it.value()));
  return guarded([&] {
    jinja::Interpreter interpreter(impl_->limits, impl_->clock);
    return interpreter.render(impl_->body, std::move(variables));
  });
}

void ChatTemplate::set_clock(ClockFn clock) { impl_->clock = std::move(clock); }
void ChatTemplate::set_limits(const TemplateLimits& limits) { impl_->limits = limits; }

}  // namespace infer::chat
