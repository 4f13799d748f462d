// ChatTemplate: parse once, render many times (see chat_template.h).
#include "chat/chat_template.h"

namespace infer::chat {

struct ChatTemplate::Impl {
  ClockFn clock;
  TemplateLimits limits;
};

ChatTemplate::ChatTemplate(std::string_view) : impl_(std::make_unique<Impl>()) {}
ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

std::string ChatTemplate::render(const nlohmann::ordered_json&, const nlohmann::ordered_json&, bool,
                                 const std::string&, const std::string&, const nlohmann::ordered_json&) const {
  throw TemplateError("chat templates are not implemented yet");
}

void ChatTemplate::set_clock(ClockFn clock) { impl_->clock = std::move(clock); }
void ChatTemplate::set_limits(const TemplateLimits& limits) { impl_->limits = limits; }

}  // namespace infer::chat
