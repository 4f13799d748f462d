// Turns the byte pieces of generated tokens into streamed text: holds back an incomplete UTF-8
// character until its last byte arrives, and any tail that could still grow into a stop string until
// it cannot; cuts the text before the first stop string.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace infer::engine {

class TextStream {
 public:
  // Empty stop strings are ignored. `on_text` (may be empty) receives every final piece, in order.
  TextStream(std::vector<std::string> stop, std::function<void(const std::string&)> on_text);

  // Appends one token's bytes. Returns true when a stop string is now complete: the text ends before
  // it and later add() calls are ignored.
  bool add(const std::string& piece);
  // End of generation: releases whatever was held back (a partial stop string, an incomplete
  // character as raw bytes).
  void finish();

  bool stopped() const { return stopped_; }
  const std::string& text() const { return text_; }  // everything released so far

 private:
  void release(size_t n);  // emits the first n pending bytes

  std::vector<std::string> stop_;
  std::function<void(const std::string&)> on_text_;
  std::string pending_;
  std::string text_;
  bool stopped_ = false;
};

// Bytes at the end of `s` that start a UTF-8 character whose remaining bytes have not arrived yet
// (0 when `s` ends on a character boundary or in invalid bytes that will never complete).
size_t incomplete_utf8_tail(const std::string& s);

}  // namespace infer::engine
