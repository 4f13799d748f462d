// describe_layers: each architecture's layer description against the specs' table (spec/architectures.md
// §4, architectures-more.md), on the real reference files; the loader binding exactly the tensors the
// description runs; the sliding-window layers; the RoPE parameters; and the run checks both backends share.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "model/batch_check.h"
#include "model/layer_recipe.h"
#include "model/model.h"
#include "reference_data.h"
#include "support/data_dirs.h"

namespace infer::test {
namespace {

using model::FeedForwardKind;
using model::LayerRecipe;
using model::NormPlacement;
using model::RopeKind;

struct Expected {
  std::string file;
  NormPlacement norm;
  bool qk_norm;
  RopeKind rope;
  bool post_block_norms;
  FeedForwardKind ffn;
};

// The specs' differences between the architectures, one line each.
const std::vector<Expected>& spec_table() {
  static const std::vector<Expected> table = {
      {"tiny-llama-f32", NormPlacement::PreRms, false, RopeKind::AdjacentPairs, false, FeedForwardKind::SwiGlu},
      {"tiny-qwen2-f16", NormPlacement::PreRms, false, RopeKind::Halves, false, FeedForwardKind::SwiGlu},
      {"tiny-qwen3-f32", NormPlacement::PreRms, true, RopeKind::Halves, false, FeedForwardKind::SwiGlu},
      {"tiny-phi3-f32", NormPlacement::PreRms, false, RopeKind::Halves, false, FeedForwardKind::SwiGlu},
      {"tiny-gemma3-f32", NormPlacement::PreRms, true, RopeKind::Halves, true, FeedForwardKind::GeGlu},
      {"tiny-qwen3moe-f32", NormPlacement::PreRms, true, RopeKind::Halves, false, FeedForwardKind::Experts},
      {"tiny-bert-f32", NormPlacement::PostLayerNorm, false, RopeKind::None, false, FeedForwardKind::GeluUp},
  };
  return table;
}

TEST(LayerRecipe, EveryArchitectureMatchesTheSpecs) {
  INFER_REQUIRE_DIR(reference_dir());
  for (const Expected& e : spec_table()) {
    const auto m = model::Model::load(reference_model_path(e.file));
    const model::ModelRecipe& r = m->recipe();
    ASSERT_EQ(r.layers.size(), size_t(m->hparams().n_layer)) << e.file;
    for (const LayerRecipe& l : r.layers) {
      EXPECT_EQ(l.norm, e.norm) << e.file;
      EXPECT_EQ(l.qk_norm, e.qk_norm) << e.file;
      EXPECT_EQ(l.rope, e.rope) << e.file;
      EXPECT_EQ(l.post_block_norms, e.post_block_norms) << e.file;
      EXPECT_EQ(l.ffn, e.ffn) << e.file;
    }
    EXPECT_EQ(r.embedding_layernorm(), e.norm == NormPlacement::PostLayerNorm) << e.file;
    EXPECT_EQ(r.final_rmsnorm(), e.norm == NormPlacement::PreRms) << e.file;
    EXPECT_EQ(r.rope(), e.rope != RopeKind::None) << e.file;
  }
}

// The loader reads the description too: a layer has the norms, post-norms and experts its description
// runs and no others, so neither backend meets a step without its weights.
TEST(LayerRecipe, TheLoaderBindsWhatTheDescriptionRuns) {
  INFER_REQUIRE_DIR(reference_dir());
  for (const Expected& e : spec_table()) {
    const auto m = model::Model::load(reference_model_path(e.file));
    for (size_t i = 0; i < m->layers().size(); ++i) {
      const model::LayerWeights& L = m->layers()[i];
      const LayerRecipe& r = m->recipe().layers[i];
      const std::string where = e.file + " layer " + std::to_string(i);
      const bool pre = r.norm == NormPlacement::PreRms;
      EXPECT_EQ(L.attn_norm != nullptr, pre) << where;
      EXPECT_EQ(L.ffn_norm != nullptr, pre) << where;
      EXPECT_EQ(L.attn_out_norm != nullptr && L.layer_out_norm != nullptr, !pre) << where;
      EXPECT_EQ(L.q_norm != nullptr && L.k_norm != nullptr, r.qk_norm) << where;
      EXPECT_EQ(L.post_attn_norm != nullptr && L.post_ffn_norm != nullptr, r.post_block_norms) << where;
      const bool experts = r.ffn == FeedForwardKind::Experts;
      EXPECT_EQ(L.router.data != nullptr && L.gate_exps.data != nullptr, experts) << where;
      EXPECT_EQ(L.w_gate.data != nullptr, r.ffn == FeedForwardKind::SwiGlu || r.ffn == FeedForwardKind::GeGlu) << where;
    }
    EXPECT_EQ(m->output_norm() != nullptr, m->recipe().final_rmsnorm()) << e.file;
    EXPECT_EQ(m->embd_norm() != nullptr, m->recipe().embedding_layernorm()) << e.file;
  }
}

// Gemma3's local layers: il % pattern < pattern − 1 sees the last n_swa positions, with its own RoPE
// base; the others see every earlier position (spec architectures-more.md §1). No other architecture
// has a window.
TEST(LayerRecipe, SlidingWindowLayersFollowThePattern) {
  INFER_REQUIRE_DIR(reference_dir());
  for (const Expected& e : spec_table()) {
    const auto m = model::Model::load(reference_model_path(e.file));
    const model::HParams& hp = m->hparams();
    const model::ModelRecipe& r = m->recipe();
    int local = 0;
    for (int l = 0; l < hp.n_layer; ++l) {
      const bool expect_local = hp.n_swa > 0 && l % hp.swa_pattern < hp.swa_pattern - 1;
      EXPECT_EQ(r.layers[size_t(l)].local(), expect_local) << e.file << " layer " << l;
      EXPECT_EQ(r.layers[size_t(l)].window, expect_local ? hp.n_swa : 0) << e.file << " layer " << l;
      local += expect_local;
    }
    if (e.ffn == FeedForwardKind::GeGlu) {
      EXPECT_GT(local, 0) << "the gemma3 file has local layers";
      EXPECT_LT(local, hp.n_layer) << "and global ones";
    } else {
      EXPECT_EQ(local, 0) << e.file;
    }
  }
}

TEST(LayerRecipe, RopeParamsOfGlobalAndLocalLayers) {
  INFER_REQUIRE_DIR(reference_dir());
  const auto gemma = model::Model::load(reference_model_path("tiny-gemma3-f32"));
  const model::HParams& hp = gemma->hparams();
  const float factors[1] = {2.f};
  const kernels::RopeParams global = model::rope_params(hp, gemma->recipe(), factors, false);
  const kernels::RopeParams local = model::rope_params(hp, gemma->recipe(), factors, true);
  EXPECT_TRUE(global.neox);
  EXPECT_TRUE(local.neox);
  EXPECT_EQ(global.freq_base, hp.rope_freq_base);
  EXPECT_EQ(global.freq_scale, hp.rope_freq_scale);
  EXPECT_EQ(global.freq_factors, factors);
  EXPECT_EQ(local.freq_base, hp.rope_freq_base_swa);
  EXPECT_NE(local.freq_base, global.freq_base) << "the file gives the local layers their own base";
  EXPECT_EQ(local.freq_scale, 1.f);
  EXPECT_EQ(local.freq_factors, nullptr);
  EXPECT_EQ(global.n_rot, hp.n_rot);
  const auto llama = model::Model::load(reference_model_path("tiny-llama-f32"));
  EXPECT_FALSE(model::rope_params(llama->hparams(), llama->recipe(), nullptr, false).neox);
}

// check_run, which both backends call first: rows that want outputs need a buffer for them.
TEST(LayerRecipe, RunChecksRefuseMissingOutputBuffers) {
  INFER_REQUIRE_DIR(models_dir());
  const auto m = model::Model::load(models_dir() + "/stories260K.gguf");
  const int32_t pages[1] = {0};
  model::Batch batch;
  batch.seqs = {{pages, 1}};
  batch.rows = {{0, 0, 5, true}, {0, 1, 6, false, true}};
  std::vector<int> out_rows;
  std::vector<float> logits(size_t(m->hparams().n_vocab) * 2), hidden(size_t(m->hparams().n_embd) * 2);
  auto error = [&](const float* l, const float* h) -> std::string {
    try {
      model::check_run(m->hparams(), batch, 16, 1, 4, out_rows, l, h);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error(nullptr, nullptr).find("no logits or hidden buffer"), std::string::npos);
  EXPECT_NE(error(logits.data(), nullptr).find("no hidden buffer"), std::string::npos);
  EXPECT_EQ(error(logits.data(), hidden.data()), "");
  EXPECT_EQ(out_rows, (std::vector<int>{0, 1}));
  batch.rows[1].want_hidden = false;
  EXPECT_EQ(error(logits.data(), nullptr), "");
  EXPECT_EQ(model::check_run(m->hparams(), batch, 16, 1, 4, out_rows, logits.data(), nullptr), 1);
}

}  // namespace
}  // namespace infer::test
