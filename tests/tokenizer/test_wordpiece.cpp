// WordPiece (`tokenizer.ggml.model = "bert"`) rules on a small hand-made vocab written with
// gguf::Writer: [CLS]/[SEP] framing, BERT normalisation (case, accents, controls, punctuation, CJK),
// greedy longest match with whole-word [UNK], the normaliser keys, and decoding.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <map>

#include "gguf/file.h"
#include "gguf/writer.h"
#include "tokenizer/tokenizer.h"

namespace infer::tokenizer {
namespace {

// Ids 0..103 as in BERT's vocab ([PAD], [unused..], [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103),
// then the pieces below in order. Word-initial pieces carry "▁", continuation pieces are bare.
const std::vector<std::string> kPieces = {
    "\xE2\x96\x81hello", "\xE2\x96\x81world", "\xE2\x96\x81helloworld", "\xE2\x96\x81,", "\xE2\x96\x81!", "\xE2\x96\x81$",
    "\xE2\x96\x81" "cafe", "\xE2\x96\x81" "caf\xC3\xA9",  // café, precomposed
    "\xE2\x96\x81Hello", "\xE2\x96\x81un", "aff", "able", "\xE2\x96\x81" "a", "\xE2\x96\x81" "b",
    "\xE2\x96\x81\xE4\xB8\xAD",  // 中
    "\xE2\x96\x81\xE6\x96\x87",  // 文
    "\xE2\x96\x81\xE1\x84\x92",  // ᄒ, the leading jamo of 한
    "\xE2\x96\x81'", "\xE2\x96\x81s"};

class WordPiece : public ::testing::Test {
 protected:
  std::string path = (std::filesystem::path(::testing::TempDir()) /
                      ("tok_wordpiece_" + std::to_string(::getpid()) + "_" +
                       ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".gguf"))
                         .string();
  void TearDown() override { std::filesystem::remove(path); }

  std::unique_ptr<Tokenizer> load(const std::function<void(gguf::Writer&)>& extra = {}) {
    std::vector<std::string> tokens = {"[PAD]"};
    std::vector<int32_t> types = {3};
    for (int i = 1; i < 100; ++i) tokens.push_back("[unused" + std::to_string(i) + "]"), types.push_back(1);
    for (const char* t : {"[UNK]", "[CLS]", "[SEP]", "[MASK]"}) tokens.push_back(t), types.push_back(3);
    for (const auto& p : kPieces) {
      id_[p] = static_cast<TokenId>(tokens.size());
      tokens.push_back(p), types.push_back(1);
    }
    gguf::Writer w;
    w.add_string("general.architecture", "bert");
    w.add_string("tokenizer.ggml.model", "bert");
    w.add_string("tokenizer.ggml.pre", "bert-bge");
    w.add_array("tokenizer.ggml.tokens", tokens);
    w.add_array("tokenizer.ggml.token_type", types);
    if (extra) extra(w);
    w.write(path);
    file_ = gguf::File::open(path);
    return Tokenizer::from_gguf(*file_);
  }
  // Id of a word-initial piece ("hello" → "▁hello") or, with a leading '#', a continuation piece.
  TokenId id(const std::string& piece) const {
    return piece[0] == '#' ? id_.at(piece.substr(1)) : id_.at("\xE2\x96\x81" + piece);
  }
  std::vector<TokenId> words(const Tokenizer& tok, const std::string& text) const {
    return tok.encode(text, {.add_special = false, .parse_special = false});
  }

