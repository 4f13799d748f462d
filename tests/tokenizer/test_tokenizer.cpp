// Behaviour of the tokenizer on the real vocabularies in ../shared: stories260K's prompt ids, special
// token parsing on and off, BOS/EOS/EOG detection, decoding rules, fingerprint stability, threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <thread>

#include "gguf/file.h"
#include "support/data_dirs.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace infer::tokenizer {
namespace {

std::unique_ptr<Tokenizer> load(const std::string& path) {
  const auto file = gguf::File::open(path);
  return Tokenizer::from_gguf(*file);
}

bool contains(const std::vector<TokenId>& ids, TokenId id) { return std::find(ids.begin(), ids.end(), id) != ids.end(); }

class Stories : public ::testing::Test {
 protected:
  void SetUp() override {
    INFER_REQUIRE_DIR(test::models_dir());
    tok = load(test::models_dir() + "/stories260K.gguf");
  }
  std::unique_ptr<Tokenizer> tok;
};

TEST_F(Stories, PromptIdsMatchLlama2c) {
  EXPECT_EQ(tok->encode("Once upon a time"), (std::vector<TokenId>{1, 403, 407, 261, 378}));
  EXPECT_EQ(tok->encode("Once upon a time", {.add_special = false}), (std::vector<TokenId>{403, 407, 261, 378}));
}

TEST_F(Stories, VocabFactsFromMetadata) {
  EXPECT_EQ(tok->n_vocab(), 512);
  EXPECT_EQ(tok->model_name(), "llama");
  EXPECT_EQ(tok->pre_tokenizer(), "default");
  EXPECT_FALSE(tok->pre_tokenizer_unknown());
  EXPECT_EQ(tok->bos(), 1);
  EXPECT_EQ(tok->eos(), 2);
  EXPECT_EQ(tok->unk(), 0);
  EXPECT_TRUE(tok->add_bos());
  EXPECT_FALSE(tok->add_eos());
  EXPECT_TRUE(tok->is_eog(2));
  EXPECT_FALSE(tok->is_eog(1));
  EXPECT_EQ(tok->token_type(0), TokenType::Unknown);
  EXPECT_EQ(tok->token_type(3), TokenType::Byte);
  EXPECT_EQ(tok->token_text(403), "\xE2\x96\x81Once");
  EXPECT_TRUE(tok->chat_template().empty());
}

TEST_F(Stories, DecodesGreedyContinuationToReferenceText) {
  const std::vector<TokenId> ids = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338,
                                    401, 396, 267, 337, 410, 408, 419, 292, 411, 322, 265, 282, 295, 433, 426, 385, 328,
                                    432, 358, 394, 261, 370, 432, 352, 266, 268, 388, 426, 338, 391, 266, 267, 337, 335,
                                    312, 432, 398, 312, 286, 267, 414, 270, 333, 415, 426, 13, 438, 310};
  EXPECT_EQ(tok->decode(ids),
            "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she "
            "saw a big, red ball. She wanted to play with it, but it was too high.\nLily");
}

TEST_F(Stories, PiecesRenderSpacesBytesAndSpecials) {
  EXPECT_EQ(tok->token_to_piece(403), " Once");
  EXPECT_EQ(tok->token_to_piece(13), "\n");  // <0x0A>
  EXPECT_EQ(tok->token_to_piece(1), "");
  EXPECT_EQ(tok->token_to_piece(1, /*remove_special=*/false), "<s>");
  EXPECT_EQ(tok->decode({1, 403, 407}, /*remove_special=*/false), "<s> Once upon");
  EXPECT_THROW(tok->token_to_piece(512), std::out_of_range);
  EXPECT_THROW(tok->decode({403, -1}), std::out_of_range);
}

TEST_F(Stories, FingerprintIsStable) {
  // Regression guard: this value is stored in token blobs in Redis and must never change.
  EXPECT_EQ(tok->fingerprint(), 0xf52fc1d616231790ULL);
}

TEST_F(Stories, EmptyTextGivesOnlyBos) {
  EXPECT_EQ(tok->encode(""), (std::vector<TokenId>{1}));
  EXPECT_TRUE(tok->encode("", {.add_special = false}).empty());
}

