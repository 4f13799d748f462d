// Token data in keys (DESIGN invariant 8). INFER.TOKENIZE ... STORE writes a token blob whose header
// names the vocabulary fingerprint; INFER.GENERATE TOKENS and INFER.DETOKENIZE KEY read blobs (refusing
// one made for another vocabulary) or raw little-endian uint32 arrays whose ids are all valid.
// Main thread, holding the global lock. Keys are copied out at once (invariant 3): nothing returned
// points into Redis memory.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "redis/module_api.h"
#include "tokenizer/tokenizer.h"

namespace infer::redis {

struct KeyError {
  const char* code = "ERR";  // or "WRONGTYPE"
  std::string message;       // empty: no error
  bool bad_value = false;    // the value is no token list for the model (another type, format, vocabulary)
  explicit operator bool() const { return !message.empty(); }
};

// Appends the ids stored at `key` to `out`, validated against `tok`. A key that would bring `out` past
// `max_tokens` ids is refused from its byte length alone, before anything is copied or decoded, so an
// oversized key costs the main thread nothing.
KeyError read_token_key(RedisModuleCtx* ctx, RedisModuleString* key, const tokenizer::Tokenizer& tok,
                        std::vector<int32_t>* out, size_t max_tokens);

// How many ids a value of `len` bytes can hold (a blob's header excluded), without decoding it.
size_t token_capacity(const char* data, size_t len);

// The bytes INFER.TOKENIZE ... STORE writes for `ids`.
std::string make_token_blob(const std::vector<int32_t>& ids, const tokenizer::Tokenizer& tok);

// Checks and decodes blob bytes (no Redis involved): used by read_token_key, unit-testable.
KeyError decode_token_bytes(const char* data, size_t len, const tokenizer::Tokenizer& tok, std::vector<int32_t>* out);

}  // namespace infer::redis
