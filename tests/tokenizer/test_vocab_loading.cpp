// Loading rules on small hand-made vocab files (written with gguf::Writer): bad or missing keys are
// clear errors, an unknown pre-tokenizer falls back to gpt-2 with a flag, defaults and overrides of
// add_bos, EOG detection by text; plus every named pre-tokenizer's regexes compile and split.
#include <gtest/gtest.h>
#include <gmock/gmock.h>

#include <filesystem>

#include "gguf/file.h"
#include "gguf/writer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace infer::tokenizer {
namespace {

using ::testing::HasSubstr;

// A tiny byte-level BPE vocab: the 256 byte characters plus a few merges.
struct ToyBpe {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<std::string> merges = {"h e", "l l", "he ll", "hell o"};
  ToyBpe() {
    int next = 256;  // GPT-2 byte→unicode: printable bytes stay, the others map to U+0100 + n
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const uint32_t cp = printable ? b : next++;
      std::string s;
      if (cp < 0x80) s += static_cast<char>(cp);
      else {
        s += static_cast<char>(0xC0 | (cp >> 6));
        s += static_cast<char>(0x80 | (cp & 0x3F));
      }
      tokens.push_back(s);
      types.push_back(1);
    }
    for (const char* t : {"he", "ll", "hell", "hello"}) tokens.push_back(t), types.push_back(1);
    for (const char* t : {"<|endoftext|>", "<|im_end|>"}) tokens.push_back(t), types.push_back(3);
  }
};

class VocabFile : public ::testing::Test {
 protected:
  std::string path = (std::filesystem::path(::testing::TempDir()) /
                      ("tok_vocab_" + std::to_string(::getpid()) + "_" +
                       ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".gguf"))
                         .string();
  void TearDown() override { std::filesystem::remove(path); }

