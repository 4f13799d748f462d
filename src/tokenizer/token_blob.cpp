#include "tokenizer/token_blob.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace infer::tokenizer {
namespace {

uint32_t load_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

uint64_t load_u64(const uint8_t* p) { return load_u32(p) | static_cast<uint64_t>(load_u32(p + 4)) << 32; }

void store_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
}

std::string hex64(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

std::vector<TokenId> read_ids(const uint8_t* p, size_t count, int n_vocab, const char* what) {
  std::vector<TokenId> ids(count);
  for (size_t i = 0; i < count; ++i) {
    const uint32_t id = load_u32(p + 4 * i);
    if (n_vocab < 0 || id >= static_cast<uint32_t>(n_vocab))
      throw BlobError(std::string(what) + ": token id " + std::to_string(id) + " at position " + std::to_string(i) +
                      " is out of range for a vocabulary of " + std::to_string(n_vocab) + " tokens");
    ids[i] = static_cast<TokenId>(id);
  }
  return ids;
}

}  // namespace

std::string encode_blob(std::span<const TokenId> ids, uint64_t fingerprint) {
  if (ids.size() > UINT32_MAX) throw BlobError("token blob: too many ids (" + std::to_string(ids.size()) + ")");
  std::string out;
  out.reserve(kBlobHeaderBytes + 4 * ids.size());
  store_u32(out, kBlobMarker);
  store_u32(out, kBlobMagic);
  store_u32(out, kBlobVersion);
  store_u32(out, 0);
  store_u32(out, static_cast<uint32_t>(fingerprint));
  store_u32(out, static_cast<uint32_t>(fingerprint >> 32));
  store_u32(out, static_cast<uint32_t>(ids.size()));
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0) throw BlobError("token blob: negative token id " + std::to_string(ids[i]) + " at position " + std::to_string(i));
    store_u32(out, static_cast<uint32_t>(ids[i]));
  }
  return out;
}

bool has_blob_header(const void* bytes, size_t size) {
  return size >= 4 && load_u32(static_cast<const uint8_t*>(bytes)) == kBlobMarker;
}

std::vector<TokenId> decode_blob(const void* bytes, size_t size, uint64_t expected_fingerprint, int n_vocab) {
  const auto* p = static_cast<const uint8_t*>(bytes);
  if (!has_blob_header(bytes, size)) {
    if (size % 4 != 0)
      throw BlobError("token data: " + std::to_string(size) +
                      " bytes is neither a token blob nor a whole number of 32-bit ids");
    return read_ids(p, size / 4, n_vocab, "token data");
  }
  if (size < kBlobHeaderBytes)
    throw BlobError("token blob: truncated header (" + std::to_string(size) + " bytes, the header needs " +
                    std::to_string(kBlobHeaderBytes) + ")");
  if (load_u32(p + 4) != kBlobMagic) throw BlobError("token blob: bad magic (expected 'ITOK')");
  if (const uint32_t version = load_u32(p + 8); version != kBlobVersion)
    throw BlobError("token blob: unsupported version " + std::to_string(version) + " (this build reads version 1)");
  if (const uint32_t flags = load_u32(p + 12); flags != 0)
    throw BlobError("token blob: unsupported flags 0x" + hex64(flags).substr(8));
  const uint64_t fingerprint = load_u64(p + 16);
  if (fingerprint != expected_fingerprint)
    throw BlobError("token blob was made for another vocabulary (fingerprint " + hex64(fingerprint) + ", model has " +
                    hex64(expected_fingerprint) + ")");
  const uint64_t count = load_u32(p + 24);
  const uint64_t payload = size - kBlobHeaderBytes;
  if (payload != count * 4)
    throw BlobError("token blob: header says " + std::to_string(count) + " ids but " + std::to_string(payload) +
                    " bytes follow it (expected " + std::to_string(count * 4) + ")");
  return read_ids(p + kBlobHeaderBytes, count, n_vocab, "token blob");
}

}  // namespace infer::tokenizer