  std::unique_ptr<gguf::File> file_;
  std::map<std::string, TokenId> id_;
};

constexpr TokenId kUnk = 100, kCls = 101, kSep = 102;

TEST_F(WordPiece, LoadsBertDefaults) {
  const auto tok = load();
  EXPECT_EQ(tok->model_name(), "bert");
  EXPECT_EQ(tok->pre_tokenizer(), "default");
  EXPECT_FALSE(tok->pre_tokenizer_unknown());
  EXPECT_EQ(tok->bos(), kCls);
  EXPECT_EQ(tok->unk(), kUnk);
  EXPECT_EQ(tok->eos(), -1);
  EXPECT_TRUE(tok->add_bos());
  EXPECT_FALSE(tok->add_eos());
}

TEST_F(WordPiece, AddSpecialFramesWithClsAndSepWhateverTheAddKeysSay) {
  const auto tok = load([](gguf::Writer& w) {
    w.add_bool("tokenizer.ggml.add_bos_token", false);
    w.add_bool("tokenizer.ggml.add_eos_token", true);
  });
  EXPECT_EQ(tok->encode("hello world"), (std::vector<TokenId>{kCls, id("hello"), id("world"), kSep}));
  EXPECT_EQ(words(*tok, "hello world"), (std::vector<TokenId>{id("hello"), id("world")}));
  EXPECT_EQ(tok->encode(""), (std::vector<TokenId>{kCls, kSep}));
}

TEST_F(WordPiece, LowercasesAndStripsAccentsByDefault) {
  const auto tok = load();
  EXPECT_EQ(words(*tok, "HELLO Caf\xC3\xA9"), (std::vector<TokenId>{id("hello"), id("cafe")}));
  // A combining mark (U+0301) is dropped like the accent of a precomposed letter.
  EXPECT_EQ(words(*tok, "cafe\xCC\x81"), (std::vector<TokenId>{id("cafe")}));
}

TEST_F(WordPiece, NormalizerKeysOverrideTheDefaults) {
  const auto kept = load([](gguf::Writer& w) {
    w.add_bool("tokenizer.ggml.normalizer.lowercase", false);
    w.add_bool("tokenizer.ggml.normalizer.strip_accents", false);
  });
  EXPECT_EQ(words(*kept, "Hello caf\xC3\xA9"), (std::vector<TokenId>{id("Hello"), id("caf\xC3\xA9")}));
  EXPECT_EQ(words(*kept, "cafe\xCC\x81"), (std::vector<TokenId>{kUnk}));  // the mark stays in the word
  const auto lower_only = load([](gguf::Writer& w) { w.add_bool("tokenizer.ggml.normalizer.strip_accents", false); });
  EXPECT_EQ(words(*lower_only, "Hello CAF\xC3\x89"), (std::vector<TokenId>{id("hello"), id("caf\xC3\xA9")}));
}

TEST_F(WordPiece, PunctuationAndAsciiSymbolsAreWordsOfTheirOwn) {
  const auto tok = load();
  EXPECT_EQ(words(*tok, "hello,world!"), (std::vector<TokenId>{id("hello"), id(","), id("world"), id("!")}));
  EXPECT_EQ(words(*tok, "a$b"), (std::vector<TokenId>{id("a"), id("$"), id("b")}));
  EXPECT_EQ(words(*tok, "hello's"), (std::vector<TokenId>{id("hello"), id("'"), id("s")}));
  // A non-ASCII symbol (€, \p{Sc}) stays inside its word, which then has no split.
  EXPECT_EQ(words(*tok, "a\xE2\x82\xAC" "b hello"), (std::vector<TokenId>{kUnk, id("hello")}));
}

TEST_F(WordPiece, CjkIdeographsAreWordsOfTheirOwn) {
  const auto tok = load();
  EXPECT_EQ(words(*tok, "\xE4\xB8\xAD\xE6\x96\x87"), (std::vector<TokenId>{id("\xE4\xB8\xAD"), id("\xE6\x96\x87")}));
  EXPECT_EQ(words(*tok, "a\xE4\xB8\xAD" "b"), (std::vector<TokenId>{id("a"), id("\xE4\xB8\xAD"), id("b")}));
}

TEST_F(WordPiece, GreedyLongestMatchWithContinuationPieces) {
  const auto tok = load();
  EXPECT_EQ(words(*tok, "unaffable"), (std::vector<TokenId>{id("un"), id("#aff"), id("#able")}));
}

TEST_F(WordPiece, WordWithAnUnmatchedPositionBecomesOneUnk) {
  const auto tok = load();
  // "▁hello" matches, then "q" has no piece: the whole word is [UNK], not hello + [UNK].
  EXPECT_EQ(words(*tok, "helloq world"), (std::vector<TokenId>{kUnk, id("world")}));
  EXPECT_EQ(words(*tok, "unaffablex"), (std::vector<TokenId>{kUnk}));
}

TEST_F(WordPiece, WhitespaceSplitsAndControlsAreDropped) {
  const auto tok = load();
  // Ideographic space, no-break space, tab and newline separate words.
  EXPECT_EQ(words(*tok, "hello\xE3\x80\x80world\xC2\xA0hello\t\nworld"),
            (std::vector<TokenId>{id("hello"), id("world"), id("hello"), id("world")}));
  // U+200B (format), U+0001 (control), U+0000, U+FFFD and invalid UTF-8 vanish inside the word.
  const char raw[] = "hel\xE2\x80\x8Bl\x01o\0w\xEF\xBF\xBD\xFForld";
  EXPECT_EQ(words(*tok, std::string(raw, sizeof raw - 1)), (std::vector<TokenId>{id("helloworld")}));
  EXPECT_EQ(words(*tok, " \x01 \xE2\x80\x8B "), std::vector<TokenId>{});
}

TEST_F(WordPiece, HangulSyllableKeepsOnlyItsLeadingJamoWhenStrippingAccents) {
  // llama.cpp keeps the first code point of each NFD decomposition: 한 → ᄒ.
  const auto tok = load();
  EXPECT_EQ(words(*tok, "\xED\x95\x9C"), (std::vector<TokenId>{id("\xE1\x84\x92")}));
}

TEST_F(WordPiece, SpecialTokenTextIsParsedOnlyWhenAsked) {
  const auto tok = load();
  EXPECT_EQ(tok->encode("hello[SEP]world", {.add_special = false, .parse_special = true}),
            (std::vector<TokenId>{id("hello"), kSep, id("world")}));
  EXPECT_EQ(words(*tok, "[SEP]"), (std::vector<TokenId>{kUnk, kUnk, kUnk}));  // "[", "sep", "]": no pieces
}

TEST_F(WordPiece, DecodeJoinsWordsWithSpacesAndGluesContinuations) {
  const auto tok = load();
  const auto ids = tok->encode("Hello, world! Unaffable hello's");
  EXPECT_EQ(tok->decode(ids), "hello, world! unaffable hello's");
  EXPECT_EQ(tok->decode(ids, false), "[CLS] hello, world! unaffable hello's [SEP]");
  EXPECT_EQ(tok->decode(words(*tok, "helloq world")), "world");
  EXPECT_EQ(tok->decode(words(*tok, "helloq world"), false), "[UNK] world");
  EXPECT_EQ(tok->token_to_piece(id("hello")), " hello");
  EXPECT_EQ(tok->token_to_piece(id("#aff")), "aff");
}

}  // namespace
}  // namespace infer::tokenizer
