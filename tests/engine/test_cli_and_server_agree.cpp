// The CLI path (Generator, `infer generate`) and the server path (Engine) run the same decode step:
// greedy on the same prompt they give the same ids and the same text, streamed and final, for a
// SentencePiece model (stories260K, whose text is also llama.cpp's reference) and a byte-level BPE
// model (a tiny synthetic qwen3 with the qwen2 vocabulary).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/generator.h"
#include "engine_test_util.h"
#include "model/synth.h"

namespace infer::engine {
namespace {

namespace fs = std::filesystem;

struct Output {
  std::vector<int32_t> ids;
  std::string text, streamed;
  FinishReason finish = FinishReason::Error;
};

// One model file, both paths.
class BothPaths {
 public:
  explicit BothPaths(const std::string& path) : path_(path) {
    model_ = model::Model::load(path);
    tok_ = tokenizer::Tokenizer::from_gguf(model_->file());
    GeneratorOptions g;
    g.threads = 2;
    g.context = 256;
    gen_ = std::make_unique<Generator>(*model_, tok_.get(), g);
    EngineOptions e = test::small_options();
    e.model_path = path;
    e.threads = 2;
    engine_ = Engine::create(e);
  }

  const tokenizer::Tokenizer& tok() const { return *tok_; }

  Output cli(const std::vector<int32_t>& prompt, int max_tokens, const std::vector<std::string>& stop = {}) {
    GenerateOptions o;
    o.sampling.temperature = 0;
    o.max_tokens = max_tokens;
    o.stop = stop;
    Output out;
    auto r = gen_->generate(prompt, o, [&](const std::string& piece) { out.streamed += piece; });
    out.ids = r.ids;
    // GenerateResult::ids ends with the end-of-generation id that stopped it; Result::ids never has one.
    if (!out.ids.empty() && tok_->is_eog(out.ids.back()) && r.finish == FinishReason::Stop) out.ids.pop_back();
    out.text = r.text;
    out.finish = r.finish;
    return out;
  }

  Output server(const std::vector<int32_t>& prompt, int max_tokens, const std::vector<std::string>& stop = {}) {
    Request r;
    r.prompt_ids = prompt;
    r.sampling.temperature = 0;
    r.max_tokens = max_tokens;
    r.stop = stop;
    test::Collector c;
    test::submit_ok(*engine_, std::move(r), c);
    Output out;
    if (!c.wait()) {
      ADD_FAILURE() << "the engine did not finish";
      return out;
    }
    out.ids = c.result.ids;
    out.text = c.result.text;
    out.streamed = c.streamed_text;
    out.finish = c.result.finish;
    return out;
  }

 private:
  std::string path_;
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<tokenizer::Tokenizer> tok_;
  std::unique_ptr<Generator> gen_;
  std::unique_ptr<Engine> engine_;
};

void expect_same(const Output& cli, const Output& server, const std::string& what) {
  EXPECT_EQ(cli.ids, server.ids) << what;
  EXPECT_EQ(cli.text, server.text) << what;
  EXPECT_EQ(cli.streamed, cli.text) << what;
  EXPECT_EQ(server.streamed, server.text) << what;
  EXPECT_EQ(cli.finish, server.finish) << what;
}

TEST(CliAndServer, SentencePieceGivesTheSameIdsAndTextAsTheReference) {
  REQUIRE_STORIES();
  BothPaths both(test::stories_path());
  const std::string ref_path = infer::test::reference_dir() + "/out/stories260K.jsonl";
  std::ifstream ref(ref_path);
  if (!ref) {
    if (infer::test::in_ci()) FAIL() << ref_path << " missing";
    GTEST_SKIP() << ref_path << " missing";
  }
  int compared = 0;
  for (std::string line; std::getline(ref, line) && compared < 3; ++compared) {
    const auto j = nlohmann::json::parse(line);
    const auto prompt = j["prompt_ids"].get<std::vector<int32_t>>();
    const auto want_ids = j["greedy_ids"].get<std::vector<int32_t>>();
    const int n = 24;
    const Output cli = both.cli(prompt, n), server = both.server(prompt, n);
    const std::string what = "prompt '" + j["prompt"].get<std::string>() + "'";
    expect_same(cli, server, what);
    EXPECT_EQ(cli.ids, std::vector<int32_t>(want_ids.begin(), want_ids.begin() + n)) << what;
    // The reference's text is that of 64 tokens; these 24 are its start, leading space included.
    EXPECT_EQ(j["greedy_text"].get<std::string>().rfind(cli.text, 0), 0u) << what << ": " << cli.text;
  }
  EXPECT_EQ(compared, 3);
}

TEST(CliAndServer, SentencePieceAfterABareBosKeepsTheFirstSpaceOnBothPaths) {
  REQUIRE_STORIES();
  BothPaths both(test::stories_path());
  const Output cli = both.cli({both.tok().bos()}, 12), server = both.server({both.tok().bos()}, 12);
  expect_same(cli, server, "bare BOS");
  EXPECT_EQ(cli.text.rfind(" Once upon a time", 0), 0u) << cli.text;
}

TEST(CliAndServer, StopStringsEndBothPathsAtTheSamePlace) {
  REQUIRE_STORIES();
  BothPaths both(test::stories_path());
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378};  // "Once upon a time"
  const Output cli = both.cli(prompt, 40, {"girl na"}), server = both.server(prompt, 40, {"girl na"});
  expect_same(cli, server, "stop 'girl na'");
  EXPECT_EQ(cli.text, ", there was a little ");
  EXPECT_EQ(cli.finish, FinishReason::Stop);
}

// A tiny qwen3 with the real qwen2 vocabulary (151,936 byte-level BPE tokens), written once.
class CliAndServerBpe : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string vocab = infer::test::vectors_dir() + "/ggml-vocab-qwen2.gguf";
    if (!fs::exists(vocab)) return;
    dir_ = fs::temp_directory_path() / ("infer-cli-server-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    model::SynthOptions o;
    o.arch = model::Arch::Qwen3;
    o.like = "tiny";
    o.type = model::SynthType::Q8_0;
    o.seed = 23;
    o.vocab_path = vocab;
    path_ = (dir_ / "qwen3-qwen2-vocab.gguf").string();
    model::write_synth(o, path_);
  }
  static void TearDownTestSuite() {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  void SetUp() override {
    INFER_REQUIRE_DIR(infer::test::vectors_dir());
    ASSERT_FALSE(path_.empty()) << "ggml-vocab-qwen2.gguf missing from " << infer::test::vectors_dir();
  }
  static fs::path dir_;
  static std::string path_;
};
fs::path CliAndServerBpe::dir_;
std::string CliAndServerBpe::path_;

TEST_F(CliAndServerBpe, ByteLevelBpeGivesTheSameIdsAndText) {
  BothPaths both(path_);
  ASSERT_EQ(both.tok().model_name(), "gpt2");
  for (const char* text : {"Hello world", " leading space", "数字 123 and émigrés"}) {
    const auto prompt = tokenize_prompt(both.tok(), text, false);
    const Output cli = both.cli(prompt, 24), server = both.server(prompt, 24);
    expect_same(cli, server, std::string("prompt '") + text + "'");
    EXPECT_FALSE(cli.text.empty()) << text;
  }
}

}  // namespace
}  // namespace infer::engine