TEST_F(Stories, BytesOutsideTheVocabFallBackToByteTokens) {
  // "你" (E4 BD A0) is not a piece of this 512-token vocab: after the dummy-prefix "▁" (410) it
  // becomes <0xE4> <0xBD> <0xA0> (byte tokens are ids 3 + byte).
  const auto ids = tok->encode("\xE4\xBD\xA0", {.add_special = false});
  EXPECT_EQ(ids, (std::vector<TokenId>{410, 3 + 0xE4, 3 + 0xBD, 3 + 0xA0}));
  EXPECT_EQ(tok->decode(ids), "\xE4\xBD\xA0");
}

std::string vocab(const std::string& name) { return test::vectors_dir() + "/ggml-vocab-" + name + ".gguf"; }

TEST(SpecialTokens, SpmParsesControlTextOnlyWhenAsked) {
  INFER_REQUIRE_DIR(test::vectors_dir());
  const auto tok = load(vocab("llama-spm"));
  const auto on = tok->encode("<s>Hello</s>", {.add_special = false, .parse_special = true});
  ASSERT_GE(on.size(), 3u);
  EXPECT_EQ(on.front(), 1);
  EXPECT_EQ(on.back(), 2);
  const auto off = tok->encode("<s>Hello</s>", {.add_special = false, .parse_special = false});
  EXPECT_FALSE(contains(off, 1));
  EXPECT_FALSE(contains(off, 2));
  EXPECT_EQ(tok->decode(off), "<s>Hello</s>");
  // After a special token the dummy prefix is added again: "<s>Hello" = <s> ▁Hello.
  EXPECT_EQ(on[1], tok->encode("Hello", {.add_special = false})[0]);
}

// Text appended to ids already assembled (INFER.RAG's separators) must not get a second dummy prefix:
// encode(a) + encode(b, continuation) = encode(a + b) where the split falls on a word boundary.
TEST(SpecialTokens, SpmContinuationAddsNoDummyPrefix) {
  INFER_REQUIRE_DIR(test::vectors_dir());
  const auto tok = load(vocab("llama-spm"));
  const EncodeOptions plain{.add_special = false};
  const EncodeOptions cont{.add_special = false, .continuation = true};
  std::vector<TokenId> joined = tok->encode("Hello", plain);
  const auto tail = tok->encode(" world\n\nBye", cont);
  joined.insert(joined.end(), tail.begin(), tail.end());
  EXPECT_EQ(joined, tok->encode("Hello world\n\nBye", plain));
  EXPECT_NE(tok->encode("\n\n", cont), tok->encode("\n\n", plain));  // the latter starts with ▁
  // After a special token the prefix still comes back, as in a whole-text encode.
  EXPECT_EQ(tok->encode("</s>Hi", cont), tok->encode("</s>Hi", plain));
  // BPE has no dummy prefix: the option changes nothing.
  const auto bpe = load(vocab("qwen2"));
  EXPECT_EQ(bpe->encode("\n\nHi there", cont), bpe->encode("\n\nHi there", plain));
}

TEST(SpecialTokens, Phi3StripsWhitespaceAfterSpecialTokens) {
  INFER_REQUIRE_DIR(test::vectors_dir());
  const auto tok = load(vocab("phi-3"));  // general.name "Phi3": llama.cpp sets rstrip on its special tokens
  EXPECT_EQ(tok->encode("<|user|>\nHello<|end|>\n<|assistant|>", {.add_special = false}),
            (std::vector<TokenId>{32010, 15043, 32007, 32001}));
  EXPECT_TRUE(tok->is_eog(32007));  // <|end|>
}

TEST(SpecialTokens, Qwen2ChatMarkersAndUserDefinedTokens) {
  INFER_REQUIRE_DIR(test::vectors_dir());
  const auto tok = load(vocab("qwen2"));
  const std::string text = "<|im_start|>user\nhi<|im_end|>";
  const auto on = tok->encode(text, {.add_special = false, .parse_special = true});
  EXPECT_EQ(on.front(), 151644);
  EXPECT_EQ(on.back(), 151645);
  const auto off = tok->encode(text, {.add_special = false, .parse_special = false});
  EXPECT_FALSE(contains(off, 151644));
  EXPECT_FALSE(contains(off, 151645));
  EXPECT_EQ(tok->decode(off), text);
  EXPECT_EQ(tok->decode(on), "user\nhi");
  EXPECT_EQ(tok->decode(on, /*remove_special=*/false), text);
  // User-defined tokens are matched even with special parsing off.
  const auto tool = tok->encode("a<tool_call>b", {.add_special = false, .parse_special = false});
  EXPECT_TRUE(contains(tool, 151657));
  EXPECT_EQ(tok->decode(tool), "a<tool_call>b");
}

