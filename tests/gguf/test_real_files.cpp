// The shared real files (stories260K, the tokenizer-vector vocabularies) open with the facts their
// README states.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "gguf/file.h"
#include "support/data_dirs.h"

namespace infer::gguf {
namespace {

std::string stories_path() { return infer::test::models_dir() + "/stories260K.gguf"; }

TEST(GgufRealFiles, Stories260KHeaderAndMetadata) {
  INFER_REQUIRE_DIR(infer::test::models_dir());
  auto f = File::open(stories_path());
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->file_size(), 1185376u);
  EXPECT_EQ(f->metadata().size(), 19u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_FALSE(f->has("general.alignment"));
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->get_string("general.name"), "llama");
  EXPECT_EQ(f->get_int("llama.block_count"), 5);
  EXPECT_EQ(f->get_int("llama.embedding_length"), 64);
  EXPECT_EQ(f->get_int("llama.feed_forward_length"), 172);
  EXPECT_EQ(f->get_int("llama.attention.head_count"), 8);
  EXPECT_EQ(f->get_int("llama.attention.head_count_kv"), 4);
  EXPECT_EQ(f->get_int("llama.rope.dimension_count"), 8);
  EXPECT_EQ(f->get_int("llama.context_length"), 2048);
  EXPECT_FLOAT_EQ(static_cast<float>(f->get_float("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
  EXPECT_EQ(f->find("llama.block_count")->type, ValueType::UINT32);
  EXPECT_FALSE(f->has("llama.rope.freq_base"));
  EXPECT_EQ(f->get_float("llama.rope.freq_base", 10000.0), 10000.0);
  EXPECT_EQ(f->get_string("tokenizer.ggml.model"), "llama");
  EXPECT_FALSE(f->has("tokenizer.ggml.pre"));
  EXPECT_EQ(f->get_int("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(f->get_int("tokenizer.ggml.eos_token_id"), 2);
  EXPECT_EQ(f->get_int("tokenizer.ggml.unknown_token_id"), 0);
  EXPECT_EQ(f->find("tokenizer.ggml.padding_token_id")->as_uint(), 4294967295u);
  const Value* tokens = f->find("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(tokens->element_type, ValueType::STRING);
  ASSERT_EQ(tokens->array_size(), 512u);
  EXPECT_EQ(tokens->as_array()[3].as_string(), "<0x00>");
  const Value* types = f->find("tokenizer.ggml.token_type");
  ASSERT_NE(types, nullptr);
  int counts[8] = {};
  for (const Value& t : types->as_array()) counts[t.as_int()]++;
  EXPECT_EQ(counts[1], 253);
  EXPECT_EQ(counts[2], 1);
  EXPECT_EQ(counts[3], 2);
  EXPECT_EQ(counts[6], 256);
}

TEST(GgufRealFiles, Stories260KHas48F32TensorsOfAFiveLayerLlama) {
  INFER_REQUIRE_DIR(infer::test::models_dir());
  auto f = File::open(stories_path());
  ASSERT_EQ(f->tensors().size(), 48u);
  int64_t params = 0;
  for (const TensorView& t : f->tensors()) {
    EXPECT_EQ(t.type, TensorType::F32) << t.name;
    EXPECT_EQ(t.offset % 32, 0u) << t.name;
    EXPECT_EQ(t.n_bytes, static_cast<uint64_t>(t.n_elements()) * 4) << t.name;
    params += t.n_elements();
  }
  EXPECT_EQ(params, 292800);
  EXPECT_EQ(f->data_offset() % 32, 0u);
  const TensorView* embd = f->tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->n_dims, 2u);
  EXPECT_EQ(embd->ne[0], 64);
  EXPECT_EQ(embd->ne[1], 512);
  EXPECT_EQ(embd->row_bytes(), 256u);
  ASSERT_NE(f->tensor("output.weight"), nullptr);  // not tied to the embedding
  EXPECT_NE(f->tensor("output.weight")->data, embd->data);
  EXPECT_EQ(f->tensor("output_norm.weight")->n_dims, 1u);
  for (int l = 0; l < 5; ++l) {
    std::string p = "blk." + std::to_string(l) + ".";
    const TensorView* k = f->tensor(p + "attn_k.weight");
    ASSERT_NE(k, nullptr) << p;
    EXPECT_EQ(k->ne[0], 64);
    EXPECT_EQ(k->ne[1], 32);
    const TensorView* down = f->tensor(p + "ffn_down.weight");
    ASSERT_NE(down, nullptr) << p;
    EXPECT_EQ(down->ne[0], 172);
    EXPECT_EQ(down->ne[1], 64);
    for (const char* n : {"attn_q", "attn_v", "attn_output", "attn_norm", "ffn_gate", "ffn_up", "ffn_norm"}) {
      EXPECT_NE(f->tensor(p + n + ".weight"), nullptr) << p << n;
    }
  }
  EXPECT_EQ(f->tensor("blk.5.attn_q.weight"), nullptr);
}

TEST(GgufRealFiles, TensorViewsPointAtTheFileBytes) {
  INFER_REQUIRE_DIR(infer::test::models_dir());
  auto f = File::open(stories_path());
  const TensorView* t = f->tensor("blk.4.ffn_norm.weight");
  ASSERT_NE(t, nullptr);
  std::ifstream in(stories_path(), std::ios::binary);
  in.seekg(static_cast<std::streamoff>(f->data_offset() + t->offset));
  std::vector<char> expect(t->n_bytes);
  in.read(expect.data(), static_cast<std::streamsize>(expect.size()));
  ASSERT_TRUE(in.good());
  EXPECT_EQ(std::memcmp(expect.data(), t->data, t->n_bytes), 0);
  // After release() the pages fault back in from the file with the same content.
  f->prefetch();
  f->release();
  EXPECT_EQ(std::memcmp(expect.data(), t->data, t->n_bytes), 0);
}

TEST(GgufRealFiles, LockInMemoryIsBestEffort) {
  INFER_REQUIRE_DIR(infer::test::models_dir());
  OpenOptions opts;
  opts.lock_in_memory = true;
  opts.populate = true;
  auto f = File::open(stories_path(), opts);
  // Whether mlock succeeds depends on RLIMIT_MEMLOCK; either way the file is usable.
  EXPECT_EQ(f->tensors().size(), 48u);
  f->release();
  EXPECT_EQ(f->tensor("token_embd.weight")->ne[1], 512);
}

TEST(GgufRealFiles, HugePageCopyHoldsTheFileBytesAndIsReadOnly) {
  INFER_REQUIRE_DIR(infer::test::models_dir());
  OpenOptions opts;
  opts.huge_page_copy = true;
  auto copy = File::open(stories_path(), opts);
  auto mapped = File::open(stories_path());
  EXPECT_TRUE(copy->copied());
  EXPECT_FALSE(mapped->copied());
  ASSERT_EQ(copy->tensors().size(), mapped->tensors().size());
  const TensorView& first = copy->tensors().front();
  // The copy starts on a 2 MiB boundary (THP backs only aligned huge pages).
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first.data - copy->data_offset() - first.offset) % (2u << 20), 0u);
  // release() must not drop a copy: anonymous pages would come back as zeros.
  copy->prefetch();
  copy->release();
  for (size_t i = 0; i < copy->tensors().size(); ++i) {
    const TensorView& a = copy->tensors()[i];
    const TensorView& b = mapped->tensors()[i];
    ASSERT_EQ(a.n_bytes, b.n_bytes) << a.name;
    ASSERT_EQ(std::memcmp(a.data, b.data, a.n_bytes), 0) << a.name;
  }
  // Read-only like the mapping: a write faults.
  EXPECT_DEATH(const_cast<uint8_t*>(first.data)[0] ^= 1, "");
}

// The vocab files this test covers, by name: a file added to tokenizer-vectors is not covered until it
// is listed here (and a listed file that goes missing fails).
TEST(GgufRealFiles, EveryTokenizerVocabFileOpens) {
  INFER_REQUIRE_DIR(infer::test::vectors_dir());
  const char* const kVocabFiles[] = {
      "ggml-vocab-bert-bge.gguf",  "ggml-vocab-deepseek-coder.gguf", "ggml-vocab-gpt-2.gguf",
      "ggml-vocab-llama-bpe.gguf", "ggml-vocab-llama-spm.gguf",      "ggml-vocab-phi-3.gguf",
      "ggml-vocab-qwen2.gguf",     "ggml-vocab-smollm.gguf",         "ggml-vocab-starcoder.gguf"};
  for (const char* name : kVocabFiles) {
    const std::string path = infer::test::vectors_dir() + "/" + name;
    SCOPED_TRACE(path);
    auto f = File::open(path);
    EXPECT_EQ(f->tensors().size(), 0u);
    EXPECT_TRUE(f->has("general.architecture"));
    const Value* tokens = f->find("tokenizer.ggml.tokens");
    ASSERT_NE(tokens, nullptr);
    EXPECT_EQ(tokens->element_type, ValueType::STRING);
    EXPECT_GT(tokens->array_size(), 1000u);
    EXPECT_EQ(f->find("tokenizer.ggml.token_type")->array_size(), tokens->array_size());
  }
}

TEST(GgufRealFiles, Gpt2VocabFacts) {
  INFER_REQUIRE_DIR(infer::test::vectors_dir());
  auto f = File::open(infer::test::vectors_dir() + "/ggml-vocab-gpt-2.gguf");
  EXPECT_EQ(f->get_string("general.architecture"), "gpt2");
  EXPECT_EQ(f->get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(f->get_string("tokenizer.ggml.pre"), "gpt-2");
  EXPECT_EQ(f->find("tokenizer.ggml.tokens")->array_size(), 50257u);
  EXPECT_EQ(f->find("tokenizer.ggml.merges")->array_size(), 50000u);
  EXPECT_EQ(f->get_int("tokenizer.ggml.bos_token_id"), 50256);
  EXPECT_EQ(f->get_int("tokenizer.ggml.eos_token_id"), 50256);
  EXPECT_LE(f->data_offset(), f->file_size());
}

TEST(GgufRealFiles, TypedGettersNameTheKey) {
  INFER_REQUIRE_DIR(infer::test::models_dir());
  auto f = File::open(stories_path());
  try {
    f->get_int("llama.no_such_key");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("missing metadata key llama.no_such_key"));
  }
  try {
    f->get_int("general.architecture");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("key general.architecture: metadata value of type STRING is not an integer"));
  }
  EXPECT_EQ(f->get_int("llama.no_such_key", 7), 7);
  EXPECT_EQ(f->get_string("general.no_such_key", "x"), "x");
  EXPECT_THROW(f->get_bool("llama.block_count", false), Error);
  EXPECT_THROW(f->get_string("llama.block_count"), Error);
}

TEST(GgufRealFiles, OpenReportsMissingAndNonGgufFiles) {
  EXPECT_THROW(File::open("/nonexistent/model.gguf"), Error);
  EXPECT_THROW(File::open("/"), Error);
  try {
    File::open("/proc/self/status");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("/proc/self/status"));
  }
}

}  // namespace
}  // namespace infer::gguf
