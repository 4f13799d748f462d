#include "engine/text_stream.h"

#include <algorithm>

namespace infer::engine {

size_t incomplete_utf8_tail(const std::string& s) {
  // Walk back over at most 3 continuation bytes to the lead byte, then compare the lead's length.
  const size_t n = s.size();
  for (size_t back = 1; back <= std::min<size_t>(4, n); ++back) {
    const auto c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte
    size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

TextStream::TextStream(std::vector<std::string> stop, std::function<void(const std::string&)> on_text)
    : on_text_(std::move(on_text)) {
  for (auto& s : stop)
    if (!s.empty()) stop_.push_back(std::move(s));
}

void TextStream::release(size_t n) {
  if (n == 0) return;
  std::string piece = pending_.substr(0, n);
  pending_.erase(0, n);
  text_ += piece;
  if (on_text_) on_text_(piece);
}

bool TextStream::add(const std::string& piece) {
  if (stopped_) return true;
  pending_ += piece;
  // Released text never holds the start of a possible match, so searching pending_ is enough.
  size_t first = std::string::npos;
  for (const auto& s : stop_) first = std::min(first, pending_.find(s));
  if (first != std::string::npos) {
    pending_.resize(first);
    release(first);
    stopped_ = true;
    return true;
  }
  // Longest tail of pending_ that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const auto& s : stop_) {
    for (size_t len = std::min(s.size() - 1, pending_.size()); len > hold; --len) {
      if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  hold = std::max(hold, incomplete_utf8_tail(pending_));
  release(pending_.size() - hold);
  return false;
}

void TextStream::finish() {
  if (!stopped_) release(pending_.size());
}

}  // namespace infer::engine
