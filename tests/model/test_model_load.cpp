// Model::load: every tensor bound by name and shape, views into the mapping, tied output, and
// errors that name the missing, mis-shaped or unexpected tensor.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "forward_harness.h"
#include "gguf_variant.h"
#include "model/model.h"
#include "support/data_dirs.h"

namespace infer::test {
namespace {

std::string stories() { return models_dir() + "/stories260K.gguf"; }

std::string load_error(const GgufVariant& v, const std::string& tag) {
  const auto src = gguf::File::open(stories());
  TempGguf tmp(*src, v, tag);
  try {
    model::Model::load(tmp.path());
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(ModelLoad, WeightsAreViewsIntoTheMapping) {
  INFER_REQUIRE_DIR(models_dir());
  const auto m = model::Model::load(stories());
  const gguf::File& f = m->file();
  EXPECT_EQ(m->token_embd().data, f.tensor("token_embd.weight")->data);
  EXPECT_EQ(m->output().data, f.tensor("output.weight")->data);
  EXPECT_EQ(static_cast<const void*>(m->output_norm()), f.tensor("output_norm.weight")->data);
  ASSERT_EQ(m->layers().size(), 5u);
  const auto& L = m->layers()[3];
  EXPECT_EQ(L.wq.data, f.tensor("blk.3.attn_q.weight")->data);
  EXPECT_EQ(L.wk.n_out, 32);
  EXPECT_EQ(L.w_down.n_in, 172);
  EXPECT_EQ(L.w_down.n_out, 64);
  EXPECT_EQ(static_cast<const void*>(L.ffn_norm), f.tensor("blk.3.ffn_norm.weight")->data);
  EXPECT_EQ(L.bq, nullptr);
  EXPECT_EQ(L.q_norm, nullptr);
  EXPECT_EQ(m->weight_bytes(), 292800u * 4);
}

TEST(ModelLoad, Qwen2BindsBiasesAndQwen3BindsQkNorms) {
  INFER_REQUIRE_DIR(reference_dir());
  const auto q2 = model::Model::load(reference_dir() + "/models/tiny-qwen2-q8_0.gguf");
  for (const auto& L : q2->layers()) {
    EXPECT_NE(L.bq, nullptr);
    EXPECT_NE(L.bk, nullptr);
    EXPECT_NE(L.bv, nullptr);
    EXPECT_EQ(L.wq.type, gguf::TensorType::Q8_0);
  }
  const auto q3 = model::Model::load(reference_dir() + "/models/tiny-qwen3-f32.gguf");
  for (const auto& L : q3->layers()) {
    EXPECT_NE(L.q_norm, nullptr);
    EXPECT_NE(L.k_norm, nullptr);
    EXPECT_EQ(L.wq.n_out, 512);  // n_head · head_dim, wider than n_embd
    EXPECT_EQ(L.wo.n_in, 512);
  }
}

TEST(ModelLoad, ActiveWeightBytesCountOnlyTheUsedExpertsShare) {
  INFER_REQUIRE_DIR(reference_dir());
  const auto moe = model::Model::load(reference_dir() + "/models/tiny-qwen3moe-f32.gguf");
  // 2 layers x 3 stacks of 8 experts [256, 256] in F32, of which 2 run per token
  const uint64_t stacks = 2 * 3 * 8 * 256 * 256 * 4;
  EXPECT_EQ(moe->active_weight_bytes(), moe->weight_bytes() - stacks + stacks * 2 / 8);
  INFER_REQUIRE_DIR(models_dir());
  const auto dense = model::Model::load(stories());
  EXPECT_EQ(dense->active_weight_bytes(), dense->weight_bytes());
}

TEST(ModelLoad, MissingTensorIsAnErrorNamingIt) {
  INFER_REQUIRE_DIR(models_dir());
  GgufVariant v;
  v.drop_tensors.insert("blk.2.ffn_up.weight");
  EXPECT_EQ(load_error(v, "missing"), "tensor blk.2.ffn_up.weight: missing");
}

TEST(ModelLoad, MisShapedTensorIsAnErrorNamingIt) {
  INFER_REQUIRE_DIR(models_dir());
  const auto src = gguf::File::open(stories());
  GgufVariant v;
  // attn_k is [64, 32]; put attn_q's [64, 64] bytes in its place.
  v.put_tensors.push_back({"blk.1.attn_k.weight", gguf::TensorType::F32, {64, 64}, src->tensor("blk.1.attn_q.weight")->data});
  EXPECT_EQ(load_error(v, "shape"), "tensor blk.1.attn_k.weight: has shape [64, 64], expected [64, 32]");
}

TEST(ModelLoad, UnexpectedTensorIsRefused) {
  INFER_REQUIRE_DIR(models_dir());
  const auto src = gguf::File::open(stories());
  GgufVariant v;
  v.put_tensors.push_back({"blk.0.attn_qkv.weight", gguf::TensorType::F32, {64, 64}, src->tensor("blk.0.attn_q.weight")->data});
  const std::string e = load_error(v, "extra");
  EXPECT_NE(e.find("tensor blk.0.attn_qkv.weight: not used"), std::string::npos) << e;
}

TEST(ModelLoad, MissingQwen3NormIsAnError) {
  INFER_REQUIRE_DIR(reference_dir());
  const auto src = gguf::File::open(reference_dir() + "/models/tiny-qwen3-q8_0.gguf");
  GgufVariant v;
  v.drop_tensors.insert("blk.0.attn_k_norm.weight");
  TempGguf tmp(*src, v, "qwen3-norm");
  try {
    model::Model::load(tmp.path());
    FAIL() << "loaded without attn_k_norm";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "tensor blk.0.attn_k_norm.weight: missing");
  }
}

TEST(ModelLoad, NoOutputWeightMeansTiedToTokenEmbedding) {
  INFER_REQUIRE_DIR(models_dir());
  const auto src = gguf::File::open(stories());
  GgufVariant v;
  v.drop_tensors.insert("output.weight");
  TempGguf tmp(*src, v, "tied");
  const auto m = model::Model::load(tmp.path());
  EXPECT_TRUE(m->hparams().tied_output);
  EXPECT_EQ(m->output().data, m->token_embd().data);
  EXPECT_EQ(m->output().n_out, 512);
  ForwardHarness h(*m, 1, 1, 8);
  const auto logits = h.feed(0, {1, 403});
  EXPECT_EQ(logits.size(), 2u);
}

TEST(ModelLoad, NotAGgufFileIsAClearError) {
  EXPECT_THROW(model::Model::load("/nonexistent/model.gguf"), std::runtime_error);
}

}  // namespace
}  // namespace infer::test