TEST(SpecialTokens, Qwen2EndOfGenerationSet) {
  INFER_REQUIRE_DIR(test::vectors_dir());
  const auto tok = load(vocab("qwen2"));
  EXPECT_FALSE(tok->add_bos());
  EXPECT_EQ(tok->bos(), 151643);
  EXPECT_EQ(tok->eos(), 151645);
  for (TokenId id : {151643, 151645, 151662, 151663, 151664, 128247}) EXPECT_TRUE(tok->is_eog(id)) << id;
  for (TokenId id : {151644, 151657, 0, 198}) EXPECT_FALSE(tok->is_eog(id)) << id;
  EXPECT_EQ(tok->encode("Hello"), tok->encode("Hello", {.add_special = false}));
  EXPECT_EQ(tok->pre_tokenizer(), "qwen2");
  EXPECT_FALSE(tok->chat_template().empty());
}

TEST(SpecialTokens, Llama3AddsBosAndFindsEot) {
  INFER_REQUIRE_DIR(test::vectors_dir());
  const auto tok = load(vocab("llama-bpe"));
  EXPECT_TRUE(tok->add_bos());
  EXPECT_EQ(tok->encode("Hello").front(), 128000);
  EXPECT_EQ(tok->eot(), 128009);
  EXPECT_TRUE(tok->is_eog(128001));
  EXPECT_TRUE(tok->is_eog(128008));  // <|eom_id|>
  EXPECT_TRUE(tok->is_eog(128009));
  EXPECT_FALSE(tok->is_eog(128006));
  EXPECT_EQ(tok->decode(tok->encode("Hello world")), "Hello world");
  EXPECT_EQ(tok->pre_tokenizer(), "llama3");
}

TEST(SpecialTokens, Gpt2Defaults) {
  INFER_REQUIRE_DIR(test::vectors_dir());
  const auto tok = load(vocab("gpt-2"));
  EXPECT_FALSE(tok->add_bos());
  EXPECT_EQ(tok->bos(), 50256);
  EXPECT_EQ(tok->eos(), 50256);
  EXPECT_TRUE(tok->is_eog(50256));
  EXPECT_EQ(tok->encode("Hello world"), (std::vector<TokenId>{15496, 995}));
  EXPECT_EQ(tok->token_to_piece(995), " world");
}

// Random mixed-script text (valid UTF-8) survives encode → decode exactly (the SPM dummy prefix is
// removed again by decode) except where decode's clean-up of " ." and the like applies.
TEST(RoundTrip, RandomMixedScriptText) {
  INFER_REQUIRE_DIR(test::vectors_dir());
  const std::vector<std::string> alphabet = {"a", "Z", " ", "  ", "\n", "\t", "'s", "1", "42", ".", ",", "!", "<", "|",
                                             "\xC3\xA9", "\xD0\x96", "\xE4\xBD\xA0", "\xE1\x9E\x80",
                                             "\xF0\x9F\xA6\x99", "\xE2\x80\x8D", "\xC2\xA0", "<|im_end|>", "</s>"};
  std::mt19937 rng(1234);
  for (const char* name : {"qwen2", "smollm", "llama-spm"}) {
    const auto tok = load(vocab(name));
    for (int n = 0; n < 200; ++n) {
      std::string text;
      const int len = 1 + static_cast<int>(rng() % 24);
      for (int i = 0; i < len; ++i) text += alphabet[rng() % alphabet.size()];
      const auto ids = tok->encode(text, {.add_special = false, .parse_special = false});
      const std::string back = tok->decode(ids);
      if (std::string(name) == "llama-spm") {
        if (text.find(" '") != std::string::npos || text.find(" .") != std::string::npos ||
            text.find(" ,") != std::string::npos || text.find(" !") != std::string::npos)
          continue;  // SPM decode cleans these up, as llama.cpp does
      }
      ASSERT_EQ(back, text) << name << " ids " << ::testing::PrintToString(ids);
    }
  }
}

