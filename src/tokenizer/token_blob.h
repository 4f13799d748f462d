// Token blobs: how token ids are stored in Redis string values (DESIGN invariant 8).
//
// Layout, all little-endian:
//   u32 0xFFFFFFFF   marker: never a valid token id, so a blob cannot be taken for a raw array
//   u32 magic        the bytes 'I' 'T' 'O' 'K'
//   u32 version      1
//   u32 flags        0 (reserved; other values are refused)
//   u64 fingerprint  Tokenizer::fingerprint() of the vocabulary the ids belong to
//   u32 count        number of ids that follow
//   u32 ids[count]
// Raw arrays of little-endian u32 ids without a header (from other tools) are accepted too, when
// their size is a multiple of 4 and every id is below n_vocab.
// Thread-safety: pure functions.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace infer::tokenizer {

inline constexpr uint32_t kBlobMarker = 0xFFFFFFFFu;
inline constexpr uint32_t kBlobMagic = 0x4B4F5449u;  // "ITOK" as little-endian bytes
inline constexpr uint32_t kBlobVersion = 1;
inline constexpr size_t kBlobHeaderBytes = 28;

class BlobError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The blob for `ids` (header + ids). Ids must be non-negative (throws BlobError otherwise).
std::string encode_blob(std::span<const TokenId> ids, uint64_t fingerprint);

// Ids from a blob or a raw u32 array; throws BlobError saying what is wrong: a blob for another
// vocabulary (fingerprint mismatch), a truncated or garbled header, a count that does not match the
// size, or an id out of range for `n_vocab`.
std::vector<TokenId> decode_blob(const void* bytes, size_t size, uint64_t expected_fingerprint, int n_vocab);

// True when the bytes start with the blob marker (header present, maybe invalid).
bool has_blob_header(const void* bytes, size_t size);

}  // namespace infer::tokenizer
