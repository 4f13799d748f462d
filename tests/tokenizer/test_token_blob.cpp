// Token blob format: round trip, raw arrays, and every refusal with its message.
#include <gtest/gtest.h>
#include <gmock/gmock.h>

#include <cstring>
#include <random>

#include "tokenizer/token_blob.h"

namespace infer::tokenizer {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kFp = 0x0123456789abcdefULL;

std::string raw(std::initializer_list<uint32_t> ids) {
  std::string s;
  for (uint32_t id : ids)
    for (int i = 0; i < 4; ++i) s += static_cast<char>((id >> (8 * i)) & 0xFF);
  return s;
}

std::string error_of(const std::string& bytes, uint64_t fp = kFp, int n_vocab = 1000) {
  try {
    decode_blob(bytes.data(), bytes.size(), fp, n_vocab);
  } catch (const BlobError& e) {
    return e.what();
  }
  return "";
}

TEST(TokenBlob, RoundTripsIds) {
  const std::vector<TokenId> ids = {1, 403, 407, 261, 378, 999, 0};
  const std::string blob = encode_blob(ids, kFp);
  EXPECT_EQ(blob.size(), kBlobHeaderBytes + 4 * ids.size());
  EXPECT_TRUE(has_blob_header(blob.data(), blob.size()));
  EXPECT_EQ(decode_blob(blob.data(), blob.size(), kFp, 1000), ids);
  const std::string empty = encode_blob({}, kFp);
  EXPECT_TRUE(decode_blob(empty.data(), empty.size(), kFp, 1000).empty());
}

TEST(TokenBlob, HeaderLayoutIsLittleEndian) {
  const std::string blob = encode_blob(std::vector<TokenId>{7}, kFp);
  const std::string expected = raw({0xFFFFFFFFu}) + "ITOK" + raw({1, 0, 0x89abcdefu, 0x01234567u, 1, 7});
  EXPECT_EQ(blob, expected);
}

TEST(TokenBlob, AcceptsRawArrays) {
  const std::string bytes = raw({5, 6, 999});
  EXPECT_FALSE(has_blob_header(bytes.data(), bytes.size()));
  EXPECT_EQ(decode_blob(bytes.data(), bytes.size(), kFp, 1000), (std::vector<TokenId>{5, 6, 999}));
  EXPECT_TRUE(decode_blob("", 0, kFp, 1000).empty());
}

TEST(TokenBlob, RefusesAnotherVocabulary) {
  const std::string blob = encode_blob(std::vector<TokenId>{1, 2}, kFp);
  EXPECT_EQ(error_of(blob, 0xfeedULL),
            "token blob was made for another vocabulary (fingerprint 0123456789abcdef, model has 000000000000feed)");
}

TEST(TokenBlob, RefusesTruncatedOrGarbledHeaders) {
  const std::string blob = encode_blob(std::vector<TokenId>{1, 2}, kFp);
  EXPECT_THAT(error_of(blob.substr(0, 10)), HasSubstr("truncated header (10 bytes"));
  EXPECT_THAT(error_of(raw({0xFFFFFFFFu})), HasSubstr("truncated header"));
  std::string bad_magic = blob;
  bad_magic[4] = 'X';
  EXPECT_THAT(error_of(bad_magic), HasSubstr("bad magic"));
  std::string bad_version = blob;
  bad_version[8] = 2;
  EXPECT_THAT(error_of(bad_version), HasSubstr("unsupported version 2"));
  std::string bad_flags = blob;
  bad_flags[12] = 1;
  EXPECT_THAT(error_of(bad_flags), HasSubstr("unsupported flags"));
}

TEST(TokenBlob, RefusesCountMismatch) {
  const std::string blob = encode_blob(std::vector<TokenId>{1, 2, 3}, kFp);
  EXPECT_THAT(error_of(blob.substr(0, blob.size() - 4)), HasSubstr("header says 3 ids but 8 bytes follow it"));
  EXPECT_THAT(error_of(blob + "x"), HasSubstr("header says 3 ids but 13 bytes follow it"));
}

TEST(TokenBlob, RefusesIdsOutOfRange) {
  const std::string blob = encode_blob(std::vector<TokenId>{1, 1000}, kFp);
  EXPECT_THAT(error_of(blob), HasSubstr("token id 1000 at position 1 is out of range for a vocabulary of 1000 tokens"));
  EXPECT_THAT(error_of(raw({3, 4000})), HasSubstr("token data: token id 4000 at position 1"));
}

TEST(TokenBlob, RefusesRawDataOfOddSize) {
  EXPECT_THAT(error_of("abcdef"), HasSubstr("6 bytes is neither a token blob nor a whole number of 32-bit ids"));
}

TEST(TokenBlob, RandomBytesOnlyEverGiveBlobErrors) {
  std::mt19937 rng(7);
  const std::string good = encode_blob(std::vector<TokenId>{1, 2, 3, 4}, kFp);
  for (int n = 0; n < 2000; ++n) {
    std::string bytes = n % 2 ? good : std::string(rng() % 64, '\0');
    if (n % 2 == 0)
      for (auto& b : bytes) b = static_cast<char>(rng() & 0xFF);
    else
      bytes[rng() % bytes.size()] = static_cast<char>(rng() & 0xFF);  // flip one byte of a good blob
    try {
      const auto ids = decode_blob(bytes.data(), bytes.size(), kFp, 1000);
      for (TokenId id : ids) ASSERT_TRUE(id >= 0 && id < 1000);
    } catch (const BlobError&) {
    }
  }
}

TEST(TokenBlob, RefusesNegativeIdsWhenEncoding) {
  EXPECT_THROW(encode_blob(std::vector<TokenId>{1, -3}, kFp), BlobError);
}

}  // namespace
}  // namespace infer::tokenizer
