#include "redis/token_keys.h"

#include "tokenizer/token_blob.h"

namespace infer::redis {

std::string make_token_blob(const std::vector<int32_t>& ids, const tokenizer::Tokenizer& tok) {
  return tokenizer::encode_blob(ids, tok.fingerprint());
}

KeyError decode_token_bytes(const char* data, size_t len, const tokenizer::Tokenizer& tok, std::vector<int32_t>* out) {
  KeyError e;
  try {
    // decode_blob reads with memcpy: StringDMA data is never aligned (spec §0.6).
    std::vector<int32_t> ids = tokenizer::decode_blob(data, len, tok.fingerprint(), tok.n_vocab());
    out->insert(out->end(), ids.begin(), ids.end());
  } catch (const tokenizer::BlobError& ex) {
    e.message = ex.what();
  }
  return e;
}

size_t token_capacity(const char* data, size_t len) {
  const bool blob = tokenizer::has_blob_header(data, len) && len >= tokenizer::kBlobHeaderBytes;
  return (blob ? len - tokenizer::kBlobHeaderBytes : len) / sizeof(uint32_t);
}

KeyError read_token_key(RedisModuleCtx* ctx, RedisModuleString* key, const tokenizer::Tokenizer& tok,
                        std::vector<int32_t>* out, size_t max_tokens) {
  KeyError e;
  size_t klen = 0;
  const char* kname = rm::StringPtrLen(key, &klen);
  RedisModuleKey* k = rm::OpenKey(ctx, key, REDISMODULE_READ);
  int type = rm::KeyType(k);
  if (type == REDISMODULE_KEYTYPE_EMPTY) {
    rm::CloseKey(k);
    e.message = "token key '" + std::string(kname, klen) + "' does not exist";
    return e;
  }
  if (type != REDISMODULE_KEYTYPE_STRING) {
    rm::CloseKey(k);
    e.code = "WRONGTYPE";
    e.message = "token key '" + std::string(kname, klen) + "' does not hold a string";
    e.bad_value = true;
    return e;
  }
  size_t len = 0;
  const char* data = rm::StringDMA(k, &len, REDISMODULE_READ);
  if (const size_t n = token_capacity(data, len); out->size() > max_tokens || n > max_tokens - out->size()) {
    rm::CloseKey(k);
    e.message = "token key '" + std::string(kname, klen) + "' holds " + std::to_string(n) + " tokens" +
                (out->empty() ? "" : " after " + std::to_string(out->size()) + " from earlier keys") +
                ", more than the model's context of " + std::to_string(max_tokens) + " tokens";
    return e;
  }
  // Copied out while the key is open and the lock is held (invariant 3).
  e = decode_token_bytes(data, len, tok, out);
  rm::CloseKey(k);
  if (e) {
    e.message = "token key '" + std::string(kname, klen) + "': " + e.message;
    e.bad_value = true;
  }
  return e;
}

}  // namespace infer::redis
