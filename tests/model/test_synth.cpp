// `infer synth` files: valid GGUF that the reader and Model::load accept, tensor types by the
// llama-quantize mixture rules, and the same layout as llama.cpp's own quantised tiny models.
#include "model/synth.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "gguf/file.h"
#include "kernels/quant/quant.h"
#include "kernels/runtime/thread_pool.h"
#include "model/kv_pool.h"
#include "model/model.h"
#include "forward_harness.h"
#include "support/data_dirs.h"

namespace infer::model {
namespace {

namespace fs = std::filesystem;
using gguf::TensorType;

class SynthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("infer-synth-test-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(Arch arch, SynthType type, uint64_t seed = 1, const std::string& like = "tiny") {
    SynthOptions o;
    o.arch = arch;
    o.like = like;
    o.type = type;
    o.seed = seed;
    o.vocab_dirs = {test::models_dir(), test::vectors_dir()};
    auto path = (dir_ / ("m" + std::to_string(counter_++) + ".gguf")).string();
    write_synth(o, path);
    return path;
  }

  fs::path dir_;
  int counter_ = 0;
};

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

TEST(SynthRules, UseMoreBitsMatchesTheSpecTable) {
  std::vector<int> got;
  for (int i = 0; i < 28; ++i)
    if (use_more_bits(i, 28)) got.push_back(i);
  EXPECT_EQ(got, (std::vector<int>{0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 24, 25, 26, 27}));
  got.clear();
  for (int i = 0; i < 16; ++i)
    if (use_more_bits(i, 16)) got.push_back(i);
  EXPECT_EQ(got, (std::vector<int>{0, 1, 4, 7, 10, 13, 14, 15}));
}

TEST(SynthRules, Q4KMMixture) {
  const auto q = SynthType::Q4_K_M;
  EXPECT_EQ(mixture_type(q, "output.weight", 1024, 28, false), TensorType::Q6_K);
  EXPECT_EQ(mixture_type(q, "token_embd.weight", 1024, 28, true), TensorType::Q6_K);
  EXPECT_EQ(mixture_type(q, "token_embd.weight", 1024, 28, false), TensorType::Q4_K);
  EXPECT_EQ(mixture_type(q, "blk.2.attn_v.weight", 1024, 28, true), TensorType::Q6_K);
  EXPECT_EQ(mixture_type(q, "blk.3.attn_v.weight", 1024, 28, true), TensorType::Q4_K);
  EXPECT_EQ(mixture_type(q, "blk.5.ffn_down.weight", 3072, 28, true), TensorType::Q6_K);
  EXPECT_EQ(mixture_type(q, "blk.6.ffn_down.weight", 3072, 28, true), TensorType::Q4_K);
  EXPECT_EQ(mixture_type(q, "blk.0.attn_k.weight", 1024, 28, true), TensorType::Q4_K);
  // Fallbacks (§9.5): rows of 896 are not a multiple of 256.
  EXPECT_EQ(mixture_type(q, "blk.3.attn_q.weight", 896, 24, true), TensorType::Q5_0);
  EXPECT_EQ(mixture_type(q, "blk.0.attn_v.weight", 896, 24, true), TensorType::Q8_0);
  EXPECT_EQ(mixture_type(q, "token_embd.weight", 896, 24, true), TensorType::Q8_0);
  EXPECT_EQ(mixture_type(SynthType::Q5_K_M, "blk.3.ffn_up.weight", 896, 24, true), TensorType::Q5_1);
  EXPECT_EQ(mixture_type(q, "blk.3.ffn_up.weight", 40, 24, true), TensorType::F16);
}

TEST(SynthRules, Q4KMMixtureOfFusedAndExpertTensors) {
  const auto q = SynthType::Q4_K_M;
  // phi3's fused attn_qkv follows attn_v's rule, qwen3moe's expert stacks follow ffn_down's
  EXPECT_EQ(mixture_type(q, "blk.2.attn_qkv.weight", 3072, 32, true), TensorType::Q6_K);
  EXPECT_EQ(mixture_type(q, "blk.4.attn_qkv.weight", 3072, 32, true), TensorType::Q4_K);
  EXPECT_EQ(mixture_type(q, "blk.47.ffn_down_exps.weight", 768, 48, false, 128), TensorType::Q6_K);
  EXPECT_EQ(mixture_type(q, "blk.7.ffn_down_exps.weight", 768, 48, false, 128), TensorType::Q4_K);
  EXPECT_EQ(mixture_type(q, "blk.0.ffn_gate_exps.weight", 2048, 48, false, 128), TensorType::Q4_K);
  EXPECT_EQ(mixture_type(q, "blk.0.attn_k.weight", 2048, 48, false, 128), TensorType::Q4_K);
  // exactly 8 experts: finer attention
  EXPECT_EQ(mixture_type(q, "blk.0.attn_k.weight", 256, 2, false, 8), TensorType::Q8_0);
  EXPECT_EQ(mixture_type(q, "blk.1.attn_v.weight", 256, 2, false, 8), TensorType::Q8_0);
  EXPECT_EQ(mixture_type(q, "blk.1.attn_output.weight", 256, 2, false, 8), TensorType::Q5_K);
  EXPECT_EQ(mixture_type(SynthType::Q5_K_M, "blk.1.attn_output.weight", 256, 2, false, 8), TensorType::Q5_K);
}

TEST(SynthRules, PlainTypesAndOutput) {
  EXPECT_EQ(mixture_type(SynthType::Q8_0, "output.weight", 256, 4, false), TensorType::Q8_0);
  EXPECT_EQ(mixture_type(SynthType::Q4_0, "output.weight", 256, 4, false), TensorType::Q6_K);
  EXPECT_EQ(mixture_type(SynthType::Q4_0, "blk.0.ffn_down.weight", 768, 4, false), TensorType::Q4_0);
  EXPECT_EQ(mixture_type(SynthType::BF16, "output.weight", 256, 4, false), TensorType::BF16);
  EXPECT_EQ(mixture_type(SynthType::Q6_K, "blk.1.attn_q.weight", 256, 4, false), TensorType::Q6_K);
}

TEST(SynthRules, RejectsUnknownNames) {
  EXPECT_THROW(parse_synth_type("q3_k"), std::invalid_argument);
  EXPECT_THROW(parse_arch("gpt2"), std::invalid_argument);
  EXPECT_THROW(synth_shape("gpt-5", Arch::Llama), std::invalid_argument);
  EXPECT_THROW(synth_natural_arch("gpt-5"), std::invalid_argument);
}

TEST(SynthRules, NewArchitecturesKeepTheirOwnShapes) {
  EXPECT_THROW(synth_shape("qwen3-0.6b", Arch::Gemma3), std::invalid_argument);
  EXPECT_THROW(synth_shape("gemma3-1b", Arch::Qwen3), std::invalid_argument);
  EXPECT_THROW(synth_shape("bge-base", Arch::Qwen3Moe), std::invalid_argument);
  EXPECT_NO_THROW(synth_shape("qwen3-0.6b", Arch::Llama));
  EXPECT_EQ(synth_natural_arch("tiny"), Arch::Llama);
  EXPECT_EQ(synth_natural_arch("phi4-mini"), Arch::Phi3);
  for (const char* name : {"gemma3", "phi3", "qwen3moe", "bert"}) EXPECT_STREQ(arch_name(parse_arch(name)), name);
}

// The published config.json hyper-parameters of each real shape (hidden size, layers, heads, KV heads,
// head width, FFN width, RoPE bases, window, experts, pooling).
TEST(SynthRules, RealShapesHaveTheirModelsHyperParameters) {
  auto g270 = synth_shape("gemma3-270m", Arch::Gemma3);
  EXPECT_EQ((std::vector<int>{g270.n_embd, g270.n_layer, g270.n_head, g270.n_kv_head, g270.head_dim, g270.n_ff}),
            (std::vector<int>{640, 18, 4, 1, 256, 2048}));
  auto g1 = synth_shape("gemma3-1b", Arch::Gemma3);
  EXPECT_EQ((std::vector<int>{g1.n_embd, g1.n_layer, g1.n_head, g1.n_kv_head, g1.head_dim, g1.n_ff, g1.n_vocab}),
            (std::vector<int>{1152, 26, 4, 1, 256, 6912, 262144}));
  for (const auto& g : {g270, g1}) {
    EXPECT_EQ(g.n_swa, 512);
    EXPECT_EQ(g.swa_pattern, 6);
    EXPECT_EQ(g.rope_base, 1e6f);
    EXPECT_EQ(g.rope_base_swa, 1e4f);
    EXPECT_TRUE(g.tied);
  }
  auto phi = synth_shape("phi4-mini", Arch::Phi3);
  EXPECT_EQ((std::vector<int>{phi.n_embd, phi.n_layer, phi.n_head, phi.n_kv_head, phi.head_dim, phi.n_ff, phi.n_rot,
                              phi.n_vocab}),
            (std::vector<int>{3072, 32, 24, 8, 128, 8192, 96, 200064}));
  EXPECT_EQ(phi.n_ctx_orig, 4096);  // LongRoPE: 131072 tokens, factors trained at 4096
  auto moe = synth_shape("qwen3-30b-a3b", Arch::Qwen3Moe);
  EXPECT_EQ((std::vector<int>{moe.n_embd, moe.n_layer, moe.n_head, moe.n_kv_head, moe.head_dim, moe.n_expert,
                              moe.n_expert_used, moe.n_ff_exp}),
            (std::vector<int>{2048, 48, 32, 4, 128, 128, 8, 768}));
  auto base = synth_shape("bge-base", Arch::Bert);
  EXPECT_EQ((std::vector<int>{base.n_embd, base.n_layer, base.n_head, base.n_ff, base.n_ctx, base.pooling_type}),
            (std::vector<int>{768, 12, 12, 3072, 512, 2}));
}

// Same tensor names, shapes and types, and the same hyper-parameter keys with the same value types,
// as the tiny models llama.cpp's quantiser wrote (shared/reference/models).
TEST_F(SynthTest, MatchesLlamaCppTinyModelLayout) {
  INFER_REQUIRE_DIR(test::reference_dir());
  INFER_REQUIRE_DIR(test::models_dir());
  const std::pair<const char*, Arch> arches[] = {
      {"llama", Arch::Llama}, {"qwen2", Arch::Qwen2},       {"qwen3", Arch::Qwen3}, {"gemma3", Arch::Gemma3},
      {"phi3", Arch::Phi3},   {"qwen3moe", Arch::Qwen3Moe}, {"bert", Arch::Bert}};
  const char* types[] = {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_k_m", "q5_k_m", "q6_k"};
  int compared = 0;
  for (auto [aname, arch] : arches)
    for (const char* tname : types) {
      auto ref_path = fs::path(test::reference_dir()) / "models" / (std::string("tiny-") + aname + "-" + tname + ".gguf");
      if (!fs::exists(ref_path)) continue;
      if (arch == Arch::Bert && std::string(tname) == "f32") continue;  // 64 wide; the other bert files are 128
      SCOPED_TRACE(ref_path.string());
      auto ref = gguf::File::open(ref_path.string());
      auto ours = gguf::File::open(write(arch, parse_synth_type(tname)));
      ASSERT_EQ(ours->tensors().size(), ref->tensors().size());
      for (size_t i = 0; i < ref->tensors().size(); ++i) {
        const auto& r = ref->tensors()[i];
        const auto* t = ours->tensor(r.name);
        ASSERT_NE(t, nullptr) << r.name;
        EXPECT_EQ(t->type, r.type) << r.name;
        EXPECT_EQ(t->n_dims, r.n_dims) << r.name;
        for (int d = 0; d < 4; ++d) EXPECT_EQ(t->ne[d], r.ne[d]) << r.name;
        EXPECT_EQ(ours->tensors()[i].name, r.name) << "tensor order";
      }
      for (const auto& [key, value] : ref->metadata()) {
        if (key == "general.name") continue;
        const auto* v = ours->find(key);
        ASSERT_NE(v, nullptr) << key;
        EXPECT_EQ(v->type, value.type) << key;
        if (value.type == gguf::ValueType::BOOL) {
          EXPECT_EQ(v->as_bool(), value.as_bool()) << key;
        } else if (!value.is_array() && !value.is_string()) {
          EXPECT_EQ(v->as_float(), value.as_float()) << key;
        }
      }
      ++compared;
    }
  EXPECT_GE(compared, 25);
}

TEST_F(SynthTest, ModelLoadsAndForwardGivesFiniteLogits) {
  INFER_REQUIRE_DIR(test::models_dir());
  for (Arch arch : {Arch::Llama, Arch::Qwen2, Arch::Qwen3})
    for (SynthType type : {SynthType::F16, SynthType::Q8_0, SynthType::Q4_K_M}) {
      SCOPED_TRACE(int(arch) * 100 + int(type));
      auto model = Model::load(write(arch, type));
      const auto& hp = model->hparams();
      EXPECT_EQ(hp.arch, arch);
      EXPECT_EQ(hp.n_vocab, 512);
      EXPECT_EQ(hp.n_layer, 4);
      kernels::ThreadPool pool(1);
      KvPool kv(hp, 16, 1);
      Forward fwd(*model, pool, 4);
      int32_t pages[1] = {0};
      Batch b;
      b.seqs = {{pages, 1}};
      for (int p = 0; p < 4; ++p) b.rows.push_back({0, p, int32_t(1 + 37 * p), p == 3});
      std::vector<float> logits(hp.n_vocab);
      fwd.run(b, kv, logits.data());
      float lo = logits[0], hi = logits[0];
      for (float l : logits) {
        ASSERT_TRUE(std::isfinite(l));
        lo = std::min(lo, l);
        hi = std::max(hi, l);
      }
      EXPECT_GT(hi - lo, 0.1f) << "logits should vary across the vocab";
      EXPECT_LT(hi - lo, 1000.f);
    }
}

// Past gemma3's window of 8 (its local layers then skip keys) and across qwen3moe's routing.
TEST_F(SynthTest, NewGenerativeArchitecturesLoadAndGiveFiniteLogits) {
  INFER_REQUIRE_DIR(test::models_dir());
  for (Arch arch : {Arch::Gemma3, Arch::Phi3, Arch::Qwen3Moe})
    for (SynthType type : {SynthType::F16, SynthType::Q8_0, SynthType::Q4_K_M}) {
      SCOPED_TRACE(std::string(arch_name(arch)) + " " + std::to_string(int(type)));
      auto model = Model::load(write(arch, type));
      const auto& hp = model->hparams();
      EXPECT_EQ(hp.arch, arch);
      EXPECT_EQ(hp.n_vocab, 512);
      test::ForwardHarness h(*model, 2, 1, 32);
      std::vector<int32_t> prompt;
      for (int p = 0; p < 12; ++p) prompt.push_back(int32_t(1 + 37 * p));
      const auto rows = h.feed(0, prompt);
      const auto next = h.feed(0, {test::argmax(rows.back())});
      for (const auto& logits : {rows.front(), rows.back(), next.front()}) {
        const auto [lo, hi] = std::minmax_element(logits.begin(), logits.end());
        ASSERT_TRUE(std::all_of(logits.begin(), logits.end(), [](float l) { return std::isfinite(l); }));
        EXPECT_GT(*hi - *lo, 0.1f) << "logits should vary across the vocab";
        EXPECT_LT(*hi - *lo, 1000.f);
      }
    }
}

TEST_F(SynthTest, BertLoadsAndGivesFiniteHiddenStates) {
  INFER_REQUIRE_DIR(test::vectors_dir());
  for (SynthType type : {SynthType::F16, SynthType::Q8_0}) {
    SCOPED_TRACE(int(type));
    auto model = Model::load(write(Arch::Bert, type));
    const auto& hp = model->hparams();
    EXPECT_EQ(hp.arch, Arch::Bert);
    EXPECT_FALSE(hp.causal);
    EXPECT_EQ(hp.pooling_type, 1);
    EXPECT_EQ(hp.n_vocab, 30522);
    test::ForwardHarness h(*model, 2, 1, 16);
    Batch b;
    b.seqs = {{h.page_table(0).data(), int(h.page_table(0).size())}};
    const int32_t ids[] = {101, 7592, 2088, 102};  // [CLS] hello world [SEP]
    for (int p = 0; p < 4; ++p) b.rows.push_back({0, p, ids[p], false, true});
    std::vector<float> hidden(size_t(4 * hp.n_embd));
    h.forward().run(b, h.kv(), nullptr, hidden.data());
    ASSERT_TRUE(std::all_of(hidden.begin(), hidden.end(), [](float x) { return std::isfinite(x); }));
    // each row leaves a LayerNorm: about unit spread, not a constant
    const auto [lo, hi] = std::minmax_element(hidden.begin(), hidden.begin() + hp.n_embd);
    EXPECT_GT(*hi - *lo, 0.5f);
  }
}

// A real shape's metadata read back by the loader (bge-small: the smallest, about a second to write).
TEST_F(SynthTest, RealBertShapeReadsBackItsHyperParameters) {
  INFER_REQUIRE_DIR(test::vectors_dir());
  const auto file = gguf::File::open(write(Arch::Bert, SynthType::Q8_0, 1, "bge-small"));
  const HParams hp = read_hparams(*file);
  EXPECT_EQ(hp.arch, Arch::Bert);
  EXPECT_EQ((std::vector<int>{hp.n_embd, hp.n_layer, hp.n_head, hp.n_kv_head, hp.head_dim, hp.n_ff, hp.n_ctx_train,
                              hp.n_vocab, hp.pooling_type}),
            (std::vector<int>{384, 12, 12, 12, 32, 1536, 512, 30522, 2}));
  EXPECT_FALSE(hp.causal);
  EXPECT_EQ(hp.rms_eps, 1e-12f);
  EXPECT_EQ(file->tensor("position_embd.weight")->type, TensorType::F32);
  EXPECT_EQ(file->tensor("blk.11.ffn_down.weight")->type, TensorType::Q8_0);
}

// The new architectures' own keys (window, layer pattern, local RoPE base, partial rotary, experts)
// read back by the loader with the key types it insists on.
TEST_F(SynthTest, TinyShapesOfNewArchitecturesReadBackTheirKeys) {
  INFER_REQUIRE_DIR(test::models_dir());
  const HParams g = read_hparams(*gguf::File::open(write(Arch::Gemma3, SynthType::Q8_0)));
  EXPECT_EQ(g.n_swa, 8);
  EXPECT_EQ(g.swa_pattern, 6);
  EXPECT_EQ(g.rope_freq_base_swa, 1e4f);
  EXPECT_EQ(g.rope_freq_base, 1e6f);
  EXPECT_TRUE(g.tied_output);
  EXPECT_TRUE(g.is_local_layer(4));
  EXPECT_FALSE(g.is_local_layer(5));
  const HParams p = read_hparams(*gguf::File::open(write(Arch::Phi3, SynthType::Q8_0)));
  EXPECT_EQ(p.n_rot, 32);
  EXPECT_EQ(p.head_dim, 32);
  const HParams m = read_hparams(*gguf::File::open(write(Arch::Qwen3Moe, SynthType::Q8_0)));
  EXPECT_EQ((std::vector<int>{m.n_expert, m.n_expert_used, m.n_ff_exp, m.head_dim}), (std::vector<int>{8, 2, 256, 64}));
}

TEST_F(SynthTest, LayersOptionKeepsTheShapesWidths) {
  SynthOptions o;
  o.arch = Arch::Qwen3Moe;
  o.like = "tiny";
  o.type = SynthType::Q8_0;
  o.n_layer = 1;
  o.vocab_dirs = {test::models_dir(), test::vectors_dir()};
  const std::string one = (dir_ / "one-layer.gguf").string();
  const SynthSummary s = write_synth(o, one);
  EXPECT_EQ(s.shape.n_layer, 1);
  const SynthShape full = synth_shape("tiny", Arch::Qwen3Moe);
  ASSERT_GT(full.n_layer, 1);
  auto m = Model::load(one);
  EXPECT_EQ(m->hparams().n_layer, 1);
  EXPECT_EQ(m->hparams().n_embd, full.n_embd);
  EXPECT_EQ(m->hparams().n_expert, full.n_expert);
  EXPECT_EQ(m->file().tensor("blk.1.attn_norm.weight"), nullptr);
  EXPECT_NE(m->file().tensor("blk.0.ffn_gate_exps.weight"), nullptr);
}

TEST_F(SynthTest, SameSeedSameBytesOtherSeedOtherWeights) {
  INFER_REQUIRE_DIR(test::models_dir());
  auto a = read_all(write(Arch::Qwen3, SynthType::Q4_K_M, 7));
  auto b = read_all(write(Arch::Qwen3, SynthType::Q4_K_M, 7));
  auto c = read_all(write(Arch::Qwen3, SynthType::Q4_K_M, 8));
  EXPECT_EQ(a, b);
  ASSERT_EQ(a.size(), c.size());
  EXPECT_NE(a, c);
}

TEST_F(SynthTest, ThreadCountDoesNotChangeTheFile) {
  SynthOptions o;
  o.arch = Arch::Llama;
  o.type = SynthType::Q6_K;
  o.vocab_dirs = {test::models_dir()};
  o.threads = 1;
  auto p1 = (dir_ / "t1.gguf").string(), p2 = (dir_ / "t2.gguf").string();
  write_synth(o, p1);
  o.threads = 2;
  write_synth(o, p2);
  EXPECT_EQ(read_all(p1), read_all(p2));
}

TEST_F(SynthTest, TokenizerComesFromTheVocabFile) {
  INFER_REQUIRE_DIR(test::models_dir());
  auto f = gguf::File::open(write(Arch::Llama, SynthType::F32));
  auto stories = gguf::File::open(test::models_dir() + "/stories260K.gguf");
  EXPECT_EQ(f->get_string("tokenizer.ggml.model"), "llama");
  const auto& ours = f->find("tokenizer.ggml.tokens")->as_array();
  const auto& theirs = stories->find("tokenizer.ggml.tokens")->as_array();
  ASSERT_EQ(ours.size(), theirs.size());
  for (size_t i = 0; i < ours.size(); ++i) ASSERT_EQ(ours[i].as_string(), theirs[i].as_string());
}

TEST_F(SynthTest, SyntheticVocabWhenNoVocabFile) {
  SynthOptions o;
  o.arch = Arch::Qwen3;
  o.type = SynthType::Q8_0;
  o.vocab_dirs = {(dir_ / "nowhere").string()};
  auto path = (dir_ / "s.gguf").string();
  auto sum = write_synth(o, path);
  EXPECT_EQ(sum.vocab_source, "synthetic");
  auto f = gguf::File::open(path);
  EXPECT_EQ(f->get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(f->find("tokenizer.ggml.tokens")->array_size(), 512u);
  EXPECT_EQ(f->find("tokenizer.ggml.merges")->array_size(), 512u - 257u);
  EXPECT_NO_THROW(Model::load(path));
}

TEST_F(SynthTest, RejectsImpossibleShape) {
  SynthOptions o;
  o.arch = Arch::Qwen2;
  o.like = "qwen3-0.6b";  // 16 heads x 128 != 1024
  EXPECT_THROW(write_synth(o, (dir_ / "x.gguf").string()), std::invalid_argument);
  EXPECT_FALSE(fs::exists(dir_ / "x.gguf"));
}

// bge-small's rows of 384 are not a multiple of 256: the K mixtures fall back to Q5_0 (Q4_K), Q5_1
// (Q5_K) and Q8_0 (Q6_K) by §9.5, while ffn_down's rows of 1536 keep their K-quant.
TEST_F(SynthTest, KMixturesFallBackToQ5_0AndQ5_1OnRowsNotAMultipleOf256) {
  INFER_REQUIRE_DIR(test::vectors_dir());
  const auto q4 = gguf::File::open(write(Arch::Bert, SynthType::Q4_K_M, 1, "bge-small"));
  EXPECT_EQ(q4->tensor("blk.0.attn_q.weight")->type, TensorType::Q5_0);
  EXPECT_EQ(q4->tensor("blk.0.ffn_up.weight")->type, TensorType::Q5_0);
  EXPECT_EQ(q4->tensor("blk.0.ffn_down.weight")->type, TensorType::Q6_K);  // use_more_bits(0, 12)
  EXPECT_EQ(q4->tensor("blk.2.ffn_down.weight")->type, TensorType::Q4_K);
  EXPECT_EQ(q4->tensor("token_embd.weight")->type, TensorType::Q8_0);  // the tied output: Q6_K → Q8_0
  const auto q5 = gguf::File::open(write(Arch::Bert, SynthType::Q5_K_M, 1, "bge-small"));
  EXPECT_EQ(q5->tensor("blk.0.attn_q.weight")->type, TensorType::Q5_1);
  EXPECT_EQ(q5->tensor("blk.2.ffn_down.weight")->type, TensorType::Q5_K);
}

}  // namespace
}  // namespace infer::model
