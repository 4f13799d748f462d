// Token masks over real vocabularies (SPM, BPE, WordPiece): random walks that take only allowed tokens
// always spell text the grammar accepts, and each mask agrees with what the matcher accepts.
#include <gtest/gtest.h>

#include <random>
#include <thread>
#include <string>

#include "gguf/file.h"
#include "grammar/compiled_grammar.h"
#include "support/data_dirs.h"
#include "tokenizer/tokenizer.h"

namespace infer::grammar {
namespace {

const char* kArithmetic = R"g(
root  ::= expr
expr  ::= term ([-+*/] term){0,6}
term  ::= num | "(" expr ")"
num   ::= [0-9]{1,4}
)g";

const char* kList = R"g(root ::= item{1,3}
item ::= "- " [a-z ]{1,12} "\n"
)g";

// Text with characters outside ASCII, so that multi-byte UTF-8 pieces and byte tokens are exercised.
const char* kUnicode = R"g(root ::= "«" [^»\x00-\x1F]{1,8} "»"
)g";

std::unique_ptr<tokenizer::Tokenizer> load(const std::string& path) {
  auto file = gguf::File::open(path);
  return tokenizer::Tokenizer::from_gguf(*file);
}

struct Walk {
  std::string text;
  bool ended = false;
};

// Takes uniformly random allowed tokens (ending when an end-of-generation token is drawn, which gets a
// fair chance once the text is long, or when the grammar completes).
Walk random_walk(const std::shared_ptr<const CompiledGrammar>& g, std::mt19937& rng, int max_steps) {
  GrammarMatcher m(g);
  Walk w;
  std::vector<int32_t> allowed;
  for (int step = 0; step < max_steps && !m.complete(); ++step) {
    auto mask = m.allowed();
    allowed.clear();
    bool eog_allowed = false;
    for (int32_t id = 0; id < g->vocab().n_vocab(); ++id) {
      if (!mask->allows(id)) continue;
      if (g->vocab().is_eog(id)) eog_allowed = true;
      allowed.push_back(id);
    }
    EXPECT_EQ(int(allowed.size()), mask->n_allowed);
    EXPECT_FALSE(allowed.empty()) << "no token allowed after \"" << w.text << "\"";
    if (allowed.empty()) return w;
    if (!g->vocab().eog_ids().empty()) {
      EXPECT_EQ(eog_allowed, m.can_end());
    }
    int32_t id = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
    if (eog_allowed && std::bernoulli_distribution(step > 8 ? 0.5 : 0.1)(rng)) id = g->vocab().eog_ids().front();
    EXPECT_TRUE(m.accept(id)) << "token " << id << " was allowed but not accepted";
    if (g->vocab().is_eog(id)) break;
    w.text += g->vocab().piece(id);
  }
  w.ended = m.complete();
  return w;
}

// Every token's mask bit against accept() on a fresh matcher fed `prefix_ids` first.
void check_mask_exactly(const std::shared_ptr<const CompiledGrammar>& g, const std::vector<int32_t>& prefix_ids, int stride) {
  GrammarMatcher base(g);
  for (int32_t id : prefix_ids) ASSERT_TRUE(base.accept(id));
  auto mask = base.allowed();
  for (int32_t id = 0; id < g->vocab().n_vocab(); id += stride) {
    GrammarMatcher m = base;
    EXPECT_EQ(mask->allows(id), m.accept(id)) << "token " << id << " \"" << g->vocab().piece(id) << "\"";
  }
}

void walks(const std::string& vocab_file, int n_walks, int stride,
           const std::vector<std::string>& grammars = {json_value_gbnf(), kArithmetic, kList, kUnicode}) {
  INFER_REQUIRE_DIR(test::vectors_dir());
  const auto tok = load(vocab_file);
  std::mt19937 rng(7);
  for (const std::string& gbnf : grammars) {
    auto g = compile_grammar(gbnf, *tok);
    int ended = 0;
    for (int i = 0; i < n_walks; ++i) {
      const Walk w = random_walk(g, rng, 60);
      if (!w.ended) continue;  // cut off at max steps: nothing to check as a whole
      ++ended;
      EXPECT_TRUE(grammar_accepts(g->grammar(), w.text)) << "walk produced \"" << w.text << "\" for\n" << gbnf;
    }
    EXPECT_GT(ended, 0) << gbnf;
    check_mask_exactly(g, {}, stride);
  }
  // A mask mid-way, inside a JSON string (every token that continues the string).
  auto json = compile_grammar(json_value_gbnf(), *tok);
  std::vector<int32_t> prefix;
  for (const char* piece : {"{", "\"", "a"}) {
    auto ids = tok->encode(piece, {false, false, true});
    prefix.insert(prefix.end(), ids.begin(), ids.end());
  }
  GrammarMatcher probe(json);
  bool ok = true;
  for (int32_t id : prefix) ok = ok && probe.accept(id);
  if (ok) check_mask_exactly(json, prefix, stride);
}

TEST(TokenMasks, RandomWalksStayInTheLanguageSpmStories260K) { walks(test::models_dir() + "/stories260K.gguf", 30, 1); }
TEST(TokenMasks, RandomWalksStayInTheLanguageSpmLlama) { walks(test::vectors_dir() + "/ggml-vocab-llama-spm.gguf", 20, 7); }
TEST(TokenMasks, RandomWalksStayInTheLanguageBpeQwen2) { walks(test::vectors_dir() + "/ggml-vocab-qwen2.gguf", 20, 1); }
// WordPiece writes no newline and has no end-of-generation token: grammars it can finish.
TEST(TokenMasks, RandomWalksStayInTheLanguageWordPiece) {
  walks(test::vectors_dir() + "/ggml-vocab-bert-bge.gguf", 20, 7,
        {json_value_gbnf(), kArithmetic, R"(root ::= "[" [a-z ]{1,12} "]")"});
}