// WordPiece text does not come back (case, accents, spacing), but its decoding encodes to the same
// ids wherever no word became [UNK].
TEST(RoundTrip, WordPieceDecodingEncodesToTheSameIds) {
  INFER_REQUIRE_DIR(test::vectors_dir());
  const std::vector<std::string> alphabet = {"a", "Z", "un", "able", " ", "\n", "'s", "1", "42", ".", ",", "!", "<",
                                             "|", "$", "-", "\xC3\xA9", "\xC3\x84", "e\xCC\x81", "\xD0\x96",
                                             "\xE4\xBD\xA0", "\xE2\x80\x8D", "\xC2\xA0", "[SEP]"};
  std::mt19937 rng(4321);
  const auto tok = load(vocab("bert-bge"));
  int checked = 0;
  for (int n = 0; n < 300; ++n) {
    std::string text;
    const int len = 1 + static_cast<int>(rng() % 24);
    for (int i = 0; i < len; ++i) text += alphabet[rng() % alphabet.size()];
    const EncodeOptions words_only{.add_special = false, .parse_special = true};
    const auto ids = tok->encode(text, words_only);
    if (std::find(ids.begin(), ids.end(), tok->unk()) != ids.end()) continue;
    const std::string back = tok->decode(ids, /*remove_special=*/false);  // a parsed [SEP] stays
    ASSERT_EQ(tok->encode(back, words_only), ids) << "[" << text << "] → [" << back << "]";
    ++checked;
  }
  EXPECT_GT(checked, 100);
}

// Arbitrary bytes (invalid UTF-8, NULs, stray continuation bytes) never crash or throw, and every
// vocab id decodes.
TEST(Robustness, RandomBytesEncodeAndAllIdsDecode) {
  INFER_REQUIRE_DIR(test::vectors_dir());
  std::mt19937 rng(99);
  for (const char* name : {"llama-spm", "gpt-2", "qwen2", "deepseek-coder", "bert-bge"}) {
    const auto tok = load(vocab(name));
    for (int n = 0; n < 300; ++n) {
      std::string bytes(1 + rng() % 40, '\0');
      for (auto& b : bytes) b = static_cast<char>(rng() & 0xFF);
      std::vector<TokenId> ids;
      ASSERT_NO_THROW(ids = tok->encode(bytes)) << name;
      for (TokenId id : ids) ASSERT_TRUE(id >= 0 && id < tok->n_vocab()) << name;
      // SPM byte fallback is lossless for valid UTF-8 (with invalid input, llama.cpp's character
      // splitter swallows bytes of a following ▁ into the bad sequence, so spaces come back as ▁).
      if (tok->model_name() == "llama" && utf8::sanitize(bytes) == bytes) {
        EXPECT_EQ(tok->decode(ids), bytes) << name;
      }
    }
    std::vector<TokenId> all(tok->n_vocab());
    for (int i = 0; i < tok->n_vocab(); ++i) all[i] = i;
    EXPECT_NO_THROW(tok->decode(all, false)) << name;
  }
}

TEST(Decode, CleansSpacesBeforePunctuationWhereTheVocabAsks) {
  INFER_REQUIRE_DIR(test::vectors_dir());
  const std::string text = "a , b . c ? d ! e 's f 're g 't h ' i";
  const auto gpt2 = load(vocab("gpt-2"));
  EXPECT_EQ(gpt2->decode(gpt2->encode(text)), "a, b. c? d! e's f're g 't h'i");
  const auto qwen2 = load(vocab("qwen2"));  // qwen2 turns clean-up off
  EXPECT_EQ(qwen2->decode(qwen2->encode(text)), text);
}

TEST(Concurrency, ThreadsTokenizeIdentically) {
  INFER_REQUIRE_DIR(test::vectors_dir());
  for (const char* name : {"llama-spm", "qwen2", "bert-bge"}) {
    const auto tok = load(vocab(name));
    std::string text;
    for (int i = 0; i < 20; ++i) text += "The quick brown fox, 12345 times: <|im_end|> Привет мир! 你好 🦙🦙 \n\t ";
    const auto expected = tok->encode(text);
    std::vector<std::vector<TokenId>> results(4);
    std::vector<std::thread> threads;
    for (size_t t = 0; t < results.size(); ++t)
      threads.emplace_back([&, t] {
        for (int rep = 0; rep < 5; ++rep) results[t] = tok->encode(text);
      });
    for (auto& th : threads) th.join();
    for (const auto& r : results) EXPECT_EQ(r, expected) << name;
  }
}

}  // namespace
}  // namespace infer::tokenizer