  std::unique_ptr<Tokenizer> load(const std::function<void(gguf::Writer&)>& fill) {
    gguf::Writer w;
    w.add_string("general.architecture", "llama");
    fill(w);
    w.write(path);
    file_ = gguf::File::open(path);
    return Tokenizer::from_gguf(*file_);
  }
  std::string load_error(const std::function<void(gguf::Writer&)>& fill) {
    try {
      load(fill);
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  }
  static void bpe(gguf::Writer& w, const std::string& pre) {
    ToyBpe toy;
    w.add_string("tokenizer.ggml.model", "gpt2");
    if (!pre.empty()) w.add_string("tokenizer.ggml.pre", pre);
    w.add_array("tokenizer.ggml.tokens", toy.tokens);
    w.add_array("tokenizer.ggml.token_type", toy.types);
    w.add_array("tokenizer.ggml.merges", toy.merges);
  }
  std::unique_ptr<gguf::File> file_;
};

TEST_F(VocabFile, BpeMergesByRank) {
  const auto tok = load([](gguf::Writer& w) { bpe(w, "gpt-2"); });
  EXPECT_EQ(tok->encode("hello"), (std::vector<TokenId>{259}));
  EXPECT_EQ(tok->encode("hellx"), (std::vector<TokenId>{258, 'x'}));
  EXPECT_EQ(tok->decode(tok->encode("hello hello!")), "hello hello!");
  EXPECT_FALSE(tok->pre_tokenizer_unknown());
  EXPECT_TRUE(tok->is_eog(260));  // <|endoftext|> by text
  EXPECT_TRUE(tok->is_eog(261));  // <|im_end|> by text
  EXPECT_EQ(tok->eot(), 261);     // <|im_end|> comes before <|endoftext|> in the detection list
}

TEST_F(VocabFile, UnknownPreTokenizerFallsBackToGpt2) {
  const auto tok = load([](gguf::Writer& w) { bpe(w, "no-such-pre"); });
  EXPECT_TRUE(tok->pre_tokenizer_unknown());
  EXPECT_EQ(tok->pre_tokenizer(), "gpt-2");
  EXPECT_EQ(tok->encode("hello"), (std::vector<TokenId>{259}));
}

TEST_F(VocabFile, MissingPreTokenizerUsesDefault) {
  const auto tok = load([](gguf::Writer& w) { bpe(w, ""); });
  EXPECT_FALSE(tok->pre_tokenizer_unknown());
  EXPECT_EQ(tok->pre_tokenizer(), "default");
}

TEST_F(VocabFile, AddBosDefaultsAndOverride) {
  EXPECT_FALSE(load([](gguf::Writer& w) { bpe(w, "gpt-2"); })->add_bos());
  EXPECT_TRUE(load([](gguf::Writer& w) { bpe(w, "llama-bpe"); })->add_bos());
  const auto tok = load([](gguf::Writer& w) {
    bpe(w, "llama-bpe");
    w.add_bool("tokenizer.ggml.add_bos_token", false);
    w.add_uint32("tokenizer.ggml.bos_token_id", 260);
    w.add_uint32("tokenizer.ggml.eos_token_id", 99999);  // out of range: ignored, default stays
  });
  EXPECT_FALSE(tok->add_bos());
  EXPECT_EQ(tok->bos(), 260);
  EXPECT_EQ(tok->eos(), 11);
}

TEST_F(VocabFile, FingerprintDependsOnTokensAndMerges) {
  const uint64_t a = load([](gguf::Writer& w) { bpe(w, "gpt-2"); })->fingerprint();
  const uint64_t b = load([](gguf::Writer& w) { bpe(w, "gpt-2"); })->fingerprint();
  const uint64_t c = load([](gguf::Writer& w) { bpe(w, "qwen2"); })->fingerprint();
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST_F(VocabFile, ErrorsNameTheKey) {
  EXPECT_THAT(load_error([](gguf::Writer& w) { w.add_string("tokenizer.ggml.model", "t5"); }),
              HasSubstr("tokenizer.ggml.model 't5' is not supported"));
  EXPECT_THAT(load_error([](gguf::Writer& w) { w.add_string("tokenizer.ggml.model", "bert"); }),
              HasSubstr("missing key tokenizer.ggml.tokens"));
  EXPECT_THAT(load_error([](gguf::Writer& w) { w.add_string("tokenizer.ggml.model", "llama"); }),
              HasSubstr("missing key tokenizer.ggml.tokens"));
  EXPECT_THAT(load_error([](gguf::Writer& w) {
                w.add_string("tokenizer.ggml.model", "gpt2");
                w.add_array("tokenizer.ggml.tokens", std::vector<std::string>{"a", "b"});
              }),
              HasSubstr("missing key tokenizer.ggml.merges"));
  EXPECT_THAT(load_error([](gguf::Writer& w) {
                w.add_string("tokenizer.ggml.model", "llama");
                w.add_array("tokenizer.ggml.tokens", std::vector<std::string>{"a", "b"});
                w.add_array("tokenizer.ggml.scores", std::vector<float>{0.0f});
              }),
              HasSubstr("tokenizer.ggml.scores must be an array of at least 2"));
  EXPECT_THAT(load_error([](gguf::Writer& w) {
                w.add_string("tokenizer.ggml.model", "gpt2");
                w.add_array("tokenizer.ggml.tokens", std::vector<std::string>{"a", "b"});
                w.add_array("tokenizer.ggml.merges", std::vector<uint32_t>{1, 2});
              }),
              HasSubstr("tokenizer.ggml.merges[0] is not a string"));
  EXPECT_THAT(load_error([](gguf::Writer& w) {
                w.add_string("tokenizer.ggml.model", "llama");
                w.add_array("tokenizer.ggml.tokens", std::vector<std::string>{});
              }),
              HasSubstr("tokenizer.ggml.tokens is empty"));
}

TEST(PreTokenizer, EveryNamedOneCompilesAndCoversTheText) {
  const std::string text = "Hello world's  123456 \xD0\x9F\xD1\x80\xD0\xB8 \xE4\xBD\xA0\xE5\xA5\xBD!!\n\n\t x";
  for (const char* name : {"default", "gpt-2", "llama-bpe", "llama3", "qwen2", "qwen35", "smollm", "deepseek-coder",
                           "starcoder", "command-r", "refact", "falcon", "mpt", "olmo", "dbrx", "stablelm2",
                           "chatglm-bpe", "poro-chat", "viking", "bloom", "gpt-4o", "deepseek-r1-qwen", "tekken", "grok-2"}) {
    const auto spec = find_pre_tokenizer(name);
    ASSERT_TRUE(spec.has_value()) << name;
    const PreTokenizer pre(spec->patterns);
    const auto words = pre.split(text);
    ASSERT_FALSE(words.empty()) << name;
    size_t expected_begin = 0;
    for (const auto& [b, e] : words) {
      EXPECT_EQ(b, expected_begin) << name;
      EXPECT_LT(b, e) << name;
      expected_begin = e;
    }
    EXPECT_EQ(expected_begin, text.size()) << name;
  }
  EXPECT_FALSE(find_pre_tokenizer("no-such-pre").has_value());
}

TEST(PreTokenizer, Gpt2SplitsLikeItsRegex) {
  const PreTokenizer pre(find_pre_tokenizer("gpt-2")->patterns);
  const std::string text = "Hello world's  123 ok";
  std::vector<std::string> words;
  for (const auto& [b, e] : pre.split(text)) words.push_back(text.substr(b, e - b));
  EXPECT_EQ(words, (std::vector<std::string>{"Hello", " world", "'s", " ", " 123", " ok"}));
}

TEST(PreTokenizer, Llama3GroupsDigitsByThree) {
  const PreTokenizer pre(find_pre_tokenizer("llama-bpe")->patterns);
  const std::string text = "1234567";
  std::vector<std::string> words;
  for (const auto& [b, e] : pre.split(text)) words.push_back(text.substr(b, e - b));
  EXPECT_EQ(words, (std::vector<std::string>{"123", "456", "7"}));
}

}  // namespace
}  // namespace infer::tokenizer
