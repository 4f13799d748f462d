// Every vocab file in INFER_VECTORS_DIR must reproduce its .inp/.out vectors exactly (found at run
// time, so new vocab files are tested as they appear), and detokenising must give the text back
// (WordPiece, which normalises: the same ids back).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "gguf/file.h"
#include "support/data_dirs.h"
#include "tokenizer/tokenizer.h"
#include "vector_cases.h"

namespace infer::tokenizer {
namespace {

namespace fs = std::filesystem;

std::string ids_to_string(const std::vector<TokenId>& ids) {
  std::string s;
  for (TokenId id : ids) {
    s += ' ';
    s += std::to_string(id);
  }
  return s;
}

class VocabVectors : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabVectors, EncodeMatchesReferenceExactly) {
  const std::string vocab_path = GetParam();
  const auto file = gguf::File::open(vocab_path);
  const auto tok = Tokenizer::from_gguf(*file);
  EXPECT_FALSE(tok->pre_tokenizer_unknown()) << vocab_path;
  const auto cases = test::read_vector_cases(vocab_path + ".inp", vocab_path + ".out");
  ASSERT_FALSE(cases.empty());
  int failures = 0;
  for (const auto& c : cases) {
    const auto got = tok->encode(c.text, {.add_special = false, .parse_special = false});
    if (got != c.expected) {
      ++failures;
      ADD_FAILURE() << fs::path(vocab_path).filename() << " text [" << c.text << "]\n  expected" << ids_to_string(c.expected)
                    << "\n  got     " << ids_to_string(got);
    }
  }
  EXPECT_EQ(failures, 0) << "of " << cases.size() << " cases";
}

TEST_P(VocabVectors, DecodeGivesTextBack) {
  const std::string vocab_path = GetParam();
  const auto file = gguf::File::open(vocab_path);
  const auto tok = Tokenizer::from_gguf(*file);
  for (const auto& c : test::read_vector_cases(vocab_path + ".inp", vocab_path + ".out")) {
    if (tok->model_name() == "bert") {
      // WordPiece normalises (case, accents, spacing), so the text cannot come back; its decoding
      // must at least encode to the same ids (words that became [UNK] aside).
      if (std::find(c.expected.begin(), c.expected.end(), tok->unk()) != c.expected.end()) continue;
      EXPECT_EQ(tok->encode(tok->decode(c.expected), {.add_special = false, .parse_special = false}), c.expected)
          << "[" << c.text << "] decodes to [" << tok->decode(c.expected) << "]";
      continue;
    }
    // Exact also for SPM: decode drops the dummy-prefix space that encode adds.
    const std::string text = tok->decode(c.expected);
    // Clean-up of " ." / " 's" and the like is lossy by design; skip cases it applies to.
    const bool lossy_cleanup = c.text.find(" '") != std::string::npos || c.text.find(" .") != std::string::npos ||
                               c.text.find(" ,") != std::string::npos || c.text.find(" ?") != std::string::npos ||
                               c.text.find(" !") != std::string::npos;
    if (lossy_cleanup) continue;
    EXPECT_EQ(text, c.text) << fs::path(vocab_path).filename();
  }
}

// min_tokens is a lower bound (a prompt past the context is refused from it untokenised): on every
// vector, on texts made of the longest entry, of whitespace around special tokens (Phi-3 strips it),
// and of bytes that are not UTF-8.
TEST_P(VocabVectors, MinTokensNeverExceedsTheEncoding) {
  const std::string vocab_path = GetParam();
  const auto file = gguf::File::open(vocab_path);
  const auto tok = Tokenizer::from_gguf(*file);
  std::vector<std::string> texts;
  for (const auto& c : test::read_vector_cases(vocab_path + ".inp", vocab_path + ".out")) texts.push_back(c.text);
  std::string longest;
  for (TokenId id = 0; id < tok->n_vocab(); ++id)
    if (tok->token_text(id).size() > longest.size()) longest = tok->token_text(id);
  std::string repeated, special_spaces;
  for (int i = 0; i < 50; ++i) repeated += tok->token_to_piece(tok->find_token(longest), false);
  const std::string special = tok->eos() >= 0 ? tok->token_text(tok->eos()) : "";
  for (int i = 0; i < 50; ++i) special_spaces += special + std::string(300, ' ') + "\n\t ";
  texts.insert(texts.end(), {repeated, special_spaces, std::string(5000, ' '), std::string(5000, '\xff'),
                             std::string(5000, 'a'), "\xf0\x80\xf0\x80 \xc3 x"});
  for (const std::string& text : texts)
    for (bool parse_special : {false, true}) {
      const EncodeOptions o{.add_special = false, .parse_special = parse_special};
      EXPECT_LE(tok->min_tokens(text, o), tok->encode(text, o).size())
          << fs::path(vocab_path).filename() << " text [" << text.substr(0, 80) << "]";
    }
  // Not a vacuous bound: a long text has some.
  if (tok->model_name() != "bert") EXPECT_GT(tok->min_tokens(std::string(100000, 'a')), 0u);
}

// encode_at_most gives encode()'s ids, or a prefix of them past the limit when it stopped early.
TEST_P(VocabVectors, EncodeAtMostIsEncodeOrAPrefixPastTheLimit) {
  const std::string vocab_path = GetParam();
  const auto file = gguf::File::open(vocab_path);
  const auto tok = Tokenizer::from_gguf(*file);
  std::vector<std::string> texts;
  std::string all;
  for (const auto& c : test::read_vector_cases(vocab_path + ".inp", vocab_path + ".out")) {
    texts.push_back(c.text);
    all += c.text + "\n";
  }
  const std::string special = tok->eos() >= 0 ? tok->token_text(tok->eos()) : "";
  texts.insert(texts.end(), {all, all + special + all + special + " " + all});
  int stopped = 0;
  for (const std::string& text : texts) {
    const EncodeOptions o{.add_special = true, .parse_special = true};
    const auto whole = tok->encode(text, o);
    for (size_t limit : {size_t{0}, size_t{1}, size_t{7}, whole.size() / 2, whole.size() - 1, whole.size(), SIZE_MAX}) {
      bool complete = false;
      const auto got = tok->encode_at_most(text, limit, o, &complete);
      if (complete) {
        EXPECT_EQ(got, whole) << fs::path(vocab_path).filename() << " limit " << limit;
      } else {
        ++stopped;
        EXPECT_GT(got.size(), limit);
        EXPECT_LT(got.size(), whole.size());
        EXPECT_TRUE(std::equal(got.begin(), got.end(), whole.begin()))
            << fs::path(vocab_path).filename() << " limit " << limit << " [" << text.substr(0, 60) << "]";
      }
    }
  }
  EXPECT_GT(stopped, 0) << "some limit must stop early";
}

std::vector<std::string> params() {
  auto files = test::vocab_files(test::vectors_dir());
  std::vector<std::string> with_vectors;
  for (auto& f : files)
    if (fs::exists(f + ".inp") && fs::exists(f + ".out")) with_vectors.push_back(f);
  return with_vectors;
}

std::string param_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = fs::path(info.param).stem().string();
  for (auto& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(SharedVectors, VocabVectors, ::testing::ValuesIn(params()), param_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(VocabVectors);

TEST(VocabVectorsDir, HasVocabFilesAndNotesVectorsWithoutOne) {
  const std::string dir = test::vectors_dir();
  INFER_REQUIRE_DIR(dir);
  EXPECT_FALSE(params().empty()) << "no *.gguf with .inp/.out in " << dir;
  std::string missing;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const auto p = entry.path().string();
    if (entry.path().extension() == ".inp" && !fs::exists(p.substr(0, p.size() - 4))) {
      missing += ' ';
      missing += entry.path().filename().string();
    }
  }
  if (!missing.empty()) std::printf("note: vectors without a vocab file (not tested):%s\n", missing.c_str());
}

}  // namespace
}  // namespace infer::tokenizer
