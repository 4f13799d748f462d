// Token data in keys (DESIGN invariant 8). INFER.TOKENIZE ... STORE writes a token blob whose header
// names the vocabulary fingerprint; INFER.GENERATE TOKENS and INFER.DETOKENIZE KEY read blobs (refusing
// one made for another vocabulary) or raw little-endian uint32 arrays whose ids are all valid.
// Main thread, holding the global lock. Keys are copied out at once (invariant 3): nothing returned
// points into Redis memory.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "redis/module_api.h"
#include "tokenizer/tokenizer.h"

namespace infer::redis {

struct KeyError {
  const char* code = "ERR";  // or "WRONGTYPE"
  std::string message;       // empty: no error
  explicit operator bool() const { return !message.empty(); }
};

// Appends the ids stored at `key` to `out`, validated against `tok`.
KeyError read_token_key(RedisModuleCtx* ctx, RedisModuleString* key, const tokenizer::Tokenizer& tok,
                        std::vector<int32_t>* out);

// The bytes INFER.TOKENIZE ... STORE writes for `ids`.
std::string make_token_blob(const std::vector<int32_t>& ids, const tokenizer::Tokenizer& tok);

// Checks and decodes blob bytes (no Redis involved): used by read_token_key, unit-testable.
KeyError decode_token_bytes(const char* data, size_t len, const tokenizer::Tokenizer& tok, std::vector<int32_t>* out);

}  // namespace infer::redis
