#include "redis/token_keys.h"

#include <cstring>

namespace infer::redis {
namespace {

// Blob layout, little-endian: u32 0xFFFFFFFF (never a token id, so a blob cannot pass for a raw array),
// u32 kBlobMagic, u64 vocabulary fingerprint, u32 count, then count u32 ids.
constexpr uint32_t kMarker = 0xFFFFFFFFu;
constexpr uint32_t kBlobMagic = 0x314B5449u;  // "ITK1"
constexpr size_t kHeaderBytes = 20;

uint32_t load_u32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);  // StringDMA data is never aligned (spec §0.6)
  return v;
}

}  // namespace

std::string make_token_blob(const std::vector<int32_t>& ids, const tokenizer::Tokenizer& tok) {
  std::string b(kHeaderBytes + 4 * ids.size(), '\0');
  uint64_t fp = tok.fingerprint();
  uint32_t n = static_cast<uint32_t>(ids.size());
  std::memcpy(&b[0], &kMarker, 4);
  std::memcpy(&b[4], &kBlobMagic, 4);
  std::memcpy(&b[8], &fp, 8);
  std::memcpy(&b[16], &n, 4);
  if (!ids.empty()) std::memcpy(&b[kHeaderBytes], ids.data(), 4 * ids.size());
  return b;
}

KeyError decode_token_bytes(const char* data, size_t len, const tokenizer::Tokenizer& tok, std::vector<int32_t>* out) {
  KeyError e;
  size_t first = 0, count = 0;
  bool check_ids = true;
  if (len >= 4 && load_u32(data) == kMarker) {
    if (len < kHeaderBytes || load_u32(data + 4) != kBlobMagic) {
      e.message = "token blob has an unknown header";
      return e;
    }
    uint64_t fp;
    std::memcpy(&fp, data + 8, 8);
    if (fp != tok.fingerprint()) {
      char buf[128];
      snprintf(buf, sizeof buf, "token blob was made for another vocabulary (fingerprint %016llx, model has %016llx)",
               static_cast<unsigned long long>(fp), static_cast<unsigned long long>(tok.fingerprint()));
      e.message = buf;
      return e;
    }
    count = load_u32(data + 16);
    if ((len - kHeaderBytes) / 4 != count || (len - kHeaderBytes) % 4 != 0) {
      e.message = "token blob is truncated or has trailing bytes";
      return e;
    }
    first = kHeaderBytes;
    check_ids = true;  // cheap, and guards against a blob edited by hand
  } else {
    if (len % 4 != 0) {
      e.message = "value is neither a token blob nor a uint32 array (length " + std::to_string(len) +
                  " is not a multiple of 4)";
      return e;
    }
    count = len / 4;
  }
  size_t base = out->size();
  out->resize(base + count);
  const uint32_t n_vocab = static_cast<uint32_t>(tok.n_vocab());
  for (size_t i = 0; i < count; ++i) {
    uint32_t id = load_u32(data + first + 4 * i);
    if (check_ids && id >= n_vocab) {
      out->resize(base);
      e.message = "token id " + std::to_string(id) + " at index " + std::to_string(i) +
                  " is out of range for the model's vocabulary of " + std::to_string(n_vocab);
      return e;
    }
    (*out)[base + i] = static_cast<int32_t>(id);
  }
  return e;
}

KeyError read_token_key(RedisModuleCtx* ctx, RedisModuleString* key, const tokenizer::Tokenizer& tok,
                        std::vector<int32_t>* out) {
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
    return e;
  }
  size_t len = 0;
  const char* data = rm::StringDMA(k, &len, REDISMODULE_READ);
  // Copied out while the key is open and the lock is held (invariant 3).
  e = decode_token_bytes(data, len, tok, out);
  rm::CloseKey(k);
  if (e) e.message = "token key '" + std::string(kname, klen) + "': " + e.message;
  return e;
}

}  // namespace infer::redis