TEST(TokenMasks, SpecialTokensNeverAllowedAndEndOfGenerationOnlyWhereTheLanguageMayEnd) {
  INFER_REQUIRE_DIR(test::vectors_dir());
  const auto tok = load(test::vectors_dir() + "/ggml-vocab-qwen2.gguf");
  auto g = compile_grammar(R"(root ::= [a-z<>|_]+)", *tok);
  GrammarMatcher m(g);
  auto mask = m.allowed();
  const int32_t im_start = tok->find_token("<|im_start|>");
  ASSERT_GE(im_start, 0);
  EXPECT_FALSE(mask->allows(im_start));
  for (int32_t id : g->vocab().eog_ids()) EXPECT_FALSE(mask->allows(id));
  ASSERT_TRUE(m.accept(tok->find_token("abc")));
  mask = m.allowed();
  EXPECT_FALSE(mask->allows(im_start));
  for (int32_t id : g->vocab().eog_ids()) EXPECT_TRUE(mask->allows(id));
  EXPECT_TRUE(m.accept(g->vocab().eog_ids().front()));
  EXPECT_TRUE(m.complete());
}

TEST(TokenMasks, CodePointSplitAcrossByteTokens) {
  INFER_REQUIRE_DIR(test::vectors_dir());
  const auto tok = load(test::vectors_dir() + "/ggml-vocab-llama-spm.gguf");
  // é is C3 A9: SPM's byte-fallback tokens <0xC3> <0xA9> spell it in two tokens.
  auto g = compile_grammar(R"(root ::= "x" [é])", *tok);
  GrammarMatcher m(g);
  ASSERT_TRUE(m.accept(tok->find_token("x")));
  const int32_t c3 = tok->find_token("<0xC3>"), a9 = tok->find_token("<0xA9>"), a8 = tok->find_token("<0xA8>");
  const int32_t c4 = tok->find_token("<0xC4>");
  ASSERT_GE(c3, 0);
  EXPECT_TRUE(m.allowed()->allows(c3));
  EXPECT_FALSE(m.allowed()->allows(c4));  // no code point in the class starts with C4
  ASSERT_TRUE(m.accept(c3));
  EXPECT_FALSE(m.can_end());
  EXPECT_TRUE(m.allowed()->allows(a9));
  EXPECT_FALSE(m.allowed()->allows(a8));  // è
  EXPECT_FALSE(m.accept(a8));
  ASSERT_TRUE(m.accept(a9));
  EXPECT_TRUE(m.complete());
  // Overlong forms are not text: '[' spelled F0 80 81 9B in byte tokens is refused at its second byte.
  auto bracket = compile_grammar(R"(root ::= "[")", *tok);
  GrammarMatcher b(bracket);
  EXPECT_FALSE(b.allowed()->allows(tok->find_token("<0xF0>")));
  EXPECT_FALSE(b.allowed()->allows(tok->find_token("<0xC1>")));
  EXPECT_FALSE(b.accept(tok->find_token("<0xF0>")));
}

// Matchers of one compiled grammar on several threads share its states and masks: each thread's walks
// are the ones it takes alone.
TEST(TokenMasks, MatchersOnManyThreadsShareOneGrammar) {
  INFER_REQUIRE_DIR(test::vectors_dir());
  const auto tok = load(test::vectors_dir() + "/ggml-vocab-llama-spm.gguf");
  const std::string text = json_value_gbnf() + "# threads\n";  // a grammar of its own: cold caches
  auto walks_of = [&](const std::shared_ptr<const CompiledGrammar>& g, unsigned seed) {
    std::mt19937 rng(seed);
    std::vector<std::string> out;
    for (int i = 0; i < 6; ++i) out.push_back(random_walk(g, rng, 25).text);
    return out;
  };
  std::vector<std::vector<std::string>> alone(4), together(4);
  {
    auto fresh = std::make_shared<const CompiledGrammar>(parse_gbnf(text), VocabTrie::of(*tok), text);
    for (unsigned t = 0; t < 4; ++t) alone[t] = walks_of(fresh, 100 + t);
  }
  auto shared = compile_grammar(text, *tok);
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < 4; ++t) threads.emplace_back([&, t] { together[t] = walks_of(shared, 100 + t); });
  for (auto& th : threads) th.join();
  EXPECT_EQ(together, alone);
}

TEST(TokenMasks, CompiledGrammarsAreCachedByTextAndVocabulary) {
  INFER_REQUIRE_DIR(test::models_dir());
  const auto tok = load(test::models_dir() + "/stories260K.gguf");
  const auto a = compile_grammar(json_value_gbnf(), *tok);
  const auto b = compile_grammar(json_value_gbnf(), *tok);
  EXPECT_EQ(a.get(), b.get());
  EXPECT_NE(a.get(), compile_grammar(kList, *tok).get());
  // The same state twice: the second mask is the cached one.
  GrammarMatcher m1(a), m2(a);
  const uint64_t before = a->masks_computed();
  auto mask1 = m1.allowed();
  auto mask2 = m2.allowed();
  EXPECT_EQ(mask1.get(), mask2.get());
  EXPECT_LE(a->masks_computed(), before + 1);
  EXPECT_THROW(compile_grammar("root ::= nope", *tok), GrammarError);
}

}  // namespace
}  // namespace infer::grammar
